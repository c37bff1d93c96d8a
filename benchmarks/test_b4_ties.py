"""B4 (BENCHMARKS.md, E4): neurons that die exactly on their last hyperplane.

Boursier & Flammarion's 3 points, balanced init at 1e-3, t = 20, m = 5 and 50 (quick sizes; 200 too in the full
benchmark); reference: flowlib's mpmath flow at 40 digits (stored). heyoka's masks+events peer livelocks when a
dead neuron's event function is identically 0 (m = 50 here; with this draw of the m = 5 initialisation the dying
neuron's pre-activation is not exactly 0 in double and heyoka is right, unlike another random draw).
"""

import pytest

from benchmarks import bench
from benchmarks.harness import check, run

EXPECTED = {
    ("B4-e4-m5", bench.SCIPY_RESTART): {"OK"},
    ("B4-e4-m5", bench.SCIPY_NAIVE): {"OK"},
    ("B4-e4-m5", bench.HEYOKA_NAIVE): {"SILENT-WRONG"},
    ("B4-e4-m5", bench.HEYOKA_EVENTS): {"OK", "LIVELOCK"},
    ("B4-e4-m50", bench.SCIPY_RESTART): {"OK"},
    ("B4-e4-m50", bench.SCIPY_NAIVE): {"STALL"},
    ("B4-e4-m50", bench.HEYOKA_NAIVE): {"SILENT-WRONG"},
    ("B4-e4-m50", bench.HEYOKA_EVENTS): {"LIVELOCK"},
}


@pytest.mark.benchmark(group="B4")
@pytest.mark.parametrize("case_id", ["B4-e4-m5", "B4-e4-m50"])
def test_flowlib(benchmark, case_id):
    result = run(benchmark, case_id, bench.FLOWLIB)
    check(result, "OK", state_tol=1e-12, event_tol=1e-12)


@pytest.mark.benchmark(group="B4")
@pytest.mark.parametrize("case_id, method", list(EXPECTED))
def test_peer(benchmark, case_id, method):
    expected = EXPECTED[case_id, method]
    result = run(benchmark, case_id, method, expect_success=expected == {"OK"})
    check(result, expected)
