"""Asymptotic diagnostics: normalised margins, decision boundaries, directions, and their limits.

The theorems of the source papers are statements about ``t -> infinity``: margins that converge like ``1/ln t``
(seed 000, Theorem 5.1), directions that converge to an SVM solution (seed 001, Theorem 6.2) or to the optimum
of a convex program (seed 004, Theorem 4). The functions here measure those quantities on packed states (float64
or mpmath: object arrays are computed in their own precision) and extrapolate them to ``t = infinity``
(:func:`richardson`). :class:`flowlib.FlowResult` exposes them per time (``res.normalized_margin(log_t=...)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowlib.problem import Problem


def _trained_mask(problem: Problem) -> np.ndarray:
    """Which packed columns ``(w, b, a)`` the flow moves."""
    mask = np.ones(problem.d + 2, dtype=bool)
    mask[problem.d] = problem.bias
    mask[problem.d + 1] = problem.train_outer
    return mask


def _as_states(states) -> np.ndarray:
    states = np.asarray(states)
    if states.ndim == 2:
        states = states[None]
    if states.ndim != 3:
        raise ValueError(f"states must have shape (k, m, d + 2) or (m, d + 2), got {states.shape}")
    return states


def outputs(problem: Problem, states, inputs: np.ndarray | None = None) -> np.ndarray:
    """Network outputs ``f(x_i)`` at each state: shape ``(k, n)`` (``states`` shape ``(k, m, d + 2)``), on the
    problem's samples or on ``inputs`` (float64, shape ``(n, d)``)."""
    states = _as_states(states)
    Xa = problem.augmented_inputs if inputs is None else np.hstack([inputs, np.ones((len(inputs), 1))])
    Xa = Xa.astype(states.dtype) if states.dtype == object else Xa
    d = problem.d
    z = np.einsum("id,kjd->kij", Xa, states[:, :, : d + 1]) if states.dtype != object else \
        np.array([[[np.dot(x, row[: d + 1]) for row in s] for x in Xa] for s in states], dtype=object)
    act = np.where(z > 0, z, problem.leak * z)
    return np.einsum("kij,kj->ki", act, states[:, :, d + 1]) if states.dtype != object else \
        np.array([[np.dot(act[k, i], states[k, :, d + 1]) for i in range(len(Xa))] for k in range(len(states))],
                 dtype=object)


def homogeneity(problem: Problem) -> int:
    """Degree of positive homogeneity of the network in its trained parameters: 2 with ``a`` trained, else 1."""
    return 2 if problem.train_outer else 1


def normalized_margin(problem: Problem, states) -> np.ndarray:
    """``min_i y_i f(x_i) / |theta|^h`` at each state, with ``|theta|`` over the trained parameters (dead neurons
    included) and ``h`` the homogeneity degree (seed 004: ``/ |theta|^2`` with ``a`` trained, Lyu & Li; seed 001:
    ``/ |W|_F`` with the outer layer fixed).

    Raises
    ------
    ValueError
        For the square loss (labels are targets, not classes).
    """
    if problem.loss == "square":
        raise ValueError("loss: normalized margins need a classification loss (exp or logistic)")
    states = _as_states(states)
    margins = np.min(problem.y.astype(states.dtype) * outputs(problem, states), axis=1)
    trained = states[:, :, _trained_mask(problem)]
    norm2 = np.sum((trained * trained).reshape(len(states), -1), axis=1)
    return margins / norm2 if homogeneity(problem) == 2 else margins / np.array([v**0.5 for v in norm2],
                                                                                  dtype=norm2.dtype)


def direction(problem: Problem, states) -> np.ndarray:
    """``theta / |theta|`` over the trained parameters at each state (untrained columns set to 0), shape
    ``(k, m, d + 2)``."""
    states = _as_states(states)
    mask = _trained_mask(problem)
    out = np.zeros_like(states)
    out[:, :, mask] = states[:, :, mask]
    norms = np.array([np.sum(o * o) ** 0.5 for o in out], dtype=states.dtype)
    return out / norms[:, None, None]


def one_minus_cos(u, v):
    """``1 - cos(u, v)`` computed as ``|u^ - v^|^2 / 2`` (exact to the last digit near 0, unlike ``1 - u^.v^``)."""
    u = np.ravel(np.asarray(u))
    v = np.ravel(np.asarray(v))
    uh = u / np.sum(u * u) ** 0.5
    vh = v / np.sum(v * v) ** 0.5
    diff = uh - vh
    return np.sum(diff * diff) / 2


def angle(u, v):
    """Angle between two vectors, ``2 atan2(|u^ - v^|, |u^ + v^|)`` (accurate for tiny and near-pi angles)."""
    u = np.ravel(np.asarray(u, dtype=float))
    v = np.ravel(np.asarray(v, dtype=float))
    uh, vh = u / np.linalg.norm(u), v / np.linalg.norm(v)
    return 2.0 * float(np.arctan2(np.linalg.norm(uh - vh), np.linalg.norm(uh + vh)))


def decision_boundary(problem: Problem, states) -> np.ndarray:
    """For one-dimensional inputs: the point ``x*`` in ``[min x_i, max x_i]`` where ``f`` changes sign, per state.

    ``f`` is piecewise linear with breakpoints ``-b_j / w_j``, so the zero is found exactly on the segment where
    the sign changes (the first one from the left; NaN when ``f`` keeps one sign). Seed 000's
    ``x* = (b2 - b1) / (w1 - w2)`` (Smorodinsky et al., Theorem 5.1) is this point. Beware cancellation: once
    ``f`` is tiny next to ``|theta|`` (``x*`` of order ``1e-16 |b|``) only an mpmath state resolves it.

    Raises
    ------
    ValueError
        If the inputs are not one-dimensional.
    """
    if problem.d != 1:
        raise ValueError(f"problem: decision_boundary needs one-dimensional inputs, got d = {problem.d}")
    states = _as_states(states)
    lo, hi = float(np.min(problem.X)), float(np.max(problem.X))
    out = np.empty(len(states), dtype=states.dtype)
    for k, s in enumerate(states):
        w, b, a = s[:, 0], s[:, 1], s[:, 2]
        one = w[0] * 0 + 1  # 1 in the state's number type

        def f(x, w=w, b=b, a=a):
            z = w * x + b
            return np.sum(a * np.where(z > 0, z, problem.leak * z))

        points = sorted({lo * one, hi * one} | {-bj / wj for wj, bj in zip(w, b) if wj != 0 and lo < -bj / wj < hi})
        values = [f(x) for x in points]
        out[k] = np.nan
        for (x0, f0), (x1, f1) in zip(zip(points, values), zip(points[1:], values[1:])):
            if f0 == 0 and f1 == 0:
                out[k] = (x0 + x1) / 2
                break
            if f0 == 0:
                out[k] = x0
                break
            if (f0 > 0) != (f1 > 0):
                out[k] = x0 - f0 * (x1 - x0) / (f1 - f0)
                break
    return out


@dataclass(frozen=True)
class Extrapolation:
    """The limit of a sequence at ``x -> 0`` (:func:`richardson`).

    Attributes
    ----------
    limit : float or ndarray
        The extrapolated value at ``x = 0``.
    error : float or ndarray
        ``|limit - limit of one order lower|``: the error estimate.
    order : int
        Degree of the fitted polynomial in ``x``.
    """

    limit: object
    error: object
    order: int


def richardson(x, values, order: int | None = None) -> Extrapolation:
    """Extrapolate ``values(x)`` to ``x = 0`` by polynomial interpolation (Richardson / Neville), with an error bar.

    Use ``x = 1 / ln t`` for quantities converging like ``1/ln t`` (seed 000's margin, seed 001's directions),
    or ``x = 1 / q_min`` for 2-homogeneous networks, where ``ln ln t / ln^2 t`` terms spoil a series in
    ``1/ln t`` (seed 004). The last ``order + 1`` points are interpolated (default: all, at most 4).

    Parameters
    ----------
    x : array_like, shape (p,)
        Distinct positive abscissae, decreasing towards 0 for a meaningful limit.
    values : array_like, shape (p, ...)
        The quantity (scalars or arrays: extrapolated elementwise).
    order : int, optional
        Polynomial degree, ``1 <= order <= p - 1``.

    Returns
    -------
    Extrapolation
        ``limit``, ``error`` (difference with the degree ``order - 1`` extrapolation from the last ``order``
        points) and ``order``.

    Examples
    --------
    >>> import numpy as np
    >>> x = 1 / np.array([10.0, 20.0, 40.0])
    >>> ext = richardson(x, 0.5 + 2 * x + 3 * x**2)
    >>> round(float(ext.limit), 12), ext.order
    (0.5, 2)
    """
    x = np.asarray(x)
    values = np.asarray(values)
    if x.ndim != 1 or len(x) < 2 or len(values) != len(x):
        raise ValueError("x must be 1-D with at least 2 points, and values must have one entry per point")
    if order is None:
        order = min(len(x) - 1, 3)
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or not 1 <= order <= len(x) - 1:
        raise ValueError(f"order must be an integer in [1, {len(x) - 1}], got {order!r}")

    def neville(xs, vs):
        table = list(vs)
        for level in range(1, len(xs)):
            table = [(xs[i + level] * table[i] - xs[i] * table[i + 1]) / (xs[i + level] - xs[i])
                     for i in range(len(table) - 1)]
        return table[0]

    limit = neville(x[-order - 1:], values[-order - 1:])
    lower = neville(x[-order:], values[-order:])
    return Extrapolation(limit=limit, error=np.abs(limit - lower), order=int(order))
