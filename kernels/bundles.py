"""The argument bundles of the kernels: the problem, the method, the state and the logs.

:func:`.driver.integrate_chunk` and its stages, and :func:`.ensemble.flow_member`, take these named tuples
instead of some thirty positional arguments (Numba types a named tuple by its fields, so a bundle costs nothing
at run time). Build them with :func:`network` and :func:`method`, which fix every field's type, so that all callers
share one compiled specialisation. The kernels that Python calls once per chunk or run,
:func:`.driver.integrate_chunk`, :func:`.driver.surface_sides` and :func:`.ensemble.flow_batch`, take them as plain
tuples (:func:`plain`) and name them on entry. Gradient descent
(:func:`.descent.descend_chunk`, :func:`.descent.descent_update`, :func:`.ensemble.descend_member`) takes the
same :class:`Network` with a :class:`Descent` (built by :func:`descent`), and logs into an :class:`IterateLog`
and a :class:`FlipLog` (:func:`iterate_log`, :func:`flip_log`). Plain Python (no numba import).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Network(NamedTuple):
    """The objective: data with a column of ones ``Xa`` (``n, d + 1``), targets ``y``, the loss code
    (:mod:`.series`), the reduction factor ``c``, the negative-side slope ``leak``, whether there is a bias, whether
    the outer layer is trained, and the weight decay ``decay``.

    ``Xc`` and ``cols`` serve the flow's matrix products: ``Xc = Xa[:, cols]`` keeps only the columns that can
    contribute to a pre-activation or a gradient, i.e. those with a nonzero entry (the column of ones only with a
    bias). A dropped column contributes exactly 0 to every ``z_ij`` and every ``sum_i s_ij G_i x_iq``, so the
    products over ``Xc`` are the same sums without their zero terms (digits images have blank pixels on every
    sample: 12 of 64 for 0 against 1). Where nothing is dropped ``Xc`` is ``Xa`` itself."""

    Xa: np.ndarray
    y: np.ndarray
    loss_kind: int
    c: float
    leak: float
    bias: bool
    train_outer: bool
    decay: float
    Xc: np.ndarray
    cols: np.ndarray


class Method(NamedTuple):
    """How the flow is integrated: Taylor order, local tolerance, the solution concept (``caratheodory`` with
    ``sigma'(0) = selection``, else Filippov), the tie policy (:mod:`.constants`), the clock (``log_clock``:
    ``s = ln(1 + t)``) and the Gauss-Legendre rule on ``[0, 1]`` for the energy in that clock."""

    order: int
    tol: float
    caratheodory: bool
    selection: float
    tie_policy: int
    log_clock: bool
    gl_nodes: np.ndarray
    gl_weights: np.ndarray


class State(NamedTuple):
    """The state a chunk continues from and updates in place: parameters ``P`` (``m, d + 2``), the side of each
    free surface ``active`` (``n, m`` bool), surface modes ``mode`` and vanishing leading terms ``drop`` (``n, m``
    int8), ``clock`` (the time; see :func:`.driver.integrate_chunk`), ``order`` (shape (2,), int64: the Taylor
    order the order controller chose for the next step and the lowest it may stop at, carried from chunk to chunk so
    that chunk boundaries never change the trajectory; 0 starts at the tolerance's)
    and ``zeno``, the Zeno detector's memory of the last event instants (a :class:`.zeno.NetworkZeno`, from
    :func:`.zeno.network_zeno`). Use :func:`state` for a fresh one."""

    P: np.ndarray
    active: np.ndarray
    mode: np.ndarray
    drop: np.ndarray
    clock: np.ndarray
    order: np.ndarray
    zeno: NamedTuple


def plain(bundle: tuple) -> tuple:
    """``bundle`` (a named tuple of this module or of :mod:`.zeno`) as plain tuples, nested bundles included: how
    the kernels that Python calls once per chunk or run (:func:`.driver.integrate_chunk`,
    :func:`.driver.surface_sides`, :func:`.ensemble.flow_batch`) take their bundles, and name them on entry. A named tuple costs ~1.5 us at each call from Python (Numba
    unboxes it through its class), 12 us of a small flow's chunk; a plain tuple of the same fields does not."""
    return tuple(plain(field) if isinstance(field, tuple) else field for field in bundle)


def state(P, active, mode, drop, clock, zeno) -> State:
    """A :class:`State` whose first step is taken at the tolerance's order, with the Zeno memory ``zeno``."""
    return State(P, active, mode, drop, clock, np.zeros(2, np.int64), zeno)


class StepLog(NamedTuple):
    """Per step: start ``t``, length ``h``, Taylor coefficients ``C`` (or only the starting state), loss and
    ``int |theta'|^2`` (see :func:`.driver.integrate_chunk` for the shapes)."""

    t: np.ndarray
    h: np.ndarray
    C: np.ndarray
    loss: np.ndarray
    energy: np.ndarray


class EventLog(NamedTuple):
    """Per event: time, kind, neuron, sample, side and multiplier."""

    t: np.ndarray
    kind: np.ndarray
    neuron: np.ndarray
    sample: np.ndarray
    side: np.ndarray
    mult: np.ndarray


def network(Xa, y, loss_kind, c, leak, bias, train_outer, decay) -> Network:
    """A :class:`Network` with every field of its one kernel type (C-contiguous float64 arrays, int, float, bool);
    ``Xc`` and ``cols`` from :func:`contributing_columns`."""
    Xa = np.ascontiguousarray(Xa, dtype=np.float64)
    Xc, cols = contributing_columns(Xa, bool(bias))
    return Network(Xa, np.ascontiguousarray(y, dtype=np.float64), int(loss_kind), float(c), float(leak), bool(bias),
                   bool(train_outer), float(decay), Xc, cols)


def contributing_columns(Xa: np.ndarray, bias: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(Xa[:, cols], cols)`` for the columns of ``Xa`` (``n, d + 1``, the last one of ones) with a nonzero entry,
    the last only with a bias (at least one column, so that no product is empty); ``(Xa, arange(d + 1))`` itself
    when every column is kept."""
    keep = np.any(Xa != 0.0, axis=0)
    keep[-1] = bias
    if not keep.any():
        keep[0] = True
    cols = np.flatnonzero(keep).astype(np.int64)
    if len(cols) == Xa.shape[1]:
        return Xa, cols
    return np.ascontiguousarray(Xa[:, cols]), cols


def method(order, tol, caratheodory, selection, tie_policy, log_clock, gl_nodes, gl_weights) -> Method:
    """A :class:`Method` with every field of its one kernel type."""
    return Method(int(order), float(tol), bool(caratheodory), float(selection), int(tie_policy), bool(log_clock),
                  np.ascontiguousarray(gl_nodes, dtype=np.float64), np.ascontiguousarray(gl_weights, dtype=np.float64))


def step_log(steps: int, order: int, m: int, w: int, coefficients: bool) -> StepLog:
    """Fresh per-step buffers for ``steps`` steps (``t``, ``C`` and the loss have one more entry, for the state the
    chunk reaches); ``C`` keeps every Taylor coefficient with ``coefficients``, else only each step's start."""
    return StepLog(np.empty(steps + 1), np.empty(steps), np.empty((steps + 1, order + 1 if coefficients else 1, m, w)),
                   np.empty(steps + 1), np.empty(steps))


def event_log(events: int) -> EventLog:
    """Fresh buffers for ``events`` events."""
    return EventLog(np.empty(events), np.empty(events, np.int8), np.empty(events, np.int64),
                    np.empty(events, np.int64), np.empty(events, np.int8), np.empty(events))


class Descent(NamedTuple):
    """How gradient descent steps on a :class:`Network` (whose ``decay`` is the weight decay ``lambda``).

    ``selection`` is the slope ``sigma'(0)`` used where ``z_ij == 0``, ``lr`` the step size. ``batch_c`` serves
    mini-batch steps only: a batch of ``|B|`` samples weights each term by ``batch_c / |B|`` (``batch_c`` is 1 for
    the mean and ``n`` for the sum), where a full-batch step weights each by the network's ``c``."""

    selection: float
    lr: float
    batch_c: float


class IterateLog(NamedTuple):
    """Per recorded iterate: its index ``k`` (int64), its state ``P`` (``R, m, d + 2``) and its objective
    ``loss`` ``L + lambda/2 |theta_trained|^2``."""

    k: np.ndarray
    P: np.ndarray
    loss: np.ndarray


class FlipLog(NamedTuple):
    """Per activation flip: the iterate ``k`` at which ``z_ij`` changed side (int64), neuron ``j`` and sample ``i``
    (int64), and the side entered (int8; +1: ``z > 0``, -1: ``z <= 0``)."""

    k: np.ndarray
    neuron: np.ndarray
    sample: np.ndarray
    side: np.ndarray


def descent(selection, lr, batch_c) -> Descent:
    """A :class:`Descent` with every field of its one kernel type (float)."""
    return Descent(float(selection), float(lr), float(batch_c))


def iterate_log(records: int, m: int, w: int) -> IterateLog:
    """Fresh buffers for ``records`` recorded iterates of ``m`` neurons of ``w`` parameters each."""
    return IterateLog(np.empty(records, np.int64), np.empty((records, m, w)), np.empty(records))


def flip_log(flips: int) -> FlipLog:
    """Fresh buffers for ``flips`` flips."""
    return FlipLog(np.empty(flips, np.int64), np.empty(flips, np.int64), np.empty(flips, np.int64),
                   np.empty(flips, np.int8))
