"""What happens at a switching surface, over mpmath numbers.

The classification of :mod:`flowlib.kernels.events` (read its module docstring for the mathematics): the
minimal-norm velocity of a neuron on the surfaces it sits on, and for several surfaces at once the consistent
configuration (each surface left up, left down, or held) of smallest ``|v|``; a fixed-point search beyond
``MAX_ENUMERATED`` surfaces; the Carathéodory selection. Tolerances scale with the working precision
(:func:`stay_tol` is ``1e-9`` in float64 and ``eps^(9/16)`` here). Call inside ``mp.workdps(...)``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from mpmath import mp, mpf

from flowlib.kernels.constants import (EVENT_CROSS, EVENT_SLIDE_END, EVENT_SLIDE_START, EVENT_STICK, EVENT_TIE,
                                       MAX_ENUMERATED, MAX_SURFACES)
from flowlib.mp import linalg

DOWN, UP, HOLD = 0, 1, 2


def stay_tol() -> mpf:
    """Relative size below which a normal velocity counts as zero: ``eps^(9/16)``."""
    return mp.eps ** (mpf(9) / 16)


@dataclass
class Decision:
    """What one surface does: stay on it, or leave to ``side``; the event kind it logs; its multiplier."""

    stay: bool
    side: int
    kind: int
    multiplier: mpf


class NoConsistentConfiguration(Exception):
    """Internal: no configuration of the surfaces is consistent with the field (status ``failed``)."""


class NoCaratheodory(Exception):
    """Internal: the selection pushes the state into a surface it cannot stay on."""


class TooManySurfaces(Exception):
    """Internal: a neuron sits on more than ``MAX_SURFACES`` hyperplanes."""


def _configuration(sides, normals, v0, E, leak):
    """Velocity, multipliers and misfit of one configuration (see ``kernels.events._configuration``)."""
    free_cols = [E[p] for p, side in enumerate(sides) if side != HOLD]
    free_slopes = [mpf(1) if side == UP else leak for side in sides if side != HOLD]
    v = linalg.combine(v0, free_cols, free_slopes)
    mult = [mpf(1) if side == UP else leak for side in sides]
    held = [p for p, side in enumerate(sides) if side == HOLD]
    if not held:
        return v, mult, mpf(0)
    N = [normals[p] for p in held]
    coef = linalg.lstsq(N, v, linalg.rcond())
    correction = linalg.combine([mpf(0)] * len(v), N, [-c for c in coef])
    v = [a + b for a, b in zip(v, correction)]
    Eh = [E[p] for p in held]
    s = linalg.box_least_squares(Eh, [-c for c in correction], leak, mpf(1))
    misfit = linalg.combine([-c for c in correction], Eh, s)
    for p, sp in zip(held, s):
        mult[p] = sp
    return v, mult, linalg.norm(misfit)


def classify_neuron(data, G, P, S, j, samples, forced, caratheodory=False, selection=None, tie_leave=False):
    """Minimal-norm velocity of neuron ``j`` on the surfaces of ``samples`` and what each of them does.

    Parameters
    ----------
    data : flowlib.mp.series.MPData
    G : list of mpf
        Residual weights at the current state.
    P, S : list
        State and slopes (rows of ``samples`` are ignored).
    j : int
    samples : list of int
        The samples whose surfaces neuron ``j`` sits on.
    forced : dict
        ``sample -> +1 / -1`` for held surfaces whose multiplier left ``[leak, 1]`` (released to that side).
    caratheodory : bool
    selection : mpf
    tie_leave : bool

    Returns
    -------
    dict
        ``sample -> Decision``.

    Raises
    ------
    TooManySurfaces, NoCaratheodory, NoConsistentConfiguration
        Internal; the driver turns them into a status.
    """
    if len(samples) > MAX_SURFACES:
        raise TooManySurfaces
    da = data.da
    a_j = P[j][da]
    leak = data.leak
    normals = [list(data.normals[i]) for i in samples]
    on = set(samples)
    v0 = [mpf(0)] * da
    for i in range(data.n):
        if i not in on:
            coef = -a_j * G[i] * S[i][j]
            if coef:
                v0 = [v + coef * x for v, x in zip(v0, data.normals[i])]
    E = [[-a_j * G[i] * x for x in normal] for i, normal in zip(samples, normals)]
    size = linalg.norm(v0) + mp.fsum(linalg.norm(e) for e in E)
    tol = stay_tol()
    count = len(samples)
    side_forced = [forced.get(i, 0) for i in samples]
    if 2 <= count <= MAX_ENUMERATED and not caratheodory:
        return _consistent_configuration(samples, normals, v0, E, leak, size, tie_leave, side_forced)
    s = linalg.box_least_squares(E, v0, leak, mpf(1))
    v = linalg.combine(v0, E, s)
    u = [linalg.dot(v, nrm) for nrm in normals]
    if count > MAX_ENUMERATED and not caratheodory:
        found = _fixed_point_configuration(samples, normals, v0, E, leak, size, side_forced, u)
        if found is not None:
            return found
    out = {}
    for p, i in enumerate(samples):
        jump = linalg.dot(E[p], normals[p])
        limit = tol * size * linalg.norm(normals[p])
        interior = leak < s[p] < 1
        if side_forced[p]:
            out[i] = Decision(False, side_forced[p], EVENT_SLIDE_END, s[p])
        elif caratheodory:
            u_sel = u[p] + (selection - s[p]) * jump
            u_up = u[p] + (1 - s[p]) * jump
            u_down = u[p] + (leak - s[p]) * jump
            if abs(u_sel) <= limit or (abs(u[p]) <= limit and s[p] == selection):
                out[i] = Decision(True, 0, EVENT_STICK, s[p])
            elif u_sel > 0 and u_up > limit:
                out[i] = Decision(False, 1, EVENT_CROSS, s[p])
            elif u_sel < 0 and u_down < -limit:
                out[i] = Decision(False, -1, EVENT_CROSS, s[p])
            else:
                raise NoCaratheodory
        elif u[p] > limit:
            out[i] = Decision(False, 1, EVENT_CROSS, s[p])
        elif u[p] < -limit:
            out[i] = Decision(False, -1, EVENT_CROSS, s[p])
        elif interior and jump < 0:
            out[i] = Decision(True, 0, EVENT_SLIDE_START, s[p])
        elif interior and jump > 0:
            if tie_leave:
                up = [a + (1 - s[p]) * e for a, e in zip(v, E[p])]
                down = [a + (leak - s[p]) * e for a, e in zip(v, E[p])]
                out[i] = Decision(False, 1 if linalg.dot(up, up) >= linalg.dot(down, down) else -1, EVENT_TIE, s[p])
            else:
                out[i] = Decision(True, 0, EVENT_TIE, s[p])
        else:
            out[i] = Decision(True, 0, EVENT_STICK, s[p])
    return out


def _consistent_configuration(samples, normals, v0, E, leak, size, tie_leave, side_forced):
    """The consistent configuration of smallest ``|v|`` (largest with ``tie_leave``); see the kernel's."""
    count = len(samples)
    tol = stay_tol()
    jump = [linalg.dot(e, nrm) for e, nrm in zip(E, normals)]
    n_size = [linalg.norm(nrm) for nrm in normals]
    releasing = any(side_forced)
    seen = [set() for _ in range(count)]
    best = None
    for sides in itertools.product((DOWN, UP, HOLD), repeat=count):
        if any(f and sides[p] != (UP if f > 0 else DOWN) for p, f in enumerate(side_forced)):
            continue
        v, mult, misfit = _configuration(sides, normals, v0, E, leak)
        if misfit > tol * size:
            continue
        ok = True
        for p in range(count):
            limit = tol * size * n_size[p]
            margin = -limit if releasing else limit
            u = linalg.dot(v, normals[p])
            if (sides[p] == UP and not u > margin) or (sides[p] == DOWN and not u < -margin) or (
                    sides[p] == HOLD and tie_leave and jump[p] > 0 and leak < mult[p] < 1):
                ok = False
                break
        if not ok:
            continue
        for p in range(count):
            seen[p].add(sides[p])
        norm = linalg.dot(v, v)
        if best is None or (norm > best[0] if tie_leave else norm < best[0]):
            best = (norm, sides, mult)
    if best is None:
        raise NoConsistentConfiguration
    _, sides, mult = best
    out = {}
    for p, i in enumerate(samples):
        branched = len(seen[p]) > 1
        if sides[p] == HOLD:
            interior = leak < mult[p] < 1
            if branched or (interior and jump[p] > 0):
                kind = EVENT_TIE
            else:
                kind = EVENT_SLIDE_START if interior else EVENT_STICK
            out[i] = Decision(True, 0, kind, mult[p])
        else:
            out[i] = Decision(False, 1 if sides[p] == UP else -1, EVENT_TIE if branched else EVENT_CROSS, mult[p])
    return out


def _fixed_point_configuration(samples, normals, v0, E, leak, size, side_forced, u0):
    """Consistent configuration of many surfaces by fixed-point iteration (see the kernel's); ``None`` if none."""
    count = len(samples)
    tol = stay_tol()
    n_size = [linalg.norm(nrm) for nrm in normals]
    sides = []
    for p in range(count):
        limit = tol * size * n_size[p]
        if side_forced[p]:
            sides.append(UP if side_forced[p] > 0 else DOWN)
        else:
            sides.append(UP if u0[p] > limit else DOWN if u0[p] < -limit else HOLD)
    for _ in range(4 * count + 4):
        v, mult, misfit = _configuration(sides, normals, v0, E, leak)
        changed = False
        for p in range(count):
            if side_forced[p]:
                continue
            limit = tol * size * n_size[p]
            u = linalg.dot(v, normals[p])
            if (sides[p] == UP and not u > -limit) or (sides[p] == DOWN and not u < limit):
                sides[p], changed = HOLD, True
                break
            if sides[p] == HOLD and misfit > tol * size and (mult[p] <= leak or mult[p] >= 1):
                sides[p], changed = (UP if mult[p] >= 1 else DOWN), True
                break
        if not changed:
            if misfit > tol * size:
                return None
            out = {}
            for p, i in enumerate(samples):
                if sides[p] == HOLD:
                    out[i] = Decision(True, 0, EVENT_SLIDE_START if leak < mult[p] < 1 else EVENT_STICK, mult[p])
                else:
                    out[i] = Decision(False, 1 if sides[p] == UP else -1, EVENT_CROSS, mult[p])
            return out
    return None
