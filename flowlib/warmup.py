"""Compile (or load from Numba's cache) every kernel once, stage by stage, and report how long it took."""

import time

import numpy as np


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


def warmup(announce: bool = False) -> float:
    """Run the flow, gradient descent, SGD, their ensembles and :class:`~flowlib.PiecewiseAffine` once on tiny
    problems so that later calls pay no compilation; return the seconds spent.

    The first call in a fresh environment compiles the kernels (a minute or two on two cores); later processes load
    them from Numba's on-disk cache (``cache=True``) in about a second. ``flowlib warmup`` on the command line
    calls this with ``announce=True``.

    Parameters
    ----------
    announce : bool
        Print each stage as it starts and the seconds it took (the command line's progress messages).
    """
    started = time.perf_counter()
    stages = _stages()
    for k, (name, action) in enumerate(stages, start=1):
        tick = time.perf_counter()
        if announce:
            print(f"[{k}/{len(stages)}] compiling or loading the kernels of {name} ...", end=" ", flush=True)
        action()
        if announce:
            print(f"{time.perf_counter() - tick:.1f} s", flush=True)
    return time.perf_counter() - started
