"""flowlib.torch: PyTorch models in and out, against PyTorch itself and independent numpy references.

PyTorch is the reference: its autograd and ``torch.optim.SGD`` run the very models and objectives that flowlib
claims to compute, and the network's output is recomputed with numpy from the parameters.
"""

import importlib
import itertools
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import flowlib as fl  # noqa: E402
import flowlib.torch as flt  # noqa: E402

LEAK = 0.1
TOL = 1e-14  # relative; measured at most 7.6e-16 (median 2e-16) over the 96 runs of 300 steps below


# --------------------------------------------------------------------------------------------------------------
# helpers: PyTorch models, PyTorch's gradient descent, numpy references
# --------------------------------------------------------------------------------------------------------------
def make_data(seed, n, d, loss):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    noise = torch.randn(n, generator=g, dtype=torch.float64)
    y = noise if loss == "square" else torch.where(noise > 0, 1.0, -1.0).to(torch.float64)
    return X, y


def make_model(seed, d, m, *, activation="relu", bias=True, train_outer=True, dtype=torch.float64):
    torch.manual_seed(seed)
    act = nn.ReLU() if activation == "relu" else nn.LeakyReLU(LEAK)
    model = nn.Sequential(nn.Linear(d, m, bias=bias), act, nn.Linear(m, 1, bias=False)).to(dtype)
    model[2].weight.requires_grad_(train_outer)
    return model


def torch_objective(f, y, loss, reduction):
    """flowlib's losses written in PyTorch (the square loss with its 1/2)."""
    per_sample = {"logistic": lambda: F.softplus(-y * f), "exp": lambda: torch.exp(-y * f),
                  "square": lambda: 0.5 * (f - y) ** 2}[loss]()
    return per_sample.mean() if reduction == "mean" else per_sample.sum()


def torch_gd(model, X, y, lr, steps, *, weight_decay=0.0, criterion=None):
    """A plain PyTorch training loop: full-batch ``torch.optim.SGD``; ``criterion(f, y)`` is the objective."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, weight_decay=weight_decay)
    for _ in range(steps):
        opt.zero_grad()
        loss = criterion(model(X).squeeze(1), y)
        loss.backward()
        opt.step()
    return model


def model_arrays(model):
    """``(W, b or None, a)`` of a model as float64 numpy copies (read straight from the tensors)."""
    W = model[0].weight.detach().double().numpy().copy()
    b = None if model[0].bias is None else model[0].bias.detach().double().numpy().copy()
    return W, b, model[2].weight.detach().double().numpy()[0].copy()


def max_relative_difference(params, arrays):
    """Largest ``max|x - x_ref| / max|x_ref|`` over ``W``, ``b`` and ``a``."""
    out = 0.0
    for got, ref in zip((params.W, params.b, params.a), arrays):
        assert (got is None) == (ref is None)
        if ref is not None:
            out = max(out, float(np.max(np.abs(got - ref)) / np.max(np.abs(ref))))
    return out


def numpy_outputs(X, W, b, a, leak):
    """``f(x_i) = sum_j a_j sigma(<w_j, x_i> + b_j)`` with numpy."""
    Z = X @ W.T + (0.0 if b is None else b)
    return np.where(Z > 0, Z, leak * Z) @ a


def preactivations(prob, states):
    """``z_ij`` at every recorded state, with numpy."""
    d = prob.d
    return np.einsum("id,kjd->kij", prob.X, states[:, :, :d]) + (states[:, None, :, d] if prob.bias else 0.0)


# --------------------------------------------------------------------------------------------------------------
# (a) PyTorch's gradient descent, reproduced by fl.gradient_descent
# --------------------------------------------------------------------------------------------------------------
CONFIGS = list(itertools.product(["relu", "leaky_relu"], [True, False], [True, False], ["logistic", "exp", "square"],
                                 ["mean", "sum"]))


@pytest.mark.parametrize("index, config", list(enumerate(CONFIGS)),
                         ids=["-".join(str(v) for v in c).replace("True", "T").replace("False", "F") for c in CONFIGS])
def test_sgd_of_pytorch_is_gradient_descent(index, config):
    """``torch.optim.SGD`` on a float64 model (full batch, 300 steps) against ``fl.gradient_descent`` from
    ``from_torch``'s problem, parameters and selection, without and with weight decay, two seeds per configuration.

    Not bit for bit: the first step agrees to the last bit on most seeds (about 3 in 4) but not all, because PyTorch
    sums differently (``X @ W.T + b`` by BLAS ``addmm``, the backward's matrix products and reductions, softplus's
    own sigmoid) from flowlib's kernel (one neuron at a time, samples in order); the two then carry their own
    rounding for 300 steps (none of the 96 runs ends bit-identical). The final parameters agree to ``1e-14``
    relative (measured: at most 7.6e-16, median 2e-16). No pre-activation ever sits within 1e-12 of the kink along
    the run (checked on every iterate; the closest is 3.9e-8), so the sides, and hence the slopes, are the same in
    both.
    """
    activation, bias, train_outer, loss, reduction = config
    n, d, m, steps = 10, 3, 6, 300
    lr = 0.05 if reduction == "mean" else 0.005
    for seed, weight_decay in ((2 * index, 0.0), (2 * index + 1, 0.02)):
        X, y = make_data(seed, n, d, loss)
        model = make_model(seed, d, m, activation=activation, bias=bias, train_outer=train_outer)
        prob, p0, selection = flt.from_torch(model, X, y, loss=loss, reduction=reduction, weight_decay=weight_decay)
        assert (prob.activation, prob.bias, prob.train_outer, prob.weight_decay) == (activation, bias, train_outer,
                                                                                     weight_decay)
        assert selection == prob.leak == (LEAK if activation == "leaky_relu" else 0.0)
        gd = fl.gradient_descent(prob, p0, lr, steps, selection=selection)
        assert gd.success
        Z = preactivations(prob, gd.states)
        assert np.min(np.abs(Z)) > 1e-12, "the data put a pre-activation on a kink: choose another seed"

        a0 = model[2].weight.detach().clone()
        torch_gd(model, X, y, lr, steps, weight_decay=weight_decay,
                 criterion=lambda f, t: torch_objective(f, t, loss, reduction))
        arrays = model_arrays(model)
        if not train_outer:
            assert torch.equal(model[2].weight.detach(), a0)
            assert np.array_equal(gd.final.a, p0.a)
        assert not np.array_equal(arrays[0], p0.W)  # it did train
        assert max_relative_difference(gd.final, arrays) <= TOL


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("criterion, loss, scale", [(nn.MSELoss, "square", 2.0), (nn.SoftMarginLoss, "logistic", 1.0)],
                         ids=["MSELoss", "SoftMarginLoss"])
def test_pytorch_criteria(criterion, loss, scale, reduction):
    """PyTorch's own criteria. ``nn.SoftMarginLoss`` is flowlib's logistic loss (same lr, same weight decay).
    ``nn.MSELoss`` has no 1/2: with lr ``eta`` and weight decay ``lam`` it is flowlib's square loss with lr
    ``2 eta`` and weight decay ``lam / 2`` (``eta (2 grad L + lam theta) = 2 eta (grad L + lam/2 theta)``), and
    its objective ``MSELoss + lam/2 |theta|^2`` is twice flowlib's."""
    n, d, m, steps, eta, lam = 12, 2, 5, 300, 0.02 if reduction == "mean" else 0.002, 0.03
    X, y = make_data(7, n, d, loss)
    model = make_model(8, d, m, activation="leaky_relu")
    prob, p0, selection = flt.from_torch(model, X, y, loss=loss, reduction=reduction, weight_decay=lam / scale)
    gd = fl.gradient_descent(prob, p0, scale * eta, steps, selection=selection)
    assert np.min(np.abs(preactivations(prob, gd.states))) > 1e-12
    torch_gd(model, X, y, eta, steps, weight_decay=lam, criterion=criterion(reduction=reduction))
    assert max_relative_difference(gd.final, model_arrays(model)) <= TOL
    with torch.no_grad():
        penalty = sum(float((p ** 2).sum()) for p in model.parameters())
        objective = float(criterion(reduction=reduction)(model(X).squeeze(1), y)) + lam / 2 * penalty
    assert objective == pytest.approx(scale * float(gd.loss[-1]), rel=1e-13)


# --------------------------------------------------------------------------------------------------------------
# the sigma'(0) table
# --------------------------------------------------------------------------------------------------------------
class Activation(nn.Module):
    """``sigma`` written as an arbitrary PyTorch expression."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, z):
        return self.fn(z)


# (as written in the module docstring, sigma as a function of z and the leak s, leak of the problem, sigma'(0))
KINK_TABLE = [
    ("nn.ReLU()", lambda z, s: nn.ReLU()(z), 0.0, lambda s: 0.0),
    ("F.relu(z)", lambda z, s: F.relu(z), 0.0, lambda s: 0.0),
    ("torch.relu(z)", lambda z, s: torch.relu(z), 0.0, lambda s: 0.0),
    ("z.relu()", lambda z, s: z.relu(), 0.0, lambda s: 0.0),
    ("nn.LeakyReLU(s)", lambda z, s: nn.LeakyReLU(s)(z), LEAK, lambda s: s),
    ("F.leaky_relu(z, s)", lambda z, s: F.leaky_relu(z, s), LEAK, lambda s: s),
    ("z.clamp(min=0)", lambda z, s: z.clamp(min=0), 0.0, lambda s: 1.0),
    ("torch.clamp_min(z, 0)", lambda z, s: torch.clamp_min(z, 0), 0.0, lambda s: 1.0),
    ("torch.maximum(z, torch.zeros_like(z))", lambda z, s: torch.maximum(z, torch.zeros_like(z)), 0.0,
     lambda s: 0.5),
    ("torch.where(z > 0, z, 0.0)", lambda z, s: torch.where(z > 0, z, 0.0), 0.0, lambda s: 0.0),
    ("z * (z > 0)", lambda z, s: z * (z > 0), 0.0, lambda s: 0.0),
    ("torch.where(z >= 0, z, 0.0)", lambda z, s: torch.where(z >= 0, z, 0.0), 0.0, lambda s: 1.0),
    ("torch.where(z > 0, z, s * z)", lambda z, s: torch.where(z > 0, z, s * z), LEAK, lambda s: s),
    ("torch.maximum(z, s * z)", lambda z, s: torch.maximum(z, s * z), LEAK, lambda s: (1 + s) / 2),
]
KINK_IDS = [row[0] for row in KINK_TABLE]


@pytest.mark.parametrize("text, sigma, leak, slope", KINK_TABLE, ids=KINK_IDS)
def test_kink_table_is_what_autograd_computes(text, sigma, leak, slope):
    """Each row of the module's table: autograd's ``sigma'(0)`` at ``z = 0.0`` and ``z = -0.0`` (float64 and
    float32), the value away from 0, and the row is in the docstring."""
    assert f"``{text}``" in flt.__doc__
    for dtype in (torch.float64, torch.float32):
        for zero in (0.0, -0.0):
            z = torch.tensor([zero], dtype=dtype, requires_grad=True)
            sigma(z, LEAK).sum().backward()
            assert z.grad.item() == pytest.approx(slope(LEAK), rel=1e-6 if dtype == torch.float32 else 0.0)
        z = torch.tensor([-2.0, 3.0], dtype=dtype, requires_grad=True)
        value = sigma(z, LEAK)
        value.sum().backward()
        assert value.tolist() == pytest.approx([-2.0 * leak, 3.0]) and z.grad.tolist() == pytest.approx([leak, 1.0])


@pytest.mark.parametrize("text, sigma, leak, slope", KINK_TABLE, ids=KINK_IDS)
def test_kink_table_selection_reproduces_pytorch(text, sigma, leak, slope):
    """PyTorch's GD on a model whose first neuron is zero (``w_1 = 0, b_1 = 0``: ``z_i1 = 0`` exactly for every
    sample at the start) equals ``fl.gradient_descent`` with ``selection`` from the table, and not with another
    selection (the kink matters here)."""
    n, d, m, lr, steps = 8, 2, 4, 0.05, 100
    X, y = make_data(31, n, d, "logistic")
    model = make_model(32, d, m, activation="leaky_relu" if leak else "relu")
    with torch.no_grad():
        model[0].weight[0] = 0.0
        model[0].bias[0] = 0.0
    prob, p0, _ = flt.from_torch(model, X, y, loss="logistic")
    model[1] = Activation(lambda z: sigma(z, LEAK))
    torch_gd(model, X, y, lr, steps, criterion=lambda f, t: torch_objective(f, t, "logistic", "mean"))
    arrays = model_arrays(model)
    expected = slope(LEAK)
    assert max_relative_difference(fl.gradient_descent(prob, p0, lr, steps, selection=expected).final,
                                   arrays) <= TOL
    other = 1.0 if expected < 0.75 else leak
    wrong = fl.gradient_descent(prob, p0, lr, steps, selection=other).final
    assert np.max(np.abs(wrong.W[0] - arrays[0][0])) > 1e-3


# --------------------------------------------------------------------------------------------------------------
# (b) a flow's state back in PyTorch
# --------------------------------------------------------------------------------------------------------------
FLOW_CASES = [  # (activation, bias, train_outer, loss, weight_decay, seed, the final state lies on a surface)
    ("leaky_relu", True, True, "logistic", 0.0, 41, False), ("leaky_relu", True, True, "logistic", 0.0, 43, True),
    ("relu", False, False, "square", 0.05, 45, False), ("relu", False, False, "square", 0.05, 41, True),
    ("relu", True, True, "exp", 0.01, 45, False), ("relu", True, True, "exp", 0.01, 41, True)]


@pytest.mark.parametrize("activation, bias, train_outer, loss, weight_decay, seed, on_surface", FLOW_CASES)
def test_flow_state_in_pytorch(activation, bias, train_outer, loss, weight_decay, seed, on_surface):
    """``to_torch`` of a flow's final state: PyTorch's output on ``X`` is numpy's ``f`` to 1e-15 (relative to
    ``max|f|``), its objective is the flow's final loss, and the parameters are the flow's bit for bit (also
    through ``from_torch`` again). Half of the flows end sliding or stuck on a switching surface (``z_ij`` within
    rounding of 0, or exactly 0).

    From a state off every surface, going on with ``torch.optim.SGD`` is going on with ``fl.gradient_descent``.
    From a state on a surface it is not checked: which side of the kink each of them then sees is decided by the
    rounding of ``<w_j, x_i> + b_j``, which PyTorch and flowlib sum in different orders (the continuation's first
    steps differ by O(lr) when they disagree).
    """
    n, d, m, t_end = 8, 2, 3, 2.0
    X, y = make_data(seed, n, d, loss)
    model0 = make_model(seed + 1, d, m, activation=activation, bias=bias, train_outer=train_outer)
    prob, p0, _ = flt.from_torch(model0, X, y, loss=loss, reduction="mean", weight_decay=weight_decay)
    flow = fl.gradient_flow(prob, p0, t_end)
    assert flow.success and flow.t_final == t_end
    final = flow.final
    assert not np.array_equal(final.W, p0.W)
    closest = np.min(np.abs(preactivations(prob, flow.states[-1:])))
    assert (closest < 1e-12) == on_surface

    for model in (flt.to_torch(flow), flt.to_torch(final, prob)):
        assert model[0].weight.dtype == torch.float64 and (model[0].bias is not None) == bias
        assert isinstance(model[1], nn.LeakyReLU if activation == "leaky_relu" else nn.ReLU)
        assert model[2].weight.requires_grad == train_outer and model[0].weight.requires_grad
        W, b, a = model_arrays(model)
        assert np.array_equal(W, final.W) and np.array_equal(a, final.a)
        assert (b is None) if not bias else np.array_equal(b, final.b)

        with torch.no_grad():
            f_torch = model(torch.as_tensor(prob.X)).squeeze(1).numpy()
            f_numpy = numpy_outputs(prob.X, final.W, final.b, final.a, prob.leak)
            assert np.max(np.abs(f_torch - f_numpy)) <= 1e-15 * np.max(np.abs(f_numpy))
            trained = [model[0].weight] + ([model[0].bias] if bias else []) + ([model[2].weight] if train_outer
                                                                               else [])
            penalty = sum(float((p ** 2).sum()) for p in trained)
            objective = float(torch_objective(torch.as_tensor(f_torch), y, loss, "mean")) + weight_decay / 2 * penalty
        assert objective == pytest.approx(float(flow.loss[-1]), rel=1e-14)

        again, params, _ = flt.from_torch(model, X, y, loss=loss, weight_decay=weight_decay)
        assert (again.activation, again.leak, again.bias, again.train_outer) == (prob.activation, prob.leak,
                                                                                 prob.bias, prob.train_outer)
        assert np.array_equal(params.W, final.W) and np.array_equal(params.a, final.a)

    if not on_surface:
        model = flt.to_torch(flow)
        torch_gd(model, X, y, 0.05, 100, weight_decay=weight_decay,
                 criterion=lambda f, t: torch_objective(f, t, loss, "mean"))
        gd = fl.gradient_descent(prob, final, 0.05, 100)
        assert np.min(np.abs(preactivations(prob, gd.states))) > 1e-12
        assert max_relative_difference(gd.final, model_arrays(model)) <= TOL


def test_to_torch_options_and_load_into():
    """``dtype`` rounds to nearest, a problem without bias drops zero biases, ``load_into`` copies in place in the
    model's dtype, and a ``DescentResult`` gives its final iterate."""
    params = fl.Params(W=[[1.0 + 2**-40, -2.0], [0.5, 3.0]], b=[0.25, 0.0], a=[1.0, -1.0])
    model = flt.to_torch(params, dtype=torch.float32)
    assert model[0].weight.dtype == torch.float32
    assert model[0].weight.detach().numpy().tolist() == np.float32(params.W).tolist()
    assert isinstance(model[1], nn.ReLU) and model[2].weight.requires_grad

    no_bias = fl.Problem([[1.0, 0.0]], [1.0], loss="logistic", bias=False, train_outer=False)
    zero_b = fl.Params(W=params.W, b=[0.0, 0.0], a=params.a)
    model = flt.to_torch(zero_b, no_bias)
    assert model[0].bias is None and not model[2].weight.requires_grad

    target = make_model(0, 2, 2, bias=True, dtype=torch.float32)
    flags = [p.requires_grad for p in target.parameters()]
    assert flt.load_into(target, params) is target
    assert target[0].bias.detach().numpy().tolist() == [0.25, 0.0]
    assert target[2].weight.dtype == torch.float32 and target[2].weight.detach().numpy().tolist() == [[1.0, -1.0]]
    assert [p.requires_grad for p in target.parameters()] == flags

    prob = fl.Problem([[1.0, 0.5], [-1.0, 0.25]], [1.0, -1.0], loss="logistic", activation="leaky_relu", leak=0.2,
                      bias=True, train_outer=True)
    gd = fl.gradient_descent(prob, params, 0.1, 5)
    model = flt.to_torch(gd)
    assert isinstance(model[1], nn.LeakyReLU) and model[1].negative_slope == 0.2
    assert np.array_equal(model_arrays(model)[0], gd.final.W)


def test_from_torch_converts_exactly():
    """float32 and float16 parameters and data are widened exactly; tensors that require grad are detached and
    left untouched; ``y`` of shape (n, 1); numpy data; ``nn.LeakyReLU(0)`` is a ReLU."""
    model = make_model(3, 3, 4, activation="leaky_relu", dtype=torch.float32)
    X = torch.randn(5, 3, dtype=torch.float32, requires_grad=True)
    y = torch.tensor([[1.0], [-1.0], [1.0], [1.0], [-1.0]], dtype=torch.float16)
    prob, params, selection = flt.from_torch(model, X, y, loss="exp", reduction="sum")
    assert params.W.dtype == np.float64 and np.array_equal(params.W, model[0].weight.detach().double().numpy())
    assert np.array_equal(params.b, model[0].bias.detach().double().numpy())
    assert np.array_equal(params.a, model[2].weight.detach().double().numpy()[0])
    assert params.W[0, 0] == float(model[0].weight.detach()[0, 0])  # an exact float32 value, not a rounded decimal
    assert np.array_equal(prob.X, X.detach().double().numpy()) and prob.y.tolist() == [1, -1, 1, 1, -1]
    assert selection == prob.leak == LEAK and X.requires_grad and model[0].weight.requires_grad
    params.W[0, 0] = 123.0  # a copy: the model is untouched
    assert float(model[0].weight.detach()[0, 0]) != 123.0

    relu = nn.Sequential(nn.Linear(2, 2), nn.LeakyReLU(0.0), nn.Linear(2, 1, bias=False))
    prob, _, selection = flt.from_torch(relu, np.eye(2), np.array([1.0, 2.0]), loss="square")
    assert (prob.activation, prob.leak, selection, prob.reduction) == ("relu", 0.0, 0.0, "mean")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_from_torch_moves_cuda_tensors():
    model = make_model(5, 2, 3).cuda()
    X, y = make_data(5, 4, 2, "logistic")
    prob, params, _ = flt.from_torch(model, X.cuda(), y.cuda(), loss="logistic")
    assert np.array_equal(params.W, model[0].weight.detach().cpu().numpy()) and prob.X.shape == (4, 2)
    back = flt.to_torch(params, prob, device="cuda")
    assert back[0].weight.device.type == "cuda" and torch.equal(back[0].weight, model[0].weight)
    assert flt.load_into(model, params) is model


# --------------------------------------------------------------------------------------------------------------
# (c) refusals
# --------------------------------------------------------------------------------------------------------------
class MyLinear(nn.Linear):
    pass


def _frozen(model, *names):
    for name in names:
        dict(model.named_parameters())[name].requires_grad_(False)
    return model


def _normed(model):
    nn.utils.parametrizations.weight_norm(model[0])
    return model


def _complex(model):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Complex modules are a new feature", UserWarning)
        return model.to(torch.complex128)


def _spectral(model):
    nn.utils.spectral_norm(model[0])  # a forward pre-hook computing weight from weight_orig
    return model


def seq(*layers):
    return nn.Sequential(*layers)


BAD_MODELS = [
    ("not a Sequential", lambda: nn.Linear(2, 1), r"model must be a torch\.nn\.Sequential .* got Linear"),
    ("two layers", lambda: seq(nn.Linear(2, 3), nn.ReLU()), r"exactly 3 layers.* got 2: Linear, ReLU"),
    ("an extra layer", lambda: seq(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1, bias=False), nn.Sigmoid()),
     r"exactly 3 layers.* got 4"),
    ("another inner layer", lambda: seq(nn.Conv1d(2, 3, 1), nn.ReLU(), nn.Linear(3, 1, bias=False)),
     r"model\[0\] must be an nn\.Linear, got Conv1d"),
    ("a Linear subclass", lambda: seq(MyLinear(2, 3), nn.ReLU(), nn.Linear(3, 1, bias=False)),
     r"model\[0\] must be an nn\.Linear, got MyLinear"),
    ("another activation", lambda: seq(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1, bias=False)),
     r"model\[1\] must be nn\.ReLU or nn\.LeakyReLU, got Tanh"),
    ("a slope above 1", lambda: seq(nn.Linear(2, 3), nn.LeakyReLU(1.5), nn.Linear(3, 1, bias=False)),
     r"model\[1\] is nn\.LeakyReLU\(1\.5\).*\[0, 1\)"),
    ("a negative slope", lambda: seq(nn.Linear(2, 3), nn.LeakyReLU(-0.1), nn.Linear(3, 1, bias=False)),
     r"model\[1\] is nn\.LeakyReLU\(-0\.1\)"),
    ("an outer bias", lambda: seq(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)), r"model\[2\] has a bias"),
    ("two outputs", lambda: seq(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2, bias=False)),
     r"model\[2\] must have one output.*out_features = 2"),
    ("another outer layer", lambda: seq(nn.Linear(2, 3), nn.ReLU(), nn.Identity()),
     r"model\[2\] must be an nn\.Linear, got Identity"),
    ("mismatched widths", lambda: seq(nn.Linear(2, 3), nn.ReLU(), nn.Linear(4, 1, bias=False)),
     r"model\[2\] takes 4 inputs but model\[0\] has 3 outputs"),
    ("a weight norm", lambda: _normed(seq(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1, bias=False))),
     r"model\[0\] is parametrized \(ParametrizedLinear\)"),
    ("an old-style spectral norm", lambda: _spectral(seq(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1, bias=False))),
     r"parameters \['0\.bias', '0\.weight', '2\.weight'\], got \['0\.bias', '0\.weight_orig', '2\.weight'\]"),
    ("a frozen inner layer", lambda: _frozen(make_model(0, 2, 3), "0.weight", "0.bias"),
     r"model\[0\] \(the inner layer\) must be trained"),
    ("a frozen inner weight", lambda: _frozen(make_model(0, 2, 3), "0.weight"),
     r"model\[0\] \(the inner layer\) must be trained"),
    ("a frozen inner bias", lambda: _frozen(make_model(0, 2, 3), "0.bias"), r"model\[0\]\.bias must be trained"),
    ("meta tensors", lambda: make_model(0, 2, 3).to("meta"), r"meta device"),
    ("complex weights", lambda: _complex(make_model(0, 2, 3)), r"real floating tensor.*complex128"),
]


@pytest.mark.parametrize("what, build, match", BAD_MODELS, ids=[row[0] for row in BAD_MODELS])
def test_from_torch_refuses_models(what, build, match):
    X, y = make_data(0, 4, 2, "logistic")
    with pytest.raises(ValueError, match=match):
        flt.from_torch(build(), X, y, loss="logistic")


BAD_DATA = [
    ("X of another width", dict(X=torch.zeros(4, 3)), r"X must have shape \(n, 2\).*got shape \(4, 3\)"),
    ("X one-dimensional", dict(X=np.zeros(4)), r"X must have shape \(n, 2\)"),
    ("X complex", dict(X=torch.zeros(4, 2, dtype=torch.complex64)), r"X must hold real numbers"),
    ("X boolean", dict(X=torch.zeros(4, 2, dtype=torch.bool)), r"X must hold real numbers"),
    ("X with NaN", dict(X=torch.full((4, 2), float("nan"))), r"X contains NaN"),
    ("y of shape (n, 2)", dict(y=torch.ones(4, 2)), r"y must have shape \(n,\) or \(n, 1\), got shape \(4, 2\)"),
    ("y of another length", dict(y=torch.ones(3)), r"y has 3 entries but X has 4 rows"),
    ("labels not +-1", dict(y=torch.full((4,), 0.5)), r"y must be in \{-1, \+1\}"),
    ("an unknown loss", dict(loss="hinge"), r"loss must be one of"),
    ("an unknown reduction", dict(reduction="none"), r"reduction must be one of"),
    ("a negative weight decay", dict(weight_decay=-1.0), r"weight_decay must be"),
]


@pytest.mark.parametrize("what, change, match", BAD_DATA, ids=[row[0] for row in BAD_DATA])
def test_from_torch_refuses_data(what, change, match):
    X, y = make_data(0, 4, 2, "logistic")
    args = dict(X=X, y=y, loss="logistic", reduction="mean", weight_decay=0.0) | change
    with pytest.raises(ValueError, match=match):
        flt.from_torch(make_model(0, 2, 3), args.pop("X"), args.pop("y"), **args)


def test_to_torch_and_load_into_refuse():
    params = fl.Params(W=[[1.0, 2.0]], b=None, a=[1.0])
    with pytest.raises(ValueError, match=r"params must be a flowlib Params, FlowResult or DescentResult, got dict"):
        flt.to_torch({"W": [[1.0]]})
    with pytest.raises(ValueError, match=r"problem must be a flowlib Problem or None, got str"):
        flt.to_torch(params, "relu")
    with pytest.raises(ValueError, match=r"dtype must be a real floating torch\.dtype"):
        flt.to_torch(params, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"dtype must be a real floating torch\.dtype"):
        flt.to_torch(params, dtype="float64")
    biased = fl.Problem([[1.0, 0.0]], [1.0], loss="logistic", bias=True, train_outer=True)
    with pytest.raises(ValueError, match=r"b must be given"):
        flt.to_torch(params, biased)
    with pytest.raises(ValueError, match=r"params has m = 1 neurons and d = 2 inputs but model\[0\] is "
                                         r"nn\.Linear\(2, 3\)"):
        flt.load_into(make_model(0, 2, 3), params)
    with pytest.raises(ValueError, match=r"params has no bias \(b is None\) but model\[0\] has one"):
        flt.load_into(make_model(0, 2, 1), params)
    with pytest.raises(ValueError, match=r"params has a non-zero bias b but model\[0\] has none"):
        flt.load_into(make_model(0, 2, 1, bias=False), fl.Params(W=[[1.0, 2.0]], b=[1.0], a=[1.0]))
    with pytest.raises(ValueError, match=r"model\[2\] has a bias"):
        flt.load_into(seq(nn.Linear(2, 1), nn.ReLU(), nn.Linear(1, 1)), params)


def test_import_without_torch_says_how_to_install(monkeypatch):
    """``import flowlib.torch`` without PyTorch: an ImportError with the one-line install hint."""
    monkeypatch.setitem(sys.modules, "torch", None)  # "import torch" now fails as if it were not installed
    monkeypatch.delitem(sys.modules, "flowlib.torch")
    with pytest.raises(ImportError) as info:
        importlib.import_module("flowlib.torch")
    assert str(info.value) == "flowlib.torch needs PyTorch: pip install 'flowlib[torch]'"
