"""B7 (BENCHMARKS.md): external Filippov cross-checks from nosnoc's examples.

nosnoc's oscillator (switching on the circle |x| = 1 at t = 1, exact solution ``X_SOL``; flowlib runs it in
log-polar coordinates, where the circle is a line) and the relay feedback system of Piiroinen & Kuznetsov (2008,
eq. 32; starts on its switching surface and alternates sliding and free flight; reference: exact event-by-event
mpmath solution).
"""

import pytest

from benchmarks import bench
from benchmarks.harness import check, run

EXPECTED = {
    ("B7-osc", bench.SCIPY_RESTART): {"OK"},
    ("B7-osc", bench.SCIPY_NAIVE): {"OK"},
    ("B7-osc", bench.HEYOKA_NAIVE): {"SILENT-WRONG"},
    ("B7-osc", bench.HEYOKA_EVENTS): {"OK"},
    ("B7-relay", bench.SCIPY_RESTART): {"LIVELOCK"},
    ("B7-relay", bench.SCIPY_NAIVE): {"STALL"},
    ("B7-relay", bench.HEYOKA_NAIVE): {"SILENT-WRONG"},
    ("B7-relay", bench.HEYOKA_EVENTS): {"SILENT-WRONG"},
}


@pytest.mark.benchmark(group="B7")
@pytest.mark.parametrize("case_id", ["B7-osc", "B7-relay"])
def test_flowlib(benchmark, case_id):
    result = run(benchmark, case_id, bench.FLOWLIB)
    check(result, "OK", state_tol=1e-12, event_tol=1e-12)


@pytest.mark.benchmark(group="B7")
@pytest.mark.parametrize("case_id, method", list(EXPECTED))
def test_peer(benchmark, case_id, method):
    expected = EXPECTED[case_id, method]
    result = run(benchmark, case_id, method, expect_success=expected == {"OK"})
    check(result, expected)
