"""``Until``: when a run stops early (or fails), the same rule for the flow and for gradient descent, for a run
alone and for every member of an ensemble."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flowlib.problem import as_real_array


@dataclass(frozen=True)
class Until:
    """Stop rule (``until=``) of :func:`flowlib.gradient_flow`, :func:`flowlib.gradient_descent`,
    :func:`flowlib.stochastic_gradient_descent` and :func:`flowlib.ensemble`.

    A run (or a member of an ensemble) stops (status ``"reached"``) at the first point where the loss has gone
    below ``loss_below`` and ``|<linear, theta> + offset| <= tol``; give either part or both. For gradient descent
    both are checked at every iterate (the loss is the objective, with weight decay); for the flow the loss is
    checked at the Taylor steps' boundaries and the linear condition is located inside the step (bisection on the
    step's polynomial, to the last bit of the time). With ``deadline`` (flow time; iterate ``k`` of GD sits at
    ``t = k lr``, the deadline at iterate ``round(deadline / lr)``, :meth:`deadline_iterations`), a run whose loss
    has not gone below ``loss_below`` by then stops with status ``"deadline"``. A run alone and the same member of
    an ensemble stop at the same point (in float64, bit for bit).

    Parameters
    ----------
    loss_below : float, optional
        Loss threshold, ``> 0``.
    linear : array_like, optional
        Coefficients of a linear functional of the packed parameters, shape ``(m, d + 2)`` (rows ``(w_j, b_j, a_j)``
        as :meth:`flowlib.Params.packed`). Needs ``tol``.
    offset : float
        Added to the functional.
    tol : float, optional
        ``>= 0``.
    deadline : float, optional
        Flow time by which the loss must have gone below ``loss_below`` (needs ``loss_below``).

    Examples
    --------
    Seed 000's He experiment (Section 6) stops at ``|w1 + w2 + b1 - b2| <= 1e-3`` once ``L < 0.5``, and counts a
    failure when ``L < 0.5`` is not reached within ``10^4`` steps of ``eta = 0.05``:

    >>> import flowlib as fl
    >>> rule = fl.Until(loss_below=0.5, linear=[[1, 1, 0], [1, -1, 0]], tol=1e-3, deadline=1e4 * 0.05)
    >>> rule.deadline
    500.0
    """

    loss_below: float | None = None
    linear: np.ndarray | None = None
    offset: float = 0.0
    tol: float | None = None
    deadline: float | None = None

    def __post_init__(self):
        if self.loss_below is not None:
            value = _real(self.loss_below, "loss_below")
            if not value > 0.0:
                raise ValueError(f"loss_below must be > 0, got {value}")
            object.__setattr__(self, "loss_below", value)
        if (self.linear is None) != (self.tol is None):
            raise ValueError("linear and tol go together: give both or neither")
        if self.linear is not None:
            coef = as_real_array(self.linear, "linear", 2)
            tol = _real(self.tol, "tol")
            if not tol >= 0.0:
                raise ValueError(f"tol must be >= 0, got {tol}")
            object.__setattr__(self, "linear", coef)
            object.__setattr__(self, "tol", tol)
        object.__setattr__(self, "offset", _real(self.offset, "offset"))
        if self.deadline is not None:
            if self.loss_below is None:
                raise ValueError("deadline needs loss_below (the deadline is for reaching it)")
            value = _real(self.deadline, "deadline")
            if not value >= 0.0:
                raise ValueError(f"deadline must be >= 0, got {value}")
            object.__setattr__(self, "deadline", value)

    def kernel_arguments(self, shape: tuple[int, int]) -> tuple[float, np.ndarray, float, float]:
        """``(loss_below, coef, offset, lin_tol)`` as :mod:`flowlib.kernels.ensemble` takes them (``nan`` and a
        negative tolerance switch a part off); ``ValueError`` naming ``until`` when ``linear`` does not fit."""
        if self.linear is not None and self.linear.shape != shape:
            raise ValueError(f"until.linear has shape {self.linear.shape}, the parameters have shape {shape}")
        coef = self.linear if self.linear is not None else np.zeros(shape)
        return (math.nan if self.loss_below is None else self.loss_below, np.ascontiguousarray(coef), self.offset,
                -1.0 if self.tol is None else self.tol)

    def deadline_iterations(self, lr: float) -> int:
        """The iterate of gradient descent with step ``lr`` at which the deadline falls (``-1`` without one):
        ``deadline / lr``, rounded to the nearest integer when within ``1e-9`` relative of it (``1e4 * 0.05 / 0.05``
        is iterate 10000, not 9999), else rounded down."""
        if self.deadline is None:
            return -1
        ratio = self.deadline / float(lr)
        return int(round(ratio)) if abs(ratio - round(ratio)) <= 1e-9 * max(1.0, ratio) else int(ratio)

    def to_dict(self) -> dict:
        """JSON-friendly description."""
        return {"loss_below": self.loss_below, "linear": None if self.linear is None else self.linear.tolist(),
                "offset": self.offset, "tol": self.tol, "deadline": self.deadline}


def check_until(until, shape: tuple[int, int]) -> Until | None:
    """``until`` itself when it is ``None`` or an :class:`Until` that fits parameters of ``shape``; ``ValueError``
    naming ``until`` otherwise."""
    if until is None:
        return None
    if not isinstance(until, Until):
        raise ValueError(f"until must be a flowlib.Until, got {type(until).__name__}")
    until.kernel_arguments(shape)
    return until


def _real(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    return float(value)
