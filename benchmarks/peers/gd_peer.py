"""Tiny-step gradient descent as a peer: what every paper does to approximate the flow (benchmark B6).

GD is flowlib's own float64 Numba kernel (:func:`flowlib.gradient_descent`, about 1e7 iterations/s on small
networks) or its mpmath loop (``dps=``): iterate ``k`` approximates the flow at ``t = k lr`` to ``O(lr)``
(measured on E1, BENCHMARKS.md). :func:`gd_for_accuracy` halves the step until the final iterate is within a
target of the reference, under a wall-clock budget, so the benchmark can time GD *at the accuracy it needs*.

GD's time is its iteration time, ``DescentResult.wall_s``: it excludes the Python objects flowlib builds for the
flip log at the end of a run (one :class:`flowlib.Flip` per activation flip; on a problem that chatters, such as
V10 with hundreds of sliding neurons, that log costs ten times the iterations and caps the run at ``max_events``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["GDSearch", "gd_final_error", "gd_for_accuracy", "run_gd"]


#: flips GD may log before it stops (``status = "max_events"``): bounds its memory on chattering problems
MAX_FLIPS = 1_000_000


def run_gd(problem, params0, t_end: float, steps: int, dps: int | None = None):
    """``steps`` GD iterations of step ``t_end / steps`` (so the last iterate is at ``t = t_end`` exactly)."""
    import flowlib as fl

    return fl.gradient_descent(problem, params0, t_end / steps, steps, dps=dps, record_every=steps,
                               max_events=MAX_FLIPS)


def gd_final_error(gd, reference: np.ndarray) -> float:
    """``max |theta_K - theta_ref| / max |theta_ref|`` at the last iterate (packed states)."""
    final = np.asarray(gd.states[-1], dtype=np.float64)
    return float(np.max(np.abs(final - reference)) / np.max(np.abs(reference)))


@dataclass
class GDSearch:
    """Outcome of :func:`gd_for_accuracy`.

    Attributes
    ----------
    steps : int
        Iterations of the last run (``lr = t_end / steps``).
    lr : float
    error : float
        Its relative final-state error.
    reached : bool
        Whether ``error <= target``.
    history : list of tuple
        ``(lr, error, seconds)`` of every run, in order (seconds: :attr:`DescentResult.wall_s`).
    status : str
        ``"success"``, ``"time_budget"`` (the next halving would not fit), or the status of a run that stopped
        early (``"max_events"``: flip log full).
    search_s : float
        Seconds of the whole search.
    result : DescentResult
        The last run.
    """

    steps: int
    lr: float
    error: float
    reached: bool
    history: list = field(default_factory=list)
    status: str = "success"
    search_s: float = 0.0
    result: object = None


def gd_for_accuracy(problem, params0, t_end: float, reference: np.ndarray, *, target: float = 1e-6,
                    lr0: float = 1e-2, max_seconds: float = 60.0, max_halvings: int = 30) -> GDSearch:
    """Halve the GD step from ``lr0`` until the final iterate is within ``target`` of ``reference``.

    Stops at the first step that reaches the target, or when the next run (predicted at twice the last one's
    time) would exceed ``max_seconds`` in all; GD's error is ``O(lr)``, so the step needed is about
    ``lr0 * target / error(lr0)``.

    Parameters
    ----------
    problem, params0
        As for :func:`flowlib.gradient_descent`.
    t_end : float
        Flow time of the comparison.
    reference : ndarray, shape (m, d + 2)
        Packed exact state at ``t_end``.
    target : float
        Relative accuracy wanted (``1e-6`` in the benchmarks' acceptance target).
    lr0 : float
    max_seconds : float
    max_halvings : int

    Returns
    -------
    GDSearch
    """
    started = time.perf_counter()
    steps = max(1, int(round(t_end / lr0)))
    history = []
    while True:
        tick = time.perf_counter()
        gd = run_gd(problem, params0, t_end, steps)
        wall = time.perf_counter() - tick
        if gd.status != "success":
            return GDSearch(steps, t_end / steps, float("inf"), False, history, search_s=time.perf_counter() - started,
                            result=gd, status=str(gd.status))
        err = gd_final_error(gd, reference)
        history.append((t_end / steps, err, gd.wall_s))
        spent = time.perf_counter() - started
        if err <= target or len(history) > max_halvings or spent + 2.2 * wall > max_seconds:
            status = "success" if err <= target else "time_budget"
            return GDSearch(steps, t_end / steps, err, err <= target, history, search_s=spent, result=gd, status=status)
        steps *= 2
