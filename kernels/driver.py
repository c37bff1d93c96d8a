"""The event-driven Taylor integrator: one chunk of steps, called repeatedly by :func:`flowlib.gradient_flow`.

Every (sample, neuron) surface is in one of three modes: ``MODE_FREE`` (the state is in a cell, on one side),
``MODE_HELD`` (the state is kept on the surface: sliding, sticking, or a repelling tie it stays on; see
:mod:`.events`) or ``MODE_VOID`` (``x_i = 0`` without bias: ``z_ij`` is identically 0, there is no surface).

Each step
1. resolves free surfaces whose side disagrees with the sign of ``z_ij`` (the initial state, rounding at the end
   of the previous step) as events at the current time;
2. computes the Taylor coefficients of the state to order ``K`` under the current pattern, with each neuron's
   velocity projected onto its held surfaces (:func:`.series.taylor_coefficients`), and the Taylor coefficients of
   each held surface's Filippov multiplier, ``s_ij = (N_j^+ v_j) / (a_j G_i)``;
3. chooses ``h = rho / e^2 * exp(-0.7 / (K - 1))`` from the last two coefficients with
   ``rho = min_k (|theta|_inf / |theta^[k]|_inf)^(1/k)``, ``k in {K-1, K}`` (Jorba & Zou 2005, the rule heyoka
   uses), so that the local truncation error is about ``tol`` relative to the state: purely relative, because
   the small initialisations of the theory (scale 1e-8) would drown in an absolute tolerance;
4. finds the earliest root in ``(0, h]`` of every free switching polynomial ``z_ij(tau)`` and of every held
   surface's exit polynomials ``a_j G_i (s_ij - beta)``, ``beta in {leak, 1}`` (:func:`.roots.earliest_root`,
   shrinking the bound as roots are found), and truncates the step there. The ``n m`` switching polynomials are
   screened first (:func:`earliest_switching`): their two leading coefficients (one matrix product each) and
   a Cauchy-Schwarz bound on the rest, ``|sum_{k >= 2} z_ij^[k] tau^k| <= |(x_i, 1)| sum_{k >= 2}
   |(w_j, b_j)^[k]| tau^k``, rule out most of them with a few comparisons, and only the others have their
   coefficients computed (``O(K d)`` each), so a step's event search costs ``O(n m)`` and one matrix product
   beyond the Taylor coefficients (which cost two matrix products per order, :func:`.series.taylor_coefficients`);
5. advances the state with the Taylor polynomial (kept as dense output), projects held neurons back onto their
   surfaces (drift correction), and at an event: releases held surfaces whose multiplier reached a bound
   (``slide_end``; they leave tangentially), gathers every free surface reached within ``64 eps h`` and
   classifies each neuron's surfaces with the minimal-norm velocity (:func:`.events.classify_neuron`).
   Surfaces just left are marked so the next root search excludes ``tau = 0`` (and ``tau = 0`` to second order
   after a tangential release): an event never re-fires;
6. records each event instant in the Zeno detector's memory (:mod:`.zeno`) and passes an accumulation of instants
   to its limit (:func:`_zeno_jump`).

Noise floor: near a stationary point the residual weights ``G_i`` shrink towards the noise of the state (its stiff
modes are re-excited at the step's local tolerance every step), and the exit polynomials, whose coefficients are
built from ``G``, then get roots that are noise. Each exit polynomial has a noise band (:func:`_slot_noise`: the
state uncertain by ``max(tol, eps) max|theta|``, propagated to ``G`` and to the multiplier, times ``NOISE_BAND``). A
root of ``s - beta`` is an exit only if the multiplier goes beyond ``beta`` by more than the band within the step
(:func:`_exit_root`): an interior multiplier is never released by noise, and a tangential touch (a double root split
by rounding) does not release either; a release at a bound (:func:`_leaving_bound`) must move out by more than the
band. A square-loss flow whose residuals ``|f(x_i) - y_i|`` are all within ``CONVERGED_ROUNDINGS`` rounding errors
of the outputs (:func:`_converged`) has converged to working precision: it coasts to ``t_end`` in one constant step
(:func:`_coast`, ``clock[1]`` records when). Trajectories whose exits are well above the band are unchanged.

Progress guarantee: every step advances ``t`` by ``h > 0`` representable at ``t`` or ends the chunk with
``NO_PROGRESS``; the step and event budgets end the run otherwise.

Overflow: a NaN or infinite Taylor coefficient, loss (``+inf``/NaN; ``ln L = -inf`` is an exact zero loss),
step energy or state ends the chunk with ``NONFINITE`` before the step is counted, the state left at the step's
(finite) start; so is a ``SUCCESS`` whose final loss is not finite.
"""

import math
from typing import NamedTuple

import numpy as np

from . import status
from ._jit import jit
from .constants import (ADAPTIVE_MARGIN, ADAPTIVE_MIN_ORDER, CONVERGED_ROUNDINGS, DROP_CROSSED,  # noqa: F401
                        DROP_NONE, DROP_RELEASED, LOWEST_ORDER, MIN_ORDER, MODE_FREE, MODE_HELD, MODE_VOID,
                        NOISE_BAND, ORDER_CLIMB, ORDER_MARGIN)
from .inclusion import inclusion_residual
from .events import EVENT_SLIDE_END, EVENT_TIE, EVENT_ZENO, classify_neuron, dependent_columns, without_column
from .roots import STACK, earliest_root, excluded, excluded_linear
from .bundles import EventLog, Method, Network, State, StepLog
from .zeno import aitken, named_zeno, ring_index, zeno_check, zeno_record
from .stepping import STEP_SAFETY, budget_spent, order_needed, taylor_step
from .tolerances import EPS64, EXIT_NOISE, EXIT_SIDE, LINEAR_CLEAR, ON_SURFACE, RADIUS_FLOOR, RADIUS_SAFETY, \
    RCOND, SIMULTANEOUS, STAY as STAY_TOL, ZENO_SNAP
from .series import FLAT_MARGIN, LOSS_SQUARE, SeriesWork, flat_loss_radius, horner_state, log_loss_from_outputs, \
    loss_from_outputs, max_abs, network_loss, penalty, preactivations, residual_weights, series_work, \
    taylor_coefficients, velocity_energy, velocity_energy_log


_EPS = EPS64
#: the Cauchy-Schwarz bound of :func:`switching_radius`, with its margin against rounding
_RADIUS_FACTOR = 1.0 + RADIUS_SAFETY
#: neurons per block of the switching screen (one cache line of a row of ``Z0`` and of ``Z1``)
_SCAN_BLOCK = 8
#: The stages of one pass of :func:`integrate_chunk`'s loop, in order; the mpmath engine
#: (:class:`flowlib.mp.flow._Integrator`) has a method of each name
STAGES = ("_surfaces_reached", "_resolve", "_coasting", "_coast", "_held_series", "_held_surfaces", "_step_size",
          "_noise_bands", "_releases_due", "_released_backwards", "_release", "_locate_events", "_record_step",
          "_advance", "_classify_reached", "_zeno_jump")
#: event kinds, for the Zeno detector's keys
_KINDS = EVENT_ZENO + 1


@jit
def scaled_norm(v):
    """Euclidean norm of a 1-D array without overflow or underflow of the squares."""
    top = 0.0
    acc = 0.0
    for x in v:
        top = max(top, abs(x))
        acc += x * x
    if math.isnan(acc):
        return math.inf
    if top == 0.0 or not math.isfinite(top):
        return top
    if 1e-150 < top < 1e150:
        return math.sqrt(acc)
    acc = 0.0
    for x in v:
        r = x / top
        acc += r * r
    return top * math.sqrt(acc)


@jit
def switching_setup(Xa, C, order, pn, ct_ready):
    """Per step, for the switching functions ``z_ij(tau) = sum_k <p_j^[k], Xa_i> tau^k`` (``p_j = (w_j, b_j)``):
    ``pn[k - 1, j] = |p_j^[k]|``, the norms of the Cauchy-Schwarz bound ``|z_ij^[k]| <= |p_j^[k]| |Xa_i|``
    (:func:`switching_radius`), ``O(order m d)``; and no neuron's coefficients transposed yet (``ct_ready``)."""
    da = Xa.shape[1]
    m = C.shape[1]
    for k in range(order):
        for j in range(m):
            # :func:`scaled_norm`'s sums, without a view of the row per (k, j) (its reference count costs more than
            # the four products of a small network); the rare zero, non-finite or extreme row goes to it
            top = 0.0
            acc = 0.0
            for q in range(da):
                x = C[k + 1, j, q]
                top = max(top, abs(x))
                acc += x * x
            if 1e-150 < top < 1e150 and not math.isnan(acc):
                pn[k, j] = math.sqrt(acc)
            else:
                pn[k, j] = scaled_norm(C[k + 1, j, :da])
    for j in range(m):
        ct_ready[j] = False


@jit
def switching_radius(pn, order, bound, rad):
    """``rad[j] = sum_{k >= 2} |p_j^[k]| bound^k``, with margins for rounding (of that sum, and of ``z_ij^[1]``
    computed by a matrix product): ``|z_ij(tau) - z_ij(0) - z_ij^[1] tau| <= |Xa_i| rad[j]`` on ``[0, bound]``."""
    m = pn.shape[1]
    for j in range(m):
        acc = 0.0
        for k in range(order - 1, 0, -1):
            acc = acc * bound + pn[k, j]
        rad[j] = acc * bound * bound * _RADIUS_FACTOR + RADIUS_FLOOR * pn[0, j] * bound


@jit
def switching_polynomial(Xa, C, Ct, ct_ready, order, Z0, i, j, g):
    """Coefficients ``g[k] = z_ij^[k]`` of one switching polynomial (``g[0]`` from ``Z0``); each is summed over
    the features in order, as :func:`.series.preactivations` does on small problems. ``Ct[j, q, k - 1] =
    C[k, j, q]`` is filled for neuron ``j`` on its first use in the step (then one polynomial is a contiguous
    multiply-add per feature)."""
    da = Xa.shape[1]
    if not ct_ready[j]:
        for k in range(order):
            for q in range(da):
                Ct[j, q, k] = C[k + 1, j, q]
        ct_ready[j] = True
    g[0] = Z0[i, j]
    for k in range(order):
        g[k + 1] = 0.0
    for q in range(da):
        x = Xa[i, q]
        for k in range(order):
            g[k + 1] += Ct[j, q, k] * x
    return g


@jit
def earliest_switching(Xa, C, Ct, ct_ready, pn, xn, order, Z0, Z1, mode, drop, active, bound, rad, work, g, cand,
                       flags):
    """Earliest root in ``(0, bound]`` of every free switching polynomial: ``(bound, found, n_cand)``.

    The bound shrinks as roots are found, as in a plain scan of every polynomial with :func:`.roots.excluded`
    and :func:`.roots.earliest_root`. A pair is first screened with its two leading coefficients ``Z0``, ``Z1``
    (``z_ij(0)`` and ``z_ij'(0)``) and a Cauchy-Schwarz bound on the rest, ``|sum_{k >= 2} z_ij^[k] tau^k| <=
    |Xa_i| sum_{k >= 2} |p_j^[k]| tau^k`` (with a margin of ``LINEAR_CLEAR`` for rounding), one sample's row at a
    time and without branches (the compiler vectorises it): one that provably has no root is skipped, so the screen
    costs ``O(n m + order m)`` plus ``O(order d)`` per pair it cannot rule out (its coefficients, then the exact
    exclusion tests and, rarely, root isolation). Surfaces just crossed or left (``drop > 0``) are always examined.
    The screen's interval is the bound widened by ``SIMULTANEOUS``, so that the pairs it could not rule out
    (``cand[:n_cand]``, flat indices ``i m + j``) hold every surface reached within that of the step's end:
    :func:`reached_switching` examines only those.
    """
    n, m = Z0.shape
    K = order
    found = False
    n_cand = 0
    wide = bound * (1.0 + SIMULTANEOUS)
    switching_radius(pn, K, wide, rad)
    for i in range(n):
        size = xn[i]
        for j in range(m):
            z0 = Z0[i, j]
            z1 = Z1[i, j]
            rest = size * rad[j]
            lead = abs(z0)
            slope = abs(z1) * wide
            end = z0 + z1 * wide
            slack = rest + LINEAR_CLEAR * (lead + slope)
            ruled = (lead > slope + rest) | ((z0 > slack) & (end > slack)) | ((z0 < -slack) & (end < -slack))
            flags[j] = (mode[i, j] == MODE_FREE) & ((drop[i, j] != DROP_NONE) | (not ruled))
        for j in range(m):
            if not flags[j]:
                continue
            cand[n_cand] = i * m + j
            n_cand += 1
            switching_polynomial(Xa, C, Ct, ct_ready, K, Z0, i, j, g)
            vanish = _vanishing_terms(Z1[i, j], pn[0, j] * size, drop[i, j], active[i, j])
            if excluded(g, K, bound, vanish) or excluded_linear(g, K, bound, vanish):
                continue
            tau = earliest_root(g, K, bound, vanish, work)
            if tau <= bound:
                found = True
                bound = tau
                wide = bound * (1.0 + SIMULTANEOUS)
                switching_radius(pn, K, wide, rad)
    return bound, found, n_cand


@jit
def reached_switching(Xa, C, Ct, ct_ready, pn, xn, order, Z0, Z1, drop, active, reach, hit, work, g, cand, n_cand):
    """``hit[i, j]``: the free switching polynomial has a root in ``(0, reach]``, for ``reach`` at most the final
    bound of :func:`earliest_switching` widened by ``SIMULTANEOUS`` on the same step: only the pairs its screen could
    not rule out, ``cand[:n_cand]``, can have one."""
    n, m = Z0.shape
    hit[:, :] = False
    for c in range(n_cand):
        i = cand[c] // m
        j = cand[c] - i * m
        switching_polynomial(Xa, C, Ct, ct_ready, order, Z0, i, j, g)
        vanish = _vanishing_terms(Z1[i, j], pn[0, j] * xn[i], drop[i, j], active[i, j])
        if excluded(g, order, reach, vanish) or excluded_linear(g, order, reach, vanish):
            continue
        hit[i, j] = earliest_root(g, order, reach, vanish, work) <= reach


@jit
def _vanishing_terms(z1, bound, drop, up):
    """How many leading coefficients of ``z_ij``'s polynomial the root search divides out (``drop`` of
    :func:`.roots.earliest_root`), for ``z1 = z_ij'(0)``, ``bound``, the screen's Cauchy-Schwarz bound of it
    (``pn[0, j] xn[i]``: ``|p_j'| |Xa_i|``), and ``up``, the side the surface is on (``z_ij > 0``).

    A surface crossed at this instant has ``z_ij(0) = 0`` (1). One released at this instant is left tangentially
    (``z_ij`` and ``z_ij'`` vanish: 2) when its multiplier reached a bound of its own; but the surfaces of a class
    on one hyperplane (duplicate, antipodal or collinear samples) are released together with every slope of the
    class set to the side's, which can leave the neuron a genuine normal velocity, towards that side. ``z_ij'(0)``
    then counts: it is a zero below ``STAY_TOL`` of the neuron's speed times the normal's size (not of the dot
    product's own terms, which are all rounding where the neuron does not move along that normal) and when it
    points back across the surface, where a release cannot send the state (a neuron whose whole velocity is rounding,
    held only by the residual of a sample fitted exactly, has a normal velocity of either sign; a genuine one that
    points back is the inconsistency :func:`_released_backwards` re-classifies); otherwise only ``z_ij(0)`` vanishes
    (1), and a search that divided it out would find a root of ``z_ij / tau^2`` that ``z_ij`` does not have.
    """
    if drop == DROP_RELEASED and abs(z1) > STAY_TOL * bound and (z1 > 0.0) == up:
        return DROP_CROSSED
    return drop


@jit
def slopes_from_state(active, mode, leak, S):
    """``S[i, j]``: 1 on the active side, ``leak`` on the other, 0 on held or void surfaces (their ``z = 0``)."""
    n, m = active.shape
    for i in range(n):
        for j in range(m):
            if mode[i, j] != MODE_FREE:
                S[i, j] = 0.0
            else:
                S[i, j] = 1.0 if active[i, j] else leak


@jit
def slopes_of_neuron(active, mode, leak, j, S):
    """:func:`slopes_from_state` for neuron ``j``'s column alone (after its surfaces were classified)."""
    for i in range(active.shape[0]):
        if mode[i, j] != MODE_FREE:
            S[i, j] = 0.0
        else:
            S[i, j] = 1.0 if active[i, j] else leak


@jit
def build_constraints(Xa, bias, mode, cons_offset, prev):
    """Held surfaces grouped by neuron: fills ``cons_offset`` (m + 1,), returns (samples, neurons, pinv rows,
    dependent flags, null, proj): ``null`` (per slot) is the null vector of a neuron's normals where they have a
    one-dimensional null space (:func:`null_vector`), 0 elsewhere; ``proj`` (``slots, n``) holds
    ``<pinv row, Xa_k>`` for every sample ``k``, each a sum in increasing column order, which the multiplier's
    series (:func:`_multiplier_series`) and its noise band (:func:`_slot_sums`) read at every step.

    ``prev`` is what the last call returned (:func:`no_surfaces` where there is none). Where the held surfaces are
    still its slots, ``prev`` itself is returned (:func:`_same_slots`); otherwise a neuron held on the same samples
    as then keeps its rows of ``pinv``, ``dependent``, ``null`` and ``proj``, which depend on nothing else
    (:func:`_kept_rows`), and only the neurons whose held samples changed get the SVDs and the products again. Where
    many surfaces are held for many steps (sliding on real data) those SVDs had been about a sixth of a step, and
    the products, recomputed by both readers, another sixth."""
    n, m = mode.shape
    da = Xa.shape[1]
    d = da - 1
    cons_offset[:] = 0
    for i in range(n):  # held surfaces per neuron, counted in memory order
        for j in range(m):
            cons_offset[j + 1] += mode[i, j] == MODE_HELD
    for j in range(m):
        cons_offset[j + 1] += cons_offset[j]
    total = cons_offset[m]
    if _same_slots(prev, mode, cons_offset):  # most steps: the last call's value, nothing to allocate or copy
        return prev
    samples = np.empty(total, np.int64)
    neurons = np.empty(total, np.int64)
    pinv = np.zeros((total, da))
    dependent = np.zeros(total, np.bool_)
    null = np.zeros(total)
    proj = np.empty((total, n))
    if total == 0:  # no slots, and nothing of the last call to look up
        return samples, neurons, pinv, dependent, null, proj
    prev_start = _slot_starts(prev[1], m)
    for j in range(m):
        q0 = cons_offset[j]
        q = cons_offset[j + 1] - q0
        if q == 0:
            continue
        p = 0
        for i in range(n):
            if mode[i, j] == MODE_HELD:
                samples[q0 + p] = i
                neurons[q0 + p] = j
                p += 1
        if _kept_rows(prev, prev_start[j], prev_start[j + 1], samples, q0, q, pinv, dependent, null, proj):
            continue
        N = np.zeros((da, q))
        for p in range(q):
            for r in range(d):
                N[r, p] = Xa[samples[q0 + p], r]
            N[d, p] = 1.0 if bias else 0.0
        rows = np.linalg.pinv(N, RCOND)
        for p in range(q):
            for r in range(da):
                pinv[q0 + p, r] = rows[p, r]
            _row_products(Xa, pinv[q0 + p], proj[q0 + p])
        # a normal in the span of the others (duplicate or antipodal samples): the split of the multipliers
        # among them is not unique, so their individual exits are not events
        dependent_columns(N, dependent[q0:q0 + q])
        if np.any(dependent[q0:q0 + q]):
            null_vector(N, dependent[q0:q0 + q], null[q0:q0 + q])
    return samples, neurons, pinv, dependent, null, proj


@jit
def _same_slots(prev, mode, cons_offset):
    """Whether the held surfaces of ``mode`` (counted per neuron in ``cons_offset``) are the slots of ``prev``
    (:func:`build_constraints`'s last value), neuron by neuron and sample by sample: then every row of it is
    what a rebuild would give, and it is returned as it is (no array of it is written after it was built)."""
    last_samples, last_neurons = prev[0], prev[1]
    n, m = mode.shape
    if len(last_samples) != cons_offset[m]:
        return False
    for j in range(m):
        slot = cons_offset[j]
        if slot == cons_offset[j + 1]:
            continue
        for i in range(n):
            if mode[i, j] == MODE_HELD:
                if last_samples[slot] != i or last_neurons[slot] != j:
                    return False
                slot += 1
    return True


@jit
def _row_products(Xa, row, out):
    """``out[k] = <row, Xa_k>`` for every sample ``k``, each sum over the columns in increasing order."""
    n, da = Xa.shape
    for k in range(n):
        acc = 0.0
        for q in range(da):
            acc += row[q] * Xa[k, q]
        out[k] = acc


@jit
def no_surfaces(da):
    """The value of :func:`build_constraints` with no surface held (its ``prev`` where there was no last call)."""
    return (np.empty(0, np.int64), np.empty(0, np.int64), np.zeros((0, da)), np.zeros(0, np.bool_),
            np.zeros(0), np.zeros((0, 0)))


@jit
def _slot_starts(neurons, m):
    """``start`` (``m + 1``): the slots of neuron ``j`` are ``start[j]..start[j + 1] - 1`` in ``neurons`` (grouped
    by neuron, in increasing order)."""
    start = np.zeros(m + 1, np.int64)
    for s in range(len(neurons)):
        start[neurons[s] + 1] += 1
    for j in range(m):
        start[j + 1] += start[j]
    return start


@jit
def _kept_rows(prev, lo, hi, samples, q0, q, pinv, dependent, null, proj):
    """Whether the neuron's slots ``q0..q0 + q - 1`` (held ``samples``) are those of slots ``lo..hi - 1`` of
    ``prev`` (:func:`build_constraints`'s last value), sample for sample; if so their rows of ``pinv``,
    ``dependent``, ``null`` and ``proj`` are copied from it."""
    last_samples, _, last_pinv, last_dependent, last_null, last_proj = prev
    kept = hi - lo == q
    if kept:
        for p in range(q):
            kept = kept and last_samples[lo + p] == samples[q0 + p]
    if kept:
        for p in range(q):
            for r in range(pinv.shape[1]):
                pinv[q0 + p, r] = last_pinv[lo + p, r]
            dependent[q0 + p] = last_dependent[lo + p]
            null[q0 + p] = last_null[lo + p]
            for k in range(proj.shape[1]):
                proj[q0 + p, k] = last_proj[lo + p, k]
    return kept


@jit
def null_vector(N, dependent, z):
    """``z`` (``q``): with ``p`` the first dependent column of ``N`` (``da, q``), ``z_p = 1`` and ``N z = 0``, when
    ``N``'s null space is one-dimensional (the columns other than ``p`` independent); all 0 otherwise. Entries of
    the columns that are not ``dependent`` are 0 (their multipliers are unique).

    With a one-dimensional null space (an antipodal or duplicate pair of samples, three collinear ones) the splits
    of the held multipliers form a segment, ``x = x_p + mu z`` (``x_k = G_k s_k``, ``x_p`` the minimum-norm split),
    and the neuron can hold while the segment meets the box (:func:`_group_exits`)."""
    q = N.shape[1]
    for r in range(q):
        z[r] = 0.0
    p = 0
    while not dependent[p]:
        p += 1
    others = without_column(N, p)
    flags = np.zeros(q - 1, np.bool_)
    dependent_columns(others, flags)
    if np.any(flags):
        return
    coef = np.linalg.lstsq(others, N[:, p].copy(), RCOND)[0]
    col = 0
    for r in range(q):
        if r == p:
            z[r] = 1.0
        else:
            z[r] = -coef[col] if dependent[r] else 0.0
            col += 1


@jit
def _project_onto_surfaces(Xa, bias, P, samples, neurons, pinv):
    """Drift correction: put each held neuron's ``(w_j, b_j)`` back on the intersection of its held surfaces."""
    da = Xa.shape[1]
    d = da - 1
    total = len(samples)
    coef = np.empty(total)
    for slot in range(total):
        j = neurons[slot]
        acc = 0.0
        for r in range(da):
            acc += pinv[slot, r] * P[j, r]
        coef[slot] = acc
    for slot in range(total):
        i, j = samples[slot], neurons[slot]
        for r in range(d):
            P[j, r] -= coef[slot] * Xa[i, r]
        if bias:
            P[j, d] -= coef[slot]


@jit
def _log(events, n_ev, t, kind, j, i, side, mult):
    """Write event ``n_ev`` of the :class:`.bundles.EventLog`; return the count after it."""
    events.t[n_ev] = t
    events.kind[n_ev] = kind
    events.neuron[n_ev] = j
    events.sample[n_ev] = i
    events.side[n_ev] = side
    events.mult[n_ev] = mult
    return n_ev + 1


@jit
def _resolve(net, method, state, ws, t, events, n_ev):
    """Classify, per neuron, the surfaces in ``ws.hit`` together with the others the neuron sits on; update the
    modes, the pattern (``state`` and the slopes ``ws.S``, column by column) and the log. ``ws.forced[i, j] = +-1``
    releases a held surface to that side (its multiplier left ``[leak, 1]``). The residual weights come from the
    pre-activations of ``state.P`` in ``ws.series.Z0`` (:func:`.series.residual_weights`); a release is counted in
    ``ws.released`` (see :func:`_released_backwards`). Returns ``(status, n_ev)``."""
    Xa, y, loss_kind, c, leak, bias = net.Xa, net.y, net.loss_kind, net.c, net.leak, net.bias
    P, active, mode, drop = state.P, state.active, state.mode, state.drop
    S, hit, forced = ws.S, ws.hit, ws.forced
    side, stay, kind, mult, G, surface, any_hit = ws.marks
    n, m = hit.shape
    residual_weights(ws.series.Z0, P, S, y, loss_kind, c, method.log_clock, t, G)
    any_hit[:] = False
    for i in range(n):
        for j in range(m):
            any_hit[j] |= hit[i, j]
    for j in range(m):
        if not any_hit[j]:
            continue
        for i in range(n):
            surface[i, j] = hit[i, j] or mode[i, j] == MODE_HELD or (
                mode[i, j] == MODE_FREE and drop[i, j] == DROP_CROSSED)
        code = classify_neuron(Xa, G, P, S, leak, bias, j, surface, forced, method.caratheodory, method.selection,
                               method.tie_policy, side, stay, kind, mult)
        if code != status.RUNNING:
            return code, n_ev
        for i in range(n):
            if not surface[i, j]:
                continue
            if stay[i]:
                if mode[i, j] != MODE_HELD:
                    mode[i, j] = MODE_HELD
                    n_ev = _log(events, n_ev, t, kind[i], j, i, 0, mult[i])
                drop[i, j] = DROP_NONE
                continue
            new_active = side[i] > 0
            if mode[i, j] == MODE_HELD:
                mode[i, j] = MODE_FREE
                active[i, j] = new_active
                n_ev = _log(events, n_ev, t, EVENT_SLIDE_END, j, i, side[i], mult[i])
            elif new_active != active[i, j]:
                active[i, j] = new_active
                n_ev = _log(events, n_ev, t, kind[i], j, i, side[i], mult[i] if kind[i] == EVENT_TIE else math.nan)
            if forced[i, j] != 0:
                drop[i, j] = DROP_RELEASED
                ws.released[0] += 1
            else:
                drop[i, j] = DROP_CROSSED
        slopes_of_neuron(active, mode, leak, j, S)
    return status.RUNNING, n_ev


@jit
def _exit_root(num, den, slot, order, beta, bound, span, noise, work, poly, band):
    """Earliest root of ``num[:, slot] - beta * den[:, slot]`` (degree ``order``) in ``(0, bound]``, or inf.

    ``noise`` is the half-width of the exit polynomial's noise band (:func:`_slot_noise`): a root is an exit only if
    the multiplier goes beyond ``beta`` by more than that somewhere in ``(0, span]`` (``span``: the whole Taylor
    step, at least ``bound``), :func:`_beyond_band`; a smaller excursion is rounding or a tangency (a double root of
    ``s - beta`` split by rounding) and the surface stays held. A multiplier that starts beyond ``beta`` inside the
    band exits where it leaves the band outwards (its return inside is no exit).
    """
    size_h = 0.0
    size_den = 0.0
    p = 1.0
    for k in range(order + 1):
        poly[k] = num[k, slot] - beta * den[k, slot]
        size_h = max(size_h, abs(poly[k]) * p)
        size_den = max(size_den, abs(den[k, slot]) * p)
        p *= bound
    if size_h <= EXIT_NOISE * size_den:
        return math.inf
    # a multiplier starting on this bound (sticking) leaves it only through a later root, and only if it moves
    # measurably (more than STAY_TOL) within the step
    on_bound = abs(poly[0]) <= EXIT_NOISE * abs(den[0, slot])
    if on_bound:
        drift = 0.0
        p = bound
        for k in range(1, order + 1):
            drift = max(drift, abs(poly[k]) * p)
            p *= bound
        if drift <= STAY_TOL * size_den:
            return math.inf
    out = _outward(den, slot, beta)
    if not on_bound and out * poly[0] > 0.0 and noise > 0.0:
        if out * poly[0] > noise:
            return math.inf  # beyond the band: released at the step's start (:func:`_outside_band`)
        # beyond the bound, inside the noise band: the exit is where the excursion leaves the band
        for k in range(order + 1):
            band[k] = out * poly[k]
        band[0] -= noise
        return earliest_root(band, order, bound, 0, work)
    tau = earliest_root(poly, order, bound, on_bound, work)
    if tau <= bound and not _beyond_band(poly, order, out, noise, span, work, band):
        return math.inf
    return tau


@jit
def _outward(den, slot, beta):
    """Sign ``o`` with ``o (num - beta den) > 0`` exactly when the multiplier ``s = num / den`` is beyond ``beta``
    (outside ``[leak, 1]``), from the sign of ``den = G_i`` at the step's start; 0 when ``den`` vanishes."""
    if den[0, slot] == 0.0:
        return 0.0
    up = 1.0 if beta == 1.0 else -1.0
    return up if den[0, slot] > 0.0 else -up


@jit
def _beyond_band(poly, order, out, noise, span, work, band):
    """Whether the exit polynomial ``poly`` (oriented by ``out``, :func:`_outward`) goes beyond the bound by more than
    ``noise`` somewhere in ``(0, span]``: a root of ``out * poly - noise``. Always true without a noise band."""
    if noise <= 0.0 or out == 0.0:
        return True
    for k in range(order + 1):
        band[k] = out * poly[k]
    band[0] -= noise
    if band[0] > 0.0:
        return True
    return earliest_root(band, order, span, 0, work) <= span


@jit
def _leaving_bound(num, den, slot, beta, h, noise):
    """Whether the multiplier ``s = num / den`` of ``slot`` sits on ``beta`` (to rounding) and moves out of
    ``[leak, 1]`` through it, by more than ``STAY_TOL`` over the step ``h`` (``s' = (num' - beta den') / den``) and,
    to first order, by more than the exit polynomial's noise band ``noise``."""
    value = num[0, slot] - beta * den[0, slot]
    if den[0, slot] == 0.0 or abs(value) > EXIT_NOISE * abs(den[0, slot]):
        return False
    rate = (num[1, slot] - beta * den[1, slot]) / den[0, slot]
    if abs(rate) * h <= STAY_TOL:
        return False
    if abs(num[1, slot] - beta * den[1, slot]) * h <= noise:
        return False
    return rate > 0.0 if beta == 1.0 else rate < 0.0


@jit
def _outside_band(num, den, slot, beta, noise):
    """Whether the multiplier of ``slot`` starts beyond ``beta`` by more than the noise band ``noise`` of its exit
    polynomial (a held surface the state must leave now; only a multiplier kept beyond the bound inside the band,
    :func:`_exit_root`, can get there). A multiplier on the bound to rounding (``EXIT_NOISE``, as in
    :func:`_exit_root`) is not beyond it, however narrow the band: a sticking neuron whose other samples do not move
    its multiplier has a band of nearly 0, and the sign of its exit polynomial's rounding must not release it."""
    if noise <= 0.0:
        return False
    value = num[0, slot] - beta * den[0, slot]
    if abs(value) <= EXIT_NOISE * abs(den[0, slot]):
        return False
    return _outward(den, slot, beta) * value > noise


@jit
def _slot_bounds(den, r, positive, leak):
    """``(beta_lo, beta_hi)``: the slopes of slot ``r`` at which ``w G_r s_r`` (a weight ``w`` of sign
    ``positive``) is smallest and largest over ``s_r`` in ``[leak, 1]``, from the sign of ``G_r = den[0, r]`` at
    the step's start."""
    if positive == (den[0, r] >= 0.0):
        return leak, 1.0
    return 1.0, leak


@jit
def _normal_entry(Xa, bias, i, q):
    """Entry ``q`` of sample ``i``'s normal ``(x_i, 1)`` (``(x_i, 0)`` without bias)."""
    return Xa[i, q] if (q < Xa.shape[1] - 1 or bias) else 0.0


@jit
def parallel_classes(Xa, bias, samples, dependent, lo, hi, rep, rho):
    """Whether the dependence among slots ``lo..hi - 1`` (one neuron's held surfaces) is that of parallel normals
    only: every dependent slot parallel to another (duplicate samples; antipodal or collinear ones without bias),
    and one representative per class with the independent slots independent. Fills ``rep`` (the representative's
    slot; -1 for an independent slot, -2 for a zero normal, whose multiplier acts on nothing) and ``rho``
    (``n_r = rho_r n_rep``)."""
    da = Xa.shape[1]
    for p in range(lo, hi):
        rep[p] = -1
        rho[p] = 0.0
    for p in range(lo, hi):
        if not dependent[p] or rep[p] != -1:
            continue
        ip = samples[p]
        norm2 = 0.0
        for q in range(da):
            norm2 += _normal_entry(Xa, bias, ip, q) ** 2
        if norm2 == 0.0:
            rep[p] = -2
            continue
        rep[p] = p
        rho[p] = 1.0
        partners = 0
        for r in range(p + 1, hi):
            if not dependent[r] or rep[r] != -1:
                continue
            ir = samples[r]
            dot = 0.0
            own = 0.0
            for q in range(da):
                dot += _normal_entry(Xa, bias, ir, q) * _normal_entry(Xa, bias, ip, q)
                own += _normal_entry(Xa, bias, ir, q) ** 2
            ratio = dot / norm2
            resid = 0.0
            for q in range(da):
                resid += (_normal_entry(Xa, bias, ir, q) - ratio * _normal_entry(Xa, bias, ip, q)) ** 2
            if own > 0.0 and math.sqrt(resid) <= STAY_TOL * math.sqrt(own):
                rep[r] = p
                rho[r] = ratio
                partners += 1
        if partners == 0:
            return False
    cols = 0
    for p in range(lo, hi):
        cols += rep[p] == -1 or rep[p] == p
    N = np.zeros((da, cols))
    c = 0
    for p in range(lo, hi):
        if rep[p] == -1 or rep[p] == p:
            for q in range(da):
                N[q, c] = _normal_entry(Xa, bias, samples[p], q)
            c += 1
    flags = np.zeros(cols, np.bool_)
    dependent_columns(N, flags)
    return not np.any(flags)


@jit
def _group_exits(net, samples, dependent, null, den, cons_offset):
    """The combined exit polynomials of the neurons held on dependent hyperplanes, as ``(offset, slot, weight,
    beta)``: combination ``c`` is ``gap = sum_e weight_e (num - beta_e den)[slot_e]`` over its entries
    ``offset[c]..offset[c + 1] - 1``, non-negative while the neuron can hold (``x_k = G_k s_k`` has a split with
    every ``s_k`` in ``[leak, 1]``).

    Parallel classes (:func:`parallel_classes`): only ``c* = sum rho_k x_k`` is determined (``x^+``, the
    minimum-norm split, gives it), and it must lie between the smallest and largest ``sum rho_k G_k s_k``: two
    combinations per class. Otherwise, a one-dimensional null space ``z`` (:func:`null_vector`): the splits are
    ``x^+ + mu z``, slot ``k`` allows ``mu`` in ``[L_k, U_k]``, and ``U_l - L_k`` is one combination per ordered
    pair. Larger null spaces get none (their neuron is re-classified every step, :func:`_held_surfaces`)."""
    if not np.any(dependent):  # the common case, every step: no combination
        return np.zeros(1, np.int64), np.empty(0, np.int64), np.empty(0), np.empty(0)
    Xa, bias, leak = net.Xa, net.bias, net.leak
    n_slots = len(samples)
    m = len(cons_offset) - 1
    rep = np.full(n_slots, -1, np.int64)
    rho = np.zeros(n_slots)
    mode = np.zeros(m, np.int64)  # 0: none, 1: classes, 2: pairs
    entries = 0
    combos = 0
    for j in range(m):
        lo, hi = cons_offset[j], cons_offset[j + 1]
        if not np.any(dependent[lo:hi]):
            continue
        if parallel_classes(Xa, bias, samples, dependent, lo, hi, rep, rho):
            mode[j] = 1
            for p in range(lo, hi):
                if rep[p] == p:
                    combos += 2
                if rep[p] >= 0:
                    entries += 2
        elif np.any(null[lo:hi] != 0.0):
            mode[j] = 2
            q = 0
            for p in range(lo, hi):
                q += null[p] != 0.0
            combos += q * (q - 1)
            entries += 2 * q * (q - 1)
    offset = np.zeros(combos + 1, np.int64)
    slot = np.empty(entries, np.int64)
    weight = np.empty(entries)
    beta = np.empty(entries)
    c = 0
    e = 0
    for j in range(m):
        lo, hi = cons_offset[j], cons_offset[j + 1]
        if mode[j] == 1:
            for p in range(lo, hi):
                if rep[p] != p:
                    continue
                for side in range(2):  # c* - min >= 0, then max - c* >= 0
                    for r in range(lo, hi):
                        if rep[r] == p:
                            slot[e] = r
                            weight[e] = rho[r] if side == 0 else -rho[r]
                            beta[e] = _slot_bounds(den, r, rho[r] > 0.0, leak)[side]
                            e += 1
                    c += 1
                    offset[c] = e
        elif mode[j] == 2:
            for k in range(lo, hi):
                for l in range(lo, hi):
                    if k == l or null[k] == 0.0 or null[l] == 0.0:
                        continue
                    slot[e] = k
                    weight[e] = 1.0 / null[k]
                    beta[e] = _slot_bounds(den, k, null[k] > 0.0, leak)[0]
                    slot[e + 1] = l
                    weight[e + 1] = -1.0 / null[l]
                    beta[e + 1] = _slot_bounds(den, l, null[l] > 0.0, leak)[1]
                    e += 2
                    c += 1
                    offset[c] = e
    return offset, slot, weight, beta


@jit
def _group_gap(held, c, order):
    """Combination ``c`` of :func:`_group_exits` as an exit polynomial: ``(gap, scale, noise)``, the gap's Taylor
    coefficients (``order + 1, 1``), the scale ``sum |weight G|`` (as a constant polynomial) its rounding is relative
    to, and its noise band (the slots' bands, weighted alike)."""
    gap = np.zeros((order + 1, 1))
    scale = np.zeros((order + 1, 1))
    noise = 0.0
    for e in range(held.group_offset[c], held.group_offset[c + 1]):
        r, w, b = held.group_slot[e], held.group_weight[e], held.group_beta[e]
        for o in range(order + 1):
            gap[o, 0] += w * (held.num[o, r] - b * held.den[o, r])
        scale[0, 0] += abs(w * held.den[0, r])
        noise += abs(w) * max(held.band[r, 0], held.band[r, 1])
    return gap, scale, noise


@jit
def _group_exit(held, c, order, bound, span, work, poly, band):
    """Earliest root in ``(0, bound]`` at which combination ``c`` of :func:`_group_exits` becomes negative (the
    neuron can no longer hold on its dependent hyperplanes), searched by :func:`_exit_root` with the same noise
    band and tangency rules; ``inf`` when there is none."""
    gap, scale, noise = _group_gap(held, c, order)
    # beta = 0 with a positive scale: the gap is "beyond its bound" when negative (:func:`_outward`)
    return _exit_root(gap, scale, 0, order, 0.0, bound, span, noise, work, poly, band)


@jit
def _group_leaving(held, c, order, h):
    """Whether combination ``c`` releases its surfaces at the step's start, as a single multiplier would
    (:func:`_leaving_bound`, :func:`_outside_band`): its gap is 0 to rounding and decreases by more than
    ``STAY_TOL`` of its scale over the step ``h`` and by more than its noise band, or it is negative by more than
    the band (a neuron held where no split fits, as one started on its hyperplanes with ``a_j = 0``)."""
    gap, scale, noise = _group_gap(held, c, order)
    if abs(gap[0, 0]) <= EXIT_NOISE * scale[0, 0]:
        return gap[1, 0] * h < -STAY_TOL * scale[0, 0] and abs(gap[1, 0]) * h > noise
    return noise > 0.0 and -gap[0, 0] > noise


@jit
def _group_exits_due(held, C, order, bound, span, work, poly, band, reach, hit, forced, h):
    """The earliest root of every combination (:func:`_group_exit`) in ``(0, bound]``; with ``hit`` (at an event),
    every combination whose root is within ``reach`` has its surfaces hit, each forced to the side its slope's
    bound leaves to (:func:`_exit_side` at ``h``). Returns the earliest root (``inf`` if none)."""
    earliest = math.inf
    for c in range(len(held.group_offset) - 1):
        tau = _group_exit(held, c, order, bound, span, work, poly, band)
        earliest = min(earliest, tau)
        if hit is not None and tau <= reach:
            for e in range(held.group_offset[c], held.group_offset[c + 1]):
                r = held.group_slot[e]
                hit[held.samples[r], held.neurons[r]] = True
                forced[held.samples[r], held.neurons[r]] = _exit_side(held, C, r, order, h, held.group_beta[e])
    return earliest


@jit
def _reach(Xa, i, bias):
    """``|(x_i, 1)|_1`` (``|x_i|_1`` without bias): how far a unit change of every weight moves ``z_ij``."""
    da = Xa.shape[1]
    reach = 0.0
    for q in range(da):
        reach += abs(Xa[i, q]) if (q < da - 1 or bias) else 0.0
    return reach


@jit
def _residual_noise(Xa, y, S, P, Z, reach, loss_kind, c, G0, log_clock, t, state_noise, out):
    """``out[i]``: the noise of the residual weight ``G_i`` when every coordinate of the state is uncertain by
    ``state_noise`` (the step's local tolerance, or rounding): ``|dG_i/df_i| sum_j |s_ij| (|a_j| |(x_i, 1)|_1 +
    |z_ij|) state_noise``, with ``dG/df = c`` for the square loss (``c e^s`` in the log clock) and ``|y_i G_i|`` for
    exp and logistic (whose residual weights have a relative, not an absolute, noise); ``reach[i] = |(x_i, 1)|_1``
    (:func:`_reach`)."""
    n, da = Xa.shape
    m = P.shape[0]
    for i in range(n):
        acc = 0.0
        for j in range(m):
            acc += abs(S[i, j]) * (abs(P[j, da]) * reach[i] + abs(Z[i, j]))
        if loss_kind == LOSS_SQUARE:
            out[i] = c * acc * state_noise * (math.exp(t) if log_clock else 1.0)
        else:
            out[i] = abs(y[i] * G0[i]) * acc * state_noise


@jit
def _slot_noise(Xa, S, P, G0, gnoise, pinv, slot, i, j, state_noise, beta):
    """Half-width of the noise band of the exit polynomial ``num - beta den`` of ``slot`` (surface ``i`` of neuron
    ``j``, :func:`_multiplier_series`): ``NOISE_BAND`` times the noise of ``num = -sum_k s_kj G_k <pinv, (x_k, 1)>``
    plus ``|beta|`` times that of ``den = G_i``, from the residual weights' noise ``gnoise``; plus the state's
    uncertainty ``state_noise`` in ``a_j`` relative to ``|a_j|`` on both (``NOISE_BAND`` was calibrated on
    ``a_j (num - beta den)``, whose band this is divided by ``|a_j|``); at ``a_j = 0`` without that term."""
    proj = np.empty((1, Xa.shape[0]))
    _row_products(Xa, pinv[slot], proj[0])
    spread, value = _slot_sums(S, G0, gnoise, proj, 0, j)
    return _slot_band(abs(P[j, Xa.shape[1]]), spread, value, gnoise[i], G0[i], state_noise, beta)


@jit
def _slot_sums(S, G0, gnoise, proj, slot, j):
    """The sums over the neuron's free samples behind both noise bands of ``slot`` (:func:`_slot_noise`):
    ``(sum_k |s_kj <pinv, (x_k, 1)>| gnoise_k, sum_k |s_kj <pinv, (x_k, 1)> G_k|)``, the products ``<pinv, (x_k,
    1)>`` being ``proj[slot]`` (:func:`build_constraints`)."""
    n = S.shape[0]
    spread = 0.0
    value = 0.0
    for k in range(n):
        s = S[k, j]
        if s == 0.0:
            continue
        p = proj[slot, k]
        spread += abs(s * p) * gnoise[k]
        value += abs(s * p * G0[k])
    return spread, value


@jit
def _slot_band(a, spread, value, gnoise_i, g_i, state_noise, beta):
    """:func:`_slot_noise` from :func:`_slot_sums`, for ``|a_j| = a`` and the held sample's ``G_i = g_i``."""
    relative = state_noise / a if a > 0.0 else 0.0
    return NOISE_BAND * (spread + relative * value + abs(beta) * (gnoise_i + relative * abs(g_i)))


@jit
def _released_backwards(Xa, C, K, h, bias, active, mode, drop, reheld, neuron_scale, hit, poly, work):
    """Surfaces released at this instant whose switching polynomial leaves to the other side: ``hit`` them.

    A held surface whose multiplier reaches a bound is released to the side its own exit polynomial gives
    (:func:`_exit_side`), decided on the series of the configuration before the instant's releases. Its normal
    velocity vanishes there to first order, so the side is a higher-order fact of the field, and the other
    releases of the same instant (neurons on the same hyperplane with the same pattern exit together) change that
    field: with the new step's series the state may move to the other side, into a cell whose slope the step does
    not use. Where ``z_ij`` first leaves the on-surface band ``|z| <= tol`` (the rounding of ``z_ij`` at this
    state) within the step ``h`` it must do so on the side released to; a surface where it does not is
    re-classified in the new configuration, once per instant (``reheld``). Returns whether any was found."""
    n, da = Xa.shape
    m = C.shape[1]
    found = False
    for i in range(n):
        for j in range(m):
            if drop[i, j] != DROP_RELEASED or mode[i, j] != MODE_FREE or reheld[i, j]:
                continue
            tol = ON_SURFACE * _reach(Xa, i, bias) * neuron_scale[j]
            for k in range(1, K + 1):
                z = 0.0
                for q in range(da):
                    z += C[k, j, q] * Xa[i, q]
                poly[k] = z
            poly[0] = -tol
            up = earliest_root(poly, K, h, 0, work)
            poly[0] = tol
            down = earliest_root(poly, K, h, 0, work)
            if min(up, down) <= h and (up < down) != active[i, j]:
                hit[i, j] = True
                reheld[i, j] = True
                found = True
    return found


@jit
def _converged(Xa, y, P, Z, S, bias, neuron_scale):
    """Whether a square-loss flow has converged to working precision: every residual ``|f(x_i) - y_i|`` is at most
    ``CONVERGED_ROUNDINGS`` rounding errors of the output, ``eps (sum_j |s_ij a_j| sum_q |p_jq x_iq| + |y_i|)``
    (``p_j = (w_j, b_j)``, ``x_i`` with its 1). The residual forces are then rounding: what the flow would still do
    is below what the state can represent. A cheap bound (``|p_jq| <= max_q |p_jq|``) rules most states out in
    ``O(m)``."""
    n, da = Xa.shape
    m = P.shape[0]
    for i in range(n):
        reach = _reach(Xa, i, bias)
        f = 0.0
        loose = 0.0
        for j in range(m):
            s = S[i, j]
            if s != 0.0:
                f += s * P[j, da] * Z[i, j]
                loose += abs(s * P[j, da]) * neuron_scale[j]
        residual = abs(f - y[i])
        if not residual <= CONVERGED_ROUNDINGS * _EPS * (loose * reach + abs(y[i])):
            return False
        tight = 0.0
        for j in range(m):
            s = S[i, j]
            if s != 0.0:
                acc = 0.0
                for q in range(da):
                    acc += abs(P[j, q] * Xa[i, q])
                tight += abs(s * P[j, da]) * acc
        if not residual <= CONVERGED_ROUNDINGS * _EPS * (tight + abs(y[i])):
            return False
    return True


@jit
def _exit_side(held, C, slot, order, tau, beta):
    """Side a held surface leaves to when its multiplier ``s = num / den`` crosses ``beta`` at ``tau``.

    The normal velocity on either side is ``u(sigma) = (sigma - s) M`` with ``M = -a_j G_i |n_i|^2``. Sliding
    (``M < 0``) ends upwards at ``s = 1`` and downwards at ``s = leak``; a held repelling tie (``M > 0``) the other
    way round. Where the trained outer weight ``a_j`` (series ``C[:, j, -1]``) vanishes at ``tau`` and ``G_i``
    does not, the sign of ``a_j G_i`` just after ``tau`` is that of ``a_j' G_i``. Returns 0 when ``a_j G_i``
    vanishes otherwise (``s`` is 0/0: no genuine exit; re-classify).
    """
    sign = _sign_at(held.phi[:, slot], order, tau, 0)
    if sign == 0.0:
        j, da = held.neurons[slot], C.shape[2] - 1
        if _sign_at(C[:, j, da], order, tau, 0) == 0.0:
            sign = _sign_at(C[:, j, da], order, tau, 1) * _sign_at(held.den[:, slot], order, tau, 0)
    if sign == 0.0:
        return 0
    return 1 if (beta == 1.0) == (sign > 0.0) else -1


@jit
def _sign_at(coefs, order, tau, derivative):
    """Sign of the polynomial ``coefs`` (degree ``order``; its derivative with ``derivative = 1``) at ``tau``; 0
    where it is rounding, ``EXIT_SIDE`` relative to its Taylor terms there."""
    value = 0.0
    size = 0.0
    p = 1.0
    for k in range(derivative, order + 1):
        term = coefs[k] * p * (k if derivative == 1 else 1)
        value += term
        size = max(size, abs(term))
        p *= tau
    if abs(value) > EXIT_SIDE * size:
        return 1.0 if value > 0.0 else -1.0
    return 0.0


@jit
def _surfaces_reached(net, state, Z0, reach, neuron_scale, hit):
    """Stage 1: ``hit`` the free surfaces the state sits on (to rounding) or whose side disagrees with the sign of
    ``z`` (``Z0``: the pre-activations of ``state.P``, which the stages that move the state keep up to date); return
    whether there is one. Also leaves each neuron's ``max|(w_j, b_j)|`` in ``neuron_scale``.

    "On the surface" is relative to the neuron's own ``(w_j, b_j)``: the rounding of ``z_ij`` is
    ``eps |(w_j, b_j)| |(x_i, 1)|_1`` (``reach[i] = |(x_i, 1)|_1``, :func:`_reach`, computed once per chunk), and a
    neuron far smaller than the others (a dead one) must not be caught by their scale.
    """
    P, active, mode, drop = state.P, state.active, state.mode, state.drop
    n, da = net.Xa.shape
    m = P.shape[0]
    for j in range(m):
        size = 0.0
        for q in range(da):
            size = max(size, abs(P[j, q]))
        neuron_scale[j] = size
    pending = False
    for i in range(n):
        reach_i = ON_SURFACE * reach[i]
        row_hit = False
        for j in range(m):
            z = Z0[i, j]
            up = active[i, j]
            wrong = (up & (z <= 0.0)) | ((not up) & (z >= 0.0))
            flag = (wrong | (abs(z) <= reach_i * neuron_scale[j])) & (mode[i, j] == MODE_FREE) \
                & (drop[i, j] == DROP_NONE)
            hit[i, j] = flag
            row_hit |= flag
        pending = pending or row_hit
    return pending


class Workspace(NamedTuple):
    """Scratch arrays of one chunk, allocated once by :func:`_workspace` and shared by its stages.

    ``series``: the step's Taylor coefficients ``C`` (``K + 1, m, d + 2``), those of the network outputs ``F`` and
    of the residual weights ``G`` (``K + 1, n``), the pre-activations ``Z0`` of the current state and their first
    derivatives ``Z1`` (``n, m``), and the recurrences' scratch (:class:`.series.SeriesWork`);
    ``Ct``, ``ct_ready``, ``pn``, ``rad``, ``poly_g``, ``xn``: the switching screen (:func:`earliest_switching`);
    ``S`` (``n, m``): the slopes of the pattern; ``hit``, ``forced``, ``reheld`` (``n, m``): the surfaces to
    classify at this instant, the side a release forces, and the surfaces re-classified after a release;
    ``work``, ``poly``, ``band``: root isolation; ``gnoise``: the residual weights' noise; ``cons_offset``: the
    held surfaces of each neuron (:func:`build_constraints`); ``neuron_scale``: each neuron's ``max|(w_j, b_j)|``;
    ``marks``: the scratch of :func:`_resolve` (per sample: side, stay, kind, multiplier, residual weight; the
    surfaces of the neurons classified, ``n, m``; which neurons were hit, ``m``); ``released`` (1,): surfaces released
    at this instant (:func:`_released_backwards` has nothing to do without one); ``cand``, ``flags``: the pairs the
    switching screen could not rule out (flat indices ``i m + j``, their count returned) and one row's verdicts;
    ``reach`` (``n``): each sample's ``|(x_i, 1)|_1`` (:func:`_reach`).
    """

    series: SeriesWork
    Ct: np.ndarray
    ct_ready: np.ndarray
    pn: np.ndarray
    rad: np.ndarray
    poly_g: np.ndarray
    xn: np.ndarray
    S: np.ndarray
    hit: np.ndarray
    forced: np.ndarray
    reheld: np.ndarray
    work: np.ndarray
    poly: np.ndarray
    band: np.ndarray
    gnoise: np.ndarray
    cons_offset: np.ndarray
    neuron_scale: np.ndarray
    marks: tuple
    released: np.ndarray
    cand: np.ndarray
    flags: np.ndarray
    reach: np.ndarray


class Held(NamedTuple):
    """The held surfaces of one step, one slot each, grouped by neuron: ``samples``, ``neurons``, the rows of the
    pseudo-inverse of each neuron's normals ``pinv`` (``slots, d + 1``), ``dependent`` (a normal in the span of
    the others) and ``null`` (the null vector of a neuron's normals where it is unique, :func:`null_vector`), the Taylor coefficients (``K + 1, slots``) of the projection coefficients ``Cm`` (output of
    :func:`.series.taylor_coefficients`), of ``phi = a_j G_i`` (whose sign says which way a surface is left) and
    of the multiplier's numerator ``num`` and denominator ``den = G_i`` (``s = num / den = Cm / phi``: the factor
    ``a_j`` divided out, so that ``s`` stays defined where a trained ``a_j`` passes through 0), the half-width
    of each exit polynomial's noise band ``band`` (``slots, 2``: at ``leak`` and at 1), and the combined exit
    polynomials of neurons held on dependent hyperplanes (``group_*``, :func:`_group_exits`)."""

    samples: np.ndarray
    neurons: np.ndarray
    pinv: np.ndarray
    dependent: np.ndarray
    null: np.ndarray
    proj: np.ndarray
    Cm: np.ndarray
    phi: np.ndarray
    num: np.ndarray
    den: np.ndarray
    band: np.ndarray
    group_offset: np.ndarray
    group_slot: np.ndarray
    group_weight: np.ndarray
    group_beta: np.ndarray


@jit
def _workspace(net, method, state):
    """The :class:`Workspace` of a chunk (every array it needs, allocated once)."""
    Xa = net.Xa
    K = method.order
    n, da = Xa.shape
    m = state.P.shape[0]
    xn = np.empty(n)
    reach = np.empty(n)
    for i in range(n):
        xn[i] = scaled_norm(Xa[i]) * _RADIUS_FACTOR
        reach[i] = _reach(Xa, i, net.bias)
    return Workspace(series_work(K, n, m, da, net.Xc.shape[1]), np.empty((m, da, K)),
                     np.zeros(m, np.bool_), np.empty((K, m)), np.empty(m), np.empty(K + 1), xn, np.empty((n, m)),
                     np.zeros((n, m), np.bool_), np.zeros((n, m), np.int8), np.zeros((n, m), np.bool_),
                     np.empty((6, max(K + 1, STACK))), np.empty(K + 1), np.empty(K + 1), np.empty(n),
                     np.zeros(m + 1, np.int64), np.empty(m),
                     (np.zeros(n, np.int8), np.zeros(n, np.bool_), np.zeros(n, np.int8), np.zeros(n), np.empty(n),
                      np.zeros((n, m), np.bool_), np.zeros(m, np.bool_)),
                     np.zeros(1, np.int64), np.empty(n * m, np.int64), np.zeros(m, np.bool_), reach)


@jit
def _held_surfaces(net, state, ws, prev):
    """Stage 2a: the held surfaces as slots, grouped by neuron (:func:`build_constraints`, reusing the last step's
    ``prev`` where a neuron's held samples did not change): ``(samples, neurons, pinv, dependent, null)``. Where a
    neuron is held on dependent hyperplanes (``dependent``), the loop re-classifies it first
    (:func:`_held_dependent`)."""
    Xa, bias, mode, cons_offset = net.Xa, net.bias, state.mode, ws.cons_offset
    return build_constraints(Xa, bias, mode, cons_offset, prev)


@jit
def _held_dependent(net, method, state, ws, t, events, n_ev, surfaces):
    """Stage 2a, dependent hyperplanes (duplicate or antipodal samples): their neurons are re-classified at every
    step, whether some split of their multipliers still fits in ``[leak, 1]`` being decided by the configuration
    search (the exact release of parallel classes and of a one-dimensional null space is an event of its own,
    :func:`_group_exits`; beyond, the release is located to the step, not to machine precision). Returns
    ``(status, n_ev, surfaces)``, the held surfaces after it (:func:`_held_surfaces`)."""
    samples, neurons, _, dependent, _, _ = surfaces
    hit, cons_offset = ws.hit, ws.cons_offset
    hit[:, :] = False
    for slot in range(len(samples)):
        if dependent[slot]:
            for q in range(cons_offset[neurons[slot]], cons_offset[neurons[slot] + 1]):
                hit[samples[q], neurons[q]] = True
    code, n_ev = _resolve(net, method, state, ws, t, events, n_ev)
    if code == status.RUNNING:
        surfaces = _held_surfaces(net, state, ws, surfaces)
    return code, n_ev, surfaces


@jit
def _held_series(net, method, state, ws, t, low, surfaces):
    """Stage 2: the Taylor coefficients of the state with each neuron's velocity projected onto its held surfaces
    ``surfaces`` (:func:`_held_surfaces`; :func:`.series.taylor_coefficients`, into ``ws.series.C``) and those of each
    held surface's multiplier, ``s_ij = num / den`` (:func:`_multiplier_series`), and of ``phi = a_j G_i``. The
    coefficients go to ``method.order``, or, from ``low < method.order`` on (``LOWEST_ORDER`` at least where a
    surface is held or released), only as far as the next crossing needs (:func:`_adaptive_series`). Returns
    ``(held, K)``, ``K`` the order reached.

    Like every stage called once a step, it reads the bundles' fields it needs before anything else: Numba holds a
    reference to every array of a bundle for as long as the bundle is used, and a bundle used past a branch costs
    two atomic operations per array and call (about 1 us for the :class:`Workspace` of ~40 arrays)."""
    Xa, train_outer = net.Xa, net.train_outer
    K = method.order
    P, mode, drop = state.P, state.mode, state.drop
    series, S, cons_offset, gnoise, released = ws.series, ws.S, ws.cons_offset, ws.gnoise, ws.released[0]
    C, G = series.C, series.G
    samples, neurons, pinv, dependent, null, proj = surfaces
    n_slots = len(samples)
    Cm, phi = np.zeros((K + 1, n_slots)), np.zeros((K + 1, n_slots))
    num, den = np.zeros((K + 1, n_slots)), np.zeros((K + 1, n_slots))
    band = np.zeros((n_slots, 2))
    da = Xa.shape[1]
    m, w = P.shape
    for j in range(m):
        for q in range(w):
            C[0, j, q] = P[j, q]
    if low < K and released > 0:
        # held surfaces and releases read the step's coefficients for their tangencies (LOWEST_ORDER)
        low = min(K, max(low, LOWEST_ORDER))
    if low < K:
        K = _adaptive_series(net, method, series, S, cons_offset, mode, drop, t, samples, pinv, Cm, low)
    else:
        taylor_coefficients(net, K, method.log_clock, t, S, cons_offset, samples, pinv, Cm, series)
    lmax = K - 1 if train_outer else 0
    for slot in range(n_slots):
        i, j = samples[slot], neurons[slot]
        for k in range(K):
            acc = 0.0
            for l in range(min(k, lmax) + 1):
                acc += C[l, j, da] * G[k - l, i]
            phi[k, slot] = acc
        _multiplier_series(S, G, proj, slot, i, j, K, num, den, gnoise)
    group_offset, group_slot, group_weight, group_beta = _group_exits(net, samples, dependent, null, den,
                                                                      cons_offset)
    return Held(samples, neurons, pinv, dependent, null, proj, Cm, phi, num, den, band, group_offset, group_slot,
                group_weight, group_beta), K


@jit
def _adaptive_series(net, method, series, S, cons_offset, mode, drop, t, samples, pinv, Cm, low):
    """The Taylor coefficients (:func:`.series.taylor_coefficients`, into ``series``, under the slopes ``S``) from
    order ``low`` on, one order at a time, up to the first whose step (:func:`.stepping.taylor_step`) reaches
    ``ADAPTIVE_MARGIN`` times the predicted time of the next crossing (:func:`_linear_crossing`, from the surface
    modes ``mode`` and marks ``drop``), at most ``method.order``; returns the order reached.

    Where events are dense the next crossing is a small fraction of the coefficients' radius away, and a low order
    is exact to the tolerance over that distance: each order costs two matrix products, so a step stops at the
    order the crossing needs rather than at the one the last step needed plus a margin. A crossing beyond the
    prediction only ends the step at the step-size rule's bound (the next step goes on from there); one before it is
    found by the event search as always."""
    top, tol, log_clock = method.order, method.tol, method.log_clock
    C = series.C
    taylor_coefficients(net, low, log_clock, t, S, cons_offset, samples, pinv, Cm, series)
    target = ADAPTIVE_MARGIN * _linear_crossing(series.Z0, series.Z1, mode, drop)
    size = max_abs(C[0])
    size = size if size > 0.0 else 1.0
    K = low
    while K < top and taylor_step(size, max_abs(C[K - 1]), max_abs(C[K]), K, tol) < target:
        taylor_coefficients(net, K + 1, log_clock, t, S, cons_offset, samples, pinv, Cm, series, K)
        K += 1
    return K


@jit
def _linear_crossing(Z0, Z1, mode, drop):
    """The earliest time at which a free switching function's linear part ``z_ij + z_ij' tau`` reaches 0 (over the
    surfaces not just crossed or left; ``inf`` when every one moves away): the prediction of the next crossing.

    The minimum is kept per neuron and taken over the neurons at the end, and each quotient is computed whether or
    not it counts, so that the loop has no branch (on real data the signs of ``z0 z1`` follow no pattern the
    processor can predict) and no chain of dependent minima; the minimum of the same quotients, bit for bit."""
    n, m = Z0.shape
    lane = np.full(m, math.inf)
    for i in range(n):
        for j in range(m):
            z0 = Z0[i, j]
            z1 = Z1[i, j]
            counts = (z0 * z1 < 0.0) & (mode[i, j] == MODE_FREE) & (drop[i, j] == DROP_NONE)
            tau = -z0 / z1
            low = lane[j]
            lane[j] = tau if counts & (tau < low) else low
    best = math.inf
    for j in range(m):
        best = min(best, lane[j])
    return best


@jit
def _multiplier_series(S, G, proj, slot, i, j, K, num, den, scratch):
    """The Taylor coefficients (orders ``0..K - 1``) of the multiplier ``s_ij = num / den`` of ``slot``: ``num =
    -sum_k s_kj G_k <pinv, (x_k, 1)>`` over the neuron's free samples and ``den = G_i``, the products ``<pinv, (x_k,
    1)>`` being ``proj[slot]`` (:func:`build_constraints`). ``Cm = a_j num`` and ``phi = a_j G_i`` as series;
    without the common factor the exit polynomials ``num - beta den`` have no root where a trained outer weight
    passes through 0 (the multiplier is continuous there). ``scratch`` (``n``): scratch."""
    n = S.shape[0]
    for k in range(n):
        acc = 0.0
        if S[k, j] != 0.0:
            acc = proj[slot, k]
        scratch[k] = S[k, j] * acc
    for o in range(K):
        acc = 0.0
        for k in range(n):
            acc -= scratch[k] * G[o, k]
        num[o, slot] = acc
        den[o, slot] = G[o, i]


@jit
def _step_size(net, method, ws, t, t_end):
    """Stage 3a: the step ``h`` of the tolerance rule at the step's order (:func:`.stepping.taylor_step`), at most
    ``e^-2`` times the logistic loss's radius for samples whose residual weights are flat to rounding
    (:func:`.series.flat_loss_radius`), cut at ``t_end``. Returns
    ``(status, h, span, final, size)``: ``span`` is the interval on which the step's polynomials are accurate (exit
    decisions look that far), ``final`` whether the step ends at ``t_end``, ``size`` the state's ``max|theta|``;
    ``NONFINITE`` for a non-finite coefficient, ``NO_PROGRESS`` for a step that does not advance ``t``."""
    C, F, K, tol, loss_kind, y = ws.series.C, ws.series.F, method.order, method.tol, net.loss_kind, net.y
    top = max_abs(C[K])
    below = max_abs(C[K - 1])
    size = max_abs(C[0])
    if not (math.isfinite(top) and math.isfinite(below)):
        return status.NONFINITE, 0.0, 0.0, False, size
    h = taylor_step(size if size > 0.0 else 1.0, below, top, K, tol)
    h = min(h, STEP_SAFETY * flat_loss_radius(loss_kind, y, F, FLAT_MARGIN))
    remaining = t_end - t
    span = h if math.isfinite(h) else remaining
    final = h >= remaining
    if final:
        h = remaining
    if not (h > 0.0) or t + h == t:
        return status.NO_PROGRESS, h, span, final, size
    return status.RUNNING, h, span, final, size


@jit
def _noise_bands(net, method, state, ws, held, size, t):
    """Stage 3b: ``held.band``, the noise band of each exit polynomial: the state is uncertain by its local
    tolerance (or rounding), ``max(tol, eps) max|theta|`` (:func:`_residual_noise`, :func:`_slot_noise`)."""
    Xa, y, leak, loss_kind, c = net.Xa, net.y, net.leak, net.loss_kind, net.c
    tol, log_clock = method.tol, method.log_clock
    S, Z0, G0, reach, gnoise, P = ws.S, ws.series.Z0, ws.series.G[0], ws.reach, ws.gnoise, state.P
    samples, neurons, proj, band = held.samples, held.neurons, held.proj, held.band
    n_slots = len(samples)
    if n_slots == 0:
        return
    state_noise = max(tol, _EPS) * size
    _residual_noise(Xa, y, S, P, Z0, reach, loss_kind, c, G0, log_clock, t, state_noise, gnoise)
    da = Xa.shape[1]
    for slot in range(n_slots):
        i, j = samples[slot], neurons[slot]
        spread, value = _slot_sums(S, G0, gnoise, proj, slot, j)
        for e in range(2):
            band[slot, e] = _slot_band(abs(P[j, da]), spread, value, gnoise[i], G0[i], state_noise,
                                       leak if e == 0 else 1.0)


@jit
def _releases_due(net, state, ws, held, h):
    """Stage 3c (hold / release): held surfaces whose multiplier sits on a bound and moves out of ``[leak, 1]``
    (:func:`_leaving_bound`), or was kept beyond it inside the noise band and leaves the band
    (:func:`_outside_band`), and those of a combination of dependent hyperplanes that does so
    (:func:`_group_leaving`), are released now: ``ws.hit`` becomes exactly those, ``ws.forced`` the side each leaves
    to. Returns whether there is one."""
    leak, mode, hit, forced, C = net.leak, state.mode, ws.hit, ws.forced, ws.series.C
    num, den, K = held.num, held.den, held.num.shape[0] - 1
    leaving = False
    for slot in range(len(held.samples)):
        if held.dependent[slot]:
            continue
        for e in range(2):
            beta = leak if e == 0 else 1.0
            if _leaving_bound(num, den, slot, beta, h, held.band[slot, e]) or \
                    _outside_band(num, den, slot, beta, held.band[slot, e]):
                side = _exit_side(held, ws.series.C, slot, K - 1, 0.0, beta)
                if side != 0:
                    hit[held.samples[slot], held.neurons[slot]] = True
                    forced[held.samples[slot], held.neurons[slot]] = side
                    leaving = True
    for c in range(len(held.group_offset) - 1):
        if _group_leaving(held, c, K - 1, h):
            for e in range(held.group_offset[c], held.group_offset[c + 1]):
                r = held.group_slot[e]
                side = _exit_side(held, C, r, K - 1, 0.0, held.group_beta[e])
                if side != 0:
                    hit[held.samples[r], held.neurons[r]] = True
                    forced[held.samples[r], held.neurons[r]] = side
                    leaving = True
    if leaving:
        n, m = hit.shape
        for i in range(n):
            for j in range(m):
                hit[i, j] = hit[i, j] and mode[i, j] == MODE_HELD
    return leaving


@jit
def _release(net, method, state, ws, t, events, n_ev):
    """Stage 3d: classify the surfaces in ``ws.hit`` (released, or re-classified after a release) at this instant
    and clear ``ws.forced``. Returns ``(status, n_ev)``."""
    code, n_ev = _resolve(net, method, state, ws, t, events, n_ev)
    ws.forced[:, :] = 0
    return code, n_ev


@jit
def _locate_events(net, method, state, ws, held, h, span):
    """Stage 4: the earliest root in ``(0, h]`` of every free switching polynomial (:func:`earliest_switching`)
    and of every held surface's exit polynomials (:func:`_exit_root`). Returns ``(bound, found, n_cand)``: the
    step's end, whether an event ends it, and how many pairs the switching screen left in ``ws.cand``."""
    Xa, leak, K, C, Z0, Z1 = net.Xa, net.leak, method.order, ws.series.C, ws.series.Z0, ws.series.Z1
    Ct, ct_ready, pn, xn, rad, work, poly_g, cand, flags = ws.Ct, ws.ct_ready, ws.pn, ws.xn, ws.rad, ws.work, \
        ws.poly_g, ws.cand, ws.flags
    poly, band, forced, mode, drop, active = ws.poly, ws.band, ws.forced, state.mode, state.drop, state.active
    num, den, bands, dependent = held.num, held.den, held.band, held.dependent
    groups = len(held.group_offset) > 1
    switching_setup(Xa, C, K, pn, ct_ready)
    bound, found, n_cand = earliest_switching(Xa, C, Ct, ct_ready, pn, xn, K, Z0, Z1, mode, drop, active, h, rad,
                                              work, poly_g, cand, flags)
    for slot in range(len(dependent)):
        if dependent[slot]:
            continue
        for e in range(2):
            beta = leak if e == 0 else 1.0
            tau = _exit_root(num, den, slot, K - 1, beta, bound, max(span, bound), bands[slot, e], work, poly, band)
            if tau <= bound:
                bound = tau
                found = True
    if groups:
        tau = _group_exits_due(held, C, K - 1, bound, max(span, bound), work, poly, band, 0.0, None, forced, 0.0)
        if tau <= bound:
            bound = tau
            found = True
    return bound, found, n_cand


@jit
def _record_step(net, method, ws, t, h, n_steps, steps):
    """Stage 5a: write step ``n_steps`` (start, length, coefficients or starting state, loss at its start from the
    recurrence's outputs ``F[0]``, and ``int |theta'|^2``). Returns whether the loss and energy are finite (a loss
    of ``+inf``/NaN, or a non-finite energy, ends the run at the step's start; ``ln L = -inf`` is an exact 0)."""
    C, F, K, log_clock, nodes, weights = ws.series.C, ws.series.F, method.order, method.log_clock, \
        method.gl_nodes, method.gl_weights
    y, loss_kind, c, decay, bias, train_outer = net.y, net.loss_kind, net.c, net.decay, net.bias, net.train_outer
    out_t, out_h, out_C, out_loss, out_energy = steps
    out_t[n_steps] = t
    out_h[n_steps] = h
    if out_C.shape[1] == 1:
        out_C[n_steps, 0] = C[0]
    else:  # the orders above the step's are 0 (dense output evaluates every step at the chunk's order)
        out_C[n_steps, :K + 1] = C[:K + 1]
        out_C[n_steps, K + 1:] = 0.0
    if log_clock:
        out_loss[n_steps] = log_loss_from_outputs(F[0], y, loss_kind, c)
        out_energy[n_steps] = velocity_energy_log(C, K, h, t, nodes, weights)
    else:
        out_loss[n_steps] = loss_from_outputs(F[0], y, loss_kind, c)
        if decay != 0.0:
            out_loss[n_steps] += 0.5 * decay * penalty(C[0], bias, train_outer)
        out_energy[n_steps] = velocity_energy(C, K, h)
    return out_loss[n_steps] < math.inf and math.isfinite(out_energy[n_steps])


@jit
def _advance(net, state, ws, held, h, K):
    """Stage 5b: the state at the step's end (the Taylor polynomial at ``h``), held neurons projected back onto
    their surfaces (drift correction). Returns whether it is finite; if not, ``P`` goes back to the step's start."""
    P, C, Xa, bias = state.P, ws.series.C, net.Xa, net.bias
    samples, neurons, pinv = held.samples, held.neurons, held.pinv
    horner_state(C, K, h, P)
    _project_onto_surfaces(Xa, bias, P, samples, neurons, pinv)
    if math.isfinite(max_abs(P)):
        return True
    m, w = P.shape
    for j in range(m):
        for q in range(w):
            P[j, q] = C[0, j, q]
    return False


@jit
def _step_end(net, state, ws):
    """Stage 5c without an event: the pre-activations of the state reached replace those of the step's start in
    ``ws.series.Z0``, and the marks of surfaces just crossed or left (``drop``, ``ws.reheld``, ``ws.released``) are
    cleared."""
    Xc, cols, P, Z0, drop, reheld, released = net.Xc, net.cols, state.P, ws.series.Z0, state.drop, ws.reheld, \
        ws.released
    preactivations(Xc, P, Z0, cols)
    drop[:, :] = DROP_NONE
    reheld[:, :] = False
    released[0] = 0


@jit
def _classify_reached(net, method, state, ws, held, h, span, n_cand, t, events, n_ev):
    """Stage 5c at an event: every free surface reached within ``SIMULTANEOUS h`` of the step's end
    (:func:`reached_switching`, among the ``n_cand`` pairs the step's screen left) and every held surface whose
    multiplier leaves ``[leak, 1]`` there are classified together (:func:`_resolve`); the marks of surfaces just
    crossed or left are cleared first. Between the two, the pre-activations of the state reached replace those of
    the step's start in ``ws.series.Z0`` (:func:`_step_end`: the search reads the step's switching polynomials, the
    classification the new state). Returns ``(status, n_ev)``."""
    Xa, leak, K, C, mode, drop = net.Xa, net.leak, method.order, ws.series.C, state.mode, state.drop
    hit, forced = ws.hit, ws.forced
    reach = h * (1.0 + SIMULTANEOUS)
    reached_switching(Xa, C, ws.Ct, ws.ct_ready, ws.pn, ws.xn, K, ws.series.Z0, ws.series.Z1, drop, state.active,
                      reach, hit, ws.work, ws.poly_g, ws.cand, n_cand)
    _step_end(net, state, ws)
    for slot in range(len(held.samples)):
        i, j = held.samples[slot], held.neurons[slot]
        if held.dependent[slot]:
            continue
        for e in range(2):
            beta = leak if e == 0 else 1.0
            if _exit_root(held.num, held.den, slot, K - 1, beta, reach, max(span, reach), held.band[slot, e],
                          ws.work, ws.poly, ws.band) <= reach:
                hit[i, j] = True
                # a multiplier c / (a_j G_i) that leaves [leak, 1] with a_j G_i != 0 releases the surface;
                # at a_j G_i = 0 (0/0) the neuron is re-classified instead
                forced[i, j] = _exit_side(held, ws.series.C, slot, K - 1, h, beta)
    _group_exits_due(held, C, K - 1, reach, max(span, reach), ws.work, ws.poly, ws.band, reach, hit, forced, h)
    code, n_ev = _resolve(net, method, state, ws, t, events, n_ev)
    for slot in range(len(held.samples)):
        forced[held.samples[slot], held.neurons[slot]] = 0
    return code, n_ev


@jit
def _coasting(net, state, ws):
    """Whether a square-loss flow (without weight decay) has converged to working precision (:func:`_converged`):
    its residuals are rounding, and it coasts to ``t_end``."""
    loss_kind, decay, Xa, y, bias = net.loss_kind, net.decay, net.Xa, net.y, net.bias
    P, Z0, S, neuron_scale = state.P, ws.series.Z0, ws.S, ws.neuron_scale
    return loss_kind == LOSS_SQUARE and decay == 0.0 and _converged(Xa, y, P, Z0, S, bias, neuron_scale)


@jit
def _at_order(method, K):
    """``method`` with the Taylor order ``K`` of one step (:func:`_next_order`)."""
    return Method(K, method.tol, method.caratheodory, method.selection, method.tie_policy, method.log_clock,
                  method.gl_nodes, method.gl_weights)


@jit
def _finite_order(C, K):
    """The largest order ``k < K``, at least ``MIN_ORDER``, whose Taylor coefficients ``C[0..k]`` are all finite;
    0 when there is none. Where a huge loss makes the coefficients overflow above some order (they grow like the
    flow's rate to the power ``k``: for one neuron with ``L = e^w0`` the order-``k`` coefficient is ``e^(k w0) / k``,
    which overflows float64 from ``k w0 > 709``, order 8 at ``L = 1e40``) the step is taken at that order, with the
    step-size rule's smaller step; the order controller climbs again as the loss falls."""
    for k in range(K):
        if not math.isfinite(max_abs(C[k])):
            return k - 1 if k - 1 >= MIN_ORDER else 0
    return K - 1 if K - 1 >= MIN_ORDER else 0


@jit
def _next_order(C, K, top, h, size, tol, found):
    """The order controller: the Taylor order of the next step. After a step an event ended, the order that step
    needed (:func:`.stepping.order_needed`) plus ``ORDER_MARGIN``, at least ``LOWEST_ORDER``, where that at least
    halves the tolerance's order ``top`` (else ``top``: a sparse event is no sign of the next, and a trajectory
    without dense events keeps the full-order steps it always had, bit for bit): where events are dense the next
    one is likely as close, and over such a step a low order is exact to the tolerance (the
    step-size rule keeps it so, :func:`.stepping.taylor_step`). After any other step (the low order cut it short,
    or no event came), ``ORDER_CLIMB`` orders more, at most the tolerance's ``top`` (its full step)."""
    if not found:
        return min(top, K + ORDER_CLIMB)
    low = min(top, LOWEST_ORDER)
    K = max(low, order_needed(C, K, h, size if size > 0.0 else 1.0, tol, 2) + ORDER_MARGIN)
    return K if 2 * K <= top else top


@jit
def _zeno_key(events, q, m):
    """The Zeno detector's key of event ``q``: its surface ``(sample, neuron)``, kind and side."""
    return ((events.sample[q] * m + events.neuron[q]) * _KINDS + events.kind[q]) * 3 + events.side[q] + 1


@jit
def _zeno_record(state, t, first_event, events):
    """Stage 6a: record this event instant (key of its first event, the row of that event's neuron, the whole state
    and the energy dissipated so far) in the Zeno memory."""
    zeno, P = state.zeno, state.P
    memory = zeno.memory
    zeno_record(memory, t, _zeno_key(events, first_event, P.shape[0]), P[events.neuron[first_event]])
    count = memory.count[0]
    zeno.whole[ring_index(count, 0, zeno.whole.shape[0])] = P
    zeno.energy[ring_index(count, 0, len(zeno.energy))] = zeno.dissipated[0]


@jit
def _zeno_extrapolate(zeno, cycle, ratio, rho, in_cycle, last, before, P):
    """The state at the accumulation point: each row moved by its change over the last cycle times
    ``rho / (1 - rho)`` for the neurons of the cycle (their contraction per cycle) and ``ratio / (1 - ratio)`` for
    the others (the time ratio per cycle: a smooth motion changes in proportion to the time). Returns the dissipated
    energy of the tail: Aitken's extrapolation of the energies one cycle apart, or the last cycle's energy times
    ``ratio / (1 - ratio)`` where the energies do not contract geometrically. ``last`` and ``before`` are the whole
    states at the latest instant and one cycle earlier."""
    count = zeno.memory.count[0]
    M = len(zeno.energy)
    m, w = P.shape
    for j in range(m):
        factor = rho / (1.0 - rho) if in_cycle[j] else ratio / (1.0 - ratio)
        for q in range(w):
            P[j, q] = last[j, q] + (last[j, q] - before[j, q]) * factor
    e0 = zeno.energy[ring_index(count, 0, M)]
    e1 = zeno.energy[ring_index(count, cycle, M)]
    limit, _ = aitken(e0, e1, zeno.energy[ring_index(count, 2 * cycle, M)])
    return limit - e0 if math.isfinite(limit) else (e0 - e1) * ratio / (1.0 - ratio)


@jit
def _zeno_snap(net, state, ws, in_cycle, last, before):
    """At a Zeno limit: the surfaces each neuron of the cycle sits on, to ``ZENO_SNAP`` times the last cycle's
    change of its ``(w_j, b_j)``, are marked in ``ws.hit`` and made free, and every neuron is projected onto its held
    and marked surfaces (:func:`_project_onto_surfaces`), so that :func:`_resolve` classifies the marked ones
    afresh. ``last`` and ``before`` are the whole states at the latest instant and one cycle earlier."""
    Xa, bias, P, mode, drop = net.Xa, net.bias, state.P, state.mode, state.drop
    n, da = Xa.shape
    ws.hit[:, :] = False
    for j in range(P.shape[0]):
        if not in_cycle[j]:
            continue
        amplitude = 0.0
        for q in range(da):
            amplitude += (last[j, q] - before[j, q]) ** 2
        amplitude = math.sqrt(amplitude)
        for i in range(n):
            if mode[i, j] == MODE_VOID:
                continue
            z = 0.0
            for q in range(da):
                z += _normal_entry(Xa, bias, i, q) * P[j, q]
            if abs(z) <= ZENO_SNAP * _reach(Xa, i, bias) * amplitude:
                ws.hit[i, j] = True
                mode[i, j] = MODE_HELD
    samples, neurons, pinv, _, _, _ = build_constraints(Xa, bias, mode, ws.cons_offset, no_surfaces(Xa.shape[1]))
    _project_onto_surfaces(Xa, bias, P, samples, neurons, pinv)
    for i in range(n):
        for j in range(P.shape[0]):
            if ws.hit[i, j]:
                mode[i, j] = MODE_FREE
                drop[i, j] = DROP_NONE


@jit
def _bridge_step(net, method, state, t, h, energy, before, n_steps, steps):
    """Record the tail of a Zeno point as one step: from the state ``before`` at ``t``, linear to the limit
    ``state.P`` at ``t + h`` (the dense output between the two), with the tail's dissipated ``energy``."""
    P = state.P
    n, m = state.active.shape
    steps.t[n_steps] = t
    steps.h[n_steps] = h
    steps.C[n_steps] = 0.0
    steps.C[n_steps, 0] = before
    if steps.C.shape[1] > 1:
        for j in range(m):
            for q in range(P.shape[1]):
                steps.C[n_steps, 1, j, q] = (P[j, q] - before[j, q]) / h
    steps.loss[n_steps] = loss_at(net.Xa, net.y, net.loss_kind, net.c, net.leak, net.bias, net.train_outer,
                                  net.decay, before, np.empty((n, m)), np.empty((n, m)), method.log_clock)
    steps.energy[n_steps] = energy


@jit
def _zeno_jump(net, method, state, ws, t, t_end, first_event, events, n_ev, steps, n_steps, room):
    """Stage 6: record this event instant (:func:`_zeno_record`) and, when the last instants accumulate
    (:func:`.zeno.zeno_check`) before ``t_end`` and there is ``room`` for one more step, pass the accumulation point:
    the state jumps to the extrapolated limit (:func:`_zeno_extrapolate`; the tail is logged as one linear step,
    :func:`_bridge_step`), a ``zeno`` event is logged (neuron and sample of this instant's first event, multiplier: the
    time ratio per cycle), the memory is cleared, and the surfaces the neurons of the cycle sit on are snapped onto
    (:func:`_zeno_snap`) and classified afresh (:func:`_resolve`). Returns ``(status, t, n_ev, n_steps)``."""
    _zeno_record(state, t, first_event, events)
    n, m = state.active.shape
    if not (room and len(events.t) - n_ev > n * m + 1):
        return status.RUNNING, t, n_ev, n_steps
    cycle, t_acc, _, ratio, rho = zeno_check(state.zeno.memory)
    if not (cycle > 0 and t_end >= t_acc > t):
        return status.RUNNING, t, n_ev, n_steps
    memory = state.zeno.memory
    in_cycle = np.zeros(m, np.bool_)
    for back in range(cycle):
        in_cycle[(memory.keys[ring_index(memory.count[0], back, len(memory.keys))] // (3 * _KINDS)) % m] = True
    R = state.zeno.whole.shape[0]
    last = state.zeno.whole[ring_index(memory.count[0], 0, R)]
    previous = state.zeno.whole[ring_index(memory.count[0], cycle, R)]
    before = state.P.copy()
    energy = _zeno_extrapolate(state.zeno, cycle, ratio, rho, in_cycle, last, previous, state.P)
    _zeno_snap(net, state, ws, in_cycle, last, previous)
    _bridge_step(net, method, state, t, t_acc - t, energy, before, n_steps, steps)
    state.zeno.dissipated[0] += energy
    n_ev = _log(events, n_ev, t_acc, EVENT_ZENO, events.neuron[first_event], events.sample[first_event], 0, ratio)
    memory.count[0] = 0
    slopes_from_state(state.active, state.mode, net.leak, ws.S)
    preactivations(net.Xc, state.P, ws.series.Z0, net.cols)
    code, n_ev = _resolve(net, method, state, ws, t_acc, events, n_ev)
    return code, t_acc, n_ev, n_steps + 1


@jit
def integrate_chunk(net, method, state, t_end, max_steps, max_events, steps, events):
    """Integrate from ``state.clock[0]`` for at most ``max_steps`` steps, ``max_events`` events, or until ``t_end``.

    One pass of the loop is the algorithm's stages, each a function with the same name in the mpmath backend
    (:class:`flowlib.mp.flow._Integrator`), working in one :class:`Workspace`:

    1. free surfaces reached (:func:`_surfaces_reached`) are classified with the others of their neuron
       (:func:`_resolve`); a converged square-loss flow coasts to ``t_end`` (:func:`_coasting`, :func:`_coast`);
    2. the held surfaces, the Taylor coefficients and the multipliers' series (:func:`_held_series`, a
       :class:`Held`);
    3. the step size (:func:`_step_size`), the exit polynomials' noise bands (:func:`_noise_bands`), and hold /
       release: held surfaces whose multiplier leaves ``[leak, 1]`` (:func:`_releases_due`) or surfaces released to
       the wrong side (:func:`_released_backwards`) are classified at this instant (:func:`_release`) and the pass
       starts again;
    4. the earliest root of every switching and exit polynomial ends the step (:func:`_locate_events`);
    5. the step is recorded (:func:`_record_step`) and taken (:func:`_advance`), and the surfaces reached at its
       end are classified (:func:`_classify_reached`); the order controller picks the next step's Taylor order
       (:func:`_next_order`: low after a step an event ended, climbing towards the tolerance's otherwise);
    6. an event instant goes to the Zeno detector, which passes an accumulation of instants to its limit
       (:func:`_zeno_jump`; the tail is one more step).

    Every bundle comes as plain tuples (:func:`.bundles.plain`: a named tuple would cost ~1.5 us at each call from
    Python) and is named again on entry (:func:`named_state`).

    Parameters
    ----------
    net : :class:`.bundles.Network`
        The objective (``Xa`` C-contiguous, shape ``(n, d + 1)``). With ``decay > 0`` the flow is that of
        ``L + lambda/2 |theta_trained|^2`` (the logged loss includes the penalty); only with the ``t`` clock.
    method : :class:`.bundles.Method`
        Taylor order ``K`` (>= 4), local tolerance of the step-size rule, solution concept (``caratheodory``: the
        single-valued field with ``sigma'(0) = selection``, :mod:`.events`), ``tie_policy`` (``TIE_STAY`` or
        ``TIE_LEAVE``), ``log_clock`` and the Gauss-Legendre rule on ``[0, 1]`` (at least ``order + 1`` points) for
        the energy in that clock. With ``log_clock`` the integration variable is ``s = ln(1 + t)`` (``clock``,
        ``t_end``, the logged times and step lengths are then in ``s`` and the logged loss is ``ln L``): the
        long-horizon mode, whose steps grow with ``s`` where the flow slows down like ``1/t``.
    state : :class:`.bundles.State`
        Updated in place: ``P`` (``m, d + 2``), ``active`` (side of each free surface), ``mode`` and ``drop``
        (surface modes and the number of vanishing leading terms; see module doc) and ``clock``, shape (1,), (2,)
        or (3,): the current time. With two entries, ``clock[1]`` receives the time at which a square-loss flow was
        found converged to working precision (:func:`_converged`; untouched otherwise): the chunk then records one
        last step that holds the state constant to ``t_end`` and returns ``SUCCESS``. With three, ``clock[2]`` is
        raised to the largest inclusion residual of the chunk's steps (:func:`.inclusion.inclusion_residual`: the
        distance of each step's velocity to the Filippov set).
    t_end : float
    max_steps, max_events : int
        Budgets of this chunk; ``steps`` must have the shapes below and ``events`` at least
        ``max_events + 3 n m`` entries.
    steps : :class:`.bundles.StepLog`
        ``t`` and ``loss`` (``max_steps + 1``): start and loss at the start of each step; entry ``n_steps``
        receives the time and the loss at the state reached (so that a caller joins chunks without evaluating the
        loss again). ``h`` and ``energy`` (``max_steps``): length and ``int |theta'|^2`` of each step. ``C``
        (``max_steps + 1, K + 1, m, d + 2``, or ``max_steps + 1, 1, m, d + 2``): the Taylor coefficients of each
        step (dense output), or only its starting state when the second axis has length 1 (no dense output:
        ``m (d + 2)`` floats a step instead of ``(K + 1) m (d + 2)``, 27 MB at ``m = 2000, d = 100``);
        ``C[n_steps, 0]`` receives the state reached.
    events : :class:`.bundles.EventLog`
        The event log.

    ``state.zeno`` carries the Zeno detector's memory from chunk to chunk.

    Returns
    -------
    status : int
        A code of :mod:`.status`; ``RUNNING`` or ``EVENT_BUFFER_FULL`` when a budget of the chunk ended it.
    n_steps, n_events : int
    """
    net, method, state = Network(*net), Method(*method), named_state(state)
    steps, events = StepLog(*steps), EventLog(*events)
    P, active, mode, drop, clock = state.P, state.active, state.mode, state.drop, state.clock
    n, m = active.shape
    top = method.order
    K = state.order[0] if 0 < state.order[0] <= top else top
    # the lowest order the next step may stop at (:func:`_adaptive_series`): ADAPTIVE_MIN_ORDER after an event
    low = state.order[1] if 0 < state.order[1] <= K else K
    ws = _workspace(net, method, state)
    slopes_from_state(active, mode, net.leak, ws.S)
    preactivations(net.Xc, P, ws.series.Z0, net.cols)
    ws.released[0] = np.sum(drop == DROP_RELEASED)
    t = clock[0]
    n_steps = 0
    n_ev = 0
    stalls = 0
    code = status.RUNNING
    surfaces = no_surfaces(net.Xa.shape[1])
    while True:
        done, code = budget_spent(t, t_end, n_steps, max_steps, n_ev, max_events, status.EVENT_BUFFER_FULL)
        if done:
            break
        # 1. free surfaces reached: events now
        if _surfaces_reached(net, state, ws.series.Z0, ws.reach, ws.neuron_scale, ws.hit):
            code, n_ev = _resolve(net, method, state, ws, t, events, n_ev)
            if code != status.RUNNING:
                break
        # a square-loss flow whose residuals are rounding has converged to working precision: it coasts to t_end
        if _coasting(net, state, ws):
            _coast(net.Xa, net.y, net.loss_kind, net.c, P, ws.S, t, t_end, method.log_clock, n_steps, steps.t,
                   steps.h, steps.C, steps.loss, steps.energy)
            n_steps += 1
            if clock.shape[0] > 1:
                clock[1] = t
            t = t_end
            code = status.SUCCESS
            break
        # 2. Taylor coefficients (to the step's order), held surfaces and their multipliers
        step = _at_order(method, K)
        surfaces = _held_surfaces(net, state, ws, surfaces)
        if np.any(surfaces[3]):
            code, n_ev, surfaces = _held_dependent(net, method, state, ws, t, events, n_ev, surfaces)
            if code != status.RUNNING:
                break
        held, K = _held_series(net, step, state, ws, t, low, surfaces)
        step = _at_order(method, K)
        # 3. step size, noise bands, hold / release
        code, h, span, final, size = _step_size(net, step, ws, t, t_end)
        if code == status.NONFINITE:
            lower = _finite_order(ws.series.C, K)
            if lower > 0:
                # a huge loss (an exp loss at a large initialisation): the coefficients grow like its rate to the
                # power k and overflow above order `lower`, while the state is finite; take the pass at that order
                K = lower
                continue
        if code != status.RUNNING:
            break
        held_any = len(held.samples) > 0
        if held_any:
            _noise_bands(net, step, state, ws, held, size, t)
        released = held_any and _releases_due(net, state, ws, held, h)
        if not released and ws.released[0] > 0:
            ws.hit[:, :] = False
            released = _released_backwards(net.Xa, ws.series.C, K, h, net.bias, active, mode, drop, ws.reheld,
                                           ws.neuron_scale, ws.hit, ws.poly, ws.work)
        if released:
            # each pass releases at least one held surface (a forced side is always taken) or re-classifies one
            # once per instant, so this cannot repeat more than n m times at one instant
            stalls += 1
            if stalls > n * m + 1:
                code = status.NO_PROGRESS
                break
            code, n_ev = _release(net, method, state, ws, t, events, n_ev)
            if code != status.RUNNING:
                break
            continue
        stalls = 0
        # the velocity this step follows (not one a release above replaced) against the Filippov set
        if clock.shape[0] > 2:
            clock[2] = max(clock[2], inclusion_residual(
                net.Xa, ws.series.G[0], ws.series.R[0], ws.reach, ws.series.C, ws.S, mode, drop, net.leak, net.bias,
                net.decay, (held.samples, held.dependent, held.band, ws.cons_offset)))
        # 4. events located: the earliest root of every free switching and every exit polynomial ends the step
        bound, found, n_cand = _locate_events(net, step, state, ws, held, h, span)
        if found:
            h = bound
            final = False
        # 5. record, advance (with drift correction), classify the surfaces reached at the step's end
        if not _record_step(net, step, ws, t, h, n_steps, steps):
            code = status.NONFINITE
            break
        if not _advance(net, state, ws, held, h, K):
            code = status.NONFINITE
            break
        state.zeno.dissipated[0] += steps.energy[n_steps]
        n_steps += 1
        t = t_end if final else t + h
        first_event = n_ev
        if found:
            code, n_ev = _classify_reached(net, step, state, ws, held, h, span, n_cand, t, events, n_ev)
            if code != status.RUNNING:
                break
        else:
            _step_end(net, state, ws)
        K = _next_order(ws.series.C, K, top, h, size, method.tol, found)
        low = min(K, ADAPTIVE_MIN_ORDER) if found else K
        # 6. an event instant goes to the Zeno detector, which passes an accumulation of them
        if n_ev > first_event:
            code, t, n_ev, n_steps = _zeno_jump(net, method, state, ws, t, t_end, first_event, events, n_ev, steps,
                                                n_steps, n_steps < max_steps)
            if code != status.RUNNING:
                break
    clock[0] = t
    state.order[0] = K
    state.order[1] = low
    steps.t[n_steps] = t
    steps.C[n_steps, 0] = P
    steps.loss[n_steps] = loss_at(net.Xa, net.y, net.loss_kind, net.c, net.leak, net.bias, net.train_outer, net.decay,
                                  P, ws.series.Z1, ws.S, method.log_clock)
    if code == status.SUCCESS and not steps.loss[n_steps] < math.inf:
        code = status.NONFINITE
    return code, n_steps, n_ev


@jit
def named_state(state):
    """The :class:`.bundles.State` of the plain tuples ``state`` (:func:`.bundles.plain`), sharing their arrays."""
    P, active, mode, drop, clock, order, zeno = state
    return State(P, active, mode, drop, clock, order, named_zeno(zeno))


@jit
def _coast(Xa, y, loss_kind, c, P, S, t, t_end, log_clock, n_steps, out_t, out_h, out_C, out_loss, out_energy):
    """Record the last step of a flow converged to working precision (:func:`_converged`): the state ``P`` held
    constant from ``t`` to ``t_end`` (every higher Taylor coefficient 0, no energy)."""
    out_t[n_steps] = t
    out_h[n_steps] = t_end - t
    out_C[n_steps] = 0.0
    out_C[n_steps, 0] = P
    out_loss[n_steps] = network_loss(Xa, y, P, S, loss_kind, c, log_clock)
    out_energy[n_steps] = 0.0


@jit
def surface_sides(net, P, Z, active, mode):
    """Side (``z_ij > 0``) and mode of every surface of the network ``net`` (a :class:`.bundles.Network` as plain
    tuples, :func:`.bundles.plain`, as :func:`integrate_chunk` takes it) at the packed state ``P``, as
    :func:`integrate_chunk` starts from them (the pre-activations summed over ``net.Xc``, as the chunk sums them,
    so that both see the same signs); ``Z`` (shape ``(n, m)``) is scratch for the pre-activations.

    ``x_i = 0`` without bias makes ``z_ij`` identically 0: the sample never moves a neuron and there is no surface
    (``MODE_VOID``); with a bias the normal ``(x_i, 1)`` is never 0.
    """
    net = Network(*net)
    Xa, bias = net.Xa, net.bias
    n, da = Xa.shape
    m = P.shape[0]
    preactivations(net.Xc, P, Z, net.cols)
    for i in range(n):
        void = not bias
        for q in range(da - 1):
            if Xa[i, q] != 0.0:
                void = False
        for j in range(m):
            active[i, j] = Z[i, j] > 0.0
            mode[i, j] = MODE_VOID if void else MODE_FREE


@jit
def loss_along(Xa, y, loss_kind, c, leak, bias, train_outer, decay, states, log):
    """Loss (``ln L`` when ``log``) at each state of ``states`` (shape ``(k, m, d + 2)``), with the pattern read
    from the state; with weight decay ``decay``, the objective ``L + decay/2 |theta_trained|^2``."""
    k = states.shape[0]
    n = Xa.shape[0]
    m = states.shape[1]
    out = np.empty(k)
    Z = np.empty((n, m))
    S = np.empty((n, m))
    for s in range(k):
        out[s] = loss_at(Xa, y, loss_kind, c, leak, bias, train_outer, decay, states[s], Z, S, log)
    return out


@jit
def loss_at(Xa, y, loss_kind, c, leak, bias, train_outer, decay, P, Z, S, log):
    """Loss (``ln L`` when ``log``) at the packed state ``P``, with the pattern read from the state (``z_ij > 0``),
    plus ``decay/2 |theta_trained|^2`` (the log clock has no weight decay); ``Z`` and ``S`` (shape ``(n, m)``) are
    scratch."""
    n, m = Z.shape
    preactivations(Xa, P, Z)
    for i in range(n):
        for j in range(m):
            S[i, j] = 1.0 if Z[i, j] > 0.0 else leak
    value = network_loss(Xa, y, P, S, loss_kind, c, log)
    if log:
        return value
    return value + 0.5 * decay * penalty(P, bias, train_outer) if decay != 0.0 else value
