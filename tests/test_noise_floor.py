"""Near a stationary point, rounding noise must not become events.

Seed 003's three points, unbalanced initialisation, square loss: from t ~ 400 three neurons slide on sample 1's
surface with the Filippov multiplier ``s = -(G_0 / G_1) <n_0, n_1> / |n_1|^2``. The residuals decay along the
slowest mode of the sliding configuration, whose ratio gives ``s -> 0.96116`` (interior: the exact flow never
releases the surface). Once the residuals are within a few hundred rounding errors of the outputs, the Taylor
coefficients of the exit polynomials ``a_j G_i (s - 1)`` are dominated by the noise of the state (its stiff mode,
excited at the step's local tolerance), and without a noise floor those polynomials get roots every step: 100,000
``slide_end`` / ``slide_start`` events by t = 2305 (m = 200). With the noise band of :mod:`flowlib.kernels.driver`
the run has no event after t = 411, and once the residuals are rounding the flow coasts to ``t_end``.
"""

import math

import numpy as np
import pytest
from mpmath import mp, mpf

import flowlib as fl
from flowlib import examples
from flowlib.kernels import driver
from flowlib.kernels.constants import CONVERGED_ROUNDINGS, NOISE_BAND
from flowlib.mp import flow as mpflow

K = 16


def unbalanced_three_points(m):
    """Seed 003's claim 003-lemma1-balancedness, flow "B1 unbalanced a ~ N(0, s^2)" (``ctx.seed = 0``)."""
    rng = np.random.default_rng(31)
    prob, p_bal = examples.three_points(m, 1e-3, seed=0)
    return prob, fl.Params(W=p_bal.W, b=p_bal.b, a=1e-3 / math.sqrt(m) * rng.standard_normal(m))


def exit_arrays(p, phi):
    """``Cm``, ``phi`` (one slot) with ``Cm - 1 * phi = p`` (the exit polynomial at ``beta = 1``)."""
    Cm = np.zeros((K + 1, 1))
    Phi = np.zeros((K + 1, 1))
    Phi[: len(phi), 0] = phi
    Cm[: len(phi), 0] = phi
    Cm[: len(p), 0] += p
    return Cm, Phi


def exit_root(p, phi, bound, span, band):
    Cm, Phi = exit_arrays(p, phi)
    return driver._exit_root(Cm, Phi, 0, K - 1, 1.0, bound, span, band, np.empty((6, 64)), np.empty(K + 1),
                             np.empty(K + 1))


# ----- the storm: seed 003, unbalanced ------------------------------------------------------------------------------

def test_three_points_m50_has_no_noise_events_and_coasts():
    # m = 50 shows the storm too: 2,715 events before (1,308 slide_end/slide_start pairs of neuron 18 on sample 1,
    # from t = 785 on), 63 now, the last at t = 365.08
    prob, p0 = unbalanced_three_points(50)
    res = fl.gradient_flow(prob, p0, 4000.0, dense_output=False)
    assert res.status == "success", res.message
    assert res.message.startswith("converged to working precision at t = ")
    assert res.n_events == 63
    assert max(e.t for e in res.events) < 366.0
    assert res.t[-1] == 4000.0 and res.t[-2] < 900.0  # one constant last step
    assert np.all(res.states[-1] == res.states[-2])
    assert res.loss[-1] <= 1e-28
    assert res.energy_residual <= 1e-10
    assert res.balancedness_drift <= 1e-13


@pytest.mark.slow
def test_three_points_m200_reaches_t_end_with_few_events():
    # the run of claim 003-lemma1-balancedness (full mode): before, max_events (100,000) at t = 2304.9 after ~220 s
    prob, p0 = unbalanced_three_points(200)
    res = fl.gradient_flow(prob, p0, 4000.0, dense_output=False)
    assert res.status == "success", res.message
    assert res.t[-1] == 4000.0
    assert res.n_events <= 300
    assert max(e.t for e in res.events) < 500.0
    assert res.energy_residual <= 1e-10
    assert res.balancedness_drift <= 1e-13
    assert res.loss[-1] <= 1e-28


def test_converged_flow_reaches_a_large_t_end_with_bounded_events():
    # neurons sliding on sample 1's surface while the residuals decay to rounding: the flow coasts from there, so
    # t_end = 1e5 costs no more than t_end = 1000 (before: a storm of slide_end/slide_start from t = 772)
    prob, p0 = unbalanced_three_points(20)
    short = fl.gradient_flow(prob, p0, 1000.0, dense_output=False)
    long = fl.gradient_flow(prob, p0, 1e5, dense_output=False)
    for res in (short, long):
        assert res.status == "success", res.message
        assert "converged to working precision" in res.message
        assert res.loss[-1] <= 1e-28
    assert long.n_events == short.n_events <= 40
    assert long.n_steps == short.n_steps
    assert np.array_equal(long.final.packed(), short.final.packed())


def test_exactly_fittable_problem_coasts_in_float64_and_mpmath():
    # f = a relu(w x) fits y = x exactly (a w = 1): the residuals decay exponentially to rounding, then the flow coasts
    prob = fl.Problem([[1.0], [2.0]], [1.0, 2.0], loss="square", reduction="mean", bias=False, train_outer=True)
    p0 = fl.Params(W=[[0.5]], b=None, a=[0.5])
    res = fl.gradient_flow(prob, p0, 1e6, clock="t")
    assert res.status == "success"
    assert "converged to working precision at t = " in res.message
    t_conv = float(res.message.split("at t = ")[1].split(" ")[0])
    assert 1.0 < t_conv < 100.0
    assert res.loss[-1] <= 1e-28
    assert res.params_at(5e5).W[0, 0] == res.final.W[0, 0]
    deep = fl.gradient_flow(prob, p0, 1e6, clock="t", dps=30)
    assert "converged to working precision at t = " in deep.message
    assert deep.loss[-1] <= mpf(10) ** -55
    assert abs(deep.states[-1][0][0] * deep.states[-1][0][2] - 1) <= mpf(10) ** -28


# ----- the rules, one by one ----------------------------------------------------------------------------------------

def test_interior_multiplier_is_not_released_by_noise():
    # s = 0.96 (a_j G_i = 1e-15) with a noise-level slope that puts a root of s - 1 in the step (at tau = 0.4)
    phi = [1e-15]
    p = [-0.04e-15, 1e-16]
    assert exit_root(p, phi, 1.0, 1.0, 0.0) <= 1.0  # without a band: an exit (the storm)
    assert exit_root(p, phi, 1.0, 1.0, 1e-14) == math.inf


def test_tangential_touch_of_the_bound_does_not_release():
    # s - 1 = -(tau - 1/2)^2 + 1e-14: a double root split by 1e-14, an excursion inside a band of 1e-12
    p = [-0.25 + 1e-14, 1.0, -1.0]
    tau = exit_root(p, [1.0], 1.0, 1.0, 0.0)
    assert tau == pytest.approx(0.5 - 1e-7, abs=1e-9)
    assert exit_root(p, [1.0], 1.0, 1.0, 1e-12) == math.inf
    # a genuine exit is located exactly as without a band (also when the step is cut just after it)
    line = [-0.5, 1.0]
    assert exit_root(line, [1.0], 1.0, 1.0, 1e-12) == exit_root(line, [1.0], 1.0, 1.0, 0.0)
    assert exit_root(line, [1.0], 0.5 + 1e-9, 1.0, 1e-12) == exit_root(line, [1.0], 0.5 + 1e-9, 1.0, 0.0) <= 0.5 + 1e-9


def test_multiplier_beyond_the_bound_inside_the_band():
    # s starts 5e-13 beyond 1 (kept: inside the band 1e-12) and moves back inside: no exit (before: the return was
    # taken as an exit); moving further out, it exits where it leaves the band
    assert exit_root([5e-13, -1e-12], [1e-3], 1.0, 1.0, 1e-12) == math.inf
    assert exit_root([5e-13, -1e-12], [1e-3], 1.0, 1.0, 0.0) <= 1.0
    tau = exit_root([5e-13, 1e-12], [1e-3], 1.0, 1.0, 1e-12)
    assert tau == pytest.approx(0.5, rel=1e-8)
    Cm, Phi = exit_arrays([2e-12], [1.0])
    assert driver._outside_band(Cm, Phi, 0, 1.0, 1e-12)
    assert not driver._outside_band(Cm, Phi, 0, 1.0, 4e-12)
    assert not driver._outside_band(Cm, Phi, 0, 1.0, 0.0)


def test_leaving_a_bound_needs_more_than_the_noise():
    # on the bound, moving out at rate 1e-8 over h = 1: beyond STAY_TOL, but within a band of 1e-7
    Cm, Phi = exit_arrays([0.0, 1e-8], [1.0])
    assert driver._leaving_bound(Cm, Phi, 0, 1.0, 1.0, 0.0)
    assert not driver._leaving_bound(Cm, Phi, 0, 1.0, 1.0, 1e-7)


def test_noise_band_of_a_slot():
    # one neuron (a = 2) held on sample 1, active on sample 0: its multiplier is num / den with
    # num = -G_0 <pinv, n_0> and den = G_1 (a divided out); the band is that of G_0 projected plus G_1's, and the
    # state's noise in a relative to |a| on both
    Xa = np.array([[-0.75, 1.0], [-0.5, 1.0]])
    P = np.array([[-1.0, -0.5, 2.0]])
    S = np.array([[1.0], [0.0]])
    Z = Xa @ P[:, :2].T
    G0 = np.array([1e-12, -1e-12])
    gnoise = np.empty(2)
    driver._residual_noise(Xa, np.zeros(2), S, P, Z, np.abs(Xa).sum(axis=1), 2, 0.5, G0, False, 0.0, 1e-13,
                           gnoise)
    assert gnoise[0] == pytest.approx(0.5 * 1e-13 * (2.0 * 1.75 + 0.25))
    assert gnoise[1] == 0.0
    pinv = (Xa[1] / (Xa[1] @ Xa[1]))[None]
    band = driver._slot_noise(Xa, S, P, G0, gnoise, pinv, 0, 1, 0, 1e-13, 1.0)
    proj = pinv[0] @ Xa[0]
    expected = NOISE_BAND * (proj * gnoise[0] + 1e-13 / 2.0 * proj * 1e-12 + 1e-13 / 2.0 * 1e-12)
    assert band == pytest.approx(expected)
    P[0, 2] = 0.0  # a = 0: only the residual weights' noise (here G_0's, which a = 0 leaves 0.25 of)
    driver._residual_noise(Xa, np.zeros(2), S, P, Z, np.abs(Xa).sum(axis=1), 2, 0.5, G0, False, 0.0, 1e-13,
                           gnoise)
    band = driver._slot_noise(Xa, S, P, G0, gnoise, pinv, 0, 1, 0, 1e-13, 1.0)
    assert band == pytest.approx(NOISE_BAND * proj * 0.5 * 1e-13 * 0.25)


def test_converged_is_rounding_of_the_outputs():
    Xa = np.array([[1.0, 1.0], [2.0, 1.0]])
    P = np.array([[0.5, 0.0, 2.0]])  # f = (1, 2)
    S = np.ones((2, 1))
    Z = Xa @ P[:, :2].T
    scale = np.abs(P[:, :2]).max(axis=1)
    assert driver._converged(Xa, np.array([1.0, 2.0]), P, Z, S, False, scale)
    rounding = 2.220446049250313e-16 * (2.0 * 1.0 + 2.0)  # eps (|a| |w x| + |y|) at sample 1
    assert driver._converged(Xa, np.array([1.0, 2.0 + 0.9 * CONVERGED_ROUNDINGS * rounding]), P, Z, S, False, scale)
    assert not driver._converged(Xa, np.array([1.0, 2.0 + 2 * CONVERGED_ROUNDINGS * rounding]), P, Z, S, False,
                                 scale)
    assert not driver._converged(Xa, np.array([1.0, 2.0 + 1e-9]), P, Z, S, False, scale)


def test_mp_rules_mirror_the_kernel():
    class Engine:
        noise = None
        stay = None
        _power_cache = None
        _powers = mpflow._Integrator._powers

    with mp.workdps(30):
        engine = Engine()
        engine.noise = mp.eps ** (mpf(3) / 4)
        engine.stay = mp.eps ** (mpf(9) / 16)
        p = [mpf(-0.25) + mpf(10) ** -25, mpf(1), mpf(-1)]
        phi = [mpf(1), mpf(0), mpf(0)]
        tau = mpflow._Integrator._exit_root(engine, p, phi, mpf(1), mpf(1), mpf(1), mpf(0))
        assert abs(tau - (mpf(1) / 2 - mpf(10) ** -12.5)) <= mpf(10) ** -19
        assert mpflow._Integrator._exit_root(engine, p, phi, mpf(1), mpf(1), mpf(1), mpf(10) ** -20) is None
        assert mpflow._Integrator._exit_root(engine, [mpf(5) * 10 ** -21, mpf(-1) * 10 ** -20], phi, mpf(1), mpf(1),
                                             mpf(1), mpf(10) ** -20) is None
        on = [mpf(0), mpf(10) ** -8]
        assert mpflow._Integrator._leaving_bound(engine, on, phi, mpf(1), mpf(1), mpf(0))
        assert not mpflow._Integrator._leaving_bound(engine, on, phi, mpf(1), mpf(1), mpf(10) ** -7)
        assert mpflow._outward(phi, mpf(1)) == 1 and mpflow._outward(phi, mpf(0)) == -1
