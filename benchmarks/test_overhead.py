"""``benchmarks/overhead.py`` times the kernel alone; it must be the same computation as ``gradient_flow``."""

import numpy as np
import pytest

import flowlib as fl
from benchmarks import bench
from benchmarks.overhead import kernel_runner
from flowlib import examples


@pytest.mark.parametrize("make, t_end", [(bench.e1_problem, 1.5), (examples.two_crossings, 2.0),
                                         (bench.os_transversal, 10.0)])
def test_kernel_runner_reproduces_gradient_flow(make, t_end):
    prob, p0 = make()
    res = fl.gradient_flow(prob, p0, t_end, dense_output=False)
    run, P = kernel_runner(prob, p0, t_end)
    for _ in range(2):  # a second run starts again from p0
        code, steps, events = run()
        assert (steps, events) == (res.n_steps, res.n_events)
        np.testing.assert_array_equal(P, res.states[-1])
