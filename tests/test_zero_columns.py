"""Features that are zero on every sample (blank pixels) are left out of the flow's matrix products: the flow on
data padded with such columns is the flow on the data without them, and the padded weights never move."""

import numpy as np
import pytest

import flowlib as fl
from flowlib.kernels import bundles


def _problem(X, y, bias):
    return fl.Problem(X, y, loss="exp", reduction="mean", bias=bias, train_outer=True)


def _case(seed, n=60, d=6, m=12):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sign(X[:, 0] * X[:, 1] + 0.3 * X[:, 2])
    y[y == 0] = 1.0
    W = 0.05 * rng.standard_normal((m, d))
    b = 0.05 * rng.standard_normal(m)
    a = np.where(np.arange(m) % 2 == 0, 1.0, -1.0) * np.sqrt(np.sum(W ** 2, axis=1) + b ** 2)
    return rng, X, y, W, b, a


def test_contributing_columns_keeps_nonzero_features_and_the_bias_column():
    Xa = np.array([[0.0, 1.0, 0.0, -0.0, 2.0, 1.0],
                   [0.0, 0.0, 0.0, 0.0, -1.0, 1.0]])
    Xc, cols = bundles.contributing_columns(Xa, True)
    assert cols.tolist() == [1, 4, 5] and np.array_equal(Xc, Xa[:, [1, 4, 5]]) and Xc.flags.c_contiguous
    Xc, cols = bundles.contributing_columns(Xa, False)  # without a bias the column of ones adds b_j = 0
    assert cols.tolist() == [1, 4]
    full = np.array([[1.0, 2.0, 1.0], [3.0, 0.5, 1.0]])
    Xc, cols = bundles.contributing_columns(full, True)
    assert Xc is full and cols.tolist() == [0, 1, 2]
    Xc, cols = bundles.contributing_columns(np.array([[0.0, 1.0], [0.0, 1.0]]), False)
    assert cols.tolist() == [0]  # never an empty product


@pytest.mark.parametrize("seed, bias", [(0, True), (1, False), (2, True)])
def test_padded_flow_equals_the_flow_without_the_zero_columns(seed, bias):
    rng, X, y, W, b, a = _case(seed)
    n, d = X.shape
    m = W.shape[0]
    where = np.sort(rng.choice(d + 3, size=3, replace=False))  # three blank features among the others
    keep = np.setdiff1d(np.arange(d + 3), where)
    Xp = np.zeros((n, d + 3))
    Xp[:, keep] = X
    Wp = np.empty((m, d + 3))
    Wp[:, keep] = W
    Wp[:, where] = rng.standard_normal((m, 3))  # weights on blank pixels: arbitrary, and they must never move
    bb = b if bias else None
    small = fl.gradient_flow(_problem(X, y, bias), fl.Params(W=W, b=bb, a=a), t_end=8.0, rtol=1e-13)
    padded = fl.gradient_flow(_problem(Xp, y, bias), fl.Params(W=Wp, b=bb, a=a), t_end=8.0, rtol=1e-13)
    assert small.status == padded.status == "success"
    assert len(small.events) >= 3  # the comparison goes through kinks
    assert np.array_equal(small.events.kind, padded.events.kind)
    assert np.array_equal(small.events.neuron, padded.events.neuron)
    assert np.array_equal(small.events.sample, padded.events.sample)
    np.testing.assert_allclose(padded.events.t, small.events.t, rtol=1e-11, atol=0)
    # the padded columns are exactly their initial values at every step; the others follow the small flow
    cols_p = np.concatenate([keep, [d + 3, d + 4]])  # features, then b and a in the packed layout
    assert np.array_equal(padded.states[:, :, where], np.broadcast_to(Wp[:, where], padded.states[:, :, where].shape))
    end_small, end_padded = small.states[-1], padded.states[-1][:, cols_p]
    np.testing.assert_allclose(end_padded, end_small, rtol=0, atol=1e-12 * np.abs(end_small).max())
    np.testing.assert_allclose(padded.loss[-1], small.loss[-1], rtol=1e-11)


def test_states_store_matches_dense_output_states():
    """Without dense output the chunks write their states straight into one growing store; the states are those
    of the run that keeps every coefficient, bit for bit, across many chunks."""
    _, X, y, W, b, a = _case(3, n=30, d=3, m=6)
    prob, p0 = _problem(X, y, True), fl.Params(W=W, b=b, a=a)
    lean = fl.gradient_flow(prob, p0, t_end=60.0, dense_output=False)
    dense = fl.gradient_flow(prob, p0, t_end=60.0, dense_output=True)
    assert lean.status == dense.status == "success" and lean.n_steps > 100
    assert lean.states.shape == dense.states.shape and lean.states.flags.c_contiguous
    assert np.array_equal(lean.states, dense.states)
    assert np.array_equal(lean.t, dense.t)
