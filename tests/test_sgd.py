"""Mini-batch SGD (``fl.stochastic_gradient_descent``), float64 kernel and mpmath, against independent references.

References written here, sharing no code with flowlib: the batch sequence drawn one call at a time as documented
(each epoch ``rng.permutation(n)`` cut into consecutive batches, or ``rng.integers(0, n, batch_size)`` per step,
``rng = numpy.random.default_rng(seed)``), a direct numpy loop for the updates, losses and flips, and a plain mpmath
loop over lists of mpf.
"""

import os
import signal

import mpmath as mp
import numpy as np
import pytest

import flowlib as fl
from numpy_reference import mp_descent, numpy_objective, numpy_step, relative


# --------------------------------------------------------------------------------------------------------------
# independent references
# --------------------------------------------------------------------------------------------------------------
def reference_batches(n, batch_size, replacement, seed, steps):
    """The documented batch sequence, drawn one numpy call at a time (index order as drawn)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < steps:
        if replacement:
            out.append(rng.integers(0, n, batch_size))
        else:
            perm = rng.permutation(n)
            out.extend(perm[s:s + batch_size] for s in range(0, n, batch_size))
    return out[:steps]


def numpy_sgd(prob, p0, lr, steps, batch_size, replacement, seed, selection=None):
    """Direct numpy SGD: packed states at every iterate and the flips ``(k, j, i, side)`` over all samples."""
    X, y, leak, n = prob.X, prob.y, prob.leak, prob.n
    selection = leak if selection is None else selection
    W, a = p0.W.copy(), p0.a.copy()
    b = np.zeros(len(a)) if p0.b is None else p0.b.copy()
    states, flips = [np.column_stack([W, b, a])], []
    side = (X @ W.T + b) > 0
    for k, B in enumerate(reference_batches(n, batch_size, replacement, seed, steps), start=1):
        weight = 1.0 / len(B) if prob.reduction == "mean" else n / len(B)
        W, b, a = numpy_step(prob, W, b, a, X[B], y[B], weight, lr, selection)
        states.append(np.column_stack([W, b, a]))
        new = (X @ W.T + b) > 0
        for i, j in zip(*np.nonzero(new != side)):
            flips.append((k, int(j), int(i), 1 if new[i, j] else -1))
        side = new
    return np.array(states), flips


def sgd_problem(reduction="mean", bias=True, train_outer=True, loss="logistic", lam=0.0, n=5):
    """A random leaky-ReLU problem (d = 2, m = 3) and its initialisation."""
    rng = np.random.default_rng(23)
    X = rng.standard_normal((n, 2))
    y = np.where(rng.standard_normal(n) > 0, 1.0, -1.0) if loss != "square" else rng.standard_normal(n)
    prob = fl.Problem(X, y, loss=loss, reduction=reduction, activation="leaky_relu", leak=0.1, bias=bias,
                      train_outer=train_outer, weight_decay=lam)
    p0 = fl.Params(W=rng.standard_normal((3, 2)), b=rng.standard_normal(3) if bias else None,
                   a=rng.standard_normal(3))
    return prob, p0


def flip_tuples(result):
    return [(f.k, f.neuron, f.sample, f.side) for f in result.flips]


def min_margin(result):
    """Smallest |z_ij| over the recorded iterates: a side decided by rounding would need it near 1e-15."""
    Xa = result.problem.augmented_inputs
    return float(np.min(np.abs(np.einsum("kjq,iq->kij", result.states_float()[:, :, :-1], Xa))))


# --------------------------------------------------------------------------------------------------------------
# the batches
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("replacement", [False, True])
@pytest.mark.parametrize("n, batch_size", [(5, 1), (5, 2), (7, 3), (6, 6), (4, 3)])
def test_batch_stream_draws_the_documented_sequence_whatever_the_chunks(n, batch_size, replacement):
    from flowlib.descent import _BatchStream

    expected = reference_batches(n, batch_size, replacement, 42, 300)
    stream = _BatchStream(n, batch_size, replacement, 42)
    rng = np.random.default_rng(0)
    k, got = 0, []
    while k < 300:
        count = min(int(rng.integers(0, 40)), 300 - k)
        flat, offsets = stream.take(k, count)
        taken = min(count, int(rng.integers(0, count + 1)))  # a chunk may stop before its end
        got.extend(flat[offsets[s]:offsets[s + 1]] for s in range(taken))
        k += taken
    assert len(got) == 300
    for mine, theirs in zip(got, expected):
        assert mine.dtype == np.int64 and mine.tolist() == sorted(theirs.tolist())


# --------------------------------------------------------------------------------------------------------------
# float64 against numpy
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("replacement", [False, True])
@pytest.mark.parametrize("train_outer", [True, False])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_float64_matches_numpy_loop(reduction, bias, train_outer, replacement):
    prob, p0 = sgd_problem(reduction, bias, train_outer, lam=0.02)
    lr, steps, batch_size = (0.05 if reduction == "mean" else 0.01), 200, 2
    ref, flips = numpy_sgd(prob, p0, lr, steps, batch_size, replacement, seed=3)
    sgd = fl.stochastic_gradient_descent(prob, p0, lr, steps, batch_size=batch_size, replacement=replacement, seed=3)
    assert sgd.status == "success" and sgd.iterations.tolist() == list(range(steps + 1))
    assert (sgd.method, sgd.batch_size, sgd.replacement, sgd.seed) == ("sgd", 2, replacement, 3)
    assert relative(sgd.states, ref) <= 1e-13
    assert relative(sgd.loss, [numpy_objective(prob, s) for s in ref]) <= 1e-13
    assert min_margin(sgd) > 1e-10  # no side decided by rounding, so the flip logs must agree exactly
    assert flip_tuples(sgd) == flips
    if not train_outer:
        assert np.all(sgd.states[:, :, -1] == p0.a)
    if not bias:
        assert np.all(sgd.states[:, :, -2] == 0.0)
    # a different seed draws other batches, and so other iterates
    other = fl.stochastic_gradient_descent(prob, p0, lr, steps, batch_size=batch_size, replacement=replacement,
                                           seed=4)
    assert relative(other.states, ref) > 1e-6


@pytest.mark.parametrize("loss", ["square", "exp"])
@pytest.mark.parametrize("batch_size, replacement", [(1, False), (3, True), (4, False)])
def test_other_losses_and_batch_sizes_match_numpy_loop(loss, batch_size, replacement):
    prob, p0 = sgd_problem("mean", True, True, loss=loss, lam=0.1, n=7)
    ref, flips = numpy_sgd(prob, p0, 0.02, 200, batch_size, replacement, seed=9)
    sgd = fl.stochastic_gradient_descent(prob, p0, 0.02, 200, batch_size=batch_size, replacement=replacement,
                                         seed=9, record_every=50)
    assert sgd.iterations.tolist() == [0, 50, 100, 150, 200]
    assert relative(sgd.states, ref[sgd.iterations]) <= 1e-13
    assert relative(sgd.loss, [numpy_objective(prob, s) for s in ref[sgd.iterations]]) <= 1e-13
    assert flip_tuples(sgd) == flips


def test_selection_is_used_at_exact_zero():
    # x_0 = (1, 1) on the hyperplane of w = (1, -1) (z_0 = 0), x_1 = (1, 0) active; square loss, sum over n = 2.
    # A batch {0} of one sample weighs it by n / |B| = 2: G_0 = 2 (f_0 - y_0) = -2, and w moves by
    # -lr * a * s * G_0 * x_0 = (1/2) * 2 s (1, 1) = (s, s) with lr = 1/2.
    prob = fl.Problem(X=[[1.0, 1.0], [1.0, 0.0]], y=[1.0, -1.0], loss="square", reduction="sum", bias=False,
                      train_outer=True)
    p0 = fl.Params(W=[[1.0, -1.0]], b=None, a=[1.0])
    seed = next(s for s in range(100) if reference_batches(2, 1, False, s, 1)[0].tolist() == [0])
    for dps in (None, 30):
        sgd = fl.stochastic_gradient_descent(prob, p0, 0.5, 1, batch_size=1, seed=seed, selection=0.5, dps=dps)
        assert [float(v) for v in sgd.states[-1, 0]] == [1.5, -0.5, 0.0, 1.0]


# --------------------------------------------------------------------------------------------------------------
# batch_size = n is gradient descent
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dps", [None, 30])
@pytest.mark.parametrize("reduction, bias, lam", [("mean", True, 0.0), ("sum", False, 0.0), ("mean", False, 0.05),
                                                  ("sum", True, 0.05)])
def test_full_batch_without_replacement_is_gradient_descent_bit_for_bit(reduction, bias, lam, dps):
    prob, p0 = sgd_problem(reduction, bias, True, lam=lam)
    steps = 300 if dps is None else 30
    gd = fl.gradient_descent(prob, p0, 0.02, steps, dps=dps, record_every=7)
    for seed in (0, 5):
        sgd = fl.stochastic_gradient_descent(prob, p0, 0.02, steps, batch_size=prob.n, seed=seed, dps=dps,
                                             record_every=7)
        assert np.array_equal(sgd.iterations, gd.iterations)
        assert sgd.states.dtype == gd.states.dtype
        if dps is None:
            assert np.array_equal(sgd.states.view(np.uint64), gd.states.view(np.uint64))
            assert np.array_equal(sgd.loss.view(np.uint64), gd.loss.view(np.uint64))
        else:
            assert all(u == v for u, v in zip(sgd.states.ravel(), gd.states.ravel()))
            assert all(u == v for u, v in zip(sgd.loss, gd.loss))
        assert sgd.flips == gd.flips


# --------------------------------------------------------------------------------------------------------------
# mpmath
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("replacement", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_mpmath_30_digits_matches_float64(reduction, replacement):
    prob, p0 = sgd_problem(reduction, True, True, lam=0.05)
    lr = 0.05 if reduction == "mean" else 0.01
    sgd64 = fl.stochastic_gradient_descent(prob, p0, lr, 400, batch_size=2, replacement=replacement, seed=1)
    sgdmp = fl.stochastic_gradient_descent(prob, p0, lr, 400, batch_size=2, replacement=replacement, seed=1, dps=30,
                                           record_every=50)
    assert sgdmp.status == "success" and sgdmp.dps == 30 and sgdmp.states.dtype == object
    rows = sgdmp.iterations
    assert relative(sgd64.states[rows], sgdmp.states_float()) <= 1e-12
    assert relative(sgd64.loss[rows], np.array([float(v) for v in sgdmp.loss])) <= 1e-12
    assert min_margin(sgd64) > 1e-10
    assert flip_tuples(sgd64) == flip_tuples(sgdmp)


@pytest.mark.parametrize("reduction, bias, train_outer, replacement, lam", [
    ("mean", True, True, False, 0.05), ("sum", False, True, True, 0.0), ("mean", True, False, True, 0.1),
    ("sum", True, True, False, 0.02)])
def test_mpmath_40_digits_matches_plain_mpmath_loop(reduction, bias, train_outer, replacement, lam):
    prob, p0 = sgd_problem(reduction, bias, train_outer, lam=lam)
    lr, steps, dps = (0.05 if reduction == "mean" else 0.01), 40, 40
    ref, _ = mp_descent(prob, p0, lr, reference_batches(prob.n, 2, replacement, 6, steps), dps)
    sgd = fl.stochastic_gradient_descent(prob, p0, lr, steps, batch_size=2, replacement=replacement, seed=6, dps=dps,
                                         record_every=5)
    assert isinstance(sgd.states[-1, 0, 0], mp.mpf)
    with mp.workdps(dps):
        for row, k in enumerate(sgd.iterations):
            scale = max(abs(v) for r in ref[k] for v in r)
            err = max(abs(sgd.states[row, j, q] - ref[k][j][q]) for j in range(3) for q in range(4))
            assert err <= mp.mpf("1e-35") * scale, (k, err)


# --------------------------------------------------------------------------------------------------------------
# chunks, statuses, interruption
# --------------------------------------------------------------------------------------------------------------
def test_record_every_and_chunking_do_not_change_the_iterates():
    prob, p0 = sgd_problem("mean", True, True, lam=0.01, n=9)
    every = fl.stochastic_gradient_descent(prob, p0, 1e-3, 200_000, batch_size=4, seed=2)
    sparse = fl.stochastic_gradient_descent(prob, p0, 1e-3, 200_000, batch_size=4, seed=2, record_every=997)
    assert sparse.iterations.tolist() == list(range(0, 200_000, 997)) + [200_000]
    assert np.array_equal(every.states[sparse.iterations], sparse.states)
    assert np.array_equal(every.loss[sparse.iterations], sparse.loss)
    assert every.flips == sparse.flips


@pytest.mark.parametrize("dps", [None, 20])
def test_callback_stop_then_a_shorter_run_agrees(dps):
    prob, p0 = sgd_problem("sum", True, True, lam=0.01)
    seen = []

    def stop(progress):
        seen.append(progress.done)
        return len(seen) == 2

    steps = 10**7 if dps is None else 10**5
    sgd = fl.stochastic_gradient_descent(prob, p0, 1e-6, steps, batch_size=3, replacement=True, seed=8, dps=dps,
                                         callback=stop, record_every=10)
    assert sgd.status == "interrupted" and sgd.steps == seen[-1] and 0 < sgd.steps < steps
    again = fl.stochastic_gradient_descent(prob, p0, 1e-6, sgd.steps, batch_size=3, replacement=True, seed=8,
                                           dps=dps, record_every=10)
    assert np.array_equal(again.iterations, sgd.iterations)
    assert all(u == v for u, v in zip(again.states.ravel(), sgd.states.ravel()))


@pytest.mark.parametrize("dps", [None, 20])
def test_ctrl_c_interrupts_between_chunks(dps):
    prob, p0 = sgd_problem()
    sent = []

    def press_ctrl_c(progress):
        if not sent:
            sent.append(progress.done)
            os.kill(os.getpid(), signal.SIGINT)

    before = signal.getsignal(signal.SIGINT)
    sgd = fl.stochastic_gradient_descent(prob, p0, 1e-6, 10**7, batch_size=2, dps=dps, callback=press_ctrl_c)
    assert sgd.status == "interrupted" and sgd.steps == sent[0] and sgd.iterations[-1] == sgd.steps
    assert signal.getsignal(signal.SIGINT) is before


def test_divergence_and_max_events():
    prob, p0 = sgd_problem("sum", True, True, loss="square")
    bad = fl.stochastic_gradient_descent(prob, p0, 50.0, 10_000, batch_size=2)
    assert bad.status == "failed" and bad.steps < 10_000 and np.all(np.isfinite(bad.states))
    capped = fl.stochastic_gradient_descent(prob, p0, 0.05, 100_000, batch_size=1, max_events=5)
    assert capped.status == "max_events" and capped.n_flips >= 5 and capped.flips[-1].k == capped.steps


def test_steps_zero_and_progress_bar():
    prob, p0 = sgd_problem()
    sgd = fl.stochastic_gradient_descent(prob, p0, 0.1, 0, batch_size=2)
    assert sgd.status == "success" and sgd.iterations.tolist() == [0] and np.array_equal(sgd.states[0], p0.packed())
    assert fl.stochastic_gradient_descent(prob, p0, 0.01, 100, batch_size=2, progress=True).status == "success"


# --------------------------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, name", [
    ({"batch_size": 0}, "batch_size"), ({"batch_size": 6}, "batch_size"), ({"batch_size": 2.0}, "batch_size"),
    ({"batch_size": True}, "batch_size"), ({"batch_size": "2"}, "batch_size"), ({"batch_size": -1}, "batch_size"),
    ({"replacement": 1}, "replacement"), ({"replacement": "no"}, "replacement"), ({"replacement": None}, "replacement"),
    ({"seed": -1}, "seed"), ({"seed": 1.5}, "seed"), ({"seed": None}, "seed"), ({"seed": True}, "seed"),
    ({"seed": "0"}, "seed"),
    ({"lr": 0.0}, "lr"), ({"lr": float("nan")}, "lr"), ({"steps": -1}, "steps"), ({"record_every": 0}, "record_every"),
    ({"dps": 15}, "dps"), ({"selection": 2.0}, "selection"), ({"max_events": 0}, "max_events"),
    ({"callback": 3}, "callback"), ({"progress": "yes"}, "progress"),
])
def test_bad_arguments_raise_naming_them(kwargs, name):
    prob, p0 = sgd_problem()  # n = 5
    args = {"lr": 0.1, "steps": 10, "batch_size": 2}
    args.update(kwargs)
    lr, steps = args.pop("lr"), args.pop("steps")
    with pytest.raises(ValueError, match=name):
        fl.stochastic_gradient_descent(prob, p0, lr, steps, **args)


def test_batch_size_is_required_and_numpy_integers_are_accepted():
    prob, p0 = sgd_problem()
    with pytest.raises(TypeError, match="batch_size"):
        fl.stochastic_gradient_descent(prob, p0, 0.1, 10)
    a = fl.stochastic_gradient_descent(prob, p0, 0.1, 10, batch_size=np.int64(2), seed=np.uint8(3),
                                       replacement=np.bool_(True))
    b = fl.stochastic_gradient_descent(prob, p0, 0.1, 10, batch_size=2, seed=3, replacement=True)
    assert np.array_equal(a.states, b.states) and a.options == b.options
    with pytest.raises(ValueError, match="problem"):
        fl.stochastic_gradient_descent("p", p0, 0.1, 10, batch_size=2)
    with pytest.raises(ValueError, match="params0"):
        fl.stochastic_gradient_descent(prob, None, 0.1, 10, batch_size=2)


# --------------------------------------------------------------------------------------------------------------
# results: save / load, text, comparison with the flow
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dps", [None, 25])
def test_save_load(tmp_path, dps):
    prob, p0 = sgd_problem("sum", True, False, lam=0.05)
    sgd = fl.stochastic_gradient_descent(prob, p0, 0.01, 60, batch_size=3, replacement=True, seed=12, dps=dps,
                                         record_every=7, selection=0.5)
    back = fl.load(sgd.save(tmp_path / "sgd"))
    assert isinstance(back, fl.DescentResult)
    assert (back.method, back.batch_size, back.replacement, back.seed) == ("sgd", 3, True, 12)
    assert back.options == sgd.options and back.problem.to_dict() == prob.to_dict()
    assert np.array_equal(back.iterations, sgd.iterations) and back.flips == sgd.flips
    with mp.workdps(60):
        assert all(u == v for u, v in zip(back.states.ravel(), sgd.states.ravel()))
        assert all(u == v for u, v in zip(back.loss, sgd.loss))
    assert back.summary() == sgd.summary()
    assert repr(back) == repr(sgd)


def test_text_says_what_ran():
    prob, p0 = sgd_problem()
    sgd = fl.stochastic_gradient_descent(prob, p0, 0.1, 20, batch_size=2, seed=4)
    assert "stochastic gradient descent (batch 2 of n = 5, without replacement, seed 4)" in sgd.summary()
    assert "method='sgd'" in repr(sgd) and "batch_size=2" in repr(sgd) and "seed=4" in repr(sgd)
    gd = fl.gradient_descent(prob, p0, 0.1, 20)
    assert (gd.method, gd.batch_size, gd.replacement, gd.seed) == ("gd", 5, None, None)
    assert "stochastic" not in gd.summary() and "sgd" not in repr(gd)


def test_compare_with_the_flow():
    prob, p0 = sgd_problem("mean", True, True)
    lr, steps = 1e-3, 2000
    flow = fl.gradient_flow(prob, p0, lr * steps)
    sgd = fl.stochastic_gradient_descent(prob, p0, lr, steps, batch_size=2, seed=0, record_every=100)
    cmp = fl.compare(flow, sgd)
    assert cmp.lr == lr and cmp.iterations.tolist() == sgd.iterations.tolist()
    flow_states = flow.states_at(sgd.times)
    expected = np.max(np.abs(sgd.states - flow_states), axis=(1, 2))
    np.testing.assert_allclose(cmp.distance, expected, rtol=0, atol=1e-12 * np.max(np.abs(flow_states)))
    assert cmp.distance[0] == 0.0 and cmp.max_distance > 0.0
    # the full batch is gradient descent: the same comparison, number for number
    full = fl.compare(flow, fl.stochastic_gradient_descent(prob, p0, lr, steps, batch_size=prob.n, record_every=100))
    gd = fl.compare(flow, fl.gradient_descent(prob, p0, lr, steps, record_every=100))
    assert np.array_equal(full.distance, gd.distance)
