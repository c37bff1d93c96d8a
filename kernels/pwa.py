"""Piecewise-affine systems ``x' = A_sigma x + c_sigma`` on sign patterns of linear switching functions.

``x' = A0 x + c0 + sum_k sigma_k (A_k x + c_k)`` with ``sigma_k = sign(g_k(x))``, ``g_k(x) = <n_k, x> + beta_k``,
and on a surface ``sigma_k in [-1, 1]`` (the field is affine in each sign, so this is Utkin's equivalent control;
on one surface it is Filippov's convex combination). The same machinery as the network engine: Taylor steps (exact
for affine fields), earliest roots of the switching polynomials and of the equivalent controls' exit polynomials
``sigma_k = +-1``, and at each event a consistent configuration of the surfaces met (each left upwards, left
downwards or held with the equivalent control; smallest ``|x'|`` among the consistent ones, as for the network).

Ties: a held surface whose equivalent control is interior and whose one-sided fields both point away from it
(``<n_k, A_k x + c_k> > 0``: the normal velocity grows with ``sigma_k``) is *repelling*; so is, more generally, a
surface that consistent configurations treat differently (the solution branches). Such surfaces log a ``tie``.
With ``TIE_STAY`` the configuration holding the most repelling surfaces is taken (then the smallest ``|x'|``): the
state stays on a repelling surface with its equivalent control, the regular solution. With ``TIE_LEAVE``
configurations holding a repelling surface are skipped and the largest ``|x'|`` is taken (the faster side; equal
speeds go to the first side enumerated, ``sigma_k = -1``).

Zeno: each event instant is recorded (time, ``(surface, side)`` key, state) by the shared detector of
:mod:`.zeno`, which recognises cycles of up to :data:`~.zeno.ZENO_MAX_CYCLE` instants whose times and states
contract and extrapolates the accumulation time. Then a ``zeno`` event is logged (control: the time ratio per
cycle; error: the estimate; cycle: ``p``), the state jumps to the limit (Aitken's extrapolation of the states one
cycle apart), the surfaces it sits on (to a small fraction of the last cycle's amplitude) are snapped onto and
classified afresh, and the integration continues from there.
"""

import math
from typing import NamedTuple

import numpy as np

from . import status
from ._jit import jit
from .constants import (EVENT_CROSS, EVENT_SLIDE_END, EVENT_SLIDE_START, EVENT_STICK, EVENT_TIE, EVENT_ZENO,
                        TIE_LEAVE)
from .roots import STACK, earliest_root, excluded
from .stepping import budget_spent, taylor_step
from .tolerances import ON_SURFACE as _ON_SURFACE, RCOND, SIMULTANEOUS, STAY as STAY_TOL, ZENO_SNAP
from .zeno import ZENO_MAX_CYCLE, ZENO_MEMORY, ZenoMemory, ring_index, zeno_check, zeno_record  # noqa: F401

#: a step never lets a Taylor term ``|x^[p]| h^p`` exceed this times ``max(1, |x|)``, nor ``1e307`` (a polynomial
#: solution has ``h = inf`` from the step-size rule; its root searches scale the coefficients by ``h^p``)
_HUGE = 1e300
_LARGEST_TERM = 1e307


@jit
def polynomial_step_cap(X, order, scale):
    """Largest step ``h`` with ``max |X[p]| h^p <= min(1e300 max(1, scale), 1e307)`` for every order ``p >= 1``
    (``scale = max |x|``): ``inf`` for a constant solution. Binds only on very long steps of a polynomial solution
    (the step-size rule gives ``inf`` there), which would otherwise overflow into NaN."""
    limit = min(_HUGE * max(1.0, scale), _LARGEST_TERM)
    cap = math.inf
    for p in range(1, order + 1):
        size = np.max(np.abs(X[p]))
        if size > 0.0:
            cap = min(cap, (limit / size) ** (1.0 / p))
    return cap


@jit
def _field_parts(A0, c0, A, c, sigma, held, x, f_free, Y):
    """``f_free = A0 x + c0 + sum_{k free} sigma_k (A_k x + c_k)`` and ``Y[k] = A_k x + c_k`` for every k."""
    n_state = len(x)
    for r in range(n_state):
        acc = c0[r]
        for q in range(n_state):
            acc += A0[r, q] * x[q]
        f_free[r] = acc
    for k in range(A.shape[0]):
        for r in range(n_state):
            acc = c[k, r]
            for q in range(n_state):
                acc += A[k, r, q] * x[q]
            Y[k, r] = acc
            if not held[k]:
                f_free[r] += sigma[k] * acc


@jit
def _equivalent_control(normals, f_free, Y, held_idx, out_sigma):
    """Least-squares equivalent control on the held surfaces; returns the residual of ``<n_k, x'> = 0``."""
    q = len(held_idx)
    if q == 0:
        return 0.0
    M = np.empty((q, q))
    rhs = np.empty(q)
    for a in range(q):
        ka = held_idx[a]
        rhs[a] = -np.dot(normals[ka], f_free)
        for b in range(q):
            M[a, b] = np.dot(normals[ka], Y[held_idx[b]])
    sol = np.linalg.lstsq(M, rhs, RCOND)[0]
    for a in range(q):
        out_sigma[a] = sol[a]
    return math.sqrt(np.sum((M @ sol - rhs) ** 2))


@jit
def _normal_velocity_scales(normals, f_free, Y, out):
    """``out[k] = sum_r |n_k[r]| (|f_free[r]| + sum_l |Y[l, r]|)``: the size of the terms of surface ``k``'s normal
    velocity ``<n_k, x'>``, the yardstick of every decision on that surface. (A size of the whole field would let a
    large component elsewhere swamp a small but genuine normal velocity: ``x1' = 1e10`` beside ``x2' = -3``.)"""
    magnitude = np.abs(f_free)
    for q in range(Y.shape[0]):
        for r in range(f_free.shape[0]):
            magnitude[r] += abs(Y[q, r])
    for k in range(normals.shape[0]):
        acc = 0.0
        for r in range(f_free.shape[0]):
            acc += abs(normals[k, r]) * magnitude[r]
        out[k] = acc


@jit
def _repelling(normals, Y, scale, k, control):
    """Whether held surface ``k`` with equivalent control ``control`` is repelling: the control is interior and the
    normal velocity grows with ``sigma_k`` (both one-sided fields point away from the surface) by more than
    ``STAY_TOL`` of the surface's ``scale`` (:func:`_normal_velocity_scales`)."""
    return -1.0 < control < 1.0 and np.dot(normals[k], Y[k]) > STAY_TOL * scale


@jit
def classify(A0, c0, A, c, normals, x, sigma, held, surface, releasing, forced, tie_policy, out_sigma, out_held,
             out_kind):
    """Consistent configuration of the surfaces in ``surface`` at ``x`` (3^k enumeration; see the module doc for
    the choice among several and for ties).

    ``forced[k] = +-1`` imposes the side of a held surface whose equivalent control left ``[-1, 1]``;
    ``tie_policy`` is ``TIE_STAY`` or ``TIE_LEAVE``. Writes the new signs, held flags and the kind each surface
    logs if its mode changes (``EVENT_TIE`` for a repelling surface held, or a surface that consistent
    configurations treat differently). Returns a status code.
    """
    K = A.shape[0]
    n_state = len(x)
    idx = np.flatnonzero(surface)
    count = len(idx)
    if count > 8:
        return status.TOO_MANY_SURFACES
    total = 1
    for _ in range(count):
        total *= 3
    trial_sigma = sigma.copy()
    trial_held = held.copy()
    f_free = np.empty(n_state)
    Y = np.empty((K, n_state))
    eq = np.empty(count)
    best = math.inf
    best_repelling = -1
    found = False
    seen = np.zeros(count, np.int64)
    v = np.empty(n_state)
    _field_parts(A0, c0, A, c, sigma, held, x, f_free, Y)
    scale = np.empty(K)
    _normal_velocity_scales(normals, f_free, Y, scale)
    for code in range(total):
        digits = code
        ok = True
        for p in range(count):
            k = idx[p]
            choice = digits % 3
            digits //= 3
            trial_held[k] = choice == 2
            if choice != 2:
                trial_sigma[k] = 1.0 if choice == 1 else -1.0
            if forced[k] != 0 and (choice == 2 or trial_sigma[k] != forced[k]):
                ok = False
        if not ok:
            continue
        _field_parts(A0, c0, A, c, trial_sigma, trial_held, x, f_free, Y)
        held_idx = np.flatnonzero(trial_held)
        nh = len(held_idx)
        residual = _equivalent_control(normals, f_free, Y, held_idx, eq)
        held_scale = 0.0
        for a in range(nh):
            held_scale += scale[held_idx[a]] ** 2
        if residual > STAY_TOL * math.sqrt(held_scale):
            continue
        for r in range(n_state):
            v[r] = f_free[r]
        repelling = 0
        for a in range(nh):
            if not (-1.0 - STAY_TOL <= eq[a] <= 1.0 + STAY_TOL):
                ok = False
            if _repelling(normals, Y, scale[held_idx[a]], held_idx[a], eq[a]):
                repelling += 1
            for r in range(n_state):
                v[r] += eq[a] * Y[held_idx[a], r]
        if not ok:
            continue
        for p in range(count):
            k = idx[p]
            if trial_held[k]:
                continue
            u = np.dot(normals[k], v)
            tol = -STAY_TOL * scale[k] if releasing else STAY_TOL * scale[k]
            if (trial_sigma[k] > 0.0 and not u > tol) or (trial_sigma[k] < 0.0 and not u < -tol):
                ok = False
        if not ok:
            continue
        for p in range(count):
            k = idx[p]
            seen[p] |= 4 if trial_held[k] else (2 if trial_sigma[k] > 0.0 else 1)
        if tie_policy == TIE_LEAVE and repelling > 0:
            continue
        norm = np.sum(v * v)
        if tie_policy == TIE_LEAVE:
            better = norm > best or not found
        else:
            better = repelling > best_repelling or (repelling == best_repelling and norm < best)
        if better:
            best = norm
            best_repelling = repelling
            found = True
            for p in range(count):
                k = idx[p]
                out_held[k] = trial_held[k]
                out_sigma[k] = trial_sigma[k]
                out_kind[k] = EVENT_CROSS
            for a in range(nh):
                k = held_idx[a]
                if surface[k]:
                    out_sigma[k] = eq[a]
                    if _repelling(normals, Y, scale[k], k, eq[a]):
                        out_kind[k] = EVENT_TIE
                    else:
                        out_kind[k] = EVENT_SLIDE_START if -1.0 < eq[a] < 1.0 else EVENT_STICK
    if not found:
        return status.NO_CONSISTENT
    for p in range(count):
        if seen[p] & (seen[p] - 1) != 0:
            out_kind[idx[p]] = EVENT_TIE
    return status.RUNNING


@jit
def _series(A0, c0, A, c, normals, sigma, held, order, X, S):
    """Taylor coefficients ``X[0..K]`` of the state (``X[0]`` given) and ``S[0..K-1, k]`` of held controls."""
    K = A.shape[0]
    n_state = X.shape[1]
    held_idx = np.flatnonzero(held)
    nh = len(held_idx)
    Fs = np.zeros((order + 1, n_state))
    Ys = np.zeros((order + 1, K, n_state))
    M = np.zeros((order + 1, nh, nh))
    rhs = np.zeros((order + 1, nh))
    pinv = np.zeros((nh, nh))
    for p in range(order):
        const = 1.0 if p == 0 else 0.0
        for r in range(n_state):
            acc = c0[r] * const
            for s in range(n_state):
                acc += A0[r, s] * X[p, s]
            Fs[p, r] = acc
        for k in range(K):
            for r in range(n_state):
                acc = c[k, r] * const
                for s in range(n_state):
                    acc += A[k, r, s] * X[p, s]
                Ys[p, k, r] = acc
                if not held[k]:
                    Fs[p, r] += sigma[k] * acc
        for a in range(nh):
            rhs[p, a] = -np.dot(normals[held_idx[a]], Fs[p])
            for b in range(nh):
                M[p, a, b] = np.dot(normals[held_idx[a]], Ys[p, held_idx[b]])
        if nh > 0:
            if p == 0:
                pinv = np.ascontiguousarray(np.linalg.pinv(np.ascontiguousarray(M[0]), RCOND))
            target = rhs[p].copy()
            for qq in range(1, p + 1):
                for a in range(nh):
                    for b in range(nh):
                        target[a] -= M[qq, a, b] * S[p - qq, b]
            sol = pinv @ target
            for a in range(nh):
                S[p, a] = sol[a]
        for r in range(n_state):
            acc = Fs[p, r]
            for a in range(nh):
                for qq in range(p + 1):
                    acc += S[qq, a] * Ys[p - qq, held_idx[a], r]
            X[p + 1, r] = acc / (p + 1)
    return held_idx


@jit
def _surface_values(normals, offsets, X, order, G):
    """Taylor coefficients ``G[k, 0..K]`` of every switching function."""
    for k in range(normals.shape[0]):
        for p in range(order + 1):
            G[k, p] = np.dot(normals[k], X[p]) + (offsets[k] if p == 0 else 0.0)


@jit
def _zeno_snap(normals, offsets, x, sigma, held, snapped, amplitude):
    """At a Zeno limit: release every surface, then snap onto (project on) the surfaces ``x`` sits on to a small
    fraction of the last cycle's ``amplitude``, which the next iteration classifies afresh."""
    K = normals.shape[0]
    n_snap = 0
    for k in range(K):
        held[k] = False
        g = np.dot(normals[k], x) + offsets[k]
        sigma[k] = 1.0 if g > 0.0 else -1.0
        snapped[k] = abs(g) <= ZENO_SNAP * np.sum(np.abs(normals[k])) * amplitude
        if snapped[k]:
            n_snap += 1
    if n_snap == 0:
        return
    N = np.empty((n_snap, len(x)))
    off = np.empty(n_snap)
    q = 0
    for k in range(K):
        if snapped[k]:
            N[q] = normals[k]
            off[q] = np.dot(normals[k], x) + offsets[k]
            q += 1
    x -= np.linalg.pinv(N, RCOND) @ off


@jit
def _apply(t, surface, held, sigma, new_held, new_sigma, kind, forced, drop, ev_t, ev_kind, ev_surface, ev_side,
           ev_mult, ev_error, ev_cycle, n_ev):
    """Adopt a classification: log the surfaces whose mode or side changed (and ties met by a free surface, even
    when it keeps its side), mark the ones left."""
    for k in range(len(surface)):
        if not surface[k]:
            continue
        if new_held[k] != held[k] or (not held[k] and (new_sigma[k] != sigma[k] or kind[k] == EVENT_TIE)):
            ev_t[n_ev] = t
            if new_held[k] or kind[k] == EVENT_TIE:
                ev_kind[n_ev] = kind[k]
            else:
                ev_kind[n_ev] = EVENT_SLIDE_END if held[k] else EVENT_CROSS
            ev_surface[n_ev] = k
            ev_side[n_ev] = 0 if new_held[k] else int(new_sigma[k])
            ev_mult[n_ev] = new_sigma[k] if new_held[k] else math.nan
            ev_error[n_ev] = math.nan
            ev_cycle[n_ev] = 0
            n_ev += 1
        if not new_held[k]:
            drop[k] = 2 if forced[k] != 0 else 1
        held[k] = new_held[k]
        sigma[k] = new_sigma[k]
    return n_ev


class System(NamedTuple):
    """The switched system: ``x' = A0 x + c0 + sum_k sigma_k (A_k x + c_k)`` (``A0``: ``N, N``; ``c0``: ``N``;
    ``A``: ``K, N, N``; ``c``: ``K, N``) on the surfaces ``<normals[k], x> + offsets[k] = 0``."""

    A0: np.ndarray
    c0: np.ndarray
    A: np.ndarray
    c: np.ndarray
    normals: np.ndarray
    offsets: np.ndarray


class SwitchState(NamedTuple):
    """What a call continues from and updates in place: the state ``x``, the signs ``sigma`` (equivalent controls
    on held surfaces), ``held``, ``clock`` (shape (1,)), and the event machinery's marks ``drop`` and ``snapped``
    (shape ``(K,)``, zeros at the start)."""

    x: np.ndarray
    sigma: np.ndarray
    held: np.ndarray
    clock: np.ndarray
    drop: np.ndarray
    snapped: np.ndarray


class SwitchSteps(NamedTuple):
    """Per step ``q``: ``x(t[q] + tau) = sum_p X[q, p] tau^p`` for ``0 <= tau <= h[q]``."""

    t: np.ndarray
    h: np.ndarray
    X: np.ndarray


class SwitchEvents(NamedTuple):
    """Per event: time, kind, surface, side entered (0 when held), control (``nan`` when left; for ``zeno`` the
    time ratio per cycle), error (the accumulation time's error estimate for ``zeno``, else ``nan``) and cycle
    (events per cycle for ``zeno``, else 0)."""

    t: np.ndarray
    kind: np.ndarray
    surface: np.ndarray
    side: np.ndarray
    mult: np.ndarray
    error: np.ndarray
    cycle: np.ndarray


class SwitchWork(NamedTuple):
    """Scratch arrays of one :func:`integrate_pwa` call, allocated once: the step's Taylor coefficients ``X``
    (``order + 1, N``), the equivalent controls' ``S`` (``order + 1, K``) and the switching functions' ``G``
    (``K, order + 1``); root isolation (``work``, ``poly``); the surfaces to classify at this instant
    (``surface``), the side a release forces (``forced``) and the classification's output (``new_sigma``,
    ``new_held``, ``kind``)."""

    X: np.ndarray
    S: np.ndarray
    G: np.ndarray
    work: np.ndarray
    poly: np.ndarray
    surface: np.ndarray
    forced: np.ndarray
    new_sigma: np.ndarray
    new_held: np.ndarray
    kind: np.ndarray


@jit
def _switch_work(K, n_state, order):
    """The :class:`SwitchWork` of one call."""
    return SwitchWork(np.zeros((order + 1, n_state)), np.zeros((order + 1, K)), np.zeros((K, order + 1)),
                      np.empty((6, max(order + 1, STACK))), np.empty(order + 1), np.zeros(K, np.bool_),
                      np.zeros(K, np.int64), np.empty(K), np.empty(K, np.bool_), np.empty(K, np.int64))


@jit
def _on_surfaces(system, state, scale, surface):
    """Stage 1: ``surface`` marks the held surfaces, and the free ones the state sits on (to rounding), whose sign
    disagrees with ``sigma``, or that a Zeno limit was snapped onto; returns whether a free one is among them (an
    event now). Clears the snap marks."""
    normals, offsets = system.normals, system.offsets
    sigma, held, drop, snapped = state.sigma, state.held, state.drop, state.snapped
    pending = False
    for k in range(len(sigma)):
        g = np.dot(normals[k], state.x) + offsets[k]
        near = abs(g) <= _ON_SURFACE * (np.sum(np.abs(normals[k])) * scale + abs(offsets[k]))
        wrong = (g <= 0.0) if sigma[k] > 0.0 else (g >= 0.0)
        surface[k] = held[k] or ((near or wrong) and drop[k] == 0) or snapped[k]
        pending = pending or (surface[k] and not held[k])
        snapped[k] = False
    return pending


@jit
def _adopt(system, state, ws, t, releasing, tie_policy, events, n_ev):
    """Classify the surfaces ``ws.surface`` (:func:`classify`, with the sides ``ws.forced`` of releases when
    ``releasing``) and adopt the result (:func:`_apply`). Returns ``(status, n_ev)``."""
    sigma, held = state.sigma, state.held
    for k in range(len(sigma)):
        ws.new_sigma[k] = sigma[k]
        ws.new_held[k] = held[k]
    code = classify(system.A0, system.c0, system.A, system.c, system.normals, state.x, sigma, held, ws.surface,
                    releasing, ws.forced, tie_policy, ws.new_sigma, ws.new_held, ws.kind)
    if code != status.RUNNING:
        return code, n_ev
    ev_t, ev_kind, ev_surface, ev_side, ev_mult, ev_error, ev_cycle = events
    n_ev = _apply(t, ws.surface, held, sigma, ws.new_held, ws.new_sigma, ws.kind, ws.forced, state.drop, ev_t,
                  ev_kind, ev_surface, ev_side, ev_mult, ev_error, ev_cycle, n_ev)
    return code, n_ev


@jit
def _step_series(system, state, ws, order):
    """Stage 2: the Taylor coefficients of the state (``ws.X``), of the held surfaces' equivalent controls
    (``ws.S``) and of every switching function (``ws.G``) in the current mode; returns the held surfaces."""
    for r in range(len(state.x)):
        ws.X[0, r] = state.x[r]
    held_idx = _series(system.A0, system.c0, system.A, system.c, system.normals, state.sigma, state.held, order,
                       ws.X, ws.S)
    _surface_values(system.normals, system.offsets, ws.X, order, ws.G)
    return held_idx


@jit
def _switch_step_size(ws, order, scale, t, t_end):
    """Stage 3: the step of the tolerance rule (:func:`.stepping.taylor_step`), capped by
    :func:`polynomial_step_cap` and cut at ``t_end``. Returns ``(status, h, final)``: ``NONFINITE`` for a
    non-finite coefficient, ``NO_PROGRESS`` for a step that does not advance ``t``."""
    X = ws.X
    top = np.max(np.abs(X[order]))
    below = np.max(np.abs(X[order - 1]))
    if not (math.isfinite(top) and math.isfinite(below)):
        return status.NONFINITE, 0.0, False
    h = min(taylor_step(scale, below, top, order), polynomial_step_cap(X, order, scale))
    final = h >= t_end - t
    if final:
        h = t_end - t
    if not (h > 0.0) or t + h == t:
        return status.NO_PROGRESS, h, final
    return status.RUNNING, h, final


@jit
def _control_leaves(ws, a, target, order, bound):
    """Earliest root in ``(0, bound]`` of held surface ``a``'s equivalent control minus ``target`` (``+-1``)."""
    for p in range(order):
        ws.poly[p] = ws.S[p, a] - (target if p == 0 else 0.0)
    return earliest_root(ws.poly, order - 1, bound, 0, ws.work)


@jit
def _switch_events(state, ws, held_idx, order, h):
    """Stage 4: the earliest root in ``(0, h]`` of every free switching function and of every held surface's
    equivalent control minus ``+-1``. Returns ``(bound, found)``."""
    held, drop, G = state.held, state.drop, ws.G
    bound = h
    found = False
    for k in range(len(held)):
        if held[k]:
            continue
        if excluded(G[k], order, bound, drop[k]):
            continue
        tau = earliest_root(G[k], order, bound, drop[k], ws.work)
        if tau <= bound:
            bound, found = tau, True
    for a in range(len(held_idx)):
        for target in (-1.0, 1.0):
            tau = _control_leaves(ws, a, target, order, bound)
            if tau <= bound:
                bound, found = tau, True
    return bound, found


@jit
def _switch_advance(system, state, ws, held_idx, order, h, steps, n_steps):
    """Stage 5: record step ``n_steps`` and take it (the Taylor polynomial at ``h``), with the drift correction
    onto the held surfaces. Returns whether the state is finite; if not, it goes back to the step's start."""
    x, X = state.x, ws.X
    n_state = len(x)
    steps.t[n_steps] = state.clock[0]
    steps.h[n_steps] = h
    steps.X[n_steps] = X
    for r in range(n_state):
        acc = X[order, r]
        for p in range(order - 1, -1, -1):
            acc = acc * h + X[p, r]
        x[r] = acc
    if len(held_idx) > 0:
        N = np.empty((len(held_idx), n_state))
        off = np.empty(len(held_idx))
        for a in range(len(held_idx)):
            N[a] = system.normals[held_idx[a]]
            off[a] = np.dot(N[a], x) + system.offsets[held_idx[a]]
        x -= np.linalg.pinv(N, RCOND) @ off
    if math.isfinite(np.max(np.abs(x))):
        return True
    for r in range(n_state):
        x[r] = X[0, r]
    return False


@jit
def _switch_reached(state, ws, held_idx, order, h):
    """Stage 6: at an event, ``ws.surface`` marks the switching surfaces reached within ``SIMULTANEOUS h`` of the
    step's end and the held ones, ``ws.forced`` the bound each equivalent control reaching ``+-1`` forces; the
    marks of surfaces just left are cleared. Returns whether a release is forced."""
    held, drop, surface, forced, G = state.held, state.drop, ws.surface, ws.forced, ws.G
    reach = h * (1.0 + SIMULTANEOUS)
    for k in range(len(held)):
        surface[k] = held[k] or (not excluded(G[k], order, reach, drop[k])
                                 and earliest_root(G[k], order, reach, drop[k], ws.work) <= reach)
        drop[k] = 0
        forced[k] = 0
    for a in range(len(held_idx)):
        for target in (-1.0, 1.0):
            if _control_leaves(ws, a, target, order, reach) <= reach:
                forced[held_idx[a]] = int(target)
    releasing = False
    for k in range(len(held)):
        releasing = releasing or forced[k] != 0
    return releasing


@jit
def _zeno_jump(system, state, zeno, t, t_end, first_event, events, n_ev):
    """Stage 7: record this event instant in the Zeno detector's memory (key: the first surface logged and its
    side) and, when the last instants accumulate (:func:`.zeno.zeno_check`) before ``t_end``, log a ``zeno`` event, jump
    to the extrapolated limit and snap onto the surfaces it sits on (:func:`_zeno_snap`). Returns ``(t, n_ev)``."""
    ev_t, ev_kind, ev_surface, ev_side, ev_mult, ev_error, ev_cycle = events
    key = 3 * ev_surface[first_event] + ev_side[first_event] + 1
    zeno_record(zeno, t, key, state.x)
    cycle, t_acc, error, ratio, rho = zeno_check(zeno)
    if not (cycle > 0 and t_acc <= t_end):
        return t, n_ev
    count = zeno.count[0]
    d1 = zeno.states[ring_index(count, 0, ZENO_MEMORY)] - zeno.states[ring_index(count, cycle, ZENO_MEMORY)]
    state.x[:] += d1 * rho / (1.0 - rho)
    ev_t[n_ev] = t_acc
    ev_kind[n_ev] = EVENT_ZENO
    ev_surface[n_ev] = ev_surface[first_event]
    ev_side[n_ev] = 0
    ev_mult[n_ev] = ratio
    ev_error[n_ev] = error
    ev_cycle[n_ev] = cycle
    zeno.count[0] = 0
    state.drop[:] = 0
    _zeno_snap(system.normals, system.offsets, state.x, state.sigma, state.held, state.snapped,
               math.sqrt(np.dot(d1, d1)))
    return t_acc, n_ev + 1


@jit
def integrate_pwa(system, state, zeno, t_end, order, tie_policy, max_steps, max_events, steps, events):
    """Integrate a piecewise-affine :class:`System` from ``state.clock[0]`` to ``t_end``, at most ``max_steps``
    steps and ``max_events`` events (the sizes of this call's :class:`SwitchSteps` and :class:`SwitchEvents`;
    the events need ``max_events + 4 K + 4`` entries). ``tie_policy`` is ``TIE_STAY`` or ``TIE_LEAVE``.

    One pass of the loop is the algorithm's stages, as in the network engine's driver: surfaces reached now are
    classified (:func:`_on_surfaces`, :func:`_adopt`); the step's series (:func:`_step_series`) and size
    (:func:`_switch_step_size`); the earliest switching or control root ends it (:func:`_switch_events`); it is
    recorded and taken (:func:`_switch_advance`); at an event the surfaces reached are classified
    (:func:`_switch_reached`, :func:`_adopt`) and the instant goes to the Zeno detector (:func:`_zeno_jump`).

    The :class:`SwitchState` and the :class:`ZenoMemory` are updated in place, so that calling again continues the
    very same trajectory. Returns ``(status, n_steps, n_events)``: ``RUNNING`` or ``MAX_EVENTS`` when this call's
    budget ended it; ``NONFINITE`` with ``x`` the last finite state.
    """
    x, clock = state.x, state.clock
    ws = _switch_work(system.A.shape[0], len(x), order)
    t = clock[0]
    n_steps = 0
    n_ev = 0
    code = status.RUNNING
    while True:
        done, code = budget_spent(t, t_end, n_steps, max_steps, n_ev, max_events, status.MAX_EVENTS)
        if done:
            break
        scale = max(1e-300, np.max(np.abs(x)))
        if _on_surfaces(system, state, scale, ws.surface):
            code, n_ev = _adopt(system, state, ws, t, False, tie_policy, events, n_ev)
            if code != status.RUNNING:
                break
        held_idx = _step_series(system, state, ws, order)
        code, h, final = _switch_step_size(ws, order, scale, t, t_end)
        if code != status.RUNNING:
            break
        bound, found = _switch_events(state, ws, held_idx, order, h)
        if found:
            h, final = bound, False
        clock[0] = t
        if not _switch_advance(system, state, ws, held_idx, order, h, steps, n_steps):
            code = status.NONFINITE
            break
        n_steps += 1
        t = t_end if final else t + h
        if not found:
            state.drop[:] = 0
            continue
        releasing = _switch_reached(state, ws, held_idx, order, h)
        first_event = n_ev
        code, n_ev = _adopt(system, state, ws, t, releasing, tie_policy, events, n_ev)
        if code != status.RUNNING:
            break
        if n_ev > first_event:
            t, n_ev = _zeno_jump(system, state, zeno, t, t_end, first_event, events, n_ev)
    clock[0] = t
    return code, n_steps, n_ev
