"""The event-driven Taylor integrator over mpmath numbers: :func:`flowlib.gradient_flow` with ``dps=N``.

Stage for stage the algorithm of :func:`flowlib.kernels.driver.integrate_chunk` (read its module docstring): free
surfaces reached are classified (:mod:`.events`), held surfaces project the velocity order by order
(:mod:`.series`), the step is cut at the earliest root of every free switching polynomial and of every held
surface's multiplier exit polynomials (:mod:`.roots`), and held neurons are projected back onto their surfaces
after each step. :meth:`_Integrator.step` is the kernel's loop body and its methods are the kernel's stages under
the same names (``_surfaces_reached``, ``_resolve``, ``_coasting``, ``_coast``, ``_held_series``,
``_held_surfaces``, ``_step_size``, ``_noise_bands``, ``_releases_due``, ``_released_backwards``, ``_release``,
``_locate_events``, ``_record_step``, ``_advance``, ``_classify_reached``, ``_zeno_jump``); the kernel's
``Workspace`` is the engine's attributes (``C``, ``Z``, ``G``, ``Zt``) and its ``Held`` the :class:`Held` record.
Where the kernel returns a status code the engine raises :class:`_Stop` with the same code. The tolerances are
those of the one table both backends read (:mod:`flowlib.kernels.tolerances`), evaluated at the working epsilon
(:mod:`.tolerances`).

Everything runs inside ``mp.workdps(dps)`` (global precision is never touched). Data and initial state are
converted exactly from their float64 values. The run returns an :class:`MPRun`; :func:`flowlib.gradient_flow`
wraps it in a :class:`~flowlib.FlowResult` whose arrays hold mpf numbers.
"""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache

from mpmath import mp, mpf
from mpmath.libmp import finf, fnan, fzero, mpf_abs, mpf_lt, mpf_mul, mpf_pow_int, mpf_sub

from flowlib.kernels import status as kstatus
from flowlib.kernels.constants import ADAPTIVE_MARGIN, ADAPTIVE_MIN_ORDER, CONVERGED_ROUNDINGS, EVENT_SLIDE_END, \
    EVENT_TIE, EVENT_ZENO, LOWEST_ORDER, MIN_ORDER, NOISE_BAND, ORDER_CLIMB, ORDER_MARGIN, STEP_SAFETY_EXPONENT
from flowlib.mp import events as mpevents, linalg, zeno
from flowlib.mp.fast import max_magnitude
from flowlib.mp.inclusion import inclusion_residual
from flowlib.mp.roots import earliest_root, earliest_root_raw, excluded_raw
from flowlib.mp.tolerances import tolerance
from flowlib.mp.series import LOSS_SQUARE, MPData, flat_loss_radius, horner, loss_value, preactivations, \
    TaylorExpansion, residual_weights, rounded_convolution, slopes, state_at, state_raw, state_rows, \
    velocity_energy, velocity_energy_log, wrap_all
from flowlib.progress import report
from flowlib.running import StepInterrupted, progress_bar, sigint_flag
from flowlib.statuses import Status, at_time, flow_stop

FREE, HELD, VOID = 0, 1, 2
_KINDS = EVENT_ZENO + 1  # event kinds, for the Zeno detector's keys
DROP_NONE, DROP_CROSSED, DROP_RELEASED = 0, 1, 2


@dataclass
class MPRun:
    """What an mpmath run produced (mpf numbers throughout); see :class:`flowlib.FlowResult` for the meaning. Its
    ``status`` and ``message`` come from the table of :mod:`flowlib.statuses`, composed as the float64 driver
    composes them (:func:`flowlib.statuses.flow_stop`)."""

    t: list = field(default_factory=list)
    states: list = field(default_factory=list)
    loss: list = field(default_factory=list)
    energy: list = field(default_factory=list)
    coefficients: list = field(default_factory=list)
    events: list = field(default_factory=list)
    eval_states: list = field(default_factory=list)
    status: Status = Status.SUCCESS
    message: str = "reached t_end"
    wall_s: float = 0.0
    inclusion: object = 0.0


class _Integrator:
    """The state of one run and the steps of the algorithm (one method per numbered stage of the kernel)."""

    def __init__(self, data: MPData, P, order, tol, caratheodory, selection, tie_leave, log_clock=False):
        self.data = data
        self.log_clock = log_clock
        self.P = P
        self.top = order  # the tolerance's Taylor order; self.K is the step's (:meth:`_next_order`)
        self.K = order
        self.low = order  # the lowest order the step may stop at (:meth:`_adaptive_order`)
        self.tol = tol
        self.caratheodory = caratheodory
        self.selection = selection
        self.tie_leave = tie_leave
        n, m = data.n, len(P)
        Z = preactivations(data, P)
        self.active = [[Z[i][j] > 0 for j in range(m)] for i in range(n)]
        void = [all(x == 0 for x in normal) for normal in data.normals]
        self.mode = [[VOID if void[i] else FREE for _ in range(m)] for i in range(n)]
        self.drop = [[DROP_NONE] * m for _ in range(n)]
        self.events = []
        self.t = mpf(0)
        self.eps = mp.eps
        self.stay = mpevents.stay_tol()
        self.noise = tolerance("exit_noise")
        self.converged_at = None
        self.step_inclusion = mpf(0)
        self.reheld = set()  # surfaces re-classified at this instant after a release to the wrong side
        self.zeno = zeno.memory()  # the Zeno detector's last event instants (kernel ``NetworkZeno``)
        self.dissipated = mpf(0)  # int |theta'|^2 since the start
        self.pending = None  # an accumulation point found at the last event instant, passed by the next step
        # the step's Taylor coefficients of the state, pre-activations and residual weights (:meth:`_held_series`),
        # and the switching polynomials examined (:meth:`_locate_events`): the kernel's workspace
        self.C = self.Z = self.G = self.F = None  # Z as raw tuples
        self.Cr = None  # the raw tuples of C, order by order (:func:`flowlib.mp.series.raw_orders`)
        self.Zt = {}
        self._power_cache = None  # (bound, [bound**k]) of the last exit-root search (:meth:`_powers`)
        self._sizes = {}  # order k: max |C[k]| of the step's series (:meth:`_size`)
        self._expansion = None  # the step's series as they are computed (:meth:`_held_series`)
        self._held_rows = {}  # held samples: their pinv rows, dependent flags, null entries (:meth:`_constraints`)

    # ----- helpers ----------------------------------------------------------------------------------------
    @property
    def S(self):
        return slopes(self.data, self.active, [[md != FREE for md in row] for row in self.mode])

    def _size(self, k):
        """``max |C[k]|`` of the step's series (:func:`flowlib.mp.fast.max_magnitude`), computed once per order: the adaptive order, the
        step size and the order controller read the same orders."""
        size = self._sizes.get(k)
        if size is None:
            if self.Cr is not None:
                raw = self.Cr[k]
            else:  # within the adaptive order's search (:meth:`_held_series`)
                raw = self._expansion.raw_order(k) if k else [x._mpf_ for row in self.P for x in row]
            prec, rnd = mp._prec_rounding
            size = self._sizes[k] = mp.make_mpf(max_magnitude(raw, prec, rnd))
        return size

    def _held_samples(self, j):
        return [i for i in range(self.data.n) if self.mode[i][j] == HELD]

    def _constraints(self):
        """Per neuron, ``(slot, sample, pinv row)`` of its held surfaces; slot list; dependent flags; the null
        vector entry of each slot (kernel ``build_constraints`` and ``null_vector``). A neuron held on the same
        samples as at the last call keeps that call's rows, flags and entries (they depend on nothing else)."""
        cut = linalg.rcond()
        per_neuron, slots, dependent, null = [], [], [], []
        last, self._held_rows = self._held_rows, {}
        for j in range(len(self.P)):
            held = self._held_samples(j)
            key = tuple(held)
            kept = self._held_rows.get(key) or last.get(key)
            if kept is None:
                normals = [list(self.data.normals[i]) for i in held]
                flags = mpevents.dependent_columns(normals)
                kept = (linalg.pinv_rows(normals, cut) if held else [], flags, _null_vector(normals, flags, cut))
            self._held_rows[key] = kept
            rows, flags, entries = kept
            entry = []
            for p, i in enumerate(held):
                entry.append((len(slots), i, rows[p]))
                slots.append((i, j))
            dependent.extend(flags)
            null.extend(entries)
            per_neuron.append(entry)
        return per_neuron, slots, dependent, null

    def snapshot(self) -> tuple:
        """What a step changes (state, time, pattern, modes, event count, re-classified surfaces), for
        :meth:`restore`."""
        return ([list(row) for row in self.P], self.t, [list(row) for row in self.active],
                [list(row) for row in self.mode], [list(row) for row in self.drop], len(self.events), set(self.reheld),
                self.K, self.low, list(self.zeno), self.dissipated, self.pending)

    def restore(self, saved: tuple) -> None:
        """Undo an unfinished step (Ctrl-C inside it): back to the :meth:`snapshot` taken before it."""
        P, self.t, self.active, self.mode, self.drop, n_events, self.reheld, self.K, self.low, instants, \
            self.dissipated, self.pending = saved
        self.P = P
        self.zeno = zeno.memory()
        self.zeno.extend(instants)
        del self.events[n_events:]

    def log(self, kind, j, i, side, mult):
        self.events.append((self.t, kind, j, i, side, mult))

    # ----- classification ---------------------------------------------------------------------------------
    def _resolve(self, hit, forced):
        """Classify, per neuron, the surfaces in ``hit`` with the others the neuron sits on (kernel ``_resolve``);
        raises :class:`_Stop` with the kernel's code where no configuration is found."""
        data = self.data
        S = self.S
        G = residual_weights(data, self.P, S, self.t if self.log_clock else None)
        for j in sorted({j for _, j in hit}):
            surface = [i for i in range(data.n) if (i, j) in hit or self.mode[i][j] == HELD or (
                self.mode[i][j] == FREE and self.drop[i][j] == DROP_CROSSED)]
            try:
                decisions = mpevents.classify_neuron(data, G, self.P, S, j, surface,
                                                     {i: s for (i, jj), s in forced.items() if jj == j},
                                                     self.caratheodory, self.selection, self.tie_leave)
            except mpevents.NoCaratheodory:
                raise _Stop(kstatus.NO_CARATHEODORY) from None
            except mpevents.NoConsistentConfiguration:
                raise _Stop(kstatus.NO_CONSISTENT) from None
            for i in surface:
                dec = decisions[i]
                if dec.stay:
                    if self.mode[i][j] != HELD:
                        self.mode[i][j] = HELD
                        self.log(dec.kind, j, i, 0, dec.multiplier)
                    self.drop[i][j] = DROP_NONE
                    continue
                new_active = dec.side > 0
                if self.mode[i][j] == HELD:
                    self.mode[i][j] = FREE
                    self.active[i][j] = new_active
                    self.log(EVENT_SLIDE_END, j, i, dec.side, dec.multiplier)
                elif new_active != self.active[i][j]:
                    self.active[i][j] = new_active
                    self.log(dec.kind, j, i, dec.side, dec.multiplier if dec.kind == EVENT_TIE else None)
                self.drop[i][j] = DROP_RELEASED if forced.get((i, j), 0) else DROP_CROSSED

    def _surfaces_reached(self):
        """Stage 1 (kernel ``_surfaces_reached``): free surfaces the state sits on (to rounding) or whose side
        disagrees with the sign of ``z``."""
        data = self.data
        Z = preactivations(data, self.P)
        scales = [max(abs(x) for x in row[: data.da]) for row in self.P]  # per neuron, as in the kernel
        hit = set()
        for i in range(data.n):
            base = tolerance("on_surface") * mp.fsum(abs(x) for x in data.normals[i])
            for j in range(len(self.P)):
                reach = base * scales[j]
                if self.mode[i][j] != FREE or self.drop[i][j] != DROP_NONE:
                    continue
                z = Z[i][j]
                wrong = z <= 0 if self.active[i][j] else z >= 0
                if wrong or abs(z) <= reach:
                    hit.add((i, j))
        return hit

    # ----- multipliers of held surfaces -------------------------------------------------------------------
    def _exit_root(self, poly, phi, beta, bound, span, band):
        """Earliest root in ``(0, bound]`` of the exit polynomial ``poly`` (kernel ``_exit_root``, with its noise band
        ``band`` and the step's ``span``), or None."""
        powers = self._powers(bound, max(len(poly), len(phi)))
        terms = _term_sizes_raw(poly, powers)
        size_h = _largest(terms)
        size_phi = _largest(_term_sizes_raw(phi, powers))
        if size_h <= self.noise * size_phi:
            return None
        on_bound = abs(poly[0]) <= self.noise * abs(phi[0])
        if on_bound and _largest(terms[1:]) <= self.stay * size_phi:
            return None
        out = _outward(phi, beta)
        if not on_bound and out * poly[0] > 0 and band > 0:
            if out * poly[0] > band:
                return None  # beyond the band: released at the step's start
            shifted = [out * c for c in poly]
            shifted[0] -= band
            return earliest_root(shifted, bound, 0)
        tau = earliest_root(poly, bound, 1 if on_bound else 0)
        if tau is not None and tau <= bound and not _beyond_band(poly, out, band, span):
            return None
        return tau

    def _powers(self, bound, count):
        """``[bound**k for k < count]`` as raw mpf, kept for the next call with the same ``bound`` (the exit
        polynomials of one step are searched on a few bounds)."""
        key = bound._mpf_
        cached = self._power_cache
        if cached is None or cached[0] != key or len(cached[1]) < count:
            prec, rnd = mp._prec_rounding
            cached = self._power_cache = (key, [mpf_pow_int(key, k, prec, rnd) for k in range(count)])
        return cached[1]

    def _leaving_bound(self, poly, phi, beta, h, band):
        """The multiplier sits on ``beta`` and moves out of ``[leak, 1]`` (kernel ``_leaving_bound``)."""
        if phi[0] == 0 or abs(poly[0]) > self.noise * abs(phi[0]):
            return False
        rate = poly[1] / phi[0]
        if abs(rate) * h <= self.stay:
            return False
        if abs(poly[1]) * h <= band:
            return False
        return rate > 0 if beta == 1 else rate < 0

    def _exit_side(self, held, slot, tau, beta):
        """Side a held surface leaves to when its multiplier crosses ``beta`` at ``tau`` (kernel ``_exit_side``):
        the sign of ``phi = a_j G_i`` there, or where a trained ``a_j`` vanishes and ``G_i`` does not, that of
        ``a_j' G_i``; 0 (re-classify) when ``phi`` vanishes otherwise."""
        sign = _sign_at(held.phi[slot], tau)
        if sign == 0:
            j, da = held.slots[slot][1], self.data.da
            outer = [Ck[j][da] for Ck in self.C[:self.K]]
            if _sign_at(outer, tau) == 0:
                sign = _sign_at(outer, tau, 1) * _sign_at(held.den[slot], tau)
        if sign == 0:
            return 0
        return 1 if (beta == 1) == (sign > 0) else -1

    # ----- the stages of one pass of the kernel's loop (:func:`flowlib.kernels.driver.integrate_chunk`) ---------
    def step(self, t_end, max_releases):
        """One step (or the releases at this instant, then one step): the kernel's loop body, stage for stage.
        Returns the step's record ``(t, h, C, loss, energy)``; raises :class:`_Stop` with the kernel's code where
        the kernel's loop ends with it, and ``NO_PROGRESS`` after ``max_releases`` releases at one instant. An
        accumulation point that the last event instant completed (stage 6) is passed by the next call, whose
        record is its tail (the kernel takes both in one pass)."""
        if self.pending is not None and self.pending.t <= t_end:
            return self._zeno_jump()
        self.pending = None
        stalls = 0
        while True:
            # 1. free surfaces reached: events now
            hit = self._surfaces_reached()
            if hit:
                self._resolve(hit, {})
            # a square-loss flow whose residuals are rounding has converged to working precision: it coasts
            if self._coasting():
                return self._coast(t_end)
            # 2. Taylor coefficients, held surfaces and their multipliers
            held = self._held_series()
            # 3. step size, noise bands, hold / release
            h, span, final, size = self._step_size(t_end)
            self._noise_bands(held, size)
            released, forced = self._releases_due(held, h), True
            if not released:
                released, forced = self._released_backwards(h), False
            if released:
                stalls += 1
                if stalls > max_releases:
                    raise _Stop(kstatus.NO_PROGRESS)  # releases at one instant did not end
                self._release(released, forced)
                continue
            # the velocity this step follows against the Filippov set (kept by the driver once the step is taken)
            self.step_inclusion = inclusion_residual(self.data, self.G[0], self.C, self.S, self.mode, self.drop,
                                                     held)
            # 4. events located: the earliest root of every free switching and every exit polynomial ends the step
            bound, found = self._locate_events(held, h, span)
            if found:
                h, final = bound, False
            # 5. record, advance (with drift correction), classify the surfaces reached at the step's end
            record = self._record_step(h)
            self._advance(held, h)
            self.dissipated += record[4]
            self.t = t_end if final else self.t + h
            first = len(self.events)
            self._classify_reached(held, h, span, found)
            self.K = self._next_order(h, size, found)
            self.low = min(self.K, ADAPTIVE_MIN_ORDER) if found else self.K
            # 6. an event instant goes to the Zeno detector; an accumulation it completes is passed next
            if len(self.events) > first:
                self.pending = self._zeno_record(first, t_end)
            return record

    def _next_order(self, h, size, found):
        """The order controller (kernel ``_next_order``): after a step an event ended, the order it needed
        (:func:`_order_needed`) plus ``ORDER_MARGIN``, at least ``LOWEST_ORDER``; after any other step
        ``ORDER_CLIMB`` more, at most the tolerance's."""
        if not found:
            return min(self.top, self.K + ORDER_CLIMB)
        low = min(self.top, LOWEST_ORDER)
        K = max(low, _order_needed(self._size, self.K, h, size, self.tol, 2) + ORDER_MARGIN)
        return K if 2 * K <= self.top else self.top

    def _held_surfaces(self):
        """Stage 2a (kernel ``_held_surfaces``): the held surfaces as slots, grouped by neuron: per neuron
        ``(slot, sample, pinv row)``, the slots ``(i, j)``, their dependent flags and null vector entries. Neurons
        held on dependent hyperplanes are re-classified first."""
        per_neuron, slots, dependent, null = self._constraints()
        if not any(dependent):
            return per_neuron, slots, dependent, null
        hit = set()
        for slot, dep in enumerate(dependent):
            if dep:
                j = slots[slot][1]
                hit.update((i, j) for _, i, _ in per_neuron[j])
        self._resolve(hit, {})
        return self._constraints()

    def _held_series(self):
        """Stage 2 (kernel ``_held_series``): the held surfaces, the Taylor coefficients of the state (``self.C``,
        and ``self.Cr`` their raw tuples; ``self.Z`` (raw), ``self.G``: those of the pre-activations and residual
        weights) and of each held surface's multiplier ``num / den`` (:meth:`_multiplier_series`) and of
        ``phi = a_j G_i``; with each exit polynomial ``num - beta den``. The series go to ``self.K``, or from
        ``self.low < self.K`` on only as far as the next crossing needs (:meth:`_adaptive_order`, which lowers
        ``self.K``)."""
        data = self.data
        per_neuron, slots, dependent, null = self._held_surfaces()
        self._expansion = TaylorExpansion(data, self.S, self.P, per_neuron, self.t if self.log_clock else None)
        self.Cr, self._sizes = None, {}
        K = self.K = self._adaptive_order(self._expansion)
        series = self._expansion.series(K)
        self.C, self.Cr, self.Z, self.G, self.F = series.C, series.Cr, series.Zr, series.G, series.F
        lmax = K - 1 if data.train_outer else 0
        C, G, da = self.C, self.G, data.da
        phi = [rounded_convolution([C[l][j][da] for l in range(lmax + 1)], [G[o][i] for o in range(K)], lmax)
               for i, j in slots]
        num, den = self._multiplier_series(per_neuron, slots)
        exits = {}
        prec, rnd = mp._prec_rounding
        for slot in range(len(slots)):
            if dependent[slot]:
                continue
            for beta in (data.leak, mpf(1)):  # p - beta * q, on raw mpf
                b = beta._mpf_
                exits[slot, beta] = wrap_all([mpf_sub(p._mpf_, mpf_mul(b, q._mpf_, prec, rnd), prec, rnd)
                                              for p, q in zip(num[slot], den[slot])])
        groups = self._group_exits(per_neuron, dependent, null, den)
        return Held(per_neuron, slots, dependent, null, series.Cm, phi, num, den, exits, {}, groups)

    def _adaptive_order(self, expansion) -> int:
        """Kernel ``_adaptive_series``: the order the step stops at, the first from ``self.low`` on (at least
        ``LOWEST_ORDER`` where a surface was released at this instant) whose step reaches ``ADAPTIVE_MARGIN`` times
        the predicted time of the next crossing (:meth:`_linear_crossing`), at most ``self.K``. The series
        (``expansion``, :class:`~flowlib.mp.series.TaylorExpansion`) are computed as far as this search reads them,
        then to the order found: the same coefficients as those computed to ``self.K`` and cut there (they do not
        depend on the orders above)."""
        low, top = self.low, self.K
        if low < top and any(d == DROP_RELEASED for row in self.drop for d in row):
            low = min(top, max(low, LOWEST_ORDER))
        if low >= top:
            return top
        self.Z = [expansion.raw_switching(0), expansion.raw_switching(1)]  # what _linear_crossing reads
        target = ADAPTIVE_MARGIN * self._linear_crossing()
        size = self._size(0) or mpf(1)
        K = low
        while K < top and _taylor_step(size, self._size(K - 1), self._size(K), K, self.tol) < target:
            K += 1
        return K

    def _linear_crossing(self):
        """Kernel ``_linear_crossing``: the earliest time at which a free switching function's linear part reaches 0,
        over the surfaces not just crossed or left (``inf`` when every one moves away)."""
        Z0, Z1 = self.Z[0], self.Z[1]
        best = mp.inf
        for i in range(self.data.n):
            for j in range(len(self.P)):
                z0, z1 = Z0[i][j], Z1[i][j]
                if _opposite(z0, z1) and self.mode[i][j] == FREE and self.drop[i][j] == DROP_NONE:
                    best = min(best, -mp.make_mpf(z0) / mp.make_mpf(z1))
        return best

    def _multiplier_series(self, per_neuron, slots):
        """Kernel ``_multiplier_series``: per slot, the Taylor coefficients (orders ``0..K - 1``) of the multiplier's
        numerator ``num = -sum_k s_kj G_k <pinv, n_k>`` (over the neuron's free samples) and denominator
        ``den = G_i``: ``s = num / den``, without the factor ``a_j`` of ``Cm`` and ``phi``."""
        data, S, G, K = self.data, self.S, self.G, self.K
        rows = {slot: row for entry in per_neuron for slot, _, row in entry}
        num, den = [], []
        for slot, (i, j) in enumerate(slots):
            proj = [S[k][j] * mp.fdot(rows[slot], data.normals[k]) if S[k][j] != 0 else mpf(0)
                    for k in range(data.n)]
            num.append([-mp.fdot(proj, G[o]) for o in range(K)])
            den.append([G[o][i] for o in range(K)])
        return num, den

    def _step_size(self, t_end):
        """Stage 3a (kernel ``_step_size``): ``(h, span, final, size)``; raises ``NONFINITE`` for a non-finite
        coefficient and ``NO_PROGRESS`` for a step that does not advance ``t``."""
        C, K = self.C, self.K
        top = self._size(K)
        below = self._size(K - 1)
        if not (mp.isfinite(top) and mp.isfinite(below)):
            raise _Stop(kstatus.NONFINITE)
        size = self._size(0)
        if not mp.isfinite(size):  # the built-in max skips a NaN, or not, by its place
            size = max(abs(x) for row in C[0] for x in row)
        size = size or mpf(1)
        h = min(_taylor_step(size, below, top, K, self.tol),
                mp.exp(STEP_SAFETY_EXPONENT) * flat_loss_radius(self.data, self.F))
        remaining = t_end - self.t
        span = h if mp.isfinite(h) else remaining  # the interval on which the step's polynomials are accurate
        final = h >= remaining
        if final:
            h = remaining
        if not h > 0 or self.t + h == self.t:
            raise _Stop(kstatus.NO_PROGRESS)
        return h, span, final, size

    def _noise_bands(self, held, size):
        """Stage 3b (kernel ``_noise_bands``, ``_residual_noise`` and ``_slot_noise``): ``held.band[slot, beta]``,
        the half-width of every exit polynomial's noise band; the state is uncertain by ``max(tol, eps)
        max|theta|``."""
        if not held.slots:
            return
        data, P, S, G0 = self.data, self.P, self.S, self.G[0]
        da = data.da
        state_noise = max(self.tol, self.eps) * size
        Z = preactivations(data, P)
        gnoise = []
        for i in range(data.n):
            reach = mp.fsum(abs(x) for x in data.normals[i])
            acc = mp.fsum(abs(S[i][j]) * (abs(P[j][da]) * reach + abs(Z[i][j])) for j in range(len(P))
                          if S[i][j] != 0)
            if data.loss_kind == LOSS_SQUARE:
                gnoise.append(data.c * acc * state_noise * (mp.exp(self.t) if self.log_clock else 1))
            else:
                gnoise.append(abs(data.y[i] * G0[i]) * acc * state_noise)
        rows = {}
        for entry in held.per_neuron:
            for slot, i, row in entry:
                rows[slot] = row
        for slot, (i, j) in enumerate(held.slots):
            a = abs(P[j][da])
            spread, value = mpf(0), mpf(0)
            for k in range(data.n):
                if S[k][j] == 0:
                    continue
                proj = mp.fdot(rows[slot], data.normals[k])
                spread += abs(S[k][j] * proj) * gnoise[k]
                value += abs(S[k][j] * proj * G0[k])
            relative = state_noise / a if a > 0 else mpf(0)
            for beta in (data.leak, mpf(1)):
                held.band[slot, beta] = NOISE_BAND * (spread + relative * value
                                                      + abs(beta) * (gnoise[i] + relative * abs(G0[i])))

    def _releases_due(self, held, h):
        """Stage 3c (kernel ``_releases_due``): the held surfaces released now, ``{(i, j): side}``: a multiplier on a
        bound moving out of ``[leak, 1]`` (:meth:`_leaving_bound`), or kept beyond it inside the noise band and
        leaving the band (:func:`_outside_band`); and those of a combination of dependent hyperplanes that does so
        (:meth:`_group_leaving`)."""
        forced = {}
        for (slot, beta), poly in held.exits.items():
            band = held.band[slot, beta]
            if self._leaving_bound(poly, held.den[slot], beta, h, band) or \
                    _outside_band(poly, held.den[slot], beta, band, self.noise):
                side = self._exit_side(held, slot, mpf(0), beta)
                if side:
                    forced[held.slots[slot]] = side
        for group in held.groups:
            if self._group_leaving(held, group, h):
                for r, _, beta in group:
                    side = self._exit_side(held, r, mpf(0), beta)
                    if side:
                        forced[held.slots[r]] = side
        return forced

    def _release(self, hit, forced):
        """Stage 3d (kernel ``_release``): classify the surfaces ``hit`` at this instant, ``forced`` (true) to the
        sides ``hit`` maps them to."""
        self._resolve(set(hit), hit if forced else {})

    def _locate_events(self, held, h, span):
        """Stage 4 (kernel ``_locate_events``): ``(bound, found)``, the earliest root in ``(0, h]`` of every free
        switching polynomial and of every exit polynomial. Keeps the switching polynomials examined (``self.Zt``)
        for :meth:`_classify_reached`."""
        data, K, Z = self.data, self.K, self.Z
        bound, found = h, False
        self.Zt = {}
        for i in range(data.n):
            by_neuron = list(zip(*[Zk[i] for Zk in Z[:K + 1]]))  # the polynomials of sample i, neuron by neuron
            for j in range(len(self.P)):
                if self.mode[i][j] != FREE:
                    continue
                g = list(by_neuron[j])
                self.Zt[i, j] = g
                vanish = self._vanishing_terms(i, j, g)
                if excluded_raw(g[vanish:], bound._mpf_):
                    continue
                tau = earliest_root_raw(g, bound, vanish)
                if tau is not None and tau <= bound:
                    bound, found = tau, True
        for (slot, beta), poly in held.exits.items():
            tau = self._exit_root(poly, held.den[slot], beta, bound, max(span, bound), held.band[slot, beta])
            if tau is not None and tau <= bound:
                bound, found = tau, True
        tau = self._group_exits_due(held, bound, max(span, bound))
        if tau is not None and tau <= bound:
            bound, found = tau, True
        return bound, found

    def _vanishing_terms(self, i, j, g):
        """Kernel ``_vanishing_terms``: the leading coefficients of the switching polynomial ``g`` that the root
        search divides out. A surface released at this instant is left tangentially (2) unless ``z_ij'(0)``
        exceeds ``tolerance("stay")`` of ``|p_j'| |Xa_i|``, the neuron's speed times the normal's size, and points to
        the side the surface is on (a class of surfaces on one hyperplane released together with the side's
        slopes): then only ``z_ij(0)`` vanishes (1)."""
        drop = self.drop[i][j]
        if drop != DROP_RELEASED:
            return drop
        data = self.data
        speed = mp.sqrt(mp.fdot(self.C[1][j][:data.da], self.C[1][j][:data.da]))
        size = mp.sqrt(mp.fdot(data.Xa[i], data.Xa[i]))
        g1 = mp.make_mpf(g[1])
        genuine = abs(g1) > tolerance("stay") * speed * size and (g1 > 0) == self.active[i][j]
        return DROP_CROSSED if genuine else DROP_RELEASED

    def _group_exits(self, per_neuron, dependent, null, den):
        """Kernel ``_group_exits``: the combined exit polynomials of the neurons held on dependent hyperplanes, each
        a list of ``(slot, weight, beta)`` with ``gap = sum weight (num - beta den)[slot] >= 0`` while the neuron
        can hold: two per parallel class (:func:`_parallel_classes`), else one per ordered pair of a
        one-dimensional null space."""
        data, leak = self.data, self.data.leak
        groups = []
        for entry in per_neuron:
            slots = [slot for slot, _, _ in entry]
            if not any(dependent[slot] for slot in slots):
                continue
            classes = _parallel_classes([data.normals[i] for _, i, _ in entry], [dependent[slot] for slot in slots])
            if classes is not None:
                for members in classes:
                    for side in (0, 1):
                        groups.append([(slots[p], rho if side == 0 else -rho,
                                        _slot_bounds(den[slots[p]], rho > 0, leak)[side]) for p, rho in members])
                continue
            chain = [slot for slot in slots if null[slot] != 0]
            for k in chain:
                for l in chain:
                    if k != l:
                        groups.append([(k, 1 / null[k], _slot_bounds(den[k], null[k] > 0, leak)[0]),
                                       (l, -1 / null[l], _slot_bounds(den[l], null[l] > 0, leak)[1])])
        return groups

    def _group_gap(self, held, group):
        """Kernel ``_group_gap``: the combination ``group`` as an exit polynomial ``(gap, scale, band)``."""
        gap = [mp.fsum(w * (held.num[r][o] - b * held.den[r][o]) for r, w, b in group) for o in range(self.K)]
        scale = [mp.fsum(abs(w * held.den[r][0]) for r, w, _ in group)] + [mpf(0)] * (self.K - 1)
        band = mp.fsum(abs(w) * max(held.band[r, self.data.leak], held.band[r, mpf(1)]) for r, w, _ in group)
        return gap, scale, band

    def _group_exit(self, held, group, bound, span):
        """Kernel ``_group_exit``: the earliest root in ``(0, bound]`` at which the combination ``group`` becomes
        negative, or None."""
        gap, scale, band = self._group_gap(held, group)
        return self._exit_root(gap, scale, mpf(0), bound, span, band)

    def _group_leaving(self, held, group, h):
        """Kernel ``_group_leaving``: the combination releases its surfaces at the step's start."""
        gap, scale, band = self._group_gap(held, group)
        if abs(gap[0]) <= self.noise * scale[0]:
            return gap[1] * h < -self.stay * scale[0] and abs(gap[1]) * h > band
        return band > 0 and -gap[0] > band

    def _group_exits_due(self, held, bound, span, reach=None, hit=None, forced=None, h=None):
        """Kernel ``_group_exits_due``: the earliest root of every combination (None if none); with ``hit``, the
        combinations with a root within ``reach`` have their surfaces hit and forced to their exit sides at
        ``h``."""
        earliest = None
        for group in held.groups:
            tau = self._group_exit(held, group, bound, span)
            if tau is not None and (earliest is None or tau < earliest):
                earliest = tau
            if hit is not None and tau is not None and tau <= reach:
                for r, _, beta in group:
                    hit.add(held.slots[r])
                    forced[held.slots[r]] = self._exit_side(held, r, h, beta)
        return earliest

    def _record_step(self, h):
        """Stage 5a (kernel ``_record_step``): the step's record ``(t, h, C, loss, energy)``; raises ``NONFINITE``
        for a loss of ``+inf``/NaN or a non-finite energy (``ln L = -inf`` is an exact zero loss)."""
        data, C = self.data, self.C
        # the energy of the step's own orders (those above it, exact zeros, add nothing to its sums)
        energy = velocity_energy_log(C, h, self.t) if self.log_clock else velocity_energy(C, h, self.Cr)
        if self.K < self.top:  # the orders above the step's are 0 (dense output reads every step at the run's order)
            zero = [[mpf(0)] * len(C[0][0]) for _ in C[0]]
            C = C + [zero] * (self.top - self.K)
        if self.log_clock:
            record = (self.t, h, C, mp.log(loss_value(data, self.P, self.S)), energy)
        else:
            record = (self.t, h, C, loss_value(data, self.P, self.S), energy)
        if not (record[3] < mp.inf and mp.isfinite(record[4])):
            raise _Stop(kstatus.NONFINITE)
        return record

    def _advance(self, held, h):
        """Stage 5b (kernel ``_advance``): the state at the step's end, held neurons projected back onto their
        surfaces; raises ``NONFINITE`` (the state unchanged) when it is not finite."""
        state = state_raw(self.Cr, h._mpf_)
        if max_magnitude(state, *mp._prec_rounding) in (finf, fnan):
            raise _Stop(kstatus.NONFINITE)
        self.P = state_rows(state, len(self.P[0]))
        self._project_onto_surfaces(held.per_neuron)

    def _classify_reached(self, held, h, span, found):
        """Stage 5c (kernel ``_classify_reached``): at an event, the free surfaces reached within ``SIMULTANEOUS h``
        of the step's end and the held surfaces whose multiplier leaves ``[leak, 1]`` there are classified
        together; the marks of surfaces just crossed or left are cleared first."""
        reach = h * (1 + tolerance("simultaneous"))
        hit, forced = set(), {}
        if found:
            for (i, j), g in self.Zt.items():
                vanish = self._vanishing_terms(i, j, g)
                if not excluded_raw(g[vanish:], reach._mpf_):
                    tau = earliest_root_raw(g, reach, vanish)
                    if tau is not None and tau <= reach:
                        hit.add((i, j))
        self.drop = [[DROP_NONE] * len(self.P) for _ in range(self.data.n)]
        self.reheld = set()
        if not found:
            return
        for (slot, beta), poly in held.exits.items():
            tau = self._exit_root(poly, held.den[slot], beta, reach, max(span, reach), held.band[slot, beta])
            if tau is not None and tau <= reach:
                hit.add(held.slots[slot])
                forced[held.slots[slot]] = self._exit_side(held, slot, h, beta)
        self._group_exits_due(held, reach, max(span, reach), reach, hit, forced, h)
        self._resolve(hit, {key: side for key, side in forced.items() if side})

    def _released_backwards(self, h):
        """Surfaces released at this instant whose switching polynomial first leaves the on-surface band within
        the step ``h`` on the other side (kernel ``_released_backwards``): re-classified once per instant."""
        data, K, C = self.data, self.K, self.C
        found = set()
        for i in range(data.n):
            reach = mp.fsum(abs(x) for x in data.normals[i])
            for j in range(len(self.P)):
                if self.drop[i][j] != DROP_RELEASED or self.mode[i][j] != FREE or (i, j) in self.reheld:
                    continue
                tol = tolerance("on_surface") * reach * max(abs(x) for x in self.P[j][:data.da])
                z = [mp.fdot(C[k][j][:data.da], data.normals[i]) for k in range(1, K + 1)]
                up = earliest_root([-tol] + z, h)
                down = earliest_root([tol] + z, h)
                if up is None and down is None:
                    continue
                first_up = down is None or (up is not None and up < down)
                if first_up != self.active[i][j]:
                    found.add((i, j))
        self.reheld |= found
        return found

    def _coasting(self):
        """A square-loss flow (without weight decay) converged to working precision (kernel ``_coasting`` and
        ``_converged``): every residual ``|f(x_i) - y_i|`` at most ``CONVERGED_ROUNDINGS`` rounding errors
        ``eps (sum_j |s_ij a_j| sum_q |p_jq x_iq| + |y_i|)`` of the output."""
        data, P, S = self.data, self.P, self.S
        if data.loss_kind != LOSS_SQUARE or data.decay:
            return False
        Z = preactivations(data, P)
        da = data.da
        for i in range(data.n):
            f = mp.fsum(S[i][j] * P[j][da] * Z[i][j] for j in range(len(P)) if S[i][j] != 0)
            gross = mp.fsum(abs(S[i][j] * P[j][da]) * mp.fsum(abs(P[j][q] * data.normals[i][q]) for q in range(da))
                            for j in range(len(P)) if S[i][j] != 0)
            if not abs(f - data.y[i]) <= CONVERGED_ROUNDINGS * self.eps * (gross + abs(data.y[i])):
                return False
        return True

    def _coast(self, t_end):
        """The last step of a converged flow: the state held constant from now to ``t_end`` (kernel ``_coast``)."""
        K, da = self.top, self.data.da
        C = [[list(row) for row in self.P]] + [[[mpf(0)] * (da + 1) for _ in self.P] for _ in range(K)]
        loss = loss_value(self.data, self.P, self.S)
        record = (self.t, t_end - self.t, C, mp.log(loss) if self.log_clock else loss, mpf(0))
        self.converged_at = self.t
        self.t = t_end
        return record

    # ----- Zeno points ---------------------------------------------------------------------------------------
    def _zeno_record(self, first, t_end):
        """Stage 6a (kernel ``_zeno_record``): record this event instant (key of its first event, the row of that
        event's neuron, the state, the energy so far); the accumulation it completes before ``t_end``
        (:func:`flowlib.mp.zeno.zeno_check`), or ``None``."""
        _, kind, j, i, side, _ = self.events[first]
        key = ((i * len(self.P) + j) * _KINDS + kind) * 3 + side + 1
        self.zeno.append(zeno.Instant(self.t, key, list(self.P[j]), [list(row) for row in self.P], self.dissipated))
        found = zeno.zeno_check(self.zeno)
        return found if found is not None and self.t < found.t <= t_end else None

    def _zeno_jump(self):
        """Stage 6 (kernel ``_zeno_jump``): pass the accumulation point :meth:`_zeno_record` found. The state
        jumps to the extrapolated limit (rows of the cycle's neurons by their contraction ``rho``, the others by
        the time ratio), a ``zeno`` event is logged, the memory is cleared, and the surfaces the cycle's neurons
        sit on are snapped onto (:meth:`_zeno_snap`) and classified afresh. Returns the tail's record: one linear
        step from the last instant to the limit, with Aitken's extrapolation of the dissipated energy."""
        found, self.pending = self.pending, None
        p, ratio, rho, m = found.cycle, found.ratio, found.rho, len(self.P)
        last, previous = self.zeno[-1], self.zeno[-1 - p]
        in_cycle = {self.zeno[-1 - back].key // (3 * _KINDS) % m for back in range(p)}
        before = [list(row) for row in self.P]
        self.P = [[a + (a - b) * (rho / (1 - rho) if j in in_cycle else ratio / (1 - ratio))
                   for a, b in zip(last.whole[j], previous.whole[j])] for j in range(m)]
        limit, _ = zeno.aitken(last.energy, previous.energy, self.zeno[-1 - 2 * p].energy)
        energy = limit - last.energy if limit is not None else (last.energy - previous.energy) * ratio / (1 - ratio)
        hit = self._zeno_snap(in_cycle, last, previous)
        h = found.t - self.t
        width = len(before[0])
        C = [before, [[(a - b) / h for a, b in zip(after, start)] for after, start in zip(self.P, before)]]
        C += [[[mpf(0)] * width for _ in range(m)] for _ in range(self.top - 1)]
        Z = preactivations(self.data, before)
        pattern = slopes(self.data, [[z > 0 for z in row] for row in Z], [[False] * m for _ in Z])
        loss = loss_value(self.data, before, pattern)
        record = (self.t, h, C, mp.log(loss) if self.log_clock else loss, energy)
        self.dissipated += energy
        self.t = found.t
        cell = last.key // (3 * _KINDS)
        self.log(EVENT_ZENO, cell % m, cell // m, 0, ratio)
        self.zeno.clear()
        self._resolve(hit, {})
        return record

    def _zeno_snap(self, in_cycle, last, previous):
        """The surfaces each neuron of the cycle sits on, to ``zeno_snap`` times the last cycle's change of its
        ``(w_j, b_j)``, made free and returned; every neuron projected onto its held and those surfaces (kernel
        ``_zeno_snap``)."""
        data, da = self.data, self.data.da
        hit = set()
        for j in sorted(in_cycle):
            amplitude = mp.sqrt(mp.fsum((a - b) ** 2 for a, b in zip(last.whole[j][:da], previous.whole[j][:da])))
            for i in range(data.n):
                if self.mode[i][j] == VOID:
                    continue
                z = mp.fdot(data.normals[i], self.P[j][:da])
                if abs(z) <= tolerance("zeno_snap") * mp.fsum(abs(x) for x in data.normals[i]) * amplitude:
                    hit.add((i, j))
                    self.mode[i][j] = HELD
        self._project_onto_surfaces(self._constraints()[0])
        for i, j in hit:
            self.mode[i][j] = FREE
            self.drop[i][j] = DROP_NONE
        return hit

    def _project_onto_surfaces(self, per_neuron):
        """Drift correction: put each held neuron back on the intersection of its held surfaces."""
        da = self.data.da
        for j, entry in enumerate(per_neuron):
            if not entry:
                continue
            coefs = [mp.fdot(row, self.P[j][:da]) for _, _, row in entry]
            for (_, i, _), c in zip(entry, coefs):
                self.P[j][:da] = [p - c * x for p, x in zip(self.P[j][:da], self.data.normals[i])]


@dataclass
class Held:
    """The held surfaces of one step (kernel ``Held``): per neuron ``(slot, sample, pinv row)``, the slots
    ``(i, j)``, their dependent flags and null vector entries (kernel ``null_vector``), the Taylor coefficients (per slot) of the projection coefficients ``Cm``,
    of ``phi = a_j G_i`` and of the multiplier's numerator ``num`` and denominator ``den = G_i``
    (:meth:`_Integrator._multiplier_series`), the exit polynomials ``{(slot, beta): num - beta den}`` of the
    independent slots, their noise bands ``{(slot, beta): half-width}`` (:meth:`_Integrator._noise_bands`), and the
    combined exit polynomials of neurons on dependent hyperplanes (:meth:`_Integrator._group_exits`)."""

    per_neuron: list
    slots: list
    dependent: list
    null: list
    Cm: list
    phi: list
    num: list
    den: list
    exits: dict
    band: dict
    groups: list


def _null_vector(normals, flags, cut) -> list:
    """Kernel ``null_vector``: per column, its entry of the null vector ``z`` (``z_p = 1`` at the first dependent
    column ``p``) where the columns' null space is one-dimensional; all 0 otherwise or without dependent ones."""
    zero = [mpf(0)] * len(normals)
    if not any(flags):
        return zero
    p = flags.index(True)
    others = [c for r, c in enumerate(normals) if r != p]
    if any(mpevents.dependent_columns(others)):
        return zero
    coef = iter(linalg.lstsq(others, normals[p], cut))
    z = []
    for r in range(len(normals)):
        if r == p:
            z.append(mpf(1))
        else:
            c = next(coef)
            z.append(-c if flags[r] else mpf(0))
    return z


def _slot_bounds(den, positive, leak):
    """Kernel ``_slot_bounds``: ``(beta_lo, beta_hi)``, the slopes at which ``w G s`` (``w`` of sign ``positive``)
    is smallest and largest, from the sign of ``G = den[0]``."""
    if positive == (den[0] >= 0):
        return leak, mpf(1)
    return mpf(1), leak


def _parallel_classes(normals, dependent):
    """Kernel ``parallel_classes`` for one neuron's held normals: a list of classes ``[(position, rho), ...]``
    (``n = rho n_rep``) when the dependence is that of parallel normals only, else None."""
    tol = mpevents.stay_tol()
    rep = [None] * len(normals)
    classes = []
    for p, normal in enumerate(normals):
        if not dependent[p] or rep[p] is not None:
            continue
        norm2 = mp.fdot(normal, normal)
        if norm2 == 0:
            rep[p] = -2
            continue
        rep[p] = p
        members = [(p, mpf(1))]
        for r in range(p + 1, len(normals)):
            if not dependent[r] or rep[r] is not None:
                continue
            other = normals[r]
            ratio = mp.fdot(other, normal) / norm2
            own = mp.fdot(other, other)
            resid = mp.sqrt(mp.fsum((x - ratio * y) ** 2 for x, y in zip(other, normal)))
            if own > 0 and resid <= tol * mp.sqrt(own):
                rep[r] = p
                members.append((r, ratio))
        if len(members) == 1:
            return None
        classes.append(members)
    kept = [list(normals[p]) for p in range(len(normals)) if rep[p] is None or rep[p] == p]
    if any(mpevents.dependent_columns(kept)):
        return None
    return classes


def _outside_band(poly, den, beta, band, noise):
    """The multiplier starts beyond ``beta`` by more than the noise band ``band`` (kernel ``_outside_band``); not
    when it is on the bound to rounding (``noise`` relative to ``den``)."""
    return band > 0 and abs(poly[0]) > noise * abs(den[0]) and _outward(den, beta) * poly[0] > band


def _outward(den, beta):
    """Sign ``o`` with ``o (num - beta den) > 0`` exactly when the multiplier ``num / den`` is beyond ``beta``
    (kernel ``_outward``); 0 when ``den`` vanishes at the step's start."""
    if den[0] == 0:
        return 0
    up = 1 if beta == 1 else -1
    return up if den[0] > 0 else -up


def _sign_at(coefs, tau, derivative=0):
    """Kernel ``_sign_at``: sign of the polynomial ``coefs`` (its derivative with ``derivative = 1``) at ``tau``;
    0 where it is rounding (``exit_side`` relative to its Taylor terms there)."""
    terms = [(k if derivative else 1) * c * tau**(k - derivative) for k, c in enumerate(coefs) if k >= derivative]
    value = mp.fsum(terms)
    if abs(value) > tolerance("exit_side") * max((abs(x) for x in terms), default=mpf(0)):
        return 1 if value > 0 else -1
    return 0


def _term_sizes_raw(coefs, powers) -> list:
    """``abs(c_k) * bound**k`` for each coefficient as raw mpf (rounded as that mpf expression), ``powers`` the raw
    ``bound**k``."""
    prec, rnd = mp._prec_rounding
    return [mpf_mul(mpf_abs(c._mpf_, prec, rnd), p, prec, rnd) for c, p in zip(coefs, powers)]


def _largest(terms):
    """``max`` of the raw mpf ``terms`` (nonnegative or NaN) as an mpf, the value the built-in ``max`` gives over
    their mpf: compared on the tuples (:func:`flowlib.mp.fast.max_magnitude`), or by the built-in ``max``, whose
    answer then depends on the NaN's place, where one is NaN (or none is given)."""
    top = max_magnitude(terms, *mp._prec_rounding) if terms else fnan
    return max(wrap_all(terms)) if top == fnan else mp.make_mpf(top)


def _beyond_band(poly, out, band, span):
    """The exit polynomial goes beyond the bound by more than ``band`` somewhere in ``(0, span]`` (kernel
    ``_beyond_band``); always true without a band."""
    if band <= 0 or out == 0:
        return True
    shifted = [out * c for c in poly]
    shifted[0] -= band
    if shifted[0] > 0:
        return True
    tau = earliest_root(shifted, span, 0)
    return tau is not None and tau <= span


def _opposite(z0, z1) -> bool:
    """``z0 * z1 < 0`` for raw mpf (read from the signs where both are nonzero and finite)."""
    if z0[1] and z1[1]:
        return z0[0] != z1[0]
    return mpf_lt(mpf_mul(z0, z1), fzero)


class _Stop(Exception):
    """The run cannot go on: ``code`` is the kernel's code of the same failure (:mod:`flowlib.kernels.status`),
    whose status and message :data:`flowlib.statuses.KERNEL_STATUS` gives."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


def _taylor_step(size, below, top, K, tol):
    """The step-size rule of :func:`flowlib.kernels.stepping.taylor_step` at working precision (the same
    expression as before the order controller at the tolerance's order, where ``tol^(1/K) > e^-2``)."""
    rho = mp.inf
    if below > 0:
        rho = (size / below) ** (mpf(1) / (K - 1))
    if top > 0:
        rho = min(rho, (size / top) ** (mpf(1) / K))
    factor, safety = _step_safety(K, tol._mpf_, *mp._prec_rounding)
    return rho * safety if factor is None else rho * factor * safety


def tolerance_order(tol) -> int:
    """The Taylor order of a full step at tolerance ``tol`` (an mpf, at working precision): ``ceil(-ln(tol) / 2) +
    1``, at least ``MIN_ORDER`` (:func:`flowlib.kernels.stepping.tolerance_order` in float64)."""
    return max(MIN_ORDER, int(mp.ceil(-mp.log(tol) / 2)) + 1)


@lru_cache(maxsize=4096)
def _step_safety(K, tol, prec, rnd):
    """The factors of :func:`_taylor_step` that depend on ``K`` and ``tol`` (raw) only, computed once at the
    working precision ``prec`` and rounding ``rnd`` (those of the context, which the key repeats): ``(None, e)``
    with ``e = exp(STEP_SAFETY_EXPONENT - 0.7 / (K - 1))`` where ``tol^(1/K) >= exp(STEP_SAFETY_EXPONENT)``, else
    ``(tol^(1/K), exp(-0.7 / (K - 1)))``, or ``(None, r_F^((F + 1) / (K + 1)))`` where that is larger than their
    product, ``r_F`` the ratio ``h / rho`` at the tolerance's order ``F`` (:func:`tolerance_order`): the step whose
    first neglected term is that of a full step."""
    tol = mp.make_mpf(tol)
    factor = tol ** (mpf(1) / K)
    if factor >= mp.exp(STEP_SAFETY_EXPONENT):
        return None, mp.exp(STEP_SAFETY_EXPONENT - mpf(7) / 10 / (K - 1))
    safety = mp.exp(-mpf(7) / 10 / (K - 1))
    full = tolerance_order(tol)  # > K, and r_F = e^-2 exp(-0.7 / (F - 1)) (as in the float64 rule)
    ratio = mp.exp(STEP_SAFETY_EXPONENT - mpf(7) / 10 / (full - 1)) ** (mpf(full + 1) / (K + 1))
    if ratio > factor * safety:
        return None, ratio
    return factor, safety


def _order_needed(sizes, order, h, size, tol, lowest):
    """Kernel :func:`flowlib.kernels.stepping.order_needed` at working precision; ``sizes(k)`` is ``max |C[k]|``
    (:meth:`_Integrator._size`)."""
    bound = tol * size

    def term(k):
        top = sizes(k)
        if top == 0:
            return mpf(0)
        return top * h ** k if mp.isfinite(top) else mp.inf

    if term(order) > bound or term(order - 1) > bound:
        return order
    k = order
    while k > lowest and term(k - 2) <= bound:
        k -= 1
    return k


def integrate(problem, P0, t_end, *, dps, rtol, order, caratheodory, selection, tie_leave, t_eval, max_steps,
              max_events, progress, callback, log_clock=False, until=None, total=None) -> MPRun:
    """Run the mpmath flow; arguments are checked by :func:`flowlib.gradient_flow`.

    ``P0`` is the packed float64 state, ``t_end``/``t_eval``/``selection``/``rtol`` are converted exactly to mpf
    (pass strings or mpf for values that are not binary fractions). With ``log_clock`` the integration variable is
    ``s = ln(1 + t)``: ``t_end`` and ``t_eval`` are then values of ``s``, and so are the run's times and event
    times; ``loss`` holds ``ln L``. The callback, the messages and the stop rule ``until``
    (:class:`flowlib.Until`) see the flow time ``t`` all the same; ``total`` is the ``t_end`` the callback is
    shown (default: ``t_end``).

    The loop is the float64 driver's with a chunk of one step: after every step the stop rule is looked for
    inside it (:class:`_Watch`), the callback is called, and :func:`flowlib.statuses.flow_stop` says whether and
    why the run ends.
    """
    run = MPRun()
    started = time.perf_counter()
    with mp.workdps(dps):
        data = MPData.from_problem(problem)
        P = [[mpf(float(x)) for x in row] for row in P0]
        t_end = mpf(t_end)
        t_eval = [mpf(x) for x in t_eval]
        engine = _Integrator(data, P, order, mpf(rtol), caratheodory,
                             mpf(selection) if selection is not None else None, tie_leave, log_clock)
        watch = None if until is None else _Watch(until, (len(P), len(P[0])), log_clock)

        def flow_time(u):
            return mp.expm1(u) if log_clock else u

        def where(u):
            return at_time(flow_time(u), u if log_clock else None)

        eval_done = 0
        while eval_done < len(t_eval) and t_eval[eval_done] <= 0:
            run.eval_states.append([list(row) for row in P])
            eval_done += 1
        total = float(flow_time(t_end)) if total is None else total
        bar = progress_bar(progress, float(t_end), f"gradient flow (mpmath, {dps} digits)")
        steps, discarded = 0, False
        try:
            with sigint_flag() as interrupted, _young_collections() as collect:
                while True:
                    collect()
                    target = t_end if watch is None else watch.target(t_end)
                    code = kstatus.SUCCESS if engine.t >= target else kstatus.RUNNING
                    if code == kstatus.RUNNING:
                        saved = engine.snapshot()
                        try:
                            interrupted["raise"] = True
                            payload = _one_instant(engine, target, data.n * len(P) + 1)
                            interrupted["raise"] = False
                        except StepInterrupted:
                            interrupted["raise"] = False
                            engine.restore(saved)
                            discarded = True
                            payload = None
                        except _Stop as stop:
                            interrupted["raise"] = False
                            code, payload = stop.code, None
                        if payload is not None:
                            stop_inside = None if watch is None else watch.inside(payload)
                            if stop_inside is not None:
                                payload = _cut(engine, payload, stop_inside)
                            t0, h, C, loss0, energy = payload
                            if h > 0 or stop_inside is None:
                                run.inclusion = max(run.inclusion, engine.step_inclusion)
                                run.t.append(t0)
                                run.states.append([list(row) for row in C[0]])
                                run.loss.append(loss0)
                                run.energy.append(energy)
                                run.coefficients.append(C)
                                steps += 1
                            while eval_done < len(t_eval) and t_eval[eval_done] <= engine.t:
                                run.eval_states.append(state_at(C, min(t_eval[eval_done] - t0, h)))
                                eval_done += 1
                            if stop_inside is not None:
                                code = kstatus.REACHED
                            elif engine.t >= target:
                                code = kstatus.SUCCESS
                    if watch is not None and code == kstatus.SUCCESS:
                        code = watch.at_end(code, target < t_end, _loss_now(engine), engine.P, engine.t)
                    if bar is not None:
                        bar.update(float(engine.t) - bar.n)
                    asked = not discarded and report(callback, "flow", float(flow_time(engine.t)), total, steps,
                                                     len(engine.events))
                    end = flow_stop(code, where=lambda: where(engine.t), interrupted_now=interrupted["set"] or asked,
                                    steps=steps, events=len(engine.events), max_steps=max_steps,
                                    max_events=max_events,
                                    loss=_loss_now(engine) if code == kstatus.NONFINITE else 0.0,
                                    log_clock=log_clock, converged=None if engine.converged_at is None
                                    else where(engine.converged_at))
                    if end is not None:
                        run.status, run.message = end
                        if discarded:
                            run.message += " (the step under way was discarded)"
                        break
        finally:
            if bar is not None:
                bar.close()
        run.t.append(engine.t)
        run.states.append([list(row) for row in engine.P])
        run.loss.append(_loss_now(engine))
        run.events = engine.events
        run.eval_states = run.eval_states[:eval_done]
    run.wall_s = time.perf_counter() - started
    return run


@contextmanager
def _young_collections():
    """Pause the automatic garbage collection for a run; yields a function, called once a step, that sets the
    objects alive aside (``gc.freeze``: no collection traverses them) until the run ends, when they go back to the
    oldest generation (``gc.unfreeze``). A run keeps about ``(order + 1) m (d + 2)`` mpf a step (the dense
    output), which the automatic collections would traverse again and again as they accumulate (a fifth of a long
    run's time); collecting the youngest generation after each step instead traversed each of them once more, 2-6%
    of seed 003's runs at m = 50. A step leaves no reference cycles (none in those runs); any it left would be
    collected after the run. The collector's state is restored at the end; it is left alone when it was off, and
    where objects were frozen before the run (``gc.get_freeze_count()``, e.g. before a fork) the youngest
    generation is collected each step instead, so that the run unfreezes nothing of theirs."""
    if not gc.isenabled():
        yield lambda: None
        return
    gc.disable()
    frozen_before = gc.get_freeze_count()
    try:
        yield gc.freeze if not frozen_before else lambda: gc.collect(0)
    finally:
        if not frozen_before:
            gc.unfreeze()
        gc.enable()


def _loss_now(engine: _Integrator):
    """The loss at the engine's state (``ln L`` with the log clock)."""
    loss = loss_value(engine.data, engine.P, engine.S)
    return mp.log(loss) if engine.log_clock else loss


def _cut(engine: _Integrator, record: tuple, tau) -> tuple:
    """End the run ``tau`` into the step ``record`` just taken (:meth:`_Watch.inside` found the stop rule met
    there): the engine goes to that state and time and forgets the events after it; returns the record of the
    step's part that was kept (``h = tau``, its energy integrated to ``tau``), as
    :func:`flowlib.kernels.ensemble.flow_member` keeps it."""
    t0, h, C, loss0, energy = record
    engine.P = state_at(C, tau)
    engine.t = t0 + tau
    del engine.events[sum(1 for event in engine.events if event[0] <= engine.t):]
    if tau > 0:
        energy = velocity_energy_log(C, tau, t0) if engine.log_clock else velocity_energy(C, tau)
    return t0, tau, C, loss0, energy


class _Watch:
    """The stop rule :class:`flowlib.Until` along an mpmath flow: the checks of
    :func:`flowlib.kernels.ensemble.flow_member` (and its ``_stop_in_chunk``) on mpf numbers, one step at a time.

    The loss is compared at every step's start; once it has gone below ``loss_below`` the linear condition
    ``|<coef, theta> + offset| <= tol`` is looked for at the step's start, then at its end, and where it holds
    at the end but not at the start its first point inside is found by bisection on the step's polynomial, to
    the last bit of the working precision. Times are in the integration variable (``s = ln(1 + t)`` with the log
    clock; the loss is then ``ln L``, compared with ``ln(loss_below)``).
    """

    def __init__(self, until, shape: tuple[int, int], log_clock: bool):
        loss_below, coef, offset, tol = until.kernel_arguments(shape)
        self.use_lin = tol >= 0.0
        self.below = loss_below != loss_below  # no loss threshold: "below" from the start
        self.watching = self.use_lin or not self.below
        threshold = mpf(loss_below)
        self.threshold = mp.log(threshold) if log_clock and threshold > 0 else threshold
        # the nonzero coefficients, in the kernel's order (row by row); a zero term adds nothing
        self.terms = [(j, q, mpf(float(coef[j, q]))) for j in range(shape[0]) for q in range(shape[1])
                      if coef[j, q] != 0.0]
        self.offset, self.tol = mpf(offset), mpf(tol)
        deadline = mp.inf if until.deadline is None else mpf(until.deadline)
        self.u_deadline = mp.log1p(deadline) if log_clock else deadline

    def target(self, u_end):
        """Where to integrate to next: the deadline while the loss has not gone below ``loss_below``."""
        return self.u_deadline if not self.below and self.u_deadline < u_end else u_end

    def _functional(self, state, offset):
        acc = offset
        for j, q, c in self.terms:
            acc += c * state[j][q]
        return acc

    def inside(self, record):
        """``tau`` in ``[0, h]`` where the run stops inside the step ``record``, or None."""
        if not self.watching:
            return None
        t0, h, C, loss0, energy = record
        if not self.below and loss0 < self.threshold:
            self.below = True
        if not self.below:
            return None
        if not self.use_lin or abs(self._functional(C[0], self.offset)) <= self.tol:
            return mpf(0)
        g = [self._functional(Ck, mpf(0)) for Ck in C]
        if abs(horner(g, h) + self.offset) > self.tol:
            return None
        lo, hi = mpf(0), h
        for _ in range(mp.prec + 64):
            mid = (lo + hi) / 2
            if mid <= lo or mid >= hi:
                break
            if abs(horner(g, mid) + self.offset) <= self.tol:
                hi = mid
            else:
                lo = mid
        return hi

    def at_end(self, code: int, at_deadline: bool, loss, state, u) -> int:
        """The code of a run that reached its target ``u`` with ``loss`` at ``state``: at the deadline, on
        (``RUNNING``, the loss has gone below ``loss_below``) or ``DEADLINE``; at ``t_end``, ``REACHED`` when the
        rule holds there, ``DEADLINE`` when the deadline has passed without the loss going below, else ``code``."""
        if at_deadline:
            if loss < self.threshold:
                self.below = True
                return kstatus.RUNNING
            return kstatus.DEADLINE
        if not self.watching:
            return code
        below = self.below or loss < self.threshold
        if below and (not self.use_lin or abs(self._functional(state, self.offset)) <= self.tol):
            return kstatus.REACHED
        if not below and self.u_deadline <= u:
            return kstatus.DEADLINE
        return code


def _one_instant(engine: _Integrator, t_end, max_releases):
    """One step of ``engine`` towards ``t_end`` (:meth:`_Integrator.step`, at most ``max_releases`` releases at one
    instant): its record ``(t, h, C, loss, energy)``."""
    return engine.step(t_end, max_releases)
