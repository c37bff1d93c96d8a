"""``python -m benchmarks``: a quick run on a cheap subset writes the table, ``bench.json`` and ``bench.png``."""

import json

import numpy as np
import pytest

import flowlib as fl
from benchmarks import bench
from benchmarks.peers import heyoka_peer


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    assert bench.main(["--quick", "--out", str(out), "--cases", "B1-one,B3"]) == 0
    return out, json.loads((out / "bench.json").read_text())


def test_json_has_every_row_and_label(quick_run):
    _, payload = quick_run
    rows = payload["rows"]
    methods = {(r["case"], r["method"]) for r in rows}
    peers = [bench.FLOWLIB, bench.SCIPY_RESTART, bench.SCIPY_NAIVE]
    if heyoka_peer.available():
        peers += [bench.HEYOKA_NAIVE, bench.HEYOKA_EVENTS]
    for case in ("B1-one", "B3-twist"):
        assert {(case, m) for m in peers} <= methods
    assert all(r["label"] in bench.LABELS for r in rows)
    labels = {(r["case"], r["method"]): r["label"] for r in rows}
    assert labels["B1-one", bench.FLOWLIB] == labels["B3-twist", bench.FLOWLIB] == "OK"
    assert labels["B3-twist", bench.SCIPY_RESTART] == "LIVELOCK"
    assert labels["B3-twist", bench.SCIPY_NAIVE] == "STALL"
    flow = next(r for r in rows if r["case"] == "B1-one" and r["method"] == bench.FLOWLIB)
    assert flow["ratio"] == 1.0 and flow["state_error"] <= 1e-13 and flow["event_time_error"] <= 1e-13
    assert all(r["ratio"] > 0 for r in rows)


def test_json_records_machine_versions_and_acceptance(quick_run):
    _, payload = quick_run
    assert payload["machine"]["cores"] >= 1 and payload["machine"]["cpu"]
    assert {"python", "numpy", "scipy", "numba", "mpmath", "flowlib", "heyoka"} <= set(payload["versions"])
    assert payload["settings"]["quick"] is True and payload["settings"]["max_nfev"] == 30_000
    assert payload["compile"]["flowlib_warmup_s"] >= 0
    assert "transversal_vs_scipy" in payload["acceptance"] and "nonsmooth_labels" in payload["acceptance"]
    assert payload["command"].startswith("python -m benchmarks --quick")


def test_png_written(quick_run):
    out, _ = quick_run
    png = (out / "bench.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_event_dense_cases_run_in_flowlib_bench(tmp_path, monkeypatch):
    """``--cases B8,B9`` runs only the event-dense cases (here on small stand-ins of the two problems): their table
    and ``bench.json``'s ``event_dense`` rows, no peer table and no figure."""
    from benchmarks import event_dense

    assert event_dense.select(None) == ["B8-digits", "B9-wide"]
    assert event_dense.select(["b8"]) == ["B8-digits"] and event_dense.select(["B1"]) == []
    assert bench.select_cases(True, ["B8", "B9"]) == []
    digits, wide, measure = event_dense.digits_case, event_dense.wide_case, event_dense.measure
    monkeypatch.setattr(event_dense, "digits_case", lambda: digits(m=4))
    monkeypatch.setattr(event_dense, "wide_case", lambda: wide(m=10, n=30, d=4))
    monkeypatch.setattr(event_dense, "measure", lambda name, prob, p0, t_end, lr, max_seconds=None: measure(
        name, prob, p0, min(t_end, 0.05), lr, None if max_seconds is None else 0.3))
    assert bench.main(["--quick", "--out", str(tmp_path), "--cases", "B8,B9"]) == 0
    payload = json.loads((tmp_path / "bench.json").read_text())
    assert payload["rows"] == [] and not (tmp_path / "bench.png").exists()
    rows = payload["event_dense"]
    assert [r["case"] for r in rows] == ["B8-digits", "B9-wide"]
    assert rows[0]["t"] == 0.05 and rows[0]["gd_iterations"] == 25 and rows[0]["status"] == "success"
    assert all(r["steps"] > 0 and r["ratio"] > 0 for r in rows)
    assert "| B8-digits |" in (tmp_path / "bench.txt").read_text()


def test_case_selection_and_labels():
    assert [c.id for c in bench.select_cases(True, ["B4"])] == ["B4-e4-m5", "B4-e4-m50"]
    assert [c.id for c in bench.select_cases(False, ["B4"])] == ["B4-e4-m5", "B4-e4-m50", "B4-e4-m200"]
    assert [c.id for c in bench.select_cases(True, ["b2-v10"])] == ["B2-v10-m40"]
    ref = bench.Reference([1.0, 2.0], [], "test")
    ok = bench.Outcome([1.0, 2.0], 1.0, [], "ok")
    assert bench.label(ok, ref, 1.0) == "OK"
    assert bench.label(bench.Outcome([1.0, 2.1], 1.0, [], "ok"), ref, 1.0) == "SILENT-WRONG"
    assert bench.label(bench.Outcome([1.0, 2.0], 0.5, [], "nfev_budget"), ref, 1.0) == "STALL"
    storm = [(0.5, 0, "flip")] * bench.LIVELOCK_EVENTS
    assert bench.label(bench.Outcome([1.0, 2.0], 0.5, storm, "event_budget"), ref, 1.0) == "LIVELOCK"
    assert bench.label(bench.Outcome([float("nan"), 2.0], 0.5, [], "failed: boom"), ref, 1.0) == "ABORT"


@pytest.mark.parametrize("name, make, crossings", [("b1-os", bench.os_transversal, 9),
                                                    ("b1-wide", bench.os_wide, 85),
                                                    ("b1-wider", lambda: bench.os_wide(24), 379)])
def test_b1_oracle_references_are_stored(name, make, crossings):
    """B1's 40-digit oracle answers are on file for exactly these problems (recomputing takes 10 s, 93 s and
    23 min)."""
    from benchmarks.peers import stored

    prob, p0 = make()
    ref = stored.load(name, prob, p0, 10.0)
    assert ref is not None and ref.status == "success" and ref.dps == 40
    assert len(ref.events) == crossings and all(kind == "cross" for _, kind, _, _ in ref.events)


def test_os_wide_sizes():
    assert [bench.os_wide(m)[0].n for m in (12, 24)] == [16, 32]
    with pytest.raises(ValueError, match="m must be 12 or 24"):
        bench.os_wide(6)


def test_heyoka_missing_message(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_heyoka(name, *args, **kwargs):
        if name == "heyoka":
            raise ImportError("no heyoka")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_heyoka)
    with pytest.raises(ImportError, match=r"pip install 'flowlib\[heyoka\]'"):
        heyoka_peer.import_heyoka()
    assert not heyoka_peer.available()
    assert bench.settings(True).heyoka is False


def test_stored_references_match_inputs_within_rounding_not_bits():
    """A stored reference is found for inputs that differ from the stored ones in the last bits (as generated data
    do across CPUs and BLAS builds), hands back the exact stored inputs, and is refused for a different problem."""
    from benchmarks.peers import stored

    prob, p0 = bench.os_transversal()
    ref = stored.load("b1-os", prob, p0, 10.0)
    assert ref is not None
    X = ref.problem.X * (1.0 + 4.0 * np.finfo(np.float64).eps)  # a few ulps off, as on another machine
    nudged = fl.Problem(X, ref.problem.y, loss=prob.loss, reduction=prob.reduction, bias=prob.bias,
                        train_outer=prob.train_outer)
    again = stored.load("b1-os", nudged, p0, 10.0)
    assert again is not None and np.array_equal(again.problem.X, ref.problem.X)
    pinned_prob, pinned_p0 = stored.pinned("b1-os", nudged, p0, 10.0)
    assert np.array_equal(pinned_prob.X, ref.problem.X) and np.array_equal(pinned_p0.packed(), ref.params0.packed())
    moved = fl.Problem(ref.problem.X * (1.0 + 1e-9), ref.problem.y, loss=prob.loss, reduction=prob.reduction,
                       bias=prob.bias, train_outer=prob.train_outer)
    assert stored.load("b1-os", moved, p0, 10.0) is None
    other_loss = fl.Problem(ref.problem.X, ref.problem.y, loss="exp", reduction=prob.reduction, bias=prob.bias,
                            train_outer=prob.train_outer)
    assert stored.load("b1-os", other_loss, p0, 10.0) is None
    assert stored.load("b1-os", prob, p0, 11.0) is None
    assert stored.pinned("b1-os", moved, p0, 10.0)[0] is moved


def test_flowlib_bench_delegates_to_the_harness(monkeypatch, capsys):
    """``flowlib bench`` runs :func:`benchmarks.bench.main` from the checkout flowlib is imported from."""
    import sys

    from flowlib import cli

    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "--help"])
    assert exc.value.code == 0
    assert "python -m benchmarks" in capsys.readouterr().out


def test_flowlib_bench_outside_a_checkout(monkeypatch, capsys):
    """Without the repository's ``benchmarks`` package (an installed wheel), ``flowlib bench`` says where the
    benchmarks are and exits 2."""
    import sys

    from flowlib import cli

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setitem(sys.modules, "benchmarks", None)
    assert cli.main(["bench", "--quick"]) == 2
    err = capsys.readouterr().err
    assert "benchmarks/" in err and "python -m benchmarks" in err and err.count("\n") == 1
