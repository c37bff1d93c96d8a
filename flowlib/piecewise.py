"""``PiecewiseAffine``: classical Filippov and Zeno benchmarks run by flowlib's event machinery.

``x' = A0 x + c0 + sum_k sigma_k (A_k x + c_k)`` with ``sigma_k = sign(<n_k, x> + beta_k)`` (``[-1, 1]`` on the
surface: Utkin's equivalent control, Filippov's convex combination on one surface). See
:mod:`flowlib.kernels.pwa` for the algorithm, including Zeno detection and continuation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from flowlib.running import check_budget, check_time, order_for
from flowlib.kernels import pwa, status as kstatus
from flowlib.problem import as_real_array
from flowlib.result import EVENT_KINDS, Status


@dataclass(frozen=True)
class PiecewiseEvent:
    """An event of a piecewise-affine run: time, kind, surface index, side entered (0 when held), control."""

    t: float
    kind: str
    surface: int
    side: int
    control: float


@dataclass(frozen=True)
class PiecewiseResult:
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
        Taylor coefficients of each step (dense output).
    """

    t: np.ndarray
    x: np.ndarray
    events: tuple
    status: Status
    message: str
    coefficients: np.ndarray
    wall_s: float

    @property
    def final(self) -> np.ndarray:
        """State at the time reached."""
        return self.x[-1]

    def zeno_times(self) -> list[float]:
        """Accumulation times of the Zeno points passed."""
        return [e.t for e in self.events if e.kind == "zeno"]


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

    def solve(self, x0, t_end: float, *, rtol: float = 1e-13, max_steps: int = 100_000,
              max_events: int = 10_000) -> PiecewiseResult:
        """Integrate from ``x0`` over ``[0, t_end]`` (any finite ``t_end >= 0``, up to float64's largest); Zeno
        points are detected, passed and logged.

        The kernel runs in chunks whose output buffers grow as the run goes (doubling, from 256 steps), so memory
        follows the steps actually taken, not ``max_steps``. A non-finite state ends the run with status
        ``"failed"`` and the last finite state.

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
        order = order_for(float(rtol))
        g = self.normals @ x + self.offsets
        K = len(g)
        carried = _Carried(sigma=np.where(g > 0, 1.0, -1.0), held=np.zeros(K, dtype=np.bool_), clock=np.zeros(1),
                           drop=np.zeros(K, np.int64), snapped=np.zeros(K, np.bool_),
                           z_times=np.zeros(pwa.ZENO_MEMORY), z_surface=np.zeros(pwa.ZENO_MEMORY, np.int64),
                           z_states=np.zeros((pwa.ZENO_MEMORY, len(x))), z_count=np.zeros(1, np.int64))
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
        outcome, message = _OUTCOMES[code]
        message = message.format(max_steps=max_steps, max_events=max_events)
        if outcome != Status.SUCCESS:
            message += f" (t = {float(carried.clock[0])!r})"
        out_t = np.concatenate([part[0] for part in steps])
        out_X = np.concatenate([part[1] for part in steps])
        states = [out_X[q, 0] for q in range(n_steps)] + [x]
        starts = list(out_t) + [float(carried.clock[0])]
        if not n_steps:
            states, starts = [x_start, x], [0.0, float(carried.clock[0])]
        return PiecewiseResult(t=np.array(starts), x=np.array(states), events=tuple(events), status=outcome,
                               message=message, coefficients=out_X, wall_s=wall)

    def _chunk(self, x, carried: "_Carried", t_end: float, order: int, steps: int, events: int):
        """One call of the kernel with fresh buffers for ``steps`` steps and ``events`` events; returns its code,
        ``(t, X)`` of its steps and its :class:`PiecewiseEvent` objects."""
        cap = events + 4 * len(carried.sigma) + 4
        out_t, out_h, out_X = np.empty(steps), np.empty(steps), np.empty((steps, order + 1, len(x)))
        ev_t, ev_mult = np.empty(cap), np.empty(cap)
        ev_kind, ev_surface, ev_side = (np.empty(cap, np.int64) for _ in range(3))
        c = carried
        code, k, e = pwa.integrate_pwa(self.A0, self.c0, self.A, self.c, self.normals, self.offsets, x, c.sigma,
                                       c.held, c.clock, t_end, order, steps, events, c.drop, c.snapped, c.z_times,
                                       c.z_surface, c.z_states, c.z_count, out_t, out_h, out_X, ev_t, ev_kind,
                                       ev_surface, ev_side, ev_mult)
        found = [PiecewiseEvent(float(ev_t[q]), EVENT_KINDS[int(ev_kind[q])], int(ev_surface[q]), int(ev_side[q]),
                                float(ev_mult[q])) for q in range(e)]
        return code, (out_t[:k], out_X[:k]), found


@dataclass
class _Carried:
    """What the kernel carries from one chunk to the next (besides the state): signs or controls, held flags,
    clock, the event machinery's marks and the Zeno detector's memory."""

    sigma: np.ndarray
    held: np.ndarray
    clock: np.ndarray
    drop: np.ndarray
    snapped: np.ndarray
    z_times: np.ndarray
    z_surface: np.ndarray
    z_states: np.ndarray
    z_count: np.ndarray


_FIRST_CHUNK = 256
_MAX_CHUNK = 1 << 16
_CHUNK_EVENTS = 4096
_OUTCOMES = {kstatus.SUCCESS: (Status.SUCCESS, "reached t_end"),
             kstatus.RUNNING: (Status.MAX_STEPS, "max_steps = {max_steps} used up"),
             kstatus.MAX_EVENTS: (Status.MAX_EVENTS, "max_events = {max_events} used up"),
             kstatus.NONFINITE: (Status.FAILED, "the state became non-finite; the result ends at the last finite "
                                                "state"),
             kstatus.NO_PROGRESS: (Status.FAILED, "the step size underflowed"),
             kstatus.NO_CONSISTENT: (Status.FAILED, "no consistent configuration of the surfaces met"),
             kstatus.TOO_MANY_SURFACES: (Status.FAILED, "more than 8 surfaces met at once")}
