"""Piecewise-affine systems ``x' = A_sigma x + c_sigma`` on sign patterns of linear switching functions.

``x' = A0 x + c0 + sum_k sigma_k (A_k x + c_k)`` with ``sigma_k = sign(g_k(x))``, ``g_k(x) = <n_k, x> + beta_k``,
and on a surface ``sigma_k in [-1, 1]`` (the field is affine in each sign, so this is Utkin's equivalent control;
on one surface it is Filippov's convex combination). The same machinery as the network engine: Taylor steps (exact
for affine fields), earliest roots of the switching polynomials and of the equivalent controls' exit polynomials
``sigma_k = +-1``, and at each event a consistent configuration of the surfaces met (each left upwards, left
downwards or held with the equivalent control; smallest ``|x'|`` among the consistent ones, as for the network).

Zeno: when the last events repeat the same cycle of surfaces with gaps shrinking by a constant ratio ``r`` per
cycle, the accumulation time ``t_n + (sum of the last cycle's gaps) r / (1 - r)`` and the limit state (Aitken's
extrapolation of the states one cycle apart) are computed, a ``zeno`` event is logged and the integration continues
from the limit, where the surfaces it sits on are classified like any other event.
"""

import math

import numpy as np

from . import status
from ._jit import jit
from .events import EVENT_CROSS, EVENT_SLIDE_END, EVENT_SLIDE_START, EVENT_STICK, EVENT_ZENO, RCOND, STAY_TOL
from .roots import STACK, earliest_root, excluded
from .stepping import taylor_step

#: events kept for the Zeno detector, and the cycle lengths it tries
ZENO_MEMORY = 16
ZENO_MAX_CYCLE = 4
#: consecutive cycle ratios must agree to this relative tolerance
ZENO_RATIO_TOL = 1e-6
_EPS = 2.220446049250313e-16
_ON_SURFACE = 64.0 * _EPS
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
def classify(A0, c0, A, c, normals, x, sigma, held, surface, releasing, forced, out_sigma, out_held, out_kind):
    """Consistent configuration of the surfaces in ``surface`` at ``x`` (3^k enumeration, smallest ``|x'|``).

    ``forced[k] = +-1`` imposes the side of a held surface whose equivalent control left ``[-1, 1]``. Writes the
    new signs, held flags and the kind each surface logs if its mode changes. Returns a status code.
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
    found = False
    v = np.empty(n_state)
    _field_parts(A0, c0, A, c, sigma, held, x, f_free, Y)
    size = math.sqrt(np.sum(f_free**2))
    for k in range(K):
        size += math.sqrt(np.sum(Y[k] ** 2))
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
        if residual > STAY_TOL * size:
            continue
        for r in range(n_state):
            v[r] = f_free[r]
        for a in range(nh):
            if not (-1.0 - STAY_TOL <= eq[a] <= 1.0 + STAY_TOL):
                ok = False
            for r in range(n_state):
                v[r] += eq[a] * Y[held_idx[a], r]
        if not ok:
            continue
        for p in range(count):
            k = idx[p]
            if trial_held[k]:
                continue
            u = np.dot(normals[k], v)
            tol = -STAY_TOL * size if releasing else STAY_TOL * size
            if (trial_sigma[k] > 0.0 and not u > tol) or (trial_sigma[k] < 0.0 and not u < -tol):
                ok = False
        if not ok:
            continue
        norm = np.sum(v * v)
        if norm < best:
            best = norm
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
                    out_kind[k] = EVENT_SLIDE_START if -1.0 < eq[a] < 1.0 else EVENT_STICK
    return status.RUNNING if found else status.NO_CONSISTENT


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
def _zeno_check(ev_times, ev_surface, ev_states, count, cycle_max):
    """Detect a geometric accumulation of events; returns (cycle, time ratio per cycle) or (0, 0).

    A cycle of ``p`` events repeats the same surfaces; the durations of consecutive cycles must shrink by the same
    ratio (to ``ZENO_RATIO_TOL``) and the states one cycle apart must contract towards a limit (Aitken ratio in
    ``[0, 1)``); the smallest such ``p`` is returned.
    """
    for p in range(1, cycle_max + 1):
        needed = 3 * p + 1
        if count < needed:
            continue
        same = True
        for q in range(count - 2 * p, count):
            if ev_surface[q] != ev_surface[q - p]:
                same = False
        if not same:
            continue
        # ratios of cycle lengths: L_i = t[i] - t[i - p]
        r1 = (ev_times[count - 1] - ev_times[count - 1 - p]) / (ev_times[count - 1 - p] - ev_times[count - 1 - 2 * p])
        r0 = (ev_times[count - 2] - ev_times[count - 2 - p]) / (ev_times[count - 2 - p] - ev_times[count - 2 - 2 * p])
        if not (0.0 < r1 < 0.99 and abs(r1 - r0) <= ZENO_RATIO_TOL * r1):
            continue
        # the states one cycle apart must contract along a fixed direction (x_n - x* = rho (x_{n-p} - x*))
        d1 = ev_states[count - 1] - ev_states[count - 1 - p]
        d0 = ev_states[count - 1 - p] - ev_states[count - 1 - 2 * p]
        rho = np.dot(d1, d0) / np.dot(d0, d0)
        if 0.0 <= rho < 1.0:
            return p, r1
    return 0, 0.0


@jit
def _apply(t, surface, held, sigma, new_held, new_sigma, kind, forced, drop, ev_t, ev_kind, ev_surface, ev_side,
           ev_mult, n_ev):
    """Adopt a classification: log the surfaces whose mode or side changed, mark the ones left."""
    for k in range(len(surface)):
        if not surface[k]:
            continue
        if new_held[k] != held[k] or (not held[k] and new_sigma[k] != sigma[k]):
            ev_t[n_ev] = t
            ev_kind[n_ev] = kind[k] if new_held[k] else (EVENT_SLIDE_END if held[k] else EVENT_CROSS)
            ev_surface[n_ev] = k
            ev_side[n_ev] = 0 if new_held[k] else int(new_sigma[k])
            ev_mult[n_ev] = new_sigma[k] if new_held[k] else math.nan
            n_ev += 1
        if not new_held[k]:
            drop[k] = 2 if forced[k] != 0 else 1
        held[k] = new_held[k]
        sigma[k] = new_sigma[k]
    return n_ev


@jit
def integrate_pwa(A0, c0, A, c, normals, offsets, x, sigma, held, clock, t_end, order, max_steps, max_events,
                  drop, snapped, z_times, z_surface, z_states, z_count_box, out_t, out_h, out_X, ev_t, ev_kind,
                  ev_surface, ev_side, ev_mult):
    """Integrate a piecewise-affine system from ``clock[0]`` to ``t_end`` (arguments as in the module doc), at most
    ``max_steps`` steps and ``max_events`` events (the sizes of this call's output buffers; ``ev_*`` need
    ``max_events + 4 K + 4`` entries).

    ``x`` (state), ``sigma`` (signs, or equivalent controls on held surfaces), ``held``, ``clock`` and the
    carried state of the event machinery (``drop``, ``snapped``: shape ``(K,)``, zeros at the start; the Zeno
    detector's memory ``z_times``, ``z_surface``, ``z_states`` of :data:`ZENO_MEMORY` rows and its fill
    ``z_count_box[0]``) are updated in place, so that calling again continues the very same trajectory. Returns
    ``(status, n_steps, n_events)``: ``RUNNING`` or ``MAX_EVENTS`` when this call's budget ended it; ``NONFINITE``
    with ``x`` the last finite state.
    """
    K = A.shape[0]
    n_state = len(x)
    X = np.zeros((order + 1, n_state))
    S = np.zeros((order + 1, K))
    G = np.zeros((K, order + 1))
    work = np.empty((6, max(order + 1, STACK)))
    poly = np.empty(order + 1)
    surface = np.zeros(K, np.bool_)
    forced = np.zeros(K, np.int64)
    new_sigma = np.empty(K)
    new_held = np.empty(K, np.bool_)
    kind = np.empty(K, np.int64)
    z_count = z_count_box[0]
    t = clock[0]
    n_steps = 0
    n_ev = 0
    code = status.RUNNING
    while True:
        if t >= t_end:
            code = status.SUCCESS
            break
        if n_steps >= max_steps:
            break
        if n_ev >= max_events:
            code = status.MAX_EVENTS
            break
        scale = max(1e-300, np.max(np.abs(x)))
        # surfaces the state sits on (to rounding) or whose sign disagrees: classify now
        pending = False
        for k in range(K):
            g = np.dot(normals[k], x) + offsets[k]
            near = abs(g) <= _ON_SURFACE * (np.sum(np.abs(normals[k])) * scale + abs(offsets[k]))
            wrong = (g <= 0.0) if sigma[k] > 0.0 else (g >= 0.0)
            surface[k] = held[k] or ((near or wrong) and drop[k] == 0) or snapped[k]
            pending = pending or (surface[k] and not held[k])
            snapped[k] = False
        if pending:
            for k in range(K):
                new_sigma[k] = sigma[k]
                new_held[k] = held[k]
            code = classify(A0, c0, A, c, normals, x, sigma, held, surface, False, forced, new_sigma, new_held,
                            kind)
            if code != status.RUNNING:
                break
            n_ev = _apply(t, surface, held, sigma, new_held, new_sigma, kind, forced, drop, ev_t, ev_kind,
                          ev_surface, ev_side, ev_mult, n_ev)
        # Taylor step
        for r in range(n_state):
            X[0, r] = x[r]
        held_idx = _series(A0, c0, A, c, normals, sigma, held, order, X, S)
        _surface_values(normals, offsets, X, order, G)
        top = np.max(np.abs(X[order]))
        below = np.max(np.abs(X[order - 1]))
        if not (math.isfinite(top) and math.isfinite(below)):
            code = status.NONFINITE
            break
        h = min(taylor_step(scale, below, top, order), polynomial_step_cap(X, order, scale))
        final = h >= t_end - t
        if final:
            h = t_end - t
        if not (h > 0.0) or t + h == t:
            code = status.NO_PROGRESS
            break
        bound = h
        found = False
        for k in range(K):
            if held[k]:
                continue
            if excluded(G[k], order, bound, drop[k]):
                continue
            tau = earliest_root(G[k], order, bound, drop[k], work)
            if tau <= bound:
                bound, found = tau, True
        for a in range(len(held_idx)):
            for target in (-1.0, 1.0):
                for p in range(order):
                    poly[p] = S[p, a] - (target if p == 0 else 0.0)
                tau = earliest_root(poly, order - 1, bound, 0, work)
                if tau <= bound:
                    bound, found = tau, True
        if found:
            h, final = bound, False
        out_t[n_steps] = t
        out_h[n_steps] = h
        out_X[n_steps] = X
        for r in range(n_state):
            acc = X[order, r]
            for p in range(order - 1, -1, -1):
                acc = acc * h + X[p, r]
            x[r] = acc
        # drift correction onto the held surfaces
        if len(held_idx) > 0:
            N = np.empty((len(held_idx), n_state))
            off = np.empty(len(held_idx))
            for a in range(len(held_idx)):
                N[a] = normals[held_idx[a]]
                off[a] = np.dot(N[a], x) + offsets[held_idx[a]]
            x -= np.linalg.pinv(N, RCOND) @ off
        if not math.isfinite(np.max(np.abs(x))):
            for r in range(n_state):
                x[r] = X[0, r]
            code = status.NONFINITE
            break
        n_steps += 1
        t = t_end if final else t + h
        if not found:
            for k in range(K):
                drop[k] = 0
            continue
        # events at the end of the step: switching surfaces reached and equivalent controls leaving [-1, 1]
        reach = h * (1.0 + 64.0 * _EPS)
        for k in range(K):
            surface[k] = held[k] or (not excluded(G[k], order, reach, drop[k])
                                     and earliest_root(G[k], order, reach, drop[k], work) <= reach)
            drop[k] = 0
            forced[k] = 0
        for a in range(len(held_idx)):
            for target in (-1.0, 1.0):
                for p in range(order):
                    poly[p] = S[p, a] - (target if p == 0 else 0.0)
                if earliest_root(poly, order - 1, reach, 0, work) <= reach:
                    forced[held_idx[a]] = int(target)
        for k in range(K):
            new_sigma[k] = sigma[k]
            new_held[k] = held[k]
        releasing = False
        for k in range(K):
            releasing = releasing or forced[k] != 0
        code = classify(A0, c0, A, c, normals, x, sigma, held, surface, releasing, forced, new_sigma, new_held, kind)
        if code != status.RUNNING:
            break
        first_event = n_ev
        n_ev = _apply(t, surface, held, sigma, new_held, new_sigma, kind, forced, drop, ev_t, ev_kind, ev_surface,
                      ev_side, ev_mult, n_ev)
        # Zeno detector: one record per event instant (the first surface logged)
        if n_ev > first_event:
            if z_count == ZENO_MEMORY:
                for q in range(ZENO_MEMORY - 1):
                    z_times[q] = z_times[q + 1]
                    z_surface[q] = z_surface[q + 1]
                    z_states[q] = z_states[q + 1]
                z_count -= 1
            z_times[z_count] = t
            z_surface[z_count] = ev_surface[first_event]
            z_states[z_count] = x
            z_count += 1
            cycle, ratio = _zeno_check(z_times, z_surface, z_states, z_count, ZENO_MAX_CYCLE)
            if cycle > 0:
                last = z_times[z_count - 1] - z_times[z_count - 1 - cycle]
                t_acc = t + last * ratio / (1.0 - ratio)
                d1 = z_states[z_count - 1] - z_states[z_count - 1 - cycle]
                d0 = z_states[z_count - 1 - cycle] - z_states[z_count - 1 - 2 * cycle]
                rho = np.dot(d1, d0) / np.dot(d0, d0)
                if t_acc <= t_end and 0.0 <= rho < 1.0:
                    x += d1 * rho / (1.0 - rho)
                    t = t_acc
                    ev_t[n_ev] = t
                    ev_kind[n_ev] = EVENT_ZENO
                    ev_surface[n_ev] = ev_surface[first_event]
                    ev_side[n_ev] = 0
                    ev_mult[n_ev] = ratio
                    n_ev += 1
                    z_count = 0
                    for k in range(K):
                        drop[k] = 0
                    # at the limit every surface it sits on (to the accuracy of the extrapolation, a small
                    # fraction of the last cycle's amplitude) is snapped onto and classified afresh
                    amplitude = math.sqrt(np.dot(d1, d1))
                    for k in range(K):
                        held[k] = False
                        g = np.dot(normals[k], x) + offsets[k]
                        sigma[k] = 1.0 if g > 0.0 else -1.0
                        snapped[k] = abs(g) <= 1e-6 * np.sum(np.abs(normals[k])) * amplitude
                    n_snap = 0
                    for k in range(K):
                        if snapped[k]:
                            n_snap += 1
                    if n_snap > 0:
                        N = np.empty((n_snap, n_state))
                        off = np.empty(n_snap)
                        q = 0
                        for k in range(K):
                            if snapped[k]:
                                N[q] = normals[k]
                                off[q] = np.dot(normals[k], x) + offsets[k]
                                q += 1
                        x -= np.linalg.pinv(N, RCOND) @ off
    clock[0] = t
    z_count_box[0] = z_count
    return code, n_steps, n_ev
