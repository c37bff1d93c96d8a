"""``flowlib run CONFIG``: every shipped configuration runs and writes its results and plots; an interrupted
ensemble resumes when the same command is given again; bad configurations are named."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import flowlib as fl
from flowlib import cli, config

SHIPPED = sorted(config.shipped())


def test_one_config_per_paper():
    assert {name[:7] for name in SHIPPED} == {"seed000", "seed001", "seed002", "seed003", "seed004"}


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_config_runs_and_writes_plots(name, tmp_path):
    assert cli.main(["run", name, "--quick", "--out", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["status"] == 0 and record["config"] == name
    written = [Path(p) for p in record["written"]]
    assert all(p.is_file() and p.stat().st_size > 0 for p in written)
    pngs = {p.name for p in written if p.suffix == ".png"}
    cfg = config.load(name, quick=True)
    if cfg.is_ensemble:
        assert {f"{m}-ensemble.png" for m in ("flow", "gd") if getattr(cfg, m)} <= pngs
        for method in ("flow", "gd"):
            if getattr(cfg, method) is not None:
                ens = fl.load(tmp_path / f"{method}-ensemble.npz")
                assert ens.complete and len(ens) == len(cfg.inits) and not np.any(ens.status == "pending")
    else:
        assert {"loss.png"} <= pngs
        assert ("events.png" in pngs) == (cfg.flow is not None)
        assert ("directions.png" in pngs) == (cfg.problem.d == 2 or (cfg.problem.d == 1 and cfg.problem.bias))
        assert ("gd_vs_flow.png" in pngs) == (cfg.flow is not None and cfg.gd is not None)
        if cfg.flow is not None:
            res = fl.load(tmp_path / "flow.npz")
            assert res.status == "success" and res.t_final == cfg.flow["t_end"]


def test_seed000_ensemble_config_matches_the_validation_draws():
    """The shipped He configuration draws exactly the validation claim 000-he-init's initialisations."""
    cfg = config.load("seed000-he-ensemble")
    w = np.random.default_rng(6).normal(0.0, np.sqrt(2.0), size=(10_000, 2))
    assert np.array_equal(cfg.inits[:, :, 0], w)


HE_GD_CONFIG = """
title = "He GD ensemble, for the interrupt test"
[problem]
example = "gd_rate_network"
args = {{ w1 = 1.0, b1 = 0.0, w2 = -1.0, b2 = 0.0 }}
[init]
scheme = "he"
m = 2
count = {count}
seed = 6
a = [1.0, -1.0]
[gd]
lr = 0.05
steps = 1000000000
[until]
loss_below = 0.5
linear = [[1.0, 1.0, 0.0], [1.0, -1.0, 0.0]]
tol = 1e-3
deadline = 500.0
[output]
plots = []
"""


def test_interrupted_run_resumes_with_identical_results(tmp_path):
    path = tmp_path / "he.toml"
    path.write_text(HE_GD_CONFIG.format(count=2000))
    command = [sys.executable, "-m", "flowlib", "run", str(path), "--out"]
    chunks = tmp_path / "a" / "gd-ensemble"
    proc = subprocess.Popen(command + [str(tmp_path / "a")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    deadline = time.monotonic() + 300
    while not list(chunks.glob("chunk_*.npz")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 130, output
    assert "give the same command again to resume" in output
    done = len(list(chunks.glob("chunk_*.npz")))
    assert 1 <= done < 20
    again = subprocess.run(command + [str(tmp_path / "a")], capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    fresh = subprocess.run(command + [str(tmp_path / "b")], capture_output=True, text=True, timeout=600)
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    resumed, whole = fl.load(tmp_path / "a" / "gd-ensemble.npz"), fl.load(tmp_path / "b" / "gd-ensemble.npz")
    for name in fl.ensemble_result.MEMBER_ARRAYS:
        assert np.array_equal(getattr(resumed, name), getattr(whole, name), equal_nan=True), name
    assert resumed.counts() == whole.counts() and whole.counts()["reached"] + whole.counts()["deadline"] == 2000


def test_list_shows_every_shipped_config(capsys):
    assert cli.main(["run", "--list"]) == 0
    shown = capsys.readouterr().out
    assert all(name in shown for name in SHIPPED)


def test_list_shows_where_each_config_file_is(capsys):
    assert cli.main(["run", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name, path in config.shipped().items():
        (row,) = [q for q, line in enumerate(lines) if line.split()[:1] == [name]]
        shown = Path(lines[row + 1].strip())  # the file's path on the line under its name
        assert shown.is_absolute() and shown.is_file() and shown.name == f"{name}.toml"
        assert shown.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("text, key", [
    ("[problem]\nexample = 'gd_rate_network'\nloss = 'exp'\n[flow]\nt_end = 1.0\n", "problem.loss"),
    ("[problem]\nexample = 'gd_rate_network'\nargs = {w1 = 1.0}\n[flow]\nt_end = 1.0\n", "problem.args"),
    ("[problem]\nexample = 'nope'\n[flow]\nt_end = 1.0\n", "problem.example"),
    ("[problem]\nX = [[1.0]]\ny = [1.0]\nbias = false\ntrain_outer = true\n[init]\nm = 1\n[flow]\nt_end = 1.0\nspeed = 2\n", "flow.speed"),
    ("[problem]\nX = [[1.0]]\ny = [1.0]\nbias = false\ntrain_outer = true\n[init]\nm = 1\n", "[flow] or a [gd]"),
    ("[problem]\nX = [[1.0]]\ny = [1.0]\nbias = false\ntrain_outer = true\n[flow]\nt_end = 1.0\n", "init"),
    ("[problem]\nfile = 'missing.csv'\n[init]\nm = 1\n[flow]\nt_end = 1.0\n", "problem.file"),
    ("[problem]\nX = [[1.0]]\ny = [1.0]\nbias = false\ntrain_outer = true\n[init]\nm = 1\n[flow]\nt_end = 1.0\n[output]\nplots = ['pie']\n",
     "output.plots"),
    ("[problem]\nX = [[1.0]]\ny = [1.0]\nbias = false\ntrain_outer = true\n[init]\nm = 1\n[flow]\nt_end = 1.0\n[until]\ntol = 1.0\n", "until"),
    ("colour = 'red'\n", "colour"),
])
def test_bad_configs_are_named(tmp_path, text, key):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=key.replace("[", r"\[").replace("]", r"\]")):
        config.load(path)
    assert cli.main(["run", str(path), "--out", str(tmp_path / "out")]) == 2


def test_data_from_a_csv_file(tmp_path):
    (tmp_path / "data.csv").write_text("# x1, x2, y\n1.0, 0.5, 1\n-0.5, -1.0, -1\n")
    path = tmp_path / "run.toml"
    path.write_text("[problem]\nfile = 'data.csv'\nloss = 'exp'\nbias = false\ntrain_outer = true\n"
                    "[init]\nW = [[0.3, -0.1]]\na = [0.2]\n[flow]\nt_end = 5.0\n")
    cfg = config.load(path, out=tmp_path / "out")
    assert np.array_equal(cfg.problem.X, [[1.0, 0.5], [-0.5, -1.0]]) and np.array_equal(cfg.problem.y, [1, -1])
    assert np.array_equal(cfg.inits[0], [[0.3, -0.1, 0.0, 0.2]])
    assert cli.main(["run", str(path), "--out", str(tmp_path / "out")]) == 0
    res = fl.load(tmp_path / "out" / "flow.npz")
    ref = fl.gradient_flow(cfg.problem, cfg.params0, 5.0)
    assert np.array_equal(res.states[-1], ref.states[-1])

