"""The event-driven Taylor integrator: one chunk of steps, called repeatedly by :func:`flowlib.gradient_flow`.

Each step
1. resolves surfaces the state sits on with a pattern that disagrees with the sign of ``z_ij`` (the initial
   state, or rounding at the end of the previous step) as events at the current time;
2. computes the Taylor coefficients of the state to order ``K`` under the current pattern
   (:func:`.series.taylor_coefficients`);
3. chooses the step ``h = rho / e^2 * exp(-0.7 / (K - 1))`` from the last two coefficients, with
   ``rho = min_k (max(1, |theta|_inf) / |theta^[k]|_inf)^(1/k)`` for ``k in {K-1, K}`` (Jorba & Zou 2005; heyoka's
   rule) so that the local truncation error is about ``tol`` in the mixed absolute/relative sense;
4. finds the earliest root in ``(0, h]`` of every switching polynomial ``z_ij(tau)``
   (:func:`.roots.earliest_root`, shrinking the search bound as roots are found) and truncates the step there;
5. advances the state with the Taylor polynomial (kept as dense output), and at an event gathers every surface
   reached within ``64 eps h`` of it, classifies them per neuron (:func:`.events.classify_neuron`) and flips
   the pattern. Surfaces just crossed are marked ``on_surface`` so the next step's root search excludes
   ``tau = 0``: an event never re-fires.

Progress guarantee: every step advances ``t`` by ``h > 0`` representable at ``t`` or ends the chunk with
``NO_PROGRESS``; the step and event budgets end the run otherwise.
"""

import math

import numpy as np

from . import status
from ._jit import jit
from .events import EVENT_CROSS, classify_neuron
from .roots import earliest_root
from .series import network_loss, preactivations, slopes_from_pattern, taylor_coefficients, velocity_energy, \
    velocity_inner, horner_state, max_abs

_EPS = 2.220446049250313e-16
_SAFETY = math.exp(-2.0)
_SIMULTANEOUS = 64.0 * _EPS


@jit
def _resolve(Xa, y, loss_kind, c, leak, bias, P, S, active, on_surface, hit, t, ev_t, ev_kind, ev_neuron,
             ev_sample, ev_side, ev_mult, n_ev):
    """Classify the surfaces in ``hit`` at time ``t``, flip the pattern, log crossings; return (status, n_ev)."""
    n, m = hit.shape
    G = np.empty(n)
    velocity_inner(Xa, y, S, loss_kind, c, P, G)
    side = np.zeros(n, np.int8)
    for j in range(m):
        any_hit = False
        for i in range(n):
            if hit[i, j]:
                any_hit = True
                break
        if not any_hit:
            continue
        code = classify_neuron(Xa, G, P, S, leak, bias, j, hit, side)
        if code != status.RUNNING:
            return code, n_ev
        for i in range(n):
            if hit[i, j]:
                on_surface[i, j] = True
                new_active = side[i] > 0
                if new_active != active[i, j]:
                    active[i, j] = new_active
                    ev_t[n_ev] = t
                    ev_kind[n_ev] = EVENT_CROSS
                    ev_neuron[n_ev] = j
                    ev_sample[n_ev] = i
                    ev_side[n_ev] = side[i]
                    ev_mult[n_ev] = math.nan
                    n_ev += 1
    slopes_from_pattern(active, leak, S)
    return status.RUNNING, n_ev


@jit
def integrate_chunk(Xa, y, loss_kind, c, leak, bias, train_outer, order, tol, P, active, on_surface, clock, t_end,
                    max_steps, max_events, out_t, out_h, out_C, out_loss, out_energy, ev_t, ev_kind, ev_neuron,
                    ev_sample, ev_side, ev_mult):
    """Integrate from ``t0`` for at most ``max_steps`` steps, ``max_events`` events, or until ``t_end``.

    Parameters
    ----------
    Xa : ndarray, shape (n, d + 1), float64, C-contiguous
        Data with a column of ones.
    y : ndarray, shape (n,)
    loss_kind : int
        See :mod:`.series`.
    c, leak : float
        Reduction factor and negative-side slope.
    bias, train_outer : bool
    order : int
        Taylor order ``K`` (>= 2).
    tol : float
        Local tolerance of the step-size rule.
    P : ndarray, shape (m, d + 2)
        State; updated in place.
    active, on_surface : ndarray of bool, shape (n, m)
        Pattern and the surfaces the state sits on; updated in place.
    clock : ndarray, shape (1,)
        The current time; updated in place.
    t_end : float
    max_steps, max_events : int
        Budgets of this chunk; ``out_*`` must hold ``max_steps`` steps and ``ev_*`` at least
        ``max_events + n * m`` events.
    out_t, out_h, out_loss, out_energy : ndarray, shape (max_steps,)
        Start, length, loss at the start, and ``int |theta'|^2`` of each step.
    out_C : ndarray, shape (max_steps, K + 1, m, d + 2)
        Taylor coefficients of each step (dense output).
    ev_t, ev_mult : ndarray of float64;  ev_kind, ev_side : ndarray of int8;  ev_neuron, ev_sample : int64
        Event log.

    Returns
    -------
    status : int
        A code of :mod:`.status`; ``RUNNING`` when a budget of the chunk (not of the run) ended it.
    n_steps, n_events : int
    """
    n, da = Xa.shape
    m = P.shape[0]
    w = P.shape[1]
    K = order
    C = np.zeros((K + 1, m, w))
    Z = np.zeros((K + 1, n, m))
    F = np.zeros((K + 1, n))
    G = np.zeros((K + 1, n))
    A0 = np.zeros((K + 1, n))
    A1 = np.zeros((K + 1, n))
    R = np.zeros((K + 1, m, da))
    S = np.empty((n, m))
    hit = np.zeros((n, m), np.bool_)
    work = np.empty((4, K + 1))
    slopes_from_pattern(active, leak, S)
    t = clock[0]
    n_steps = 0
    n_ev = 0
    code = status.RUNNING
    while True:
        if t >= t_end:
            code = status.SUCCESS
            break
        if n_steps >= max_steps:
            code = status.RUNNING
            break
        if n_ev >= max_events:
            code = status.EVENT_BUFFER_FULL
            break
        # 1. surfaces whose pattern disagrees with the sign of z (initial state, rounding): events now
        preactivations(Xa, P, Z[0])
        pending = False
        for i in range(n):
            for j in range(m):
                z = Z[0, i, j]
                wrong = (z <= 0.0) if active[i, j] else (z > 0.0 or z == 0.0)
                hit[i, j] = wrong and not on_surface[i, j]
                pending = pending or hit[i, j]
        if pending:
            code, n_ev = _resolve(Xa, y, loss_kind, c, leak, bias, P, S, active, on_surface, hit, t, ev_t,
                                  ev_kind, ev_neuron, ev_sample, ev_side, ev_mult, n_ev)
            if code != status.RUNNING:
                break
        # 2. Taylor coefficients
        for j in range(m):
            for q in range(w):
                C[0, j, q] = P[j, q]
        taylor_coefficients(Xa, y, S, loss_kind, c, bias, train_outer, K, C, Z, F, G, A0, A1, R)
        top = max_abs(C[K])
        below = max_abs(C[K - 1])
        if not (math.isfinite(top) and math.isfinite(below)):
            code = status.NONFINITE
            break
        # 3. step size
        size = max(1.0, max_abs(C[0]))
        rho = math.inf
        if below > 0.0:
            rho = (size / below) ** (1.0 / (K - 1))
        if top > 0.0:
            rho = min(rho, (size / top) ** (1.0 / K))
        h = rho * _SAFETY * math.exp(-0.7 / (K - 1))
        remaining = t_end - t
        final = h >= remaining
        if final:
            h = remaining
        if not (h > 0.0) or t + h == t:
            code = status.NO_PROGRESS
            break
        # 4. earliest root of every switching polynomial
        bound = h
        found = False
        for i in range(n):
            for j in range(m):
                tau = earliest_root(Z[:, i, j], K, bound, on_surface[i, j], work)
                if tau <= bound:
                    bound = tau
                    found = True
        if found:
            h = bound
            final = False
        # 5. record, advance
        out_t[n_steps] = t
        out_h[n_steps] = h
        out_C[n_steps] = C
        out_loss[n_steps] = network_loss(Xa, y, P, S, loss_kind, c)
        out_energy[n_steps] = velocity_energy(C, K, h)
        horner_state(C, K, h, P)
        n_steps += 1
        t = t_end if final else t + h
        if found:
            reach = h * (1.0 + _SIMULTANEOUS)
            for i in range(n):
                for j in range(m):
                    hit[i, j] = earliest_root(Z[:, i, j], K, reach, on_surface[i, j], work) <= reach
        for i in range(n):
            for j in range(m):
                on_surface[i, j] = False
        if found:
            code, n_ev = _resolve(Xa, y, loss_kind, c, leak, bias, P, S, active, on_surface, hit, t, ev_t,
                                  ev_kind, ev_neuron, ev_sample, ev_side, ev_mult, n_ev)
            if code != status.RUNNING:
                break
        if not math.isfinite(max_abs(P)):
            code = status.NONFINITE
            break
    clock[0] = t
    return code, n_steps, n_ev


@jit
def loss_along(Xa, y, loss_kind, c, leak, states):
    """Loss at each state of ``states`` (shape ``(k, m, d + 2)``), with the pattern read from the state."""
    k = states.shape[0]
    n = Xa.shape[0]
    m = states.shape[1]
    out = np.empty(k)
    Z = np.empty((n, m))
    S = np.empty((n, m))
    for s in range(k):
        preactivations(Xa, states[s], Z)
        for i in range(n):
            for j in range(m):
                S[i, j] = 1.0 if Z[i, j] > 0.0 else leak
        out[s] = network_loss(Xa, y, states[s], S, loss_kind, c)
    return out
