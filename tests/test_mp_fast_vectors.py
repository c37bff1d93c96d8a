"""The vectorised raw-mpf helpers of the mpmath backend give the numbers of the plain mpf / libmp operations bit for
bit: roundings, products, quotients, Horner's rule, exact sums (:mod:`flowlib.mp.fast`), the raw preactivations,
outputs and mpf wrapping (:mod:`flowlib.mp.series`), and the engine's raw comparisons and cached step factors
(:mod:`flowlib.mp.flow`). Random inputs include zeros, negatives, exact cancellations, wide exponent ranges and
values that are not finite; each helper is checked on the C-rounding path (gmpy2) and on the pure-Python one.
"""

import random

import numpy as np
import pytest
from mpmath import mp, mpf
from mpmath.libmp import finf, fnan, fninf, from_int, from_man_exp, fzero, mpf_abs, mpf_add, mpf_div, mpf_mul

import flowlib as fl
from flowlib.mp import fast, series
from flowlib.mp import flow as mpflow
from flowlib.running import order_for


@pytest.fixture(params=[True, False], ids=["c-rounding", "python-rounding"])
def rounding_path(request, monkeypatch):
    """Run a test with libmp's C rounding and with the pure-Python bodies (where gmpy2 is there at all)."""
    if request.param and not fast.C_ROUNDING:
        pytest.skip("libmp does not round in C here")
    monkeypatch.setattr(fast, "C_ROUNDING", request.param)
    return request.param


def _raw(x):
    """Nested lists of mpf (or of raw tuples) as nested lists of raw tuples."""
    if isinstance(x, list):
        return [_raw(v) for v in x]
    return x._mpf_ if hasattr(x, "_mpf_") else x


def _value(rng, prec, special=0.05, spread=300):
    r = rng.random()
    if r < 0.1:
        return fzero
    if r < 0.1 + special:
        return rng.choice([finf, fninf, fnan])
    man = rng.getrandbits(rng.randint(1, prec)) * rng.choice([-1, 1]) or 1
    return from_man_exp(man, rng.randint(-spread, spread), prec, "n")


def test_round_all_and_the_single_roundings(rounding_path):
    rng = random.Random(11)
    for prec in (53, 103, 170):
        mans = [rng.getrandbits(rng.randint(1, 600)) * rng.choice([-1, 1]) for _ in range(300)] + [0, 1, -1]
        mans += [(rng.getrandbits(prec) << 1 | 1) << rng.randint(0, 40) for _ in range(50)]  # exact ties
        exp = rng.randint(-400, 400)
        expected = [from_man_exp(man, exp, prec, "n") for man in mans]
        assert fast.round_all(mans, exp, prec) == expected
        assert fast.round_all(iter(mans), exp, prec) == expected
        assert [fast.round_nearest(man, exp, prec) for man in mans] == expected
        assert [fast.round_magnitude(1, abs(man), exp, prec) for man in mans if man] == \
            [from_man_exp(-abs(man), exp, prec, "n") for man in mans if man]


def test_times_all_and_div_all_match_libmp(rounding_path):
    rng = random.Random(12)
    for _ in range(300):
        prec = rng.choice([53, 103, 170])
        values = [_value(rng, prec) for _ in range(rng.randint(0, 30))]
        y = _value(rng, prec, special=0.1)
        assert fast.times_all(values, y, prec) == [mpf_mul(x, y, prec, "n") for x in values]
        then = _value(rng, prec, special=0.1)
        assert fast.times_all(values, y, prec, then) == \
            [mpf_mul(mpf_mul(x, y, prec, "n"), then, prec, "n") for x in values]
        d = rng.choice([1, 2, 3, 7, 8, 12, 37, 64, 255, rng.randint(1, 10**6)])
        finite = [x for x in values if x[1] or not x[2]]
        assert fast.div_all(finite, d, prec) == [mpf_div(x, from_int(d), prec, "n") for x in finite]
        assert [fast.div_int(x, d, prec) for x in finite] == [mpf_div(x, from_int(d), prec, "n") for x in finite]
        assert [fast.plus(x, y, prec) for x in values] == [mpf_add(x, y, prec, "n") for x in values]
        assert [fast.times(x, y, prec) for x in values] == [mpf_mul(x, y, prec, "n") for x in values]


@pytest.mark.parametrize("tau", ["0.37", "-1.25", "0", "3e-40", "7e12"])
def test_horner_all_matches_mpf_horner_with_zero_rows_and_zero_tops(rounding_path, tau):
    rng = random.Random(13)
    with mp.workdps(32):
        prec = mp.prec
        t = mpf(tau)._mpf_
        for _ in range(40):
            K, width = rng.randint(0, 12), rng.randint(1, 9)
            orders = [[_value(rng, prec, special=0.0, spread=60) for _ in range(width)] for _ in range(K + 1)]
            for k in range(K + 1):
                if rng.random() < 0.3:
                    orders[k] = [fzero] * width  # an order that is 0 throughout (the padding of a step)
            if width > 2:
                for k in range(1, K + 1):
                    orders[k][1] = fzero  # an entry that does not move
            for p in range(width):
                acc = mp.make_mpf(orders[K][p])
                for k in range(K - 1, -1, -1):
                    acc = acc * mp.make_mpf(t) + mp.make_mpf(orders[k][p])
                assert fast.horner_all(orders, t, prec)[p] == acc._mpf_
            assert series.state_raw(orders, t) == fast.horner_all(orders, t, prec)


def test_convolutions_and_combination_are_the_exact_integer_sums():
    rng = random.Random(14)
    for _ in range(200):
        k = rng.randint(0, 15)
        xs = [[rng.randint(-2**200, 2**200) for _ in range(rng.randint(1, k + 1))] for _ in range(rng.randint(0, 6))]
        ys = [[rng.randint(-2**150, 2**150) for _ in range(k + 1)] for _ in xs]
        assert fast.convolutions(xs, ys) == [sum(x[l] * y[k - l] for l in range(len(x))) for x, y in zip(xs, ys)]
        columns = [[rng.randint(-2**90, 2**90) for _ in range(7)] for _ in range(rng.randint(1, 4))]
        weights = [rng.choice([0, rng.randint(-2**60, 2**60)]) for _ in columns]
        assert fast.combination(columns, weights) == [sum(w * c[j] for w, c in zip(weights, columns)) for j in range(7)]


@pytest.mark.parametrize("slope", [0, 5])
def test_packed_tracks_give_the_exact_sums_of_products(rounding_path, slope):
    # every order's integers packed by group (Kronecker substitution): the products of packed integers, summed and
    # unpacked (by gmpy2's unpack, or by shifts), are the exact sums of the products, also after the base moves (a
    # far smaller exponent) and when a wider field is asked for
    rng = random.Random(slope)
    groups, size = 3, 7  # components g * size + t
    track, weights = fast.Track(groups * size), fast.Track(groups)
    for k in range(9):
        if k == 5:
            track.regrid(slope)
            weights.regrid(slope)
        low = -400 if k == 7 else -60  # order 7 moves the bases down
        track.append([(rng.randint(0, 1), rng.getrandbits(90) | 1, rng.randint(low, 20) - slope * k, 90)
                      if rng.random() > 0.2 else fzero for _ in range(groups * size)])
        weights.append([(rng.randint(0, 1), rng.getrandbits(60) | 1, rng.randint(-30, 30) - slope * k, 60)
                        for _ in range(groups)])
        field = weights.width(0, k) + track.width(0, k) + (groups * (k + 1)).bit_length() + 1
        for ask in (field, field + 300):  # the second a wider field than the one kept: packed afresh
            packs, width = track.packed("by group", [slice(g * size, (g + 1) * size) for g in range(groups)], ask)
            assert width >= ask and len(packs) == k + 1
            total = sum(weights.blocks[l][g] * packs[k - l][g] for l in range(k + 1) for g in range(groups))
            expected = [sum(weights.blocks[l][g] * track.blocks[k - l][g * size + t] for l in range(k + 1)
                            for g in range(groups)) for t in range(size)]
            assert fast.unpacked(total, size, width) == expected
        assert track.widths == [max(map(abs, block)).bit_length() for block in track.blocks]


def test_max_magnitude_is_the_max_of_abs_and_sees_nan_and_inf():
    rng = random.Random(15)
    with mp.workdps(30):
        prec, rnd = mp._prec_rounding
        for trial in range(2000):
            spread = 3 if trial % 2 else 200
            values = [_value(rng, prec, special=0.0, spread=spread) for _ in range(rng.randint(0, 12))]
            if values and values[0][1] and trial % 3 == 0:
                values.append((1 - values[0][0],) + values[0][1:])  # the same magnitude, other sign
            expected = max((abs(mp.make_mpf(x)) for x in values), default=mpf(0))
            assert fast.max_magnitude(values, prec, rnd) == expected._mpf_
        assert fast.max_magnitude([from_int(3), fninf, from_int(-7)], prec, rnd) == finf
        assert fast.max_magnitude([finf, fnan, from_int(1)], prec, rnd) == fnan
        assert fast.max_magnitude([], prec, rnd) == fzero
        wide = from_man_exp(2**200 + 1, 0)  # more bits than the working precision: rounded as abs rounds it
        assert fast.max_magnitude([wide], prec, rnd) == mpf_abs(wide, prec, rnd)


@pytest.mark.parametrize("spread", [0, 60, 400])
def test_dots_match_dot_pair_by_pair(spread, monkeypatch):
    rng = random.Random(spread + 1)
    with mp.workdps(30):
        prec = mp.prec
        for trial in range(40):
            n = rng.randint(1, 20)
            blocks = []
            for _ in range(rng.randint(0, 8)):
                r = rng.random()
                if r < 0.15:
                    raw = [fzero] * n
                elif r < 0.25:
                    raw = [_value(rng, prec, special=0.0) for _ in range(n - 1)] + [rng.choice([finf, fnan])]
                else:
                    raw = [_value(rng, prec, special=0.0, spread=spread) for _ in range(n)]
                blocks.append(fast.Fixed(raw))
            if len(blocks) > 1 and blocks[0].ints is not None and blocks[1].ints is not None:
                # an exact cancellation between two products of a pair
                flipped = [(1 - x[0],) + x[1:] if p % 2 and x[1] else x for p, x in enumerate(blocks[0].raw)]
                blocks[1] = fast.Fixed(flipped)
            expected = {(a, b): fast.dot(blocks[a], blocks[b]) for a in range(len(blocks))
                        for b in range(a, len(blocks))}
            assert fast.dots(blocks) == expected
            if trial % 4 == 0:
                monkeypatch.setattr(fast, "PACK_WIDTH", 0)  # every pair by dot
                assert fast.dots(blocks) == expected
                monkeypatch.undo()


def test_wrap_all_preactivations_and_outputs_are_the_mpf_expressions():
    from flowlib import examples

    rng = random.Random(16)
    with mp.workdps(40):
        raw = [_value(rng, mp.prec) for _ in range(50)]
        made = series.wrap_all(raw)
        assert [type(x) for x in made] == [mpf] * 50 and [x._mpf_ for x in made] == raw
        for prob, params in (examples.three_points(7, seed=3), examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)):
            data = series.MPData.from_problem(prob)
            P = [[mpf(float(v)) for v in row] for row in params.packed()]
            P[0][0] = mpf(0)
            Z = series.preactivations(data, P)
            assert [[z._mpf_ for z in row] for row in Z] == \
                [[mp.fdot(P[j][:data.da], x)._mpf_ for j in range(len(P))] for x in data.Xa]
            S = [[mpf(rng.choice([0, 1, 0.25])) for _ in P] for _ in data.Xa]
            expected = [mp.fsum(P[j][data.da] * S[i][j] * Z[i][j] for j in range(len(P))) for i in range(data.n)]
            assert [f._mpf_ for f in series.outputs(data, P, S)] == [f._mpf_ for f in expected]


def test_preactivations_of_widely_spread_states_take_fdot():
    with mp.workdps(30):
        prob_data = series.MPData.from_problem(__import__("flowlib").Problem(
            [[1.0], [2.0]], [1.0, -1.0], loss="square", reduction="mean", bias=True, train_outer=True))
        P = [[mpf("1e-300"), mpf(1), mpf(1)], [mpf(np.inf), mpf(0), mpf(1)]]
        Z = series.preactivations(prob_data, P)
        assert [[z._mpf_ for z in row] for row in Z] == \
            [[mp.fdot(P[j][:2], x)._mpf_ for j in range(2)] for x in prob_data.Xa]


def test_engine_raw_comparisons_and_step_factors_are_the_mpf_ones():
    rng = random.Random(17)
    with mp.workdps(30):
        prec = mp.prec
        for _ in range(3000):
            z0, z1 = _value(rng, prec, special=0.1), _value(rng, prec, special=0.1)
            assert mpflow._opposite(z0, z1) == (mp.make_mpf(z0) * mp.make_mpf(z1) < 0)
            terms = [mpf_abs(_value(rng, prec, special=0.0), prec, "n") for _ in range(rng.randint(1, 9))]
            if rng.random() < 0.1:
                terms.insert(rng.randint(0, len(terms)), rng.choice([fnan, finf]))
            assert mpflow._largest(terms)._mpf_ == max(mp.make_mpf(x) for x in terms)._mpf_
        with pytest.raises(ValueError):
            mpflow._largest([])
        for K in (2, 5, 19, 36):
            for tol in (mpf(10) ** -30, mpf("1e-3"), mpf("1e-12")):
                size, below, top = mpf(3), mpf(rng.random()) * mpf(10) ** -20, mpf(rng.random()) * mpf(10) ** -22
                rho = min((size / below) ** (mpf(1) / (K - 1)), (size / top) ** (mpf(1) / K))
                factor = tol ** (mpf(1) / K)
                if factor >= mp.exp(mpflow.STEP_SAFETY_EXPONENT):
                    ratio = mp.exp(mpflow.STEP_SAFETY_EXPONENT - mpf(7) / 10 / (K - 1))
                    expected = rho * ratio
                else:
                    ratio = factor * mp.exp(-mpf(7) / 10 / (K - 1))
                    expected = rho * factor * mp.exp(-mpf(7) / 10 / (K - 1))
                full = mpflow.tolerance_order(tol)
                assert full == order_for(float(tol))
                assert tol ** (mpf(1) / full) >= mp.exp(mpflow.STEP_SAFETY_EXPONENT)  # a full step's factor is e^-2
                if factor < mp.exp(mpflow.STEP_SAFETY_EXPONENT):  # the step with a full step's error, if longer
                    low = mp.exp(mpflow.STEP_SAFETY_EXPONENT - mpf(7) / 10 / (full - 1)) ** (mpf(full + 1) / (K + 1))
                    expected = rho * low if low > ratio else expected
                assert mpflow._taylor_step(size, below, top, K, tol)._mpf_ == expected._mpf_


def test_exclusion_by_leading_bits_agrees_with_the_rounded_recurrence():
    from flowlib.mp import roots

    rng = random.Random(18)
    decided = 0
    with mp.workdps(30):
        prec, rnd = mp._prec_rounding
        for trial in range(4000):
            spread = rng.choice([5, 60, 300])
            coefs = [_value(rng, prec, special=0.02, spread=spread) for _ in range(rng.randint(1, 14))]
            b = mpf_abs(_value(rng, prec, special=0.0, spread=rng.choice([2, 20])), prec, rnd)
            if not b[1]:
                continue
            if trial % 3 == 0:  # |c_0| a few binades either side of the tail's largest term
                k = rng.randrange(1, len(coefs)) if len(coefs) > 1 else 0
                if k and coefs[k][1] and coefs[k][2] is not None:
                    top = coefs[k][2] + coefs[k][3] + k * (b[2] + b[3])
                    coefs[0] = from_man_exp(rng.getrandbits(prec) | 1, top - prec + rng.randint(-4, 4), prec, "n")
            quick = roots._excluded_by_size(coefs, b[2] + b[3])
            if quick is not None:
                decided += 1
                assert quick == roots._excluded_rounded(coefs, b, prec, rnd)
                assert quick == roots.excluded_raw(coefs, b)
    assert decided > 1000


@pytest.mark.parametrize("still", [False, True])
def test_taylor_expansion_gives_the_series_of_every_order_asked(still):
    from flowlib import examples

    prob, params = examples.three_points(6, seed=4)
    with mp.workdps(35):
        data = series.MPData.from_problem(prob)
        P = [[mpf(float(v)) for v in row] for row in params.packed()]
        Z = series.preactivations(data, P)
        held = [[still and j == 2 for j in range(len(P))] for _ in range(data.n)]  # neuron 2 does not move
        S = series.slopes(data, [[z > 0 for z in row] for row in Z], held)
        constraints = [[] for _ in P]
        expansion = series.TaylorExpansion(data, S, P, constraints)
        for order in (3, 12, 7, 12, 1, 20):
            got, ref = expansion.series(order), series.taylor_coefficients(data, S, P, order, constraints)
            for name in ("C", "Z", "G", "Cm", "F", "Cr", "Zr"):
                assert _raw(getattr(got, name)) == _raw(getattr(ref, name)), (order, name)
            assert got.Cr == series.raw_orders(ref.C)
            assert all(expansion.raw_order(k) == ref.Cr[k] for k in range(order + 1))
            assert all(expansion.raw_switching(k) == ref.Zr[k] for k in range(order + 1))
        # the switching functions alone, asked first (as the adaptive order asks for orders 0 and 1)
        first = series.TaylorExpansion(data, S, P, constraints)
        ref = series.taylor_coefficients(data, S, P, 5, constraints)
        assert [first.raw_switching(k) for k in (1, 0, 5)] == [ref.Zr[1], ref.Zr[0], ref.Zr[5]]


def test_switching_functions_of_a_widely_spread_state_with_still_neurons_take_the_mpf_path():
    # a still neuron at 1e-80 beside moving ones of order 1: the recurrence of the moving neurons runs on integers,
    # but the whole network's Z[0] spans more than 2 prec bits, and the switching functions asked alone come from
    # the mpf path
    prob = fl.Problem([[1.0], [-0.5], [2.0]], [1.0, -1.0, 0.5], loss="square", reduction="mean", bias=True,
                      train_outer=True)
    with mp.workdps(30):
        data = series.MPData.from_problem(prob)
        P = [[mpf("0.7"), mpf("0.2"), mpf("1.1")], [mpf("-0.4"), mpf("0.3"), mpf("0.9")],
             [mpf("1e-80"), mpf("-3e-81"), mpf("2e-80")]]
        Z = series.preactivations(data, P)
        held = [[j == 2 for j in range(3)] for _ in range(data.n)]  # neuron 2 does not move
        S = series.slopes(data, [[z > 0 for z in row] for row in Z], held)
        constraints = [[] for _ in P]
        expansion = series.TaylorExpansion(data, S, P, constraints)
        assert expansion.moving == [0, 1] and expansion.recurrence is not None
        expansion.recurrence.extend(4)  # the moving neurons alone: exact on integers
        ref = series._taylor_reference(data, S, P, 4, constraints)
        assert [expansion.raw_switching(k) for k in range(5)] == ref.Zr
        assert expansion.recurrence is None  # the integer path gave up
