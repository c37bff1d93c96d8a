"""Inputs that used to be coerced silently or to fail with the wrong exception: each is a ``ValueError`` naming the
argument, and exact values are never rounded on the way in."""

import numpy as np
import pytest

import flowlib as fl
from flowlib import examples
from flowlib.problem import as_real_array

X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
Y = np.array([1.0, -1.0, 1.0])


@pytest.mark.parametrize("value, match", [
    ([[1.0, 2.0], [3.0]], "X must be a rectangular array"),
    ([[2**53 + 1, 0], [0, 1]], "X holds the integer 9007199254740993"),
    (np.array([[-(2**53) - 1, 0]], dtype=np.int64), "X holds the integer -9007199254740993"),
    (np.array([[2**64 - 1, 0]], dtype=np.uint64), "X holds the integer 18446744073709551615"),
])
def test_real_arrays_refuse_ragged_rows_and_inexact_integers(value, match):
    with pytest.raises(ValueError, match=match):
        as_real_array(value, "X", 2)


def test_large_integers_that_float64_holds_exactly_are_kept_bit_for_bit():
    big = np.array([[2**60, -(2**53)], [2**53, 3]], dtype=np.int64)
    arr = as_real_array(big, "X", 2)
    assert [int(v) for v in arr.ravel()] == [2**60, -(2**53), 2**53, 3]


def test_problem_names_ragged_and_inexact_data():
    with pytest.raises(ValueError, match="^X must be a rectangular"):
        fl.Problem([[1.0, 2.0], [3.0]], [1.0, -1.0], loss="logistic", bias=True, train_outer=False)
    with pytest.raises(ValueError, match="^y holds the integer"):
        fl.Problem(X, np.array([1, 2**53 + 1, 3], dtype=np.int64), loss="square", bias=True, train_outer=False)


@pytest.mark.parametrize("linear, match", [
    ([["1", "2"], ["3", "4"]], "linear must hold real numbers"),
    ([[1.0, 2.0], [3.0]], "linear must be a rectangular array"),
    ([[1.0 + 1j, 0.0]], "linear must hold real numbers"),
    ([[True, False]], "linear must hold real numbers"),
    ([[np.nan, 0.0]], "linear contains NaN"),
    ([1.0, 2.0], "linear must be 2-dimensional"),
])
def test_until_linear_is_a_real_matrix(linear, match):
    with pytest.raises(ValueError, match=match):
        fl.Until(linear=linear, tol=1e-3)


def test_until_linear_keeps_its_values():
    rule = fl.Until(linear=np.array([[1, -2, 0]], dtype=np.int64), tol=0.5)
    assert rule.linear.dtype == np.float64 and rule.linear.tolist() == [[1.0, -2.0, 0.0]]


@pytest.fixture(scope="module")
def small_runs():
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    flow = fl.gradient_flow(prob, p0, 200.0, dense_output=False)
    gd = fl.gradient_descent(prob, p0, lr=0.05, steps=4000)
    return prob, p0, flow, gd


@pytest.mark.parametrize("limit", [-1, 1.5, "3", True])
def test_table_limits_are_none_or_nonnegative_integers(small_runs, limit):
    _, _, flow, gd = small_runs
    with pytest.raises(ValueError, match="limit must be None or an integer >= 0"):
        flow.event_table(limit=limit)
    with pytest.raises(ValueError, match="limit must be None or an integer >= 0"):
        gd.flip_table(limit=limit)


def test_table_limit_counts_the_rows_it_leaves_out(small_runs):
    _, _, flow, gd = small_runs
    assert flow.n_events >= 2 and len(gd.flips) >= 2
    table = flow.event_table(limit=1).splitlines()
    assert len(table) == 3 and table[-1] == f"... {flow.n_events - 1} more"
    assert flow.event_table(limit=0).splitlines()[-1] == f"... {flow.n_events} more"
    assert len(gd.flip_table(limit=np.int64(1)).splitlines()) == 3


@pytest.mark.parametrize("progress", ["no", 0, 1, None, "False"])
def test_progress_must_be_a_bool(small_runs, progress):
    prob, p0, _, _ = small_runs
    with pytest.raises(ValueError, match="progress must be True or False"):
        fl.gradient_flow(prob, p0, 1.0, progress=progress)
    with pytest.raises(ValueError, match="progress must be True or False"):
        fl.gradient_descent(prob, p0, lr=0.05, steps=10, progress=progress)
