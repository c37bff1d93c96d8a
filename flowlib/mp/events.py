"""What happens at a switching surface, over mpmath numbers.

The classification of :mod:`flowlib.kernels.events` (read its module docstring for the mathematics): the
minimal-norm velocity of a neuron on the surfaces it sits on, and for several surfaces at once the consistent
configuration (each surface left up, left down, or held) of smallest ``|v|`` (largest with ``tie="leave"``),
found by the same search over the repelling surfaces (enumeration up to ``MAX_ENUMERATED``, branch and bound or
ascent beyond; same function names); the Carathéodory selection. Tolerances are those of the one table
(:mod:`flowlib.kernels.tolerances`) at the working precision. Call inside ``mp.workdps(...)``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from mpmath import mp, mpf

from flowlib.kernels.constants import (EVENT_CROSS, EVENT_SLIDE_END, EVENT_SLIDE_START, EVENT_STICK, EVENT_TIE,
                                       LCP_DOWN, LCP_FREE, LCP_HOLD, LCP_UP, MAX_ENUMERATED,
                                       MAX_ENUMERATED_LEAVE, NODE_LIMIT, SCREEN_COLUMNS)
from flowlib.mp import linalg
from flowlib.mp.tolerances import tolerance

DOWN, UP, HOLD = 0, 1, 2


def stay_tol() -> mpf:
    """Relative size below which a normal velocity counts as zero (the table's ``stay``)."""
    return tolerance("stay")


def hold_slack() -> mpf:
    """How far exact multipliers of several held surfaces may lie outside ``[leak, 1]`` (the table's
    ``hold_slack``)."""
    return tolerance("hold_slack")


def dependent_columns(columns) -> list:
    """Per column, whether it lies in the span of the others to :func:`stay_tol`; above ``SCREEN_COLUMNS``
    columns screened first by two greedy bases (:func:`_screen_dependent`), as the kernel's."""
    q = len(columns)
    screened = _screen_dependent(columns) if q > SCREEN_COLUMNS else [False] * q
    cut, tol = linalg.rcond(), stay_tol()
    return [screened[p] or (q >= 2 and _in_span_of_others(columns, p, cut, tol)) for p in range(q)]


def _in_span_of_others(columns, p, cut, tol) -> bool:
    """Whether column ``p`` lies in the span of the others (least squares with singular-value cut-off ``cut``), to
    ``tol`` relative to its own length."""
    others = [c for r, c in enumerate(columns) if r != p]
    coef = linalg.lstsq(others, columns[p], cut)
    residual = linalg.combine(columns[p], others, [-c for c in coef])
    return linalg.norm(residual) <= tol * linalg.norm(columns[p])


def _residual(basis, x) -> list:
    """``x`` less its projection onto the orthonormal vectors ``basis`` (projected out twice)."""
    x = list(x)
    for _ in range(2):
        for q in basis:
            coef = linalg.dot(q, x)
            x = [xi - coef * qi for xi, qi in zip(x, q)]
    return x


def _greedy_basis(columns, take) -> tuple[list, list, list]:
    """Scan the columns ``p`` in ``take`` in order; one whose residual against the basis so far exceeds
    :func:`stay_tol` of its length joins it. Returns the orthonormal basis, its members, and the scanned columns
    that did not join (each in the span of earlier members)."""
    tol, da = stay_tol(), len(columns[0])
    basis, members, covered = [], [], []
    for p in take:
        if len(basis) == da:
            covered.append(p)
            continue
        r = _residual(basis, columns[p])
        size = linalg.norm(r)
        if size > tol * linalg.norm(columns[p]):
            basis.append([x / size for x in r])
            members.append(p)
        else:
            covered.append(p)
    return basis, members, covered


def _screen_dependent(columns) -> list:
    """Columns shown to lie in the span of the others by two greedy bases (the kernel's ``_screen_dependent``:
    a residual against a subset of the other columns bounds the one against all of them)."""
    q = len(columns)
    out = [False] * q
    _, first, covered = _greedy_basis(columns, range(q))
    for p in covered:
        out[p] = True
    chosen = set(first)
    _, second, _ = _greedy_basis(columns, [p for p in range(q) if p not in chosen])
    for p in first:
        basis, _, _ = _greedy_basis(columns, sorted(second + [r for r in first if r != p]))
        out[p] = linalg.norm(_residual(basis, columns[p])) <= stay_tol() * linalg.norm(columns[p])
    return out


@dataclass
class Decision:
    """What one surface does: stay on it, or leave to ``side``; the event kind it logs; its multiplier."""

    stay: bool
    side: int
    kind: int
    multiplier: mpf


class NoConsistentConfiguration(Exception):
    """Internal, kept for the driver's handler: no longer raised (the configuration problem always has a
    solution, :func:`solve_configuration`)."""


class NoCaratheodory(Exception):
    """Internal: the selection pushes the state into a surface it cannot stay on."""


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
    NoCaratheodory
        Internal; the driver turns them into a status (``NoConsistentConfiguration`` is no longer raised: a
        consistent configuration always exists).
    """
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
    if count >= 2 and not caratheodory:
        return _consistent_configuration(samples, normals, v0, E, leak, size, tie_leave, side_forced)
    s = linalg.box_least_squares(E, v0, leak, mpf(1))
    v = linalg.combine(v0, E, s)
    u = [linalg.dot(v, nrm) for nrm in normals]
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


def _surface_scales(normals, E, size):
    """``jump[p] = <e_p, n_p>`` and ``tol[p] = stay_tol() size |n_p|`` (see the kernel's)."""
    tol = stay_tol()
    jump = [linalg.dot(e, nrm) for e, nrm in zip(E, normals)]
    limits = [tol * size * linalg.norm(nrm) for nrm in normals]
    return jump, limits


def _solve_node(normals, v0, E, leak, assign):
    """The least-squares problem of one search node: ``(s, v, u, |v|^2)`` (see the kernel's)."""
    count = len(normals)
    s = [mpf(0)] * count
    base = list(v0)
    free = []
    for p in range(count):
        if assign[p] in (LCP_DOWN, LCP_UP):
            s[p] = leak if assign[p] == LCP_DOWN else mpf(1)
            base = [b + s[p] * e for b, e in zip(base, E[p])]
        else:
            free.append(p)
    if free:
        sf = linalg.box_least_squares([E[p] for p in free], base, leak, mpf(1))
        for p, sp in zip(free, sf):
            s[p] = sp
    v = list(v0)
    for p in range(count):
        v = [a + s[p] * e for a, e in zip(v, E[p])]
    u = [linalg.dot(v, nrm) for nrm in normals]
    return s, v, u, linalg.dot(v, v)


def _violation(assign, s, u, jump, limits, leak):
    """``(violation, branch)`` of a node's solution (see the kernel's)."""
    worst = mpf(0)
    branch = first_free = -1
    for p, a in enumerate(assign):
        t = limits[p]
        if a == LCP_DOWN:
            excess = u[p] - t
        elif a == LCP_UP:
            excess = -u[p] - t
        elif a == LCP_HOLD:
            excess = abs(u[p]) - t
        elif jump[p] > 0:
            excess = abs(u[p]) - t
            if first_free < 0:
                first_free = p
            if excess > 0 and branch < 0:
                branch = p
        elif jump[p] < 0:
            excess = u[p] - t if s[p] <= leak else -u[p] - t if s[p] >= 1 else abs(u[p]) - t
        else:
            excess = mpf(0)
        if excess > 0:
            worst = max(worst, excess / t if t > 0 else mp.inf)
    if worst > 0 and branch < 0:
        branch = first_free
    return worst, branch


def _treatment(assign, u, limits, p):
    """What surface ``p`` does in a node's solution: ``DOWN``, ``UP`` or ``HOLD``."""
    if assign[p] == LCP_DOWN:
        return DOWN if u[p] < -limits[p] else HOLD
    if assign[p] == LCP_UP:
        return UP if u[p] > limits[p] else HOLD
    return UP if u[p] > limits[p] else DOWN if u[p] < -limits[p] else HOLD


def _holds_exactly(normals, v0, E, leak, assign, s, u, limits):
    """Whether the surfaces a node's solution holds can be held exactly, multipliers in the box (see the
    kernel's)."""
    held = [p for p in range(len(assign)) if _treatment(assign, u, limits, p) == HOLD]
    if len(held) < 2:
        return True
    columns = [normals[p] for p in held]
    if any(dependent_columns(columns)):
        return True
    base = linalg.combine(v0, [E[p] for p in range(len(assign)) if p not in held],
                          [s[p] for p in range(len(assign)) if p not in held])
    alpha = linalg.lstsq(columns, base, linalg.rcond())
    slack = hold_slack()
    for a, p in zip(alpha, held):
        en = linalg.dot(E[p], normals[p])
        if en == 0:
            continue
        slope = -a * linalg.dot(normals[p], normals[p]) / en
        if slope < leak - slack or slope > 1 + slack:
            return False
    return True


def _enumerate_configurations(normals, v0, E, leak, jump, limits, tie_leave, start, rep, seen):
    """Every decision of the undecided repelling surfaces; ``(found, assign)`` (see the kernel's)."""
    choices = (LCP_DOWN, LCP_UP) if tie_leave else (LCP_HOLD, LCP_DOWN, LCP_UP)
    found, best, least, best_assign = False, mpf(0), mp.inf, list(start)
    for digits in itertools.product(range(len(choices)), repeat=len(rep)):
        assign = list(start)
        # the kernel's order: the first surface is the fastest-varying digit
        for a, digit in enumerate(reversed(digits)):
            assign[rep[a]] = choices[digit]
        s, v, u, value = _solve_node(normals, v0, E, leak, assign)
        viol, _ = _violation(assign, s, u, jump, limits, leak)
        if viol == 0 and _holds_exactly(normals, v0, E, leak, assign, s, u, limits):
            for p in range(len(assign)):
                seen[p].add(_treatment(assign, u, limits, p))
            if (value > best) if tie_leave else (not found or value < best):
                found, best, best_assign = True, value, assign
        elif not found and viol < least:
            least, best_assign = viol, assign
    return found, best_assign


def _branch_and_bound(normals, v0, E, leak, jump, limits, start, seen):
    """The consistent decision of smallest ``|v|`` by branch and bound; ``(found, assign)`` (see the kernel's)."""
    stack = [list(start)]
    found, best, best_assign, nodes = False, mpf(0), list(start), 0
    while stack and nodes < NODE_LIMIT:
        assign = stack.pop()
        s, v, u, value = _solve_node(normals, v0, E, leak, assign)
        nodes += 1
        if found and value >= best:
            continue
        viol, branch = _violation(assign, s, u, jump, limits, leak)
        if viol == 0 and not _holds_exactly(normals, v0, E, leak, assign, s, u, limits):
            # held to tolerance but not exactly: decide the first repelling surface it holds
            branch = next((p for p in range(len(assign)) if jump[p] > 0 and assign[p] in (LCP_FREE, LCP_HOLD)
                           and _treatment(assign, u, limits, p) == HOLD), -1)
            viol = mp.inf
            if branch >= 0 and assign[branch] == LCP_HOLD:
                for choice in (LCP_DOWN, LCP_UP):
                    child = list(assign)
                    child[branch] = choice
                    stack.append(child)
                continue
        if viol == 0:
            found, best, best_assign = True, value, assign
            for p in range(len(assign)):
                seen[p].add(_treatment(assign, u, limits, p))
            continue
        if branch < 0:
            continue
        other = LCP_UP if s[branch] <= leak else LCP_DOWN
        for choice in (LCP_UP + LCP_DOWN - other, LCP_HOLD, other):
            child = list(assign)
            child[branch] = choice
            stack.append(child)
    return found, best_assign


def _ascent(normals, v0, E, leak, jump, limits, rep, assign):
    """Switch inconsistent repelling vertices until consistent; ``(found, assign)`` (see the kernel's)."""
    assign = list(assign)
    for _ in range(64 * len(assign) + 64):
        s, v, u, _ = _solve_node(normals, v0, E, leak, assign)
        flip = next((p for p in rep if (assign[p] == LCP_DOWN and u[p] > limits[p]) or (
            assign[p] == LCP_UP and u[p] < -limits[p])), None)
        if flip is None:
            return _violation(assign, s, u, jump, limits, leak)[0] == 0, assign
        assign[flip] = LCP_UP if assign[flip] == LCP_DOWN else LCP_DOWN
    return False, assign


def solve_configuration(normals, v0, E, leak, size, tie_leave, side_forced):
    """The box-constrained linear complementarity problem of one neuron on several surfaces (see the kernel's).

    Returns ``(outcome, assign, seen)``: outcome 0 consistent, 1 consistent but for the forced surfaces (the
    driver's exit test decides them), 2 consistent after dropping the forcing, 3 only to rounding inconsistent
    decisions left (the least inconsistent one, with the forced sides fixed where there are any).
    """
    count = len(normals)
    jump, limits = _surface_scales(normals, E, size)
    forcing = any(side_forced)
    assign = forced_assign = None
    for attempt in range(3 if forcing else 1):
        seen = [set() for _ in range(count)]
        start = [LCP_FREE] * count
        used = list(limits)
        if attempt < 2:
            for p, f in enumerate(side_forced):
                if f:
                    start[p] = LCP_UP if f > 0 else LCP_DOWN
                    if attempt == 1:
                        used[p] = mp.inf  # the driver's exit test decides the forced side
        rep = [p for p in range(count) if start[p] == LCP_FREE and jump[p] > 0]
        if len(rep) <= (MAX_ENUMERATED_LEAVE if tie_leave else MAX_ENUMERATED):
            found, assign = _enumerate_configurations(normals, v0, E, leak, jump, used, tie_leave, start, rep, seen)
        else:
            found = False
            if not tie_leave:
                found, assign = _branch_and_bound(normals, v0, E, leak, jump, used, start, seen)
            if not found:
                _, _, u, _ = _solve_node(normals, v0, E, leak, start)
                assign = list(start)
                for p in rep:
                    assign[p] = LCP_UP if u[p] > 0 else LCP_DOWN
                found, assign = _ascent(normals, v0, E, leak, jump, used, rep, assign)
        if found:
            return attempt, assign, seen
        if attempt == 1:
            forced_assign = list(assign)
    # nothing consistent to rounding: the forced sides are still taken (see the kernel's)
    return 3, forced_assign if forcing else assign, seen


def _consistent_configuration(samples, normals, v0, E, leak, size, tie_leave, side_forced):
    """Several surfaces at once: solve the configuration problem and report it (see the kernel's)."""
    outcome, assign, seen = solve_configuration(normals, v0, E, leak, size, tie_leave, side_forced)
    jump, limits = _surface_scales(normals, E, size)
    s, v, u, _ = _solve_node(normals, v0, E, leak, assign)
    out = {}
    for p, i in enumerate(samples):
        branched = len(seen[p]) > 1
        treatment = _treatment(assign, u, limits, p)
        if outcome != 2 and side_forced[p]:
            out[i] = Decision(False, side_forced[p], EVENT_SLIDE_END, s[p])
        elif treatment == HOLD:
            interior = leak < s[p] < 1
            if branched or (interior and jump[p] > 0):
                kind = EVENT_TIE
            elif interior and jump[p] < 0:
                kind = EVENT_SLIDE_START
            else:
                kind = EVENT_STICK
            out[i] = Decision(True, 0, kind, s[p])
        else:
            out[i] = Decision(False, 1 if treatment == UP else -1, EVENT_TIE if branched else EVENT_CROSS,
                              mpf(1) if treatment == UP else leak)
    return out
