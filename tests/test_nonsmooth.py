"""Nonsmooth dynamics (docs/design.md, Solution concept): sliding, sticking, repelling ties, Carathéodory mode,
degenerate geometry.

References (docs/design.md, Reference values derived for the checks): the closed form of the two-neuron network
of Smorodinsky et al. (validation seed 000), the sliding benchmark E1 (``tests.oracles.exact.e1_exact``), E4 (the
three-point data of Boursier & Flammarion, App. B.1) and V12 (a non-separable two-point example in the setting of
Wang & Pilanci).
"""

import math

import mpmath as mp
import numpy as np
import pytest

import flowlib as fl
from flowlib import examples
from tests.oracles.exact import seed000_exact  # the decoupled closed form (u = w + b, v = w - b)

DPS = 40


# --------------------------------------------------------------------------------------------------------------
# Seed 000: closed form through both kinks, which then stick (Smorodinsky et al.; docs/design.md)
# --------------------------------------------------------------------------------------------------------------
SEED000_INITS = [(2.0, 3.0, -2.0, 3.1), (1.0, 0.2, -1.0, 0.3), (0.5, 1.0, -0.8, 0.1), (1.0, 0.0, 0.5, 1.0),
                 (0.3, 0.8, -0.2, 0.4), (2.5, 0.1, -0.3, 0.05)]


@pytest.mark.parametrize("theta0", SEED000_INITS)
def test_seed000_closed_form_through_the_kinks(theta0):
    prob, p0 = examples.gd_rate_network(*theta0)
    times = [0.5, 3.0, 50.0, 500.0, 5000.0]
    res = fl.gradient_flow(prob, p0, 1e4, t_eval=times)
    assert res.status == "success"
    with mp.workdps(DPS):
        _, expected = seed000_exact(theta0, 0)
        # v1 = 0 is neuron 0 on x = -1 (sample 0); u2 = 0 is neuron 1 on x = +1 (sample 1): both stick
        wanted = sorted((float(t), kind) for kind, t in expected.items())
        got = [(e.t, (e.neuron, e.sample)) for e in res.events]
        assert [e.kind for e in res.events] == ["stick"] * len(wanted)  # no extra events
        assert [pair for _, pair in got] == [{"v": (0, 0), "u": (1, 1)}[k] for _, k in wanted]
        for (t, _), (t_ref, _) in zip(got, wanted):
            assert abs(t - t_ref) <= 1e-12 * t_ref
        for t, packed in zip(times + [1e4], list(res.states_eval) + [res.states[-1]]):
            exact, _ = seed000_exact(theta0, t)
            got_state = [packed[0, 0], packed[0, 1], packed[1, 0], packed[1, 1]]
            scale = max(abs(v) for v in exact)
            assert max(abs(g - e) for g, e in zip(got_state, exact)) <= 1e-11 * scale, t


# --------------------------------------------------------------------------------------------------------------
# E1: sliding with a closed form (tests.oracles.exact.e1_exact)
# --------------------------------------------------------------------------------------------------------------
def e1_problem():
    c, s = 0.5, math.sqrt(3.0) / 2.0
    prob = fl.Problem(X=[[1.0, 0.0], [c, s]], y=[-1.0, 1.0], loss="square", reduction="mean",
                      bias=False, train_outer=False)
    return prob, fl.Params(W=[[1.0, 0.5]], b=None, a=[1.0])


def e1_exact(t):
    """Phase 1 affine (both active), hit of <w, x_1> = 0 at t*, then sliding: w_1 = 0, w_2 -> 1/s."""
    prob, _ = e1_problem()
    X = mp.matrix([[mp.mpf(float(v)) for v in row] for row in prob.X])
    Y = mp.matrix([-1, 1])
    A = -(X.T * X) / 2
    g = (X.T * Y) / 2
    w0 = mp.matrix([1, mp.mpf("0.5")])
    Ag = mp.lu_solve(A, g)

    def phase1(tt):
        return mp.expm(A * tt) * (w0 + Ag) - Ag

    t_star = mp.findroot(lambda tt: phase1(tt)[0], 1.559)
    s = X[1, 1]
    if t <= t_star:
        return phase1(t), t_star
    w2 = phase1(t_star)[1]
    return mp.matrix([0, 1 / s + (w2 - 1 / s) * mp.exp(-(s**2 / 2) * (t - t_star))]), t_star


def test_e1_sliding_closed_form():
    prob, p0 = e1_problem()
    res = fl.gradient_flow(prob, p0, 10.0)
    assert res.status == "success"
    with mp.workdps(DPS):
        exact, t_star = e1_exact(mp.mpf(10))
        assert abs(t_star - mp.mpf("1.559263981605408919623452179917107486904")) < 1e-15  # float64 inputs
        assert [(e.kind, e.neuron, e.sample) for e in res.events] == [("slide_start", 0, 0)]
        assert abs(res.events[0].t - t_star) <= 1e-12 * t_star
        # Filippov multiplier at the hit: eta* = -r_2 / 2 = 0.1999... (the minimal-norm slope)
        assert res.events[0].multiplier == pytest.approx(0.1999, abs=5e-4)
        assert abs(res.final.W[0, 0]) <= 1e-15
        assert abs(res.final.W[0, 1] - exact[1]) <= 1e-12
        assert abs(exact[1] - mp.mpf("1.135221419392515543744844340588247302794")) < 1e-15


def test_e1_caratheodory_stops_at_the_hit():
    prob, p0 = e1_problem()
    res = fl.gradient_flow(prob, p0, 10.0, solution="caratheodory", selection=0.0)
    assert res.status == "no_caratheodory_solution"
    with mp.workdps(DPS):
        _, t_star = e1_exact(mp.mpf(1))
        assert abs(res.t_final - t_star) <= 1e-12 * t_star
    assert "t = 1.559263981605" in res.message


def test_caratheodory_equals_filippov_on_transversal_problems():
    for seed in range(3):
        X, y = examples.orthogonally_separable(10, 3, seed)
        prob = fl.Problem(X, y, loss="logistic", reduction="sum", bias=False, train_outer=True)
        p0 = examples.balanced_init(8, 3, 1e-2, seed)
        a = fl.gradient_flow(prob, p0, 50.0)
        b = fl.gradient_flow(prob, p0, 50.0, solution="caratheodory")
        assert a.status == b.status == "success" and a.n_events > 0
        np.testing.assert_array_equal(a.t, b.t)
        np.testing.assert_array_equal(a.states, b.states)
        assert [(e.t, e.neuron, e.sample, e.side) for e in a.events] == \
            [(e.t, e.neuron, e.sample, e.side) for e in b.events]


def test_seed000_caratheodory_selection_one_has_no_solution_past_the_kink():
    """Seed 000's network: with ReLU'(0) = 1 no Carathéodory continuation exists at the sticking kink; with 0
    it does."""
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    zero = fl.gradient_flow(prob, p0, 300.0, solution="caratheodory", selection=0.0)
    assert zero.status == "success" and [e.kind for e in zero.events] == ["stick", "stick"]
    one = fl.gradient_flow(prob, p0, 300.0, solution="caratheodory", selection=1.0)
    assert one.status == "no_caratheodory_solution"
    assert one.t_final == pytest.approx(192.7587412425809, rel=1e-12)


# --------------------------------------------------------------------------------------------------------------
# E4: dead neurons on their last hyperplane (seed 003 three-point data), where heyoka livelocks
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("m", [5, 50, 200])
def test_e4_dead_neurons_do_not_livelock(m):
    prob, p0 = examples.three_points(m, 1e-3, 0)
    res = fl.gradient_flow(prob, p0, 50.0, max_events=20 * m * prob.n)
    assert res.status == "success"
    assert res.n_events <= 2 * m * prob.n  # every surface is met a bounded number of times
    assert np.all(np.diff(res.loss) <= 1e-15 * res.loss[:-1])
    assert res.balancedness_drift <= 1e-11
    assert res.energy_residual <= 1e-10
    # sticking events retire the surface: none is logged twice in a row at the same time
    seen = [(e.t, e.neuron, e.sample) for e in res.events]
    assert len(seen) == len(set(seen))


# --------------------------------------------------------------------------------------------------------------
# V12: non-separable two points, small initialisation, sliding with multiplier 1/2 (docs/design.md, Reference values)
# --------------------------------------------------------------------------------------------------------------
def test_v12_hit_time_multiplier_and_direction():
    prob, p0 = examples.sliding_two_points(1e-8)
    res = fl.gradient_flow(prob, p0, 30.0)
    assert res.status == "success"
    with mp.workdps(DPS):
        T = 2 * mp.log((2 + mp.sqrt(3)) * mp.tan(mp.mpf("0.15") + mp.pi / 6))
        assert abs(T - mp.mpf("2.18294460012745144")) < 1e-16
    assert [(e.kind, e.neuron, e.sample) for e in res.events] == [("slide_start", 0, 1)]  # no event storm
    assert abs(res.events[0].t - float(T)) <= 1e-10
    assert res.events[0].multiplier == pytest.approx(0.5, abs=1e-7)
    w = res.final.W[0]
    np.testing.assert_allclose(w / np.linalg.norm(w), [math.sqrt(3) / 2, -0.5], atol=1e-14)
    assert res.balancedness_drift <= 1e-12


# --------------------------------------------------------------------------------------------------------------
# Repelling tie: stay (default) or leave on the side of steepest descent
# --------------------------------------------------------------------------------------------------------------
def tie_problem():
    """One neuron on z_1 = 0 at t = 0 with u(0) = -0.4 < 0 < u(1) = 0.6 (both sides push away)."""
    prob = fl.Problem(X=[[1.0, 0.0], [1.0, 1.0]], y=[1.0, 0.1], loss="square", reduction="sum",
                      bias=False, train_outer=False)
    return prob, fl.Params(W=[[0.0, 0.5]], b=None, a=[1.0])


def test_repelling_tie_stays_by_default():
    prob, p0 = tie_problem()
    res = fl.gradient_flow(prob, p0, 0.5, t_eval=[0.1, 0.3])
    assert res.status == "success"
    first = res.events[0]
    assert (first.t, first.kind, first.sample, first.side) == (0.0, "tie", 0, 0)
    assert first.multiplier == pytest.approx(0.4)  # u(s) = -0.4 + s = 0
    assert np.all(res.states_eval[:, 0, 0] == 0.0)  # held on z_1 = 0


def test_repelling_tie_leave_picks_steepest_descent():
    prob, p0 = tie_problem()
    res = fl.gradient_flow(prob, p0, 0.5, tie="leave")
    first = res.events[0]
    # |v(1)|^2 = 0.52 > |v(0)|^2 = 0.32: leave to the active side
    assert (first.t, first.kind, first.sample, first.side) == (0.0, "tie", 0, 1)
    assert res.final.W[0, 0] > 0.0
    stay = fl.gradient_flow(prob, p0, 0.5)
    assert res.loss[-1] < stay.loss[-1]


# --------------------------------------------------------------------------------------------------------------
# Degenerate geometry
# --------------------------------------------------------------------------------------------------------------
def test_zero_neurons_stay_zero_and_neuron_at_origin_moves_by_min_norm():
    X = np.array([[1.0, 0.3], [-0.4, 1.0], [0.5, -1.0]])
    prob = fl.Problem(X, [1.0, -1.0, 1.0], loss="logistic", bias=True, train_outer=True)
    p0 = fl.Params(W=[[0.0, 0.0], [0.3, -0.2], [0.0, 0.0]], b=[0.0, 0.1, 0.0], a=[0.0, 0.4, 0.5])
    res = fl.gradient_flow(prob, p0, 5.0)
    assert res.status == "success"
    # neuron 0: (a, w, b) = 0 is a fixed point of the flow
    assert np.all(res.states[:, 0, :] == 0.0)
    # neuron 2 sits on all three hyperplanes with a != 0: it moves off by the minimal-norm velocity or stays;
    # either way the invariants hold
    assert res.balancedness_drift <= 1e-11
    assert res.energy_residual <= 1e-10


@pytest.mark.parametrize("geometry", ["antipodal", "duplicate", "origin"])
def test_degenerate_data(geometry):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((4, 2))
    if geometry == "antipodal":
        X[1] = -X[0]  # +-x share a hyperplane without bias
    elif geometry == "duplicate":
        X[1] = X[0]
    else:
        X[1] = 0.0  # a data point at the origin: z_1j = b_j only; without bias identically 0
    y = np.array([1.0, -1.0, 1.0, -1.0])
    for bias in (False, True):
        prob = fl.Problem(X, y, loss="exp", bias=bias, train_outer=True)
        p0 = examples.random_init(6, 2, rng, bias=bias)
        res = fl.gradient_flow(prob, p0, 10.0, max_events=10_000)
        assert res.status == "success", (geometry, bias, res.message)
        assert np.all(np.diff(res.loss) <= 1e-14 * res.loss[:-1])
        assert res.balancedness_drift <= 1e-11
        assert res.energy_residual <= 1e-10


def test_a_dead_neuron_far_smaller_than_the_others_stays_frozen():
    """A dead neuron (every z_ij < 0, so zero velocity) 1e-14 times smaller than the live ones: 'on the surface' is
    judged against the neuron's own scale, so it logs no event and is not moved (seed-002 validation found the
    former global scale sticking such neurons and collapsing them)."""
    X, y = examples.orthogonally_separable(8, 3, 0)
    prob = fl.Problem(X, y, loss="logistic", reduction="sum", bias=True, train_outer=True)
    p0 = examples.random_init(4, 3, 2)
    W, b, a = p0.W.copy(), p0.b.copy(), p0.a.copy()
    W[0], b[0], a[0] = 1e-15 * np.array([0.3, -0.2, 0.1]), -1e-14, 0.0
    assert np.all(X @ W[0] + b[0] < 0)
    for clock in ("t", "log"):
        res = fl.gradient_flow(prob, fl.Params(W=W, b=b, a=a), 1e8, clock=clock)
        assert res.status == "success"
        assert not [e for e in res.events if e.neuron == 0]
        np.testing.assert_array_equal(res.states[-1][0], res.states[0][0])
