"""``predict``: the network's output on new inputs, from a result (at a time) or from parameters.

``f(x) = sum_j a_j sigma(<w_j, x> + b_j)`` with ``sigma(z) = max(z, leak z)`` (docs/design.md, Model and loss), the
function every method trains. The state comes from a :class:`~flowlib.FlowResult` (at any time its run covered),
a :class:`~flowlib.DescentResult` (at a recorded iterate), an :class:`~flowlib.EnsembleResult` (every member's
final state) or :class:`~flowlib.Params` with their :class:`~flowlib.Problem`.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from flowlib import asymptotics
from flowlib.dense import Numbers
from flowlib.problem import Params, Problem, as_real_array

__all__ = ["predict"]

#: Members x inputs x neurons evaluated at once for an ensemble (bounds the temporary arrays: 32 MiB of float64).
_BLOCK_NUMBERS = 2**22


def predict(model, X_new, *, t=None, problem: Problem | None = None) -> np.ndarray:
    """The network output ``f(x) = sum_j a_j sigma(<w_j, x> + b_j)`` at each row of ``X_new``.

    ``sigma(z) = max(z, leak z)`` with the problem's ``leak`` (0 for ReLU); ``b_j = 0`` without bias.

    Parameters
    ----------
    model : FlowResult, DescentResult, EnsembleResult or Params
        Where the parameters come from:

        * :class:`~flowlib.FlowResult`: the state at time ``t`` (default: the time reached), from the dense output
          (:meth:`~flowlib.FlowResult.states_at`); a run kept without dense output answers only at its step
          boundaries and ``t_eval`` times.
        * :class:`~flowlib.DescentResult`: the recorded iterate ``k`` with ``k lr = t`` (default: the last one).
          A ``t`` that is not the time of a recorded iterate (``res.times``, to a relative ``1e-12``) is refused:
          no iterate is silently substituted (record more often with ``record_every``).
        * :class:`~flowlib.EnsembleResult`: every member's final state (``t`` is refused); each member uses its
          own problem's ``leak`` and ``bias``. Members not computed (``"pending"``) give NaN rows.
        * :class:`~flowlib.Params`: these parameters, with ``problem`` (required) for ``leak`` and ``bias``.
    X_new : array_like, shape (n_new, d)
        Inputs, one row each, with the problem's ``d`` (finite reals; checked by
        :func:`flowlib.problem.as_real_array`).
    t : float, optional
        Flow time (see ``model``); for an mpmath flow also an mpf or a decimal string.
    problem : Problem, optional
        Only with a ``Params`` model (a result carries its own problem).

    Returns
    -------
    ndarray
        Shape ``(n_new,)``, or ``(members, n_new)`` for an ensemble. float64; for a result computed at ``dps``
        digits (``model.dps`` not None) an object array of mpmath ``mpf`` computed at that precision (inside
        ``mpmath.mp.workdps(dps)``; the global precision is left alone).

    Raises
    ------
    ValueError
        Naming the argument: ``model`` of another type, ``X_new`` not a finite real 2-D array with ``d`` columns,
        ``t`` outside the run, not recorded (gradient descent), not a real number or given where it does not apply,
        ``problem`` missing for or not fitting ``Params``, or given with a result.

    Examples
    --------
    >>> import flowlib as fl
    >>> prob = fl.Problem([[1.0, 0.0], [0.0, 1.0]], [1.0, -1.0], activation="leaky_relu", leak=0.1, bias=True,
    ...                   train_outer=True)
    >>> p = fl.Params(W=[[1.0, 0.0], [0.0, 1.0]], b=[0.0, -1.0], a=[2.0, -1.0])
    >>> fl.predict(p, [[1.0, 2.0], [-1.0, 0.0]], problem=prob)   # 2 * 1 - 1 * 1; 2 * (-0.1) - 1 * (-0.1)
    array([ 1. , -0.1])
    """
    from flowlib.ensemble_result import EnsembleResult
    from flowlib.result import DescentResult, FlowResult

    if isinstance(model, Params):
        if problem is None:
            raise ValueError("problem must be given with a Params model (for leak and bias)")
        if not isinstance(problem, Problem):
            raise ValueError(f"problem must be a flowlib.Problem, got {type(problem).__name__}")
        model.check_against(problem)
        if t is not None:
            raise ValueError(f"t applies to a result, not to a Params model, got t={t!r}")
        return asymptotics.outputs(problem, model.packed(), _inputs(X_new, problem.d))[0]
    if not isinstance(model, (FlowResult, DescentResult, EnsembleResult)):
        raise ValueError(f"model must be a FlowResult, DescentResult, EnsembleResult or Params, got "
                         f"{type(model).__name__}")
    if problem is not None:
        raise ValueError("problem is only for a Params model: a result carries its own problem")
    if isinstance(model, EnsembleResult):
        if t is not None:
            raise ValueError(f"t does not apply to an ensemble (it keeps each member's final state only), got "
                             f"t={t!r}")
        return _ensemble_outputs(model, _inputs(X_new, model.inits.shape[2] - 2))
    X = _inputs(X_new, model.problem.d)
    state = _flow_state(model, t) if isinstance(model, FlowResult) else _descent_state(model, t)
    if model.dps is not None:
        return _mp_outputs(state, X, model.problem, model.dps)
    return asymptotics.outputs(model.problem, np.asarray(state, dtype=np.float64), X)[0]


def _inputs(X_new, d: int) -> np.ndarray:
    X = as_real_array(X_new, "X_new", 2)
    if X.shape[1] != d:
        raise ValueError(f"X_new must have d = {d} columns (the problem's input dimension), got shape {X.shape}")
    return X


def _check_time(t, allow_text: bool) -> None:
    """``t`` a finite real number (or, for an mpmath flow, an mpf or a decimal string); ``ValueError`` naming t."""
    if allow_text and (isinstance(t, str) or type(t).__name__ == "mpf"):
        return
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, numbers.Real) or not math.isfinite(float(t)):
        raise ValueError(f"t must be a finite real number, got {t!r}")


def _flow_state(res, t) -> np.ndarray:
    """Packed state of a flow at ``t`` (default the time reached), at the run's precision."""
    if t is None:
        return res.states[-1]
    _check_time(t, res.dps is not None)
    if res.n_steps == 0:  # states_at answers the one state for any time: check the time here
        if Numbers.at(res.dps).convert([t])[0] != res.t[0]:
            raise ValueError(f"t must lie in [{res.t[0]}, {res.t[-1]}], the interval the run covered, got {t!r}")
        return res.states[0]
    return res.states_at([t])[0]


def _descent_state(res, t) -> np.ndarray:
    """Packed state of the recorded iterate at ``t = k lr`` (default the last one), at the run's precision."""
    if t is None:
        return res.states[-1]
    _check_time(t, False)
    t = float(t)
    times = res.times
    if not 0.0 <= t <= times[-1] * (1 + 1e-12):
        raise ValueError(f"t must lie in [0, {times[-1]!r}] (iterations 0 to {res.steps} at lr = {res.lr!r}), "
                         f"got {t!r}")
    row = int(np.argmin(np.abs(times - t)))
    if abs(times[row] - t) > 1e-12 * max(abs(t), res.lr):
        earlier = times[times <= t]
        raise ValueError(f"t = {t!r} is not the time k lr of a recorded iterate (recorded every "
                         f"{res.options.get('record_every', '?')} iterations, lr = {res.lr!r}; nearest at or before: "
                         f"{earlier[-1]!r}); pass one of res.times")
    return res.states[row]


def _ensemble_outputs(ens, X: np.ndarray) -> np.ndarray:
    """float64 outputs of every member's final state, shape ``(members, n_new)``, in blocks of members."""
    count, m, width = ens.final.shape
    d = width - 2
    out = np.full((count, len(X)), np.nan)
    block = max(1, _BLOCK_NUMBERS // max(1, len(X) * m))
    for index, problem in enumerate(ens.problems):
        rows = np.flatnonzero(ens.problem_index == index) if len(ens.problems) > 1 else np.arange(count)
        for lo in range(0, len(rows), block):
            chosen = rows[lo: lo + block]
            P = ens.final[chosen]
            z = np.einsum("nk,rjk->rnj", X, P[:, :, :d])
            if problem.bias:
                z = z + P[:, None, :, d]
            out[chosen] = np.einsum("rnj,rj->rn", np.maximum(z, problem.leak * z), P[:, :, d + 1])
    return out


def _mp_outputs(state, X: np.ndarray, problem: Problem, dps: int) -> np.ndarray:
    """Outputs at ``dps`` digits (mpf; the inputs, exact float64, converted exactly)."""
    from mpmath import mp, mpf

    d = problem.d
    out = np.empty(len(X), dtype=object)
    with mp.workdps(dps):
        leak = mpf(problem.leak)
        rows = [[mpf(v) for v in row] for row in np.asarray(state, dtype=object)]
        for i, x in enumerate(X):
            xs = [mpf(float(v)) for v in x]
            total = mpf(0)
            for row in rows:
                z = mp.fsum(w * v for w, v in zip(row[:d], xs)) + (row[d] if problem.bias else 0)
                total += row[d + 1] * (z if z > 0 else leak * z)
            out[i] = +total
    return out
