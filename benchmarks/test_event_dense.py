"""Smoke run of benchmarks/event_dense.py (small sizes, short horizons): the measurement runs and its figures are
consistent. The timings themselves are reported by ``python -m benchmarks.event_dense``, never asserted."""

import numpy as np

from benchmarks import event_dense


def test_event_dense_measurement_runs_on_both_cases():
    digits, d0 = event_dense.digits_case(m=6)
    assert digits.X.shape == (360, 64) and set(np.unique(digits.y)) == {-1.0, 1.0}
    wide, w0 = event_dense.wide_case(m=20, n=40, d=5)
    rows = [event_dense.measure("B8-digits", digits, d0, 0.05, 2e-3),
            event_dense.measure("B9-wide", wide, w0, 1e6, 1e-3, max_seconds=0.5)]
    assert rows[0]["status"] == "success" and rows[0]["t"] == 0.05 and rows[0]["gd_iterations"] == 25
    # the small wide case may reach t_end within its half second; the full one stops on its time budget
    assert rows[1]["status"] in ("success", "interrupted") and rows[1]["t"] > 0.0
    for row in rows:
        assert row["gradients_per_step"] > 0.0 and row["ratio"] > 0.0
    assert "| B8-digits |" in event_dense.table(rows)


def test_digit_pairs_are_the_named_digits():
    prob, _ = event_dense.digits_case(m=4, pair=(3, 8))
    from sklearn.datasets import load_digits

    digits = load_digits()
    threes = digits.data[digits.target == 3] / 16.0
    assert prob.X.shape[0] == int(np.sum((digits.target == 3) | (digits.target == 8)))
    assert np.array_equal(prob.X[prob.y > 0], threes)  # the first digit of the pair is labelled +1
