"""PyTorch round trip: a two-layer ``nn.Sequential`` in, its exact gradient flow and GD, and back to PyTorch.

Needs the ``torch`` extra (``pip install 'flowlib[torch]'``); import it explicitly (``import flowlib.torch``:
``import flowlib`` does not import PyTorch). The network flowlib computes is, in PyTorch::

    model = nn.Sequential(nn.Linear(d, m, bias=bias), nn.ReLU() or nn.LeakyReLU(leak), nn.Linear(m, 1, bias=False))

:func:`from_torch` turns such a model and its data into a :class:`~flowlib.Problem` and :class:`~flowlib.Params`
(exact float64 copies), :func:`to_torch` builds the model holding any parameters (a flow's final state, a GD
iterate) so that training can go on in PyTorch, and :func:`load_into` copies parameters into an existing model.

Losses. With ``f = model(X).squeeze(1)`` and ``R`` the mean or the sum (``reduction``):

============  ==========================================================================================
``loss``      the same objective in PyTorch
============  ==========================================================================================
``logistic``  ``R(F.softplus(-y * f))``, i.e. ``nn.SoftMarginLoss(reduction=...)(f, y)``
``exp``       ``R(torch.exp(-y * f))``
``square``    ``R(0.5 * (f - y) ** 2)``; ``nn.MSELoss`` has no ``1/2``: see below
============  ==========================================================================================

``torch.optim.SGD(model.parameters(), lr, weight_decay=lam)`` on one of these objectives, full batch, is
``fl.gradient_descent(problem, params, lr, steps)`` with ``problem.weight_decay = lam``, and its iterate ``k`` sits
at flow time ``t = k lr``. With ``nn.MSELoss(reduction=r)`` (``= 2 L``, ``L`` flowlib's square loss) a step of lr
``eta`` and weight decay ``lam`` is ``theta - 2 eta (grad L + lam/2 theta)``: flowlib's GD at ``lr = 2 eta`` with
``weight_decay = lam / 2``, and iterate ``k`` sits at flow time ``t = 2 k eta``. The two agree to rounding, not bit
for bit: PyTorch sums in another order (``tests/test_torch.py``: within 1e-15 relative after 300 steps).

The derivative at the kink. Autograd differentiates the expression that computes ``sigma``, so at exactly
``z = 0`` the slope ``sigma'(0)`` depends on how ``sigma`` is written (measured with autograd in float64 at
``z = 0.0`` and ``z = -0.0``; ``s`` is the leak). Pass ``selection`` to :func:`flowlib.gradient_descent` (or
:func:`flowlib.stochastic_gradient_descent`, or ``gradient_flow(..., solution="caratheodory")``) to reproduce it;
it matters only where a pre-activation is exactly 0 (a zero neuron, a zero sample without bias, symmetric data):

======================================================================  ===================  =================
``sigma`` written as                                                    ``sigma'(0)``        ``selection=``
======================================================================  ===================  =================
``nn.ReLU()``, ``F.relu(z)``, ``torch.relu(z)``, ``z.relu()``            0                    ``0`` (default)
``nn.LeakyReLU(s)``, ``F.leaky_relu(z, s)``                             ``s``                ``s`` (default)
``z.clamp(min=0)``, ``torch.clamp_min(z, 0)``                           1                    ``1``
``torch.maximum(z, torch.zeros_like(z))``                               1/2                  ``0.5``
``torch.where(z > 0, z, 0.0)``, ``z * (z > 0)``                         0                    ``0``
``torch.where(z >= 0, z, 0.0)``                                         1                    ``1``
``torch.where(z > 0, z, s * z)``                                        ``s``                ``s``
``torch.maximum(z, s * z)``                                             ``(1 + s)/2``        ``(1 + s) / 2``
======================================================================  ===================  =================

(``torch.maximum`` splits the gradient evenly between equal arguments.) :func:`from_torch` accepts only
``nn.ReLU`` and ``nn.LeakyReLU`` and returns the matching ``selection`` (``leak``) with the problem. The exact
flow itself needs no selection: on a switching surface it takes the minimal-norm element of the Filippov set
(docs/design.md, *Solution concept*).

Importing this module without PyTorch installed raises ``ImportError`` with the install command.
"""

from __future__ import annotations

from typing import NamedTuple

try:
    import torch
    from torch import nn
    from torch.nn.utils import parametrize
except ModuleNotFoundError as exc:  # only a missing torch; a broken installation raises its own error
    if exc.name != "torch":
        raise
    raise ImportError("flowlib.torch needs PyTorch: pip install 'flowlib[torch]'") from None

import numpy as np

from flowlib.problem import Params, Problem, as_real_array
from flowlib.result import DescentResult, FlowResult

__all__ = ["TorchModel", "from_torch", "load_into", "to_torch"]

_SHAPE = "nn.Sequential(nn.Linear(d, m[, bias=False]), nn.ReLU() | nn.LeakyReLU(s), nn.Linear(m, 1, bias=False))"


class TorchModel(NamedTuple):
    """What :func:`from_torch` returns; unpacks as ``problem, params, selection = from_torch(...)``.

    Attributes
    ----------
    problem : Problem
        Data, loss, activation, bias, ``train_outer`` and ``weight_decay`` of the model.
    params : Params
        The model's parameters, as float64 copies.
    selection : float
        ``sigma'(0)`` that PyTorch's autograd uses for the model's activation module (0 for ``nn.ReLU``, the slope
        for ``nn.LeakyReLU``): pass it as ``selection=`` to :func:`flowlib.gradient_descent` to reproduce
        ``torch.optim.SGD`` on the model (it is also the default there).
    """

    problem: Problem
    params: Params
    selection: float


# ----- checks ---------------------------------------------------------------------------------------------------
def _layers(model, name: str = "model"):
    """The three layers of a model of the accepted shape, else ``ValueError`` naming ``name`` and what is wrong.

    Returns ``(inner, activation, outer, leak)``."""
    if not isinstance(model, nn.Sequential):
        raise ValueError(f"{name} must be a torch.nn.Sequential {_SHAPE}, got {type(model).__name__}")
    layers = list(model)
    if len(layers) != 3:
        kinds = ", ".join(type(layer).__name__ for layer in layers) or "none"
        raise ValueError(f"{name} must have exactly 3 layers, {_SHAPE}; got {len(layers)}: {kinds}")
    inner, act, outer = layers
    for index, layer in enumerate(layers):
        if parametrize.is_parametrized(layer):
            raise ValueError(f"{name}[{index}] is parametrized ({type(layer).__name__}): gradient descent on a "
                             f"parametrization (weight norm, spectral norm...) is not gradient descent on the weights")
    for index, layer in ((0, inner), (2, outer)):
        if type(layer) is not nn.Linear:  # a subclass (LazyLinear, a user's Linear) may compute something else
            raise ValueError(f"{name}[{index}] must be an nn.Linear, got {type(layer).__name__}")
    if type(act) is nn.ReLU:
        leak = 0.0
    elif type(act) is nn.LeakyReLU:
        leak = float(act.negative_slope)
        if not 0.0 <= leak < 1.0:
            raise ValueError(f"{name}[1] is nn.LeakyReLU({act.negative_slope}): flowlib needs a negative slope in "
                             f"[0, 1)")
    else:
        raise ValueError(f"{name}[1] must be nn.ReLU or nn.LeakyReLU, got {type(act).__name__}")
    if outer.out_features != 1:
        raise ValueError(f"{name}[2] must have one output (nn.Linear(m, 1, bias=False)), got out_features = "
                         f"{outer.out_features}")
    if outer.bias is not None:
        raise ValueError(f"{name}[2] has a bias, which flowlib's network f(x) = sum_j a_j sigma(<w_j, x> + b_j) "
                         f"does not have: build it with nn.Linear(m, 1, bias=False)")
    if outer.in_features != inner.out_features:
        raise ValueError(f"{name}[2] takes {outer.in_features} inputs but {name}[0] has {inner.out_features} outputs")
    expected = {"0.weight", "2.weight"} | ({"0.bias"} if inner.bias is not None else set())
    names = {key for key, _ in model.named_parameters()}
    if names != expected:  # e.g. the old nn.utils.weight_norm: weight_g and weight_v instead of weight
        raise ValueError(f"{name} must hold exactly the parameters {sorted(expected)}, got {sorted(names)} "
                         f"(gradient descent on a reparametrization is not gradient descent on the weights)")
    for key, tensor in model.named_parameters():
        if not tensor.dtype.is_floating_point:
            raise ValueError(f"{name}.{key} must be a real floating tensor, got {tensor.dtype}")
        if tensor.device.type == "meta":
            raise ValueError(f"{name}.{key} is on the meta device and has no values")
    return inner, act, outer, leak


def _numpy(value, name: str):
    """``value`` as a numpy array (or unchanged for non-tensors): a floating tensor widened exactly to float64 on
    the CPU, detached; other tensors in their own dtype, for :class:`~flowlib.Problem` to check."""
    if not isinstance(value, torch.Tensor):
        return value
    if value.device.type == "meta":
        raise ValueError(f"{name} is on the meta device and has no values")
    tensor = value.detach().to("cpu")
    if tensor.dtype.is_floating_point:
        tensor = tensor.to(torch.float64)  # exact from float16, bfloat16 and float32
    elif tensor.dtype.is_complex:
        raise ValueError(f"{name} must hold real numbers, got {tensor.dtype}")
    return tensor.resolve_conj().resolve_neg().numpy().copy()


def _params_of(params, name: str = "params"):
    """``(Params, Problem or None)`` from a Params or a result (its final parameters and its problem)."""
    if isinstance(params, (FlowResult, DescentResult)):
        return params.final, params.problem
    if isinstance(params, Params):
        return params, None
    raise ValueError(f"{name} must be a flowlib Params, FlowResult or DescentResult, got {type(params).__name__}")


# ----- public functions -----------------------------------------------------------------------------------------
def from_torch(model, X, y, *, loss: str, reduction: str = "mean", weight_decay: float = 0.0) -> TorchModel:
    """The flowlib problem and parameters of a two-layer PyTorch model.

    Parameters
    ----------
    model : torch.nn.Sequential
        Exactly ``nn.Sequential(nn.Linear(d, m[, bias=False]), nn.ReLU() | nn.LeakyReLU(s),
        nn.Linear(m, 1, bias=False))``, on any device, of any real floating dtype (widened exactly to float64).
        The inner layer must be trained (``requires_grad`` on its weight and bias); the outer layer trained
        (``train_outer=True``) or frozen (``requires_grad=False``: ``train_outer=False``). ``nn.LeakyReLU(0)``
        is a ReLU.
    X : array_like or torch.Tensor, shape (n, d)
        Inputs (a tensor is detached, moved to the CPU and widened exactly to float64).
    y : array_like or torch.Tensor, shape (n,) or (n, 1)
        Labels in {-1, +1} for ``"exp"`` and ``"logistic"``, targets for ``"square"``.
    loss : {"logistic", "exp", "square"}
        ``log(1 + exp(-y f))`` (``F.softplus(-y f)``), ``exp(-y f)`` or ``(f - y)^2 / 2`` (half of
        ``nn.MSELoss``'s; see the module's notes for the step size that matches ``nn.MSELoss``).
    reduction : {"mean", "sum"}
        As in PyTorch's losses.
    weight_decay : float
        ``lambda >= 0``, as in ``torch.optim.SGD(weight_decay=lambda)``.

    Returns
    -------
    TorchModel
        ``(problem, params, selection)``: float64 copies, nothing shared with the model; ``selection`` is
        ``sigma'(0)`` of the model's activation under autograd (``leak``).

    Raises
    ------
    ValueError
        Naming what is wrong: the model's type, its number of layers, a layer's type, the outer layer's width or
        bias, a ``LeakyReLU`` slope outside ``[0, 1)``, an inner layer not (fully) trained, a partly frozen outer
        layer, a parametrized layer, a non-floating parameter, ``X`` not of shape ``(n, d)``, ``y`` of another
        shape than ``(n,)`` or ``(n, 1)``, and whatever :class:`~flowlib.Problem` refuses (``loss``, ``reduction``,
        labels, non-finite values...).

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from flowlib.torch import from_torch
    >>> model = nn.Sequential(nn.Linear(2, 3), nn.LeakyReLU(0.25), nn.Linear(3, 1, bias=False))
    >>> problem, params, selection = from_torch(model, torch.eye(2), [1.0, -1.0], loss="logistic")
    >>> problem.activation, problem.leak, problem.bias, problem.train_outer, selection
    ('leaky_relu', 0.25, True, True, 0.25)
    >>> params.W.shape, params.W.dtype
    ((3, 2), dtype('float64'))
    """
    inner, _, outer, leak = _layers(model)
    if not inner.weight.requires_grad:
        raise ValueError("model[0] (the inner layer) must be trained: flowlib always trains W "
                         "(model[0].weight.requires_grad is False)")
    if inner.bias is not None and not inner.bias.requires_grad:
        raise ValueError("model[0].bias must be trained like model[0].weight (requires_grad is False): flowlib "
                         "trains the bias when there is one")
    X = as_real_array(_numpy(X, "X"), "X", None)
    if X.ndim != 2 or X.shape[1] != inner.in_features:
        raise ValueError(f"X must have shape (n, {inner.in_features}) for model[0] = nn.Linear"
                         f"({inner.in_features}, {inner.out_features}), got shape {X.shape}")
    y = as_real_array(_numpy(y, "y"), "y", None)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0].copy()
    elif y.ndim != 1:
        raise ValueError(f"y must have shape (n,) or (n, 1), got shape {y.shape}")
    problem = Problem(X, y, loss=loss, reduction=reduction, activation="leaky_relu" if leak else "relu",
                      leak=leak, bias=inner.bias is not None, train_outer=bool(outer.weight.requires_grad),
                      weight_decay=weight_decay)
    with torch.no_grad():
        W = _numpy(inner.weight, "model[0].weight")
        b = None if inner.bias is None else _numpy(inner.bias, "model[0].bias")
        a = _numpy(outer.weight, "model[2].weight")[0]
    return TorchModel(problem, Params(W, b, a), leak)


def to_torch(params, problem: Problem | None = None, *, dtype=None, device=None):
    """A new ``nn.Sequential`` holding ``params``, to go on in PyTorch.

    Parameters
    ----------
    params : Params, FlowResult or DescentResult
        The parameters (of a result: its final state, and its problem unless ``problem`` is given).
    problem : Problem, optional
        Sets the activation (``nn.ReLU`` or ``nn.LeakyReLU(leak)``), the bias (``nn.Linear(d, m, bias=...)``)
        and whether the outer layer is trained (its ``requires_grad``). Without one: ``nn.ReLU``, a bias when
        ``params.b`` is not ``None``, outer layer trained.
    dtype : torch.dtype, optional
        Real floating dtype of the parameters (default ``torch.float64``: an exact copy; lower precisions are the
        rounding to nearest).
    device : torch.device or str, optional
        Where the parameters live (default the CPU).

    Returns
    -------
    torch.nn.Sequential
        ``nn.Sequential(nn.Linear(d, m, bias), activation, nn.Linear(m, 1, bias=False))``.

    Raises
    ------
    ValueError
        Naming ``params``, ``problem`` or ``dtype``.

    Examples
    --------
    >>> import torch
    >>> import flowlib as fl
    >>> from flowlib.torch import to_torch
    >>> model = to_torch(fl.Params(W=[[1.0, -2.0]], b=None, a=[3.0]))
    >>> model
    Sequential(
      (0): Linear(in_features=2, out_features=1, bias=False)
      (1): ReLU()
      (2): Linear(in_features=1, out_features=1, bias=False)
    )
    >>> model(torch.tensor([[2.0, 0.5]], dtype=torch.float64)).item()
    3.0
    """
    params, own_problem = _params_of(params)
    if problem is None:
        problem = own_problem
    elif not isinstance(problem, Problem):
        raise ValueError(f"problem must be a flowlib Problem or None, got {type(problem).__name__}")
    dtype = torch.float64 if dtype is None else dtype
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a real floating torch.dtype (torch.float64, torch.float32, ...), got "
                         f"{dtype!r}")
    m, d = params.W.shape
    if problem is None:
        bias, leak, train_outer = params.b is not None, 0.0, True
    else:
        params.check_against(problem)
        bias, leak, train_outer = problem.bias, problem.leak, problem.train_outer
    act = nn.LeakyReLU(leak) if leak else nn.ReLU()
    model = nn.Sequential(nn.Linear(d, m, bias=bias, dtype=dtype, device=device), act,
                          nn.Linear(m, 1, bias=False, dtype=dtype, device=device))
    if not bias and params.b is not None:  # zeros (check_against): the problem has no bias
        params = Params(params.W, None, params.a)
    load_into(model, params)
    model[2].weight.requires_grad_(train_outer)
    return model


def load_into(model, params):
    """Copy ``params`` into ``model`` in place (under ``torch.no_grad()``), in the model's dtype and device.

    Parameters
    ----------
    model : torch.nn.Sequential
        Of the shape :func:`from_torch` accepts, with ``m`` neurons and ``d`` inputs as ``params``; its
        ``requires_grad`` flags are left as they are.
    params : Params, FlowResult or DescentResult
        The parameters (of a result: its final state). ``params.b`` must be given when ``model[0]`` has a bias,
        and ``None`` or zeros when it has none.

    Returns
    -------
    torch.nn.Sequential
        ``model``.

    Raises
    ------
    ValueError
        Naming ``model`` (its shape) or ``params`` (sizes or bias that do not fit).
    """
    params, _ = _params_of(params)
    inner, _, outer, _ = _layers(model)
    m, d = params.W.shape
    if (inner.out_features, inner.in_features) != (m, d):
        raise ValueError(f"params has m = {m} neurons and d = {d} inputs but model[0] is nn.Linear"
                         f"({inner.in_features}, {inner.out_features})")
    if inner.bias is not None and params.b is None:
        raise ValueError("params has no bias (b is None) but model[0] has one")
    if inner.bias is None and params.b is not None and np.any(params.b != 0.0):
        raise ValueError("params has a non-zero bias b but model[0] has none (nn.Linear(d, m, bias=False))")

    def copy(target, values):
        target.copy_(torch.as_tensor(values, dtype=torch.float64).to(dtype=target.dtype, device=target.device))

    with torch.no_grad():
        copy(inner.weight, params.W)
        if inner.bias is not None:
            copy(inner.bias, params.b)
        copy(outer.weight, params.a[None, :])
    return model
