"""Certified trajectories: rigorous enclosures of a computed flow's event times, states and losses.

:func:`certify` re-integrates a :class:`~flowlib.FlowResult` in ball arithmetic (python-flint's ``arb``, the
optional ``certify`` extra), guided by its event log, and proves every step: an a priori enclosure and a Taylor
polynomial with a rigorous remainder between events, an isolated simple zero with no earlier competitor for each
event, and its kind from the proven signs of the one-sided normal velocities. See docs/design.md, *Certified
trajectories*.
"""

from __future__ import annotations

import math
import time

import numpy as np
from mpmath import mpf

from flowlib.certify.balls import exact, flint, interval, span, upper, working
from flowlib.certify.certificate import Certificate, CertifiedEvent, build
from flowlib.certify.field import BallNetwork
from flowlib.certify.steps import Uncertain
from flowlib.certify.walk import (Stop, apply_event, candidates, earliest, initial_configuration, match,
                                  next_step)
from flowlib.progress import check_callback, report

__all__ = ["Certificate", "CertifiedEvent", "certify"]

#: event kinds the walk can prove
PROVABLE = ("cross", "slide_start", "stick", "slide_end")
#: pieces of a step over which a held multiplier's range is enclosed
RANGE_PIECES = 4


def _check(result, times, prec, order, time_tol, max_steps) -> tuple:
    from flowlib.result import EVENT_KINDS, Event, FlowResult

    if not isinstance(result, FlowResult):
        raise ValueError(f"result must be a FlowResult (from gradient_flow), got {type(result).__name__}")
    if isinstance(prec, bool) or not isinstance(prec, (int, np.integer)) or not 64 <= prec <= 4096:
        raise ValueError(f"prec must be an integer number of bits in [64, 4096], got {prec!r}")
    if order is not None and (isinstance(order, bool) or not isinstance(order, (int, np.integer))
                              or not 4 <= order <= 200):
        raise ValueError(f"order must be an integer in [4, 200] or None, got {order!r}")
    if isinstance(time_tol, bool) or not isinstance(time_tol, (int, float)) or not (0 < time_tol < 1):
        raise ValueError(f"time_tol must be a real number in (0, 1), got {time_tol!r}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
    t0, t1 = float(result.t[0]), float(result.t[-1])
    if not (math.isfinite(t0) and math.isfinite(t1)):
        raise ValueError("result must end at a finite time (a flow past t = 1.8e308 cannot be certified)")
    if times is None:
        times = [t1]
    try:
        times = sorted(float(t) for t in np.atleast_1d(np.asarray(times, dtype=float)))
    except (TypeError, ValueError):
        raise ValueError(f"times must be real numbers, got {times!r}") from None
    if any(not (t0 <= t <= t1) for t in times):
        raise ValueError(f"times must lie in the result's span [{t0!r}, {t1!r}], got {times}")
    log = result.events
    expected = [Event(float(t), EVENT_KINDS[int(k)], int(j), int(i), int(s))
                for t, k, j, i, s in zip(log.t, log.kind, log.neuron, log.sample, log.side)]
    return times, expected


def certify(result, times=None, *, prec: int = 128, order: int | None = None, time_tol: float = 1e-9,
            max_steps: int = 100_000, callback=None) -> Certificate:
    """Prove a computed flow: enclose its event times, and its state and loss at ``times``, or say where and why
    that is not possible.

    Parameters
    ----------
    result : FlowResult
        A flow from :func:`~flowlib.gradient_flow` (float64 or mpmath). Its problem, initial state, final time and
        event log are used; its trajectory is not trusted, only compared.
    times : array_like, optional
        Times in the result's span at which to enclose the state and the loss (default: its final time).
    prec : int
        Working precision in bits (default 128, about 38 digits).
    order : int, optional
        Taylor order (default ``prec // 4``, at least 12).
    time_tol : float
        A logged event time farther than ``time_tol * max(1, |t|)`` from its proven enclosure rejects the log.
    max_steps : int
        Budget of certified steps.
    callback : callable, optional
        Called as ``callback(progress)`` with a :class:`~flowlib.Progress` (kind ``"certify"``) after every
        certified step; a true return value stops the walk as Ctrl-C does.

    Returns
    -------
    Certificate
        ``status`` ``"certified"``, ``"rejected"`` (the log disagrees with what was proven), ``"undecided"``
        (with the reason and the time up to which everything is proven) or ``"interrupted"`` (Ctrl-C or the
        callback; everything before ``t_certified`` stays proven). A certificate is never issued for a trajectory
        that was not proven.

    Raises
    ------
    ValueError
        Naming the argument.
    ImportError
        Without python-flint (``pip install 'flowlib[certify]'``).

    Notes
    -----
    python-flint keeps its precision in one process-wide context, which ``certify`` sets and restores: do not
    certify in two threads of one process at once (processes are fine).

    Examples
    --------
    >>> import flowlib as fl
    >>> from flowlib import examples
    >>> prob, p0 = examples.sliding_two_points()
    >>> res = fl.gradient_flow(prob, p0, t_end=3.0)
    >>> cert = fl.certify(res)
    >>> cert.status, [e.kind for e in cert.events]
    ('certified', ['slide_start'])
    >>> lo, hi = cert.events[0].t
    >>> float(hi - lo) < 1e-25
    True
    """
    times, expected = _check(result, times, prec, order, time_tol, max_steps)
    check_callback(callback)
    flint()
    order = max(12, prec // 4) if order is None else int(order)
    start = time.perf_counter()
    with working(prec, order + 3):
        walk = Walk(BallNetwork(result.problem), result.states[0], result.t[0], result.t[-1], times, expected,
                    order, prec, time_tol)
        status, reason = walk.run(max_steps, callback)
        return build(status, reason, walk.t, walk.found, walk.recorded, walk.states,
                     [loss(walk.net, state) for state in walk.states], prec, order, walk.n_steps,
                     time.perf_counter() - start)


class Walk:
    """The certifying walk's state: where it is (an uncertain state at a time ball, in a configuration), what it
    proved (events, enclosures at the requested times, the multipliers' ranges while held) and what it expects."""

    def __init__(self, net: BallNetwork, state0, t0, t1, times: list, expected: list, order: int, prec: int,
                 time_tol: float):
        self.net, self.order, self.prec, self.time_tol = net, order, prec, time_tol
        exact_state = [[exact(v) for v in row] for row in state0]
        self.now = Uncertain(exact_state, 0.0, exact_state)
        self.t, self.t_end = exact(t0), exact(t1)
        self.expected, self.pending = expected, list(times)
        # the float64 of an end names that end exactly: an mpmath run in the log clock ends at expm1(s_end), whose
        # float64 may lie beyond it
        self.ends = {float(t0): self.t, float(t1): self.t_end}
        self.found, self.recorded, self.states = [], [], []
        self.held: dict = {}  # (j, i) -> the Found that started holding it (its multiplier range grows)
        self.leak = interval(net.leak)[0]
        self.known: dict = {}
        self.config = None
        self.n_steps = 0

    def run(self, max_steps: int, callback=None) -> tuple:
        """Walk to the end of the span: ``(status, reason)``."""
        try:
            self.config = initial_configuration(self.net, self.now.center)
            while not self.advance():
                if self.n_steps >= max_steps:
                    raise Stop("undecided", f"max_steps = {max_steps} certified steps did not reach t_end")
                if report(callback, "certify", float(self.t.lower()), float(self.t_end.upper()), self.n_steps,
                          len(self.found)):
                    raise Stop("interrupted", "stopped by the callback")
            if self.pending:
                raise Stop("undecided", f"the requested times {self.pending} lie beyond the proven span (the "
                                        "result's final time, taken exactly, ends before them)")
            if len(self.found) < len(self.expected):
                e = self.expected[len(self.found)]
                raise Stop("rejected", f"the log's {e.kind} of neuron {e.neuron} on sample {e.sample} at t = {e.t!r} "
                                       "does not happen: the proven flow reaches t_end without it")
            return "certified", ""
        except Stop as stop:
            return stop.status, stop.reason
        except KeyboardInterrupt:
            return "interrupted", "interrupted (Ctrl-C)"

    def advance(self) -> bool:
        """One certified step, to its end or to the event inside it; True once the end of the span is reached."""
        remaining = self.t_end - self.t
        step = next_step(self.net, self.now, self.config, self.order, self.prec, upper(remaining))
        self.n_steps += 1
        final = not step.h < remaining.upper()
        reach = remaining.upper() if final else step.h
        event = earliest(candidates(step, self.net, reach, self.known), self.t, self.net)
        if event is not None and final and not event[0].at.upper() < remaining.lower():
            if not event[0].at.lower() > remaining.upper():
                raise Stop("undecided", "an event lies within the enclosure of the final time")
            event = None
        if event is not None:
            zero, key = event
            self.record(step, zero.at.lower())
            self.track_multipliers(step, zero.at.upper())
            happened, self.now, self.config, self.known = apply_event(self.net, step, zero, key, self.t, self.now)
            match(happened, self.expected, len(self.found), self.time_tol, PROVABLE)
            self.found += happened
            self.t = happened[0].t
            for event in happened:
                if event.kind == "slide_end":
                    self.held.pop((event.neuron, event.sample), None)
                elif event.side == 0:
                    event.multiplier_range = interval(event.multiplier)
                    self.held[(event.neuron, event.sample)] = event
            return False
        self.record(step, reach, final)
        self.track_multipliers(step, reach)
        self.now = step.advance(remaining if final else step.h, self.now)
        self.known = {}
        self.t = self.t_end if final else self.t + step.h
        return final

    def record(self, step, reach, final: bool = False) -> None:
        """Enclose the state at the requested times inside this step's proven span ``[t, t + reach]``."""
        while self.pending:
            end = self.ends.get(self.pending[0])
            s = (exact(self.pending[0]) if end is None else end) - self.t
            if s.lower() < 0:
                raise Stop("undecided", f"the requested time {self.pending[0]!r} falls inside the enclosure of an "
                                        "event time")
            if not (s.upper() <= reach if final else s.upper() < reach):
                return
            self.recorded.append(self.pending.pop(0))
            self.states.append(step.enclosure_at(s, self.now))

    def track_multipliers(self, step, reach) -> None:
        """Widen each held surface's multiplier range by the multiplier's enclosure over ``[0, reach]`` (in
        ``RANGE_PIECES`` pieces, against the overestimation of one wide interval), within ``[leak, 1]``, which the
        step proved it does not leave before ``reach``."""
        arb = flint().arb
        for key, event in self.held.items():
            model = step.multiplier(*key)
            lo, hi = event.multiplier_range
            for k in range(RANGE_PIECES):
                piece = span(reach * arb(k) / RANGE_PIECES, reach * arb(k + 1) / RANGE_PIECES)
                low, high = interval(model.value(piece))
                lo, hi = min(lo, low), max(hi, high)
            # proven: the multiplier did not reach a bound before the step's end
            event.multiplier_range = (max(lo, self.leak), min(hi, mpf(1)))


def loss(net: BallNetwork, state):
    """An enclosure of the loss at a ball of states (the activation evaluated as the monotone map it is)."""
    arb = flint().arb
    d = net.d
    total = arb(0)
    for i in range(net.n):
        f = arb(0)
        for row in state:
            z = net.preactivation(row, i)
            f += row[d + 1] * _activation(z, net.leak)
        y = net.y[i]
        if net.loss == "square":
            gap = abs(f - y)
            total += gap * gap / 2
        elif net.loss == "exp":
            total += (-y * f).exp()
        else:
            total += (-y * f).exp().log1p()
    value = total * net.c
    if not net.decay.is_zero():
        trained = [x for row in state for x in (row[:d + 1] if net.bias else row[:d])]
        if net.train_outer:
            trained += [row[d + 1] for row in state]
        value += net.decay / 2 * sum((x * x for x in trained), arb(0))
    return value


def _activation(z, leak):
    """``max(z, leak z)`` of a ball: increasing, so its image is spanned by the images of the endpoints."""
    if z >= 0:
        return z
    if z <= 0:
        return leak * z
    lo, hi = z.lower(), z.upper()
    return (leak * lo).union(hi)
