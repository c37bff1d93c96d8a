"""The fast paths of the mpmath backend give the numbers of the plain mpf formulas bit for bit.

:mod:`flowlib.mp.fast` (exact integer dot products, rounding, division), the integer Taylor recurrences of
:func:`flowlib.mp.series.taylor_coefficients` against :func:`flowlib.mp.series._taylor_reference` (mpf objects and
``mp.fdot``), the exact exclusion test of :func:`flowlib.mp.roots.excluded` against its rounded recurrence, and the
raw-tuple gradient descent against a loop over mpf objects.
"""

import random

import numpy as np
import pytest
from mpmath import mp, mpf
from mpmath.libmp import finf, fnan, from_int, from_man_exp, fzero, mpf_add, mpf_div, mpf_mul

import flowlib as fl
from flowlib import examples
from flowlib.mp import fast, linalg, roots, series
from flowlib.mp.series import wrap_all


def _same(a, b) -> bool:
    """Nested lists of mpf equal number for number (the raw tuples, so that NaN compares too)."""
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a._mpf_ == b._mpf_


def test_rounding_and_division_match_libmp():
    rng = random.Random(3)
    for _ in range(20000):
        prec = rng.choice([53, 103, 170, 336])
        man = rng.getrandbits(rng.randint(1, 700)) * rng.choice([-1, 1])
        if rng.random() < 0.3:  # an exact tie
            man = (rng.getrandbits(prec) << 1 | 1) << rng.randint(0, 50)
        exp = rng.randint(-500, 500)
        assert fast.round_nearest(man, exp, prec) == from_man_exp(man, exp, prec, "n")
        x = from_man_exp(man, exp, prec, "n")
        d = rng.randint(1, 200)
        assert fast.div_int(x, d, prec) == mpf_div(x, from_int(d), prec, "n")


def test_arithmetic_matches_libmp_including_zeros_and_far_operands():
    rng = random.Random(7)

    def value(prec):
        r = rng.random()
        if r < 0.05:
            return fzero
        if r < 0.07:
            return rng.choice([finf, fnan])
        man = rng.getrandbits(rng.randint(1, prec)) * rng.choice([-1, 1]) or 1
        return from_man_exp(man, rng.randint(-150, 150), prec, "n")

    for _ in range(20000):
        prec = rng.choice([53, 103, 170])
        x, y, z = value(prec), value(prec), value(prec)
        if rng.random() < 0.2 and x[1]:
            z = (1 - x[0],) + x[1:]  # exact cancellation
        assert fast.plus(x, z, prec) == mpf_add(x, z, prec, "n")
        assert fast.times(x, y, prec) == mpf_mul(x, y, prec, "n")
        assert fast.mul_add(x, y, z, prec) == mpf_add(mpf_mul(x, y, prec, "n"), z, prec, "n")


@pytest.mark.parametrize("spread", [0, 150, 400])
def test_dot_matches_fdot_including_the_dropping_case(spread):
    # beyond 2 prec bits of spread mpf_sum drops terms: the fallback reproduces that too
    rng = random.Random(spread)
    with mp.workdps(30):
        for _ in range(200):
            xs = [mpf(rng.gauss(0, 1)) * mpf(2) ** rng.randint(-spread, spread) for _ in range(6)]
            ys = [mpf(rng.gauss(0, 1)) for _ in range(6)]
            xs[2] = -xs[0] * ys[0] / ys[2]  # cancellation
            got = fast.dot(fast.Fixed([x._mpf_ for x in xs]), fast.Fixed([y._mpf_ for y in ys]))
            assert got == mp.fdot(xs, ys)._mpf_


def test_exclusion_test_matches_the_rounded_recurrence_near_ties():
    rng = random.Random(1)
    with mp.workdps(30):
        prec, rnd = mp._prec_rounding
        undecided = 0
        for trial in range(3000):
            g = [mpf(rng.gauss(0, 1)) * mpf(2) ** rng.randint(-40, 40) for _ in range(rng.randint(2, 12))]
            b = mpf(rng.random()) * mpf(2) ** rng.randint(-5, 5)
            if trial % 2:
                tail = mp.fsum(abs(c) * b**k for k, c in enumerate(g) if k)
                g[0] = tail * (1 + rng.choice([-1, 0, 1]) * mpf(2) ** -rng.randint(95, 110))
            raw = [c._mpf_ for c in g]
            exact = roots._excluded_exact(raw, b._mpf_, prec)
            undecided += exact is None
            assert roots.excluded(g, b, 0) == roots._excluded_rounded(raw, b._mpf_, prec, rnd)
            assert exact is None or exact == roots._excluded_rounded(raw, b._mpf_, prec, rnd)
        assert 0 < undecided < 3000


def _random_case(seed):
    rng = np.random.default_rng(seed)
    n, d, m = int(rng.integers(2, 5)), int(rng.integers(1, 3)), int(rng.integers(1, 5))
    loss = ["exp", "logistic", "square"][seed % 3]
    leak = [0.0, 0.1][int(rng.integers(2))]
    bias, train_outer = bool(rng.integers(2)), bool(rng.integers(2))
    X = rng.standard_normal((n, d))
    y = np.sign(rng.standard_normal(n)) if loss != "square" else rng.standard_normal(n)
    prob = fl.Problem(X, y, loss=loss, reduction="mean", activation="leaky_relu" if leak else "relu", leak=leak,
                      bias=bias, train_outer=train_outer, weight_decay=0.3 if seed % 4 in (1, 2) else 0.0)
    P = np.concatenate([rng.standard_normal((m, d)), rng.standard_normal((m, 1)) * 0.3 * bias,
                        rng.standard_normal((m, 1))], axis=1)
    return prob, P


def _series_inputs(prob, P, hold):
    data = series.MPData.from_problem(prob)
    state = [[mpf(float(v)) for v in row] for row in P]
    Z = series.preactivations(data, state)
    held = [[bool(hold) and i == 0 and j == 0 for j in range(len(state))] for i in range(data.n)]
    S = series.slopes(data, [[z > 0 for z in row] for row in Z], held)
    constraints = [[] for _ in state]
    if hold:
        constraints[0] = [(0, 0, linalg.pinv_rows([list(data.normals[0])], linalg.rcond())[0])]
    return data, state, S, constraints


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("dps", [20, 45])
def test_integer_taylor_recurrences_equal_the_mpf_ones(seed, dps):
    prob, P = _random_case(seed)
    with mp.workdps(dps):
        data, state, S, constraints = _series_inputs(prob, P, hold=seed % 2)
        for s0 in (None, mpf("0.75")):
            fast_path = series._taylor_integer(data, S, state, 16, constraints, s0)  # past the regrid order
            reference = series._taylor_reference(data, S, state, 16, constraints, s0)
            for name in ("C", "Z", "G", "Cm"):
                assert _same(getattr(fast_path, name), getattr(reference, name)), (seed, dps, s0, name)


@pytest.mark.parametrize("seed", [0, 3, 4, 7, 8, 11])  # the cases without weight decay
def test_still_neurons_are_filled_in_with_the_numbers_of_the_whole_recurrence(seed, monkeypatch):
    # the two neurons added have every slope 0 (the first held on sample 0 as well): they do not move, and the
    # recurrence on the others, with theirs filled in, gives the numbers of the mpf recurrence on the whole network
    prob, P = _random_case(seed)
    P = np.concatenate([P, P[:1] * 0.5, P[:1] * -2.0])
    widths = []
    moving = series._taylor_moving
    monkeypatch.setattr(series, "_taylor_moving", lambda data, S, P, *rest: widths.append(len(P)) or
                        moving(data, S, P, *rest))
    with mp.workdps(40):
        data = series.MPData.from_problem(prob)
        assert not data.decay
        state = [[mpf(float(v)) for v in row] for row in P]
        m = len(state)
        Z = series.preactivations(data, state)
        active = [[z > 0 for z in row] for row in Z]
        held = [[j == m - 2 or j == m - 1 or (j == 0 and i == 0) for j in range(m)] for i in range(data.n)]
        S = series.slopes(data, active, held)
        pinv = linalg.pinv_rows([list(data.normals[0])], linalg.rcond())[0]
        constraints = [[] for _ in state]
        constraints[0], constraints[m - 2] = [(0, 0, pinv)], [(1, 0, pinv)]
        fast_path = series._taylor_integer(data, S, state, 14, constraints, None)
        reference = series._taylor_reference(data, S, state, 14, constraints, None)
        for name in ("C", "Z", "G", "Cm", "F"):
            assert _same(getattr(fast_path, name), getattr(reference, name)), (seed, name)
        assert all(x == 0 for Ck in fast_path.C[1:] for x in Ck[m - 1] + Ck[m - 2])
        assert widths == [sum(any(row[j] for row in S) for j in range(m))] and widths[0] <= m - 2


def test_widely_spread_data_take_the_mpf_path_with_the_same_numbers():
    prob = fl.Problem([[1e-80], [1.0]], [1.0, -1.0], loss="square", reduction="mean", bias=True, train_outer=True)
    P = np.array([[1.0, 0.5, 0.7], [-0.3, 0.2, 1.1]])
    with mp.workdps(30):
        data, state, S, constraints = _series_inputs(prob, P, hold=False)
        with pytest.raises(fast.Inexact):
            series._taylor_integer(data, S, state, 8, constraints, None)
        got = series.taylor_coefficients(data, S, state, 8, constraints)
        ref = series._taylor_reference(data, S, state, 8, constraints)
        assert _same(got.C, ref.C) and _same(got.Z, ref.Z)


@pytest.mark.parametrize("slope", [0, 7, -3])
def test_track_moves_its_exponents_exactly(slope):
    track = fast.Track(2)
    values = [[(0, 0, 0, 0), (0, 0, 0, 0)], [(0, 3, 10, 2), (1, 5, 12, 3)], [(0, 1, -40, 1), (0, 0, 0, 0)],
              [(1, 7, -200, 3), (0, 1, 0, 1)], [(0, 9, -230, 4), (1, 1, -260, 1)]]
    for k, v in enumerate(values):
        if k == 3:
            track.regrid(slope)
        track.append(v)
    for k, v in enumerate(values):
        for j, (sign, man, exp, _) in enumerate(v):
            expected = ((-man if sign else man) << (exp - track.exp_at(k))) if man else 0
            assert track.blocks[k][j] == track.columns[j][k] == expected
    with pytest.raises(fast.Inexact):
        track.append([(0, 0, -456, -2), (0, 0, 0, 0)])  # +inf


@pytest.mark.parametrize("loss", ["exp", "logistic", "square"])
@pytest.mark.parametrize("train_outer", [True, False])
def test_integer_taylor_recurrences_of_a_wide_layer_equal_the_mpf_ones(loss, train_outer):
    # more neurons than orders, so that every sample's output sums take the packed products (the small random
    # cases above sum most orders neuron by neuron), with a held surface and neurons off on some samples
    rng = np.random.default_rng(7)
    n, d, m = 4, 2, 24
    X = rng.standard_normal((n, d))
    y = np.sign(rng.standard_normal(n)) if loss != "square" else rng.standard_normal(n)
    prob = fl.Problem(X, y, loss=loss, reduction="mean", activation="leaky_relu", leak=0.1, bias=True,
                      train_outer=train_outer)
    P = np.concatenate([rng.standard_normal((m, d)), rng.standard_normal((m, 1)) * 0.3,
                        rng.standard_normal((m, 1))], axis=1)
    with mp.workdps(40):
        data, state, S, constraints = _series_inputs(prob, P, hold=True)
        fast_path = series._taylor_integer(data, S, state, 18, constraints, None)
        reference = series._taylor_reference(data, S, state, 18, constraints, None)
        for name in ("C", "Z", "G", "Cm", "F"):
            assert _same(getattr(fast_path, name), getattr(reference, name)), name


def _assert_horner_and_energy_are_the_mpf_expressions(C, h):
    """``state_at`` and ``velocity_energy`` of the coefficients ``C`` at ``h`` equal, bit for bit, Horner's rule and
    the energy's double sum written with plain mpf arithmetic."""
    m, w = len(C[0]), len(C[0][0])
    for j in range(m):
        for q in range(w):
            acc = C[-1][j][q]
            for k in range(len(C) - 2, -1, -1):
                acc = acc * h + C[k][j][q]
            assert series.state_at(C, h)[j][q]._mpf_ == acc._mpf_
    D = [[(k + 1) * C[k + 1][j][q] * h**k for j in range(m) for q in range(w)] for k in range(len(C) - 1)]
    total = []
    for k in range(len(D)):
        for l in range(k, len(D)):
            dot = mp.fdot(D[k], D[l]) / (k + l + 1)
            total.append(dot if k == l else 2 * dot)
    assert series.velocity_energy(C, h)._mpf_ == (mp.fsum(total) * h)._mpf_


def test_horner_and_energy_match_mpf_arithmetic():
    rng = random.Random(5)
    with mp.workdps(35):
        C = [[[mpf(rng.gauss(0, 1)) / (k + 1) ** 2 for _ in range(3)] for _ in range(4)] for k in range(9)]
        _assert_horner_and_energy_are_the_mpf_expressions(C, mpf("0.3"))


def test_horner_and_energy_of_partly_still_coefficients_match_mpf_arithmetic():
    # rows that are 0 above order 0, a zero top order, and an order that is 0 throughout
    rng = random.Random(8)
    with mp.workdps(33):
        C = [[[mpf(rng.gauss(0, 1)) / (k + 1) ** 2 if (j != 1 or k == 0) and k not in (4, 8) else mpf(0)
               for _ in range(3)] for j in range(3)] for k in range(9)]
        _assert_horner_and_energy_are_the_mpf_expressions(C, mpf("0.7"))


def test_rounded_convolution_and_exit_term_sizes_match_the_mpf_expressions():
    from flowlib.mp import flow

    rng = random.Random(9)
    with mp.workdps(30):
        a = [mpf(rng.gauss(0, 1)) * 10 ** rng.randint(-5, 5) for _ in range(7)]
        g = [mpf(rng.gauss(0, 1)) * 10 ** rng.randint(-5, 5) for _ in range(7)]
        for lmax in (0, 3, 6):
            expected = [mp.fsum(a[l] * g[k - l] for l in range(min(k, lmax) + 1)) for k in range(len(g))]
            assert _same(series.rounded_convolution(a, g, lmax), expected)
        bound = mpf("0.37")
        powers = [(bound**k)._mpf_ for k in range(len(a))]
        assert _same(wrap_all(flow._term_sizes_raw(a, powers)), [abs(c) * bound**k for k, c in enumerate(a)])


def test_earliest_root_matches_mpf_bisection_and_newton():
    # a polynomial with a root near 0.3 of the interval and a double root: same answer as the mpf formulas
    with mp.workdps(30):
        g = [mpf(-3), mpf(10), mpf(0), mpf(-1) / 7]
        tau = roots.earliest_root(g, mpf(2))
        assert abs(sum(c * tau**k for k, c in enumerate(g))) <= mpf(10) ** -25
        assert roots.earliest_root([mpf(1), mpf(-2), mpf(1)], mpf(1)) == mpf(1)
        assert roots.earliest_root([mpf(1), mpf(1)], mpf(1)) is None


def test_raw_gradient_descent_equals_the_mpf_loop():
    from benchmarks.precision import plain_mp_descent

    for make in (lambda: examples.three_points(7, seed=1), lambda: examples.os_logistic(m=3, n=4, d=2, seed=2),
                 lambda: examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)):
        prob, p0 = make()
        gd = fl.gradient_descent(prob, p0, 0.05, 40, dps=35, record_every=40)
        P = plain_mp_descent(prob, p0, 0.05, 40, 35)
        assert [v for row in P for v in row] == list(gd.states[-1].ravel())
