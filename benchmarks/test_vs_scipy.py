"""pytest-benchmark: flowlib vs SciPy DOP853 with event restarts on one transversal problem (an acceptance
criterion). Timings are recorded, never asserted; accuracies are asserted against the mpmath reference."""

import pytest

from benchmarks import vs_scipy


@pytest.fixture(scope="module")
def case():
    return vs_scipy.transversal_case()


@pytest.mark.benchmark(group="transversal")
def test_flowlib(benchmark, case):
    prob, p0 = case
    res = benchmark.pedantic(vs_scipy.run_flowlib, args=case, rounds=20, iterations=1, warmup_rounds=1)
    acc = vs_scipy.accuracy_flowlib(res)
    benchmark.extra_info.update(n_steps=res.n_steps, n_events=acc.n_events, state_error=acc.state,
                                event_time_error=acc.event_time)
    assert res.status == "success"
    assert acc.state <= 1e-12 and acc.event_time <= 1e-12


@pytest.mark.benchmark(group="transversal")
def test_scipy_dop853_restarts(benchmark, case):
    res = benchmark.pedantic(vs_scipy.run_scipy, args=case, rounds=5, iterations=1, warmup_rounds=0)
    acc = vs_scipy.accuracy_scipy(res)
    benchmark.extra_info.update(nfev=res.nfev, n_restarts=res.n_restarts, n_events=acc.n_events,
                                state_error=acc.state, event_time_error=acc.event_time)
    assert res.status == "ok"
