"""Numbers read off a trajectory for the diagnostic plots: states at given times, neuron vectors, and the early
alignment of the neurons with the data.

These work for flows (:class:`~flowlib.FlowResult`, float64 or mpmath, rounded to float64 here) and for gradient
descent (:class:`~flowlib.DescentResult`, iterate ``k`` at flow time ``k lr``). :mod:`flowlib.plots` draws them.
"""

from __future__ import annotations

import numpy as np

from flowlib.problem import as_real_array
from flowlib.result import DescentResult, FlowResult

__all__ = ["alignment_cosines", "check_result", "class_directions", "cosines", "nearest_rows", "neuron_vectors",
           "record_times", "sampled_states", "unit_directions"]


def check_result(result, purpose: str = "") -> None:
    """``ValueError`` naming ``result`` unless it is a :class:`~flowlib.FlowResult` or a
    :class:`~flowlib.DescentResult` (``purpose``, e.g. ``" for alignment"``, ends the first clause)."""
    if not isinstance(result, (FlowResult, DescentResult)):
        raise ValueError(f"result must be a FlowResult or a DescentResult{purpose}, got {type(result).__name__}")


def nearest_rows(recorded: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Index of the entry of the increasing ``recorded`` nearest to each ``target`` (the later one on a tie)."""
    rows = np.clip(np.searchsorted(recorded, target), 0, len(recorded) - 1)
    earlier = np.maximum(rows - 1, 0)
    return np.where(target - recorded[earlier] < recorded[rows] - target, earlier, rows)


def record_times(result) -> np.ndarray:
    """Flow times of the recorded states, as float64.

    Parameters
    ----------
    result : FlowResult or DescentResult

    Returns
    -------
    ndarray
        The step boundaries of a flow (``inf`` where a log-clock run's ``t`` overflows float64), ``k lr`` at the
        recorded iterates of a descent.
    """
    return result.times if isinstance(result, DescentResult) else np.asarray(result.t, dtype=np.float64)


def _log1p_times(result) -> np.ndarray:
    """``ln(1 + t)`` at the recorded states (the log clock's ``s``, finite where ``t`` overflows)."""
    if isinstance(result, FlowResult) and result.s is not None:
        return np.asarray(result.s, dtype=np.float64)
    return np.log1p(record_times(result))


def sampled_states(result, times) -> tuple[np.ndarray, np.ndarray]:
    """Packed states ``(w_j, b_j, a_j)`` at the given flow times, at the run's precision.

    Parameters
    ----------
    result : FlowResult or DescentResult
    times : array_like
        Flow times inside the run (``ValueError`` naming ``times`` unless real and finite).

    Returns
    -------
    times : ndarray
        The times of the states returned: ``times`` itself for a flow that kept its dense output (evaluated
        there), else the times of the nearest recorded states (step boundaries or recorded iterates, nearest in
        ``ln(1 + t)``).
    states : ndarray, shape (len(times), m, d + 2)
        At the run's precision (``dtype=object`` for mpmath).
    """
    times = np.atleast_1d(as_real_array(times, "times", None)).ravel()
    if isinstance(result, FlowResult) and result.coefficients is not None:
        return times, result.states_at(times)
    rows = nearest_rows(_log1p_times(result), np.log1p(times))
    return record_times(result)[rows], result.states[rows]


def neuron_vectors(problem, states) -> np.ndarray:
    """The vector of each neuron that decides its activation: ``w_j``, or ``(w_j, b_j)`` with a bias.

    Parameters
    ----------
    problem : Problem
    states : array_like, shape (..., m, d + 2)
        Packed states ``(w_j, b_j, a_j)`` (mpf numbers are rounded to float64).

    Returns
    -------
    ndarray, shape (..., m, d) or (..., m, d + 1)
        ``z_ij = <w_j, x_i>`` without a bias, ``<(w_j, b_j), (x_i, 1)>`` with one: the vectors live in the same
        space as the inputs (``X``, or :attr:`Problem.augmented_inputs` with a bias).
    """
    states = np.asarray(states, dtype=np.float64)
    return states[..., : problem.d + (1 if problem.bias else 0)]


def _inputs(problem) -> np.ndarray:
    """The inputs in the space of :func:`neuron_vectors`: ``X``, or ``(x_i, 1)`` with a bias."""
    return problem.augmented_inputs if problem.bias else problem.X


def class_directions(problem) -> np.ndarray:
    """Unit vectors of the label-weighted sums of the positive and of the negative samples.

    ``D_+ = sum_{y_i > 0} y_i x_i`` and ``D_- = sum_{y_i < 0} |y_i| x_i`` (``x_i`` with a 1 appended when the
    problem has a bias), each divided by its norm: for labels in ``{-1, +1}`` the directions of the two class
    means. These are the directions the neurons of a small initialisation align with early in training, in the
    orthogonal-inputs analysis of Boursier, Pillaud-Vivien & Flammarion, "Gradient flow dynamics of shallow ReLU
    networks for square loss and orthogonal inputs" (and the quantised directions of Maennel, Bousquet & Gelly,
    "Gradient descent quantizes ReLU network features", for such data).

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    ndarray, shape (k, d) or (k, d + 1)
        ``k`` is 2, or 1 when one class is empty (or sums to zero); ``D_+`` first.

    Raises
    ------
    ValueError
        Naming ``directions``, when no sample has a nonzero label (or every class sums to zero): pass the
        directions explicitly then.
    """
    inputs, y = _inputs(problem), problem.y
    rows = []
    for mask in (y > 0, y < 0):
        total = np.abs(y[mask]) @ inputs[mask]
        norm = np.linalg.norm(total)
        if norm > 0:
            rows.append(total / norm)
    if not rows:
        raise ValueError("directions: the problem has no class direction (every label is 0 or every class sums to "
                         "zero); pass directions explicitly")
    return np.array(rows)


def unit_directions(problem, directions=None) -> np.ndarray:
    """``directions`` checked and scaled to unit rows; the :func:`class_directions` when ``None``.

    Parameters
    ----------
    problem : Problem
    directions : array_like, shape (k, d) or (k, d + 1), or a single direction of shape (d,) or (d + 1,)
        ``d + 1`` columns exactly when the problem has a bias (the space of :func:`neuron_vectors`).

    Returns
    -------
    ndarray, shape (k, d) or (k, d + 1)

    Raises
    ------
    ValueError
        Naming ``directions``: not real and finite, the wrong shape, or a zero row.
    """
    if directions is None:
        return class_directions(problem)
    width = problem.d + (1 if problem.bias else 0)
    arr = as_real_array(directions, "directions", None)
    if arr.ndim == 1:
        arr = arr[None, :]
    what = "(k, d + 1) (with a bias, (w_j, b_j) is compared)" if problem.bias else "(k, d)"
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] != width:
        raise ValueError(f"directions must have shape {what} = (k, {width}) or ({width},), got "
                         f"{np.shape(directions)}")
    norms = np.linalg.norm(arr, axis=1)
    if np.any(norms == 0):
        raise ValueError(f"directions must be nonzero vectors; row {int(np.argmax(norms == 0))} is zero")
    return arr / norms[:, None]


def cosines(problem, states, directions=None) -> np.ndarray:
    """Cosine of each neuron's vector to each direction, for packed states.

    Parameters
    ----------
    problem : Problem
    states : array_like, shape (..., m, d + 2)
        Packed states ``(w_j, b_j, a_j)``.
    directions : array_like, optional
        As in :func:`unit_directions` (default the class directions).

    Returns
    -------
    ndarray, shape (..., m, k)
        ``<v_j, u_k> / |v_j|`` with ``v_j`` the :func:`neuron_vectors` and ``u_k`` the unit directions; NaN where
        ``v_j = 0``.
    """
    units = unit_directions(problem, directions)
    V = neuron_vectors(problem, states)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (V @ units.T) / np.linalg.norm(V, axis=-1, keepdims=True)


def alignment_cosines(result, times=None, directions=None) -> tuple[np.ndarray, np.ndarray]:
    """Cosine of each neuron's vector to each of a few directions, over time: the early-alignment diagnostic.

    From a small initialisation the neurons first barely grow and turn towards a few data directions, then grow
    along them (Maennel, Bousquet & Gelly, "Gradient descent quantizes ReLU network features"; Boursier,
    Pillaud-Vivien & Flammarion, "Gradient flow dynamics of shallow ReLU networks for square loss and orthogonal
    inputs"). This measures that turn as ``cos(v_j(t), u_k) = <v_j, u_k> / |v_j|`` for unit directions ``u_k``.

    Parameters
    ----------
    result : FlowResult or DescentResult
    times : array_like, optional
        Flow times. Default: the recorded states themselves (the step boundaries of a flow, the recorded
        iterates of a descent). Given times are evaluated on the dense output of a flow that kept it, else at
        the nearest recorded states (:func:`sampled_states`), whose times are returned.
    directions : array_like, shape (k, d) or (k, d + 1), optional
        The directions (any nonzero length; normalised here); a single direction may be given as a 1-D array.
        With a bias they live in the space of ``(w_j, b_j)``, i.e. of ``(x_i, 1)``. Default
        :func:`class_directions`.

    Returns
    -------
    times : ndarray, shape (T,)
        Flow times of the rows.
    cosines : ndarray, shape (T, m, k)
        ``cosines[q, j, k] = <v_j(t_q), u_k> / |v_j(t_q)|`` with ``v_j`` the neuron's :func:`neuron_vectors`
        (``w_j``, or ``(w_j, b_j)`` with a bias); NaN where ``v_j = 0``. The plot
        (:func:`flowlib.plots.alignment`) draws the maximum over ``k``.

    Raises
    ------
    ValueError
        Naming ``result`` or ``directions`` (wrong shape, a zero row, non-finite entries).

    Examples
    --------
    >>> import numpy as np
    >>> import flowlib as fl
    >>> prob = fl.Problem(X=[[1.0, 0.0], [0.0, 1.0]], y=[1.0, -1.0], loss="logistic", bias=False, train_outer=True)
    >>> flow = fl.gradient_flow(prob, fl.Params(W=[[1e-3, 2e-3]], b=None, a=[3e-3]), 10.0)
    >>> times, cosines = fl.alignment_cosines(flow, times=[0.0, 10.0])
    >>> cosines.shape
    (2, 1, 2)
    >>> bool(cosines[-1, 0, 0] > cosines[0, 0, 0])  # the neuron turned towards the positive sample
    True
    """
    check_result(result)
    units = unit_directions(result.problem, directions)
    if times is None:
        times, states = record_times(result), result.states
    else:
        times, states = sampled_states(result, times)
    return np.asarray(times, dtype=np.float64), cosines(result.problem, states, units)
