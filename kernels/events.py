"""What happens at a switching surface: the minimal-norm velocity of a neuron and the classification it implies.

At ``z_ij = 0`` the network output is continuous (``sigma(0) = 0`` whatever the slope), so the residual weights
``G`` are too, and the only discontinuity of the field is the slope ``s_ij`` of the neuron's own surfaces. The
velocity of neuron ``j`` on the surfaces ``I`` it sits on is affine in their slopes (docs/design.md, Solution concept):

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
next: a neuron may leave one hyperplane into a cell whose field drives it straight back onto another. With
``u = N^T v(s) = q + M s``, ``M = N^T N diag(c)``, ``c_k = -a_j G_k``, a **configuration** (each surface left
downwards, ``s_k = leak, u_k <= 0``; left upwards, ``s_k = 1, u_k >= 0``; or held, ``u_k = 0``) is a solution of
the box-constrained linear complementarity problem ``u(s)`` in the normal cone of ``[leak, 1]^k`` at ``s``: a box
variational inequality, which always has a solution (Hartman-Stampacchia). Its structure: the gradient of
``f(s) = |v(s)|^2 / 2`` is ``c_k u_k``, so on an **attracting** surface (``c_k < 0``) the conditions are those of
minimising ``f`` over ``s_k``, and on a **repelling** one (``c_k > 0``) of maximising it. For fixed repelling slopes
``s_R`` the attracting ones follow from a convex bounded least-squares problem with a unique ``v``; its value
``phi(s_R)`` is convex, with ``d phi / d s_k = c_k u_k``, and the solutions are exactly its maximisation KKT points
(each repelling surface: left at a bound its ``u_k`` does not point back from, or held with ``u_k = 0``). So the
search (:func:`solve_configuration`) only decides the repelling surfaces, each held, left down or left up, and
solves one least-squares problem per decision (:func:`_solve_node`); consistency is then a sign test on ``u``
(:func:`_violation`, with the ``tol`` above). Which continuation is taken:

* ``TIE_STAY`` (default): the consistent configuration of smallest ``|v|``, the minimal-norm element among the
  velocities the solution can continue with (the plain minimal-norm element whenever that is consistent; for
  one surface exactly the rule above). Up to ``MAX_ENUMERATED`` repelling surfaces all ``3^r`` decisions are
  compared; beyond, a depth-first branch and bound (a node's least-squares value bounds its subtree) of at most
  ``NODE_LIMIT`` nodes (:func:`_branch_and_bound`).
* ``TIE_LEAVE``: no repelling surface is held; among the ``2^r`` vertices of the repelling slopes the consistent
  one of largest ``|v|`` (steepest descent, ``dL/dt = -|v|^2``). The largest ``phi`` over the vertices is
  consistent (a convex function is maximised at a vertex, where its KKT conditions hold), so one always exists.
  All ``2^r`` vertices are compared up to ``MAX_ENUMERATED_LEAVE`` repelling surfaces (finding the largest is
  NP-hard in general: it contains MAX-CUT).
  Beyond, and as the last resort of ``TIE_STAY``, an ascent that switches
  the first inconsistent repelling surface to its other bound (each switch increases ``phi`` strictly, so it
  ends, at a consistent vertex: :func:`_ascent`).

A surface whose normal velocity vanishes to ``tol`` at a bound of its slope is held (``EVENT_STICK``): first
order does not decide it, and the driver's exit test on the Taylor series of the held multiplier releases it
(``forced``) as soon as the higher-order terms push the multiplier out of ``[leak, 1]``. A forced surface is left
to its side, the other surfaces being decided consistently with the forced slopes fixed; its own first-order sign
test is dropped when no configuration passes it (at the exit instant its normal velocity vanishes to first order,
so only the driver's resolution of that instant can make it fail, and the higher-order terms decide). Where nothing
is consistent to rounding even without the forcing (a neuron on hyperplanes with nearly parallel normals, whose
normal velocities are rounding: features of very different scales), the forced side is still taken, with the least
inconsistent decision of the other surfaces, so that the driver's release makes progress. A surface that the
consistent configurations met by the search treat differently is logged as ``EVENT_TIE``. With ``caratheodory``
the single-surface rule below applies to every surface.

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
                        EVENT_ZENO, LCP_DOWN, LCP_FREE, LCP_HOLD, LCP_UP, MAX_ENUMERATED, MAX_ENUMERATED_LEAVE,
                        NODE_LIMIT, SCREEN_COLUMNS, TIE_LEAVE, TIE_STAY)
from .tolerances import BOX_CONVERGED, BOX_GRADIENT, BOX_MARGIN, HOLD_SLACK, RCOND, STAY as STAY_TOL  # noqa: F401

# The thresholds (:mod:`.tolerances`): a normal velocity below ``STAY_TOL`` (relative) counts as zero; ``RCOND`` is
# the singular-value cut-off of the small least-squares solves (hyperplanes of duplicate or antipodal samples have
# exactly dependent normals, which LAPACK's default, machine epsilon, may not recognise); ``HOLD_SLACK`` is how far
# (in slope units) the exact multipliers of several held surfaces may lie outside ``[leak, 1]``: a normal velocity
# within ``STAY_TOL`` of zero on hyperplanes with nearly dependent normals can stand for a multiplier split far
# outside the box, and such a configuration is not held (:func:`_holds_exactly`).


@jit
def box_least_squares(E, v0, lo, hi, s):
    """Minimise ``|v0 + E s|^2`` over ``lo <= s <= hi`` (an active-set method, exact at termination; where the
    minimum is 0 or nearly so, once :func:`_refine` has passed the release test's rounding threshold).

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
    # a gradient component E_k^T r is zero to rounding below 1e-14 |e_k| (|v0| + sum |e_l| span): relative to its
    # own column, so that a column far shorter than the others (a sample whose residual weight is nearly 0) is
    # still decided by its own gradient
    column = np.empty(q)
    size = np.sqrt(np.sum(v0 * v0))
    for k in range(q):
        column[k] = np.sqrt(H[k, k])
        size += column[k] * max(abs(lo), abs(hi))
    tol = BOX_GRADIENT * size * column
    for k in range(q):
        s[k] = lo
    free = np.zeros(q, np.bool_)
    # a variable is released only at the minimum over the current free set (Lawson-Hanson): its gradient then
    # is orthogonal to every free column, so a released column is independent of them and the free set keeps full
    # column rank (dependent normals, as of duplicate or antipodal samples, would otherwise make it cycle)
    at_minimum = True
    for _ in range(20 * q + 20):
        grad = H @ s + g0
        if not np.any(free):
            at_minimum = True
        # variables at a bound whose gradient points into the box are released
        changed = False
        for k in range(q):
            if at_minimum and not free[k]:
                if (s[k] <= lo and grad[k] < -tol[k]) or (s[k] >= hi and grad[k] > tol[k]):
                    free[k] = True
                    changed = True
                    break
        if not np.any(free):
            _refine(E, v0, s, free, lo, hi)
            return status.RUNNING
        if _free_step(E, v0, s, free, lo, hi):
            at_minimum = False
            continue
        at_minimum = True
        if not changed:
            # subspace minimum reached with every bound variable satisfied
            grad = H @ s + g0
            done = True
            for k in range(q):
                if not free[k] and ((s[k] <= lo and grad[k] < -tol[k]) or (s[k] >= hi and grad[k] > tol[k])):
                    done = False
            if done:
                _refine(E, v0, s, free, lo, hi)
                return status.RUNNING
    # the active-set iteration can cycle on rank-deficient problems (many hyperplanes through a neuron at the
    # origin): fall back to cyclic coordinate descent, which converges for any convex quadratic, then polish the
    # free variables with one least-squares solve
    return _coordinate_descent(E, v0, H, g0, lo, hi, s)


@jit
def _free_step(E, v0, s, free, lo, hi):
    """One move of :func:`box_least_squares`: the step to the minimum over the free variables (:func:`_newton_step`),
    cut short where it first meets a bound; that variable is then bound. Returns whether a bound cut it short."""
    idx = np.flatnonzero(free)
    step = _newton_step(E, v0, s, idx)
    alpha = 1.0
    blocking = -1
    for a in range(len(idx)):
        k = idx[a]
        if step[a] > 0.0 and s[k] + step[a] > hi:
            r = (hi - s[k]) / step[a]
            if r < alpha:
                alpha, blocking = r, a
        elif step[a] < 0.0 and s[k] + step[a] < lo:
            r = (lo - s[k]) / step[a]
            if r < alpha:
                alpha, blocking = r, a
    for a in range(len(idx)):
        k = idx[a]
        s[k] = min(hi, max(lo, s[k] + alpha * step[a]))
    if blocking < 0:
        return False
    k = idx[blocking]
    s[k] = hi if step[blocking] > 0.0 else lo
    free[k] = False
    return True


@jit
def _refine(E, v0, s, free, lo, hi):
    """The active set's end, made exact where its release test is blind. A bound variable is released only when
    its gradient points into the box by more than rounding (``BOX_GRADIENT``), but where the minimum is 0 or nearly
    so (a velocity in the Filippov set, measured by the inclusion residual) a gradient below that test can hide a
    residual of order ``sqrt(BOX_GRADIENT)``: ``f(s) - f_min <= sum_k g_k (s_k - s*_k)`` allows it. So while that
    bound on the gap exceeds ``BOX_GRADIENT f(s)``, the bound variable with the largest inward gradient (any size)
    is released, the free variables move to their minimum (:func:`_free_step`), and the result is kept only if the
    residual decreased (which also ends the loop on rounding noise); at most ``q + 1`` times."""
    p, q = E.shape
    r = np.empty(p)
    for _ in range(q + 1):
        f = box_residual(E, v0, s, r)
        gap = 0.0
        best = -1
        largest = 0.0
        for k in range(q):
            if free[k]:
                continue
            grad = 0.0
            for i in range(p):
                grad += E[i, k] * r[i]
            inward = -grad if s[k] <= lo else (grad if s[k] >= hi else 0.0)
            if inward > 0.0:
                gap += inward * (hi - lo)
                if inward > largest:
                    largest, best = inward, k
        if best < 0 or gap <= BOX_GRADIENT * f:
            return
        trial = s.copy()
        trial_free = free.copy()
        trial_free[best] = True
        for _ in range(q + 1):
            if not (np.any(trial_free) and _free_step(E, v0, trial, trial_free, lo, hi)):
                break
        if not box_residual(E, v0, trial, r) < f:
            return
        s[:] = trial
        free[:] = trial_free


@jit
def box_residual(E, v0, s, r):
    """``r = v0 + E s`` and ``|r|^2`` for a box least-squares problem, in plain loops (``E`` is small: a BLAS call
    per problem would cost more than the sums, and :func:`box_least_squares` runs once per classification)."""
    p, q = E.shape
    f = 0.0
    for i in range(p):
        acc = v0[i]
        for k in range(q):
            acc += E[i, k] * s[k]
        r[i] = acc
        f += acc * acc
    return f


@jit
def _coordinate_descent(E, v0, H, g0, lo, hi, s):
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
        if change <= BOX_CONVERGED * (hi - lo):
            break
    margin = BOX_MARGIN * (hi - lo)
    idx = np.flatnonzero((s > lo + margin) & (s < hi - margin))
    if len(idx) == 0:
        return status.RUNNING
    polished = s[idx] + _newton_step(E, v0, s, idx)
    if np.all((polished >= lo) & (polished <= hi)):
        s[idx] = polished
    return status.RUNNING


@jit
def _newton_step(E, v0, s, idx):
    """Minimum-norm ``d`` minimising ``|v0 + E s + E[:, idx] d|``: the step to the minimum over the free variables
    ``idx``, solved on the columns themselves (the normal equations would square their condition number and, with
    the ``RCOND`` cut-off, drop a column far shorter than the others)."""
    p = E.shape[0]
    nf = len(idx)
    Ef = np.empty((p, nf))
    r = v0 + E @ s
    for a in range(nf):
        for q in range(p):
            Ef[q, a] = E[q, idx[a]]
    return np.linalg.lstsq(Ef, -r, RCOND)[0]


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
        ``status.RUNNING``, or ``NO_CARATHEODORY`` (never ``NO_CONSISTENT``: a consistent configuration always
        exists and :func:`solve_configuration` finds one). Any number of surfaces is handled.
    """
    n, da = Xa.shape
    d = da - 1
    a_j = P[j, da]
    idx = np.flatnonzero(surface[:, j])
    count = len(idx)
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
    if count >= 2 and not caratheodory:
        return _consistent_configuration(idx, normal, v0, E, leak, v0_size + e_size, tie_policy, side_forced,
                                         out_side, out_stay, out_kind, out_mult)
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
def _surface_scales(normal, E, size, jump, tol):
    """``jump[p] = <e_p, n_p>`` (its sign says attracting / repelling) and ``tol[p] = STAY_TOL size |n_p|``."""
    da, count = normal.shape
    for p in range(count):
        jump[p] = 0.0
        norm = 0.0
        for r in range(da):
            jump[p] += E[r, p] * normal[r, p]
            norm += normal[r, p] ** 2
        tol[p] = STAY_TOL * size * math.sqrt(norm)


@jit
def _solve_node(normal, v0, E, leak, assign, s, v, u):
    """The least-squares problem of one node of the configuration search.

    Minimises ``|v0 + E s|^2`` with ``s_p`` fixed at ``leak`` (``assign[p] == LCP_DOWN``) or 1 (``LCP_UP``) and
    ``s_p`` in ``[leak, 1]`` otherwise (:func:`box_least_squares`). Fills ``s``, the velocity ``v = v0 + E s``
    (unique even where ``s`` is not) and the normal velocities ``u = N^T v``; returns ``|v|^2``.
    """
    da, count = normal.shape
    base = v0.copy()
    nfree = 0
    for p in range(count):
        if assign[p] == LCP_DOWN or assign[p] == LCP_UP:
            s[p] = leak if assign[p] == LCP_DOWN else 1.0
            for r in range(da):
                base[r] += s[p] * E[r, p]
        else:
            nfree += 1
    if nfree > 0:
        Ef = np.empty((da, nfree))
        q = 0
        for p in range(count):
            if assign[p] != LCP_DOWN and assign[p] != LCP_UP:
                for r in range(da):
                    Ef[r, q] = E[r, p]
                q += 1
        sf = np.empty(nfree)
        box_least_squares(Ef, base, leak, 1.0, sf)
        q = 0
        for p in range(count):
            if assign[p] != LCP_DOWN and assign[p] != LCP_UP:
                s[p] = sf[q]
                q += 1
    for r in range(da):
        v[r] = v0[r]
    for p in range(count):
        for r in range(da):
            v[r] += s[p] * E[r, p]
    value = 0.0
    for r in range(da):
        value += v[r] * v[r]
    for p in range(count):
        acc = 0.0
        for r in range(da):
            acc += v[r] * normal[r, p]
        u[p] = acc
    return value


@jit
def _violation(assign, s, u, jump, tol, leak):
    """How far a node's solution is from a consistent configuration, and the surface to branch on.

    Returns ``(violation, branch)``: the largest ``excess / tol_p`` over the surfaces (0 when consistent) and the
    first undecided repelling surface with ``|u_p| > tol_p`` (or, when only other surfaces are violated, the first
    undecided repelling one; -1 when none is undecided). Consistency: ``u_p <= tol_p`` on a surface left downwards
    (``s_p = leak``), ``u_p >= -tol_p`` on one left upwards (``s_p = 1``), ``|u_p| <= tol_p`` on a held repelling
    one; an undecided repelling surface is consistent only where its normal velocity vanishes (the minimiser of
    ``|v|`` over its slope is then also stationary for the other sides); attracting surfaces satisfy their
    conditions by the optimality of the least-squares solution (checked, not assumed).
    """
    count = len(assign)
    worst = 0.0
    branch = -1
    first_free = -1
    for p in range(count):
        a = assign[p]
        t = tol[p]
        if a == LCP_DOWN:
            excess = u[p] - t
        elif a == LCP_UP:
            excess = -u[p] - t
        elif a == LCP_HOLD:
            excess = abs(u[p]) - t
        elif jump[p] > 0.0:
            excess = abs(u[p]) - t
            if first_free < 0:
                first_free = p
            if excess > 0.0 and branch < 0:
                branch = p
        elif jump[p] < 0.0:
            if s[p] <= leak:
                excess = u[p] - t
            elif s[p] >= 1.0:
                excess = -u[p] - t
            else:
                excess = abs(u[p]) - t
        else:
            excess = 0.0
        if excess > 0.0:
            worst = max(worst, excess / t if t > 0.0 else math.inf)
    if worst > 0.0 and branch < 0:
        branch = first_free
    return worst, branch


@jit
def without_column(N, p):
    """A copy of ``N`` (``da, q``) without its column ``p``: shape ``(da, q - 1)``."""
    da, q = N.shape
    others = np.empty((da, q - 1))
    col = 0
    for r in range(q):
        if r != p:
            others[:, col] = N[:, r]
            col += 1
    return others


@jit
def dependent_columns(N, out):
    """``out[p]``: whether column ``p`` of ``N`` lies in the span of the others (to ``STAY_TOL``, relative).

    Hyperplanes of duplicate samples, and without bias of antipodal or collinear ones, have exactly dependent
    normals: the split of their multipliers is not unique (the driver re-classifies such neurons every step).
    Above ``SCREEN_COLUMNS`` columns (a neuron at the origin sits on every sample's hyperplane) the columns are
    screened first (:func:`_screen_dependent`); every column the screen leaves open gets the direct test."""
    da, q = N.shape
    if q > SCREEN_COLUMNS:
        _screen_dependent(N, out)
    else:
        out[:] = False
    for p in range(q):
        if not out[p] and q >= 2:
            out[p] = _in_span_of_others(N, p)


@jit
def _in_span_of_others(N, p):
    """Whether column ``p`` of ``N`` lies in the span of the other columns (least squares, ``RCOND`` cut-off), to
    ``STAY_TOL`` relative to its own length."""
    others = without_column(N, p)
    coef = np.linalg.lstsq(others, N[:, p].copy(), RCOND)[0]
    residual = N[:, p] - others @ coef
    return np.sqrt(np.sum(residual**2)) <= STAY_TOL * np.sqrt(np.sum(N[:, p] ** 2))


@jit
def _residual_norm(Q, k, x):
    """``|x - Q_k Q_k^T x|`` for the first ``k`` orthonormal columns ``Q_k`` of ``Q`` (projected out twice:
    Gram-Schmidt with reorthogonalisation); ``x`` is overwritten with the residual."""
    da = x.shape[0]
    for _ in range(2):
        for c in range(k):
            coef = 0.0
            for r in range(da):
                coef += Q[r, c] * x[r]
            for r in range(da):
                x[r] -= coef * Q[r, c]
    return np.sqrt(np.sum(x * x))


@jit
def _greedy_basis(N, take, Q, members):
    """Scan the columns ``p`` with ``take[p]`` in order; one whose residual against the basis built so far exceeds
    ``STAY_TOL`` of its length joins it. Fills ``Q[:, :k]`` (orthonormal) and ``members[:k]``, returns ``k``, and
    sets ``take[p] = False`` for every scanned column that did not join (it lies in the span of earlier members)."""
    da, q = N.shape
    k = 0
    for p in range(q):
        if not take[p]:
            continue
        if k == da:
            take[p] = False
            continue
        x = N[:, p].copy()
        size = np.sqrt(np.sum(x * x))
        rn = _residual_norm(Q, k, x)
        if rn > STAY_TOL * size:
            Q[:, k] = x / rn
            members[k] = p
            k += 1
        else:
            take[p] = False
    return k


@jit
def _screen_dependent(N, out):
    """Columns of ``N`` shown to lie in the span of the others by two greedy bases; ``out[p]`` is set for them.

    A first basis ``B1`` of all columns: a column that does not join it lies, to ``STAY_TOL``, in the span of
    earlier members, which are other columns. A member ``p`` of ``B1`` is tested against a basis of the columns
    outside ``B1`` together with the other members (at most ``2 (d + 1)`` columns). A residual against a subset of
    the other columns bounds the one against all of them, so every column marked here passes the direct test
    (:func:`_in_span_of_others`) too; the others, at most ``d + 1`` members of ``B1``, are left to it. For a neuron
    on ``q`` hyperplanes of ``(d + 1)``-dimensional normals the screen costs ``O(q d^2)``, and at most ``d + 1``
    least-squares solves of size ``q`` remain, instead of ``q`` of them."""
    da, q = N.shape
    Q = np.empty((da, da))
    first = np.empty(da, np.int64)
    rest = np.ones(q, np.bool_)
    k1 = _greedy_basis(N, rest, Q, first)
    for p in range(q):
        out[p] = not rest[p]
    # ``rest`` now marks B1's members; next, a basis B2 of the columns outside B1
    outside = np.ones(q, np.bool_)
    for a in range(k1):
        outside[first[a]] = False
    second = np.empty(da, np.int64)
    k2 = _greedy_basis(N, outside, Q, second)
    take = np.zeros(q, np.bool_)
    members = np.empty(da, np.int64)
    for a in range(k1):
        p = first[a]
        take[:] = False
        for b in range(k2):
            take[second[b]] = True
        for b in range(k1):
            if b != a:
                take[first[b]] = True
        k = _greedy_basis(N, take, Q, members)
        x = N[:, p].copy()
        size = np.sqrt(np.sum(x * x))
        out[p] = _residual_norm(Q, k, x) <= STAY_TOL * size


@jit
def _holds_exactly(normal, v0, E, leak, assign, s, u, tol):
    """Whether the surfaces a node's solution holds (normal velocity zero to ``tol``) can be held exactly.

    Holding the surfaces ``H`` means ``u_H = 0`` exactly: the multipliers solving it (the driver's, from the
    projection onto the held normals) must lie in ``[leak, 1]``, to ``HOLD_SLACK``. With independent, well separated
    normals they equal the least-squares slopes ``s_H`` up to rounding; with nearly dependent normals a residual
    ``|u_H| <= tol`` can stand for multipliers far outside the box (two hyperplanes 1e-8 apart: multipliers of
    order 1e9), which is no solution of the inclusion: the state cannot stay on both. Exactly dependent normals
    (no unique split) and surfaces with ``e_p = 0`` (any slope does) are left to the search's test.
    """
    da, count = normal.shape
    held = np.empty(count, np.int64)
    nh = 0
    for p in range(count):
        if _treatment(assign, s, u, tol, leak, p) == 2:
            held[nh] = p
            nh += 1
    if nh < 2:
        return True
    Nh = np.empty((da, nh))
    base = v0.copy()
    is_held = np.zeros(count, np.bool_)
    for a in range(nh):
        is_held[held[a]] = True
        Nh[:, a] = normal[:, held[a]]
    dep = np.empty(nh, np.bool_)
    dependent_columns(Nh, dep)
    if np.any(dep):
        return True
    for p in range(count):
        if not is_held[p]:
            for r in range(da):
                base[r] += s[p] * E[r, p]
    # v = base - N_H alpha with N_H^T v = 0; the slope of surface p is alpha_p / (-c_p), e_p = c_p n_p
    alpha = np.linalg.lstsq(Nh, base, RCOND)[0]
    for a in range(nh):
        p = held[a]
        nn = 0.0
        en = 0.0
        for r in range(da):
            nn += normal[r, p] * normal[r, p]
            en += E[r, p] * normal[r, p]
        if en == 0.0:
            continue
        slope = -alpha[a] * nn / en
        if slope < leak - HOLD_SLACK or slope > 1.0 + HOLD_SLACK:
            return False
    return True


@jit
def _treatment(assign, s, u, tol, leak, p):
    """What surface ``p`` does in a node's solution: 0 left downwards, 1 left upwards, 2 held."""
    if assign[p] == LCP_DOWN:
        return 0 if u[p] < -tol[p] else 2
    if assign[p] == LCP_UP:
        return 1 if u[p] > tol[p] else 2
    if u[p] > tol[p]:
        return 1
    if u[p] < -tol[p]:
        return 0
    return 2


@jit
def _enumerate_configurations(normal, v0, E, leak, jump, tol, tie_policy, start, rep, best_assign, seen):
    """Every decision of the undecided repelling surfaces ``rep`` (held or left down/up; with ``TIE_LEAVE`` left
    down/up only), each completed by the least-squares problem of the others: the consistent one of smallest
    ``|v|`` (largest with ``TIE_LEAVE``) into ``best_assign``. ``seen[p]`` collects, as bits, how the consistent
    ones treat each surface. Returns ``(found, violation)``: when nothing is consistent (rounding only) the least
    inconsistent decision is returned."""
    da, count = normal.shape
    nr = len(rep)
    base = 2 if tie_policy == TIE_LEAVE else 3
    total = 1
    for _ in range(nr):
        total *= base
    assign = start.copy()
    s = np.empty(count)
    v = np.empty(da)
    u = np.empty(count)
    found = False
    best = 0.0
    least = math.inf
    for code in range(total):
        c = code
        for a in range(nr):
            digit = c % base
            c //= base
            if base == 2:
                assign[rep[a]] = LCP_DOWN if digit == 0 else LCP_UP
            else:
                assign[rep[a]] = LCP_HOLD if digit == 0 else (LCP_DOWN if digit == 1 else LCP_UP)
        value = _solve_node(normal, v0, E, leak, assign, s, v, u)
        viol, _ = _violation(assign, s, u, jump, tol, leak)
        if viol == 0.0 and _holds_exactly(normal, v0, E, leak, assign, s, u, tol):
            for p in range(count):
                seen[p] |= 1 << _treatment(assign, s, u, tol, leak, p)
            better = value > best if tie_policy == TIE_LEAVE else (not found or value < best)
            if better:
                best = value
                found = True
                best_assign[:] = assign
        elif not found and viol < least:
            least = viol
            best_assign[:] = assign
    return found


@jit
def _branch_and_bound(normal, v0, E, leak, jump, tol, start, best_assign, seen):
    """The consistent decision of smallest ``|v|`` by branch and bound over the undecided repelling surfaces.

    A node fixes some repelling surfaces (left down, left up, or held); its least-squares problem keeps the
    others in the box, so its value bounds every decision below it. A node whose solution is consistent is a
    candidate; otherwise the first undecided repelling surface whose normal velocity does not vanish is decided
    three ways. Depth first, at most ``NODE_LIMIT`` nodes (the best consistent decision met is returned when the
    limit ends the search). Returns whether a consistent decision was found.
    """
    da, count = normal.shape
    # each node popped pushes at most three: the stack never holds more than 2 NODE_LIMIT + 1 nodes
    stack = np.empty((min(3 * count + 3, 2 * NODE_LIMIT + 3), count), np.int64)
    stack[0] = start
    top = 1
    s = np.empty(count)
    v = np.empty(da)
    u = np.empty(count)
    found = False
    best = 0.0
    nodes = 0
    while top > 0 and nodes < NODE_LIMIT:
        top -= 1
        assign = stack[top].copy()
        value = _solve_node(normal, v0, E, leak, assign, s, v, u)
        nodes += 1
        if found and value >= best:
            continue
        viol, branch = _violation(assign, s, u, jump, tol, leak)
        if viol == 0.0 and not _holds_exactly(normal, v0, E, leak, assign, s, u, tol):
            # held to tolerance but not exactly: decide the first repelling surface it holds
            for p in range(count):
                if jump[p] > 0.0 and (assign[p] == LCP_FREE or assign[p] == LCP_HOLD) and \
                        _treatment(assign, s, u, tol, leak, p) == 2:
                    branch = p
                    break
            viol = math.inf
            if branch >= 0 and assign[branch] == LCP_HOLD:
                for choice in (LCP_DOWN, LCP_UP):
                    stack[top] = assign
                    stack[top, branch] = choice
                    top += 1
                continue
        if viol == 0.0:
            best = value
            found = True
            best_assign[:] = assign
            for p in range(count):
                seen[p] |= 1 << _treatment(assign, s, u, tol, leak, p)
            continue
        if branch < 0:
            continue
        # depth first, the other bound first (the side the normal velocity points to), then held, then the bound
        # the least-squares solution sits on
        other = LCP_UP if s[branch] <= leak else LCP_DOWN
        for choice in (LCP_UP + LCP_DOWN - other, LCP_HOLD, other):
            stack[top] = assign
            stack[top, branch] = choice
            top += 1
    return found


@jit
def _ascent(normal, v0, E, leak, jump, tol, rep, assign):
    """A consistent decision with every undecided repelling surface left (a vertex of their slopes).

    ``phi(s_R) = min over the other slopes of |v|^2 / 2`` is convex in the repelling slopes ``s_R`` and
    ``d phi / d s_p = c_p u_p`` with ``c_p > 0``; a vertex is consistent exactly where no ``u_p`` points back
    into the box, and switching such a surface to its other bound strictly increases ``phi``. So the ascent
    (switch the first inconsistent surface, repeat) visits each vertex at most once and ends at a consistent
    one: a local maximiser of ``|v|`` (in exact arithmetic, always). Starts from ``assign`` (the sides of the
    minimal-norm velocity); returns whether it ended consistent.
    """
    da, count = normal.shape
    s = np.empty(count)
    v = np.empty(da)
    u = np.empty(count)
    for _ in range(64 * count + 64):
        _solve_node(normal, v0, E, leak, assign, s, v, u)
        flip = -1
        for a in range(len(rep)):
            p = rep[a]
            if (assign[p] == LCP_DOWN and u[p] > tol[p]) or (assign[p] == LCP_UP and u[p] < -tol[p]):
                flip = p
                break
        if flip < 0:
            viol, _ = _violation(assign, s, u, jump, tol, leak)
            return viol == 0.0
        assign[flip] = LCP_UP if assign[flip] == LCP_DOWN else LCP_DOWN
    return False


@jit
def solve_configuration(normal, v0, E, leak, size, tie_policy, side_forced, assign, seen):
    """Exact solution of the box-constrained linear complementarity problem of one neuron on several surfaces.

    Find slopes ``s`` in ``[leak, 1]^k`` with, for ``u = N^T (v0 + E s)``: ``u_p <= 0`` where ``s_p = leak``,
    ``u_p >= 0`` where ``s_p = 1``, ``u_p = 0`` where ``s_p`` is interior (each surface left down, left up, or
    held). Solutions always exist (a box variational inequality); see the module docstring for the structure
    used and for which one is chosen. Surfaces with ``side_forced[p] != 0`` are left to that side: with the
    other surfaces consistent (the problem with the forced slopes fixed is again a box LCP, so this exists in
    exact arithmetic), their own sign test first enforced and then left to the driver's exit test.

    Parameters
    ----------
    normal, E : ndarray, shape (d + 1, k)
    v0 : ndarray, shape (d + 1,)
    leak, size : float
        ``size = |v0| + sum_p |e_p|`` scales the zero test of normal velocities.
    tie_policy : int
    side_forced : ndarray of int8, shape (k,)
    assign : ndarray of int64, shape (k,)
        Output: ``LCP_FREE`` (attracting or neutral surface: slope from the least-squares problem), ``LCP_DOWN``
        / ``LCP_UP`` (slope fixed at ``leak`` / 1) or ``LCP_HOLD`` (repelling surface held) per surface; rerun
        :func:`_solve_node` with it for the slopes and velocities.
    seen : ndarray of int64, shape (k,)
        Output: bit ``t`` set where a consistent configuration met by the search treats the surface as ``t``
        (0 down, 1 up, 2 held).

    Returns
    -------
    int
        0: consistent; 1: consistent but for the forced surfaces, whose side the higher-order terms decide (their
        normal velocity vanishes to first order at the exit of the multiplier, up to the driver's resolution of
        that instant); 2: consistent after dropping the forcing; 3: nothing consistent to rounding (the least
        inconsistent decision is returned, with the forced sides fixed where there are any; it does not happen in
        exact arithmetic).
    """
    da, count = normal.shape
    jump = np.empty(count)
    tol = np.empty(count)
    _surface_scales(normal, E, size, jump, tol)
    start = np.empty(count, np.int64)
    forcing = False
    for p in range(count):
        forcing |= side_forced[p] != 0
    limits = np.empty(count)
    forced_assign = np.empty(count, np.int64)
    for attempt in range(3 if forcing else 1):
        nr = 0
        for p in range(count):
            seen[p] = 0
            start[p] = LCP_FREE
            limits[p] = tol[p]
            if attempt < 2 and side_forced[p] != 0:
                start[p] = LCP_UP if side_forced[p] > 0 else LCP_DOWN
                if attempt == 1:
                    # the driver's exit test (higher-order terms of the multiplier) decides the forced side
                    limits[p] = math.inf
            elif jump[p] > 0.0:
                nr += 1
        rep = np.empty(nr, np.int64)
        q = 0
        for p in range(count):
            if start[p] == LCP_FREE and jump[p] > 0.0:
                rep[q] = p
                q += 1
        if nr <= (MAX_ENUMERATED_LEAVE if tie_policy == TIE_LEAVE else MAX_ENUMERATED):
            found = _enumerate_configurations(normal, v0, E, leak, jump, limits, tie_policy, start, rep, assign,
                                              seen)
        else:
            found = False
            if tie_policy == TIE_STAY:
                found = _branch_and_bound(normal, v0, E, leak, jump, limits, start, assign, seen)
            if not found:
                s = np.empty(count)
                v = np.empty(da)
                u = np.empty(count)
                _solve_node(normal, v0, E, leak, start, s, v, u)
                assign[:] = start
                for a in range(nr):
                    assign[rep[a]] = LCP_UP if u[rep[a]] > 0.0 else LCP_DOWN
                found = _ascent(normal, v0, E, leak, jump, limits, rep, assign)
        if found:
            return attempt
        if attempt == 1:
            forced_assign[:] = assign
    if forcing:
        # nothing consistent to rounding, forced or not: the forced sides are still taken, with the least
        # inconsistent decision of the other surfaces (re-holding them would be released again at once)
        assign[:] = forced_assign
    return 3


@jit
def _consistent_configuration(idx, normal, v0, E, leak, size, tie_policy, side_forced, out_side, out_stay,
                              out_kind, out_mult):
    """Several surfaces at once: solve the configuration problem (:func:`solve_configuration`) and report it."""
    da, count = normal.shape
    assign = np.empty(count, np.int64)
    seen = np.zeros(count, np.int64)
    outcome = solve_configuration(normal, v0, E, leak, size, tie_policy, side_forced, assign, seen)
    jump = np.empty(count)
    tol = np.empty(count)
    _surface_scales(normal, E, size, jump, tol)
    s = np.empty(count)
    v = np.empty(da)
    u = np.empty(count)
    _solve_node(normal, v0, E, leak, assign, s, v, u)
    for p in range(count):
        i = idx[p]
        # a surface that consistent configurations treat differently is a branch point: log it as a tie
        branched = seen[p] & (seen[p] - 1) != 0
        treatment = _treatment(assign, s, u, tol, leak, p)
        if outcome != 2 and side_forced[p] != 0:
            out_stay[i] = False
            out_side[i] = side_forced[p]
            out_kind[i] = EVENT_SLIDE_END
            out_mult[i] = s[p]
        elif treatment == 2:
            out_stay[i] = True
            out_side[i] = 0
            out_mult[i] = s[p]
            interior = leak < s[p] < 1.0
            if branched or (interior and jump[p] > 0.0):
                out_kind[i] = EVENT_TIE
            elif interior and jump[p] < 0.0:
                out_kind[i] = EVENT_SLIDE_START
            else:
                out_kind[i] = EVENT_STICK
        else:
            out_stay[i] = False
            out_side[i] = 1 if treatment == 1 else -1
            out_mult[i] = 1.0 if treatment == 1 else leak
            out_kind[i] = EVENT_TIE if branched else EVENT_CROSS
    return status.RUNNING
