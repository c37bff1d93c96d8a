"""B2 (BENCHMARKS.md): sliding on attracting hyperplanes.

E1 (closed form: slides from t* = 1.5593) and V10 with 40 neurons (quick size; 400 in the full benchmark;
reference: flowlib's mpmath flow at 40 digits, stored). flowlib slides with the Filippov multiplier; the peers
chatter (SciPy: livelock at the entry, or a stall of the naive RHS) or cross into the wrong mode silently (heyoka).
"""

import pytest

from benchmarks import bench
from benchmarks.harness import check, run

V10 = "B2-v10-m40"
#: measured labels; a plain restart loop goes on in the wrong mode after 3 events at t* (SILENT-WRONG),
#: this peer's re-fire guard turns that into a livelock at t*
EXPECTED = {
    ("B2-e1", bench.SCIPY_RESTART): {"LIVELOCK", "SILENT-WRONG"},
    ("B2-e1", bench.SCIPY_NAIVE): {"STALL"},
    ("B2-e1", bench.HEYOKA_NAIVE): {"SILENT-WRONG"},
    ("B2-e1", bench.HEYOKA_EVENTS): {"SILENT-WRONG"},
    (V10, bench.SCIPY_RESTART): {"LIVELOCK", "SILENT-WRONG"},
    (V10, bench.SCIPY_NAIVE): {"STALL"},
    (V10, bench.HEYOKA_NAIVE): {"SILENT-WRONG"},
    (V10, bench.HEYOKA_EVENTS): {"LIVELOCK", "SILENT-WRONG"},
}


@pytest.mark.benchmark(group="B2")
@pytest.mark.parametrize("case_id", ["B2-e1", V10])
def test_flowlib(benchmark, case_id):
    result = run(benchmark, case_id, bench.FLOWLIB)
    check(result, "OK", state_tol=1e-12, event_tol=1e-12)


@pytest.mark.benchmark(group="B2")
@pytest.mark.parametrize("case_id, method", list(EXPECTED))
def test_peer_fails(benchmark, case_id, method):
    result = run(benchmark, case_id, method, expect_success=False)
    check(result, EXPECTED[case_id, method])
