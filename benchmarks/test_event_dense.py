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
        assert row["gradients_per_step"] > 0.0 and row["ratio"] > 0.0 and row["restart_gradients"] > 0.0
    assert "| B8-digits |" in event_dense.table(rows)


def test_digit_pairs_are_the_named_digits():
    prob, _ = event_dense.digits_case(m=4, pair=(3, 8))
    from sklearn.datasets import load_digits

    digits = load_digits()
    threes = digits.data[digits.target == 3] / 16.0
    assert prob.X.shape[0] == int(np.sum((digits.target == 3) | (digits.target == 8)))
    assert np.array_equal(prob.X[prob.y > 0], threes)  # the first digit of the pair is labelled +1


def test_an_exact_restart_counts_two_products_per_order_over_the_contributing_columns():
    digits, _ = event_dense.digits_case(m=6)
    # the digits 0 and 1 have pixels that are 0 on every image, which the products leave out (no bias column)
    nc = int(np.sum(np.any(digits.X != 0.0, axis=0)))
    assert nc < digits.d
    products = event_dense.restart_products(digits, 6, order=3)
    assert [kind for kind, _, _ in products] == ["Z", "Z", "R", "R", "R", "T"]
    assert products[0][1:] == ((360, nc), (nc, 6))
    assert products[2][1:] == ((6, 360), (360, nc))
    assert products[5][1:] == ((360, 6), (6, nc))
    assert len(event_dense.restart_products(digits, 6, order=5)) == 10
    wide, _ = event_dense.wide_case(m=7, n=30, d=4)  # Gaussian data: every column contributes
    assert event_dense.restart_products(wide, 7, order=3)[0][1:] == ((30, 4), (4, 7))


def test_the_sweep_plot_and_table_show_the_restart_floor(tmp_path):
    row = {"case": "digits m=20", "status": "success", "t": 0.5, "events": 10, "steps": 9, "flow_s": 1.0,
           "gd_iterations": 250, "gd_s": 0.5, "ratio": 2.0, "gradient_ms": 0.1, "per_event_ms": 0.4,
           "gradients_per_event": 4.0, "restart_gradients": 1.5, "gradients_per_step": 4.4}
    rows = [row, {**row, "case": "digits m=50"}, {**row, "case": "teacher n=m=125"}]
    assert "| 4.0 | 1.5 | 4.4 |" in event_dense.table(rows)
    path = tmp_path / "event_dense.png"
    event_dense.plot(rows, path)
    assert path.stat().st_size > 10_000
