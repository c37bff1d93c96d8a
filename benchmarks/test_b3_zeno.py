"""B3 (BENCHMARKS.md, E3): Zeno, the twisting oscillator x1' = x2, x2' = -2 sgn x1 - sgn x2.

From (1, 0) the switches accumulate at t_acc = 2 sqrt 2 + (2/3) sqrt 6 = 4.46142028660164; x = 0 afterwards.
flowlib detects the accumulation, logs a zeno event and continues from the limit; SciPy's restart loop livelocks
at t_acc, its naive RHS stalls (or aborts) there, heyoka escapes (67 switches, then |x| = 15; the naive RHS at once).
"""

import pytest

from benchmarks import bench
from benchmarks.harness import check, run

#: the naive RHS stalls at t_acc on the quick budget; with the full one DOP853 gives up there ("required step
#: size is less than spacing between numbers": ABORT)
EXPECTED = {bench.SCIPY_RESTART: {"LIVELOCK"}, bench.SCIPY_NAIVE: {"STALL", "ABORT"},
            bench.HEYOKA_NAIVE: {"SILENT-WRONG"}, bench.HEYOKA_EVENTS: {"SILENT-WRONG"}}


@pytest.mark.benchmark(group="B3")
def test_flowlib(benchmark):
    result = run(benchmark, "B3-twist", bench.FLOWLIB)
    check(result, "OK", state_tol=1e-10, event_tol=1e-8)  # |x(10)| and |t_zeno - t_acc|


@pytest.mark.benchmark(group="B3")
@pytest.mark.parametrize("method", list(EXPECTED))
def test_peer_fails(benchmark, method):
    result = run(benchmark, "B3-twist", method, expect_success=False)
    check(result, EXPECTED[method])
