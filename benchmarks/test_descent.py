"""pytest-benchmark: gradient-descent throughput (issue 4). Timings are recorded, never asserted; each run is
checked to complete, and float64 against mpmath at the end of the mpmath runs."""

import numpy as np
import pytest

from benchmarks import descent


@pytest.fixture(scope="module", autouse=True)
def warm_descent():
    return descent.warm()


@pytest.fixture(scope="module", params=list(descent.CASES), ids=["gd-rate", "three-points"])
def case(request):
    return descent.CASES[request.param]()


@pytest.mark.benchmark(group="descent-float64")
def test_float64(benchmark, case):
    prob, p0 = case
    gd = benchmark.pedantic(descent.run_float64, args=case, rounds=5, iterations=1, warmup_rounds=1)
    assert gd.status == "success" and gd.steps == descent.FLOAT64_STEPS
    benchmark.extra_info.update(steps=gd.steps, flips=gd.n_flips, m=p0.m, n=prob.n)


@pytest.mark.benchmark(group="descent-mpmath")
@pytest.mark.parametrize("dps", descent.MP_DPS)
def test_mpmath(benchmark, case, dps):
    prob, p0 = case
    gd = benchmark.pedantic(descent.run_mpmath, args=(prob, p0, dps), rounds=3, iterations=1, warmup_rounds=0)
    assert gd.status == "success" and gd.steps == descent.MP_STEPS
    ref = descent.run_float64(prob, p0, descent.MP_STEPS)
    exact = gd.states_float()
    assert np.max(np.abs(ref.states - exact)) <= 1e-12 * np.max(np.abs(exact))
    benchmark.extra_info.update(steps=gd.steps, dps=dps, m=p0.m, n=prob.n)
