"""Acceptance 4 of the foundation issue: every bad input raises ValueError naming the argument."""

import numpy as np
import pytest

import flowlib as fl

X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
Y = np.array([1.0, -1.0, 1.0])
P0 = dict(W=np.array([[0.3, 0.1], [-0.2, 0.4]]), b=np.array([0.1, -0.1]), a=np.array([0.5, -0.5]))


def problem(**kw):
    args = dict(X=X, y=Y, loss="logistic", bias=True, train_outer=False)
    args.update(kw)
    return fl.Problem(**args)


@pytest.mark.parametrize("kwargs, name", [
    (dict(X=np.array([[1.0, np.nan], [0, 1], [1, 1]])), "X"),
    (dict(X=np.array([[1.0, np.inf], [0, 1], [1, 1]])), "X"),
    (dict(y=np.array([1.0, np.nan, 1.0]), loss="square"), "y"),
    (dict(X=np.array([1.0, 2.0, 3.0])), "X"),
    (dict(X=np.zeros((3, 2, 1))), "X"),
    (dict(y=np.ones((3, 1))), "y"),
    (dict(y=np.array([1.0, -1.0])), "y"),
    (dict(X=np.array([["a", "b"], ["c", "d"], ["e", "f"]])), "X"),
    (dict(X=X.astype(complex)), "X"),
    (dict(X=X.astype(bool)), "X"),
    (dict(X=np.empty((0, 2)), y=np.empty(0)), "X"),
    (dict(loss="hinge"), "loss"),
    (dict(loss=None), "loss"),
    (dict(reduction="max"), "reduction"),
    (dict(activation="tanh"), "activation"),
    (dict(activation="relu", leak=0.1), "leak"),
    (dict(activation="leaky_relu", leak=0.0), "leak"),
    (dict(activation="leaky_relu", leak=1.0), "leak"),
    (dict(activation="leaky_relu", leak="0.1"), "leak"),
    (dict(y=np.array([1.0, 0.0, 1.0]), loss="exp"), "y"),
    (dict(y=np.array([1.0, -1.0, 2.0]), loss="logistic"), "y"),
    (dict(bias="yes"), "bias"),
    (dict(train_outer=1), "train_outer"),
])
def test_bad_problem_names_argument(kwargs, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        problem(**kwargs)


def test_square_loss_accepts_real_targets():
    prob = problem(y=np.array([0.3, -2.0, 5.0]), loss="square")
    assert prob.y.dtype == np.float64


@pytest.mark.parametrize("kwargs, name", [
    (dict(W=np.array([[np.nan, 0.0], [0.0, 1.0]])), "W"),
    (dict(W=np.array([0.3, 0.1])), "W"),
    (dict(W=np.empty((0, 2)), b=np.empty(0), a=np.empty(0)), "W"),
    (dict(a=np.array([0.5])), "a"),
    (dict(a=np.array([0.5, np.inf])), "a"),
    (dict(a=np.array([[0.5, 0.5]])), "a"),
    (dict(b=np.array([0.1, 0.2, 0.3])), "b"),
    (dict(b=np.array([0.1, np.nan])), "b"),
    (dict(b=np.array(["x", "y"])), "b"),
])
def test_bad_params_names_argument(kwargs, name):
    args = dict(P0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        fl.Params(**args)


def test_params_problem_mismatch():
    with pytest.raises(ValueError, match=r"\bW\b"):
        fl.gradient_flow(problem(), fl.Params(W=np.ones((2, 3)), b=np.zeros(2), a=np.ones(2)), 1.0)
    with pytest.raises(ValueError, match=r"\bb\b"):
        fl.gradient_flow(problem(bias=False), fl.Params(**P0), 1.0)


@pytest.mark.parametrize("t_end", [-1.0, np.nan, np.inf, "1", None, True])
def test_bad_t_end(t_end):
    with pytest.raises(ValueError, match=r"\bt_end\b"):
        fl.gradient_flow(problem(), fl.Params(**P0), t_end)


@pytest.mark.parametrize("kwargs, name", [
    (dict(rtol=0.0), "rtol"), (dict(rtol=1e-20), "rtol"), (dict(rtol=0.5), "rtol"), (dict(rtol="1e-10"), "rtol"),
    (dict(max_steps=0), "max_steps"), (dict(max_steps=1.5), "max_steps"),
    (dict(max_events=-3), "max_events"),
    (dict(t_eval=[0.5, 0.2]), "t_eval"), (dict(t_eval=[2.0]), "t_eval"), (dict(t_eval=[np.nan]), "t_eval"),
    (dict(callback=3), "callback"),
])
def test_bad_options(kwargs, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        fl.gradient_flow(problem(), fl.Params(**P0), 1.0, **kwargs)


def test_wrong_argument_types():
    with pytest.raises(ValueError, match=r"\bproblem\b"):
        fl.gradient_flow({"X": X}, fl.Params(**P0), 1.0)
    with pytest.raises(ValueError, match=r"\bparams0\b"):
        fl.gradient_flow(problem(), P0, 1.0)


def test_params_at_outside_run():
    res = fl.gradient_flow(problem(), fl.Params(**P0), 1.0)
    with pytest.raises(ValueError, match=r"\bt\b"):
        res.params_at(1.5)
    with pytest.raises(ValueError, match=r"\bt\b"):
        res.params_at(-0.1)


def test_inputs_are_not_modified():
    W = P0["W"].copy()
    fl.gradient_flow(problem(), fl.Params(W=W, b=P0["b"], a=P0["a"]), 1.0)
    np.testing.assert_array_equal(W, P0["W"])


@pytest.mark.parametrize("missing", ["bias", "train_outer"])
def test_model_choices_have_no_silent_default(missing):
    """Leaving ``train_outer`` out used to freeze ``a`` and leaving ``bias`` out trained one from 0: both must be
    said."""
    args = dict(X=X, y=Y, loss="logistic", bias=True, train_outer=True)
    del args[missing]
    with pytest.raises(ValueError, match=f"^{missing} must be given"):
        fl.Problem(**args)


def test_options_after_the_data_are_keyword_only():
    with pytest.raises(TypeError):
        fl.Problem(X, Y, "logistic", bias=True, train_outer=True)


@pytest.mark.parametrize("run", [
    lambda prob, p: fl.gradient_flow(prob, p, t_end=1.0),
    lambda prob, p: fl.gradient_descent(prob, p, 0.1, 3),
    lambda prob, p: fl.stochastic_gradient_descent(prob, p, 0.1, 3, batch_size=1),
])
def test_a_bias_problem_needs_the_bias_given(run):
    """``Params(b=None)`` with ``bias=True`` used to start a trained bias from 0 without saying so."""
    prob = problem(bias=True)
    with pytest.raises(ValueError, match="^b must be given"):
        run(prob, fl.Params(W=P0["W"], b=None, a=P0["a"]))
    run(prob, fl.Params(W=P0["W"], b=np.zeros(2), a=P0["a"]))  # zeros are accepted
