"""Self-checks of the SciPy peers in :mod:`benchmarks.peers.scipy_peer` against closed forms."""

import math

import numpy as np
import pytest
from scipy.linalg import expm

from benchmarks.peers.scipy_peer import ScipyFlowResult, scipy_flow, scipy_flow_naive


def _linear_problem():
    """Square loss, one neuron, a = 1 fixed, no bias, both samples active.

    Returns
    -------
    X, y, W0 : numpy.ndarray
        Problem data.
    w_exact : callable
        ``w_exact(t)``: closed-form solution of the linear flow.
    """
    X = np.array([[1.0, 0.0], [0.5, 0.8660254037844386]])
    y = np.array([-1.0, 1.0])
    W0 = np.array([[1.0, 0.5]])
    # L = 1/2 * sum_i 0.5 (<w, x_i> - y_i)^2, so G_i = (f_i - y_i) / 2 and
    # w' = -sum_i G_i x_i = A w + g with A = -X^T X / 2, g = X^T y / 2.
    A = -0.5 * X.T @ X
    g = 0.5 * X.T @ y
    Ainv_g = np.linalg.solve(A, g)

    def w_exact(t):
        return expm(A * t) @ (W0[0] + Ainv_g) - Ainv_g

    return X, y, W0, w_exact


def test_linear_cell_matches_matrix_exponential():
    X, y, W0, w_exact = _linear_problem()
    t_end = 1.0
    # sanity: both samples stay active on [0, 1], so the flow is linear
    for t in np.linspace(0.0, t_end, 21):
        assert np.all(X @ w_exact(t) > 0.1)
    res = scipy_flow(
        X, y, W0, None, np.ones(1), t_end,
        loss="square", reduction="mean", bias=False, train_outer=False,
    )
    assert isinstance(res, ScipyFlowResult)
    assert res.status == "ok"
    assert res.event_times.shape == (0,)
    assert res.n_restarts == 0
    np.testing.assert_allclose(res.W[0], w_exact(t_end), rtol=0, atol=1e-9)
    np.testing.assert_array_equal(res.b, 0.0)
    np.testing.assert_array_equal(res.a, 1.0)
    assert res.t_final == t_end


def _crossing_closed_form(w0, y, leak, t):
    """Closed form of the one-sample, one-neuron leaky crossing problem.

    Parameters
    ----------
    w0, y, leak : float
        Initial weight (> 0), target (< 0) and leak.
    t : float
        Time.

    Returns
    -------
    w : float
        ``w(t)``.
    t_star : float
        Crossing time of ``w = 0``.
    """
    # active: w' = -(w - y), w = y + (w0 - y) e^{-t}, zero at t* = ln((w0 - y) / -y)
    t_star = math.log((w0 - y) / (-y))
    if t <= t_star:
        return y + (w0 - y) * math.exp(-t), t_star
    # inactive: w' = -(leak w - y) leak, fixed point y / leak, w(t*) = 0
    w_inf = y / leak
    return w_inf - w_inf * math.exp(-leak**2 * (t - t_star)), t_star


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_transversal_crossing(reduction):
    w0, yv, leak, t_end = 0.5, -1.0, 0.1, 2.0
    X = np.array([[1.0]])
    y = np.array([yv])
    w_end, t_star = _crossing_closed_form(w0, yv, leak, t_end)
    res = scipy_flow(
        X, y, np.array([[w0]]), None, np.ones(1), t_end,
        loss="square", reduction=reduction, leak=leak, bias=False,
    )
    assert res.status == "ok"
    assert res.event_times.shape == (1,)
    assert abs(res.event_times[0] - t_star) < 1e-10
    assert res.event_neurons.tolist() == [0]
    assert res.event_samples.tolist() == [0]
    assert res.event_directions.tolist() == [-1]
    assert res.n_restarts == 1
    assert abs(res.W[0, 0] - w_end) < 1e-9


def test_naive_peer_agrees_on_crossing():
    w0, yv, leak, t_end = 0.5, -1.0, 0.1, 2.0
    w_end, _ = _crossing_closed_form(w0, yv, leak, t_end)
    res = scipy_flow_naive(
        np.array([[1.0]]), np.array([yv]), np.array([[w0]]), None, np.ones(1), t_end,
        loss="square", reduction="sum", leak=leak, bias=False,
    )
    assert res.status == "ok"
    assert res.event_times.shape == (0,)
    assert abs(res.W[0, 0] - w_end) < 1e-8
    small = scipy_flow_naive(
        np.array([[1.0]]), np.array([yv]), np.array([[w0]]), None, np.ones(1), t_end,
        loss="square", reduction="sum", leak=leak, bias=False, max_nfev=20,
    )
    assert small.status == "nfev_budget"
    assert small.nfev == 20


def test_random_problem_event_vs_naive_and_budget():
    # seed 1: two transversal events, no sliding (many seeds of this family slide)
    rng = np.random.default_rng(1)
    n, m, d = 6, 4, 3
    X = rng.standard_normal((n, d))
    y = np.sign(rng.standard_normal(n))
    W = rng.standard_normal((m, d))
    b = 0.1 * rng.standard_normal(m)
    a = rng.standard_normal(m)
    kw = dict(loss="logistic", leak=0.05, bias=True, train_outer=True)
    ev = scipy_flow(X, y, W, b, a, 3.0, **kw)
    nv = scipy_flow_naive(X, y, W, b, a, 3.0, **kw)
    assert ev.status == "ok" and nv.status == "ok"
    assert ev.event_times.size >= 1
    assert np.all(np.diff(ev.event_times) >= 0)
    assert ev.n_restarts >= 1
    for got, ref in ((ev.W, nv.W), (ev.b, nv.b), (ev.a, nv.a)):
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-7)
    # final pattern consistent with the recorded events
    active0 = (X @ W.T + b) > 0
    flips = np.zeros((n, m), dtype=int)
    np.add.at(flips, (ev.event_samples, ev.event_neurons), 1)
    assert np.array_equal(active0 ^ (flips % 2 == 1), (X @ ev.W.T + ev.b) > 0)
    capped = scipy_flow(X, y, W, b, a, 3.0, max_events=0, **kw)
    assert capped.status == "event_budget"
    assert capped.event_times.size == 0
    assert capped.t_final < 3.0


def test_sliding_mode_exhausts_budgets():
    """Known limitation of both peers: an attracting sliding surface.

    One ReLU neuron, x1 = (1, 0), y1 = -1, x2 = (1, 1), y2 = 1, square loss,
    reduction "sum", w0 = (0.1, 0.5).  When z_1 = 0 is reached (sample 2
    active, r2 = f2 - y2 in (-1, 0)), dz_1/dt = -1 - r2 < 0 on the active side
    and -r2 > 0 on the inactive side, so the event peer flips the same pair
    back and forth without progress and the naive peer stalls.
    """
    X = np.array([[1.0, 0.0], [1.0, 1.0]])
    y = np.array([-1.0, 1.0])
    W0 = np.array([[0.1, 0.5]])
    kw = dict(loss="square", reduction="sum", leak=0.0, bias=False)
    ev = scipy_flow(X, y, W0, None, np.ones(1), 2.0, max_events=20, **kw)
    assert ev.status == "event_budget"
    assert ev.event_times.size == 20
    assert set(zip(ev.event_samples.tolist(), ev.event_neurons.tolist())) == {(0, 0)}
    assert np.all(ev.event_directions[::2] == -1) and np.all(ev.event_directions[1::2] == 1)
    assert ev.t_final < 2.0
    nv = scipy_flow_naive(X, y, W0, None, np.ones(1), 2.0, max_nfev=5_000, **kw)
    assert nv.status == "nfev_budget"
    assert nv.nfev == 5_000
    assert abs(nv.t_final - ev.t_final) < 1e-6
