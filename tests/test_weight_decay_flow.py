"""Weight decay in the exact flow: ``theta' = -grad L - lambda theta`` on the trained parameters, the objective
``L + lambda/2 |theta_trained|^2``; checked against a closed form at 40 digits, the exact decay of balancedness, the
energy identity, the 30-digit backend and gradient descent at small steps."""

import math

import numpy as np
import pytest
from mpmath import mp, mpf

import flowlib as fl
from flowlib.mp import series

LAMBDA = 0.5


def _closed_form_problem():
    """One neuron, ``a = 1`` frozen, square loss (sum), no bias: sample 2 starts inactive and is activated at
    ``t_c`` while the decay pulls ``w_2`` up from -3; the field is affine in each cell."""
    X = np.array([[1.0, 0.0], [1.0, 1.0]])
    y = np.array([1.0, 3.0])
    prob = fl.Problem(X, y, loss="square", reduction="sum", bias=False, train_outer=False, weight_decay=LAMBDA)
    return prob, fl.Params(W=[[2.0, -3.0]], b=None, a=[1.0])


def _affine_solution(A, b, w0, t):
    """``w(t)`` of ``w' = -A w + b`` (mpmath matrices)."""
    star = mp.lu_solve(A, b)
    return star + mp.expm(-A * t) * (w0 - star)


def _closed_form(t):
    """The state at ``t`` and the crossing time, at 40 digits."""
    lam = mpf(LAMBDA)
    x1, x2 = mp.matrix([1, 0]), mp.matrix([1, 1])
    A1 = x1 * x1.T + lam * mp.eye(2)
    b1 = x1 * 1
    A2 = A1 + x2 * x2.T
    b2 = b1 + x2 * 3
    w0 = mp.matrix([2, -3])

    def z2(s):
        w = _affine_solution(A1, b1, w0, s)
        return w[0] + w[1]

    t_c = mp.findroot(z2, (mpf(0.5), mpf(3)), solver="anderson")
    wc = _affine_solution(A1, b1, w0, t_c)
    w = _affine_solution(A1, b1, w0, t) if t < t_c else _affine_solution(A2, b2, wc, t - t_c)
    return w, t_c


def test_flow_with_weight_decay_matches_the_closed_form_through_a_crossing():
    prob, p0 = _closed_form_problem()
    res = fl.gradient_flow(prob, p0, t_end=6.0)
    assert res.status == "success"
    assert [ev.kind for ev in res.events] == ["cross"]
    with mp.workdps(40):
        w_end, t_c = _closed_form(mpf(6))
        w_mid, _ = _closed_form(mpf(1))
        assert abs(res.events[0].t - float(t_c)) <= 1e-14 * float(t_c)
        np.testing.assert_allclose(res.states[-1][0, :2], [float(w_end[0]), float(w_end[1])], rtol=0, atol=1e-14)
        np.testing.assert_allclose(res.states_at(1.0).reshape(-1)[:2], [float(w_mid[0]), float(w_mid[1])], rtol=0, atol=1e-14)
        # the reported loss is the objective: L + lambda/2 |w|^2 (a is not trained)
        f = [max(w_end[0], 0) * 1, max(w_end[0] + w_end[1], 0)]
        objective = ((f[0] - 1) ** 2 + (f[1] - 3) ** 2) / 2 + mpf(LAMBDA) / 2 * (w_end[0] ** 2 + w_end[1] ** 2)
        assert res.loss[-1] == pytest.approx(float(objective), rel=1e-14)
        assert res.loss_at(6.0) == pytest.approx(float(objective), rel=1e-14)


def _sliding_problem(bias, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((10, 3))
    y = np.sign(X[:, 0] + 0.5 * X[:, 1] - 0.2)
    prob = fl.Problem(X, y, loss="logistic", reduction="mean", bias=bias, train_outer=True, weight_decay=0.05)
    m = 5
    W = 0.5 * rng.standard_normal((m, 3))
    b = 0.1 * rng.standard_normal(m) if bias else None
    a = np.sign(rng.standard_normal(m)) * np.sqrt(np.sum(W**2, axis=1) + (0 if b is None else b**2))
    return prob, fl.Params(W=W, b=b, a=a)


@pytest.mark.parametrize("bias", [False, True])
def test_balancedness_decays_exactly_like_exp_minus_two_lambda_t(bias):
    """``d/dt (a_j^2 - |w_j|^2 - b_j^2) = -2 lambda (a_j^2 - |w_j|^2 - b_j^2)``: the gradient terms cancel as without
    decay, the decay terms scale every square; an initialisation 0.3 off balance decays by ``e^(-2 lambda t)``."""
    prob, p0 = _sliding_problem(bias)
    p0 = fl.Params(W=p0.W, b=p0.b, a=p0.a * 1.3)
    res = fl.gradient_flow(prob, p0, t_end=20.0)
    assert res.status == "success" and len(res.events) > 3
    start = p0.balancedness()
    for t in (5.0, 20.0):
        state = np.asarray(res.states_at(t)).reshape(p0.W.shape[0], -1)
        got = fl.Params.unpacked(state, bias).balancedness()
        np.testing.assert_allclose(got, start * math.exp(-2 * prob.weight_decay * t), rtol=1e-12,
                                   atol=1e-14 * np.max(np.abs(start)))
    # the summary's diagnostic measures the drift from that law, not from the initial value
    assert res.balancedness_drift <= 1e-13
    plain = fl.Problem(prob.X, prob.y, loss="logistic", reduction="mean", bias=bias, train_outer=True)
    assert fl.gradient_flow(plain, p0, t_end=20.0).balancedness_drift <= 1e-13


@pytest.mark.parametrize("bias", [False, True])
def test_energy_identity_and_inclusion_hold_for_the_regularised_objective(bias):
    prob, p0 = _sliding_problem(bias)
    res = fl.gradient_flow(prob, p0, t_end=20.0)
    assert res.status == "success" and len(res.events) > 3
    assert res.energy_residual <= 1e-12
    assert res.inclusion_residual <= 1e-12
    # the loss decreases and includes the penalty
    assert np.all(np.diff(res.loss) <= 1e-15)
    final = fl.Params.unpacked(res.states[-1], bias)
    f = final.a @ np.maximum(final.W @ prob.X.T + (0 if final.b is None else final.b[:, None]), 0)
    penalty = np.sum(final.W**2) + np.sum(final.a**2) + (0 if final.b is None else np.sum(final.b**2))
    expected = np.mean(np.logaddexp(0, -prob.y * f)) + prob.weight_decay / 2 * penalty
    assert res.loss[-1] == pytest.approx(expected, rel=1e-13)


def test_thirty_digits_take_the_same_events_and_agree():
    prob, p0 = _sliding_problem(True, seed=5)
    ref = fl.gradient_flow(prob, p0, t_end=8.0)
    hi = fl.gradient_flow(prob, p0, t_end=8.0, dps=30)
    assert ref.status == hi.status == "success"
    assert [(ev.kind, ev.neuron, ev.sample) for ev in ref.events] == [(ev.kind, ev.neuron, ev.sample)
                                                                      for ev in hi.events]
    np.testing.assert_allclose(np.asarray(hi.states[-1], dtype=float), ref.states[-1], rtol=0, atol=1e-12)
    assert hi.energy_residual <= mpf(10) ** -25
    assert hi.balancedness_drift <= 1e-25
    assert hi.inclusion_residual <= mpf(10) ** -25


def test_gradient_descent_converges_to_the_flow_at_rate_lr():
    prob, p0 = _sliding_problem(False, seed=7)
    flow = fl.gradient_flow(prob, p0, t_end=2.0)
    gaps = []
    for lr in (1e-3, 5e-4):
        gd = fl.gradient_descent(prob, p0, lr, int(round(2.0 / lr)))
        gaps.append(np.max(np.abs(gd.states[-1] - flow.states[-1])))
    assert 1.6 <= gaps[0] / gaps[1] <= 2.4  # first order in lr
    assert gaps[1] <= 1e-3


def test_ensemble_members_equal_single_flows_with_decay():
    prob, p0 = _sliding_problem(True, seed=9)
    inits = fl.random_inits(prob, 4, 3, scheme="he", seed=2)
    ens = fl.ensemble(prob, inits, "flow", t_end=5.0)
    for r in range(3):
        P = inits[r]
        single = fl.gradient_flow(prob, fl.Params.unpacked(P, True), t_end=5.0, dense_output=False)
        np.testing.assert_allclose(ens.final[r], single.states[-1], rtol=0, atol=1e-14)
        assert ens.loss[r] == pytest.approx(single.loss[-1], rel=1e-14)


def test_integer_and_mpf_recurrences_agree_bit_for_bit_with_decay():
    prob, p0 = _sliding_problem(True, seed=11)
    with mp.workdps(35):
        data = series.MPData.from_problem(prob)
        state = [[mpf(float(v)) for v in row] for row in p0.packed()]
        Z = series.preactivations(data, state)
        S = series.slopes(data, [[z > 0 for z in row] for row in Z], [[False] * len(state) for _ in Z])
        constraints = [[] for _ in state]
        fast = series._taylor_integer(data, S, state, 12, constraints, None)
        ref = series._taylor_reference(data, S, state, 12, constraints, None)
        assert all(a == b for Ck, Rk in zip(fast.C, ref.C) for ra, rb in zip(Ck, Rk) for a, b in zip(ra, rb))


@pytest.mark.parametrize("kwargs", [dict(clock="log", t_end=10.0), dict(log_t_end=5.0)])
def test_the_log_clock_is_refused_with_decay(kwargs):
    prob, p0 = _closed_form_problem()
    with pytest.raises(ValueError, match="clock='log'"):
        fl.gradient_flow(prob, p0, **kwargs)


def test_auto_clock_keeps_t_with_decay():
    prob, p0 = _closed_form_problem()
    res = fl.gradient_flow(prob, p0, t_end=1e7, dense_output=False, max_steps=20)
    assert res.status == "max_steps" and res.clock == "t" and res.t[-1] < 1e3


@pytest.mark.parametrize("value", [-1.0, math.nan, math.inf, True, "0.1"])
def test_bad_weight_decay_is_named(value):
    with pytest.raises(ValueError, match="weight_decay"):
        fl.Problem([[1.0]], [1.0], loss="square", bias=False, train_outer=True, weight_decay=value)


def test_ensemble_gd_members_equal_single_descents_with_decay():
    prob, _ = _sliding_problem(True, seed=9)
    inits = fl.random_inits(prob, 4, 3, scheme="he", seed=4)
    ens = fl.ensemble(prob, inits, "gd", lr=0.05, steps=300)
    for r in range(3):
        single = fl.gradient_descent(prob, fl.Params.unpacked(inits[r], True), 0.05, 300)
        assert np.array_equal(ens.final[r], single.states[-1])
        assert ens.loss[r] == single.loss[-1]
