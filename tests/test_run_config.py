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
from flowlib import cli, config, pipeline

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



# ----- size-aware output: short printed tables, compact saved results, sizes on the last line --------------------
def _run(capsys, argv) -> tuple[int, list]:
    status = cli.main(argv)
    return status, capsys.readouterr().out.splitlines()


def _table_rows(lines) -> list:
    """The rows of the GD-against-flow event table (after its header line)."""
    start = next(k for k, line in enumerate(lines) if line.startswith("kind "))
    rows = []
    for line in lines[start + 1:]:
        if not line.split() or line.split()[0] not in ("cross", "slide_start", "slide_end", "stick", "tie", "zeno"):
            break
        rows.append(line)
    return rows, lines[start + 1 + len(rows)] if start + 1 + len(rows) < len(lines) else ""


def test_single_run_defaults_are_short_and_compact(capsys, tmp_path):
    """seed001 --quick: 1133 step boundaries and 1095 events. The printed table stops after TABLE_ROWS rows, the
    flow is saved without dense output and with at most MAX_RECORDS states, and the last line gives the sizes."""
    status, lines = _run(capsys, ["run", "seed001-linear-teachers", "--quick", "--out", str(tmp_path)])
    assert status == 0
    rows, after = _table_rows(lines)
    flow = fl.load(tmp_path / "flow.npz")
    assert len(rows) == pipeline.TABLE_ROWS
    more = int(after.split()[1])
    assert after.startswith("... ") and more == flow.n_events - pipeline.TABLE_ROWS > 0
    assert len(lines) <= 20 + pipeline.TABLE_ROWS
    # the compact file: bounded states, no coefficients, the events and the end state of the run in full
    cfg = config.load("seed001-linear-teachers", quick=True)
    full = fl.gradient_flow(cfg.problem, cfg.params0, **cfg.flow)
    m, d = cfg.inits.shape[1], cfg.problem.d
    records = pipeline.default_records(m, d)
    assert records == min(pipeline.MAX_RECORDS, pipeline.MAX_STATE_NUMBERS // (m * (d + 2)))
    assert len(full.t) > records and len(flow.t) == records and flow.coefficients is None
    assert flow.t[0] == full.t[0] and flow.t_final == full.t_final
    assert np.array_equal(flow.states[-1], full.states[-1]) and _same_events(flow.events, full.events)
    assert set(flow.t) <= set(full.t)
    assert abs(flow.energy_residual - full.energy_residual) <= 1e-14
    assert flow.options["compact"] == {"states_kept": records, "states_of": len(full.t),
                                       "dense_output_dropped": True}
    # size bound: the kept states, times, losses, energies and events, plus a fixed allowance for the metadata
    numbers = records * (m * (d + 2) + 3) + 2 * flow.n_events
    size = (tmp_path / "flow.npz").stat().st_size
    assert size <= 8 * numbers + 4 * flow.n_events * 8 + 64_000
    assert size < 8 * full.coefficients.size / 4  # well below what the dense output alone takes
    assert "saved compact: flow.npz" in lines[-2] and f"no dense output, {records} of {len(full.t)} states" in lines[-2]
    _check_last_line(lines[-1], tmp_path)


def _same_events(mine, theirs) -> bool:
    """Equal events (a NaN multiplier, that of a crossing, equals NaN)."""
    fields = [[(e.t, e.kind, e.neuron, e.sample, e.side) for e in events] for events in (mine, theirs)]
    multipliers = [np.array([e.multiplier for e in events], dtype=float) for events in (mine, theirs)]
    return fields[0] == fields[1] and np.array_equal(*multipliers, equal_nan=True)


def _check_last_line(line, folder):
    """``wrote a.npz (N kB), ... K plots (...) and run.json to FOLDER/ in S s``, sizes as run.json records them."""
    record = json.loads((folder / "run.json").read_text())
    assert line.startswith("wrote ") and line.endswith(" s") and f" to {folder}/ in " in line
    for path, size in record["bytes"].items():
        assert Path(path).stat().st_size == size
        if path.endswith(".npz"):
            assert f"{Path(path).name} ({pipeline.human_size(size)})" in line
    plots = [p for p in record["written"] if p.endswith(".png")]
    if plots:
        total = sum(record["bytes"][p] for p in plots)
        assert f"{len(plots)} plot{'s' if len(plots) > 1 else ''} ({pipeline.human_size(total)})" in line


SMALL_PAR = """
[problem]
example = "linear_teachers_par"
args = {{ k = 3, leak = 0.1, scale = 1e-3, n_per_class = 10 }}
[flow]
t_end = 50.0
[gd]
lr = 0.5
steps = 100
[output]
plots = ["gd_vs_flow"]
{extra}
"""


def test_full_output_and_records(capsys, tmp_path):
    """table = "full" prints every row; save = "full" keeps everything; records bounds a compact save."""
    path = tmp_path / "par.toml"
    path.write_text(SMALL_PAR.format(extra='table = "full"\nsave = "full"'))
    status, lines = _run(capsys, ["run", str(path), "--out", str(tmp_path / "full")])
    assert status == 0
    flow, gd = fl.load(tmp_path / "full" / "flow.npz"), fl.load(tmp_path / "full" / "gd.npz")
    rows, after = _table_rows(lines)
    assert len(rows) == flow.n_events > pipeline.TABLE_ROWS and not after.startswith("...")
    assert flow.coefficients is not None and len(gd.iterations) == 101
    assert not any(line.startswith("saved compact") for line in lines)
    path.write_text(SMALL_PAR.format(extra="records = 7"))
    status, lines = _run(capsys, ["run", str(path), "--out", str(tmp_path / "small")])
    assert status == 0
    small_flow, small_gd = fl.load(tmp_path / "small" / "flow.npz"), fl.load(tmp_path / "small" / "gd.npz")
    assert len(small_flow.t) == 7 and small_flow.coefficients is None and _same_events(small_flow.events, flow.events)
    assert np.array_equal(small_flow.states[[0, -1]], flow.states[[0, -1]])
    assert np.array_equal(small_gd.iterations, np.unique(np.round(np.linspace(0, 100, 7)).astype(int)))
    assert np.array_equal(small_gd.states, gd.states[small_gd.iterations]) and small_gd.flips == gd.flips
    assert len(_table_rows(lines)[0]) == pipeline.TABLE_ROWS
    # the command line overrides the file (records then does not apply)
    status, lines = _run(capsys, ["run", str(path), "--out", str(tmp_path / "cli"), "--table", "full", "--save",
                                  "full"])
    assert status == 0 and len(_table_rows(lines)[0]) == flow.n_events
    assert fl.load(tmp_path / "cli" / "flow.npz").coefficients is not None


def test_ensemble_output_is_counts_and_loss_quantiles(capsys, tmp_path):
    path = tmp_path / "he.toml"
    path.write_text(HE_GD_CONFIG.format(count=60))
    status, lines = _run(capsys, ["run", str(path), "--out", str(tmp_path / "short")])
    assert status == 0 and len(lines) <= 12
    ens = fl.load(tmp_path / "short" / "gd-ensemble.npz")
    (line,) = [q for q in lines if q.startswith("final loss over")]
    values = np.quantile(ens.loss, pipeline.LOSS_QUANTILES)
    assert line == (f"final loss over 60 members: min {values[0]:.6g}, 10% {values[1]:.6g}, 50% {values[2]:.6g}, "
                    f"90% {values[3]:.6g}, max {values[4]:.6g}")
    assert any(", ".join(f"{k} {v}" for k, v in ens.counts().items()) in q for q in lines)
    _check_last_line(lines[-1], tmp_path / "short")
    assert "1 chunk folder for resuming" in lines[-1]
    status, lines = _run(capsys, ["run", str(path), "--out", str(tmp_path / "full"), "--table", "full"])
    members = [q for q in lines if q.split()[:1] and q.split()[0].isdigit()]
    assert status == 0 and len(members) == 60
    assert [q.split()[1] for q in members] == list(ens.status)


@pytest.mark.parametrize("extra, field", [('table = "long"', "output.table"), ("save = 1", "output.save"),
                                          ("records = 1", "output.records"), ('save = "full"\nrecords = 5',
                                                                              "output.records"),
                                          ('[quick]\noutput = { table = "wide" }', "quick.output.table")])
def test_bad_output_options_are_one_line_errors(capsys, tmp_path, extra, field):
    path = tmp_path / "bad.toml"
    path.write_text(SMALL_PAR.format(extra=extra))
    with pytest.raises(ValueError, match=f"{path}.*{field}"):
        config.load(path)
    assert cli.main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and str(path) in err and field in err


def test_records_is_refused_for_an_ensemble(capsys, tmp_path):
    path = tmp_path / "he.toml"
    path.write_text(HE_GD_CONFIG.format(count=4) + "records = 10\n")
    with pytest.raises(ValueError, match=f"{path}: output.records applies to a single run"):
        config.load(path)


@pytest.mark.parametrize("flag", ["--table", "--save"])
def test_bad_command_line_output_options(capsys, tmp_path, flag):
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "seed002-early-alignment", flag, "wide", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and flag in err


def test_default_records_bounds_the_numbers():
    assert pipeline.default_records(20, 2) == pipeline.MAX_RECORDS
    assert pipeline.default_records(1000, 100) == 2
    for m, d in [(1, 1), (50, 10), (500, 30)]:
        records = pipeline.default_records(m, d)
        assert records == pipeline.MAX_RECORDS or records * m * (d + 2) <= pipeline.MAX_STATE_NUMBERS


def test_human_sizes():
    assert [pipeline.human_size(n) for n in (0, 999, 1000, 22_400, 999_499, 999_500, 1_234_567, 2 * 10**9)] == [
        "0 B", "999 B", "1 kB", "22 kB", "999 kB", "1.0 MB", "1.2 MB", "2.0 GB"]
