"""The :class:`Certificate`: what the certifying walk proved, as enclosures, and where and why it stopped."""

from __future__ import annotations

from dataclasses import dataclass, field

from flowlib.certify.balls import interval, magnitude, relative_width, working
from flowlib.reprs import Summarised

STATUSES = ("certified", "rejected", "undecided", "interrupted")


@dataclass(frozen=True)
class CertifiedEvent:
    """An event proven by :func:`~flowlib.certify`: its kind, surface, side and an enclosure of its time.

    Attributes
    ----------
    kind : str
        ``"cross"``, ``"slide_start"``, ``"stick"`` or ``"slide_end"``.
    neuron, sample : int
        The surface ``<w_neuron, x_sample> + b_neuron = 0``.
    side : int
        The side entered (+1 active, -1 inactive, 0 held), as in :class:`~flowlib.Event`.
    t : tuple of mpf
        ``(lo, hi)``: the event time lies in ``[lo, hi]``.
    multiplier : tuple of mpf or None
        ``(lo, hi)`` enclosing the Filippov multiplier at the event (held surfaces), else ``None``.
    multiplier_range : tuple of mpf or None
        For ``slide_start`` and ``stick``: ``(lo, hi)`` enclosing every value of the multiplier while the surface
        is held (to its ``slide_end`` or to the end of the walk), else ``None``.
    """

    kind: str
    neuron: int
    sample: int
    side: int
    t: tuple
    multiplier: tuple | None = None
    multiplier_range: tuple | None = None


@dataclass(frozen=True, repr=False)
class Certificate(Summarised):
    """Rigorous enclosures of a flow's events and of its state and loss at requested times.

    Every interval is proven with ball arithmetic (python-flint's ``arb``) to contain the exact value of the flow
    of the minimal-norm inclusion from the result's initial state, under the event sequence that was proven
    (docs/design.md, *Certified trajectories*).

    Attributes
    ----------
    status : {"certified", "rejected", "undecided"}
        ``"certified"``: proven to ``t_end`` and every logged event matched. ``"rejected"``: the log disagrees with
        what was proven (an event missing, extra, of another kind or at another time; ``reason`` says which).
        ``"undecided"``: the walk met something it could not decide (``reason``); ``"interrupted"``: Ctrl-C or the
        callback stopped it. Either way everything before ``t_certified`` stays proven.
    reason : str
        Empty when certified.
    t_certified : tuple of mpf
        ``(lo, hi)`` enclosing the time up to which the trajectory is proven.
    events : tuple of CertifiedEvent
    times : tuple of float
        The requested times that were reached.
    states : list
        ``states[k]``: ``(lo, hi)`` arrays (mpf, shape ``(m, d + 2)``, packed as :attr:`FlowResult.states`) enclosing
        the state at ``times[k]``.
    losses : list
        ``losses[k]``: ``(lo, hi)`` enclosing the loss at ``times[k]``.
    prec, order, n_steps : int
        Working precision (bits), Taylor order and number of certified steps.
    wall_s : float
    """

    status: str
    reason: str
    t_certified: tuple
    events: tuple
    times: tuple
    states: list
    losses: list
    prec: int
    order: int
    n_steps: int
    wall_s: float
    widths: dict = field(default_factory=dict)

    @property
    def certified(self) -> bool:
        """The whole trajectory is proven and the log agrees with it."""
        return self.status == "certified"

    def _summary_fields(self) -> list:
        return [("status", self.status), ("t_certified", float(self.t_certified[0])), ("events", len(self.events)),
                ("prec", self.prec), ("order", self.order), ("steps", self.n_steps),
                ("wall_s", round(self.wall_s, 3))]

    def summary(self) -> str:
        """A few lines: status, reason, the event enclosures and the widths of the state enclosures."""
        lines = [f"certificate: {self.status} to t = {float(self.t_certified[0]):.16g} "
                 f"({self.n_steps} steps at {self.prec} bits, order {self.order}, {self.wall_s:.2f} s)"]
        if self.reason:
            lines.append(f"  reason: {self.reason}")
        for e in self.events:
            held = "" if e.multiplier_range is None else (f"; multiplier in [{float(e.multiplier_range[0]):.6g}, "
                                                           f"{float(e.multiplier_range[1]):.6g}] while held")
            lines.append(f"  {e.kind:<11} neuron {e.neuron} sample {e.sample}: t = {format_interval(e.t)}{held}")
        for t, loss in zip(self.times, self.losses):
            lines.append(f"  t = {t:.16g}: loss = {format_interval(loss)}")
        if self.widths:
            lines.append(f"  widest relative enclosure: events {self.widths.get('events', 0.0):.1e}, states "
                         f"{self.widths.get('states', 0.0):.1e}")
        return "\n".join(lines)


def format_interval(bounds, digits: int | None = None) -> str:
    """``mid +/- half-width`` of an interval ``(lo, hi)``: the midpoint to ``digits`` significant digits, or (by
    default) to the digits the width allows, at most 40."""
    import math

    from mpmath import mp, nstr

    with mp.workdps(60):
        lo, hi = bounds
        mid, half = (lo + hi) / 2, (hi - lo) / 2
        if digits is None:
            scale = max(abs(mid), mp.mpf(2) ** -1000)
            digits = 40 if half == 0 else max(1, min(40, int(math.floor(-math.log10(float(half / scale)))) + 1))
        return f"{nstr(mid, digits)} +/- {float(half):.1e}"


def state_width(state) -> float:
    """The widest enclosure of a state's entries relative to the state's largest entry (max norm)."""
    scale = max(magnitude(x) for row in state for x in row) or 1.0
    return max(2.0 * float(x.rad().upper()) for row in state for x in row) / scale


def build(status: str, reason: str, t_certified, found: list, times: list, states: list, losses: list, prec: int,
          order: int, n_steps: int, wall_s: float) -> Certificate:
    """The certificate of a walk (balls turned into exact intervals)."""
    import numpy as np

    with working(prec, 2):
        optional = lambda ball: None if ball is None else interval(ball)  # noqa: E731
        events = tuple(CertifiedEvent(e.kind, e.neuron, e.sample, e.side, interval(e.t), optional(e.multiplier),
                                      e.multiplier_range) for e in found)
        widths = {"events": max((relative_width(e.t) for e in found), default=0.0),
                  "states": max((state_width(s) for s in states), default=0.0)}
        packed = []
        for s in states:
            lo = np.array([[interval(x)[0] for x in row] for row in s], dtype=object)
            hi = np.array([[interval(x)[1] for x in row] for row in s], dtype=object)
            packed.append((lo, hi))
        return Certificate(status, reason, interval(t_certified), events, tuple(times), packed,
                           [interval(x) for x in losses], prec, order, n_steps, wall_s, widths)
