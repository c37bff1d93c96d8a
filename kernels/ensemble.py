"""Many trajectories of one problem at once: the flow and gradient descent per member, members side by side.

Each member runs the serial kernels (:func:`.driver.integrate_chunk`, :func:`.descent.descent_update`) on its own
copy of the state, so a member's numbers do not depend on the thread count, on the batch it was put in, or on the
machine of a Dask cluster that ran it. The batch kernels run a slice of members one after the other; they release
the GIL (``nogil``), and the driver runs slices on several threads at once. (Numba's ``prange`` was tried: it
changed the flow's last bits against the serial kernel, so it is not used.)

Stop rule ("until"), shared by both methods
-------------------------------------------
A member stops early, with code :data:`REACHED`, at the first point where

* the loss has gone below ``loss_below`` (checked at every iterate for gradient descent, at every step boundary
  for the flow), and
* ``|<coef, P> + offset| <= lin_tol`` for the linear functional ``coef`` (shape ``(m, d + 2)``) of the packed state
  ``P``; for the flow this point is located inside the step, by bisection on the step's Taylor polynomial.

Either part is switched off by ``nan`` (``loss_below``) or ``lin_tol < 0``. With a deadline (``deadline_steps`` for
gradient descent, ``u_deadline`` for the flow) a member whose loss has not gone below ``loss_below`` by then stops
with code :data:`DEADLINE`.

Stop flag
---------
Every batch kernel takes ``stop`` (int64, shape ``(1,)``), which another thread may set to non-zero while the kernel
runs (Ctrl-C). It is read before every gradient-descent iteration and before every chunk of flow steps; a member
running when it is set ends with code :data:`STOPPED` (its outputs are then meaningless) and the members after it
are not started (code :data:`STOPPED`). Reading the flag changes no number of a member that runs to its end.
"""

import math

import numpy as np
from . import status
from ._jit import jit
from .descent import descent_update, iterate_objective, log_flips
from .bundles import Method, Network
from .driver import integrate_chunk, loss_along
from .zeno import zeno_fields
from .series import horner_state, preactivations, velocity_energy, velocity_energy_log

REACHED = status.REACHED
DEADLINE = status.DEADLINE
#: Code of a member abandoned because the caller set the stop flag (``flowlib.ensemble_result.PENDING``).
STOPPED = -1
#: Number of event kinds counted per member (:mod:`.constants` ``EVENT_*``).
N_EVENT_KINDS = 6
#: Steps of one flow chunk inside a member (buffers are per member and per chunk).
_CHUNK_STEPS = 64
_CHUNK_EVENTS = 256


@jit
def _functional(coef, P, offset):
    """``<coef, P> + offset``."""
    acc = offset
    for j in range(P.shape[0]):
        for q in range(P.shape[1]):
            acc += coef[j, q] * P[j, q]
    return acc


@jit
def _functional_poly(coef, C, order, tau, offset):
    """``<coef, theta(tau)> + offset`` for the step polynomial ``theta(tau) = sum_k C[k] tau^k`` (Horner)."""
    acc = _functional(coef, C[order], 0.0)
    for k in range(order - 1, -1, -1):
        acc = acc * tau + _functional(coef, C[k], 0.0)
    return acc + offset


@jit
def _first_inside(coef, C, order, h, offset, tol):
    """Earliest ``tau`` in ``[0, h]`` with ``|g(tau)| <= tol``, given ``|g(0)| > tol >= |g(h)|``: bisection on
    the sign of ``|g| - tol`` to the last representable split (at most 200 halvings)."""
    lo, hi = 0.0, h
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if abs(_functional_poly(coef, C, order, mid, offset)) <= tol:
            hi = mid
        else:
            lo = mid
    return hi


@jit
def descend_member(net, descent, P, max_steps, loss_below, deadline_steps, coef, offset, lin_tol, out, stop):
    """Full-batch gradient descent on ``net`` with ``descent`` (:class:`.bundles.Network`,
    :class:`.bundles.Descent`) from ``P`` (updated in place) until the stop rule, the deadline or ``max_steps``.

    ``out`` (float64, shape ``(3,)``) receives the loss (the objective, with weight decay) at the last iterate, the
    number of activation flips (``z_ij`` changing side between consecutive iterates, counted by
    :func:`.descent.log_flips` as :func:`.descent.descend_chunk` logs them), and the index of the iterate where the
    loss first went below ``loss_below`` (``nan`` if never).

    Returns
    -------
    code : int
        :data:`REACHED`, :data:`DEADLINE`, ``status.SUCCESS`` (``max_steps`` iterations done),
        ``status.NONFINITE`` or :data:`STOPPED` (``stop[0]`` was set).
    k : int
        Index of the iterate held in ``P``.
    """
    n, da = net.Xa.shape
    m = P.shape[0]
    Z = np.empty((n, m))
    G = np.empty(n)
    work = np.empty(n)
    grad = np.empty((m, da + 1))
    preactivations(net.Xa, P, Z)
    active = np.empty((n, m), dtype=np.bool_)
    for i in range(n):
        for j in range(m):
            active[i, j] = Z[i, j] > 0.0
    use_loss = not math.isnan(loss_below)
    use_lin = lin_tol >= 0.0
    below_at = -1  # the loss is evaluated only until it has gone below loss_below
    flips = 0
    k = 0
    code = status.SUCCESS
    while True:
        if below_at < 0 and (not use_loss or iterate_objective(net, P, Z, work) < loss_below):
            below_at = k
        if below_at >= 0 and (use_loss or use_lin) and \
                (not use_lin or abs(_functional(coef, P, offset)) <= lin_tol):
            code = REACHED
            break
        if below_at < 0 and 0 <= deadline_steps <= k:
            code = DEADLINE
            break
        if k >= max_steps:
            break
        if stop[0] != 0:
            code = STOPPED
            break
        if not descent_update(net, descent, P, Z, G, grad, None):
            code = status.NONFINITE
            break
        k += 1
        flips = log_flips(Z, active, k, None, flips)
    out[0] = iterate_objective(net, P, Z, work)
    out[1] = flips
    out[2] = below_at if below_at >= 0 else math.nan
    return code, k


@jit
def descend_batch(net, descent, P0, max_steps, loss_below, deadline_steps, coef, offset, lin_tol, out_P, out_code,
                  out_steps, out_info, stop):
    """:func:`descend_member` for every member ``r`` of ``P0`` (shape ``(R, m, d + 2)``); the final
    states go to ``out_P``, the codes, iterate indices and ``out`` rows to ``out_code``, ``out_steps`` and
    ``out_info`` (shape ``(R, 3)``). Members not started because ``stop[0]`` was set get :data:`STOPPED`."""
    out_code[:] = STOPPED
    for r in range(P0.shape[0]):
        if stop[0] != 0:
            break
        P = P0[r].copy()
        info = np.empty(3)
        code, k = descend_member(net, descent, P, max_steps, loss_below, deadline_steps, coef, offset, lin_tol, info,
                                 stop)
        out_P[r] = P
        out_code[r] = code
        out_steps[r] = k
        out_info[r] = info


@jit
def _stop_in_chunk(coef, offset, lin_tol, use_lin, loss_below, below, out_t, out_h, out_C, out_loss, k, order):
    """Scan the ``k`` steps of a chunk for the stop rule. Returns ``(q, tau, below)``: the step ``q`` and the
    offset ``tau`` inside it where the member stops (``q = -1``: it does not stop in this chunk), and whether the
    loss has gone below ``loss_below`` by the end of the scan."""
    for q in range(k):
        if not below and out_loss[q] < loss_below:
            below = True
        if not below or not use_lin:
            if below:
                return q, 0.0, below
            continue
        g0 = _functional(coef, out_C[q, 0], offset)
        if abs(g0) <= lin_tol:
            return q, 0.0, below
        if abs(_functional_poly(coef, out_C[q], order, out_h[q], offset)) <= lin_tol:
            return q, _first_inside(coef, out_C[q], order, out_h[q], offset, lin_tol), below
    return -1, 0.0, below


@jit
def _count_events(ev_kind, ev_t, e, until, counts):
    """Add the chunk's events with ``ev_t <= until`` to ``counts`` (per kind); return how many."""
    total = 0
    for q in range(e):
        if ev_t[q] <= until:
            counts[ev_kind[q]] += 1
            total += 1
    return total


@jit
def flow_member(net, method, P, active, mode, u_end, u_deadline, max_steps, max_events, loss_below, coef, offset,
                lin_tol, counts, out, stop):
    """The flow from ``P`` (updated in place; ``active`` and ``mode`` as :func:`.driver.integrate_chunk` wants them)
    until the stop rule, ``u_end``, the deadline or a budget. ``net`` and ``method`` are the bundles of
    :mod:`.bundles` as plain tuples (:func:`.bundles.plain`), as :func:`.driver.integrate_chunk` takes them.

    Times are in the integration variable (``s = ln(1 + t)`` with ``log_clock``). ``counts`` (int64, shape
    ``(N_EVENT_KINDS,)``) receives the events per kind; ``out`` (float64, shape ``(6,)``) the time reached, the
    loss there (``ln L`` with ``log_clock``), the number of Taylor steps, the integral ``int |theta'|^2 dt`` up to
    there, the largest inclusion residual of the steps (:func:`.inclusion.inclusion_residual`) and the loss at
    the start (``ln L`` with ``log_clock``): the diagnostics of a single flow, per member.

    Returns
    -------
    code : int
        :data:`REACHED`, :data:`DEADLINE`, a code of :mod:`.status` (``SUCCESS``: ``u_end`` reached), or
        :data:`STOPPED` (``stop[0]`` was set).
    """
    named, how = Network(*net), Method(*method)
    Xa, y, loss_kind, c, leak, bias = named.Xa, named.y, named.loss_kind, named.c, named.leak, named.bias
    train_outer, decay = named.train_outer, named.decay
    order, log_clock, gl_nodes, gl_weights = how.order, how.log_clock, how.gl_nodes, how.gl_weights
    n = Xa.shape[0]
    m, w = P.shape
    drop = np.zeros((n, m), dtype=np.int8)
    clock = np.zeros(3)  # the time, where a converged flow began to coast, the largest inclusion residual
    state = (P, active, mode, drop, clock, np.zeros(2, np.int64), zeno_fields(m, w))  # a plain State
    first = loss_along(Xa, y, loss_kind, c, leak, bias, train_outer, decay, P.reshape((1, m, w)).copy(), log_clock)[0]
    energy = 0.0
    threshold = math.log(loss_below) if log_clock and loss_below > 0.0 else loss_below
    use_lin = lin_tol >= 0.0
    # a linear functional is located inside a step (every coefficient); a loss threshold or no stop rule needs a
    # step's starting state only (27 MB a step less at m = 2000, d = 100)
    kept = order if use_lin else 0
    out_t, out_h = np.empty(_CHUNK_STEPS + 1), np.empty(_CHUNK_STEPS)
    out_loss, out_energy = np.empty(_CHUNK_STEPS + 1), np.empty(_CHUNK_STEPS)
    out_C = np.empty((_CHUNK_STEPS + 1, kept + 1, m, w))
    cap = _CHUNK_EVENTS + 3 * n * m
    ev_t, ev_mult = np.empty(cap), np.empty(cap)
    ev_kind, ev_side = np.empty(cap, np.int8), np.empty(cap, np.int8)
    ev_neuron, ev_sample = np.empty(cap, np.int64), np.empty(cap, np.int64)
    steps_log = (out_t, out_h, out_C, out_loss, out_energy)  # a plain StepLog and EventLog
    events_log = (ev_t, ev_kind, ev_neuron, ev_sample, ev_side, ev_mult)
    below = math.isnan(loss_below)
    watching = use_lin or not below
    steps = 0
    n_events = 0
    code = status.SUCCESS
    while True:
        if stop[0] != 0:
            code = STOPPED
            break
        target = u_deadline if (not below and u_deadline < u_end) else u_end
        kode, k, e = integrate_chunk(net, method, state, target, min(_CHUNK_STEPS, max_steps - steps),
                                     min(_CHUNK_EVENTS, max_events - n_events), steps_log, events_log)
        if watching:
            q, tau, below = _stop_in_chunk(coef, offset, lin_tol, use_lin, threshold, below, out_t, out_h, out_C,
                                           out_loss, k, order)
            if q >= 0:
                horner_state(out_C[q], kept, tau, P)  # tau = 0 without a linear functional
                energy += _chunk_energy(out_energy, q, out_C[q], kept, tau, out_t[q], log_clock, gl_nodes,
                                        gl_weights)
                clock[0] = out_t[q] + tau
                n_events += _count_events(ev_kind, ev_t, e, clock[0], counts)
                steps += q + (1 if tau > 0.0 else 0)
                code = REACHED
                break
        n_events += _count_events(ev_kind, ev_t, e, math.inf, counts)
        energy += _chunk_energy(out_energy, k, out_C[0], kept, 0.0, 0.0, log_clock, gl_nodes, gl_weights)
        steps += k
        if kode != status.RUNNING and kode != status.EVENT_BUFFER_FULL:
            if kode == status.SUCCESS and target < u_end:  # the deadline
                last = loss_along(Xa, y, loss_kind, c, leak, bias, train_outer, decay, P.reshape((1, m, w)).copy(),
                                  log_clock)[0]
                if last < threshold:
                    below = True
                    continue
                code = DEADLINE
                break
            code = kode
            break
        if steps >= max_steps:
            code = status.MAX_STEPS
            break
        if n_events >= max_events:
            code = status.MAX_EVENTS
            break
    last = loss_along(Xa, y, loss_kind, c, leak, bias, train_outer, decay, P.reshape((1, m, w)).copy(), log_clock)[0]
    if code == status.SUCCESS and watching:
        below = below or last < threshold
        if below and (not use_lin or abs(_functional(coef, P, offset)) <= lin_tol):
            code = REACHED
        elif not below and u_deadline <= clock[0]:
            code = DEADLINE
    out[0] = clock[0]
    out[1] = last
    out[2] = steps
    out[3] = energy
    out[4] = clock[2]
    out[5] = first
    return code


@jit
def _chunk_energy(out_energy, q, C, kept, tau, t0, log_clock, gl_nodes, gl_weights):
    """``int |theta'|^2 dt`` over a chunk's first ``q`` steps and, when ``tau > 0``, the part ``[0, tau]`` of step
    ``q`` (Taylor coefficients ``C`` to order ``kept``, starting at ``t0``)."""
    total = 0.0
    for k in range(q):
        total += out_energy[k]
    if tau > 0.0:
        if log_clock:
            total += velocity_energy_log(C, kept, tau, t0, gl_nodes, gl_weights)
        else:
            total += velocity_energy(C, kept, tau)
    return total


@jit
def flow_batch(net, method, P0, active0, mode0, u_end, u_deadline, max_steps, max_events, loss_below, coef, offset,
               lin_tol, out_P, out_code, out_counts, out_info, stop):
    """:func:`flow_member` for every member ``r`` of ``P0`` (shape ``(R, m, d + 2)``, with initial sides
    ``active0`` and modes ``mode0`` of shape ``(R, n, m)``; ``net`` and ``method`` as plain tuples,
    :func:`.bundles.plain`). Members not started because ``stop[0]`` was set get :data:`STOPPED`."""
    out_code[:] = STOPPED
    for r in range(P0.shape[0]):
        if stop[0] != 0:
            break
        P = P0[r].copy()
        active = active0[r].copy()
        mode = mode0[r].copy()
        counts = np.zeros(N_EVENT_KINDS, dtype=np.int64)
        info = np.empty(6)
        code = flow_member(net, method, P, active, mode, u_end, u_deadline, max_steps, max_events, loss_below, coef,
                           offset, lin_tol, counts, info, stop)
        out_P[r] = P
        out_code[r] = code
        out_counts[r] = counts
        out_info[r] = info
