"""``benchmarks/overhead.py`` times the kernel alone; it must be the same computation as ``gradient_flow``."""

import numpy as np
import pytest

import flowlib as fl
from benchmarks import bench
from benchmarks.overhead import kernel_runner
from flowlib import examples, flow
from flowlib.kernels import bundles, zeno


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



def test_bundle_call_stages_agree():
    """The two stages of ``bundle_call_ns`` compute the same thing (a logistic flow never coasts), and the timing
    runs (its ratio is reported, not asserted: no timed asserts)."""
    from benchmarks.overhead import _calls, bundle_call_ns

    prob, p0 = bench.os_transversal()
    setup = flow.kernel_setup(prob, 16, 1e-13, "filippov", prob.leak, "stay", False)
    P = p0.packed()
    active, mode = flow.initial_surfaces(prob, P)
    state = bundles.state(P, active, mode, np.zeros(active.shape, np.int8), np.zeros(1), zeno.network_zeno(*P.shape))
    assert _calls(*setup, state, 3, True) == _calls(*setup, state, 3, False) == 0
    late, first = bundle_call_ns(reps=10)
    assert np.isfinite(late) and np.isfinite(first)
