"""The Zeno detector of both float64 engines: accumulating event instants, found from their times and keys.

Each event instant is recorded (time, a key naming its first event, a state vector) in a ring of
:data:`ZENO_MEMORY` instants, a :class:`ZenoMemory`. When the keys of the last ``3 p + 1`` instants repeat with a
period ``p <= ZENO_MAX_CYCLE``, the times ``S_j`` one cycle apart (``S_0`` the latest) are extrapolated by Aitken's
delta-squared process, ``A_n = S_0 + D_1 r / (1 - r)`` with ``D_1 = S_0 - S_1``, ``r = D_1 / D_2``; the same
estimate one cycle earlier, ``A_{n-1}``, gives the error estimate ``|A_n - A_{n-1}|``. The accumulation time is
accepted when that estimate is below ``ZENO_TIME_TOL |A_n| max(1, (1 - r)^-2)`` (rounding of the event times; the
factor is Aitken's amplification of it), or when the whole remaining tail ``D_1 r / (1 - r)`` is; and the states
one cycle apart contract towards a limit (ratio ``rho`` in ``[0, 1)``). A constant ratio is accepted as soon as
three cycles are seen; a converging ratio after a few more, once the extrapolation has converged to rounding.

What the state vector is, and what happens at an accepted point, is the engine's: the whole state for
:mod:`.pwa`, the parameters of the neuron of the instant's first event for the network engine
(:func:`.driver._zeno_jump`).
"""

import math
from typing import NamedTuple

import numpy as np

from ._jit import jit
from .constants import ZENO_MAX_CYCLE, ZENO_MAX_RATIO, ZENO_MEMORY  # noqa: F401
from .tolerances import ZENO_TIME

#: relative rounding level of an extrapolated accumulation time (times ``max(1, (1 - r)^-2)``)
ZENO_TIME_TOL = ZENO_TIME


class ZenoMemory(NamedTuple):
    """The last :data:`ZENO_MEMORY` event instants, a ring: ``times``, ``keys`` (int64) and ``states``
    (``ZENO_MEMORY, N``) of each, and ``count[0]``, the instants recorded since the memory was last cleared (the
    latest is at :func:`ring_index` ``(count, 0)``)."""

    times: np.ndarray
    keys: np.ndarray
    states: np.ndarray
    count: np.ndarray


@jit
def zeno_memory(size):
    """An empty :class:`ZenoMemory` for state vectors of ``size`` entries."""
    return ZenoMemory(*zeno_fields(0, size)[0])


class NetworkZeno(NamedTuple):
    """The network engine's Zeno memory, carried from chunk to chunk in :class:`.bundles.State`: ``memory`` (a
    :class:`ZenoMemory` whose states are the row ``(w_j, b_j, a_j)`` of the neuron of each instant's first event),
    ``whole`` (``ZENO_MAX_CYCLE + 1, m, d + 2``: the whole state at the last instants, a ring in step with
    ``memory``), ``energy`` (``ZENO_MEMORY``: ``int |theta'|^2`` up to each instant, in step with ``memory``) and
    ``dissipated`` (shape (1,): ``int |theta'|^2`` since the run began)."""

    memory: ZenoMemory
    whole: np.ndarray
    energy: np.ndarray
    dissipated: np.ndarray


@jit
def zeno_fields(m, w):
    """An empty :class:`NetworkZeno` for ``m`` neurons of ``w`` parameters each as plain tuples,
    ``((times, keys, states, count), whole, energy, dissipated)``: the layout in which
    :func:`.driver.integrate_chunk` takes it from Python (:func:`.bundles.plain`; :func:`named_zeno` names it).

    Numpy calls only, so that Python calls it as ``zeno_fields.py_func``: ~2 us, against ~7 us compiled (Numba
    boxes each array it returns)."""
    return ((np.zeros(ZENO_MEMORY), np.zeros(ZENO_MEMORY, np.int64), np.zeros((ZENO_MEMORY, w)), np.zeros(1, np.int64)),
            np.zeros((ZENO_MAX_CYCLE + 1, m, w)), np.zeros(ZENO_MEMORY), np.zeros(1))


@jit
def named_zeno(fields):
    """The :class:`NetworkZeno` of the plain tuples ``fields`` (the layout of :func:`zeno_fields`), sharing their
    arrays."""
    memory, whole, energy, dissipated = fields
    return NetworkZeno(ZenoMemory(*memory), whole, energy, dissipated)


@jit
def network_zeno(m, w):
    """An empty :class:`NetworkZeno` for ``m`` neurons of ``w`` parameters each."""
    return named_zeno(zeno_fields(m, w))


@jit
def ring_index(count, back, length):
    """The position, in a ring of ``length`` entries, of the instant ``back`` before the latest of ``count``."""
    return (count - 1 - back) % length


@jit
def aitken(s0, s1, s2):
    """Aitken's delta-squared limit of the partial sums ``s2, s1, s0`` (``s0`` the latest) and the ratio
    ``r = (s0 - s1) / (s1 - s2)``; ``(nan, r)`` unless ``0 < r < ZENO_MAX_RATIO``."""
    ratio = (s0 - s1) / (s1 - s2)
    if not (0.0 < ratio < ZENO_MAX_RATIO):
        return math.nan, ratio
    return s0 + (s0 - s1) * ratio / (1.0 - ratio), ratio


@jit
def periodic(keys, count, p):
    """Whether the keys of the last ``3 p + 1`` recorded instants repeat with period ``p``."""
    if count < 3 * p + 1 or 3 * p + 1 > len(keys):
        return False
    for back in range(2 * p + 1):
        if keys[ring_index(count, back, len(keys))] != keys[ring_index(count, back + p, len(keys))]:
            return False
    return True


@jit
def zeno_record(memory, t, key, x):
    """Append an event instant (time ``t``, ``key``, state ``x``) to ``memory``, over its oldest when full."""
    q = memory.count[0] % len(memory.times)
    memory.times[q] = t
    memory.keys[q] = key
    memory.states[q] = x
    memory.count[0] += 1


@jit
def zeno_check(memory):
    """Detect an accumulation of events (see the module doc).

    Returns ``(p, t_acc, error, ratio, rho)``: the cycle length ``p`` (0 when none is found), the extrapolated
    accumulation time, its error estimate, the time ratio per cycle and the contraction ``rho`` of the states one
    cycle apart (``x_n - x* = rho (x_{n-p} - x*)``). The shortest cycle accepted is returned.
    """
    times, keys, states, count = memory.times, memory.keys, memory.states, memory.count[0]
    M = len(times)
    for p in range(1, ZENO_MAX_CYCLE + 1):
        if not periodic(keys, count, p):
            continue
        s0, s1 = times[ring_index(count, 0, M)], times[ring_index(count, p, M)]
        s2, s3 = times[ring_index(count, 2 * p, M)], times[ring_index(count, 3 * p, M)]
        if not (s0 > s1 > s2 > s3):
            continue
        t_acc, ratio = aitken(s0, s1, s2)
        before, _ = aitken(s1, s2, s3)
        if not (math.isfinite(t_acc) and math.isfinite(before)):
            continue
        error = abs(t_acc - before)
        tail = t_acc - s0
        tol = ZENO_TIME_TOL * abs(t_acc) * max(1.0, 1.0 / (1.0 - ratio) ** 2)
        if not (error <= tol or tail <= tol):
            continue
        d1 = states[ring_index(count, 0, M)] - states[ring_index(count, p, M)]
        d0 = states[ring_index(count, p, M)] - states[ring_index(count, 2 * p, M)]
        size = np.dot(d0, d0)
        if not size > 0.0:
            continue
        rho = np.dot(d1, d0) / size
        if 0.0 <= rho < 1.0:
            return p, t_acc, min(error, tail), ratio, rho
    return 0, 0.0, 0.0, 0.0, 0.0
