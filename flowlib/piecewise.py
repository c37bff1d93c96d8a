"""``PiecewiseAffine``: classical Filippov and Zeno benchmarks run by flowlib's event machinery.

``x' = A0 x + c0 + sum_k sigma_k (A_k x + c_k)`` with ``sigma_k = sign(<n_k, x> + beta_k)`` (``[-1, 1]`` on the
surface: Utkin's equivalent control, Filippov's convex combination on one surface). See
:mod:`flowlib.kernels.pwa` for the algorithm, including Zeno detection and continuation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from flowlib.running import order_for
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
        self.offsets = np.zeros(K) if offsets is None else as_real_array(offsets, "offsets", 1)
        checks = {"c0": (self.c0.shape, (n_state,)), "A": (self.A.shape, (K, n_state, n_state)),
                  "c": (self.c.shape, (K, n_state)), "normals": (self.normals.shape, (K, n_state)),
                  "offsets": (self.offsets.shape, (K,))}
        for name, (got, want) in checks.items():
            if got != want:
                raise ValueError(f"{name} must have shape {want}, got {got}")

    def solve(self, x0, t_end: float, *, rtol: float = 1e-13, max_steps: int = 100_000,
              max_events: int = 10_000) -> PiecewiseResult:
        """Integrate from ``x0`` over ``[0, t_end]``; Zeno points are detected, passed and logged.

        Raises
        ------
        ValueError
            Naming the argument, for invalid input.
        """
        x = as_real_array(x0, "x0", 1)
        if x.shape != self.c0.shape:
            raise ValueError(f"x0 must have shape {self.c0.shape}, got {x.shape}")
        if not isinstance(t_end, (int, float)) or isinstance(t_end, bool) or not 0 <= t_end < np.inf:
            raise ValueError(f"t_end must be a finite number >= 0, got {t_end!r}")
        if not 1e-16 <= rtol <= 1e-3:
            raise ValueError(f"rtol must lie in [1e-16, 1e-3], got {rtol!r}")
        order = order_for(rtol)
        g = self.normals @ x + self.offsets
        sigma = np.where(g > 0, 1.0, -1.0)
        held = np.zeros(len(g), dtype=np.bool_)
        clock = np.zeros(1)
        out_t, out_h = np.empty(max_steps), np.empty(max_steps)
        out_X = np.empty((max_steps, order + 1, len(x)))
        cap = max_events + 4 * len(g) + 4
        ev_t, ev_mult = np.empty(cap), np.empty(cap)
        ev_kind, ev_surface, ev_side = (np.empty(cap, np.int64) for _ in range(3))
        started = time.perf_counter()
        x_start = x.copy()
        code, k, e = pwa.integrate_pwa(self.A0, self.c0, self.A, self.c, self.normals, self.offsets, x, sigma,
                                       held, clock, float(t_end), order, max_steps, max_events, out_t, out_h,
                                       out_X, ev_t, ev_kind, ev_surface, ev_side, ev_mult)
        wall = time.perf_counter() - started
        outcomes = {kstatus.SUCCESS: (Status.SUCCESS, "reached t_end"),
                    kstatus.RUNNING: (Status.MAX_STEPS, f"max_steps = {max_steps} used up"),
                    kstatus.MAX_EVENTS: (Status.MAX_EVENTS, f"max_events = {max_events} used up"),
                    kstatus.NONFINITE: (Status.FAILED, "the state became non-finite"),
                    kstatus.NO_PROGRESS: (Status.FAILED, "the step size underflowed"),
                    kstatus.NO_CONSISTENT: (Status.FAILED, "no consistent configuration of the surfaces met"),
                    kstatus.TOO_MANY_SURFACES: (Status.FAILED, "more than 8 surfaces met at once")}
        outcome, message = outcomes[code]
        if outcome != Status.SUCCESS:
            message += f" (t = {float(clock[0])!r})"
        events = tuple(PiecewiseEvent(float(ev_t[q]), EVENT_KINDS[int(ev_kind[q])], int(ev_surface[q]),
                                      int(ev_side[q]), float(ev_mult[q])) for q in range(e))
        states = [out_X[q, 0] for q in range(k)] + [x]
        starts = list(out_t[:k]) + [float(clock[0])]
        if not k:
            states, starts = [x_start, x], [0.0, float(clock[0])]
        return PiecewiseResult(t=np.array(starts), x=np.array(states), events=events, status=outcome,
                               message=message, coefficients=out_X[:k].copy(), wall_s=wall)
