"""Gradient descent against the gradient flow: distances, event alignment, chatter, and the convergence order.

GD iterate ``k`` at step size ``lr`` is compared with the flow at ``t = k lr`` (docs/design.md, Gradient descent
and the comparison with the flow). Distances are the max-abs difference over all parameters ``(W, b, a)``, computed
in float64 (an mpmath descent is rounded first), absolute and relative to the flow's own size there.

This module is callable: ``flowlib.compare(flow, gd)`` is :func:`compare` (so that ``import flowlib.compare``
gives this module, with :class:`Comparison` and the rest, while the short call keeps working).
"""

from __future__ import annotations

import math
import sys
import types
import warnings
from dataclasses import dataclass

import numpy as np

from flowlib.descent import gradient_descent
from flowlib.flow import gradient_flow
from flowlib.problem import Params, Problem
from flowlib.result import DescentResult, EventLog, FlowResult, Status
from flowlib.running import check_budget

#: Flow events that a single GD flip of the same surface should reproduce.
MATCHED_KINDS = ("cross", "slide_start", "stick", "tie")
_TIME_SLACK = 1e-12  # k * lr may exceed the flow's last time by rounding
_BATCH = 1 << 14  # flow evaluations per dense-output call (bounds the memory of the Horner evaluation)


class StoppedEarlyWarning(RuntimeWarning):
    """A gradient descent given to :func:`compare` or run by :func:`convergence_study` stopped before its last
    iteration (flip budget used up, interrupted, or a non-finite iterate): its distances cover less than asked."""


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
    flow_norm : ndarray
        ``max |theta(k lr)|``, the flow's largest parameter there (the same max-abs norm).
    relative_distance : ndarray
        ``distance / flow_norm`` (NaN where the flow's state is 0).
    max_distance : float
    event_alignment : tuple of EventMatch
        One per flow event of kind ``cross``, ``slide_start``, ``stick`` or ``tie``.
    unmatched_flips : int
        GD flips that are neither the match of a flow event nor inside a sliding interval of their surface.
    chatter : tuple of Chatter
        One per sliding interval of the flow.
    events : EventLog
        The flow's events (for the plot).
    descent_status : Status
        How the descent ended (``success`` when it ran all its iterations).
    descent_message : str
    """

    lr: float
    iterations: np.ndarray
    times: np.ndarray
    distance: np.ndarray
    flow_norm: np.ndarray
    relative_distance: np.ndarray
    max_distance: float
    event_alignment: tuple
    unmatched_flips: int
    chatter: tuple
    events: EventLog
    descent_status: Status = Status.SUCCESS
    descent_message: str = ""

    @property
    def max_relative_distance(self) -> float:
        """The largest :attr:`relative_distance` (NaN when none is defined)."""
        finite = self.relative_distance[np.isfinite(self.relative_distance)]
        return float(finite.max()) if len(finite) else math.nan

    @property
    def stopped_early(self) -> bool:
        """True when the descent did not run all its iterations (its status is not ``success``)."""
        return self.descent_status != Status.SUCCESS

    @property
    def max_event_shift(self) -> float:
        """``max |t_gd - t_flow|`` over the matched events (NaN when none is matched)."""
        shifts = [abs(e.difference) for e in self.event_alignment if e.k >= 0]
        return max(shifts) if shifts else float("nan")

    def table(self) -> str:
        """Distances (absolute and relative to ``max |theta(k lr)|``), event alignment and chatter as text."""
        stopped = f" (descent stopped early, {self.descent_status}: {self.descent_message})" if self.stopped_early \
            else ""
        last = (f"at t = {self.times[-1]:.6g}: distance {self.distance[-1]:.3e}, relative "
                f"{self.relative_distance[-1]:.3e}") if len(self.times) else "no iterate compared"
        lines = [(f"lr = {self.lr!r}: max distance {self.max_distance:.3e} (relative {self.max_relative_distance:.3e}) "
                  f"over {len(self.times)} iterates, {self.unmatched_flips} unmatched flips{stopped}"),
                 f"  {last}",
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


def _max_abs(states: np.ndarray) -> np.ndarray:
    """``max |entry|`` of each state (first axis)."""
    return np.abs(states).reshape(len(states), -1).max(axis=1) if len(states) else np.empty(0)


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
        Distances per recorded iterate (absolute, and relative to the flow's ``max |theta(k lr)|``), the GD flip
        matched to each flow event (nearest in time among the flips of the same surface), the number of flips
        left unexplained, and the chatter on every sliding surface.

    Raises
    ------
    ValueError
        If the two runs are not of the same problem and initialisation, or the flow kept no dense output.

    Warns
    -----
    StoppedEarlyWarning
        A :class:`RuntimeWarning` when the descent stopped before its last iteration (status not ``success``:
        ``max_events`` used up, a stop rule met, interrupted, or a non-finite iterate); the comparison covers the
        iterates it did.

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
    if not gd.success:
        warnings.warn(f"descent_result stopped early at iteration {gd.steps} (t = {gd.steps * gd.lr:.6g}), status "
                      f"{gd.status}: {gd.message}; the comparison covers only the iterates it did",
                      StoppedEarlyWarning, stacklevel=2)
    t_last = flow.t_final
    times = gd.times
    keep = times <= t_last * (1.0 + _TIME_SLACK)
    iterations, times = gd.iterations[keep], times[keep]
    flow_states = _flow_states(flow, np.minimum(times, t_last))
    distance, flow_norm = _max_abs(gd_states[keep] - flow_states), _max_abs(flow_states)
    with np.errstate(invalid="ignore", divide="ignore"):
        relative = np.where(flow_norm > 0, distance / flow_norm, math.nan)

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
    return Comparison(lr=gd.lr, iterations=iterations, times=times, distance=distance, flow_norm=flow_norm,
                      relative_distance=relative, max_distance=float(distance.max()) if len(distance) else math.nan,
                      event_alignment=tuple(alignment), unmatched_flips=unmatched, chatter=tuple(chatter),
                      events=flow.events, descent_status=gd.status, descent_message=gd.message)


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
        Step sizes, iterations run and distances (NaN for a descent that stopped early, see ``status``).
    relative_errors : ndarray
        ``errors`` divided by the flow's ``max |theta|`` at the same iterate (:attr:`Comparison.relative_distance`).
    n_flips : ndarray
        Activation flips of each descent.
    order, constant : float
        Least-squares fit ``log(error) = order log(lr) + log(constant)`` over the positive errors (NaN with fewer
        than two).
    status : tuple of Status
        How each descent ended: ``success``, or why it stopped before ``t_end`` (e.g. ``max_events`` when its
        flip budget ``max_events`` was used up); only the successful ones have an error and enter the fit.
    messages : tuple of str
        Each descent's message.
    """

    t_end: float
    metric: str
    lrs: np.ndarray
    steps: np.ndarray
    errors: np.ndarray
    n_flips: np.ndarray
    order: float
    constant: float
    relative_errors: np.ndarray
    status: tuple
    messages: tuple

    @property
    def stopped(self) -> np.ndarray:
        """Mask of the step sizes whose descent stopped before ``t_end``."""
        return np.array([s != Status.SUCCESS for s in self.status], dtype=bool)

    def table(self) -> str:
        """One line per step size: lr, iterations, error, error / lr, relative error, flips, and the order between
        neighbours; a descent that stopped early says so instead of an error."""
        lines = [(f"GD -> flow at t = {self.t_end:g} ({self.metric} distance): fitted order {self.order:.3f}, "
                  f"error ~ {self.constant:.3g} lr^{self.order:.3f}"),
                 f"{'lr':>10} {'steps':>10} {'error':>11} {'error / lr':>11} {'relative':>11} {'flips':>8} "
                 f"{'local order':>12}"]
        previous = None
        for q, (lr, k, err, nf) in enumerate(zip(self.lrs, self.steps, self.errors, self.n_flips)):
            if self.stopped[q]:
                lines.append(f"{lr:10.3g} {k:10d} stopped early ({self.status[q]}): {self.messages[q]}")
                continue
            local = ""
            if previous is not None and err > 0 and self.errors[previous] > 0:
                local = f"{math.log(err / self.errors[previous]) / math.log(lr / self.lrs[previous]):.3f}"
            previous = q
            lines.append(f"{lr:10.3g} {k:10d} {err:11.3e} {err / lr:11.4g} {self.relative_errors[q]:11.3e} "
                         f"{nf:8d} {local:>12}")
        return "\n".join(lines)

    def plot(self, ax=None, **kwargs):
        """Error against step size on log-log axes with the fitted line (:func:`flowlib.plots.convergence`, which
        takes the keyword arguments). Returns the figure."""
        from flowlib import plots

        return plots.convergence(self, ax, **kwargs)


METRICS = ("final", "max")


def convergence_study(problem: Problem, params0: Params, t_end: float, lrs, *, flow_result: FlowResult | None = None,
                      dps: int | None = None, metric: str = "final",
                      max_events: int | None = None) -> ConvergenceStudy:
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
    max_events : int, optional
        Flip budget of each descent (:func:`flowlib.gradient_descent`'s, whose default applies when ``None``). A
        small step size on a surface the flow slides along flips about ``1 / lr`` times per unit of time.

    Returns
    -------
    ConvergenceStudy
        Errors per step size and the least-squares order (first order, ``order ~ 1``, is expected: GD is the
        explicit Euler method of the flow, also through crossings and sliding). A descent that stops before
        ``t_end`` (its ``max_events`` used up, or a non-finite iterate) is kept with its status and message, a NaN
        error, and left out of the fit; the other step sizes are unaffected.

    Raises
    ------
    ValueError
        Naming the argument, for invalid input.

    Warns
    -----
    StoppedEarlyWarning
        Once, naming the step sizes whose descent stopped early.

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
    budget = {} if max_events is None else {"max_events": check_budget(max_events, "max_events")}
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
    errors, relative = np.full(len(lrs_arr), math.nan), np.full(len(lrs_arr), math.nan)
    n_flips, status, messages = np.empty(len(lrs_arr), np.int64), [], []
    for q, (lr, k) in enumerate(zip(lrs_arr, steps)):
        gd = gradient_descent(problem, params0, float(lr), int(k), dps=dps,
                              record_every=1 if metric == "max" else int(k), **budget)
        n_flips[q], steps[q] = gd.n_flips, gd.steps
        status.append(gd.status)
        messages.append(gd.message)
        if not gd.success:
            continue
        cmp = compare(flow_result, gd)
        row = int(np.argmax(cmp.distance)) if metric == "max" else -1
        errors[q], relative[q] = cmp.distance[row], cmp.relative_distance[row]
    stopped = [f"lr = {lr:g} ({s}: {m})" for lr, s, m in zip(lrs_arr, status, messages) if s != Status.SUCCESS]
    if stopped:
        warnings.warn(f"gradient descent stopped before t_end = {t_end:g} at {'; '.join(stopped)}; kept in the "
                      f"study without an error and left out of the fit", StoppedEarlyWarning, stacklevel=2)
    positive = errors > 0
    order = constant = math.nan
    if np.count_nonzero(positive) >= 2:
        order, intercept = np.polyfit(np.log(lrs_arr[positive]), np.log(errors[positive]), 1)
        order, constant = float(order), float(math.exp(intercept))
    return ConvergenceStudy(t_end=t_end, metric=metric, lrs=lrs_arr, steps=steps, errors=errors, n_flips=n_flips,
                            order=order, constant=constant, relative_errors=relative, status=tuple(status),
                            messages=tuple(messages))


class _CallableModule(types.ModuleType):
    """This module's type: calling the module is calling :func:`compare` (``flowlib.compare(flow, gd)``)."""

    def __call__(self, flow_result: FlowResult, descent_result: DescentResult) -> Comparison:
        return compare(flow_result, descent_result)

    __call__.__doc__ = compare.__doc__


sys.modules[__name__].__class__ = _CallableModule
