"""The Zeno detector over mpmath numbers: :mod:`flowlib.kernels.zeno` (read its module docstring) for the
mpmath engine.

The memory is a ``deque`` of the last ``ZENO_MEMORY`` event instants (:class:`Instant`: time, key, the row of the
neuron of its first event, the whole state and the energy dissipated up to it) instead of the kernel's ring of
arrays; the tests, the extrapolation and the acceptance rule are the kernel's, with the tolerance ``zeno_time`` of
the one table at the working epsilon. Call inside ``mp.workdps(...)``.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from mpmath import mp

from flowlib.kernels.constants import ZENO_MAX_CYCLE, ZENO_MAX_RATIO, ZENO_MEMORY
from flowlib.mp.tolerances import tolerance


class Instant(NamedTuple):
    """One event instant in the memory: time ``t``, ``key`` (its first event's surface, kind and side), ``row``
    (that event's neuron, flattened), ``whole`` (the state, rows of mpf) and ``energy`` (``int |theta'|^2`` up to
    it)."""

    t: object
    key: int
    row: list
    whole: list
    energy: object


class Accumulation(NamedTuple):
    """An accepted accumulation point: cycle length ``p``, time ``t``, its error estimate, the time ratio per cycle
    and the contraction ``rho`` of the states one cycle apart."""

    cycle: int
    t: object
    error: object
    ratio: object
    rho: object


def memory() -> deque:
    """An empty memory of event instants."""
    return deque(maxlen=ZENO_MEMORY)


def aitken(s0, s1, s2):
    """Aitken's delta-squared limit of ``s2, s1, s0`` (``s0`` the latest) and the ratio ``(s0 - s1) / (s1 - s2)``;
    ``(None, ratio)`` unless ``0 < ratio < ZENO_MAX_RATIO`` (``(None, None)`` where ``s1 == s2``)."""
    if s1 == s2:
        return None, None
    ratio = (s0 - s1) / (s1 - s2)
    if not 0 < ratio < ZENO_MAX_RATIO:
        return None, ratio
    return s0 + (s0 - s1) * ratio / (1 - ratio), ratio


def _periodic(keys: list, p: int) -> bool:
    """Whether the last ``3 p + 1`` keys repeat with period ``p``."""
    if len(keys) < 3 * p + 1:
        return False
    return all(keys[-1 - back] == keys[-1 - back - p] for back in range(2 * p + 1))


def zeno_check(instants: deque) -> Accumulation | None:
    """The shortest accepted accumulation of the last instants (kernel ``zeno_check``), or ``None``."""
    keys = [instant.key for instant in instants]
    for p in range(1, ZENO_MAX_CYCLE + 1):
        if not _periodic(keys, p):
            continue
        s0, s1, s2, s3 = (instants[-1 - back * p].t for back in range(4))
        if not s0 > s1 > s2 > s3:
            continue
        t_acc, ratio = aitken(s0, s1, s2)
        before, _ = aitken(s1, s2, s3)
        if t_acc is None or before is None:
            continue
        error = abs(t_acc - before)
        tail = t_acc - s0
        tol = tolerance("zeno_time") * abs(t_acc) * max(1, 1 / (1 - ratio) ** 2)
        if not (error <= tol or tail <= tol):
            continue
        r0, r1, r2 = (instants[-1 - back * p].row for back in range(3))
        d1 = [a - b for a, b in zip(r0, r1)]
        d0 = [a - b for a, b in zip(r1, r2)]
        size = mp.fdot(d0, d0)
        if not size > 0:
            continue
        rho = mp.fdot(d1, d0) / size
        if 0 <= rho < 1:
            return Accumulation(p, t_acc, min(error, tail), ratio, rho)
    return None
