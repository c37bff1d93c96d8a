"""Dense output of a flow: the Taylor polynomials of its steps as one callable object, at either precision.

A run of :func:`flowlib.gradient_flow` keeps, for every step, the Taylor coefficients of the packed state in the
integration variable (flow time ``t``, or ``s = ln(1 + t)`` in the log clock). :class:`DenseOutput` holds them with
the step boundaries and evaluates the state anywhere in the interval the run covered, the role SciPy's
``OdeSolution`` plays for ``solve_ivp``; :attr:`flowlib.FlowResult.dense` returns it.

A run computes in float64 or in mpmath numbers at ``dps`` decimal digits. :class:`Numbers` is that number type: the
precision context, the conversion of given times, and the elementary functions the clocks need (``log``,
``exp``, ``log1p``, ``expm1``, ``softplus``), so that the code using it does not branch on the precision.
:data:`FLOAT64` is the float64 instance; :meth:`Numbers.at` gives the one of a run.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np


class Numbers:
    """The number type of a run: float64, or mpmath ``mpf`` at ``dps`` decimal digits.

    The methods take and return arrays (float64, or ``dtype=object`` holding mpf) and compute elementwise; the
    mpmath ones at ``dps`` digits, in a :func:`mpmath.mp.workdps` context (mpmath's global precision is never set).

    Parameters
    ----------
    dps : int or None
        Decimal digits of an mpmath run; ``None`` for float64 (use :data:`FLOAT64`, or :meth:`at`).

    Examples
    --------
    >>> from flowlib.dense import FLOAT64, Numbers
    >>> FLOAT64.log1p(FLOAT64.convert([0.0, 1.0])).tolist()
    [0.0, 0.6931471805599453]
    >>> str(Numbers.at(30).convert(["0.1"])[0])
    '0.1'
    """

    __slots__ = ("dps",)

    def __init__(self, dps: int | None = None):
        self.dps = dps

    @staticmethod
    def at(dps: int | None) -> Numbers:
        """The number type of a run at ``dps`` digits (:data:`FLOAT64` for ``None``)."""
        return FLOAT64 if dps is None else Numbers(dps)

    def __repr__(self) -> str:
        return f"Numbers(dps={self.dps})"

    @property
    def name(self) -> str:
        """``"float64"``, or ``"mpmath, N digits"``."""
        return "float64" if self.dps is None else f"mpmath, {self.dps} digits"

    @property
    def functions(self):
        """The scalar functions at this precision: the :mod:`math` module, or mpmath's ``mp`` (to be used inside
        :meth:`context`)."""
        if self.dps is None:
            return math
        from mpmath import mp

        return mp

    def context(self):
        """A context in which arithmetic on these numbers is exact to the run's precision: ``mp.workdps(dps)`` (an
        operation on mpf outside it would round to mpmath's current precision), nothing for float64."""
        if self.dps is None:
            return contextlib.nullcontext()
        from mpmath import mp

        return mp.workdps(self.dps)

    def convert(self, values) -> np.ndarray:
        """``values`` (array_like) as an array of these numbers: float64, or mpf (strings and mpf taken exactly,
        anything else through its float value)."""
        if self.dps is None:
            return np.asarray(values, dtype=np.float64)
        from mpmath import mpf

        given = np.asarray(values, dtype=object)
        out = np.empty(given.shape, dtype=object)
        with self.context():
            for index, x in np.ndenumerate(given):
                out[index] = mpf(x) if isinstance(x, (str, mpf)) else mpf(float(x))
        return out

    def _map(self, function, values) -> np.ndarray:
        """``function`` of each entry of the object array ``values``, at this precision."""
        values = np.asarray(values, dtype=object)
        out = np.empty(values.shape, dtype=object)
        with self.context():
            for index, v in np.ndenumerate(values):
                out[index] = function(v)
        return out

    def log(self, values) -> np.ndarray:
        """``ln x`` (``-inf`` at 0)."""
        return np.log(values) if self.dps is None else self._map(self.functions.log, values)

    def exp(self, values) -> np.ndarray:
        """``e^x``."""
        return np.exp(values) if self.dps is None else self._map(self.functions.exp, values)

    def log1p(self, values) -> np.ndarray:
        """``ln(1 + x)``, accurate near 0."""
        return np.log1p(values) if self.dps is None else self._map(self.functions.log1p, values)

    def expm1(self, values) -> np.ndarray:
        """``e^x - 1``, accurate near 0."""
        return np.expm1(values) if self.dps is None else self._map(self.functions.expm1, values)

    def softplus(self, values) -> np.ndarray:
        """``ln(1 + e^x)`` without overflow (``s`` at ``ln t = x``)."""
        if self.dps is None:
            return np.logaddexp(0.0, values)
        mp = self.functions
        return self._map(lambda v: v + mp.log1p(mp.exp(-v)), values)


#: The float64 number type.
FLOAT64 = Numbers()


def check_interval(u: np.ndarray, grid: np.ndarray, t_span: tuple) -> None:
    """Refuse values ``u`` of the integration variable outside ``[grid[0], grid[-1]]`` (or not finite).

    Raises
    ------
    ValueError
        Naming ``t`` and the interval ``t_span`` of flow time the run covered.
    """
    finite = np.isfinite(u.astype(np.float64))
    if np.any(~finite) or np.any(u < grid[0]) or np.any(u > grid[-1]):
        raise ValueError(f"t must lie in [{t_span[0]}, {t_span[1]}], the interval the run covered")


class DenseOutput:
    """The packed state of a flow anywhere in the interval it covered: one Taylor polynomial per step.

    Step ``k`` covers ``[grid[k], grid[k + 1]]`` of the integration variable ``u`` (flow time ``t``, or
    ``s = ln(1 + t)`` in the log clock) and its state is ``sum_q coefficients[k, q] (u - grid[k])^q``, evaluated by
    Horner's rule. A value on a step boundary is taken from the step that starts there (the last step for the end).

    Parameters
    ----------
    grid : ndarray, shape (n_steps + 1,)
        The integration variable at the step boundaries, non-decreasing (float64, or mpf objects).
    coefficients : ndarray, shape (n_steps, order + 1, m, d + 2)
        Taylor coefficients of each step in ``u - grid[k]``; ``n_steps >= 1``.
    order : int
        Degree of the polynomials.
    numbers : Numbers
        The number type of the run (:data:`FLOAT64` by default).
    clock : {"t", "log"}
        What ``grid`` measures: flow time, or ``ln(1 + t)``.
    t_span : tuple, optional
        The flow times at ``grid[0]`` and ``grid[-1]``, named when a value is refused (default: the ends of
        ``grid``).

    Raises
    ------
    ValueError
        If the shapes do not fit each other or there is no step.

    Examples
    --------
    One step of ``u -> 1 + 2u`` on ``[0, 1]`` (one neuron, ``d = 1``, every entry of the state alike):

    >>> import numpy as np
    >>> from flowlib.dense import DenseOutput
    >>> C = np.zeros((1, 2, 1, 3)); C[0, 0], C[0, 1] = 1.0, 2.0
    >>> dense = DenseOutput(np.array([0.0, 1.0]), C, 1)
    >>> dense([0.25])[:, 0, 0].tolist()
    [1.5]
    """

    __slots__ = ("grid", "coefficients", "order", "numbers", "clock", "t_span")

    def __init__(self, grid, coefficients, order: int, numbers: Numbers = FLOAT64, *, clock: str = "t",
                 t_span: tuple | None = None):
        grid, coefficients = np.asarray(grid), np.asarray(coefficients)
        if grid.ndim != 1 or coefficients.ndim != 4 or len(coefficients) != len(grid) - 1 or len(coefficients) == 0:
            raise ValueError(f"grid (n_steps + 1,) and coefficients (n_steps, order + 1, m, w) with n_steps >= 1 "
                             f"expected, got shapes {grid.shape} and {coefficients.shape}")
        if coefficients.shape[1] != order + 1:
            raise ValueError(f"coefficients hold {coefficients.shape[1]} terms per step, not order + 1 = {order + 1}")
        if clock not in ("t", "log"):
            raise ValueError(f"clock must be 't' or 'log', got {clock!r}")
        self.grid, self.coefficients, self.order, self.numbers, self.clock = grid, coefficients, order, numbers, clock
        self.t_span = (grid[0], grid[-1]) if t_span is None else tuple(t_span)

    @property
    def n_steps(self) -> int:
        """Number of steps (polynomial pieces)."""
        return len(self.coefficients)

    @property
    def u_min(self):
        """Start of the interval covered, in the integration variable."""
        return self.grid[0]

    @property
    def u_max(self):
        """End of the interval covered, in the integration variable."""
        return self.grid[-1]

    def __repr__(self) -> str:
        return (f"DenseOutput({self.n_steps} steps of order {self.order}, clock {self.clock!r}, "
                f"{self.numbers.name})")

    def __call__(self, u) -> np.ndarray:
        """The packed states at the values ``u`` (array_like, any shape) of the integration variable.

        Returns
        -------
        ndarray, shape ``np.shape(u) + (m, d + 2)``
            At the run's precision (float64, or mpf objects computed at ``dps`` digits).

        Raises
        ------
        ValueError
            Naming ``t``, if a value lies outside the interval the run covered or is not finite.
        """
        u = self.numbers.convert(u)
        with self.numbers.context():
            check_interval(u, self.grid, self.t_span)
            flat = u.reshape(-1)
            step = np.clip(np.searchsorted(self.grid, flat, side="right") - 1, 0, self.n_steps - 1)
            tau = (flat - self.grid[step])[:, None, None]
            C = self.coefficients[step]  # (len, order + 1, m, w)
            acc = C[:, self.order]
            for k in range(self.order - 1, -1, -1):
                acc = acc * tau + C[:, k]
            return acc.reshape(u.shape + acc.shape[1:])
