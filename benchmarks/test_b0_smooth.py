"""B0 (BENCHMARKS.md): speed inside one activation pattern, against closed forms.

E1's phase 1 (t = 1.5 < t*) and Smorodinsky et al.'s network to t = 100 (before its kinks). Every method is right here;
the suite records the cost of each (timings are recorded, never asserted).
"""

import pytest

from benchmarks import bench
from benchmarks.harness import check, run

METHODS = [bench.FLOWLIB, bench.SCIPY_RESTART, bench.SCIPY_NAIVE, bench.HEYOKA_NAIVE, bench.HEYOKA_EVENTS]


@pytest.mark.benchmark(group="B0-e1p1")
@pytest.mark.parametrize("method", METHODS)
def test_e1_phase1(benchmark, method):
    result = run(benchmark, "B0-e1p1", method)
    check(result, "OK", state_tol=1e-13 if method == bench.FLOWLIB else 1e-9)


@pytest.mark.benchmark(group="B0-seed0")
@pytest.mark.parametrize("method", METHODS)
def test_seed000(benchmark, method):
    result = run(benchmark, "B0-seed0", method)
    check(result, "OK", state_tol=1e-13 if method == bench.FLOWLIB else 1e-9)


@pytest.mark.benchmark(group="B0-seed0")
def test_seed000_tiny_step_gd(benchmark):
    """GD halves its step from 1e-2 until its final state is within 1e-6 of the closed form at t = 100."""
    result = run(benchmark, "B0-seed0", bench.GD_TINY)
    check(result, "OK", state_tol=bench.GD_TARGET)
    assert result["extra"]["reached_target"] and result["extra"]["lr"] < 1e-2
