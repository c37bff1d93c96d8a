"""``fl.predict``: the network output on new inputs, against a re-computation neuron by neuron (numpy float64, and
mpmath at 40 digits for an mpmath run), and against the losses the results store for the training inputs."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from mpmath import mp, mpf

import flowlib as fl
from flowlib import examples


def reference(P, X, leak, bias):
    """``sum_j a_j max(z_j, leak z_j)``, ``z_j = sum_k w_jk x_k + b_j``, one input and one neuron at a time."""
    d = X.shape[1]
    out = np.zeros(len(X))
    for i, x in enumerate(X):
        for row in P:
            z = math.fsum(row[k] * x[k] for k in range(d)) + (row[d] if bias else 0.0)
            out[i] += row[d + 1] * (z if z > 0 else leak * z)
    return out


def loss_from_outputs(problem, f):
    """The loss of outputs ``f`` on the training set (closed forms of Problem's losses)."""
    y = problem.y
    per = {"exp": np.exp(-y * f), "logistic": np.logaddexp(0.0, -y * f), "square": (f - y) ** 2 / 2}[problem.loss]
    return per.mean() if problem.reduction == "mean" else per.sum()


def _problem(activation, bias, d=3, n=7, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(rng.standard_normal(n) > 0, 1.0, -1.0)
    leak = 0.2 if activation == "leaky_relu" else 0.0
    return fl.Problem(X, y, loss="logistic", reduction="mean", activation=activation, leak=leak, bias=bias,
                      train_outer=True)


@pytest.mark.parametrize("activation", ["relu", "leaky_relu"])
@pytest.mark.parametrize("bias", [False, True])
def test_params_against_numpy_recomputation(activation, bias, rng):
    prob = _problem(activation, bias)
    p = fl.Params(W=rng.standard_normal((5, 3)), b=rng.standard_normal(5) if bias else None,
                  a=rng.standard_normal(5))
    X_new = rng.standard_normal((11, 3))
    got = fl.predict(p, X_new, problem=prob)
    assert got.shape == (11,) and got.dtype == np.float64
    assert np.allclose(got, reference(p.packed(), X_new, prob.leak, bias), rtol=1e-13, atol=1e-14)
    # integer inputs are widened exactly
    assert np.array_equal(fl.predict(p, [[1, 0, 2]], problem=prob), fl.predict(p, [[1.0, 0.0, 2.0]], problem=prob))


@pytest.mark.parametrize("activation", ["relu", "leaky_relu"])
@pytest.mark.parametrize("bias", [False, True])
def test_flow_final_and_dense_output(activation, bias, rng):
    prob = _problem(activation, bias)
    p0 = fl.Params(W=0.5 * rng.standard_normal((4, 3)), b=0.5 * rng.standard_normal(4) if bias else None,
                   a=0.5 * rng.standard_normal(4))
    res = fl.gradient_flow(prob, p0, 5.0)
    X_new = rng.standard_normal((9, 3))
    assert np.allclose(fl.predict(res, X_new), reference(res.states[-1], X_new, prob.leak, bias), rtol=1e-13,
                       atol=1e-14)
    for t in (0.0, 1.37, 5.0):
        state = res.params_at(t).packed()
        assert np.allclose(fl.predict(res, X_new, t=t), reference(state, X_new, prob.leak, bias), rtol=1e-13,
                           atol=1e-14)
    # on the training inputs: the loss the result stores, at the end and at each step boundary
    assert abs(loss_from_outputs(prob, fl.predict(res, prob.X)) - res.loss[-1]) <= 1e-14 * max(1.0, res.loss[-1])
    for k in range(0, res.n_steps + 1, max(1, res.n_steps // 5)):
        f = fl.predict(res, prob.X, t=res.t[k])
        assert abs(loss_from_outputs(prob, f) - res.loss[k]) <= 1e-13 * max(1.0, res.loss[k])


def test_flow_margin_matches_normalized_margin():
    """Trained outer layer, no bias: ``min_i y_i f(x_i) / |theta|^2`` from predict is the result's own margin."""
    prob, p0 = examples.os_logistic()
    res = fl.gradient_flow(prob, p0, 50.0)
    f = fl.predict(res, prob.X)
    theta2 = np.sum(res.states[-1][:, [0, 1, 3]] ** 2)
    assert abs(np.min(prob.y * f) / theta2 - res.normalized_margin()[-1]) <= 1e-12 * abs(res.normalized_margin()[-1])


def test_flow_without_dense_output_answers_at_step_boundaries_only():
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    res = fl.gradient_flow(prob, p0, 5.0, dense_output=False)
    X_new = np.array([[0.5], [-2.0]])
    k = res.n_steps // 2
    assert np.allclose(fl.predict(res, X_new, t=res.t[k]), reference(res.states[k], X_new, 0.0, True), rtol=1e-14)
    between = 0.5 * (res.t[k] + res.t[k + 1])
    with pytest.raises(ValueError, match="dense_output"):
        fl.predict(res, X_new, t=between)


def test_descent_at_recorded_iterates():
    prob = _problem("leaky_relu", True)
    p0 = examples.random_init(6, 3, seed=1)
    gd = fl.gradient_descent(prob, p0, 0.1, 50, record_every=10)
    X_new = np.random.default_rng(2).standard_normal((5, 3))
    assert np.allclose(fl.predict(gd, X_new), reference(gd.states[-1], X_new, prob.leak, True), rtol=1e-13,
                       atol=1e-14)
    for k in gd.iterations:
        t = k * 0.1
        assert np.allclose(fl.predict(gd, X_new, t=t), reference(gd.state_at(int(k)), X_new, prob.leak, True),
                           rtol=1e-13, atol=1e-14)
        row = int(np.flatnonzero(gd.iterations == k)[0])
        assert abs(loss_from_outputs(prob, fl.predict(gd, prob.X, t=t)) - gd.loss[row]) <= 1e-14
    assert np.array_equal(fl.predict(gd, X_new, t=3 * 0.1 * 10), fl.predict(gd, X_new, t=3.0))  # 0.30000000000000004
    with pytest.raises(ValueError, match=r"t = 0\.5 is not .* recorded iterate"):
        fl.predict(gd, X_new, t=0.5)
    for bad in (-0.1, 5.5, float("nan"), True, "1.0"):
        with pytest.raises(ValueError, match="t "):
            fl.predict(gd, X_new, t=bad)


def test_ensemble_members_and_their_problems():
    """Two problems of one ensemble (ReLU and leaky ReLU, with bias): each member uses its own leak."""
    relu = _problem("relu", True, d=2, n=6, seed=3)
    leaky = fl.Problem(relu.X, relu.y, loss="logistic", reduction="mean", activation="leaky_relu", leak=0.3,
                       bias=True, train_outer=True)
    inits = fl.random_inits(relu, m=3, count=6, scheme="normal", scale=0.7, bias=None, seed=4)
    ens = fl.ensemble([relu, leaky, relu, leaky, relu, leaky], inits, "gd", lr=0.1, steps=40)
    X_new = np.random.default_rng(5).standard_normal((8, 2))
    got = fl.predict(ens, X_new)
    assert got.shape == (6, 8)
    for r in range(6):
        problem = ens.problems[ens.problem_index[r]]
        assert np.allclose(got[r], reference(ens.final[r], X_new, problem.leak, True), rtol=1e-13, atol=1e-14)
        assert abs(loss_from_outputs(problem, fl.predict(ens, problem.X)[r]) - ens.loss[r]) <= 1e-14


def test_ensemble_pending_members_are_nan():
    prob, _ = examples.gd_rate_network(1.0, 0.0, -1.0, 0.0)
    inits = fl.random_inits(prob, m=2, count=6, scheme="he", a=[1.0, -1.0], seed=6)
    ens = fl.ensemble(prob, inits, "gd", lr=0.05, steps=100, chunk_size=2, callback=lambda progress: True)
    assert not ens.complete
    got = fl.predict(ens, [[0.5], [-1.0]])
    done = ens.done
    assert np.all(np.isnan(got[~done])) and np.all(np.isfinite(got[done])) and done.sum() == 2


def _mp_reference(state, X, leak, bias, dps):
    with mp.workdps(dps):
        out = []
        for x in X:
            total = mpf(0)
            for row in state:
                z = sum(mpf(row[k]) * mpf(float(x[k])) for k in range(len(x))) + (mpf(row[len(x)]) if bias else 0)
                total += mpf(row[len(x) + 1]) * (z if z > 0 else mpf(leak) * z)
            out.append(total)
        return out


def _assert_mp_close(got, want, dps):
    with mp.workdps(dps):
        for g, w in zip(got, want):
            assert isinstance(g, mpmath.mpf)
            assert abs(g - w) <= mpf(10) ** (3 - dps) * max(1, abs(w))


def test_mpmath_flow_at_40_digits():
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    res = fl.gradient_flow(prob, p0, 5.0, dps=40)
    X_new = np.array([[0.5], [-2.0], [1.0 / 3.0]])
    before = mp.dps
    got = fl.predict(res, X_new)
    assert mp.dps == before and got.dtype == object and got.shape == (3,)
    _assert_mp_close(got, _mp_reference(res.states[-1], X_new, 0.0, True, 40), 40)
    # 40 digits, not 16: the outputs differ from the float64 re-computation beyond double precision
    with mp.workdps(40):
        assert any(g != mpf(float(g)) for g in got)
    mid = fl.predict(res, X_new, t="2.5")
    _assert_mp_close(mid, _mp_reference(res.states_at(["2.5"])[0], X_new, 0.0, True, 40), 40)
    with mp.workdps(40):  # the training outputs give the stored loss (exp loss, mean) to 40 digits
        f = fl.predict(res, prob.X)
        loss = sum(mp.exp(-mpf(float(y)) * v) for y, v in zip(prob.y, f)) / prob.n
        assert abs(loss - res.loss[-1]) <= mpf(10) ** -37 * res.loss[-1]
    with pytest.raises(ValueError, match="t must lie"):
        fl.predict(res, X_new, t=6.0)


def test_mpmath_descent_at_40_digits():
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    gd = fl.gradient_descent(prob, p0, 0.05, 100, dps=40, record_every=10)
    X_new = np.array([[0.5], [-2.0]])
    got = fl.predict(gd, X_new, t=0.5)
    _assert_mp_close(got, _mp_reference(gd.state_at(10), X_new, 0.0, True, 40), 40)
    assert mp.dps == 15


@pytest.mark.parametrize("X_new, words", [([[1.0, 2.0]], "X_new must have d = 3"), ([1.0, 2.0, 3.0], "X_new"),
                                          ([[1.0, float("nan"), 0.0]], "X_new contains NaN"),
                                          ([[1.0, 2.0, "x"]], "X_new"), ([[1 + 2j, 0, 0]], "X_new")])
def test_bad_inputs_are_named(X_new, words):
    prob = _problem("relu", False)
    p = fl.Params(W=np.ones((2, 3)), b=None, a=[1.0, -1.0])
    with pytest.raises(ValueError, match=words):
        fl.predict(p, X_new, problem=prob)


def test_bad_models_and_arguments_are_named():
    prob = _problem("relu", True)
    p = fl.Params(W=np.ones((2, 3)), b=[0.0, 1.0], a=[1.0, -1.0])
    X = np.zeros((1, 3))
    with pytest.raises(ValueError, match="model must be"):
        fl.predict(p.packed(), X)
    with pytest.raises(ValueError, match="model must be"):
        fl.predict(prob, X)
    with pytest.raises(ValueError, match="problem must be given"):
        fl.predict(p, X)
    with pytest.raises(ValueError, match="problem must be a flowlib.Problem"):
        fl.predict(p, X, problem="relu")
    with pytest.raises(ValueError, match="b must be given"):
        fl.predict(fl.Params(W=np.ones((2, 3)), b=None, a=[1.0, -1.0]), X, problem=prob)
    with pytest.raises(ValueError, match="t applies to a result"):
        fl.predict(p, X, problem=prob, t=1.0)
    res = fl.gradient_flow(prob, p, 1.0)
    with pytest.raises(ValueError, match="problem is only for a Params"):
        fl.predict(res, X, problem=prob)
    for bad in (-1.0, 1.5, float("inf")):
        with pytest.raises(ValueError, match="t must"):
            fl.predict(res, X, t=bad)
    with pytest.raises(ValueError, match="t must be a finite real number"):
        fl.predict(res, X, t="soon")
    zero = fl.gradient_flow(prob, p, 0.0)
    with pytest.raises(ValueError, match="t must lie"):
        fl.predict(zero, X, t=1.0)
    assert np.array_equal(fl.predict(zero, X, t=0.0), fl.predict(p, X, problem=prob))
    ens = fl.ensemble(prob, p.packed()[None], "gd", lr=0.1, steps=3)
    with pytest.raises(ValueError, match="t does not apply to an ensemble"):
        fl.predict(ens, X, t=0.3)
