"""The held surfaces' constraints (pseudo-inverse rows of each neuron's normals, dependent flags, null vectors, and
the products of each row with every sample) are rebuilt each step only for the neurons whose held samples changed;
the others keep the last step's rows. Checked against numpy's pseudo-inverse and a fresh build, in the kernel and in
the mpmath engine."""

import numpy as np
from mpmath import mp, mpf

import flowlib as fl
from flowlib.kernels import driver
from flowlib.kernels.constants import MODE_FREE, MODE_HELD
from flowlib.mp import flow as mpflow
from flowlib.mp.series import MPData
from flowlib.running import order_for


def _data(seed=3, n=9, d=3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X[4] = X[1]  # a duplicate sample: its hyperplane's normal depends on sample 1's
    return X, np.hstack([X, np.ones((n, 1))])


def _mode(n, m, held):
    mode = np.full((n, m), MODE_FREE, np.int8)
    for i, j in held:
        mode[i, j] = MODE_HELD
    return mode


BEFORE = [(0, 0), (2, 0), (1, 1), (4, 1), (3, 2), (5, 3), (6, 3)]
# neuron 0 keeps its samples, 1 keeps its dependent pair and gains one, 2 moves to another sample (same count),
# 3 is released, 4 is newly held
AFTER = [(0, 0), (2, 0), (1, 1), (4, 1), (7, 1), (8, 2), (3, 4), (5, 4)]


def _build(Xa, mode, prev):
    offset = np.zeros(mode.shape[1] + 1, np.int64)
    return driver.build_constraints(Xa, True, mode, offset, prev), offset


def test_rows_kept_from_the_last_build_equal_a_fresh_build_and_numpys_pseudo_inverse():
    X, Xa = _data()
    n, m = X.shape[0], 5
    first, _ = _build(Xa, _mode(n, m, BEFORE), driver.no_surfaces(Xa.shape[1]))
    kept, offset = _build(Xa, _mode(n, m, AFTER), first)
    fresh, _ = _build(Xa, _mode(n, m, AFTER), driver.no_surfaces(Xa.shape[1]))
    for a, b in zip(kept, fresh):  # two SVDs of the same matrix agree to rounding (to the bit on most LAPACKs)
        assert a.dtype == b.dtype and a.shape == b.shape
        if a.dtype == np.float64:
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-13)
        else:
            assert np.array_equal(a, b)
    samples, neurons, pinv, dependent, null, proj = kept
    assert [(int(i), int(j)) for i, j in zip(samples, neurons)] == sorted(AFTER, key=lambda s: (s[1], s[0]))
    for j in range(m):
        lo, hi = offset[j], offset[j + 1]
        if hi > lo:
            N = Xa[samples[lo:hi]].T  # the neuron's normals (x_i, 1) as columns
            np.testing.assert_allclose(pinv[lo:hi], np.linalg.pinv(N), rtol=0, atol=1e-13)
            # <pinv row, (x_k, 1)> for every sample: 1 on the slot's own sample, 0 on the neuron's other held
            # samples (pinv N = I on independent normals), and numpy's products everywhere
            np.testing.assert_allclose(proj[lo:hi], np.linalg.pinv(N) @ Xa.T, rtol=0, atol=1e-12)
    assert proj.shape == (len(samples), n)
    for q in range(len(samples)):
        if not dependent[q]:
            assert abs(proj[q, samples[q]] - 1.0) < 1e-12
    # the duplicate pair of neuron 1 is dependent (and its null vector splits the multipliers along x_1 - x_4)
    pair = [q for q in range(len(samples)) if neurons[q] == 1 and samples[q] in (1, 4)]
    assert all(dependent[pair]) and not dependent[[q for q in range(len(samples)) if q not in pair]].any()
    assert null[pair[0]] == 1.0  # set, not solved for
    np.testing.assert_allclose(null[pair[1]], -1.0, rtol=0, atol=1e-12)  # a least-squares solution: to rounding


def test_only_neurons_held_on_the_same_samples_take_the_last_rows():
    X, Xa = _data()
    n, m = X.shape[0], 5
    first, first_offset = _build(Xa, _mode(n, m, BEFORE), driver.no_surfaces(Xa.shape[1]))
    marked = tuple(a.copy() for a in first)
    marked[2][:] = 7.0  # rows no pseudo-inverse has: where they come back, they were kept
    marked[5][:] = 5.0  # and no products of a pseudo-inverse row
    kept, offset = _build(Xa, _mode(n, m, AFTER), marked)
    fresh, _ = _build(Xa, _mode(n, m, AFTER), driver.no_surfaces(Xa.shape[1]))
    for j in range(m):
        rows = slice(offset[j], offset[j + 1])
        if j == 0:  # the same two samples as before
            assert np.all(kept[2][rows] == 7.0) and np.all(kept[5][rows] == 5.0)
        else:  # a sample added (1), moved (2), or newly held (4)
            assert np.array_equal(kept[2][rows], fresh[2][rows])
            assert np.array_equal(kept[5][rows], fresh[5][rows])


def test_the_mpmath_engine_keeps_rows_as_the_kernel_does():
    X, _ = _data()
    n, m = X.shape[0], 5
    prob = fl.Problem(X=X, y=np.sign(X[:, 0]) + (X[:, 0] == 0), loss="logistic", bias=True,
                     train_outer=True)
    with mp.workdps(30):
        data = MPData.from_problem(prob)
        P = [[mpf(0.1 * (j + 1)), mpf(-0.2), mpf(0.3), mpf(0.05), mpf(1)] for j in range(m)]

        def constraints(engine, held):
            engine.mode = [[mpflow.FREE] * m for _ in range(n)]
            for i, j in held:
                engine.mode[i][j] = mpflow.HELD
            return engine._constraints()

        engine = mpflow._Integrator(data, P, order_for(1e-20), mpf("1e-20"), False, None, False)
        constraints(engine, BEFORE)
        kept = constraints(engine, AFTER)
        fresh = constraints(mpflow._Integrator(data, P, order_for(1e-20), mpf("1e-20"), False, None, False), AFTER)
        assert kept == fresh
        per_neuron, slots, dependent, null = kept
        assert slots == sorted(AFTER, key=lambda s: (s[1], s[0]))
        pinv = np.linalg.pinv(np.hstack([X, np.ones((n, 1))])[[0, 2]].T)
        got = np.array([[float(v) for v in row] for _, _, row in per_neuron[0]])
        np.testing.assert_allclose(got, pinv, rtol=0, atol=1e-13)
        assert [slots[q] for q in range(len(slots)) if dependent[q]] == [(1, 1), (4, 1)]


def test_an_unchanged_held_set_returns_the_last_build_itself():
    """The same held surfaces as the last call: its arrays come back as they are (nothing rebuilt or copied), and
    they equal a fresh build; one surface more or less, or one moved to another sample, builds anew."""
    X, Xa = _data()
    n, m = X.shape[0], 5
    first, first_offset = _build(Xa, _mode(n, m, BEFORE), driver.no_surfaces(Xa.shape[1]))
    again, offset = _build(Xa, _mode(n, m, BEFORE), first)
    assert all(a is b for a, b in zip(again, first)) and np.array_equal(offset, first_offset)
    fresh, _ = _build(Xa, _mode(n, m, BEFORE), driver.no_surfaces(Xa.shape[1]))
    for a, b in zip(again, fresh):
        assert a.dtype == b.dtype and a.shape == b.shape
        if a.dtype == np.float64:
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-13)
        else:
            assert np.array_equal(a, b)
    for held in (BEFORE[:-1], BEFORE + [(8, 4)], [(1, 0)] + BEFORE[1:]):
        other, _ = _build(Xa, _mode(n, m, held), first)
        assert not any(a is b for a, b in zip(other, first))
        assert len(other[0]) == len(held)
    empty = driver.no_surfaces(Xa.shape[1])
    none, _ = _build(Xa, _mode(n, m, []), empty)
    assert all(a is b for a, b in zip(none, empty))

