"""``gradient_flow``: drive the event-driven Taylor kernel chunk by chunk.

Python never loops over steps: it calls :func:`flowlib.kernels.driver.integrate_chunk` for a few dozen to a few
thousand steps at a time (sized to take about 50 ms), collects its output, reports progress, and stops cleanly on
Ctrl-C (``status="interrupted"``, with everything computed so far).
"""

from __future__ import annotations

import functools
import itertools
import math
import time
import warnings

import numpy as np

from flowlib.kernels import bundles, driver, events as kevents, status as kstatus, zeno as kzeno
from flowlib.problem import Params, Problem
from flowlib.progress import check_callback, report
from flowlib.result import EventLog, FlowResult
from flowlib.running import (MAX_DPS, check_budget, check_problem_params, check_time, order_for, progress_bar,
                             sigint_flag)
from flowlib.running import check_dps as check_integer_dps
from flowlib.statuses import Status, at_time, flow_stop
from flowlib.until import Until, check_until

#: Default local tolerance of the Taylor step-size rule.
DEFAULT_RTOL = 1e-13
_MIN_RTOL = 1e-16
_CHUNK_SECONDS = 0.05
_FIRST_CHUNK_STEPS = 32
#: multiply-adds per second assumed when sizing the first chunk (a conservative BLAS rate on one core)
_FLOP_RATE = 1e10
_MAX_CHUNK_STEPS = 8192
_CHUNK_EVENTS = 4096
#: Default ``memory_budget`` of :func:`gradient_flow`: bytes of per-step output (dense output, states, times,
#: losses, energies) a float64 run may store before it stops with status ``"max_steps"``.
MEMORY_BUDGET = 2 << 30
#: ``dps`` above which a ``UserWarning`` gives the estimated cost (:data:`flowlib.running.MAX_DPS` is the largest
#: accepted): the cost of a Taylor step grows like ``dps^2`` (measured on a one-neuron problem, 2-core VM: 0.84 s a
#: step at 100 digits, 4.1 s at 200, 8.8 s at 300, about 80 s at 1000)
WARN_DPS = 400
_SECONDS_PER_STEP_AT_1000_DPS = 80.0

def _evaluate(times, t0, h, C, order):
    """Horner evaluation of the step polynomials of one chunk at ``times`` (all inside the chunk)."""
    step = np.clip(np.searchsorted(t0, times, side="right") - 1, 0, len(t0) - 1)
    tau = np.minimum(times - t0[step], h[step])[:, None, None]
    acc = C[step, order]
    for k in range(order - 1, -1, -1):
        acc = acc * tau + C[step, k]
    return acc


def initial_surfaces(problem: Problem, P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Side of every surface (``z_ij > 0``) of ``problem`` and its mode at the packed state ``P``, as the kernel
    starts from them (:func:`flowlib.kernels.driver.surface_sides`)."""
    n, m = problem.n, P.shape[0]
    active, mode = np.empty((n, m), dtype=np.bool_), np.empty((n, m), dtype=np.int8)
    driver.surface_sides(_networks(problem)[1], P, np.empty((n, m)), active, mode)
    return active, mode


@functools.lru_cache(maxsize=None)
def gauss_legendre(points: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the ``points``-point Gauss–Legendre rule on ``[0, 1]`` (the log clock's energy
    quadrature), computed once per size: ``numpy.polynomial.legendre.leggauss`` costs ~0.2 ms, most of a small
    problem's run. Callers must not modify them."""
    nodes, weights = np.polynomial.legendre.leggauss(points)
    nodes, weights = 0.5 * (nodes + 1.0), 0.5 * weights
    return nodes, weights


SOLUTIONS = ("filippov", "caratheodory")
CLOCKS = ("auto", "t", "log")
#: ``clock="auto"`` integrates in ``ln(1 + t)`` beyond this ``t_end``
LONG_HORIZON = 1e6
TIE_POLICIES = {"stay": kevents.TIE_STAY, "leave": kevents.TIE_LEAVE}


def resolve_horizon(t_end, log_t_end, clock: str, weight_decay: float = 0.0) -> tuple[str, float, float]:
    """Check the horizon arguments of :func:`gradient_flow`; return the clock (``"t"`` or ``"log"``), ``t_end`` (may
    be ``inf`` with ``log_t_end``) and the end in the integration variable (``t``, or ``s = ln(1 + t)``).

    The log clock serves the unregularised flow, whose norm grows like ``ln t`` while the loss decays like ``1/t``;
    with weight decay the flow converges at a finite scale, and ``clock="auto"`` keeps ``t``."""
    if weight_decay and (clock == "log" or log_t_end is not None):
        raise ValueError("clock='log' and log_t_end are for flows without weight decay (the regularised flow "
                         "converges at a finite scale: give t_end with clock='t' or 'auto')")
    if (t_end is None) == (log_t_end is None):
        raise ValueError("give exactly one of t_end and log_t_end")
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {CLOCKS}, got {clock!r}")
    if log_t_end is not None:
        if isinstance(log_t_end, bool) or not isinstance(log_t_end, (int, float, np.integer, np.floating)) \
                or not math.isfinite(log_t_end):
            raise ValueError(f"log_t_end must be a finite real number, got {log_t_end!r}")
        if clock == "t":
            raise ValueError("log_t_end needs clock='log' (or 'auto')")
        clock = "log"
        u_end = float(np.logaddexp(0.0, float(log_t_end)))  # s = ln(1 + t) at t = e^log_t_end
        t_end = math.exp(log_t_end) if log_t_end < 709.0 else math.inf
    else:
        t_end = check_time(t_end)
        if clock == "auto":
            clock = "log" if t_end > LONG_HORIZON and not weight_decay else "t"
        u_end = math.log1p(t_end) if clock == "log" else t_end
    return clock, t_end, u_end


def check_dps(dps) -> int:
    """``dps`` as an int in ``[16, MAX_DPS]`` (``ValueError`` naming it otherwise); a ``UserWarning`` with the
    estimated cost of a step above :data:`WARN_DPS`."""
    dps = check_integer_dps(dps)
    if dps > WARN_DPS:
        cost = _SECONDS_PER_STEP_AT_1000_DPS * (dps / 1000.0) ** 2
        warnings.warn(f"dps = {dps}: a Taylor step costs about {cost:.3g} s on a one-neuron problem, more on larger "
                      "networks (the cost grows like dps^2)", UserWarning, stacklevel=3)
    return dps


def check_rtol(rtol) -> float:
    """The float64 step tolerance (default :data:`DEFAULT_RTOL`), or ``ValueError`` naming ``rtol``."""
    rtol = DEFAULT_RTOL if rtol is None else rtol
    if isinstance(rtol, bool) or not isinstance(rtol, (int, float, np.floating)) or not _MIN_RTOL <= rtol <= 1e-3:
        raise ValueError(f"rtol must be a number in [{_MIN_RTOL:g}, 1e-3], got {rtol!r}")
    return float(rtol)


def check_solution(problem: Problem, solution: str, selection, tie: str) -> float:
    """Check the solution concept arguments of :func:`gradient_flow`; return ``selection`` (default ``leak``)."""
    if solution not in SOLUTIONS:
        raise ValueError(f"solution must be one of {SOLUTIONS}, got {solution!r}")
    if selection is None:
        selection = problem.leak
    if isinstance(selection, bool) or not isinstance(selection, (int, float, np.floating)) \
            or not problem.leak <= selection <= 1.0:
        raise ValueError(f"selection must be a number in [leak, 1] = [{problem.leak}, 1], got {selection!r}")
    if not isinstance(tie, str) or tie not in TIE_POLICIES:
        raise ValueError(f"tie must be one of {sorted(TIE_POLICIES)}, got {tie!r}")
    return float(selection)


def gradient_flow(problem: Problem, params0: Params, t_end: float | None = None, *, log_t_end: float | None = None,
                  clock: str = "auto", dps: int | None = None, rtol: float | None = None, solution: str = "filippov",
                  selection: float | None = None, tie: str = "stay", t_eval=None, dense_output: bool = True,
                  max_steps: int = 1_000_000, max_events: int = 100_000, until: Until | None = None,
                  progress: bool = False, callback=None, memory_budget: int = MEMORY_BUDGET) -> FlowResult:
    """Exact gradient flow ``theta' = -grad L(theta)`` from ``params0`` over ``[0, t_end]``.

    The flow is integrated cell by cell (fixed activation pattern) with an adaptive Taylor method; every
    activation event ``<w_j, x_i> + b_j = 0`` is located as the earliest root of the switching function's Taylor
    polynomial inside the step, the step is cut there, and the surfaces reached are classified with the
    minimal-norm element of the backprop set (docs/design.md, Solution concept): crossing, sliding (the state is
    held on the surface with the Filippov multiplier, until the multiplier reaches 0/leak or 1), sticking, or a
    repelling tie. Several events inside one step are all found, in time order.

    With ``problem.weight_decay = lambda > 0`` the flow is that of ``L + lambda/2 |theta_trained|^2``
    (``theta' = -grad L - lambda theta`` on the trained parameters; reported losses include the penalty), in the
    ``t`` clock only.

    Parameters
    ----------
    problem : Problem
    params0 : Params
        Initial parameters; must fit ``problem``.
    t_end : float
        Final flow time, ``>= 0`` (up to ``1e300`` and beyond; give this or ``log_t_end``).
    log_t_end : float, optional
        Final time as ``ln t`` (the log-time mode: ``1e5`` and more, far past float64's largest time); implies
        ``clock="log"``. Results are then indexed by ``ln t`` (:meth:`FlowResult.states_at` with ``log_t=``).
    clock : {"auto", "t", "log"}
        The integration variable. ``"t"``: flow time. ``"log"``: ``s = ln(1 + t)``, with the field
        ``d theta/ds = (1 + t) theta'`` evaluated in the log domain (``exp(s - y f)``: nothing overflows or
        underflows at ``t = 1e300`` or ``ln t = 1e5``). Where the flow slows down like ``1/t`` (exp and logistic
        losses near separation) the steps then grow with ``s``, so the cost grows like ``ln t`` or slower.
        ``"auto"`` (default): ``"log"`` when ``t_end > 1e6`` or with ``log_t_end``, else ``"t"``.
    dps : int, optional
        Decimal digits of an arbitrary-precision run (``>= 16``): the same algorithm over mpmath numbers
        (:mod:`flowlib.mp`), every number at ``dps`` digits; data and ``params0`` are taken exactly from their
        float64 values. The result's arrays then hold mpf numbers (``dtype=object``), its event times too.
        About 10 ms per step at 50 digits on small networks; the cost grows like ``dps^2`` (one neuron: 0.8 s a
        step at 100 digits, about 80 s at 1000): above :data:`WARN_DPS` (400) a ``UserWarning`` gives the estimate, and
        ``dps`` above :data:`MAX_DPS` (2000) is refused. Ctrl-C interrupts a step under way (it is discarded).
        ``None`` (default): float64 Numba kernels.
    rtol : float, optional
        Local tolerance of the step-size rule, relative to ``max |theta|``: in ``[1e-16, 1e-3]`` for float64
        (default ``1e-13``), in ``[10^-dps, 1e-3]`` with ``dps`` (default ``10^-dps``; a string or mpf is taken
        exactly). It also sets the Taylor order ``ceil(-ln(rtol)/2) + 1``.
    solution : {"filippov", "caratheodory"}
        ``"filippov"``: the minimal-norm (regular) solution, which slides where both sides push into a surface.
        ``"caratheodory"``: the flow of the single-valued field with ``sigma'(0) = selection``; it crosses and
        sticks like the default, and where the selection pushes the state back into a surface it cannot leave it
        stops with status ``"no_caratheodory_solution"`` at that time.
    selection : float, optional
        ``sigma'(0)`` for ``solution="caratheodory"``, in ``[leak, 1]``. Default ``leak`` (what PyTorch computes:
        0 for ReLU).
    tie : {"stay", "leave"}
        At a repelling tie (both sides push away; the solution branches): ``"stay"`` keeps the state on the
        surface (the regular solution of seeds 002/003), ``"leave"`` leaves on the side of steepest descent. Either
        way an event of kind ``"tie"`` is logged.
    t_eval : array_like, optional
        Times in ``[0, t_end]`` at which to store the state (``res.t_eval``, ``res.states_eval``), also when
        ``dense_output`` is off.
    dense_output : bool
        Keep every step's Taylor coefficients so that :meth:`FlowResult.params_at` works at any time. Costs
        ``(order + 1) * m * (d + 2)`` floats per step; turn off for long runs of wide networks.
    max_steps, max_events : int
        Budgets; when one is used up the run stops with status ``"max_steps"`` / ``"max_events"``.
    until : Until, optional
        Stop rule (:class:`flowlib.Until`), as a member of :func:`flowlib.ensemble` applies it: the run ends with
        status ``"reached"`` at the first point where the loss has gone below ``until.loss_below`` (compared at
        the Taylor steps' boundaries) and the linear condition holds (located inside the step, by bisection on the
        step's polynomial), or ``"deadline"`` when the loss has not gone below ``until.loss_below`` by
        ``until.deadline`` (the run then integrates to the deadline first). The result (times, states, losses,
        events, dense output, ``t_eval`` states) ends at that point; in float64 its time and state are those of the
        same member of an ensemble, bit for bit.
    memory_budget : int
        Bytes of per-step output a float64 run may store (default :data:`MEMORY_BUDGET`, 2 GiB): the Taylor
        coefficients with ``dense_output`` (``(order + 1) m (d + 2)`` floats a step), the step boundary's state
        (``m (d + 2)`` floats), its time, loss and energy. The run stops with status ``"max_steps"`` and a message
        naming ``memory_budget`` when its steps would store more (``m = 200, d = 10, order 16``: 0.36 MB a step
        with dense output, about 5,900 steps). The ``dps`` backend ignores it.
    progress : bool
        Show a tqdm progress bar (needs the ``progress`` extra).
    callback : callable, optional
        Called as ``callback(progress)`` with a :class:`flowlib.Progress` after every chunk (mpmath: every step);
        a true return value stops the run (``status="interrupted"``).

    Returns
    -------
    FlowResult
        With ``status`` ``"success"`` on reaching ``t_end``; otherwise the reason and everything computed so far.
        A square-loss flow that converges to working precision before ``t_end`` (every residual ``|f(x_i) - y_i|``
        within a few rounding errors of the output, so that its forces are rounding) coasts: its last step holds
        the state constant to ``t_end``, no event is logged after it, and the ``success`` message says "converged
        to working precision at t = ...".
        Ctrl-C stops the run within ~0.1 s (float64: between chunks; mpmath: inside the step, which is discarded)
        and returns with ``status="interrupted"``. A non-finite loss, energy, Taylor coefficient or state ends the
        run with status ``"failed"``, a message saying what and when, and the last finite state.

    Raises
    ------
    ValueError
        Naming the argument, for invalid input.

    Examples
    --------
    >>> import numpy as np, flowlib as fl
    >>> prob = fl.Problem(X=[[1.0], [-1.0]], y=[1.0, -1.0], loss="logistic", bias=False, train_outer=True)
    >>> res = fl.gradient_flow(prob, fl.Params(W=[[0.5]], b=None, a=[0.5]), t_end=2.0)
    >>> res.status
    <Status.SUCCESS: 'success'>
    """
    check_problem_params(problem, params0)
    clock, t_end, u_end = resolve_horizon(t_end, log_t_end, clock, problem.weight_decay)
    if dps is not None:
        check_dps(dps)
    memory_budget = check_budget(memory_budget, "memory_budget")
    if dps is None:
        rtol = check_rtol(rtol)
    selection = check_solution(problem, solution, selection, tie)
    max_steps = check_budget(max_steps, "max_steps")
    max_events = check_budget(max_events, "max_events")
    check_callback(callback)
    check_until(until, (params0.m, problem.d + 2))
    if t_eval is None:
        t_eval = np.empty(0)
    else:
        t_eval = np.atleast_1d(np.asarray(t_eval, dtype=np.float64))
        if t_eval.ndim != 1 or np.any(~np.isfinite(t_eval)) or np.any(t_eval < 0) or np.any(t_eval > t_end) \
                or np.any(np.diff(t_eval) < 0):
            raise ValueError("t_eval must be a sorted 1-D array of times in [0, t_end]")
    log_clock = clock == "log"
    u_eval = np.log1p(t_eval) if log_clock else t_eval
    options = {"max_steps": max_steps, "max_events": max_events, "dense_output": dense_output,
               "solution": solution, "selection": float(selection), "tie": tie, "clock": clock}
    if until is not None:
        options["until"] = until.to_dict()
    if dps is not None:
        return _mp_flow(problem, params0, t_end, log_t_end, log_clock, int(dps), rtol, t_eval, options, progress,
                        callback, until)

    return _float64_flow(problem, params0.packed(), t_end, u_end, log_clock, float(rtol), t_eval, u_eval, options,
                         progress, callback, until, memory_budget)


def _chunk_buffers(steps: int, events: int, order: int, m: int, w: int, coefficients: bool,
                   states: np.ndarray | None = None) -> tuple[bundles.StepLog, bundles.EventLog]:
    """Fresh output buffers of one :func:`~flowlib.kernels.driver.integrate_chunk` call (without ``coefficients``,
    the starting states go to ``states`` when it is given: shape ``(steps + 1, 1, m, w)``, a view into the run's
    store, :meth:`_Trajectory.state_slots`).

    Returns
    -------
    per_step : flowlib.kernels.bundles.StepLog
        ``t`` (start), ``h``, Taylor coefficients ``C`` (``steps + 1, order + 1, m, w``; only the starting states,
        ``steps + 1, 1, m, w``, without ``coefficients``), loss and energy of each step; ``t``, ``C`` and the loss
        have one more entry, for the state the chunk reaches.
    per_event : flowlib.kernels.bundles.EventLog
        Time, kind, neuron, sample, side and multiplier of each event; ``events`` entries.
    """
    if states is None:
        return bundles.step_log(steps, order, m, w, coefficients), bundles.event_log(events)
    return (bundles.StepLog(np.empty(steps + 1), np.empty(steps), states, np.empty(steps + 1), np.empty(steps)),
            bundles.event_log(events))


class _Trajectory:
    """What the chunks of a float64 run produced so far, kept as views into their buffers and joined once at the end.

    The states at the step boundaries, the bulk of a long run without dense output (``m (d + 2)`` floats a step),
    go to one store instead, which the chunks write into directly (:meth:`state_slots`) and which grows by
    ``ndarray.resize`` (``realloc``: the pages already written are moved, not copied, and never touched again), so
    that each state's memory is written once: a fresh buffer per chunk joined at the end wrote each twice, and on
    event-dense runs the page faults of that memory cost about a tenth of the run.

    Parameters
    ----------
    P : ndarray, shape (m, d + 2)
        The packed initial state (the kernel advances it in place).
    u_eval : ndarray
        The ``t_eval`` times in the integration variable, sorted.
    order : int
        Taylor order.
    dense_output : bool
        Keep every step's Taylor coefficients.
    log_clock : bool
        The integration variable is ``s = ln(1 + t)`` (event times are converted to ``t``).
    """

    def __init__(self, P: np.ndarray, u_eval: np.ndarray, order: int, dense_output: bool, log_clock: bool):
        self.u_eval, self.order, self.dense_output, self.log_clock = u_eval, order, dense_output, log_clock
        self.t, self.start, self.loss, self.energy, self.coefficients, self.states_eval = [], [], [], [], [], []
        #: per chunk with events: its columns (flow time, kind, neuron, sample, side, multiplier)
        self.events: list[tuple] = []
        self.n_events = 0
        self.steps = 0
        self.eval_done = 0
        #: the states store of :meth:`state_slots` (None until a chunk asks for it; then ``start`` stays empty)
        self.store: np.ndarray | None = None
        if len(u_eval) and u_eval[0] == 0.0:
            self.eval_done = int(np.searchsorted(u_eval, 0.0, side="right"))
            self.states_eval.append(np.repeat(P[None], self.eval_done, axis=0))

    def add_steps(self, k: int, now: float, out_t, out_h, out_C, out_loss, out_energy) -> None:
        """Keep the ``k`` steps of a chunk that ended at ``now`` (its entry ``k`` holds the time, state and loss
        reached: the run's end if this chunk is its last), and the ``t_eval`` states they cover."""
        self.t.append(out_t[:k + 1])
        self.loss.append(out_loss[:k + 1])
        self.energy.append(out_energy[:k])
        if self.eval_done < len(self.u_eval):
            reached = self.eval_done + int(np.searchsorted(self.u_eval[self.eval_done:], now, side="right"))
            if reached > self.eval_done:
                self.states_eval.append(_evaluate(self.u_eval[self.eval_done:reached], out_t[:k], out_h[:k],
                                                  out_C[:k], self.order))
                self.eval_done = reached
        # the states alone are kept, not the whole coefficient buffer behind them (in the store, they are there)
        if out_C.shape[1] > 1 or self.store is None:
            self.start.append(out_C[:k + 1, 0].copy() if out_C.shape[1] > 1 else out_C[:k + 1, 0])
        if self.dense_output:
            self.coefficients.append(out_C[:k])
        self.steps += k

    def state_slots(self, steps: int, P: np.ndarray, most: int) -> np.ndarray:
        """The store's entries for the next chunk of at most ``steps`` steps (shape ``(steps + 1, 1, m, w)``; its
        entry 0 is the state the run has reached, ``P``), grown as needed (doubling, up to the ``most`` steps the
        run may take). Only for chunks without coefficients, and
        from the run's first chunk on (the caller asks only while :attr:`start` is empty). A previous chunk's view
        must not be used after this call (the store may have moved)."""
        need = self.steps + steps + 1
        if self.store is None:
            self.store = np.empty((need,) + P.shape)
            self.store[0] = P
        elif need > len(self.store):
            self.store.resize((max(need, min(2 * len(self.store), most + 1)),) + P.shape, refcheck=False)
        return self.store[self.steps:need, None]

    def states(self) -> np.ndarray:
        """Every step boundary's state, ``(steps + 1, m, w)``: the store (shrunk to fit) or the joined pieces."""
        if self.store is None:
            return self.joined(self.start)
        self.store.resize((self.steps + 1,) + self.store.shape[1:], refcheck=False)
        return self.store

    def joined(self, pieces: list) -> np.ndarray:
        """One array from per-chunk pieces of :attr:`t`, :attr:`start` or :attr:`loss`, which each end with the
        entry of the state their chunk reached (the next chunk's first): all but the last piece lose it."""
        if len(pieces) == 1:
            return pieces[0]
        return np.concatenate([piece[:-1] for piece in pieces[:-1]] + pieces[-1:])

    def add_events(self, e: int, ev_t, ev_kind, ev_neuron, ev_sample, ev_side, ev_mult) -> None:
        """Keep the ``e`` events of a chunk as columns copied out of its buffers (flow time; inf past float64's
        largest)."""
        if self.log_clock:
            with np.errstate(over="ignore"):
                times = np.expm1(ev_t[:e])
        else:
            times = ev_t[:e].copy()
        self.events.append((times, ev_kind[:e].copy(), ev_neuron[:e].copy(), ev_sample[:e].copy(),
                            ev_side[:e].astype(np.int64), ev_mult[:e].copy()))
        self.n_events += e

    def event_log(self) -> EventLog:
        """The events of every chunk, joined into one :class:`~flowlib.result.EventLog`."""
        if len(self.events) == 1:
            return EventLog._of_columns(self.events[0])
        if not self.events:
            return EventLog.empty()
        return EventLog._of_columns([np.concatenate(parts) for parts in zip(*self.events)])


def kernel_setup(problem: Problem, order: int, rtol: float, solution: str, selection: float, tie: str,
                 log_clock: bool, plain: bool = False) -> tuple:
    """The leading arguments of :func:`~flowlib.kernels.driver.integrate_chunk`: the problem and the method (order,
    tolerance, solution concept, clock and quadrature) as the kernels' bundles (``plain``: as the plain tuples that
    :func:`~flowlib.kernels.driver.integrate_chunk` takes, :func:`flowlib.kernels.bundles.plain`), from checked
    options."""
    return kernel_bundles(problem, order, rtol, solution == "caratheodory", selection, TIE_POLICIES[tie], log_clock,
                          plain)


def kernel_bundles(problem: Problem, order: int, rtol: float, caratheodory: bool, selection: float, tie_policy: int,
                   log_clock: bool, plain: bool = False) -> tuple:
    """:func:`kernel_setup` from options already in the kernels' terms: whether the solution is Caratheodory's
    (else Filippov's) and the tie policy's code (a value of :data:`TIE_POLICIES`)."""
    form = 1 if plain else 0
    return _networks(problem)[form], _methods(order, rtol, caratheodory, selection, tie_policy, log_clock)[form]


@functools.lru_cache(maxsize=256)
def _methods(order: int, rtol: float, caratheodory: bool, selection: float, tie_policy: int,
             log_clock: bool) -> tuple[bundles.Method, tuple]:
    """The kernels' :class:`~flowlib.kernels.bundles.Method` and the same as plain tuples, made once per set of
    options (the kernels never write to it)."""
    nodes, weights = gauss_legendre(order + 1)
    method = bundles.method(order, rtol, caratheodory, selection, tie_policy, log_clock, nodes, weights)
    return method, bundles.plain(method)


def kernel_network(problem: Problem) -> bundles.Network:
    """``problem`` as the kernels' :class:`~flowlib.kernels.bundles.Network`, for the flow and gradient descent;
    built once per problem (a :class:`Problem` is immutable) and kept on it: its contiguous copies and the search
    for contributing columns cost ~20 us, most of a small problem's Python overhead."""
    return _networks(problem)[0]


def _networks(problem: Problem) -> tuple[bundles.Network, tuple]:
    """:func:`kernel_network` and the same as plain tuples (:func:`flowlib.kernels.bundles.plain`), kept on
    ``problem``."""
    nets = problem._network
    if nets is None:
        net = bundles.network(problem.augmented_inputs, problem.y, problem.loss_code, problem.scale, problem.leak,
                              problem.bias, problem.train_outer, problem.weight_decay)
        nets = (net, bundles.plain(net))
        object.__setattr__(problem, "_network", nets)
    return nets


def first_chunk_steps(n: int, m: int, w: int, order: int) -> int:
    """Steps of a run's first chunk: 32, or as few as one where a step's Taylor recurrences (two matrix products
    of ``n m (d + 1)`` per order) would make 32 of them take longer than ~50 ms, so that Ctrl-C, a callback or a
    progress bar is served within about a step on a wide network (32 steps at ``m = 2000, n = 1000, d = 100`` are
    ~10 s). Later chunks double while they take under 25 ms."""
    work = 2.0 * (order + 1) * n * m * (w - 1)
    return int(min(_FIRST_CHUNK_STEPS, max(1.0, _CHUNK_SECONDS * _FLOP_RATE / work)))


def next_chunk_steps(steps: int, taken: int, elapsed: float) -> int:
    """Steps of the next chunk after one of ``steps`` steps that took ``elapsed`` seconds for ``taken`` steps:
    double while a chunk takes under half of ~50 ms (up to 8192 steps), and shrink in proportion when one took
    over twice that (steps that became slower, e.g. through many events), so that Ctrl-C, a callback or a
    progress bar is served within ~0.1 s, or about one step, whatever the run does (chunk boundaries never
    change the trajectory)."""
    if elapsed < 0.5 * _CHUNK_SECONDS:
        return min(2 * steps, _MAX_CHUNK_STEPS)
    if elapsed > 2.0 * _CHUNK_SECONDS and taken > 0:
        return max(1, int(taken * _CHUNK_SECONDS / elapsed))
    return steps


def stored_bytes_per_step(order: int, m: int, w: int, dense_output: bool) -> int:
    """Bytes a float64 run stores per step: the Taylor coefficients with ``dense_output`` (``(order + 1) m w``
    floats), the state at the step boundary (``m w``), and its time, step length, loss and energy."""
    return 8 * ((order + 1) * m * w * dense_output + m * w + 4)


def _flow_time(u: float, log_clock: bool) -> float:
    """Flow time at ``u`` in the integration variable (``t`` itself, or ``s = ln(1 + t)``; inf past float64)."""
    if not log_clock:
        return float(u)
    with np.errstate(over="ignore"):
        return float(np.expm1(u))


class _Watch:
    """The stop rule :class:`flowlib.Until` along a float64 flow, checked after every chunk exactly as
    :func:`flowlib.kernels.ensemble.flow_member` checks it (with its ``_stop_in_chunk``), so that the run alone and
    the same member of an ensemble stop at the same time and state, bit for bit.

    The loss is compared at the steps' boundaries (``ln L`` against ``ln(loss_below)`` with the log clock); once it
    has gone below ``loss_below`` the linear condition is looked for at each step's start and end, and located
    inside the step by bisection on its polynomial. While the loss has not gone below, the run integrates to the
    deadline (:meth:`target`) and is judged there (:meth:`after_chunk`).
    """

    def __init__(self, until: Until, shape: tuple[int, int], log_clock: bool, setup: tuple):
        from flowlib.kernels import ensemble as kens

        self.kens = kens
        self.loss_below, self.coef, self.offset, self.lin_tol = until.kernel_arguments(shape)
        self.use_lin = self.lin_tol >= 0.0
        self.below = math.isnan(self.loss_below)
        self.watching = self.use_lin or not self.below
        self.threshold = math.log(self.loss_below) if log_clock and self.loss_below > 0.0 else self.loss_below
        deadline = math.inf if until.deadline is None else until.deadline
        self.u_deadline = math.log1p(deadline) if log_clock else deadline
        self.log_clock, self.setup = log_clock, setup

    def target(self, u_end: float) -> float:
        """Where the next chunk integrates to: the deadline while the loss has not gone below ``loss_below``."""
        return self.u_deadline if not self.below and self.u_deadline < u_end else u_end

    def after_chunk(self, code: int, k: int, e: int, at_deadline: bool, P: np.ndarray, clock: np.ndarray,
                    per_step: tuple, per_event: tuple) -> tuple[int, int, int]:
        """``(code, k, e)`` of a chunk of ``k`` steps and ``e`` events that returned ``code`` (``at_deadline``: its
        target was the deadline), judged by the rule. Where the rule stops the run inside the chunk, ``P``,
        ``clock[0]`` and the buffers are cut there (the last step shortened to the stop point, its energy
        integrated to it, the state reached and its loss written after it) and the code is ``REACHED``."""
        kens = self.kens
        out_t, out_h, out_C, out_loss, out_energy = per_step
        order = out_C.shape[1] - 1
        if self.watching:
            q, tau, self.below = kens._stop_in_chunk(self.coef, self.offset, self.lin_tol, self.use_lin,
                                                     self.threshold, self.below, out_t, out_h, out_C, out_loss, k,
                                                     order)
            if q >= 0:
                kept = order if self.use_lin else 0
                kens.horner_state(out_C[q], kept, tau, P)
                stop = out_t[q] + tau
                if tau > 0.0:
                    nodes, weights = self.setup[1].gl_nodes, self.setup[1].gl_weights
                    out_energy[q] = kens._chunk_energy(out_energy, 0, out_C[q], kept, tau, out_t[q],
                                                       self.log_clock, nodes, weights)
                    out_h[q] = tau
                    q += 1
                clock[0] = out_t[q] = stop
                out_C[q, 0] = P
                out_loss[q] = self._loss(P)
                return kstatus.REACHED, q, int(np.searchsorted(per_event[0][:e], stop, side="right"))
        if code == kstatus.SUCCESS and at_deadline:
            if out_loss[k] < self.threshold:
                self.below = True
                return kstatus.RUNNING, k, e
            return kstatus.DEADLINE, k, e
        if code == kstatus.SUCCESS and self.watching:
            below = self.below or out_loss[k] < self.threshold
            if below and (not self.use_lin or abs(kens._functional(self.coef, P, self.offset)) <= self.lin_tol):
                return kstatus.REACHED, k, e
            if not below and self.u_deadline <= clock[0]:
                return kstatus.DEADLINE, k, e
        return code, k, e

    def _loss(self, P: np.ndarray) -> float:
        """The loss at ``P`` as the kernel gives it for the state a chunk reaches (``ln L`` with the log clock)."""
        net = self.setup[0]
        return driver.loss_along(net.Xa, net.y, net.loss_kind, net.c, net.leak, net.bias, net.train_outer,
                                 net.decay, P[None].copy(), self.log_clock)[0]


def _float64_flow(problem: Problem, P: np.ndarray, t_end: float, u_end: float, log_clock: bool, rtol: float,
                  t_eval: np.ndarray, u_eval: np.ndarray, options: dict, progress: bool, callback,
                  until: Until | None = None, memory_budget: int = MEMORY_BUDGET) -> FlowResult:
    """The float64 branch of :func:`gradient_flow` (arguments checked): call the kernel chunk by chunk from the
    packed state ``P`` (advanced in place) to ``u_end`` in the integration variable (``t_end`` in flow time), and
    wrap its output.

    The first chunk has 32 steps (fewer on wide networks, :func:`first_chunk_steps`) and chunks double (up to
    8192) while they take under 25 ms, so that a small problem runs in one call of the kernel and a large one still
    stops within ~50 ms, or one step, on Ctrl-C, a callback or a progress update.
    """
    order = order_for(rtol)
    n, m, w = problem.n, P.shape[0], P.shape[1]
    dense_output, max_steps, max_events = options["dense_output"], options["max_steps"], options["max_events"]
    choice = (problem, order, rtol, options["solution"], options["selection"], options["tie"], log_clock)
    watch = None if until is None else _Watch(until, P.shape, log_clock, kernel_setup(*choice))
    kernel_args = kernel_setup(*choice, plain=True)
    active, mode = initial_surfaces(problem, P)
    drop = np.zeros((n, m), dtype=np.int8)
    # the time, where the flow converged to working precision (if it does), the largest inclusion residual
    now = np.array([0.0, math.nan, 0.0])
    orders = np.zeros(2, np.int64)  # the order controller's, from chunk to chunk
    zeno = kzeno.zeno_fields.py_func(m, w)  # the Zeno detector's memory of the last event instants, idem
    run = _Trajectory(P, u_eval, order, dense_output, log_clock)
    chunk_steps = first_chunk_steps(n, m, w, order)
    per_step_bytes = stored_bytes_per_step(order, m, w, dense_output)
    memory_steps = max(1, memory_budget // per_step_bytes)
    memory = (memory_budget, memory_steps) if memory_steps < max_steps else None
    step_cap = min(max_steps, memory_steps)
    bar = progress_bar(progress, u_end, "gradient flow" + (" (clock ln(1+t))" if log_clock else ""))
    started = time.perf_counter()
    try:
        with sigint_flag() as interrupted:
            while True:
                target = u_end if watch is None else watch.target(u_end)
                budget_steps = min(chunk_steps, step_cap - run.steps)
                budget_events = min(_CHUNK_EVENTS, max_events - run.n_events)
                coefficients = dense_output or run.eval_done < len(u_eval) or (watch is not None and watch.use_lin)
                slots = None if coefficients or run.start else run.state_slots(budget_steps, P, step_cap)
                per_step, per_event = _chunk_buffers(budget_steps, budget_events + 3 * n * m, order, m, w,
                                                     coefficients, slots)
                state = (P, active, mode, drop, now, orders, zeno)  # a bundles.State, plain
                tick = time.perf_counter()
                code, k, e = driver.integrate_chunk(*kernel_args, state, target, budget_steps, budget_events,
                                                    tuple(per_step), tuple(per_event))
                elapsed = time.perf_counter() - tick
                if watch is not None:
                    code, k, e = watch.after_chunk(code, k, e, target < u_end, P, now, per_step, per_event)
                run.add_steps(k, now[0], *per_step)
                if e:
                    run.add_events(e, *per_event)
                if bar is not None:
                    bar.update(now[0] - bar.n)
                flow_time = _flow_time(now[0], log_clock)
                stop_requested = report(callback, "flow", flow_time, t_end, run.steps, run.n_events)
                stop = flow_stop(code, where=lambda: _where(flow_time, now[0], log_clock),
                                 interrupted_now=interrupted["set"] or stop_requested, steps=run.steps,
                                 events=run.n_events, max_steps=max_steps, max_events=max_events,
                                 loss=float(per_step[3][k]), log_clock=log_clock, memory=memory,
                                 converged=None if math.isnan(now[1]) else
                                 _where(_flow_time(now[1], log_clock), now[1], log_clock))
                if stop is not None:
                    break
                chunk_steps = next_chunk_steps(chunk_steps, k, elapsed)
    finally:
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - started
    return _flow_result(problem, run, P, stop, t_eval, rtol, wall, options, float(now[2]))


def _where(t, u, log_clock: bool) -> str:
    """Where a flow stopped, at flow time ``t`` (``u`` in the integration variable), as the messages say it."""
    return at_time(t, u if log_clock else None)


def _flow_result(problem: Problem, run: _Trajectory, P: np.ndarray, stop: tuple[Status, str], t_eval: np.ndarray,
                 rtol: float, wall: float, options: dict, inclusion: float = math.nan) -> FlowResult:
    """Join the pieces of a float64 run that ended in state ``P`` into its :class:`FlowResult` (``inclusion``: its
    largest inclusion residual)."""
    log_clock, order = run.log_clock, run.order
    m, w = P.shape
    u_grid, states, loss = run.joined(run.t), run.states(), run.joined(run.loss)
    if log_clock:
        log_loss = loss
        with np.errstate(over="ignore"):
            loss, t_grid = np.exp(loss), np.expm1(u_grid)
    else:
        t_grid = u_grid
        if loss.all():  # no zero loss: skip the errstate context, a few microseconds of a small run
            log_loss = np.log(loss)
        else:
            with np.errstate(divide="ignore"):
                log_loss = np.log(loss)
    if not run.dense_output:
        coefficients = None
    else:
        coefficients = np.concatenate(run.coefficients) if len(run.coefficients) > 1 else run.coefficients[0]
    return FlowResult(
        problem=problem, t=t_grid, states=states, loss=loss, log_loss=log_loss, clock=options["clock"],
        s=u_grid if log_clock else None,
        energy=np.concatenate(run.energy) if len(run.energy) > 1 else run.energy[0],
        events=run.event_log(), status=stop[0], message=stop[1], coefficients=coefficients,
        t_eval=t_eval[:run.eval_done],
        states_eval=np.concatenate(run.states_eval) if run.states_eval else np.empty((0, m, w)),
        order=order, rtol=rtol, wall_s=wall, options=options, inclusion_residual=inclusion)


def _mp_flow(problem, params0, t_end, log_t_end, log_clock, dps, rtol, t_eval, options, progress, callback,
             until) -> FlowResult:
    """The ``dps=`` branch of :func:`gradient_flow`: run :func:`flowlib.mp.flow.integrate`, wrap its output."""
    from mpmath import mp, mpf

    from flowlib.mp import flow as mpflow

    with mp.workdps(dps):
        tol = mpf(10) ** -dps if rtol is None else None
        if tol is None:
            try:
                tol = mpf(rtol) if not isinstance(rtol, bool) else None
            except (TypeError, ValueError):
                tol = None
            if tol is None or not mpf(10) ** -dps <= tol <= mpf("1e-3"):
                raise ValueError(f"rtol must be a number in [1e-{dps}, 1e-3] with dps={dps}, got {rtol!r}")
        order = mpflow.tolerance_order(tol)
        if not log_clock:
            u_end, u_eval = mpf(t_end), [mpf(x) for x in t_eval]
        else:
            u_end = mp.log1p(mpf(t_end)) if log_t_end is None else mpf(log_t_end) + mp.log1p(mp.exp(-mpf(log_t_end)))
            u_eval = [mp.log1p(mpf(x)) for x in t_eval]
    dense_output = options["dense_output"]
    run = mpflow.integrate(problem, params0.packed(), u_end, dps=dps, rtol=tol, order=order,
                           caratheodory=options["solution"] == "caratheodory", selection=options["selection"],
                           tie_leave=options["tie"] == "leave", t_eval=u_eval, max_steps=options["max_steps"],
                           max_events=options["max_events"], progress=progress, callback=callback,
                           log_clock=log_clock, until=until, total=t_end)
    with mp.workdps(dps):
        if log_clock:
            run.events = [(mp.expm1(t), *rest) for t, *rest in run.events]
            s_grid, log_loss = run.t, run.loss
            run.t = [mp.expm1(v) for v in s_grid]
            run.loss = [mp.exp(v) for v in log_loss]
        else:
            s_grid, log_loss = None, [mp.log(v) for v in run.loss]

    m, w = params0.m, problem.d + 2
    n_steps = len(run.coefficients)
    nan = float("nan")
    columns = list(zip(*run.events)) or [()] * 6  # (t, kind, neuron, sample, side, multiplier), None for a crossing
    events = EventLog(_object_array(columns[0], (len(run.events),)), *columns[1:5],
                      _object_array([nan if mult is None else mult for mult in columns[5]], (len(run.events),)))
    return FlowResult(
        problem=problem, t=_object_array(run.t, (len(run.t),)),
        states=_object_array(run.states, (len(run.states), m, w)), loss=_object_array(run.loss, (len(run.loss),)),
        energy=_object_array(run.energy, (n_steps,)), events=events,
        status=run.status, message=run.message,
        coefficients=_object_array(run.coefficients, (n_steps, order + 1, m, w)) if dense_output else None,
        t_eval=_object_array([mpf(x) for x in t_eval[: len(run.eval_states)]], (len(run.eval_states),)),
        states_eval=_object_array(run.eval_states, (len(run.eval_states), m, w)),
        order=order, rtol=float(tol), wall_s=run.wall_s, dps=dps, clock="log" if log_clock else "t",
        inclusion_residual=float(run.inclusion),
        s=None if s_grid is None else _object_array(s_grid, (len(s_grid),)),
        log_loss=_object_array(log_loss, (len(log_loss),)),
        options={**options, "rtol": str(tol)})


def _object_array(values, shape: tuple) -> np.ndarray:
    """The nested lists ``values`` (``len(shape)`` deep, of exactly that shape) as an array of the same objects.

    ``np.array(values, dtype=object)`` probes every entry for being a sequence: on an mpmath run's dense output
    (half a million mpf at m = 50 over 100 steps) that took 0.10 s, against 0.03 s for this one pass over the
    nested lists' iterators."""
    flat = iter(values)
    for _ in range(len(shape) - 1):
        flat = itertools.chain.from_iterable(flat)
    out = np.fromiter(flat, dtype=object, count=math.prod(shape))
    if next(flat, _END) is not _END:
        raise RuntimeError(f"more values than the shape {shape} holds")
    return out.reshape(shape)


#: the end of an iterator (:func:`_object_array`)
_END = object()
