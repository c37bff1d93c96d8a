"""Shared by the B0-B7 pytest-benchmark suites: one method of one :mod:`benchmarks.bench` case under pytest-benchmark.

The suites run the quick sizes and budgets of ``python -m benchmarks --quick`` (3e4 RHS evaluations or 10 s per
peer run), time the method with ``benchmark.pedantic`` (flowlib and peers expected to succeed: 5 rounds after one
warm-up round; peers expected to fail: one round, since each runs into its budget), record errors, labels and
costs in ``extra_info``, and return the assessment for the test to assert on. Timings are never asserted.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from benchmarks import bench

#: quick budgets; heyoka runs when installed
CFG = bench.settings(quick=True)
HEYOKA_REASON = "heyoka peers need heyoka.py: pip install 'flowlib[heyoka]'"


@lru_cache(maxsize=None)
def case(case_id: str) -> bench.Case:
    """The quick-mode case with this id."""
    found = [c for c in bench.select_cases(True, [case_id]) if c.id == case_id]
    assert found, f"no case {case_id!r}"
    return found[0]


def run(benchmark, case_id: str, method: str, expect_success: bool = True) -> dict:
    """Time ``method`` on ``case_id`` and assess it against the reference.

    Returns
    -------
    dict
        ``label``, ``state_error``, ``event_time_error``, ``events_match`` (:func:`benchmarks.bench.assess`) plus the
        outcome's ``status``, ``t_reached``, ``n_events``, ``nfev``, ``extra`` and the ``compile_s`` of the peer.
    """
    if method.startswith("heyoka"):
        pytest.importorskip("heyoka", reason=HEYOKA_REASON)
    c = case(case_id)
    ref = c.reference()
    runner, compile_s = c.methods[method](CFG)
    rounds, warmup = (5, 1) if expect_success else (1, 0)
    outcome = benchmark.pedantic(bench.guarded(runner), rounds=rounds, iterations=1, warmup_rounds=warmup)
    grade = bench.assess(c, outcome, ref)
    info = dict(grade, status=outcome.status, t_reached=outcome.t_reached, n_events=len(outcome.events),
                nfev=outcome.nfev, compile_s=compile_s, reference=ref.source)
    benchmark.extra_info.update({k: v for k, v in info.items() if v is None or isinstance(v, (str, int, float, bool))})
    info["extra"] = outcome.extra
    return info


def check(result: dict, labels, state_tol: float | None = None, event_tol: float | None = None) -> None:
    """Assert the label (one of ``labels``) and, when given, the error tolerances."""
    labels = {labels} if isinstance(labels, str) else set(labels)
    assert result["label"] in labels, result
    if state_tol is not None:
        assert result["state_error"] <= state_tol, result
    if event_tol is not None:
        assert result["event_time_error"] is not None and result["event_time_error"] <= event_tol, result
        assert result["events_match"], result
