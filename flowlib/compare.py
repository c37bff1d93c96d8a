"""Gradient descent against the gradient flow: distances, event alignment, chatter, and the convergence order.

GD iterate ``k`` at step size ``lr`` is compared with the flow at ``t = k lr`` (docs/design.md, Gradient descent
and the comparison with the flow). Distances are the max-abs difference over all parameters ``(W, b, a)``, computed
in float64 (an mpmath descent is rounded first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flowlib.descent import gradient_descent
from flowlib.flow import gradient_flow
from flowlib.problem import Params, Problem
from flowlib.result import DescentResult, FlowResult

#: Flow events that a single GD flip of the same surface should reproduce.
MATCHED_KINDS = ("cross", "slide_start", "stick", "tie")
_TIME_SLACK = 1e-12  # k * lr may exceed the flow's last time by rounding
_BATCH = 1 << 14  # flow evaluations per dense-output call (bounds the memory of the Horner evaluation)


@dataclass(frozen=True)
class EventMatch:
    """A flow event and the GD flip of the same surface nearest to it in flow time.

    Attributes
    ----------
    kind : str
        The flow event's kind (``cross``, ``slide_start``, ``stick`` or ``tie``).
    neuron, sample : int
    t_flow : float
        The event's flow time.
    k : int
        The matched GD flip's iteration, -1 when GD never flips this surface.
    t_gd : float
        ``k * lr`` (NaN without a match).
    difference : float
        ``t_gd - t_flow`` (NaN without a match).
    """

    kind: str
    neuron: int
    sample: int
    t_flow: float
    k: int
    t_gd: float
    difference: float


@dataclass(frozen=True)
class Chatter:
    """GD on a surface along which the flow slides (``slide_start`` to ``slide_end`` or the end of the run).

    Attributes
    ----------
    neuron, sample : int
    t_start, t_end : float
        The flow's sliding interval.
    n_flips : int
        GD flips of this surface with ``k lr`` in the interval.
    amplitude : float
        ``max |z_ij|`` over the recorded GD iterates with ``k lr`` in the interval: how far GD strays from the
        surface the flow stays on (``O(lr)``).
    """

    neuron: int
    sample: int
    t_start: float
    t_end: float
    n_flips: int
    amplitude: float


@dataclass(frozen=True)
class Comparison:
    """Gradient descent against the flow from the same initialisation (see :func:`compare`).

    Attributes
    ----------
    lr : float
    iterations : ndarray of int64
        The recorded GD iterations compared (those whose time ``k lr`` the flow covers).
    times : ndarray
        ``iterations * lr``.
    distance : ndarray
        ``max |theta_k - theta(k lr)|`` over all parameters, per recorded iteration.
    max_distance : float
    event_alignment : tuple of EventMatch
        One per flow event of kind ``cross``, ``slide_start``, ``stick`` or ``tie``.
    unmatched_flips : int
        GD flips that are neither the match of a flow event nor inside a sliding interval of their surface.
    chatter : tuple of Chatter
        One per sliding interval of the flow.
    events : tuple of Event
        The flow's events (for the plot).
    """

    lr: float
    iterations: np.ndarray
    times: np.ndarray
    distance: np.ndarray
    max_distance: float
    event_alignment: tuple
    unmatched_flips: int
    chatter: tuple
    events: tuple

    @property
    def max_event_shift(self) -> float:
        """``max |t_gd - t_flow|`` over the matched events (NaN when none is matched)."""
        shifts = [abs(e.difference) for e in self.event_alignment if e.k >= 0]
        return max(shifts) if shifts else float("nan")

    def table(self) -> str:
        """Event alignment and chatter as text."""
        lines = [(f"lr = {self.lr!r}: max distance {self.max_distance:.3e} over {len(self.times)} iterates, "
                  f"{self.unmatched_flips} unmatched flips"),
                 f"{'kind':<11} {'neuron':>6} {'sample':>6} {'t flow':>20} {'k':>10} {'t GD':>14} {'difference':>12}"]
        for e in self.event_alignment:
            lines.append(f"{e.kind:<11} {e.neuron:6d} {e.sample:6d} {e.t_flow:20.14g} {e.k:10d} {e.t_gd:14.8g} "
                         f"{e.difference:12.4g}")
        if self.chatter:
            lines.append(f"{'sliding':<11} {'neuron':>6} {'sample':>6} {'t start':>14} {'t end':>14} {'flips':>8} "
                         f"{'amplitude':>11} {'ampl / lr':>10}")
            for c in self.chatter:
                lines.append(f"{'':<11} {c.neuron:6d} {c.sample:6d} {c.t_start:14.8g} {c.t_end:14.8g} "
                             f"{c.n_flips:8d} {c.amplitude:11.4g} {c.amplitude / self.lr:10.4g}")
        return "\n".join(lines)

    def plot(self, ax=None):
        """Distance against flow time on log axes, flow events as vertical lines (:func:`flowlib.plots.gd_vs_flow`).
        Returns the figure."""
        from flowlib import plots

        return plots.gd_vs_flow(self, ax)


def _flow_states(flow: FlowResult, times: np.ndarray) -> np.ndarray:
    out = np.empty((len(times),) + flow.states.shape[1:])
    for start in range(0, len(times), _BATCH):
        out[start: start + _BATCH] = np.asarray(flow.states_at(times[start: start + _BATCH]), dtype=np.float64)
    return out


def compare(flow_result: FlowResult, descent_result: DescentResult) -> Comparison:
    """Compare gradient descent with the gradient flow of the same problem from the same initialisation.

    Parameters
    ----------
    flow_result : FlowResult
        With dense output (the default of :func:`flowlib.gradient_flow`), so that the flow can be evaluated at
        every ``k lr``; float64 or mpmath (rounded to float64 here).
    descent_result : DescentResult
        Float64 or mpmath; recorded iterates beyond the flow's last time are left out.

    Returns
    -------
    Comparison
        Distances per recorded iterate, the GD flip matched to each flow event (nearest in time among the flips
        of the same surface), the number of flips left unexplained, and the chatter on every sliding surface.

    Raises
    ------
    ValueError
        If the two runs are not of the same problem and initialisation, or the flow kept no dense output.

    Examples
    --------
    >>> import flowlib as fl
    >>> prob = fl.Problem(X=[[1.0], [-1.0]], y=[1.0, -1.0], loss="logistic", bias=False, train_outer=True)
    >>> p0 = fl.Params(W=[[0.5]], b=None, a=[0.5])
    >>> cmp = fl.compare(fl.gradient_flow(prob, p0, 1.0), fl.gradient_descent(prob, p0, 1e-3, 1000))
    >>> cmp.max_distance < 1e-3
    True
    """
    if not isinstance(flow_result, FlowResult):
        raise ValueError(f"flow_result must be a FlowResult, got {type(flow_result).__name__}")
    if not isinstance(descent_result, DescentResult):
        raise ValueError(f"descent_result must be a DescentResult, got {type(descent_result).__name__}")
    flow, gd = flow_result, descent_result
    if flow.coefficients is None:
        raise ValueError("flow_result kept no dense output: rerun gradient_flow with dense_output=True")
    if flow.problem.to_dict() != gd.problem.to_dict():
        raise ValueError("descent_result is of another problem than flow_result")
    gd_states = gd.states_float()
    if not np.array_equal(np.asarray(flow.states[0], dtype=np.float64), gd_states[0]):
        raise ValueError("descent_result starts from another initialisation than flow_result")
    t_last = flow.t_final
    times = gd.times
    keep = times <= t_last * (1.0 + _TIME_SLACK)
    iterations, times = gd.iterations[keep], times[keep]
    diff = np.abs(gd_states[keep] - _flow_states(flow, np.minimum(times, t_last)))
    distance = diff.reshape(len(times), -1).max(axis=1) if len(times) else np.empty(0)

    flips_of = {}
    for neuron, sample, k in zip(gd.flips.neuron.tolist(), gd.flips.sample.tolist(), gd.flips.k.tolist()):
        flips_of.setdefault((neuron, sample), []).append(k)
    flips_of = {key: np.array(ks, dtype=np.int64) for key, ks in flips_of.items()}
    explained = {key: np.zeros(len(ks), dtype=bool) for key, ks in flips_of.items()}

    alignment = []
    for ev in flow.events:
        if ev.kind not in MATCHED_KINDS:
            continue
        t_ev = float(ev.t)
        ks = flips_of.get((ev.neuron, ev.sample))
        if ks is None:
            alignment.append(EventMatch(ev.kind, ev.neuron, ev.sample, t_ev, -1, math.nan, math.nan))
            continue
        q = int(np.argmin(np.abs(ks * gd.lr - t_ev)))
        explained[(ev.neuron, ev.sample)][q] = True
        t_gd = float(ks[q] * gd.lr)
        alignment.append(EventMatch(ev.kind, ev.neuron, ev.sample, t_ev, int(ks[q]), t_gd, t_gd - t_ev))

    chatter = []
    Xa = gd.problem.augmented_inputs
    rec_times = gd.times
    for q, ev in enumerate(flow.events):
        if ev.kind != "slide_start":
            continue
        surface, t_start = (ev.neuron, ev.sample), float(ev.t)
        t_end = next((float(later.t) for later in flow.events[q + 1:]
                      if later.kind == "slide_end" and (later.neuron, later.sample) == surface), t_last)
        ks = flips_of.get(surface, np.empty(0, np.int64))
        inside = (ks * gd.lr >= t_start) & (ks * gd.lr <= t_end)
        if surface in explained:
            explained[surface] |= inside
        rows = (rec_times >= t_start) & (rec_times <= t_end)
        z = gd_states[rows, ev.neuron, :-1] @ Xa[ev.sample]
        chatter.append(Chatter(ev.neuron, ev.sample, t_start, t_end, int(np.count_nonzero(inside)),
                               float(np.max(np.abs(z))) if len(z) else math.nan))
    unmatched = int(sum(np.count_nonzero(~mask) for mask in explained.values()))
    return Comparison(lr=gd.lr, iterations=iterations, times=times, distance=distance,
                      max_distance=float(distance.max()) if len(distance) else math.nan,
                      event_alignment=tuple(alignment), unmatched_flips=unmatched, chatter=tuple(chatter),
                      events=flow.events)


@dataclass(frozen=True)
class ConvergenceStudy:
    """Distance between gradient descent and the flow at a fixed flow time, for several step sizes.

    Attributes
    ----------
    t_end : float
    metric : str
        ``"final"``: distance at the last iterate (``k = round(t_end / lr)``, flow time ``k lr``); ``"max"``: the
        largest distance over all iterates.
    lrs, steps, errors : ndarray
        Step sizes, iterations run and distances.
    n_flips : ndarray
        Activation flips of each descent.
    order, constant : float
        Least-squares fit ``log(error) = order log(lr) + log(constant)`` over the positive errors (NaN with fewer
        than two).
    """

    t_end: float
    metric: str
    lrs: np.ndarray
    steps: np.ndarray
    errors: np.ndarray
    n_flips: np.ndarray
    order: float
    constant: float

    def table(self) -> str:
        """One line per step size: lr, iterations, error, error / lr, flips, and the order between neighbours."""
        lines = [(f"GD -> flow at t = {self.t_end:g} ({self.metric} distance): fitted order {self.order:.3f}, "
                  f"error ~ {self.constant:.3g} lr^{self.order:.3f}"),
                 f"{'lr':>10} {'steps':>10} {'error':>11} {'error / lr':>11} {'flips':>8} {'local order':>12}"]
        for q, (lr, k, err, nf) in enumerate(zip(self.lrs, self.steps, self.errors, self.n_flips)):
            local = ""
            if q and err > 0 and self.errors[q - 1] > 0:
                local = f"{math.log(err / self.errors[q - 1]) / math.log(lr / self.lrs[q - 1]):.3f}"
            lines.append(f"{lr:10.3g} {k:10d} {err:11.3e} {err / lr:11.4g} {nf:8d} {local:>12}")
        return "\n".join(lines)

    def plot(self, ax=None):
        """Error against step size on log-log axes with the fitted line (:func:`flowlib.plots.convergence`).
        Returns the figure."""
        from flowlib import plots

        return plots.convergence(self, ax)


METRICS = ("final", "max")


def convergence_study(problem: Problem, params0: Params, t_end: float, lrs, *, flow_result: FlowResult | None = None,
                      dps: int | None = None, metric: str = "final") -> ConvergenceStudy:
    """Run gradient descent to flow time ``t_end`` for each step size and fit the order of convergence to the flow.

    Parameters
    ----------
    problem : Problem
    params0 : Params
    t_end : float
        Flow time; each descent runs ``round(t_end / lr)`` iterations (at least one).
    lrs : array_like
        At least two positive step sizes.
    flow_result : FlowResult, optional
        The flow from ``params0`` with dense output, covering every ``round(t_end / lr) lr``; computed with
        :func:`flowlib.gradient_flow` when not given.
    dps : int, optional
        Run the descents in mpmath at ``dps`` digits.
    metric : {"final", "max"}
        Distance at the last iterate, or the largest over all iterates (records every iterate: memory
        ``steps m (d + 2)`` numbers).

    Returns
    -------
    ConvergenceStudy
        Errors per step size and the least-squares order (first order, ``order ~ 1``, is expected: GD is the
        explicit Euler method of the flow, also through crossings and sliding).

    Raises
    ------
    ValueError
        Naming the argument, for invalid input.

    Examples
    --------
    >>> import flowlib as fl
    >>> prob = fl.Problem(X=[[1.0], [-1.0]], y=[1.0, -1.0], loss="logistic", bias=False, train_outer=True)
    >>> study = fl.convergence_study(prob, fl.Params(W=[[0.5]], b=None, a=[0.5]), 1.0, [1e-2, 1e-3, 1e-4])
    >>> round(study.order, 1)
    1.0
    """
    if isinstance(t_end, bool) or not isinstance(t_end, (int, float, np.integer, np.floating)) \
            or not math.isfinite(t_end) or t_end <= 0:
        raise ValueError(f"t_end must be a positive finite number, got {t_end!r}")
    lrs_arr = np.asarray(lrs)
    if lrs_arr.dtype.kind not in "iuf" or lrs_arr.ndim != 1 or len(lrs_arr) < 2:
        raise ValueError(f"lrs must be a 1-D sequence of at least two step sizes, got {lrs!r}")
    lrs_arr = lrs_arr.astype(np.float64)
    if not np.all(np.isfinite(lrs_arr)) or np.any(lrs_arr <= 0):
        raise ValueError("lrs must hold positive finite step sizes")
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    t_end = float(t_end)
    steps = np.array([max(1, round(t_end / lr)) for lr in lrs_arr], dtype=np.int64)
    t_reach = float(np.max(steps * lrs_arr))
    if flow_result is None:
        flow_result = gradient_flow(problem, params0, t_reach)
        if not flow_result.success:
            raise ValueError(f"the flow did not reach t = {t_reach}: {flow_result.message}")
    elif not isinstance(flow_result, FlowResult):
        raise ValueError(f"flow_result must be a FlowResult, got {type(flow_result).__name__}")
    elif flow_result.t_final < t_reach * (1.0 - _TIME_SLACK):
        raise ValueError(f"flow_result covers t <= {flow_result.t_final}, but the descents reach t = {t_reach}")
    errors, n_flips = np.empty(len(lrs_arr)), np.empty(len(lrs_arr), np.int64)
    for q, (lr, k) in enumerate(zip(lrs_arr, steps)):
        gd = gradient_descent(problem, params0, float(lr), int(k), dps=dps,
                              record_every=1 if metric == "max" else int(k))
        if not gd.success:
            raise ValueError(f"gradient descent at lr = {lr:g} stopped: {gd.message}")
        cmp = compare(flow_result, gd)
        errors[q] = cmp.max_distance if metric == "max" else cmp.distance[-1]
        n_flips[q] = gd.n_flips
    positive = errors > 0
    order = constant = math.nan
    if np.count_nonzero(positive) >= 2:
        order, intercept = np.polyfit(np.log(lrs_arr[positive]), np.log(errors[positive]), 1)
        order, constant = float(order), float(math.exp(intercept))
    return ConvergenceStudy(t_end=t_end, metric=metric, lrs=lrs_arr, steps=steps, errors=errors, n_flips=n_flips,
                            order=order, constant=constant)
