"""Compile (or load from Numba's cache) every kernel once, stage by stage, and report how long it took.

Numba compiles on one core. With ``jobs >= 2`` the stages are compiled in two worker processes at once (the
flow and then its ensembles in one, gradient descent and :class:`~flowlib.PiecewiseAffine` in the other, so that
no kernel is compiled twice); both write Numba's on-disk cache, and the calling process then loads every kernel
from it.
"""

import os
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context

import numpy as np

#: Stages compiled by each worker process when ``jobs >= 2``, in order: the ensembles reuse the flow's kernels, so
#: they follow the flow in the same process.
_LANES = ((0, 2), (1, 3))


def _stages():
    """``(name, action)`` pairs covering every jitted entry point, on tiny problems."""
    from flowlib.descent import gradient_descent, stochastic_gradient_descent
    from flowlib.ensemble import ensemble
    from flowlib.flow import gradient_flow
    from flowlib.piecewise import PiecewiseAffine
    from flowlib.problem import Params, Problem

    X = np.array([[1.0, 0.2], [-0.3, 1.0]])
    problems = [Problem(X, np.array([1.0, -1.0]), loss=loss, bias=True, train_outer=True)
                for loss in ("exp", "logistic", "square")]
    p0 = Params(W=[[0.3, -0.2]], b=[0.1], a=[0.4])

    def flows():
        for prob in problems:
            gradient_flow(prob, p0, 0.5, t_eval=[0.25])

    def descents():
        for prob in problems:
            gradient_descent(prob, p0, 0.1, 5)
            stochastic_gradient_descent(prob, p0, 0.1, 5, batch_size=1)

    def ensembles():
        for prob in problems:
            ensemble(prob, p0.packed()[None], "flow", t_end=0.5)
            ensemble(prob, p0.packed()[None], "gd", lr=0.1, steps=5)

    def piecewise():
        PiecewiseAffine(A0=np.zeros((1, 1)), c0=[0.0], A=np.zeros((1, 1, 1)), c=[[-1.0]], normals=[[1.0]]).solve(
            [1.0], 2.0)

    return [("the exact flow", flows), ("gradient descent and SGD", descents), ("ensembles", ensembles),
            ("PiecewiseAffine", piecewise)]


def _run_lane(indices: tuple) -> list:
    """Run the stages ``indices`` (a worker process of :func:`warmup`); return the seconds each took."""
    stages = _stages()
    seconds = []
    for index in indices:
        tick = time.perf_counter()
        stages[index][1]()
        seconds.append(time.perf_counter() - tick)
    return seconds


def _check_jobs(jobs) -> int:
    """``jobs`` (``None``: two where the machine has two cores) as a checked positive integer."""
    if jobs is None:
        return min(2, os.cpu_count() or 1)
    if isinstance(jobs, bool) or not isinstance(jobs, (int, np.integer)) or jobs < 1:
        raise ValueError(f"jobs must be None or an integer >= 1, got {jobs!r}")
    return int(jobs)


def _workers_compiled(announce: bool) -> bool:
    """:func:`_compile_in_workers`; ``False`` (compile here instead) where worker processes cannot be started or
    die (a sandbox without ``fork``/``exec``, a killed worker)."""
    try:
        _compile_in_workers(announce)
    except (OSError, BrokenProcessPool) as exc:
        if announce:
            print(f"worker processes failed ({type(exc).__name__}: {exc}); compiling here instead", flush=True)
        return False
    return True


def _compile_in_workers(announce: bool) -> None:
    """Compile the stages in two worker processes (:data:`_LANES`); print each stage's seconds when ``announce``."""
    stages = _stages()
    if announce:
        print(f"compiling the kernels in {len(_LANES)} worker processes (Numba compiles on one core each) ...",
              flush=True)
    pool = ProcessPoolExecutor(len(_LANES), mp_context=get_context("spawn"))
    try:
        futures = [pool.submit(_run_lane, lane) for lane in _LANES]
        seconds = {}
        for lane, future in zip(_LANES, futures):
            seconds.update(zip(lane, future.result()))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    if announce:
        for k, (name, _) in enumerate(stages, start=1):
            print(f"[{k}/{len(stages)}] compiled or loaded the kernels of {name} in a worker: "
                  f"{seconds[k - 1]:.1f} s", flush=True)


def warmup(announce: bool = False, jobs: int | None = None) -> float:
    """Run the flow, gradient descent, SGD, their ensembles and :class:`~flowlib.PiecewiseAffine` once on tiny
    problems so that later calls pay no compilation; return the seconds spent.

    The first call in a fresh environment compiles the kernels (a few minutes on two cores); later processes load
    them from Numba's on-disk cache (``cache=True``) in about a second. ``flowlib warmup`` on the command line
    calls this with ``announce=True``.

    Parameters
    ----------
    announce : bool
        Print each stage as it starts and the seconds it took (the command line's progress messages).
    jobs : int, optional
        Worker processes that compile at once: with 2 or more, two (the stages split so that no kernel is
        compiled twice), after which this process loads every kernel from the cache; 1 compiles here, stage by
        stage. Default: 2 where the machine has two cores.

    Raises
    ------
    ValueError
        Naming ``jobs``, unless it is ``None`` or an integer >= 1.
    """
    jobs = _check_jobs(jobs)
    started = time.perf_counter()
    stages = _stages()
    if jobs > 1 and _workers_compiled(announce):
        if announce:
            print("loading the compiled kernels here ...", end=" ", flush=True)
        tick = time.perf_counter()
        for _, action in stages:
            action()
        if announce:
            print(f"{time.perf_counter() - tick:.1f} s", flush=True)
        return time.perf_counter() - started
    for k, (name, action) in enumerate(stages, start=1):
        tick = time.perf_counter()
        if announce:
            print(f"[{k}/{len(stages)}] compiling or loading the kernels of {name} ...", end=" ", flush=True)
        action()
        if announce:
            print(f"{time.perf_counter() - tick:.1f} s", flush=True)
    return time.perf_counter() - started
