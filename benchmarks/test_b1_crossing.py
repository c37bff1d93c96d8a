"""B1 (``notes/integrators.md`` §5): transversal crossings, event accuracy and cost.

One leaky crossing (closed form), two crossings 2.5e-10 apart inside one natural step (closed form), and nine
crossings of a 48-parameter network (independent 40-digit mpmath oracle). flowlib must find every event, in order,
to ~machine precision; SciPy's event restarts find them to its tolerance; heyoka's naive RHS walks through them.
"""

import pytest

from benchmarks.harness import check, run
from flowlib import bench

CASES = ["B1-one", "B1-two", "B1-os"]
EXPECTED = {bench.SCIPY_RESTART: "OK", bench.SCIPY_NAIVE: "OK", bench.HEYOKA_NAIVE: "SILENT-WRONG",
            bench.HEYOKA_EVENTS: "OK"}


@pytest.mark.benchmark(group="B1")
@pytest.mark.parametrize("case_id", CASES)
def test_flowlib(benchmark, case_id):
    result = run(benchmark, case_id, bench.FLOWLIB)
    check(result, "OK", state_tol=1e-13, event_tol=1e-13)


@pytest.mark.benchmark(group="B1")
@pytest.mark.parametrize("method", list(EXPECTED))
@pytest.mark.parametrize("case_id", CASES)
def test_peer(benchmark, case_id, method):
    result = run(benchmark, case_id, method, expect_success=EXPECTED[method] == "OK")
    check(result, EXPECTED[method])
    if method == bench.SCIPY_RESTART:
        # every crossing found, in order (SciPy's restarts reach ~1e-13 on these problems)
        assert result["events_match"] and result["event_time_error"] <= 1e-11, result
