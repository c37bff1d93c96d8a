"""Weight decay in gradient descent (float64 kernel and mpmath) against independent references.

The objective is ``L(theta) + lambda/2 |theta|^2`` over the trained parameters only (``W``; ``b`` with bias; ``a``
when the outer layer is trained), and a step is PyTorch's ``torch.optim.SGD(weight_decay=lambda)``:
``theta <- theta - lr (grad L + lambda theta)``. References written here, sharing no code with flowlib: a direct
numpy loop, a plain mpmath loop over lists of mpf, and a step computed by hand.
"""

import mpmath as mp
import numpy as np
import pytest

import flowlib as fl
from numpy_reference import mp_descent, numpy_objective, numpy_step, relative


# --------------------------------------------------------------------------------------------------------------
# independent references
# --------------------------------------------------------------------------------------------------------------
def numpy_decay_descent(prob, p0, lr, steps, selection=None):
    """Direct numpy gradient descent with weight decay: the packed states at every iterate."""
    X = prob.X
    selection = prob.leak if selection is None else selection
    weight = 1.0 / prob.n if prob.reduction == "mean" else 1.0
    W, a = p0.W.copy(), p0.a.copy()
    b = np.zeros(len(a)) if p0.b is None else p0.b.copy()
    states = [np.column_stack([W, b, a])]
    for _ in range(steps):
        W, b, a = numpy_step(prob, W, b, a, X, prob.y, weight, lr, selection)
        states.append(np.column_stack([W, b, a]))
    return np.array(states)


def decay_problem(reduction="mean", train_outer=True, bias=True, loss="logistic", lam=0.05):
    """A random leaky-ReLU problem (n = 5, d = 2, m = 3) with weight decay, and its initialisation."""
    rng = np.random.default_rng(11)
    X = rng.standard_normal((5, 2))
    y = np.array([1.0, -1.0, 1.0, 1.0, -1.0]) if loss != "square" else rng.standard_normal(5)
    prob = fl.Problem(X, y, loss=loss, reduction=reduction, activation="leaky_relu", leak=0.1, bias=bias,
                      train_outer=train_outer, weight_decay=lam)
    p0 = fl.Params(W=rng.standard_normal((3, 2)), b=rng.standard_normal(3) if bias else None,
                   a=rng.standard_normal(3))
    return prob, p0


# --------------------------------------------------------------------------------------------------------------
# float64
# --------------------------------------------------------------------------------------------------------------
def test_one_step_by_hand():
    # X = [(1, 0)], y = 1, square loss (sum), W = (2, 1), a = 1: z = 2, f = 2, G = f - y = 1, so grad_W = (1, 0),
    # grad_a = G z = 2. With lambda = 1/2: W - (1/2) ((1, 0) + (1, 1/2)) = (1, 3/4), a - (1/2) (2 + 1/2) = -1/4.
    # Objective at the start: (2 - 1)^2 / 2 + (1/4) (4 + 1 + 1) = 2; at the end z = 1, f = -1/4:
    # (f - 1)^2 / 2 + (1/4) (1 + 9/16 + 1/16) = 25/32 + 13/32 = 38/32.
    prob = fl.Problem(X=[[1.0, 0.0]], y=[1.0], loss="square", reduction="sum", bias=False, train_outer=True,
                      weight_decay=0.5)
    for dps in (None, 30):
        gd = fl.gradient_descent(prob, fl.Params(W=[[2.0, 1.0]], b=None, a=[1.0]), 0.5, 1, dps=dps)
        assert [float(v) for v in gd.states[-1, 0]] == [1.0, 0.75, 0.0, -0.25]
        assert [float(v) for v in gd.loss] == [2.0, 38.0 / 32.0]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("train_outer", [True, False])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_float64_matches_numpy_loop(reduction, train_outer, bias):
    prob, p0 = decay_problem(reduction, train_outer, bias)
    lr, steps = (0.05 if reduction == "mean" else 0.01), 300
    ref = numpy_decay_descent(prob, p0, lr, steps)
    gd = fl.gradient_descent(prob, p0, lr, steps)
    assert gd.status == "success" and gd.iterations.tolist() == list(range(steps + 1))
    assert relative(gd.states, ref) <= 1e-13
    assert relative(gd.loss, [numpy_objective(prob, s) for s in gd.states]) <= 1e-14
    # the decay has moved the run: without it the iterates differ by far more than rounding
    plain = fl.gradient_descent(fl.Problem(prob.X, prob.y, loss=prob.loss, reduction=reduction,
                                           activation="leaky_relu", leak=0.1, bias=bias, train_outer=train_outer),
                                p0, lr, steps)
    assert relative(plain.states, ref) > 1e-3
    if not train_outer:  # a stays at its initial values, exactly
        assert np.all(gd.states[:, :, -1] == p0.a)
    if not bias:  # b stays 0: neither the loss nor the decay moves it
        assert np.all(gd.states[:, :, -2] == 0.0)


@pytest.mark.parametrize("loss", ["square", "exp"])
def test_other_losses_match_numpy_loop(loss):
    prob, p0 = decay_problem("mean", True, True, loss=loss, lam=0.2)
    ref = numpy_decay_descent(prob, p0, 0.02, 300)
    gd = fl.gradient_descent(prob, p0, 0.02, 300, record_every=50)
    assert relative(gd.states, ref[gd.iterations]) <= 1e-13
    assert relative(gd.loss, [numpy_objective(prob, s) for s in ref[gd.iterations]]) <= 1e-14


def test_reported_loss_includes_the_penalty():
    prob, p0 = decay_problem("sum", True, True, lam=0.3)
    gd = fl.gradient_descent(prob, p0, 0.01, 100, record_every=10)
    for state, value in zip(gd.states, gd.loss):
        W, b, a = state[:, :2], state[:, 2], state[:, 3]
        Z = prob.X @ W.T + b
        f = np.where(Z > 0, Z, 0.1 * Z) @ a
        data_loss = np.sum(np.log1p(np.exp(-prob.y * f)))
        penalty = 0.15 * (np.sum(W ** 2) + np.sum(b ** 2) + np.sum(a ** 2))
        assert penalty > 0.1 * data_loss  # the penalty is a sizeable part of what is checked
        assert value == pytest.approx(data_loss + penalty, rel=1e-14)


@pytest.mark.parametrize("train_outer", [True, False])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_tiny_step_objective_decreases_monotonically(reduction, train_outer):
    prob, p0 = decay_problem(reduction, train_outer, True, loss="square", lam=0.5)
    gd = fl.gradient_descent(prob, p0, 1e-4, 20_000, record_every=100)
    assert gd.status == "success"
    assert np.all(np.diff(gd.loss) < 0)
    assert gd.loss[-1] < 0.9 * gd.loss[0]  # and it did go down measurably


def test_pure_decay_is_geometric():
    # With the data term frozen (outputs exactly 0 for every sample: ReLU neurons all off, a not trained), the
    # update is W <- (1 - lr lambda) W: after k steps W_k = (1 - lr lambda)^k W_0 up to k roundings.
    prob = fl.Problem(X=[[1.0, 1.0], [2.0, 0.5]], y=[1.0, -1.0], loss="logistic", reduction="mean", bias=False,
                      train_outer=False, weight_decay=0.25)
    p0 = fl.Params(W=[[-1.0, -2.0], [-0.5, -0.25]], b=None, a=[1.0, -1.0])
    gd = fl.gradient_descent(prob, p0, 0.1, 200, record_every=200)
    expected = (1.0 - 0.1 * 0.25) ** 200 * p0.W
    assert relative(gd.states[-1, :, :2], expected) <= 1e-13
    assert np.all(gd.states[-1, :, 3] == p0.a)
    assert gd.loss[-1] == pytest.approx(np.log(2.0) + 0.125 * np.sum(expected ** 2), rel=1e-14)


# --------------------------------------------------------------------------------------------------------------
# mpmath
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction, train_outer, bias", [("mean", True, True), ("sum", False, True),
                                                          ("mean", False, False), ("sum", True, False)])
def test_mpmath_matches_plain_mpmath_loop(reduction, train_outer, bias):
    prob, p0 = decay_problem(reduction, train_outer, bias, lam=0.05)
    lr, steps, dps = 0.02, 40, 40
    states, objective = mp_descent(prob, p0, lr, [range(prob.n)] * steps, dps)
    gd = fl.gradient_descent(prob, p0, lr, steps, dps=dps, record_every=10)
    assert gd.status == "success" and gd.dps == dps
    with mp.workdps(dps):
        for row, k in enumerate(gd.iterations):
            ref = states[k]
            scale = max(abs(v) for r in ref for v in r)
            err = max(abs(gd.states[row, j, q] - ref[j][q]) for j in range(3) for q in range(4))
            assert err <= mp.mpf("1e-35") * scale, (k, err)
            assert abs(gd.loss[row] - objective[k]) <= mp.mpf("1e-35") * abs(objective[k])


def test_mpmath_matches_float64():
    prob, p0 = decay_problem("mean", True, True, lam=0.1)
    gd64 = fl.gradient_descent(prob, p0, 0.05, 2000, record_every=100)
    gdmp = fl.gradient_descent(prob, p0, 0.05, 2000, dps=30, record_every=100)
    assert relative(gd64.states, gdmp.states_float()) <= 1e-12
    assert relative(gd64.loss, np.array([float(v) for v in gdmp.loss])) <= 1e-12
    assert gd64.flips == gdmp.flips


def test_save_load_keeps_the_decay(tmp_path):
    prob, p0 = decay_problem("sum", False, True, lam=0.125)
    gd = fl.gradient_descent(prob, p0, 0.01, 50, record_every=10)
    back = fl.load(gd.save(tmp_path / "gd"))
    assert back.problem.weight_decay == 0.125
    assert np.array_equal(back.states, gd.states) and np.array_equal(back.loss, gd.loss)
    assert back.summary() == gd.summary() and "weight decay 0.125" in gd.summary()
    assert "weight_decay=0.125" in repr(gd)
