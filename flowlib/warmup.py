"""Compile (or load from Numba's cache) every kernel once, and report how long it took."""

import time

import numpy as np


def warmup() -> float:
    """Run the flow, gradient descent and their ensembles once per loss on a tiny problem so later calls pay no
    compilation; return the seconds spent.

    The first call in a fresh environment compiles the kernels (tens of seconds); later processes load them from
    Numba's on-disk cache (``cache=True``) in well under a second.
    """
    from flowlib.descent import gradient_descent
    from flowlib.ensemble import ensemble
    from flowlib.flow import gradient_flow
    from flowlib.piecewise import PiecewiseAffine
    from flowlib.problem import Params, Problem

    started = time.perf_counter()
    X = np.array([[1.0, 0.2], [-0.3, 1.0]])
    for loss in ("exp", "logistic", "square"):
        prob = Problem(X, np.array([1.0, -1.0]), loss=loss, bias=True, train_outer=True)
        p0 = Params(W=[[0.3, -0.2]], b=[0.1], a=[0.4])
        gradient_flow(prob, p0, 0.5, t_eval=[0.25])
        gradient_descent(prob, p0, 0.1, 5)
        ensemble(prob, p0.packed()[None], "flow", t_end=0.5)
        ensemble(prob, p0.packed()[None], "gd", lr=0.1, steps=5)
    PiecewiseAffine(A0=np.zeros((1, 1)), c0=[0.0], A=np.zeros((1, 1, 1)), c=[[-1.0]], normals=[[1.0]]).solve(
        [1.0], 2.0)
    return time.perf_counter() - started
