"""pytest-benchmark: the cost of precision: float64 and mpmath GD, the mpmath flow. Timings are
recorded, never asserted; each run is checked to complete, and float64 against mpmath at the end."""

import numpy as np
import pytest

import flowlib as fl

from benchmarks import precision


@pytest.fixture(scope="module", autouse=True)
def warm_descent():
    return precision.warm()


@pytest.fixture(scope="module", params=list(precision.CASES), ids=["gd-rate", "three-points"])
def case_name(request):
    return request.param


@pytest.fixture(scope="module")
def case(case_name):
    return precision.CASES[case_name]()


@pytest.mark.benchmark(group="descent-float64")
def test_float64(benchmark, case):
    prob, p0 = case
    gd = benchmark.pedantic(precision.run_float64, args=case, rounds=5, iterations=1, warmup_rounds=1)
    assert gd.status == "success" and gd.steps == precision.FLOAT64_STEPS
    benchmark.extra_info.update(steps=gd.steps, flips=gd.n_flips, m=p0.m, n=prob.n)


@pytest.mark.benchmark(group="descent-mpmath")
@pytest.mark.parametrize("dps", precision.MP_DPS)
def test_mpmath(benchmark, case, dps):
    prob, p0 = case
    gd = benchmark.pedantic(precision.run_mpmath, args=(prob, p0, dps), rounds=3, iterations=1, warmup_rounds=0)
    assert gd.status == "success" and gd.steps == precision.MP_STEPS
    ref = precision.run_float64(prob, p0, precision.MP_STEPS)
    exact = gd.states_float()
    assert np.max(np.abs(ref.states - exact)) <= 1e-12 * np.max(np.abs(exact))
    benchmark.extra_info.update(steps=gd.steps, dps=dps, m=p0.m, n=prob.n)


@pytest.mark.benchmark(group="flow-mpmath")
@pytest.mark.parametrize("dps", precision.MP_DPS)
def test_mp_flow(benchmark, case_name, case, dps):
    prob, p0 = case
    t_end = precision.FLOW_T_END[case_name]
    res = benchmark.pedantic(precision.run_mp_flow, args=(prob, p0, dps, t_end), rounds=1, iterations=1)
    assert res.status == "success"
    ref = fl.gradient_flow(prob, p0, t_end)
    exact = res.float64("states")[-1]
    assert np.max(np.abs(ref.states[-1] - exact)) <= 1e-12 * np.max(np.abs(exact))
    benchmark.extra_info.update(steps=res.n_steps, events=res.n_events, order=res.order, dps=dps)


@pytest.mark.benchmark(group="descent-mpmath-peer")
def test_plain_mpmath_loop_peer(benchmark):
    """The peer of the mpmath GD (timed in the same session): its iterate equals flowlib's bit for bit."""
    prob, p0 = precision.CASES[precision.PEER_FLOW_CASE]()
    P = benchmark.pedantic(precision.plain_mp_descent, args=(prob, p0, precision.LR, precision.MP_STEPS,
                                                             precision.PEER_DPS), rounds=3, iterations=1)
    gd = precision.run_mpmath(prob, p0, precision.PEER_DPS)
    assert [v for row in P for v in row] == list(gd.states[-1].ravel())
    benchmark.extra_info.update(steps=precision.MP_STEPS, dps=precision.PEER_DPS)


@pytest.mark.benchmark(group="flow-float64-peer")
def test_float64_flow_peer(benchmark):
    """The float64 flow of the case whose mpmath flow is compared with it: same events as the 30-digit flow."""
    prob, p0 = precision.CASES[precision.PEER_FLOW_CASE]()
    t_end = precision.FLOW_T_END[precision.PEER_FLOW_CASE]
    precision.run_float64_flow(prob, p0, t_end)
    res = benchmark.pedantic(precision.run_float64_flow, args=(prob, p0, t_end), rounds=5, iterations=1)
    deep = precision.run_mp_flow(prob, p0, 30, t_end)
    assert res.status == deep.status == "success"
    assert [(e.kind, e.neuron, e.sample) for e in res.events] == [(e.kind, e.neuron, e.sample) for e in deep.events]


def test_against_refuses_a_folder_without_flowlib(tmp_path):
    with pytest.raises(ValueError, match="other must be a flowlib checkout"):
        precision.against(str(tmp_path))


def test_a_flow_that_cannot_run_in_the_other_tree_is_an_error_with_its_cause(tmp_path):
    (tmp_path / "flowlib").mkdir()  # a folder named flowlib that holds no flowlib
    with pytest.raises(RuntimeError, match=r"the flow with the flowlib at .* failed: .*Error"):
        precision._flow_in(str(tmp_path), 0.5, 30)


@pytest.mark.slow
def test_against_this_tree_reproduces_its_own_flow(monkeypatch):
    """Comparing the tree with itself (two fresh processes each): the same steps, events and final state to the
    last printed digit, so a difference reported against another version is that version's."""
    monkeypatch.setattr(precision, "AGAINST_T_END", (0.5,))
    here = str(__import__("pathlib").Path(precision.__file__).resolve().parents[1])
    (row,) = precision.against(here)
    assert row["this"]["status"] == row["other"]["status"] == "success"
    assert (row["this"]["steps"], row["this"]["events"]) == (row["other"]["steps"], row["other"]["events"])
    assert row["this"]["events"] > 0
    assert row["difference"] == 0.0
