"""What happens at a switching surface: the minimal-norm velocity of a neuron and the classification it implies.

At ``z_ij = 0`` the network output is continuous (``sigma(0) = 0`` whatever the slope), so the residual weights
``G`` are too, and the only discontinuity of the field is the slope ``s_ij`` of the neuron's own surfaces. The
velocity of neuron ``j`` on the surfaces ``I`` it sits on is affine in their slopes (DESIGN.md §1):

    (w_j, b_j)' = v(s) = v0 + sum_{k in I} s_k e_k,   e_k = -a_j G_k n_k,   n_k = (x_k, 1),  s_k in [leak, 1].

The solution concept takes the minimal-norm element ``v* = v(s*)``, ``s* = argmin |v(s)|`` over the box: a tiny
bounded least-squares problem per neuron (:func:`box_least_squares`). Because ``e_k`` is parallel to the normal
``n_k``, its optimality conditions say ``u_k = <v*, n_k> = 0`` wherever ``s*_k`` is interior. So, with
``M_kk = <e_k, n_k> = -a_j G_k |n_k|^2`` the jump of ``u_k`` across surface ``k``:

* ``|u*_k| > tol``: the state leaves surface ``k`` to the side ``sign(u*_k)`` (**crossing**);
* ``u*_k = 0``, ``s*_k`` interior, ``M_kk < 0``: both sides push into the surface (**sliding**, multiplier
  ``s*_k``, the Filippov sliding field);
* ``u*_k = 0``, ``s*_k`` interior, ``M_kk > 0``: both sides push away (**repelling tie**): the minimal-norm
  solution stays (the "regular" solution); ``tie_policy = TIE_LEAVE`` leaves on the side of steepest descent
  (the larger ``|v|^2 = -dL/dt``);
* ``u*_k = 0`` with ``s*_k`` at a bound (or ``M_kk = 0``): one side has zero normal velocity (**sticking**, e.g. a
  ReLU neuron dying on its last hyperplane).

``tol`` is ``STAY_TOL`` times ``(|v0| + sum_k |e_k|) |n_k|``: normal velocities that small are rounding noise.

On several surfaces at once the instantaneous minimal-norm velocity does not always say where the state goes
next: a neuron at the origin may leave one hyperplane into a cell whose field drives it straight back onto
another. For ``2 <= |I| <= MAX_ENUMERATED`` every configuration (each surface left upwards, left downwards, or
held with the multiplier that keeps the velocity tangent) is checked for consistency (``u_k > 0`` / ``u_k < 0`` on
the sides left, multipliers in ``[leak, 1]`` on the surfaces held), and the consistent one with the smallest
``|v|`` is taken: the minimal-norm element among the velocities the solution can actually continue with (for one
surface this is exactly the minimal-norm rule above). With ``TIE_LEAVE`` configurations holding a repelling
surface are skipped and the largest ``|v|`` (steepest descent) is taken. Beyond ``MAX_ENUMERATED`` surfaces (a
neuron at the origin of a large data set) a fixed-point iteration starting from the minimal-norm sides looks
for a consistent configuration instead (not necessarily the smallest); if it finds none, the sides of the
instantaneous minimal-norm velocity are used (the energy diagnostic then shows any inconsistency).

With ``caratheodory = True`` the field is the single-valued selection ``s = sigma'(0) = c`` instead: a surface is
left to the side ``sign(u_k(c))`` when the one-sided field there agrees; it stays when ``s*_k = c`` or
``u_k(c) = 0``; and when the selection pushes the state back into a surface it cannot stay on (sliding), no
Carathéodory solution exists: ``NO_CARATHEODORY``.
"""

import math

import numpy as np

from . import status
from ._jit import jit
from .constants import (EVENT_CROSS, EVENT_SLIDE_END, EVENT_SLIDE_START, EVENT_STICK, EVENT_TIE,  # noqa: F401
                        EVENT_ZENO, MAX_ENUMERATED, MAX_SURFACES, TIE_LEAVE, TIE_STAY)

#: Relative size below which a normal velocity counts as zero (the surface is kept).
STAY_TOL = 1e-9
#: Relative singular-value cut-off of the small least-squares solves: hyperplanes of duplicate or antipodal samples
#: have exactly dependent normals, which LAPACK's default (machine epsilon) may not recognise.
RCOND = 1e-12


@jit
def box_least_squares(E, v0, lo, hi, s):
    """Minimise ``|v0 + E s|^2`` over ``lo <= s <= hi`` (an active-set method; exact at termination).

    Parameters
    ----------
    E : ndarray, shape (p, q)
    v0 : ndarray, shape (p,)
    lo, hi : float
        Box bounds (the same for every component), ``lo < hi``.
    s : ndarray, shape (q,)
        Output: a minimiser (the minimum-norm one on the free set when ``E`` is rank deficient).

    Returns
    -------
    int
        ``status.RUNNING`` (the iteration always ends with a minimiser: an active-set method, with cyclic
        coordinate descent and a polishing solve as the fallback when the active set cycles).
    """
    q = E.shape[1]
    H = E.T @ E
    g0 = E.T @ v0
    scale = 0.0
    for k in range(q):
        scale = max(scale, abs(g0[k]))
        for l in range(q):
            scale = max(scale, abs(H[k, l]) * max(abs(lo), abs(hi)))
    tol = 1e-14 * scale
    for k in range(q):
        s[k] = lo
    free = np.zeros(q, np.bool_)
    for _ in range(20 * q + 20):
        grad = H @ s + g0
        # variables at a bound whose gradient points into the box are released
        changed = False
        for k in range(q):
            if not free[k]:
                if (s[k] <= lo and grad[k] < -tol) or (s[k] >= hi and grad[k] > tol):
                    free[k] = True
                    changed = True
                    break
        idx = np.flatnonzero(free)
        nf = len(idx)
        if nf == 0:
            return status.RUNNING
        step = _newton_step(H, grad, idx)
        alpha = 1.0
        blocking = -1
        for a in range(nf):
            k = idx[a]
            if step[a] > 0.0 and s[k] + step[a] > hi:
                r = (hi - s[k]) / step[a]
                if r < alpha:
                    alpha, blocking = r, k
            elif step[a] < 0.0 and s[k] + step[a] < lo:
                r = (lo - s[k]) / step[a]
                if r < alpha:
                    alpha, blocking = r, k
        for a in range(nf):
            k = idx[a]
            s[k] = min(hi, max(lo, s[k] + alpha * step[a]))
        if blocking >= 0:
            s[blocking] = hi if step[np.searchsorted(idx, blocking)] > 0.0 else lo
            free[blocking] = False
            continue
        if not changed:
            # subspace minimum reached with every bound variable satisfied
            grad = H @ s + g0
            done = True
            for k in range(q):
                if not free[k] and ((s[k] <= lo and grad[k] < -tol) or (s[k] >= hi and grad[k] > tol)):
                    done = False
            if done:
                return status.RUNNING
    # the active-set iteration can cycle on rank-deficient problems (many hyperplanes through a neuron at the
    # origin): fall back to cyclic coordinate descent, which converges for any convex quadratic, then polish the
    # free variables with one least-squares solve
    return _coordinate_descent(H, g0, lo, hi, s)


@jit
def _coordinate_descent(H, g0, lo, hi, s):
    q = len(s)
    for k in range(q):
        s[k] = 0.5 * (lo + hi)
    for _ in range(100_000):
        change = 0.0
        for k in range(q):
            if H[k, k] <= 0.0:
                continue
            grad = g0[k]
            for l in range(q):
                grad += H[k, l] * s[l]
            new = min(hi, max(lo, s[k] - grad / H[k, k]))
            change = max(change, abs(new - s[k]))
            s[k] = new
        if change <= 1e-15 * (hi - lo):
            break
    margin = 1e-9 * (hi - lo)
    idx = np.flatnonzero((s > lo + margin) & (s < hi - margin))
    if len(idx) == 0:
        return status.RUNNING
    polished = s[idx] + _newton_step(H, H @ s + g0, idx)
    if np.all((polished >= lo) & (polished <= hi)):
        s[idx] = polished
    return status.RUNNING


@jit
def _newton_step(H, grad, idx):
    """Minimum-norm solution ``d`` of ``H[idx, idx] d = -grad[idx]`` (the step to the subspace minimum)."""
    nf = len(idx)
    Hf = np.empty((nf, nf))
    rhs = np.empty(nf)
    for a in range(nf):
        rhs[a] = -grad[idx[a]]
        for b in range(nf):
            Hf[a, b] = H[idx[a], idx[b]]
    return np.linalg.lstsq(Hf, rhs, RCOND)[0]


@jit
def _configuration(sides, count, normal, v0, E, leak, v, mult):
    """Velocity and multipliers of one configuration (``sides[p]``: 0 leave down, 1 leave up, 2 held).

    The held surfaces make the velocity tangent: ``v`` is the projection of the free velocity onto the
    complement of their normals (unique), and the multipliers are any ``s`` in ``[leak, 1]`` with
    ``sum_k s_k e_k = v - v_free`` (found by bounded least squares, so dependent normals, as for antipodal or
    duplicate samples, are handled). Returns the residual ``|sum_k s_k e_k - (v - v_free)|`` of that fit; a
    configuration whose residual is above the rounding level of the velocities cannot be held.
    """
    da = normal.shape[0]
    for r in range(da):
        v[r] = v0[r]
    held = 0
    for p in range(count):
        if sides[p] == 2:
            held += 1
        else:
            slope = 1.0 if sides[p] == 1 else leak
            for r in range(da):
                v[r] += slope * E[r, p]
    for p in range(count):
        mult[p] = 1.0 if sides[p] == 1 else leak
    if held == 0:
        return 0.0
    N = np.empty((da, held))
    Eh = np.empty((da, held))
    q = 0
    for p in range(count):
        if sides[p] == 2:
            for r in range(da):
                N[r, q] = normal[r, p]
                Eh[r, q] = E[r, p]
            q += 1
    coef = np.linalg.lstsq(N, v.copy(), RCOND)[0]
    correction = -(N @ coef)
    for r in range(da):
        v[r] += correction[r]
    s = np.empty(held)
    box_least_squares(Eh, -correction, leak, 1.0, s)
    misfit = Eh @ s - correction
    q = 0
    for p in range(count):
        if sides[p] == 2:
            mult[p] = s[q]
            q += 1
    return math.sqrt(np.sum(misfit * misfit))


@jit
def classify_neuron(Xa, G, P, S, leak, bias, j, surface, forced, caratheodory, selection, tie_policy, out_side,
                    out_stay, out_kind, out_mult):
    """Minimal-norm velocity of neuron ``j`` on the surfaces ``surface[:, j]`` and what each surface does.

    Parameters
    ----------
    Xa : ndarray, shape (n, d + 1)
    G : ndarray, shape (n,)
        Residual weights at the current state.
    P : ndarray, shape (m, d + 2)
        Current state.
    S : ndarray, shape (n, m)
        Slopes of the cells the other samples are in (rows with ``surface[i, j]`` are ignored).
    leak : float
    bias : bool
    j : int
    surface : ndarray of bool, shape (n, m)
        The surfaces the state sits on.
    forced : ndarray of int8, shape (n, m)
        +1 / -1 where a held surface must be left to that side (its multiplier left ``[leak, 1]``), else 0.
    caratheodory : bool
        Use the selection ``s = selection`` instead of the minimal-norm element.
    selection : float
        ``sigma'(0)`` for the Carathéodory field.
    tie_policy : int
        ``TIE_STAY`` or ``TIE_LEAVE``.
    out_side : ndarray of int8, shape (n,)
        +1 / -1: the side a surface is left to (or, when staying, 0).
    out_stay : ndarray of bool, shape (n,)
        Whether the state stays on the surface.
    out_kind : ndarray of int8, shape (n,)
        ``EVENT_CROSS``, ``EVENT_SLIDE_START``, ``EVENT_STICK`` or ``EVENT_TIE`` (the kind this surface would log
        if its mode changes).
    out_mult : ndarray, shape (n,)
        The multiplier ``s*_k``.

    Returns
    -------
    int
        ``status.RUNNING``, or ``TOO_MANY_SURFACES`` / ``NO_CARATHEODORY`` / ``NO_CONSISTENT``.
    """
    n, da = Xa.shape
    d = da - 1
    a_j = P[j, da]
    idx = np.flatnonzero(surface[:, j])
    count = len(idx)
    if count > MAX_SURFACES:
        return status.TOO_MANY_SURFACES
    normal = np.zeros((da, count))
    for p in range(count):
        for r in range(d):
            normal[r, p] = Xa[idx[p], r]
        normal[d, p] = 1.0 if bias else 0.0
    v0 = np.zeros(da)
    for i in range(n):
        if not surface[i, j]:
            coef = -a_j * G[i] * S[i, j]
            for r in range(d):
                v0[r] += coef * Xa[i, r]
            if bias:
                v0[d] += coef
    E = np.empty((da, count))
    e_size = 0.0
    for p in range(count):
        coef = -a_j * G[idx[p]]
        norm = 0.0
        for r in range(da):
            E[r, p] = coef * normal[r, p]
            norm += E[r, p] ** 2
        e_size += math.sqrt(norm)
    s = np.empty(count)
    code = box_least_squares(E, v0, leak, 1.0, s)
    if code != status.RUNNING:
        return code
    v = v0 + E @ s
    u = normal.T @ v
    v0_size = math.sqrt(np.sum(v0 * v0))
    side_forced = np.zeros(count, np.int8)
    for p in range(count):
        side_forced[p] = forced[idx[p], j]
    if 2 <= count <= MAX_ENUMERATED and not caratheodory:
        return _consistent_configuration(idx, normal, v0, E, leak, v0_size + e_size, tie_policy, side_forced,
                                         out_side, out_stay, out_kind, out_mult)
    if count > MAX_ENUMERATED and not caratheodory:
        code = _fixed_point_configuration(idx, normal, v0, E, leak, v0_size + e_size, side_forced, u, out_side,
                                          out_stay, out_kind, out_mult)
        if code == status.RUNNING:
            return code
        # no fixed point: fall back to the sides of the instantaneous minimal-norm velocity below
    for p in range(count):
        i = idx[p]
        n_size = math.sqrt(np.sum(normal[:, p] ** 2))
        jump = 0.0
        for r in range(da):
            jump += E[r, p] * normal[r, p]
        tol = STAY_TOL * (v0_size + e_size) * n_size
        interior = leak < s[p] < 1.0
        out_mult[i] = s[p]
        if side_forced[p] != 0:
            out_stay[i] = False
            out_side[i] = side_forced[p]
            out_kind[i] = EVENT_SLIDE_END
            continue
        if caratheodory:
            u_sel = u[p] + (selection - s[p]) * jump
            u_up = u[p] + (1.0 - s[p]) * jump
            u_down = u[p] + (leak - s[p]) * jump
            if abs(u_sel) <= tol or (abs(u[p]) <= tol and s[p] == selection):
                out_stay[i] = True
                out_side[i] = 0
                out_kind[i] = EVENT_STICK
            elif u_sel > 0.0 and u_up > tol:
                out_stay[i] = False
                out_side[i] = 1
                out_kind[i] = EVENT_CROSS
            elif u_sel < 0.0 and u_down < -tol:
                out_stay[i] = False
                out_side[i] = -1
                out_kind[i] = EVENT_CROSS
            else:
                return status.NO_CARATHEODORY
            continue
        if u[p] > tol:
            out_stay[i] = False
            out_side[i] = 1
            out_kind[i] = EVENT_CROSS
        elif u[p] < -tol:
            out_stay[i] = False
            out_side[i] = -1
            out_kind[i] = EVENT_CROSS
        elif interior and jump < 0.0:
            out_stay[i] = True
            out_side[i] = 0
            out_kind[i] = EVENT_SLIDE_START
        elif interior and jump > 0.0:
            out_kind[i] = EVENT_TIE
            if tie_policy == TIE_LEAVE:
                up = v + (1.0 - s[p]) * E[:, p]
                down = v + (leak - s[p]) * E[:, p]
                out_stay[i] = False
                out_side[i] = 1 if np.sum(up * up) >= np.sum(down * down) else -1
            else:
                out_stay[i] = True
                out_side[i] = 0
        else:
            out_stay[i] = True
            out_side[i] = 0
            out_kind[i] = EVENT_STICK
    return status.RUNNING


@jit
def _consistent_configuration(idx, normal, v0, E, leak, size, tie_policy, side_forced, out_side, out_stay,
                              out_kind, out_mult):
    """Pick the consistent configuration of several simultaneous surfaces (see the module doc)."""
    da, count = normal.shape
    jump = np.empty(count)
    n_size = np.empty(count)
    for p in range(count):
        jump[p] = 0.0
        n_size[p] = math.sqrt(np.sum(normal[:, p] ** 2))
        for r in range(da):
            jump[p] += E[r, p] * normal[r, p]
    sides = np.empty(count, np.int64)
    best_sides = np.empty(count, np.int64)
    mult = np.empty(count)
    best_mult = np.empty(count)
    v = np.empty(da)
    # at a release (a multiplier left [leak, 1]) the state leaves tangentially: u = 0 is allowed on the sides left
    releasing = False
    for p in range(count):
        if side_forced[p] != 0:
            releasing = True
    seen = np.zeros(count, np.int64)
    best = -1.0
    found = False
    total = 1
    for _ in range(count):
        total *= 3
    for code in range(total):
        c = code
        for p in range(count):
            sides[p] = c % 3
            c //= 3
        misfit = _configuration(sides, count, normal, v0, E, leak, v, mult)
        ok = misfit <= STAY_TOL * size
        for p in range(count):
            if side_forced[p] != 0 and sides[p] != (1 if side_forced[p] > 0 else 0):
                ok = False
        for p in range(count):
            tol = STAY_TOL * size * n_size[p]
            u = 0.0
            for r in range(da):
                u += v[r] * normal[r, p]
            margin = -tol if releasing else tol
            if sides[p] == 1 and not u > margin:
                ok = False
            elif sides[p] == 0 and not u < -margin:
                ok = False
            elif sides[p] == 2 and tie_policy == TIE_LEAVE and jump[p] > 0.0 and leak < mult[p] < 1.0:
                ok = False
            if not ok:
                break
        if not ok:
            continue
        for p in range(count):
            seen[p] |= 1 << sides[p]
        norm = np.sum(v * v)
        better = norm > best if tie_policy == TIE_LEAVE else (not found or norm < best)
        if better:
            best = norm
            found = True
            for p in range(count):
                best_sides[p] = sides[p]
                best_mult[p] = mult[p]
    if not found:
        return status.NO_CONSISTENT
    for p in range(count):
        i = idx[p]
        out_mult[i] = best_mult[p]
        # a surface that consistent configurations treat differently is a branch point: log it as a tie
        branched = seen[p] & (seen[p] - 1) != 0
        if best_sides[p] == 2:
            out_stay[i] = True
            out_side[i] = 0
            interior = leak < best_mult[p] < 1.0
            if branched or (interior and jump[p] > 0.0):
                out_kind[i] = EVENT_TIE
            elif interior:
                out_kind[i] = EVENT_SLIDE_START
            else:
                out_kind[i] = EVENT_STICK
        else:
            out_stay[i] = False
            out_side[i] = 1 if best_sides[p] == 1 else -1
            out_kind[i] = EVENT_TIE if branched else EVENT_CROSS
    return status.RUNNING


@jit
def _fixed_point_configuration(idx, normal, v0, E, leak, size, side_forced, u0, out_side, out_stay, out_kind,
                               out_mult):
    """Consistent configuration of many simultaneous surfaces by fixed-point iteration (see the module doc).

    Starts from the sides of the minimal-norm velocity (normal velocities ``u0``); a surface left against the
    sign of its normal velocity in the resulting field is held instead, and a held surface the multipliers
    cannot keep (misfit) is released to the side of its normal velocity without it. Stops when nothing changes.
    """
    da, count = normal.shape
    sides = np.empty(count, np.int64)
    for p in range(count):
        tol = STAY_TOL * size * math.sqrt(np.sum(normal[:, p] ** 2))
        if side_forced[p] != 0:
            sides[p] = 1 if side_forced[p] > 0 else 0
        elif u0[p] > tol:
            sides[p] = 1
        elif u0[p] < -tol:
            sides[p] = 0
        else:
            sides[p] = 2
    v = np.empty(da)
    mult = np.empty(count)
    for _ in range(4 * count + 4):
        misfit = _configuration(sides, count, normal, v0, E, leak, v, mult)
        changed = False
        for p in range(count):
            if side_forced[p] != 0:
                continue
            n_size = math.sqrt(np.sum(normal[:, p] ** 2))
            u = 0.0
            for r in range(da):
                u += v[r] * normal[r, p]
            tol = STAY_TOL * size * n_size
            if (sides[p] == 1 and not u > -tol) or (sides[p] == 0 and not u < tol):
                sides[p] = 2
                changed = True
                break
            if sides[p] == 2 and misfit > STAY_TOL * size and (mult[p] <= leak or mult[p] >= 1.0):
                sides[p] = 1 if mult[p] >= 1.0 else 0
                changed = True
                break
        if not changed:
            if misfit > STAY_TOL * size:
                return status.NO_CONSISTENT
            for p in range(count):
                i = idx[p]
                out_mult[i] = mult[p]
                if sides[p] == 2:
                    out_stay[i] = True
                    out_side[i] = 0
                    out_kind[i] = EVENT_SLIDE_START if leak < mult[p] < 1.0 else EVENT_STICK
                else:
                    out_stay[i] = False
                    out_side[i] = 1 if sides[p] == 1 else -1
                    out_kind[i] = EVENT_CROSS
            return status.RUNNING
    return status.NO_CONSISTENT
