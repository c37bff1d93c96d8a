"""The flow against closed-form solutions (mpmath at 40 digits), through transversal crossings.

Square loss with a fixed outer layer is affine in each cell, ``w' = -M_s w + c_s`` with
``M_s = sum_i a^2 s_i^2 x_i x_i^T`` and ``c_s = sum_i a s_i y_i x_i`` (sum reduction), solved exactly by the
exponential of the augmented matrix ``[[-M_s, c_s], [0, 0]]``. The one-dimensional exp and logistic flows have
closed forms too.
"""

import math

import mpmath as mp
import pytest

import flowlib as fl
from flowlib import examples

DPS = 40


def affine_phase(X, y, slopes, a, w0, t):
    """w(t) for the cell with the given slopes (square loss, sum, no bias, fixed a), at DPS digits."""
    d = len(w0)
    aug = mp.zeros(d + 1, d + 1)
    for xi, yi, s in zip(X, y, slopes):
        xi = [mp.mpf(float(v)) for v in xi]
        for p in range(d):
            for q in range(d):
                aug[p, q] -= (a * s) ** 2 * xi[p] * xi[q]
            aug[p, d] += a * s * mp.mpf(float(yi)) * xi[p]
    state = mp.matrix([*w0, 1])
    return (mp.expm(aug * t) * state)[:d]


def crossing_time(X, y, slopes, a, w0, sample, guess):
    x = [mp.mpf(float(v)) for v in X[sample]]
    return mp.findroot(lambda t: mp.fdot(affine_phase(X, y, slopes, a, w0, t), x), guess)


def test_single_leaky_crossing():
    """1-D: w' = -(w - y) while active, w' = -leak (leak w - y) after; crosses at ln((w0 - y) / -y)."""
    leak = 0.1
    prob = fl.Problem(X=[[1.0]], y=[-1.0], loss="square", reduction="sum", activation="leaky_relu", leak=leak,
                      bias=False, train_outer=False)
    res = fl.gradient_flow(prob, fl.Params(W=[[0.5]], b=None, a=[1.0]), 5.0)
    assert res.status == "success"
    t_star = math.log(1.5)
    assert [(e.kind, e.neuron, e.sample, e.side) for e in res.events] == [("cross", 0, 0, -1)]
    assert res.events[0].t == pytest.approx(t_star, rel=1e-15, abs=0)
    with mp.workdps(DPS):
        exact = -1 / mp.mpf(leak) + (1 / mp.mpf(leak)) * mp.exp(-mp.mpf(leak) ** 2 * (5 - mp.log(mp.mpf(1.5))))
        assert abs(res.final.W[0, 0] - exact) <= 1e-14 * abs(exact)


def test_two_crossings_inside_one_step_are_both_found_in_order():
    """Acceptance 2: x_1 = (1, 0), x_2 = (1, 1e-9) cross about 2.5e-10 apart; the step would be ~0.2 long."""
    prob, p0 = examples.two_crossings()
    res = fl.gradient_flow(prob, p0, 2.0)
    assert res.status == "success"
    assert [(e.neuron, e.sample, e.side) for e in res.events] == [(0, 0, -1), (0, 1, -1)]
    t1, t2 = res.events[0].t, res.events[1].t
    leak, X, y = prob.leak, prob.X, prob.y
    with mp.workdps(DPS):
        w0 = [mp.mpf(0.5), mp.mpf(0.3)]
        T1 = crossing_time(X, y, [1, 1], 1, w0, 0, 0.2)
        w1 = affine_phase(X, y, [1, 1], 1, w0, T1)
        T2 = T1 + crossing_time(X, y, [leak, 1], 1, list(w1), 1, 2.5e-10)
        w2 = affine_phase(X, y, [leak, 1], 1, list(affine_phase(X, y, [1, 1], 1, w0, T1)), T2 - T1)
        wf = affine_phase(X, y, [leak, leak], 1, list(w2), 2 - T2)
        assert abs(t1 - T1) <= 1e-15 * T1
        assert abs(t2 - T2) <= 1e-15 * T2
        assert 0 < t2 - t1 < 1e-9
        for q in range(2):
            assert abs(res.final.W[0, q] - wf[q]) <= 1e-13 * max(1, abs(wf[q]))
    # without events, one Taylor step from t1 would have been far longer than the gap
    assert res.t[-1] - res.t[-2] > 1e3 * (t2 - t1)


@pytest.mark.parametrize("a", [0.7, 1.3])
def test_exp_loss_one_neuron(a):
    """x = 1, y = 1, w > 0: w' = a e^{-a w}, so e^{a w(t)} = e^{a w0} + a^2 t."""
    prob = fl.Problem(X=[[1.0]], y=[1.0], loss="exp", reduction="sum", bias=False, train_outer=False)
    w0 = 0.25
    res = fl.gradient_flow(prob, fl.Params(W=[[w0]], b=None, a=[a]), 1000.0, t_eval=[1.0, 10.0, 100.0])
    assert res.status == "success" and res.n_events == 0
    with mp.workdps(DPS):
        for t, state in zip([1.0, 10.0, 100.0, 1000.0], [*res.states_eval, res.states[-1]]):
            exact = mp.log(mp.exp(a * mp.mpf(w0)) + a * a * t) / a
            assert abs(state[0, 0] - exact) <= 1e-13 * exact


def test_logistic_loss_one_neuron_trained_outer_balanced():
    """Balanced a = w, x = 1, y = 1: w' = a sigma(-a w), a' = w sigma(-a w), so u = a w = w^2 solves
    u' = (a^2 + w^2) sigma(-u) = 2 u / (1 + e^u), i.e. (ln u + Ei(u)) / 2 = t + const."""
    prob = fl.Problem(X=[[1.0]], y=[1.0], loss="logistic", reduction="sum", bias=False, train_outer=True)
    w0 = 0.5
    res = fl.gradient_flow(prob, fl.Params(W=[[w0]], b=None, a=[w0]), 50.0)
    assert res.status == "success"
    with mp.workdps(DPS):
        u0 = mp.mpf(w0) ** 2
        F = lambda u: (mp.log(u) + mp.ei(u)) / 2  # noqa: E731
        u_exact = mp.findroot(lambda u: F(u) - F(u0) - 50, 6)
        u = res.final.W[0, 0] * res.final.a[0]
        assert abs(u - u_exact) <= 1e-13 * u_exact
    assert res.balancedness_drift <= 1e-14


def _misclassified_logistic(w0):
    """One neuron ``w`` on ``x = (1, 0)``, ``a = -1`` fixed, ``y = 1``, logistic loss: ``q = y f = -w`` while
    ``w > 0``, so ``w' = -sigma(w)`` and ``w`` reaches the kink (and sticks) at ``t* = w0 + 1 - e^-w0``."""
    prob = fl.Problem([[1.0, 0.0]], [1.0], loss="logistic", reduction="mean", bias=False, train_outer=False)
    return prob, fl.Params(W=[[w0, 0.0]], b=None, a=[-1.0])


@pytest.mark.parametrize("w0", [10.0, 40.0, 100.0, 800.0])
@pytest.mark.parametrize("t_end", [None, 1e8])  # t clock; a horizon far beyond (the log clock)
def test_logistic_misclassified_by_a_large_margin_reaches_its_kink_on_time(w0, t_end):
    """Far from the boundary (|q| > 37) sigma(-q) rounds to 1 and r - r^2 to 0: the residual weights' series used
    to vanish, the rule took the flow for a linear one and stepped to the kink at t = w0 (1 early); past |q| = 745
    their coefficients underflow even when computed as a product, which the logistic loss's radius bounds."""
    prob, p0 = _misclassified_logistic(w0)
    res = fl.gradient_flow(prob, p0, t_end if t_end else w0 + 10.0)
    assert res.status == "success"
    assert [e.kind for e in res.events] == ["stick"]
    with mp.workdps(DPS):
        exact = mp.mpf(w0) + 1 - mp.exp(-w0)
        assert abs(res.events[0].t - exact) <= 1e-13 * exact
    assert res.final.W[0, 0] == 0.0


def test_logistic_misclassified_by_a_large_margin_at_30_digits():
    """The same at 30 digits, where sigma(-q) rounds to 1 past |q| = 69: the kink time to the working precision."""
    prob, p0 = _misclassified_logistic(100.0)
    res = fl.gradient_flow(prob, p0, 110.0, dps=30)
    assert res.status == "success" and [e.kind for e in res.events] == ["stick"]
    with mp.workdps(DPS):
        exact = mp.mpf(101) - mp.exp(-100)
        assert abs(res.events[0].t - exact) <= 1e-27 * exact
