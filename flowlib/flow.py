"""``gradient_flow``: drive the event-driven Taylor kernel chunk by chunk.

Python never loops over steps: it calls :func:`flowlib.kernels.driver.integrate_chunk` for a few dozen to a few
thousand steps at a time (sized to take about 50 ms), collects its output, reports progress, and stops cleanly on
Ctrl-C (``status="interrupted"``, with everything computed so far).
"""

from __future__ import annotations

import math
import signal
import threading
import time
from contextlib import contextmanager

import numpy as np

from flowlib.kernels import driver, events as kevents, status as kstatus
from flowlib.problem import Params, Problem
from flowlib.result import EVENT_KINDS, Event, FlowResult, Status

#: Default local tolerance of the Taylor step-size rule.
DEFAULT_RTOL = 1e-13
_MIN_RTOL = 1e-16
_CHUNK_SECONDS = 0.05
_FIRST_CHUNK_STEPS = 32
_MAX_CHUNK_STEPS = 8192
_CHUNK_EVENTS = 4096

_KERNEL_STATUS = {
    kstatus.SUCCESS: (Status.SUCCESS, "reached t_end"),
    kstatus.NONFINITE: (Status.FAILED, "the state or its Taylor coefficients became non-finite (overflow)"),
    kstatus.NO_CARATHEODORY: (Status.NO_CARATHEODORY_SOLUTION,
                              "the selection pushes the state back into a surface it cannot stay on (sliding): no "
                              "Caratheodory solution continues; the Filippov solution slides"),
    kstatus.TOO_MANY_SURFACES: (Status.FAILED, f"a neuron sits on more than {kevents.MAX_SURFACES} hyperplanes at "
                                               "once"),
    kstatus.NO_PROGRESS: (Status.FAILED, "the step size underflowed: no progress in time"),
    kstatus.NO_CONSISTENT: (Status.FAILED, "a neuron on several hyperplanes at once has no configuration (leave up, "
                                           "leave down, or hold each) consistent with its own field"),
}


def order_for(rtol: float) -> int:
    """Taylor order for a tolerance: ``ceil(-ln(rtol) / 2) + 1`` (Jorba & Zou 2005), at least 4."""
    return max(4, math.ceil(-0.5 * math.log(rtol)) + 1)


@contextmanager
def _sigint_flag():
    """Turn Ctrl-C into a flag checked between chunks (a chunk is never torn in half)."""
    flag = {"set": False}
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum, frame):
        flag["set"] = True

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def _progress_bar(enabled: bool, t_end: float):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("progress=True needs tqdm: pip install 'flowlib[progress]'") from exc
    return tqdm(total=t_end, unit="t", desc="gradient flow", bar_format="{l_bar}{bar}| t={n:.4g}/{total:.4g}")


def _check_time(t_end) -> float:
    if isinstance(t_end, bool) or not isinstance(t_end, (int, float, np.integer, np.floating)):
        raise ValueError(f"t_end must be a real number, got {t_end!r}")
    t_end = float(t_end)
    if not math.isfinite(t_end) or t_end < 0.0:
        raise ValueError(f"t_end must be finite and >= 0, got {t_end}")
    return t_end


def _check_budget(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _evaluate(times, t0, h, C, order):
    """Horner evaluation of the step polynomials of one chunk at ``times`` (all inside the chunk)."""
    step = np.clip(np.searchsorted(t0, times, side="right") - 1, 0, len(t0) - 1)
    tau = np.minimum(times - t0[step], h[step])[:, None, None]
    acc = C[step, order]
    for k in range(order - 1, -1, -1):
        acc = acc * tau + C[step, k]
    return acc


SOLUTIONS = ("filippov", "caratheodory")
TIE_POLICIES = {"stay": kevents.TIE_STAY, "leave": kevents.TIE_LEAVE}


def gradient_flow(problem: Problem, params0: Params, t_end: float, *, dps: int | None = None,
                  rtol: float = DEFAULT_RTOL, solution: str = "filippov", selection: float | None = None,
                  tie: str = "stay", t_eval=None, dense_output: bool = True, max_steps: int = 1_000_000,
                  max_events: int = 100_000, progress: bool = False, callback=None) -> FlowResult:
    """Exact gradient flow ``theta' = -grad L(theta)`` from ``params0`` over ``[0, t_end]``.

    The flow is integrated cell by cell (fixed activation pattern) with an adaptive Taylor method; every
    activation event ``<w_j, x_i> + b_j = 0`` is located as the earliest root of the switching function's Taylor
    polynomial inside the step, the step is cut there, and the surfaces reached are classified with the
    minimal-norm element of the backprop set (DESIGN.md §1): crossing, sliding (the state is held on the
    surface with the Filippov multiplier, until the multiplier reaches 0/leak or 1), sticking, or a repelling
    tie. Several events inside one step are all found, in time order.

    Parameters
    ----------
    problem : Problem
    params0 : Params
        Initial parameters; must fit ``problem``.
    t_end : float
        Final flow time, ``>= 0``.
    dps : int, optional
        Decimal digits for an arbitrary-precision (mpmath) run. Not available yet: only ``None`` (float64).
    rtol : float
        Local tolerance of the step-size rule, relative to ``max |theta|``, in ``[1e-16, 1e-3]``. It also sets
        the Taylor order ``ceil(-ln(rtol)/2) + 1``.
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
    progress : bool
        Show a tqdm progress bar (needs the ``progress`` extra).
    callback : callable, optional
        Called after every chunk as ``callback(t, n_steps, n_events)``; returning ``True`` stops the run
        (``status="interrupted"``).

    Returns
    -------
    FlowResult
        With ``status`` ``"success"`` on reaching ``t_end``; otherwise the reason and everything computed so far.
        Ctrl-C stops the run between chunks and returns with ``status="interrupted"``.

    Raises
    ------
    ValueError
        Naming the argument, for invalid input.
    NotImplementedError
        For ``dps`` other than ``None``.

    Examples
    --------
    >>> import numpy as np, flowlib as fl
    >>> prob = fl.Problem(X=[[1.0], [-1.0]], y=[1.0, -1.0], loss="logistic", bias=False, train_outer=True)
    >>> res = fl.gradient_flow(prob, fl.Params(W=[[0.5]], b=None, a=[0.5]), t_end=2.0)
    >>> res.status
    <Status.SUCCESS: 'success'>
    """
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a flowlib.Problem, got {type(problem).__name__}")
    if not isinstance(params0, Params):
        raise ValueError(f"params0 must be a flowlib.Params, got {type(params0).__name__}")
    params0.check_against(problem)
    t_end = _check_time(t_end)
    if dps is not None:
        raise NotImplementedError("dps: the arbitrary-precision (mpmath) flow is not available yet; use dps=None")
    if isinstance(rtol, bool) or not isinstance(rtol, (int, float, np.floating)) or not _MIN_RTOL <= rtol <= 1e-3:
        raise ValueError(f"rtol must be a number in [{_MIN_RTOL:g}, 1e-3], got {rtol!r}")
    if solution not in SOLUTIONS:
        raise ValueError(f"solution must be one of {SOLUTIONS}, got {solution!r}")
    if selection is None:
        selection = problem.leak
    if isinstance(selection, bool) or not isinstance(selection, (int, float, np.floating)) \
            or not problem.leak <= selection <= 1.0:
        raise ValueError(f"selection must be a number in [leak, 1] = [{problem.leak}, 1], got {selection!r}")
    if not isinstance(tie, str) or tie not in TIE_POLICIES:
        raise ValueError(f"tie must be one of {sorted(TIE_POLICIES)}, got {tie!r}")
    max_steps = _check_budget(max_steps, "max_steps")
    max_events = _check_budget(max_events, "max_events")
    if callback is not None and not callable(callback):
        raise ValueError("callback must be callable")
    if t_eval is None:
        t_eval = np.empty(0)
    else:
        t_eval = np.atleast_1d(np.asarray(t_eval, dtype=np.float64))
        if t_eval.ndim != 1 or np.any(~np.isfinite(t_eval)) or np.any(t_eval < 0) or np.any(t_eval > t_end) \
                or np.any(np.diff(t_eval) < 0):
            raise ValueError("t_eval must be a sorted 1-D array of times in [0, t_end]")

    order = order_for(float(rtol))
    P = params0.packed()
    n, m, w = problem.n, params0.m, P.shape[1]
    Xa = problem.augmented_inputs
    active = np.ascontiguousarray((Xa @ P[:, : w - 1].T) > 0.0)
    # x_i = 0 without bias: z_ij is identically 0 and the sample never moves neuron j (no surface at all)
    normals = Xa if problem.bias else Xa[:, :-1]
    void = np.all(normals == 0.0, axis=1)
    mode = np.zeros((n, m), dtype=np.int8)
    mode[void, :] = driver.MODE_VOID
    drop = np.zeros((n, m), dtype=np.int8)
    clock = np.zeros(1)

    t_parts, start_parts, C_parts, loss_parts, energy_parts = [], [], [], [], []
    eval_parts = []
    eval_done = 0
    if len(t_eval) and t_eval[0] == 0.0:
        eval_done = int(np.searchsorted(t_eval, 0.0, side="right"))
        eval_parts.append(np.repeat(P[None], eval_done, axis=0))
    events: list[Event] = []
    steps_done = 0
    chunk_steps = _FIRST_CHUNK_STEPS
    outcome, message = Status.SUCCESS, "reached t_end"
    bar = _progress_bar(progress, t_end)
    started = time.perf_counter()
    try:
        with _sigint_flag() as interrupted:
            while True:
                budget_steps = min(chunk_steps, max_steps - steps_done)
                budget_events = min(_CHUNK_EVENTS, max_events - len(events))
                out_t = np.empty(budget_steps)
                out_h = np.empty(budget_steps)
                out_C = np.empty((budget_steps, order + 1, m, w))
                out_loss = np.empty(budget_steps)
                out_energy = np.empty(budget_steps)
                capacity = budget_events + 3 * n * m
                ev_t, ev_mult = np.empty(capacity), np.empty(capacity)
                ev_kind, ev_side = np.empty(capacity, np.int8), np.empty(capacity, np.int8)
                ev_neuron, ev_sample = np.empty(capacity, np.int64), np.empty(capacity, np.int64)
                tick = time.perf_counter()
                code, k, e = driver.integrate_chunk(
                    Xa, problem.y, problem.loss_code, problem.scale, problem.leak, problem.bias,
                    problem.train_outer, order, float(rtol), solution == "caratheodory", float(selection),
                    TIE_POLICIES[tie], P, active, mode, drop, clock, t_end, budget_steps,
                    budget_events, out_t, out_h, out_C, out_loss, out_energy, ev_t, ev_kind, ev_neuron,
                    ev_sample, ev_side, ev_mult)
                elapsed = time.perf_counter() - tick
                if k:
                    t_parts.append(out_t[:k])
                    loss_parts.append(out_loss[:k])
                    energy_parts.append(out_energy[:k])
                    reached = eval_done + int(np.searchsorted(t_eval[eval_done:], clock[0], side="right"))
                    if reached > eval_done:
                        eval_parts.append(_evaluate(t_eval[eval_done:reached], out_t[:k], out_h[:k], out_C[:k],
                                                    order))
                        eval_done = reached
                    start_parts.append(out_C[:k, 0].copy())
                    if dense_output:
                        C_parts.append(out_C[:k])
                    steps_done += k
                events.extend(Event(float(ev_t[q]), EVENT_KINDS[int(ev_kind[q])], int(ev_neuron[q]),
                                    int(ev_sample[q]), int(ev_side[q]), float(ev_mult[q])) for q in range(e))
                if bar is not None:
                    bar.update(clock[0] - bar.n)
                stop_requested = bool(callback(float(clock[0]), steps_done, len(events))) if callback else False
                if code not in (kstatus.RUNNING, kstatus.EVENT_BUFFER_FULL):
                    outcome, message = _KERNEL_STATUS[code]
                    if outcome != Status.SUCCESS:
                        message = f"{message} (t = {float(clock[0])!r})"
                    break
                if interrupted["set"] or stop_requested:
                    outcome, message = Status.INTERRUPTED, f"interrupted at t = {float(clock[0])!r}"
                    break
                if steps_done >= max_steps:
                    outcome, message = Status.MAX_STEPS, f"max_steps = {max_steps} used up at t = {float(clock[0])!r}"
                    break
                if len(events) >= max_events:
                    outcome = Status.MAX_EVENTS
                    message = f"max_events = {max_events} used up at t = {float(clock[0])!r}"
                    break
                if elapsed < 0.5 * _CHUNK_SECONDS:
                    chunk_steps = min(2 * chunk_steps, _MAX_CHUNK_STEPS)
    finally:
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - started

    t_steps = np.concatenate(t_parts) if t_parts else np.empty(0)
    t_grid = np.append(t_steps, clock[0]) if len(t_steps) else np.array([0.0])
    states = np.concatenate(start_parts + [P[None]])
    loss_start = np.concatenate(loss_parts) if loss_parts else np.empty(0)
    final_loss = driver.loss_along(Xa, problem.y, problem.loss_code, problem.scale, problem.leak, P[None].copy())
    return FlowResult(
        problem=problem, t=t_grid, states=states, loss=np.append(loss_start, final_loss),
        energy=np.concatenate(energy_parts) if energy_parts else np.empty(0), events=tuple(events),
        status=outcome, message=message,
        coefficients=np.concatenate(C_parts) if (dense_output and C_parts) else (
            np.empty((0, order + 1, m, w)) if dense_output else None),
        t_eval=t_eval[:eval_done],
        states_eval=np.concatenate(eval_parts) if eval_parts else np.empty((0, m, w)),
        order=order, rtol=float(rtol), wall_s=wall,
        options={"max_steps": max_steps, "max_events": max_events, "dense_output": dense_output,
                 "solution": solution, "selection": float(selection), "tie": tie})

