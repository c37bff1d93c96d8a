"""``PiecewiseAffine``: classical Filippov and Zeno benchmarks run by flowlib's event machinery.

``x' = A0 x + c0 + sum_k sigma_k (A_k x + c_k)`` with ``sigma_k = sign(<n_k, x> + beta_k)`` (``[-1, 1]`` on the
surface: Utkin's equivalent control, Filippov's convex combination on one surface). See
:mod:`flowlib.kernels.pwa` for the algorithm, including ties, Zeno detection and continuation.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from flowlib.running import check_budget, check_time, order_for
from flowlib.kernels import constants, pwa, status as kstatus
from flowlib.problem import as_real_array
from flowlib.reprs import Summarised
from flowlib.result import EVENT_KINDS, Status
from flowlib.statuses import at_time, ended, used_up


@dataclass(frozen=True)
class PiecewiseEvent:
    """An event of a piecewise-affine run.

    Attributes
    ----------
    t : float
    kind : str
        ``cross``, ``slide_start``, ``slide_end``, ``stick``, ``tie`` or ``zeno``.
    surface : int
        Index ``k`` of the switching surface (for ``zeno``: the surface of the last event before it).
    side : int
        Side entered, ``+1`` or ``-1``; 0 when the surface is held (and for ``zeno``).
    control : float
        Equivalent control ``sigma_k`` on a held surface, ``nan`` when it is left; for ``zeno`` the time ratio per
        cycle of the accumulation.
    error : float
        For ``zeno``: the estimated error of the accumulation time ``t`` (the change of its Aitken extrapolation
        over the last cycle; the accepted value is below ``ZENO_TIME_TOL |t| max(1, (1 - r)^-2)``, about
        ``7e-15 |t|`` at ratio ``r = 1/3``, or the whole remaining tail is). ``nan`` for other events.
    cycle : int
        For ``zeno``: the number of event instants per cycle of the accumulation (1 to
        ``flowlib.kernels.zeno.ZENO_MAX_CYCLE``); 0 for other events.
    """

    t: float
    kind: str
    surface: int
    side: int
    control: float
    error: float = math.nan
    cycle: int = 0


@dataclass(frozen=True, repr=False)
class PiecewiseResult(Summarised):
    """Trajectory of a :class:`PiecewiseAffine` system (time-major arrays).

    Attributes
    ----------
    t : ndarray, shape (n_steps + 1,)
        Step boundaries (a Zeno jump shows as a gap between consecutive steps).
    x : ndarray, shape (n_steps + 1, N)
        State at the step boundaries; ``x[-1]`` is the final state.
    events : tuple of PiecewiseEvent
    status : Status
    message : str
    coefficients : ndarray, shape (n_steps, K + 1, N)
        Taylor coefficients of each step (dense output): ``x(t[q] + tau) = sum_p coefficients[q, p] tau^p`` for
        ``0 <= tau <= h[q]``.
    wall_s : float
    h : ndarray, shape (n_steps,)
        Length of each step; ``t[q] + h[q] < t[q + 1]`` only across a Zeno point (the unresolved tail of the
        accumulation).
    """

    t: np.ndarray
    x: np.ndarray
    events: tuple
    status: Status
    message: str
    coefficients: np.ndarray
    wall_s: float
    h: np.ndarray = None

    @property
    def final(self) -> np.ndarray:
        """State at the time reached."""
        return self.x[-1]

    def _summary_fields(self) -> list:
        """Status, time reached, steps, events, Zeno points and the state's size (the ``repr`` and the notebook
        table)."""
        return [("status", self.status), ("t_final", float(self.t[-1])), ("n_steps", len(self.t) - 1),
                ("n_events", len(self.events)), ("n_zeno", len(self.zeno_times())), ("N", self.x.shape[1])]

    def zeno_times(self) -> list[float]:
        """Accumulation times of the Zeno points passed."""
        return [e.t for e in self.events if e.kind == "zeno"]

    def state_at(self, t) -> np.ndarray:
        """State at time(s) ``t`` in ``[t[0], t[-1]]`` from the steps' Taylor polynomials (dense output).

        A scalar time gives shape ``(N,)``, an array of times shape ``t.shape + (N,)``. At a step boundary the
        stored state is returned (the final state at ``t[-1]``). Inside the unresolved tail of a Zeno point
        (between the end of the last step before it and the accumulation time, where infinitely many events lie)
        the state is interpolated linearly between the end of that step and the limit state: its error there is of
        the order of the last integrated cycle's distance to the limit, and vanishes at the Zeno point.

        Raises
        ------
        ValueError
            If a time is not a real number in the interval the run covered.
        """
        times = np.asarray(t)
        if times.dtype.kind not in "iuf":
            raise ValueError(f"t must be a real number or an array of them, got {t!r}")
        times = times.astype(np.float64)
        start, reached = float(self.t[0]), float(self.t[-1])
        if not np.all((times >= start) & (times <= reached)):
            raise ValueError(f"t must lie in the interval the run covered, [{start!r}, {reached!r}]")
        flat = times.reshape(-1)
        out = np.empty((len(flat), self.x.shape[1]))
        for i, u in enumerate(flat):
            out[i] = self._state_at(float(u))
        return out[0] if times.ndim == 0 else out.reshape(times.shape + (self.x.shape[1],))

    def _state_at(self, u: float) -> np.ndarray:
        n_steps = len(self.t) - 1
        if u == self.t[-1] or n_steps == 0:
            return self.x[-1].copy()
        q = min(int(np.searchsorted(self.t, u, side="right")) - 1, n_steps - 1)
        tau = u - float(self.t[q])
        if tau == 0.0:
            return self.x[q].copy()
        h = float(self.h[q])
        if tau <= h:
            return _horner(self.coefficients[q], tau)
        # inside a Zeno tail (or the rounding of t[q] + h[q] at t_end): from the step's end to the next state
        end = _horner(self.coefficients[q], h)
        span = float(self.t[q + 1]) - float(self.t[q]) - h
        weight = min(1.0, (tau - h) / span) if span > 0.0 else 1.0
        return end + weight * (self.x[q + 1] - end)


class PiecewiseAffine:
    """A piecewise-affine system whose modes are sign patterns of linear switching functions.

    Parameters
    ----------
    A0 : array_like, shape (N, N)
    c0 : array_like, shape (N,)
    A : array_like, shape (K, N, N)
        Parts multiplied by ``sigma_k``.
    c : array_like, shape (K, N)
    normals : array_like, shape (K, N)
        ``n_k`` of the switching functions ``g_k(x) = <n_k, x> + beta_k``.
    offsets : array_like, shape (K,), optional
        ``beta_k`` (default 0).

    Examples
    --------
    The twisting oscillator ``x1' = x2, x2' = -2 sgn x1 - sgn x2``:

    >>> import flowlib as fl
    >>> twist = fl.PiecewiseAffine(A0=[[0, 1], [0, 0]], c0=[0, 0], A=[[[0, 0], [0, 0]], [[0, 0], [0, 0]]],
    ...                            c=[[0, -2], [0, -1]], normals=[[1, 0], [0, 1]])
    >>> res = twist.solve([1.0, 0.0], 10.0)
    >>> round(res.zeno_times()[0], 10)
    4.4614202866
    >>> [e.cycle for e in res.events if e.kind == "zeno"]  # four events a cycle: x1 = 0, x2 = 0, x1 = 0, x2 = 0
    [4]
    >>> res.state_at([0.5, 20.0 / 3.0]).round(12)  # x1 = 1 - t^2 / 2 before the first switch; at rest after
    array([[ 0.875, -0.5  ],
           [ 0.   ,  0.   ]])

    Notes
    -----
    **Surfaces.** On a surface the control ``sigma_k`` is the equivalent control in ``[-1, 1]`` that keeps the state
    on it. Where several configurations are possible (each surface met left upwards, downwards, or held), the
    consistent ones are compared: the smallest ``|x'|`` is taken, as for the network engine. A held surface with
    an interior control whose one-sided fields both point away from it (``<n_k, A_k x + c_k> > 0``) is
    *repelling*, and a surface that consistent configurations treat differently is a branch point: both log a
    ``tie``. ``tie="stay"`` (default, the network engine's regular solution) takes the configuration that holds
    the most repelling surfaces (then the smallest ``|x'|``): the state stays on a repelling surface with its
    equivalent control until the control reaches ``+-1``. ``tie="leave"`` never holds a repelling surface and
    takes the consistent configuration with the largest speed ``|x'|`` (the "steepest descent" of the network
    engine; equal speeds leave to ``sigma_k = -1``).

    **Zeno points.** The event instants are keyed by surface and side; when the last ``3 p + 1`` keys repeat
    with a period ``p <= 16`` (``ZENO_MAX_CYCLE``) and the cycles' durations shrink, the accumulation time is
    extrapolated by Aitken's delta-squared process on the times one cycle apart, and accepted once two successive
    extrapolations agree to rounding (``ZENO_TIME_TOL = 32 eps`` relative, times ``(1 - r)^-2`` for a ratio ``r``
    per cycle) or the whole remaining tail is that small. A constant ratio (twisting, spirals of constant-field
    sectors) is accepted after three cycles; a ratio that only converges (twisting on a spring plant, where the
    spring's share of the field vanishes at the limit) after a few more, without error from the changing ratio.
    The run logs one ``zeno`` event (``control``: the time ratio per cycle, ``error``: the error estimate,
    ``cycle``: ``p``), jumps to the limit state (the same extrapolation of the states one cycle apart), snaps onto
    the surfaces it sits on and classifies them afresh, and continues: at a twisting point it stays at rest.

    **Dense output.** :meth:`PiecewiseResult.state_at` evaluates the stored step polynomials at any time of the
    run (buffers grow with the steps taken, never with ``max_steps``).
    """

    def __init__(self, A0, c0, A, c, normals, offsets=None):
        self.A0 = as_real_array(A0, "A0", 2)
        n_state = self.A0.shape[0]
        if self.A0.shape != (n_state, n_state):
            raise ValueError(f"A0 must be square, got shape {self.A0.shape}")
        self.c0 = as_real_array(c0, "c0", 1)
        self.A = as_real_array(A, "A", 3)
        self.c = as_real_array(c, "c", 2)
        self.normals = as_real_array(normals, "normals", 2)
        K = self.normals.shape[0]
        if K == 0:
            raise ValueError("normals must have at least one row (a switching surface); a system without surfaces "
                             "is an ordinary linear ODE")
        self.offsets = np.zeros(K) if offsets is None else as_real_array(offsets, "offsets", 1)
        checks = {"c0": (self.c0.shape, (n_state,)), "A": (self.A.shape, (K, n_state, n_state)),
                  "c": (self.c.shape, (K, n_state)), "normals": (self.normals.shape, (K, n_state)),
                  "offsets": (self.offsets.shape, (K,))}
        for name, (got, want) in checks.items():
            if got != want:
                raise ValueError(f"{name} must have shape {want}, got {got}")
        zero = np.flatnonzero(~self.normals.any(axis=1))
        if len(zero):
            raise ValueError(f"normals row {zero[0]} is zero: its switching function is the constant beta_k, which "
                             "is no surface")

    def solve(self, x0, t_end: float, *, rtol: float = 1e-13, max_steps: int = 100_000,
              max_events: int = 10_000, tie: str = "stay") -> PiecewiseResult:
        """Integrate from ``x0`` over ``[0, t_end]`` (any finite ``t_end >= 0``, up to float64's largest); Zeno
        points are detected, passed and logged (one ``zeno`` event each).

        ``tie`` is ``"stay"`` (default: stay on a repelling surface) or ``"leave"`` (leave it to the side of the
        larger speed ``|x'|``); see the class notes. The kernel runs in chunks whose output buffers grow as the
        run goes (doubling, from 256 steps), so memory follows the steps actually taken, not ``max_steps``. A
        non-finite state ends the run with status ``"failed"`` and the last finite state.

        ``rtol`` bounds each Taylor step's local error by about ``rtol * max|x|``, norm-wise, as in the network
        engine: a component much smaller than the largest is resolved only to that absolute accuracy. Scale the
        state so that its components are comparable (a twisting pair of amplitude 1 beside a drift ``x3' = 1e12``
        is integrated to an absolute ``~0.1`` and its Zeno point is not seen). The decisions at the surfaces do not
        depend on that scale: each surface's normal velocity is measured against its own terms.

        Raises
        ------
        ValueError
            Naming the argument, for invalid input.
        """
        x = as_real_array(x0, "x0", 1)
        if x.shape != self.c0.shape:
            raise ValueError(f"x0 must have shape {self.c0.shape}, got {x.shape}")
        t_end = check_time(t_end)
        if isinstance(rtol, bool) or not isinstance(rtol, (int, float, np.integer, np.floating)) \
                or not 1e-16 <= rtol <= 1e-3:
            raise ValueError(f"rtol must be a number in [1e-16, 1e-3], got {rtol!r}")
        max_steps = check_budget(max_steps, "max_steps")
        max_events = check_budget(max_events, "max_events")
        if not isinstance(tie, str) or tie not in _TIES:
            raise ValueError(f"tie must be 'stay' or 'leave', got {tie!r}")
        order = order_for(float(rtol))
        g = self.normals @ x + self.offsets
        K = len(g)
        carried = _Carried(sigma=np.where(g > 0, 1.0, -1.0), held=np.zeros(K, dtype=np.bool_), clock=np.zeros(1),
                           drop=np.zeros(K, np.int64), snapped=np.zeros(K, np.bool_),
                           z_times=np.zeros(pwa.ZENO_MEMORY), z_keys=np.zeros(pwa.ZENO_MEMORY, np.int64),
                           z_states=np.zeros((pwa.ZENO_MEMORY, len(x))), z_count=np.zeros(1, np.int64),
                           tie=_TIES[tie])
        started = time.perf_counter()
        x_start = x.copy()
        steps, events, chunk = [], [], _FIRST_CHUNK
        n_steps = n_events = 0
        while True:
            code, part_steps, part_events = self._chunk(x, carried, t_end, order, min(chunk, max_steps - n_steps),
                                                        min(_CHUNK_EVENTS, max_events - n_events))
            steps.append(part_steps)
            events.extend(part_events)
            n_steps += len(part_steps[0])
            n_events += len(part_events)
            if code == kstatus.RUNNING and n_steps < max_steps \
                    or code == kstatus.MAX_EVENTS and n_events < max_events:
                chunk = min(2 * chunk, _MAX_CHUNK)
                continue
            break
        wall = time.perf_counter() - started
        outcome, message = _stop(code, at_time(float(carried.clock[0])), max_steps, max_events)
        out_t = np.concatenate([part[0] for part in steps])
        out_X = np.concatenate([part[1] for part in steps])
        out_h = np.concatenate([part[2] for part in steps])
        states = [out_X[q, 0] for q in range(n_steps)] + [x]
        starts = list(out_t) + [float(carried.clock[0])]
        if not n_steps:
            states, starts = [x_start, x], [0.0, float(carried.clock[0])]
        return PiecewiseResult(t=np.array(starts), x=np.array(states), events=tuple(events), status=outcome,
                               message=message, coefficients=out_X, wall_s=wall, h=out_h)

    def _chunk(self, x, carried: "_Carried", t_end: float, order: int, steps: int, events: int):
        """One call of the kernel with fresh buffers for ``steps`` steps and ``events`` events; returns its code,
        ``(t, X, h)`` of its steps and its :class:`PiecewiseEvent` objects."""
        cap = events + 4 * len(carried.sigma) + 4
        out_t, out_h, out_X = np.empty(steps), np.empty(steps), np.empty((steps, order + 1, len(x)))
        ev_t, ev_mult, ev_error = np.empty(cap), np.empty(cap), np.empty(cap)
        ev_kind, ev_surface, ev_side, ev_cycle = (np.empty(cap, np.int64) for _ in range(4))
        c = carried
        code, k, e = pwa.integrate_pwa(
            pwa.System(self.A0, self.c0, self.A, self.c, self.normals, self.offsets),
            pwa.SwitchState(x, c.sigma, c.held, c.clock, c.drop, c.snapped),
            pwa.ZenoMemory(c.z_times, c.z_keys, c.z_states, c.z_count), t_end, order, c.tie, steps, events,
            pwa.SwitchSteps(out_t, out_h, out_X),
            pwa.SwitchEvents(ev_t, ev_kind, ev_surface, ev_side, ev_mult, ev_error, ev_cycle))
        found = [PiecewiseEvent(float(ev_t[q]), EVENT_KINDS[int(ev_kind[q])], int(ev_surface[q]), int(ev_side[q]),
                                float(ev_mult[q]), float(ev_error[q]), int(ev_cycle[q])) for q in range(e)]
        return code, (out_t[:k], out_X[:k], out_h[:k]), found


@dataclass
class _Carried:
    """What the kernel carries from one chunk to the next (besides the state): signs or controls, held flags,
    clock, the event machinery's marks, the Zeno detector's memory and the tie policy."""

    sigma: np.ndarray
    held: np.ndarray
    clock: np.ndarray
    drop: np.ndarray
    snapped: np.ndarray
    z_times: np.ndarray
    z_keys: np.ndarray
    z_states: np.ndarray
    z_count: np.ndarray
    tie: int


def _horner(coefficients: np.ndarray, tau: float) -> np.ndarray:
    """``sum_p coefficients[p] tau^p`` (one step's Taylor polynomial, shape ``(K + 1, N)``)."""
    acc = coefficients[-1].copy()
    for p in range(len(coefficients) - 2, -1, -1):
        acc = acc * tau + coefficients[p]
    return acc


_TIES = {"stay": constants.TIE_STAY, "leave": constants.TIE_LEAVE}


_FIRST_CHUNK = 256
_MAX_CHUNK = 1 << 16
_CHUNK_EVENTS = 4096
#: The failures of a switched system in its own words (a state and surfaces, not neurons on hyperplanes); the
#: status of every code is that of the one table, :data:`flowlib.statuses.KERNEL_STATUS`.
_FAILURES = {kstatus.NONFINITE: "the state became non-finite; the result ends at the last finite state",
             kstatus.NO_PROGRESS: "the step size underflowed",
             kstatus.NO_CONSISTENT: "no consistent configuration of the surfaces met",
             kstatus.TOO_MANY_SURFACES: "more than 8 surfaces met at once"}


def _stop(code: int, where: str, max_steps: int, max_events: int) -> tuple[Status, str]:
    """Status and message of a run whose last chunk returned ``code`` at ``where`` (``RUNNING``: the step budget
    ended it)."""
    if code == kstatus.RUNNING:
        return used_up("max_steps", max_steps, where)
    if code == kstatus.MAX_EVENTS:
        return used_up("max_events", max_events, where)
    outcome, message = ended(code, where)
    return (outcome, f"{_FAILURES[code]} ({where})") if code in _FAILURES else (outcome, message)
