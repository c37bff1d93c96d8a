"""The asymptotic regime: t = 1e300 and ln t = 1e5, margins, directions, extrapolation.

References: the seed-000 closed form (Smorodinsky et al.; docs/design.md, Reference values derived for the checks;
``test_nonsmooth.seed000_exact``,
evaluated with mpmath at 80+ digits, where ``t = e^(1e5)`` is an ordinary number), the SVM (7) of seed 001
(Sarussi, Brutzkus & Globerson, Theorem 6.2) solved here with SciPy, and ``P*`` of seed 004 (Wang & Pilanci, Theorem 4;
closed forms for the data of App. F).
"""

import mpmath as mp
import numpy as np
import pytest

import flowlib as fl
from flowlib import asymptotics, examples
from test_nonsmooth import SEED000_INITS, seed000_exact

ZERO_BIAS = [(1.0, 0.0, -0.5, 0.0), (2.8, 0.0, -0.3, 0.0)]


def _coordinates(packed):
    return [packed[0, 0], packed[0, 1], packed[1, 0], packed[1, 1]]


def _max_relative(got, theta0, t, dps=80):
    with mp.workdps(dps):
        exact, _ = seed000_exact(theta0, t)
        return float(max(abs(mp.mpf(g) - e) / abs(e) for g, e in zip(got, exact)))


# --------------------------------------------------------------------------------------------------------------
# Seed 000: t = 1e100, 1e300 (acceptance 1) and ln t = 1e5 (acceptance 5)
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("theta0", SEED000_INITS + ZERO_BIAS)
def test_seed000_to_1e300_matches_the_closed_form(theta0):
    prob, p0 = examples.gd_rate_network(*theta0)
    res = fl.gradient_flow(prob, p0, 1e300, t_eval=[1e100])
    assert res.status == "success" and res.clock == "log"
    assert res.n_steps < 10_000
    assert _max_relative(_coordinates(res.states_eval[0]), theta0, mp.mpf(10) ** 100) <= 1e-10
    assert _max_relative(_coordinates(res.states[-1]), theta0, mp.mpf(10) ** 300) <= 1e-10
    # L = 1/(2 (A_v + t)) + 1/(2 (A_u + t)) ~ 1/t: ln L(1e300) = -300 ln 10 to double precision
    assert np.isfinite(res.log_loss_at(1e300))
    assert res.log_loss_at(1e300) == pytest.approx(-300 * np.log(10.0), rel=1e-14)
    assert res.energy_residual <= 1e-12


@pytest.mark.parametrize("theta0", SEED000_INITS[:3] + ZERO_BIAS[:1])
def test_seed000_in_log_time_to_ln_t_1e5(theta0):
    prob, p0 = examples.gd_rate_network(*theta0)
    res = fl.gradient_flow(prob, p0, log_t_end=1e5)
    assert res.status == "success"
    assert res.log_t[-1] == pytest.approx(1e5, rel=1e-15)
    assert np.isinf(res.t[-1])  # t = e^(1e5) is past float64: results are indexed by ln t
    with mp.workdps(80):
        assert _max_relative(_coordinates(res.states[-1]), theta0, mp.exp(mp.mpf(10) ** 5)) <= 1e-10
    assert _max_relative(_coordinates(res.states_at(log_t=3e4)[0]), theta0, mp.exp(mp.mpf(3e4))) <= 1e-10
    assert res.log_loss_at(log_t=1e5) == pytest.approx(-1e5, rel=1e-14)
    # steps grow at most linearly in ln t
    assert res.n_steps < 0.2 * 1e5


def test_log_clock_equals_linear_clock_through_events():
    """The two integration variables give the same flow: crossings (orthogonally separable data), sticking
    (seed 000) and sliding (E1, square loss), states and event times."""
    from test_nonsmooth import e1_problem

    cases = [examples.os_logistic(), examples.gd_rate_network(2.0, 3.0, -2.0, 3.1), e1_problem()]
    for (prob, p0), t_end in zip(cases, [200.0, 300.0, 10.0]):
        lin = fl.gradient_flow(prob, p0, t_end, clock="t")
        log = fl.gradient_flow(prob, p0, t_end, clock="log")
        assert lin.status == log.status == "success"
        assert [(e.kind, e.neuron, e.sample, e.side) for e in lin.events] == \
            [(e.kind, e.neuron, e.sample, e.side) for e in log.events]
        for a, b in zip(lin.events, log.events):
            assert abs(a.t - b.t) <= 1e-11 * max(1.0, a.t)
        scale = np.max(np.abs(lin.states[-1]))
        assert np.max(np.abs(lin.states[-1] - log.states[-1])) <= 1e-11 * scale
        assert log.energy_residual <= 1e-11


def test_mpmath_long_horizon_and_the_asymptotic_constant():
    """30 digits to t = 1e300 (closed form to 1e-25), and 60 digits for the two-kink boundary
    x*(t) ~ K / (t ln t) with K = (A_v - A_u) / 2 (acceptance 2: the flow's constant against the closed form)."""
    theta0 = (2.0, 3.0, -2.0, 3.1)
    prob, p0 = examples.gd_rate_network(*theta0)
    res = fl.gradient_flow(prob, p0, 1e300, dps=30)
    assert res.status == "success" and res.clock == "log" and res.n_steps < 100
    with mp.workdps(400):
        exact, _ = seed000_exact(theta0, mp.mpf(1e300))  # the float64 number t_end, not 10^300
        assert max(abs(g - e) / abs(e) for g, e in zip(_coordinates(res.states[-1]), exact)) <= mp.mpf("1e-25")
    deep = fl.gradient_flow(prob, p0, 1e30, dps=60)
    with mp.workdps(100):
        t = mp.mpf(1e30)
        x_star = deep.decision_boundary(t)[0]
        w1, b1, w2, b2 = (mp.mpf(v) for v in theta0)
        A_v = mp.exp(-(w2 - b2)) * mp.cosh(w1 - b1)
        A_u = mp.exp(w1 + b1) * mp.cosh(w2 + b2)
        K = (A_v - A_u) / 2
        assert abs(x_star * t * mp.log(t) / K - 1) <= mp.mpf("1e-25")
        assert abs(K - mp.mpf("2.7344596229579513")) <= mp.mpf("1e-15")


# --------------------------------------------------------------------------------------------------------------
# Seed 000: GD against the flow (acceptance 2)
# --------------------------------------------------------------------------------------------------------------
def test_zero_bias_flow_and_gd_share_the_constant():
    """He setting: no kink is ever reached, v1 = w1 - b1 and u2 = w2 + b2 are frozen for both, and
    x* (ln t + (w1 - w2)/2) -> S* = (w1 + w2)/2 for the flow and for GD (eta = 0.05, iterate k at t = k eta)."""
    theta0, eta = (1.0, 0.0, -0.5, 0.0), 0.05
    prob, p0 = examples.gd_rate_network(*theta0)
    s_star = (theta0[0] + theta0[2]) / 2
    shift = (theta0[0] - theta0[2]) / 2
    flow = fl.gradient_flow(prob, p0, 1e300)
    assert flow.n_events == 0
    for t in (1e100, 1e300):
        assert flow.decision_boundary(t)[0] * (np.log(t) + shift) == pytest.approx(s_star, rel=1e-12)
    k = 10**7
    gd = fl.gradient_descent(prob, p0, eta, k, record_every=k)
    assert gd.n_flips == 0
    x_gd = asymptotics.decision_boundary(prob, gd.states[-1])[0]
    x_gf = flow.decision_boundary(k * eta)[0]
    assert x_gd * (np.log(k * eta) + shift) == pytest.approx(s_star, rel=1e-5)
    assert x_gd == pytest.approx(x_gf, rel=1e-7)


def test_two_kink_gd_overshoots_and_freezes_a_numerator():
    """theta_0 = (2, 3, -2, 3.1): the flow sticks on v1 = 0 and u2 = 0 (S* = 0, x* ~ K/(t ln t)); GD at
    eta = 0.05 overshoots both kinks by O(eta) and freezes (v1 + u2)/2 = 1.56054279e-5 (recomputed in float64 and
    mpmath), so its x* keeps the Theta(1/ln t) rate of Theorem 5.1."""
    theta0, eta = (2.0, 3.0, -2.0, 3.1), 0.05
    prob, p0 = examples.gd_rate_network(*theta0)
    flow = fl.gradient_flow(prob, p0, 1e300)
    assert [(e.kind, e.neuron, e.sample) for e in flow.events] == [("stick", 0, 0), ("stick", 1, 1)]
    final = flow.states[-1]
    # held on both kinks to rounding (a few ulps of |theta| = 345), where GD sits at 9.3e-5 and -6.1e-5
    assert abs(final[0, 0] - final[0, 1]) <= 4e-16 * abs(final[0, 0])
    assert abs(final[1, 0] + final[1, 1]) <= 4e-16 * abs(final[1, 1])
    gd = fl.gradient_descent(prob, p0, eta, 10**6, record_every=10**5)
    assert [(f.k, f.neuron, f.sample, f.side) for f in gd.flips] == [(3855, 0, 0, -1), (3964, 1, 1, -1)]
    frozen = [(s[0, 0] - s[0, 1] + s[1, 0] + s[1, 1]) / 2 for s in gd.states[1:]]
    assert np.ptp(frozen) == 0.0
    assert frozen[-1] == pytest.approx(1.56054279e-5, rel=1e-8)


@pytest.mark.slow
@pytest.mark.long  # 10^9 GD iterations, 3.5 min on 2 cores: CI runs claim 000-margin-rate to 10^7 (quick mode)
def test_two_kink_gd_to_1e9_iterations_keeps_the_log_rate():
    theta0, eta = (2.0, 3.0, -2.0, 3.1), 0.05
    prob, p0 = examples.gd_rate_network(*theta0)
    gd = fl.gradient_descent(prob, p0, eta, 10**9, record_every=10**8)
    s = gd.states[-1]
    x_gd = asymptotics.decision_boundary(prob, s)[0]
    frozen = (s[0, 0] - s[0, 1] + s[1, 0] + s[1, 1]) / 2
    t = 10**9 * eta
    # x*_GD (w1 - w2) = b2 - b1 = frozen + O(1/t) (K/t = 5e-8 here): Theta(1/ln t), while the flow's is K/t
    assert (s[1, 1] - s[0, 1]) == pytest.approx(frozen, rel=1e-2)
    assert x_gd * np.log(t) == pytest.approx(frozen, rel=0.2)
    flow = fl.gradient_flow(prob, p0, t, dps=40)
    with mp.workdps(60):
        # the closed form's x*(t) (x* t ln t = K (1 + O((A_v + A_u)/t)) is 5e-6 from K here)
        w1, b1, w2, b2 = seed000_exact(theta0, mp.mpf(t))[0]
        exact = (b2 - b1) / (w1 - w2)
        assert abs(flow.decision_boundary(t)[0] / exact - 1) <= mp.mpf("1e-20")
        assert abs(exact * t * mp.log(t) / mp.mpf("2.7344596229579513") - 1) <= mp.mpf("1e-5")
        assert x_gd / exact > 100  # GD's boundary is 285 times the flow's at t = 5e7


# --------------------------------------------------------------------------------------------------------------
# Seed 001, PAR example LT-7 (acceptance 3)
# --------------------------------------------------------------------------------------------------------------
def svm7(prob: fl.Problem, leak: float):
    """Program (7) of Sarussi, Brutzkus & Globerson: min |w|^2 + |u|^2 s.t. w.x - leak u.x >= 1 (y = +1),
    u.x - leak w.x >= 1 (y = -1), by the seed-001 validation's QP solver (SLSQP for the support set, then the exact
    KKT solve on it, checked)."""
    from flowlib.validation.seed001_linear_teachers import min_norm_qp

    psi = np.array([np.r_[x, -leak * x] if y > 0 else np.r_[-leak * x, x] for x, y in zip(prob.X, prob.y)])
    z = min_norm_qp(psi, np.r_[1.0, 0.0, -1.0, 0.0])[0]
    return z[:2], z[2:]


def test_par_directions_converge_to_the_svm_like_one_over_log_t():
    prob, p0 = examples.linear_teachers_par()
    w_svm, u_svm = svm7(prob, prob.leak)
    res = fl.gradient_flow(prob, p0, log_t_end=1e5)
    assert res.status == "success"
    assert {e.kind for e in res.events} == {"cross"} and res.events[-1].t < 0.05  # PAR entered early
    log_t = np.array([np.log(1e10), 1e2, 1e3, 1e4, 1e5])
    states = res.states_at(log_t=log_t)
    k = len(states[0]) // 2
    angles = {name: np.array([asymptotics.angle(s[rows, :2].mean(axis=0), ref) for s in states])
              for name, rows, ref in (("w", slice(0, k), w_svm), ("u", slice(k, None), u_svm))}
    for name, values in angles.items():
        exponent = np.polyfit(np.log(log_t), np.log(values), 1)[0]
        assert -1.1 <= exponent <= -0.9, (name, exponent)
        last = states[-1][slice(0, k) if name == "w" else slice(k, None), :2].mean(axis=0)
        assert asymptotics.one_minus_cos(last, w_svm if name == "w" else u_svm) <= 1e-9
    # the normalised margin min y N(x) / |W|_F tends to sqrt(k) / |(w_svm, u_svm)|
    gamma = res.normalized_margin(log_t=log_t)
    limit = np.sqrt(k) / np.linalg.norm(np.r_[w_svm, u_svm])
    assert np.all(np.diff(gamma) > 0) and abs(gamma[-1] - limit) <= 1e-4 * limit


# --------------------------------------------------------------------------------------------------------------
# Seed 004, F1 and F2 (acceptance 4)
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case, p_star", [("F1", 1.28243222467676176), ("F2", 0.733581897125772865)])
def test_convex_geometry_margin_limit(case, p_star):
    prob, p0 = examples.convex_geometry(case)
    res = fl.gradient_flow(prob, p0, log_t_end=1e5)
    assert res.status == "success" and res.balancedness_drift <= 1e-12
    target = 1 / (2 * p_star)
    log_t = np.array([1e3, 1e4, 2.5e4, 5e4, 1e5])
    gap = target - res.normalized_margin(log_t=log_t)
    assert np.all(gap > 0)
    exponent = np.polyfit(np.log(log_t), np.log(gap), 1)[0]
    assert -1.1 <= exponent <= -0.9
    ext = asymptotics.richardson(1 / log_t[-3:], target - gap[-3:], order=2)
    assert abs(ext.limit - target) <= 1e-8
    assert ext.error <= 1e-8


# --------------------------------------------------------------------------------------------------------------
# the tools
# --------------------------------------------------------------------------------------------------------------
def test_richardson_recovers_a_polynomial_limit_and_flags_its_error():
    x = 1 / np.array([10.0, 20.0, 40.0, 80.0])
    values = 0.5 + 2 * x - 3 * x**2 + 7 * x**3
    exact = asymptotics.richardson(x, values, order=3)
    assert exact.limit == pytest.approx(0.5, abs=1e-13) and exact.error > 0
    low = asymptotics.richardson(x, values, order=1)
    assert abs(low.limit - 0.5) > 1e-4 and low.error > 1e-4
    vec = asymptotics.richardson(x, np.stack([values, 2 * values], axis=1), order=3)
    np.testing.assert_allclose(vec.limit, [0.5, 1.0], atol=1e-12)
    with pytest.raises(ValueError, match="order"):
        asymptotics.richardson(x, values, order=4)


def test_margin_direction_and_boundary_on_hand_made_states():
    prob, _ = examples.gd_rate_network(1.0, 0.0, -0.5, 0.0)
    state = np.array([[1.0, 0.2, 1.0], [-0.5, 0.7, -1.0]])
    # f(x) = relu(x + 0.2) - relu(-0.5 x + 0.7): both active on (-0.2, 1.4): f = 1.5 x - 0.5, zero at 1/3
    assert asymptotics.decision_boundary(prob, state)[0] == pytest.approx(1 / 3, rel=1e-15)
    # margins: y f(x) at x = -1: -(0 - 1.2) = 1.2; at x = 1: 1.2 - 0.2 = 1.0; |theta| over (w, b): fixed a
    gamma = asymptotics.normalized_margin(prob, state)[0]
    assert gamma == pytest.approx(1.0 / np.sqrt(1 + 0.04 + 0.25 + 0.49), rel=1e-15)
    scaled = state * np.array([3.0, 3.0, 1.0])  # the trained (w, b) only: 1-homogeneous
    assert asymptotics.normalized_margin(prob, scaled)[0] == pytest.approx(gamma, rel=1e-14)
    d = asymptotics.direction(prob, state)[0]
    assert np.all(d[:, 2] == 0) and np.sum(d**2) == pytest.approx(1.0, rel=1e-15)
    assert asymptotics.one_minus_cos([1.0, 1e-7], [1.0, 0.0]) == pytest.approx(0.5e-14, rel=1e-6)
    with pytest.raises(ValueError, match="loss"):
        asymptotics.normalized_margin(examples.three_points(2)[0], np.zeros((2, 3)))


def test_long_horizon_arguments_and_save_load(tmp_path):
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    with pytest.raises(ValueError, match="exactly one"):
        fl.gradient_flow(prob, p0, 1.0, log_t_end=3.0)
    with pytest.raises(ValueError, match="clock"):
        fl.gradient_flow(prob, p0, 1.0, clock="ln")
    with pytest.raises(ValueError, match="log_t_end"):
        fl.gradient_flow(prob, p0, log_t_end=10.0, clock="t")
    with pytest.raises(ValueError, match="log_t_end"):
        fl.gradient_flow(prob, p0, log_t_end=float("inf"))
    res = fl.gradient_flow(prob, p0, log_t_end=50.0)
    back = fl.load(res.save(tmp_path / "long"))
    assert back.clock == "log"
    np.testing.assert_array_equal(back.s, res.s)
    np.testing.assert_array_equal(back.log_loss, res.log_loss)
    assert back.log_loss_at(log_t=40.0) == res.log_loss_at(log_t=40.0)


def test_mpmath_log_time_to_ln_t_1e5():
    theta0 = (2.0, 3.0, -2.0, 3.1)
    prob, p0 = examples.gd_rate_network(*theta0)
    res = fl.gradient_flow(prob, p0, log_t_end=1e5, dps=30)
    assert res.status == "success" and res.n_steps < 100
    with mp.workdps(60):
        exact, _ = seed000_exact(theta0, mp.exp(mp.mpf(10) ** 5))
        assert max(abs(g - e) / abs(e) for g, e in zip(_coordinates(res.states[-1]), exact)) <= mp.mpf("1e-25")
        assert abs(res.log_t[-1] - 10**5) <= mp.mpf("1e-25") * 10**5
        assert abs(res.log_loss_at(log_t=10**5) + 10**5) <= mp.mpf("1e-20")
