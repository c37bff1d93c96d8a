"""Smoke run of benchmarks/certify_cost.py on its cheapest case: the measurement runs and its figures are
consistent. The timings are reported by ``python -m benchmarks.certify_cost``, never asserted."""

import pytest

pytest.importorskip("flint")

from benchmarks import certify_cost  # noqa: E402


def test_certification_cost_is_measured_beside_both_flows():
    row = certify_cost.measure("V12")
    assert row["status"] == "certified" and row["events"] == 1
    assert row["float_s"] > 0 and row["mp_s"] > 0 and row["certify_s"] > 0 and row["ratio_mp"] > 0
    assert row["certified_steps"] >= row["float_steps"] > 0
    assert row["event_width"] < 1e-30
    assert "| V12 | 6 | 1 | certified |" in certify_cost.table([row])
