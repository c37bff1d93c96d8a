"""``flowlib run`` / ``flowlib demo`` on hostile input: every option is used or refused, every error is one line
``flowlib <cmd>: error: ...`` naming the file and the field, exit status 2, never a traceback."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from flowlib import cli, config

SINGLE = "[problem]\nexample = 'gd_rate_network'\nargs = {w1 = 2.0, b1 = 3.0, w2 = -2.0, b2 = 3.1}\n"
ENSEMBLE = SINGLE + "[init]\nscheme = 'he'\nm = 2\ncount = 4\nseed = 6\na = [1.0, -1.0]\n"
FLOW = "[flow]\nt_end = 1.0\n"
GD = "[gd]\nlr = 0.05\nsteps = 10\n"


def _write(tmp_path, text, name="run.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _refused(capsys, tmp_path, text, *words, argv=(), command="run"):
    """``config.load`` raises a ValueError naming the file and ``words``; the CLI prints one line and exits 2."""
    path = _write(tmp_path, text)
    if command == "run" and "--quick" not in argv:
        with pytest.raises(ValueError) as info:
            config.load(path, out=tmp_path / "out")
        assert str(path) in str(info.value)
        assert all(word in str(info.value) for word in words), str(info.value)
    capsys.readouterr()
    status = cli.main([command, str(path), "--out", str(tmp_path / "out"), *argv])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith(f"flowlib {command}: error: ") and err.count("\n") == 1, err
    assert all(word in err for word in words), err
    return err


# ----- options that were silently dropped --------------------------------------------------------------------------
@pytest.mark.parametrize("section, key, value", [("flow", "dps", 30), ("flow", "dps", 15), ("gd", "dps", 30),
                                                 ("gd", "record_every", 5), ("gd", "max_events", 10),
                                                 ("flow", "dense_output", "false")])
def test_ensemble_refuses_single_run_options(capsys, tmp_path, section, key, value):
    text = ENSEMBLE + FLOW + GD
    text = text.replace(f"[{section}]\n", f"[{section}]\n{key} = {value}\n")
    _refused(capsys, tmp_path, text, f"{section}.{key}")


@pytest.mark.parametrize("line, words", [("record_every = -5", ("gd.record_every", "-5")),
                                         ("max_events = 'x'", ("gd.max_events", "'x'")),
                                         ("max_flips = 10", ("gd.max_flips", "renamed gd.max_events")),
                                         ("dps = 15", ("gd.dps", ">= 16")),
                                         ("steps = 2.5", ("gd.steps", "integer")),
                                         ("selection = true", ("gd.selection",))])
def test_gd_values_are_type_checked(capsys, tmp_path, line, words):
    gd = "".join(f"{row}\n" for row in GD.splitlines() if row.split(" = ")[0] != line.split(" = ")[0]) + line + "\n"
    _refused(capsys, tmp_path, SINGLE + gd, *words)
    _refused(capsys, tmp_path, ENSEMBLE + gd, words[0])


@pytest.mark.parametrize("line, words", [("dps = 15", ("flow.dps", ">= 16")), ("dps = 1e7", ("flow.dps",)),
                                         ("rtol = 'abc'", ("rtol",)), ("max_steps = 0", ("flow.max_steps",)),
                                         ("clock = 'lunar'", ("flow.clock",)), ("log_t_end = 5.0", ("t_end",)),
                                         ("dense_output = 1", ("flow.dense_output",))])
def test_flow_values_are_type_checked(capsys, tmp_path, line, words):
    _refused(capsys, tmp_path, SINGLE + FLOW + line + "\n", *words)


def test_flow_dps_is_honoured_in_a_single_run(tmp_path):
    cfg = config.load(_write(tmp_path, SINGLE + FLOW + "dps = 20\n"))
    assert cfg.flow["dps"] == 20 and not cfg.is_ensemble


@pytest.mark.parametrize("text, words", [
    (SINGLE + FLOW + "[init]\nscheme = 'he'\nm = 2\nseed = 'abc'\n", ("init.seed", "'abc'")),
    ("[problem]\nfile = 5\n[init]\nm = 1\n" + FLOW, ("problem.file",)),
    (SINGLE.replace("w1 = 2.0", "w1 = 'two'") + FLOW, ("problem.args.w1",)),
    (SINGLE.replace("w1 = 2.0, ", "") + FLOW, ("problem.args", "w1")),
    ("[problem]\nexample = 'three_points'\nargs = {m = -1}\n" + FLOW, ("problem.args.m", "-1")),
    ("[problem]\nexample = 'three_points'\nargs = {m = 3, colour = 1}\n" + FLOW, ("problem.args.colour",)),
    ("[problem]\nX = [[1.0], [2.0, 3.0]]\ny = [1.0, -1.0]\nbias = false\ntrain_outer = true\n[init]\nm = 1\n" + FLOW, ("problem.X",)),
    ("[problem]\nX = [[1.0]]\ny = [1.0]\nloss = 'exp'\nleak = 0.5\nbias = false\ntrain_outer = true\n[init]\nm = 1\n" + FLOW, ("problem", "leak")),
    (SINGLE + FLOW + "[init]\nm = 2\nb = [0.0, 0.0]\n", ("init.b",)),
    ("[problem]\nX = [[1.0]]\ny = [1.0]\nbias = false\ntrain_outer = true\n[init]\nm = 1\nbias = 'random'\n" + FLOW, ("init.bias",)),
    (SINGLE + FLOW + "[output]\ndir = 5\n", ("output.dir",)),
    (SINGLE + FLOW + "[output]\nplots = 5\n", ("output.plots",)),
    (SINGLE + FLOW + "[output]\nplots = 'pie'\n", ("output.plots", "pie")),
    ("title = 5\n" + SINGLE + FLOW, ("title",)),
    (ENSEMBLE + GD + "[until]\nloss_below = 0.5\nlinear = [[1.0, 1.0]]\ntol = 1e-3\n", ("until", "linear")),
    (ENSEMBLE + GD + "[until]\nloss_below = -1.0\n", ("until.loss_below",)),
    (SINGLE + FLOW + "[quick]\ncolour = 1\n", ("quick.colour",)),
    (SINGLE + FLOW + "[quick]\nflow = { t_end = 'soon' }\n", ("quick.flow.t_end",)),
])
def test_bad_values_are_named(capsys, tmp_path, text, words):
    _refused(capsys, tmp_path, text, *words)


def test_quick_that_is_not_a_table(capsys, tmp_path):
    _refused(capsys, tmp_path, "quick = 5\n" + SINGLE + FLOW, "quick", argv=("--quick",))


def test_quick_without_a_quick_section(capsys, tmp_path):
    _refused(capsys, tmp_path, SINGLE + FLOW, "--quick", argv=("--quick",))


def test_one_plot_name_is_a_list_of_one(tmp_path):
    cfg = config.load(_write(tmp_path, SINGLE + FLOW + "[output]\nplots = 'loss'\n"))
    assert cfg.plots == ("loss",)


# ----- output folders ------------------------------------------------------------------------------------------------
def test_output_dir_that_is_a_file(capsys, tmp_path):
    (tmp_path / "taken").write_text("x")
    path = _write(tmp_path, SINGLE + FLOW + f"[output]\ndir = {json.dumps(str(tmp_path / 'taken'))}\n")
    with pytest.raises(ValueError, match="output.dir.*is a file"):
        config.load(path)
    assert cli.main(["run", str(path)]) == 2
    assert "output.dir" in capsys.readouterr().err
    assert cli.main(["run", str(path), "--out", str(tmp_path / "taken" / "below")]) == 2
    assert "--out" in capsys.readouterr().err


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a user whom permissions bind")
def test_output_dir_that_is_not_writable(capsys, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        _refused(capsys, tmp_path, SINGLE + FLOW + f"[output]\ndir = {json.dumps(str(locked / 'x'))}\n",
                 "not writable")
    finally:
        locked.chmod(0o700)


def test_demo_out_that_is_a_file(capsys, tmp_path):
    (tmp_path / "taken").write_text("x")
    assert cli.main(["demo", "--out", str(tmp_path / "taken")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("flowlib demo: error: --out") and err.count("\n") == 1 and "is a file" in err


# ----- data files ----------------------------------------------------------------------------------------------------
DATA = "[problem]\nfile = '{}'\nloss = 'exp'\nbias = false\ntrain_outer = true\n[init]\nm = 1\n" + FLOW


def test_data_file_that_is_a_directory(capsys, tmp_path):
    (tmp_path / "folder.csv").mkdir()
    _refused(capsys, tmp_path, DATA.format("folder.csv"), "problem.file", "is a directory")


def test_csv_errors_name_the_line_not_the_data(capsys, tmp_path):
    (tmp_path / "bad.csv").write_text("# x1, x2, y\n1.0, 0.5, 1\n-0.5, SECRETVALUE, -1\n")
    err = _refused(capsys, tmp_path, DATA.format("bad.csv"), "bad.csv", "line 3", "column 2")
    assert "SECRETVALUE" not in err and "-0.5" not in err
    (tmp_path / "ragged.csv").write_text("1.0, 0.5, 1\n-0.5, -1\n")
    _refused(capsys, tmp_path, DATA.format("ragged.csv"), "ragged.csv", "line 2", "columns")
    (tmp_path / "latin.csv").write_bytes(b"1.0, 0.5, 1\n\xe9\n")
    _refused(capsys, tmp_path, DATA.format("latin.csv"), "latin.csv", "UTF-8")


def test_csv_with_comments_and_blank_lines_reads_as_before(tmp_path):
    text = "# x1, x2, y\n\n1.0, 0.5, 1  # first\n  -0.5,-1.0,-1\n"
    (tmp_path / "data.csv").write_text(text)
    cfg = config.load(_write(tmp_path, DATA.format("data.csv")))
    expected = np.loadtxt(tmp_path / "data.csv", delimiter=",", comments="#", ndmin=2)
    assert np.array_equal(cfg.problem.X, expected[:, :-1]) and np.array_equal(cfg.problem.y, expected[:, -1])


def test_damaged_npz_data_file(capsys, tmp_path):
    (tmp_path / "data.npz").write_bytes(b"PK\x03\x04 not really a zip")
    _refused(capsys, tmp_path, DATA.format("data.npz"), "data.npz")


# ----- fuzzing config.load ---------------------------------------------------------------------------------------
_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=6)
_SCALARS = (st.integers(-5, 60) | st.sampled_from([0, -1, 2**62, 2**63, -(2**63)]) | st.floats() | _TEXT
            | st.booleans())
_TOML = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(_TEXT, inner, max_size=3), max_leaves=6)


def _toml(value) -> str:
    """``value`` as a TOML value (inline tables and arrays)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return ("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")) if not math.isfinite(value) \
            else repr(value)
    if isinstance(value, str):
        return _key(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{_key(k)} = {_toml(v)}" for k, v in value.items()) + "}"


def _key(text: str) -> str:
    """A TOML basic string (JSON's escapes, astral characters written as they are)."""
    return json.dumps(text, ensure_ascii=False)


def _plausible(folder) -> dict:
    """Values that fit (or nearly fit) each field, so that the fuzzer reaches the checks behind the types."""
    return {
        "problem": {"example": st.sampled_from(list(config.EXAMPLE_FUNCTIONS) + ["nope"]),
                    "args": st.sampled_from([{"w1": 2.0, "b1": 3.0, "w2": -2.0, "b2": 3.1}, {"m": 3}, {"m": -1},
                                             {"k": 2, "n_per_class": 3}, {"case": "F3"}, {}]),
                    "X": st.sampled_from([[[1.0, 0.2], [-0.9, -0.1]], [[1.0]], [[1.0], [2.0, 3.0]]]),
                    "y": st.sampled_from([[1.0, -1.0], [0.5], [1.0]]),
                    "file": st.sampled_from(["data.csv", "bad.csv", "folder", "data.npz", "junk.npz", "missing"]),
                    "loss": st.sampled_from(["exp", "logistic", "square", "cube"]),
                    "reduction": st.sampled_from(["mean", "sum"]), "activation": st.sampled_from(["relu",
                                                                                                "leaky_relu"]),
                    "leak": st.sampled_from([0.0, 0.1, 1.5]), "bias": st.booleans(), "train_outer": st.booleans(),
                    "weight_decay": st.sampled_from([0.0, 1e-3, -1.0])},
        "init": {"W": st.sampled_from([[[0.3, -0.2]], [[0.3]], [[0.1], [0.2]]]), "b": st.sampled_from([[0.0], [1.0]]),
                 "a": st.sampled_from([[1.0], [1.0, -1.0]]), "scheme": st.sampled_from(["he", "normal", "balanced",
                                                                                       "x"]),
                 "m": st.integers(-1, 4), "count": st.integers(0, 5), "seed": st.integers(-1, 9),
                 "scale": st.sampled_from([1.0, 0.0, 1e-3]), "bias": st.sampled_from([0.0, 0.5, "random", "x"]),
                 "norm": st.sampled_from(["gaussian", "sphere", "x"])},
        "flow": {"t_end": st.sampled_from([1.0, -1.0, 0.0]), "log_t_end": st.sampled_from([3.0, 1e9]),
                 "clock": st.sampled_from(["auto", "t", "log", "x"]), "rtol": st.sampled_from([1e-10, 1.0, "1e-20"]),
                 "dps": st.sampled_from([20, 15]), "solution": st.sampled_from(["filippov", "caratheodory"]),
                 "selection": st.sampled_from([0.0, 0.5, 2.0]), "tie": st.sampled_from(["stay", "leave"]),
                 "max_steps": st.integers(-1, 10), "max_events": st.integers(-1, 10), "dense_output": st.booleans()},
        "gd": {"lr": st.sampled_from([0.1, 0.0]), "steps": st.integers(-1, 10), "dps": st.sampled_from([20, 15]),
               "record_every": st.integers(-1, 3), "selection": st.sampled_from([0.0, 0.5]),
               "max_events": st.integers(-1, 3)},
        "until": {"loss_below": st.sampled_from([0.5, -1.0]), "linear": st.sampled_from([[[1.0, 1.0, 0.0],
                                                                                         [1.0, -1.0, 0.0]],
                                                                                        [[1.0]]]),
                  "offset": st.sampled_from([0.0, 1.0]), "tol": st.sampled_from([1e-3, -1.0]),
                  "deadline": st.sampled_from([10.0, -1.0])},
        "output": {"dir": st.sampled_from([str(folder / "out"), str(folder / "afile"), str(folder / "afile" / "x")]),
                   "plots": st.sampled_from([["loss"], "loss", ["pie"], [], "events"]),
                   "table": st.sampled_from(["short", "full", "x"]), "save": st.sampled_from(["compact", "full", 1]),
                   "records": st.integers(0, 3)},
    }


_ARGS = {"w1": 2.0, "b1": 3.0, "w2": -2.0, "b2": 3.1}
#: Valid documents the fuzzer starts from (or from nothing), so that it reaches the checks behind the types.
_BASES = [{},
          {"problem": {"example": "gd_rate_network", "args": _ARGS}, "flow": {"t_end": 1.0}},
          {"problem": {"example": "gd_rate_network", "args": _ARGS},
           "init": {"scheme": "he", "m": 2, "count": 4, "seed": 6, "a": [1.0, -1.0]}, "gd": {"lr": 0.05, "steps": 10},
           "until": {"loss_below": 0.5}},
          {"problem": {"file": "data.csv", "loss": "exp", "bias": False, "train_outer": True}, "init": {"m": 2},
           "flow": {"t_end": 1.0}, "gd": {"lr": 0.1, "steps": 5}}]


@st.composite
def _documents(draw, folder):
    plausible = _plausible(folder)

    def mutate(document, count):
        for _ in range(count):
            name = draw(st.sampled_from(sorted(plausible)), label="section")
            table = document.setdefault(name, {})
            key = draw(st.sampled_from(sorted(config.SCHEMA[name])), label="key")
            action = draw(st.integers(0, 9), label="action")
            if action == 0:
                table.pop(key, None)
            elif action == 1:
                table[draw(_TEXT, label="unknown key")] = draw(_TOML)
            else:
                table[key] = draw(plausible[name][key] if action < 7 else _TOML, label=f"{name}.{key}")
        return document

    document = mutate(copy.deepcopy(draw(st.sampled_from(_BASES))), draw(st.integers(0, 4), label="mutations"))
    if draw(st.booleans()):
        document["quick"] = mutate({}, draw(st.integers(0, 3)))
    if draw(st.integers(0, 9)) == 0:
        document[draw(st.sampled_from(["title", "reference", "problem", "flow", "quick", "colour"]))] = draw(_TOML)
    lines = [f"{_key(k)} = {_toml(v)}" for k, v in document.items() if not isinstance(v, dict)]
    for name, table in document.items():
        if isinstance(table, dict):
            lines += [f"[{_key(name)}]"] + [f"{_key(k)} = {_toml(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def data_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzzconfig")
    (folder / "data.csv").write_text("# x1, x2, y\n1.0, 0.5, 1\n-0.5, -1.0, -1\n")
    (folder / "bad.csv").write_text("1.0, oops, 1\n")
    (folder / "folder").mkdir()
    (folder / "afile").write_text("x")
    (folder / "junk.npz").write_bytes(b"PK\x03\x04junk")
    np.savez(folder / "data.npz", X=np.array([[1.0, 0.5], [-0.5, -1.0]]), y=np.array([1.0, -1.0]))
    return folder


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_config_load(data_folder, data):
    text = data.draw(_documents(data_folder), label="config")
    path = data_folder / "fuzz.toml"
    path.write_text(text)
    try:
        cfg = config.load(path, quick=data.draw(st.booleans(), label="quick"))
    except ValueError as exc:
        assert str(path) in str(exc), str(exc)
        assert "\n" not in str(exc), str(exc)
        event("refused: " + str(exc).split(": ", 1)[1].split(" ")[0])
        return
    event("loaded")
    assert isinstance(cfg, config.RunConfig) and cfg.inits.ndim == 3 and (cfg.flow or cfg.gd)
    if cfg.is_ensemble:
        for section, keys in config.SINGLE_RUN_ONLY.items():
            assert not set(keys) & set(getattr(cfg, section) or {})


# ----- end to end --------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("text, extra", [
    (ENSEMBLE + FLOW.replace("t_end", "dps = 30\nt_end"), ()),
    (SINGLE + GD + "record_every = -5\n", ()),
    ("quick = 5\n" + SINGLE + FLOW, ("--quick",)),
    (SINGLE + FLOW + "[output]\ndir = 5\n", ()),
    ("[problem]\nfile = '.'\n[init]\nm = 1\n" + FLOW, ()),
])
def test_cli_end_to_end_one_line_no_traceback(tmp_path, text, extra):
    path = _write(tmp_path, text)
    proc = subprocess.run([sys.executable, "-m", "flowlib", "run", str(path), *extra], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("flowlib run: error: config ") and str(path) in proc.stderr


@pytest.mark.slow
def test_demo_end_to_end_out_is_a_file(tmp_path):
    (tmp_path / "taken").write_text("x")
    proc = subprocess.run([sys.executable, "-m", "flowlib", "demo", "--out", str(tmp_path / "taken")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parametrize("argv, words", [(["demo", "--t-end", "abc"], ["flowlib demo: error:", "--t-end", "abc"]),
                                         (["nope"], ["flowlib: error:", "invalid choice", "'nope'"]),
                                         (["run", "--bogus"], ["flowlib: error:", "unrecognized arguments: --bogus"])])
def test_argument_errors_are_one_line_and_exit_2(capsys, argv, words):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage:" not in err
    assert all(word in err for word in words)
