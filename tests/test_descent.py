"""Gradient descent (float64 kernel and mpmath) against independent references.

References: a straightforward mpmath loop written here from docs/design.md, Model and loss (sharing no code with
flowlib), a direct numpy loop for the flip log, hand-computed single steps for sigma'(0), and the two backends
against each other.
"""

import math
import os
import signal

import mpmath as mp
import numpy as np
import pytest

import flowlib as fl
from flowlib import examples


# --------------------------------------------------------------------------------------------------------------
# independent references
# --------------------------------------------------------------------------------------------------------------
def mp_reference(prob, p0, lr, steps, dps, selection=None):
    """Plain mpmath gradient descent: W, b, a as separate lists, derivatives written out per parameter.

    Returns the states ``[(W, b, a)]`` at every iterate (lists of mpf) and the flips ``(k, j, i, side)``.
    """
    selection = prob.leak if selection is None else selection
    with mp.workdps(dps):
        X = [[mp.mpf(float(v)) for v in row] for row in prob.X]
        Y = [mp.mpf(float(v)) for v in prob.y]
        n, d = len(X), len(X[0])
        weight = 1 / mp.mpf(n) if prob.reduction == "mean" else mp.mpf(1)
        alpha, s0, eta = mp.mpf(float(prob.leak)), mp.mpf(float(selection)), mp.mpf(float(lr))
        W = [[mp.mpf(float(v)) for v in row] for row in p0.W]
        b = [mp.mpf(float(v)) for v in (p0.b if p0.b is not None else np.zeros(len(p0.a)))]
        a = [mp.mpf(float(v)) for v in p0.a]
        m = len(a)

        def pre(W, b):
            return [[mp.fsum([W[j][q] * X[i][q] for q in range(d)]) + b[j] for j in range(m)] for i in range(n)]

        def act(u):
            return u if u > 0 else alpha * u

        def dact(u):
            return mp.mpf(1) if u > 0 else (alpha if u < 0 else s0)

        def dloss(f, t):  # d l / d f
            if prob.loss == "square":
                return f - t
            if prob.loss == "exp":
                return -t * mp.exp(-t * f)
            e = mp.exp(-t * f)
            return -t * e / (1 + e)

        history = [([list(r) for r in W], list(b), list(a))]
        flips = []
        side = [[u > 0 for u in row] for row in pre(W, b)]
        for k in range(1, steps + 1):
            Z = pre(W, b)
            F = [mp.fsum([a[j] * act(Z[i][j]) for j in range(m)]) for i in range(n)]
            D = [weight * dloss(F[i], Y[i]) for i in range(n)]
            gW = [[mp.fsum([D[i] * a[j] * dact(Z[i][j]) * X[i][q] for i in range(n)]) for q in range(d)]
                  for j in range(m)]
            gb = [mp.fsum([D[i] * a[j] * dact(Z[i][j]) for i in range(n)]) for j in range(m)]
            ga = [mp.fsum([D[i] * act(Z[i][j]) for i in range(n)]) for j in range(m)]
            W = [[W[j][q] - eta * gW[j][q] for q in range(d)] for j in range(m)]
            if prob.bias:
                b = [b[j] - eta * gb[j] for j in range(m)]
            if prob.train_outer:
                a = [a[j] - eta * ga[j] for j in range(m)]
            history.append(([list(r) for r in W], list(b), list(a)))
            for i, row in enumerate(pre(W, b)):
                for j, u in enumerate(row):
                    if (u > 0) != side[i][j]:
                        side[i][j] = u > 0
                        flips.append((k, j, i, 1 if u > 0 else -1))
    return history, flips


def packed(state):
    W, b, a = state
    return [list(W[j]) + [b[j], a[j]] for j in range(len(a))]


def numpy_descent(prob, p0, lr, steps, selection=0.0):
    """Direct numpy loop (float64): final packed state and flips ``(k, j, i, side)``."""
    X, y, leak = prob.X, prob.y, prob.leak
    c = prob.scale
    W, a = p0.W.copy(), p0.a.copy()
    b = np.zeros(len(a)) if p0.b is None else p0.b.copy()
    side = (X @ W.T + b) > 0
    flips = []
    for k in range(1, steps + 1):
        Z = X @ W.T + b
        S = np.where(Z > 0, 1.0, np.where(Z < 0, leak, selection))
        H = np.where(Z > 0, Z, leak * Z)
        f = H @ a
        if prob.loss == "square":
            D = c * (f - y)
        elif prob.loss == "exp":
            D = -c * y * np.exp(-y * f)
        else:
            D = -c * y / (1.0 + np.exp(y * f))
        M = D[:, None] * S * a[None, :]  # (n, m)
        gW, gb, ga = M.T @ X, M.sum(axis=0), H.T @ D
        W = W - lr * gW
        if prob.bias:
            b = b - lr * gb
        if prob.train_outer:
            a = a - lr * ga
        new = (X @ W.T + b) > 0
        for i, j in zip(*np.nonzero(new != side)):
            flips.append((k, int(j), int(i), 1 if new[i, j] else -1))
        side = new
    return np.column_stack([W, b, a]), flips


def flip_tuples(result):
    return [(f.k, f.neuron, f.sample, f.side) for f in result.flips]


def leaky_problem(loss="logistic"):
    """Random leaky-ReLU problem with bias and a trained outer layer (n = 4, d = 2, m = 3)."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((4, 2))
    y = np.array([1.0, -1.0, 1.0, -1.0]) if loss != "square" else rng.standard_normal(4)
    prob = fl.Problem(X, y, loss=loss, reduction="mean", activation="leaky_relu", leak=0.1, bias=True,
                      train_outer=True)
    return prob, examples.random_init(3, 2, seed=8, bias=True)


def e1_problem():
    """E1 (``tests.oracles.exact.e1_exact``): L = 1/4 sum (relu(<w, x_k>) - y_k)^2 (square, mean over n = 2)."""
    prob = fl.Problem(X=[[1.0, 0.0], [0.5, math.sqrt(3.0) / 2.0]], y=[-1.0, 1.0], loss="square", reduction="mean",
                      bias=False, train_outer=False)
    return prob, fl.Params(W=[[1.0, 0.5]], b=None, a=[1.0])


PROBLEMS = {
    "gd-rate (exp, bias, fixed a)": lambda: examples.gd_rate_network(2.0, 3.0, -2.0, 3.1),
    "leaky logistic (bias, trained a)": leaky_problem,
    "three points (square, bias, trained a)": lambda: examples.three_points(5, seed=3),
}


# --------------------------------------------------------------------------------------------------------------
# mpmath descent against the independent mpmath loop
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(PROBLEMS))
def test_mpmath_descent_matches_independent_loop(name):
    prob, p0 = PROBLEMS[name]()
    lr, steps, dps = (0.1 if "three" in name else 0.01), 1000, 40
    history, flips = mp_reference(prob, p0, lr, steps, dps)
    gd = fl.gradient_descent(prob, p0, lr, steps, dps=dps, record_every=100)
    assert gd.status == "success" and gd.steps == steps and gd.dps == dps
    assert gd.iterations.tolist() == list(range(0, steps + 1, 100))
    assert gd.states.dtype == object and isinstance(gd.states[-1, 0, 0], mp.mpf)
    with mp.workdps(dps):
        worst = mp.mpf(0)
        for row, k in enumerate(gd.iterations):
            ref = packed(history[k])
            scale = max(abs(v) for r in ref for v in r)
            err = max(abs(gd.states[row, j, q] - ref[j][q]) for j in range(len(ref)) for q in range(len(ref[0])))
            worst = max(worst, err / scale)
        assert worst <= mp.mpf("1e-35"), (name, worst)
    assert flip_tuples(gd) == flips


def test_mpmath_descent_independent_loop_through_crossings():
    prob, p0 = examples.os_logistic(m=3, n=4, d=2, scale=0.1, seed=2)
    history, flips = mp_reference(prob, p0, 0.05, 400, 40, selection=0.5)
    gd = fl.gradient_descent(prob, p0, 0.05, 400, dps=40, selection=0.5, record_every=400)
    assert len(flips) >= 3  # the run crosses hyperplanes
    assert flip_tuples(gd) == flips
    with mp.workdps(40):
        ref = packed(history[-1])
        scale = max(abs(v) for r in ref for v in r)
        assert max(abs(gd.states[-1, j, q] - ref[j][q]) for j in range(3) for q in range(4)) <= 1e-35 * scale


# --------------------------------------------------------------------------------------------------------------
# float64 against mpmath
# --------------------------------------------------------------------------------------------------------------
def _min_margin(gd64):
    """Smallest |z_ij| over the recorded iterates: a flip decided by rounding would need it near 1e-14."""
    Xa = gd64.problem.augmented_inputs
    return float(np.min(np.abs(np.einsum("kjq,iq->kij", gd64.states[:, :, :-1], Xa))))


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_float64_matches_mpmath(name):
    # the leaky problem chatters (about 9600 flips in 10^4 steps, |z| down to ~5e-9): float64 and 30-digit mpmath
    # still put every iterate on the same side and agree to 1e-12
    prob, p0 = PROBLEMS[name]()
    lr, steps = (0.1 if "three" in name else 0.01), 10_000
    gd64 = fl.gradient_descent(prob, p0, lr, steps)
    gdmp = fl.gradient_descent(prob, p0, lr, steps, dps=30, record_every=100)
    assert gd64.status == gdmp.status == "success"
    assert flip_tuples(gd64) == flip_tuples(gdmp)
    assert _min_margin(gd64) > 1e-10  # no tie within rounding: a flip decided by rounding needs |z| ~ 1e-15
    rows = gdmp.iterations
    assert np.array_equal(gd64.iterations[rows], rows)
    exact = gdmp.states_float()
    assert np.max(np.abs(gd64.states[rows] - exact)) <= 1e-12 * np.max(np.abs(exact))
    loss_exact = np.array([float(v) for v in gdmp.loss])
    assert np.max(np.abs(gd64.loss[rows] - loss_exact)) <= 1e-12 * np.max(np.abs(loss_exact))


# --------------------------------------------------------------------------------------------------------------
# flips, records, loss
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["os-logistic", "leaky", "e1"])
def test_flips_match_numpy_loop(case):
    if case == "os-logistic":
        (prob, p0), lr, steps = examples.os_logistic(), 1e-2, 300
    elif case == "leaky":
        (prob, p0), lr, steps = leaky_problem(), 0.05, 2000
    else:
        (prob, p0), lr, steps = e1_problem(), 1e-2, 1000
    final, flips = numpy_descent(prob, p0, lr, steps)
    gd = fl.gradient_descent(prob, p0, lr, steps, record_every=steps)
    assert len(flips) >= 5
    assert flip_tuples(gd) == flips
    assert np.max(np.abs(gd.states[-1] - final)) <= 1e-13 * np.max(np.abs(final))


def test_flip_log_is_a_sequence_of_flips():
    """``DescentResult.flips`` keeps the flips as arrays and makes :class:`Flip` objects on access."""
    (prob, p0), lr, steps = examples.os_logistic(), 1e-2, 300
    gd = fl.gradient_descent(prob, p0, lr, steps)
    log = gd.flips
    as_tuple = tuple(log)
    assert isinstance(log, fl.FlipLog) and len(log) == len(as_tuple) == gd.n_flips >= 5
    assert log == as_tuple and log == list(as_tuple) and log != as_tuple[:-1] and log[:-1] == as_tuple[:-1]
    assert log[-1] == as_tuple[-1] == fl.Flip(int(log.k[-1]), int(log.neuron[-1]), int(log.sample[-1]),
                                              int(log.side[-1]))
    assert isinstance(log[1:3], fl.FlipLog) and tuple(log[1:3]) == as_tuple[1:3]
    assert np.all(np.diff(log.k) >= 0) and set(log.side.tolist()) <= {-1, 1}
    assert fl.FlipLog() == () and len(fl.FlipLog()) == 0
    with pytest.raises(ValueError, match="same length"):
        fl.FlipLog([1, 2], [0], [0], [1])
    with pytest.raises(IndexError):
        log[len(log)]


def test_loss_records_match_numpy():
    prob, p0 = leaky_problem("square")
    gd = fl.gradient_descent(prob, p0, 0.05, 200, record_every=20)
    for k, state, loss in zip(gd.iterations, gd.states, gd.loss):
        Z = prob.X @ state[:, :2].T + state[:, 2]
        f = np.where(Z > 0, Z, 0.1 * Z) @ state[:, 3]
        assert loss == pytest.approx(np.mean(0.5 * (f - prob.y) ** 2), rel=1e-14), k
    assert np.all(np.diff(gd.loss) < 0)  # small steps on a smooth-enough loss: monotone here


def test_record_every_and_chunking_do_not_change_the_iterates():
    prob, p0 = e1_problem()
    every = fl.gradient_descent(prob, p0, 1e-4, 100_000)
    sparse = fl.gradient_descent(prob, p0, 1e-4, 100_000, record_every=997)
    assert sparse.iterations.tolist() == list(range(0, 100_000, 997)) + [100_000]
    assert np.array_equal(every.states[sparse.iterations], sparse.states)
    assert np.array_equal(every.loss[sparse.iterations], sparse.loss)
    assert flip_tuples(every) == flip_tuples(sparse)
    assert every.n_flips == 10211  # E1 at lr = 1e-4, as measured independently
    np.testing.assert_array_equal(every.times[:3], [0.0, 1e-4, 2e-4])
    assert every.params_at(997).W[0, 0] == every.states[997, 0, 0]
    with pytest.raises(ValueError, match="k"):
        sparse.params_at(998)
    with pytest.raises(ValueError, match="k"):
        sparse.params_at(1.0)
    assert np.array_equal(sparse.final.W, every.states[-1, :, :2])
    assert sparse.final.b is None


def test_initial_state_is_kept_and_steps_zero():
    prob, p0 = leaky_problem()
    gd = fl.gradient_descent(prob, p0, 0.1, 0)
    assert gd.status == "success" and gd.steps == 0 and gd.iterations.tolist() == [0]
    assert np.array_equal(gd.states[0], p0.packed())
    assert gd.flips == ()


def test_descent_bundles_fix_their_types():
    """The builders give every field of the descent bundles one type: integer or float32 options run the kernel's
    one compiled specialisation, with the numbers of float64 options (and of :func:`flowlib.gradient_descent`)."""
    from flowlib.flow import kernel_network
    from flowlib.kernels import bundles
    from flowlib.kernels import descent as kdescent
    from flowlib.kernels import status as kstatus

    prob, p0 = examples.os_logistic()
    mixed = bundles.descent(0, np.int64(1), np.float32(2.0))
    assert mixed == (0.0, 1.0, 2.0) and all(type(v) is float for v in mixed)
    records, flips = bundles.iterate_log(3, 6, 4), bundles.flip_log(5)
    assert [c.dtype for c in records] == [np.int64, np.float64, np.float64] and records.P.shape == (3, 6, 4)
    assert [c.dtype for c in flips] == [np.int64, np.int64, np.int64, np.int8] and len(flips.side) == 5

    def run(descent):
        net, P = kernel_network(prob), p0.packed()
        active = np.empty((prob.n, len(P)), dtype=np.bool_)
        kdescent.activation_sides(net.Xa, P, active)
        records, flips = bundles.iterate_log(12, *P.shape), bundles.flip_log(100 + active.size)
        code, k, r, e = kdescent.descend_chunk(net, descent, P, active, None, None, 0, 10, 10, 1, 100, records,
                                               flips)
        return (code, k, r, e), P, records, flips

    reference = run(bundles.descent(0.0, 1.0, 1.0))
    compiled = len(kdescent.descend_chunk.signatures)
    given = run(mixed)
    assert len(kdescent.descend_chunk.signatures) == compiled
    (code, k, r, e), P, records, flips = reference
    assert given[0] == (code, k, r, e) == (kstatus.SUCCESS, 10, 10, e) and e > 0
    assert np.array_equal(given[1], P)
    for ours, theirs in zip(given[2], records):
        assert np.array_equal(ours[:r], theirs[:r])
    for ours, theirs in zip(given[3], flips):
        assert np.array_equal(ours[:e], theirs[:e])
    gd = fl.gradient_descent(prob, p0, 1, 10)
    assert np.array_equal(gd.states[1:], records.P[:r]) and np.array_equal(gd.loss[1:], records.loss[:r])
    assert np.array_equal(gd.flips.k, flips.k[:e]) and np.array_equal(gd.flips.side, flips.side[:e])


# --------------------------------------------------------------------------------------------------------------
# sigma'(0)
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dps", [None, 30])
@pytest.mark.parametrize("selection, expected_w", [(0.0, [0.0, -1.0]), (1.0, [0.5, -0.5]), (0.5, [0.25, -0.75])])
def test_selection_at_exact_zero(dps, selection, expected_w):
    # x_0 = (1, 1) sits exactly on the neuron's hyperplane (z_0 = 0), x_1 = (1, 0) is active (z_1 = 1).
    # Square loss (sum), y = (1, -1): G_0 = f_0 - 1 = -1, G_1 = 1 + 1 = 2; one step of lr = 1/2 moves w by
    # -(1/2) (2 x_1 + s G_0 x_0) = (-1 + s/2, s/2), and a by -(1/2) (G_1 z_1) = -1 (z_0 = 0 adds nothing).
    prob = fl.Problem(X=[[1.0, 1.0], [1.0, 0.0]], y=[1.0, -1.0], loss="square", reduction="sum", bias=False,
                      train_outer=True)
    gd = fl.gradient_descent(prob, fl.Params(W=[[1.0, -1.0]], b=None, a=[1.0]), 0.5, 1, dps=dps,
                             selection=selection)
    assert gd.selection == selection
    assert [float(v) for v in gd.states[-1, 0]] == expected_w + [0.0, 0.0]


def test_selection_defaults_to_leak():
    prob = fl.Problem(X=[[1.0, 1.0], [1.0, 0.0]], y=[1.0, -1.0], loss="square", reduction="sum",
                      activation="leaky_relu", leak=0.25, bias=False, train_outer=False)
    gd = fl.gradient_descent(prob, fl.Params(W=[[1.0, -1.0]], b=None, a=[1.0]), 0.5, 1)
    assert gd.selection == 0.25
    # w - (1/2) (2 x_1 + 0.25 (-1) x_0) = (1, -1) - (1/2) (1.75, -0.25)
    assert gd.states[-1, 0, :2].tolist() == [0.125, -0.875]


# --------------------------------------------------------------------------------------------------------------
# statuses
# --------------------------------------------------------------------------------------------------------------
def test_divergence_stops_with_failed_and_finite_state():
    prob, p0 = leaky_problem("square")
    gd = fl.gradient_descent(prob, p0, 50.0, 10_000)
    assert gd.status == "failed" and "finite" in gd.message
    assert gd.steps < 10_000 and gd.iterations[-1] == gd.steps
    assert np.all(np.isfinite(gd.states))


@pytest.mark.parametrize("dps", [None, 20])
def test_max_events_budgets_the_flips(dps):
    prob, p0 = e1_problem()
    gd = fl.gradient_descent(prob, p0, 1e-3, 10_000, max_events=5, dps=dps)
    assert gd.status == "max_events" and gd.message.startswith("max_events = 5 used up at iteration ")
    assert 5 <= gd.n_flips <= 6  # one neuron, two samples: at most two flips per iterate
    assert gd.iterations[-1] == gd.steps == gd.flips[-1].k


def test_callback_interrupts_and_the_partial_run_is_consistent():
    prob, p0 = e1_problem()
    seen = []

    def stop(progress):
        seen.append(progress)
        return True

    gd = fl.gradient_descent(prob, p0, 1e-6, 10**7, callback=stop, record_every=100)
    assert gd.status == "interrupted" and 0 < gd.steps < 10**7
    assert seen == [fl.Progress("descent", gd.steps, 10**7, gd.steps, gd.n_flips)]
    assert gd.iterations[-1] == gd.steps  # the last iterate is always recorded
    again = fl.gradient_descent(prob, p0, 1e-6, gd.steps, record_every=100)
    assert np.array_equal(again.states, gd.states)


@pytest.mark.parametrize("dps", [None, 20])
def test_ctrl_c_interrupts_between_chunks(dps):
    prob, p0 = e1_problem()
    sent = []

    def press_ctrl_c(progress):
        if not sent:
            sent.append(progress.done)
            os.kill(os.getpid(), signal.SIGINT)

    before = signal.getsignal(signal.SIGINT)
    gd = fl.gradient_descent(prob, p0, 1e-6, 10**7, dps=dps, callback=press_ctrl_c)
    assert gd.status == "interrupted" and gd.steps == sent[0] and gd.iterations[-1] == gd.steps
    assert signal.getsignal(signal.SIGINT) is before  # the handler is restored, whatever it was


def test_progress_bar_runs():
    prob, p0 = e1_problem()
    assert fl.gradient_descent(prob, p0, 1e-2, 100, progress=True).status == "success"


# --------------------------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, name", [
    ({"lr": 0.0}, "lr"), ({"lr": -1e-3}, "lr"), ({"lr": float("nan")}, "lr"), ({"lr": float("inf")}, "lr"),
    ({"lr": "0.1"}, "lr"), ({"lr": True}, "lr"),
    ({"steps": -1}, "steps"), ({"steps": 10.0}, "steps"), ({"steps": True}, "steps"),
    ({"record_every": 0}, "record_every"), ({"record_every": 2.5}, "record_every"),
    ({"dps": 15}, "dps"), ({"dps": 30.0}, "dps"),
    ({"selection": -0.1}, "selection"), ({"selection": 1.5}, "selection"), ({"selection": "0"}, "selection"),
    ({"max_events": 0}, "max_events"), ({"callback": 3}, "callback"), ({"until": 0.5}, "until"), ({"progress": "yes"}, "progress"),
])
def test_bad_arguments_raise_naming_them(kwargs, name):
    prob, p0 = e1_problem()
    args = {"lr": 0.1, "steps": 10}
    args.update(kwargs)
    lr, steps = args.pop("lr"), args.pop("steps")
    with pytest.raises(ValueError, match=name):
        fl.gradient_descent(prob, p0, lr, steps, **args)


def test_bad_problem_and_params_raise():
    prob, p0 = e1_problem()
    with pytest.raises(ValueError, match="problem"):
        fl.gradient_descent("E1", p0, 0.1, 10)
    with pytest.raises(ValueError, match="params0"):
        fl.gradient_descent(prob, {"W": [[1.0, 0.5]]}, 0.1, 10)
    with pytest.raises(ValueError, match="W"):
        fl.gradient_descent(prob, fl.Params(W=[[1.0, 0.5, 0.0]], b=None, a=[1.0]), 0.1, 10)
    leaky, q0 = leaky_problem()
    with pytest.raises(ValueError, match="selection"):
        fl.gradient_descent(leaky, q0, 0.1, 10, selection=0.05)  # below leak = 0.1


# --------------------------------------------------------------------------------------------------------------
# save / load
# --------------------------------------------------------------------------------------------------------------
def test_save_load_float64(tmp_path):
    prob, p0 = leaky_problem()
    gd = fl.gradient_descent(prob, p0, 0.05, 500, record_every=7, selection=0.5)
    back = fl.load(gd.save(tmp_path / "gd"))
    assert isinstance(back, fl.DescentResult)
    assert back.problem.to_dict() == prob.to_dict()
    for name in ("iterations", "states", "loss"):
        assert np.array_equal(getattr(back, name), getattr(gd, name)) and getattr(back, name).dtype == \
            getattr(gd, name).dtype
    assert back.flips == gd.flips and len(gd.flips) > 0
    assert (back.lr, back.steps, back.status, back.dps, back.selection, back.options) == \
        (gd.lr, gd.steps, gd.status, None, 0.5, gd.options)
    assert back.summary() == gd.summary()


def test_save_load_mpmath_exact(tmp_path):
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    gd = fl.gradient_descent(prob, p0, 0.01, 50, dps=45, record_every=10)
    back = fl.load(gd.save(tmp_path / "gd.npz"))
    assert back.dps == 45 and back.states.shape == gd.states.shape and back.states.dtype == object
    with mp.workdps(60):  # compare exactly, whatever the ambient precision
        assert all(isinstance(u, mp.mpf) and u == v for u, v in zip(back.states.ravel(), gd.states.ravel()))
        assert all(u == v for u, v in zip(back.loss, gd.loss))
        # the values carry 45 digits, not just float64 ones
        assert any(abs(v - mp.mpf(float(v))) > 0 for v in gd.states.ravel())
    assert back.flips == gd.flips


def test_flip_table_and_summary_text():
    prob, p0 = e1_problem()
    gd = fl.gradient_descent(prob, p0, 0.1, 100)
    table = gd.flip_table(limit=3).splitlines()
    assert len(table) == 5 and table[-1] == "... 8 more"
    assert table[1].split() == ["16", "1.6", "0", "0", "-1"]
    assert "11 flips" in gd.summary() and "float64" in gd.summary()
