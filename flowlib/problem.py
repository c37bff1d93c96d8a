"""Problems and parameters: validation, normalisation and the loss/activation specification.

Everything a user passes in is checked here, once, and turned into float64 C-contiguous arrays. Bad input raises
``ValueError`` naming the argument; nothing is silently coerced beyond the exact widening of integer or float32
arrays to float64.
"""

from __future__ import annotations

import math

from dataclasses import KW_ONLY, dataclass, field

import numpy as np

from flowlib.kernels.series import LOSS_EXP, LOSS_LOGISTIC, LOSS_SQUARE
from flowlib.reprs import Summarised

LOSSES = {"exp": LOSS_EXP, "logistic": LOSS_LOGISTIC, "square": LOSS_SQUARE}
REDUCTIONS = ("mean", "sum")
ACTIVATIONS = ("relu", "leaky_relu")


def as_real_array(value, name: str, ndim: int | None) -> np.ndarray:
    """Return ``value`` as a finite float64 C-contiguous array with ``ndim`` dimensions (any number for ``None``).

    Integer and floating arrays are widened exactly; booleans, complex numbers, objects, strings, ragged nested
    sequences, integers that float64 cannot hold exactly (beyond ``2**53``) and long doubles that it would round
    raise.

    Raises
    ------
    ValueError
        Naming ``name`` when the dtype, the number of dimensions, an entry or the shape is wrong.
    """
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):  # ragged nested sequences
        raise ValueError(f"{name} must be a rectangular array of real numbers (its rows differ in length)") from None
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if arr.dtype.kind in "iu":
        _check_exact_integers(arr, name)
    widened = np.array(arr, dtype=np.float64, order="C", copy=True)
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 8 and not np.all((widened == arr) | np.isnan(arr)):
        raise ValueError(f"{name} holds {arr.dtype} values that float64 cannot represent exactly")
    arr = widened
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite entries")
    return arr


def _check_exact_integers(arr: np.ndarray, name: str) -> None:
    """``ValueError`` naming ``name`` when an integer entry beyond ``2**53`` would be rounded by float64."""
    limit = 2**53
    large = arr[(arr > limit) | (arr < -limit)] if arr.dtype.itemsize >= 8 else arr[:0]
    for value in large.ravel().tolist():
        if int(float(value)) != value:
            raise ValueError(f"{name} holds the integer {value}, which float64 cannot represent exactly")


def _check_choice(value, name: str, choices) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


@dataclass(frozen=True, repr=False)
class Problem(Summarised):
    """A training problem: data, labels, loss, activation and which parameters move.

    The network is ``f(x) = sum_j a_j sigma(<w_j, x> + b_j)`` with ``sigma(z) = max(z, leak z)`` and the loss
    ``L = R_i l(f(x_i), y_i)`` with ``R`` the mean or the sum over samples (docs/design.md, Model and loss).

    Parameters
    ----------
    X : array_like, shape (n, d)
        Inputs, one row per sample.
    y : array_like, shape (n,)
        Labels in {-1, +1} for ``loss="exp"`` and ``"logistic"``, real targets for ``"square"``.
    loss : {"exp", "logistic", "square"}
        ``exp(-y f)``, ``log(1 + exp(-y f))`` or ``(f - y)^2 / 2``.
    reduction : {"mean", "sum"}
        How the per-sample losses are combined; it sets the time scale of the flow.
    activation : {"relu", "leaky_relu"}
        ``"relu"`` requires ``leak == 0``; ``"leaky_relu"`` requires ``0 < leak < 1``.
    leak : float
        Slope of the negative side.
    bias : bool
        Whether neurons have a bias ``b_j`` (trained when present). Required: there is no silent default. A
        PyTorch ``nn.Linear(d, m)`` has one unless built with ``bias=False``.
    train_outer : bool
        Whether the outer weights ``a`` are trained (otherwise they stay at their initial values). Required: a
        PyTorch ``nn.Linear(m, 1)`` in the model is trained, which is ``train_outer=True``.
    weight_decay : float
        ``lambda >= 0``: every method minimises ``L(theta) + lambda/2 |theta|^2`` over the trained parameters
        (``W``, ``b`` when ``bias``, ``a`` when ``train_outer``), PyTorch's ``weight_decay`` for SGD. Reported
        losses include the penalty.

    Raises
    ------
    ValueError
        Naming the offending argument.
    """

    X: np.ndarray
    y: np.ndarray
    _: KW_ONLY
    loss: str = "logistic"
    reduction: str = "mean"
    activation: str = "relu"
    leak: float = 0.0
    bias: bool | None = None
    train_outer: bool | None = None
    weight_decay: float = 0.0
    _Xa: np.ndarray = field(init=False, repr=False, compare=False)
    #: the kernels' :class:`flowlib.kernels.bundles.Network` of this problem and the same as plain tuples, built on
    #: first use (:func:`flowlib.flow.kernel_network`) and not pickled
    _network: object = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self):
        X = as_real_array(self.X, "X", 2)
        y = as_real_array(self.y, "y", 1)
        if X.shape[0] == 0 or X.shape[1] == 0:
            raise ValueError(f"X must have at least one sample and one feature, got shape {X.shape}")
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y has {y.shape[0]} entries but X has {X.shape[0]} rows")
        _check_choice(self.loss, "loss", LOSSES)
        _check_choice(self.reduction, "reduction", REDUCTIONS)
        _check_choice(self.activation, "activation", ACTIVATIONS)
        if self.loss in ("exp", "logistic") and not np.all(np.abs(y) == 1.0):
            raise ValueError(f"y must be in {{-1, +1}} for loss={self.loss!r}")
        if isinstance(self.leak, bool) or not isinstance(self.leak, (int, float, np.floating, np.integer)):
            raise ValueError(f"leak must be a real number, got {self.leak!r}")
        leak = float(self.leak)
        if self.activation == "relu" and leak != 0.0:
            raise ValueError(f"leak must be 0 for activation='relu' (use 'leaky_relu'), got {leak}")
        if self.activation == "leaky_relu" and not 0.0 < leak < 1.0:
            raise ValueError(f"leak must lie in (0, 1) for activation='leaky_relu', got {leak}")
        for name, torch_meaning in (("bias", "nn.Linear(d, m) has bias=True"),
                                    ("train_outer", "a trained nn.Linear(m, 1) is train_outer=True")):
            if getattr(self, name) is None:
                raise ValueError(f"{name} must be given, True or False (no silent default; in PyTorch, "
                                 f"{torch_meaning})")
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        decay = self.weight_decay
        if isinstance(decay, bool) or not isinstance(decay, (int, float, np.floating, np.integer)) or not (
                math.isfinite(decay) and decay >= 0.0):
            raise ValueError(f"weight_decay must be a finite real number >= 0, got {decay!r}")
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "leak", leak)
        object.__setattr__(self, "weight_decay", float(decay))
        object.__setattr__(self, "bias", bool(self.bias))
        object.__setattr__(self, "train_outer", bool(self.train_outer))
        object.__setattr__(self, "_Xa", np.ascontiguousarray(np.hstack([X, np.ones((X.shape[0], 1))])))

    def __getstate__(self) -> dict:
        """Pickled without the kernels' bundle (rebuilt where the problem is used: an ensemble's workers)."""
        state = dict(self.__dict__)
        state["_network"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    @property
    def n(self) -> int:
        """Number of samples."""
        return self.X.shape[0]

    @property
    def d(self) -> int:
        """Input dimension."""
        return self.X.shape[1]

    @property
    def loss_code(self) -> int:
        """The kernels' integer code of the loss."""
        return LOSSES[self.loss]

    @property
    def scale(self) -> float:
        """The reduction factor ``c`` in ``L = c sum_i l_i``: ``1/n`` for the mean, 1 for the sum."""
        return 1.0 / self.n if self.reduction == "mean" else 1.0

    @property
    def augmented_inputs(self) -> np.ndarray:
        """``X`` with a column of ones appended, shape ``(n, d + 1)`` (read-only view for the kernels)."""
        return self._Xa

    def _summary_fields(self) -> list:
        """Sizes and options, no data (the ``repr`` and the notebook table)."""
        fields = [("n", self.n), ("d", self.d), ("loss", self.loss), ("reduction", self.reduction),
                  ("activation", self.activation)]
        if self.leak:
            fields.append(("leak", self.leak))
        fields += [("bias", self.bias), ("train_outer", self.train_outer)]
        return fields + [("weight_decay", self.weight_decay)] if self.weight_decay else fields

    def to_dict(self) -> dict:
        """JSON-friendly description (data as nested lists)."""
        return {"X": self.X.tolist(), "y": self.y.tolist(), "loss": self.loss, "reduction": self.reduction,
                "activation": self.activation, "leak": self.leak, "bias": self.bias,
                "train_outer": self.train_outer, "weight_decay": self.weight_decay}


@dataclass(frozen=True, repr=False)
class Params(Summarised):
    """Network parameters ``W`` (m, d), ``b`` (m,) or ``None``, ``a`` (m,).

    Rows of ``W`` are neurons. ``b=None`` means no bias; a problem with ``bias=True`` needs ``b`` (zeros to start
    the trained bias at 0).

    Raises
    ------
    ValueError
        Naming ``W``, ``b`` or ``a`` when a shape, dtype or entry is wrong.
    """

    W: np.ndarray
    b: np.ndarray | None
    a: np.ndarray

    def __post_init__(self):
        W = as_real_array(self.W, "W", 2)
        a = as_real_array(self.a, "a", 1)
        if W.shape[0] == 0:
            raise ValueError("W must have at least one neuron (row)")
        if a.shape[0] != W.shape[0]:
            raise ValueError(f"a has {a.shape[0]} entries but W has {W.shape[0]} neurons (rows)")
        b = None
        if self.b is not None:
            b = as_real_array(self.b, "b", 1)
            if b.shape[0] != W.shape[0]:
                raise ValueError(f"b has {b.shape[0]} entries but W has {W.shape[0]} neurons (rows)")
        object.__setattr__(self, "W", W)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "a", a)

    @property
    def m(self) -> int:
        """Number of neurons."""
        return self.W.shape[0]

    def _summary_fields(self) -> list:
        """Shapes and sizes, no entries (the ``repr`` and the notebook table)."""
        return [("m", self.m), ("d", self.W.shape[1]), ("bias", self.b is not None),
                ("max_abs", float(max(np.max(np.abs(self.W)), np.max(np.abs(self.a)),
                                      0.0 if self.b is None else np.max(np.abs(self.b)))))]

    def check_against(self, problem: Problem) -> None:
        """Raise ``ValueError`` naming the argument when these parameters do not fit ``problem``."""
        if self.W.shape[1] != problem.d:
            raise ValueError(f"W has {self.W.shape[1]} columns but the problem's X has d = {problem.d}")
        if not problem.bias and self.b is not None and np.any(self.b != 0.0):
            raise ValueError("b must be None (or zeros) for a problem with bias=False")
        if problem.bias and self.b is None:
            raise ValueError("b must be given (zeros to start the trained bias at 0) for a problem with bias=True")

    def packed(self) -> np.ndarray:
        """The kernels' layout: one row ``(w_j, b_j, a_j)`` per neuron, shape ``(m, d + 2)``."""
        m, d = self.W.shape
        rows = np.empty((m, d + 2))
        rows[:, :d] = self.W
        rows[:, d] = 0.0 if self.b is None else self.b
        rows[:, d + 1] = self.a
        return rows

    @classmethod
    def unpacked(cls, rows: np.ndarray, bias: bool) -> "Params":
        """Inverse of :meth:`packed`; ``b`` is ``None`` when ``bias`` is false."""
        d = rows.shape[1] - 2
        return cls(W=rows[:, :d].copy(), b=rows[:, d].copy() if bias else None, a=rows[:, d + 1].copy())

    def balancedness(self) -> np.ndarray:
        """``a_j^2 - |w_j|^2 - b_j^2`` per neuron (conserved by the flow when ``a`` is trained)."""
        b2 = 0.0 if self.b is None else self.b**2
        return self.a**2 - np.sum(self.W**2, axis=1) - b2
