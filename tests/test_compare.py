"""Gradient descent against the flow: first-order convergence, event alignment, chatter while sliding.

References: the sliding benchmark E1 (``tests.oracles.exact.e1_exact``; closed-form Filippov sliding; an
independently measured GD table at lr = 1e-1 ... 1e-4:
distance 2.2e-2 / 1.4e-3 / 2.1e-4 / 3.9e-5, flips 11 / 103 / 1023 / 10211, chatter amplitude ~ 0.49 lr), the flow
itself (dense output, checked against closed forms and mpmath in test_nonsmooth.py and test_vs_reference.py),
and direct evaluations of ``FlowResult.params_at``.
"""

import math

import matplotlib
import numpy as np
import pytest

import flowlib as fl
from flowlib import examples

E1_LRS = [1e-1, 1e-2, 1e-3, 1e-4]
E1_W10 = 1.135221419392515543744844340588247302794  # E1's mpmath closed form (tests.oracles.exact)
E1_T_STAR = 1.559263981605408919623452179917107486904


def e1_problem():
    """x1 = (1, 0), x2 = (1/2, sqrt3/2), y = (-1, 1), a = 1 frozen, L = 1/4 sum (relu(<w, x>) - y)^2, w0 = (1, 1/2).

    The square loss is (f - y)^2 / 2 and the mean over n = 2 halves it again: exactly E1's 1/4.
    """
    prob = fl.Problem(X=[[1.0, 0.0], [0.5, math.sqrt(3.0) / 2.0]], y=[-1.0, 1.0], loss="square", reduction="mean",
                      bias=False, train_outer=False)
    return prob, fl.Params(W=[[1.0, 0.5]], b=None, a=[1.0])


@pytest.fixture(scope="module")
def e1_flow():
    prob, p0 = e1_problem()
    flow = fl.gradient_flow(prob, p0, 10.0)
    assert flow.status == "success"
    assert [(e.kind, e.neuron, e.sample) for e in flow.events] == [("slide_start", 0, 0)]
    assert abs(flow.final.W[0, 1] - E1_W10) <= 1e-12 and abs(flow.final.W[0, 0]) <= 1e-15
    return flow


@pytest.fixture(scope="module")
def os_case():
    prob, p0 = examples.os_logistic()
    flow = fl.gradient_flow(prob, p0, 2.0)
    assert flow.status == "success" and flow.n_events == 21
    assert all(e.kind == "cross" for e in flow.events)
    return prob, p0, flow


# --------------------------------------------------------------------------------------------------------------
# E1: the independently measured table
# --------------------------------------------------------------------------------------------------------------
def test_e1_convergence_table_matches_independent_values(e1_flow):
    prob, p0 = e1_problem()
    study = fl.convergence_study(prob, p0, 10.0, E1_LRS, flow_result=e1_flow)
    assert study.steps.tolist() == [100, 1000, 10_000, 100_000]
    # the flow at t = 10 is the closed form to 1e-12, so these are the distances to the exact Filippov solution
    assert [float(f"{e:.1e}") for e in study.errors] == [2.2e-2, 1.4e-3, 2.1e-4, 3.9e-5]
    assert study.n_flips.tolist() == [11, 103, 1023, 10211]
    assert 0.8 <= study.order <= 1.2, study.order  # measured 0.910
    table = study.table()
    assert "fitted order 0.910" in table and len(table.splitlines()) == 6


@pytest.mark.parametrize("lr", E1_LRS)
def test_e1_chatter_amplitude_and_alignment(e1_flow, lr):
    prob, p0 = e1_problem()
    gd = fl.gradient_descent(prob, p0, lr, round(10.0 / lr))
    cmp = fl.compare(e1_flow, gd)
    (match,) = cmp.event_alignment
    assert (match.kind, match.neuron, match.sample) == ("slide_start", 0, 0)
    assert match.t_flow == pytest.approx(E1_T_STAR, rel=1e-12)
    assert abs(match.difference) <= lr and match.t_gd == match.k * lr
    (chat,) = cmp.chatter
    assert (chat.neuron, chat.sample, chat.t_end) == (0, 0, 10.0)
    # independently measured: max |<w, x1>| ~ 0.49 lr while the flow slides (measured 0.488, 0.494, 0.495, 0.496)
    assert 0.48 * lr <= chat.amplitude <= 0.50 * lr
    # every flip is either the one matched to the slide start or chatter inside the sliding interval
    assert cmp.unmatched_flips == 0
    assert chat.n_flips in (gd.n_flips, gd.n_flips - 1)
    # chatter dominates the distance: GD strays ~0.49 lr off the surface the flow stays on
    assert chat.amplitude <= cmp.max_distance <= 0.5 * lr


def test_e1_max_metric_is_first_order(e1_flow):
    prob, p0 = e1_problem()
    study = fl.convergence_study(prob, p0, 10.0, E1_LRS[:3], flow_result=e1_flow, metric="max")
    assert np.all(study.errors >= [2.2e-2, 1.3e-3, 2.0e-4])  # at least the final distance
    assert np.all((0.48 * study.lrs <= study.errors) & (study.errors <= 0.5 * study.lrs))
    assert 0.99 <= study.order <= 1.01


# --------------------------------------------------------------------------------------------------------------
# transversal problems
# --------------------------------------------------------------------------------------------------------------
def test_first_order_on_transversal_problems(os_case):
    prob, p0, flow = os_case
    study = fl.convergence_study(prob, p0, 2.0, E1_LRS, flow_result=flow)
    assert 0.9 <= study.order <= 1.1, study.order  # measured 0.974
    assert study.n_flips.tolist() == [21] * 4  # one GD flip per flow crossing
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    study = fl.convergence_study(prob, p0, 5.0, E1_LRS)
    assert 0.9 <= study.order <= 1.1, study.order  # measured 1.000
    assert np.all(np.abs(study.errors / study.lrs - 1.32e-3) <= 1e-5)  # error = C lr, C = 1.32e-3


@pytest.mark.parametrize("lr", [1e-3, 1e-4])
def test_compare_transversal(os_case, lr):
    prob, p0, flow = os_case
    gd = fl.gradient_descent(prob, p0, lr, round(2.0 / lr))
    cmp = fl.compare(flow, gd)
    assert cmp.iterations.tolist() == gd.iterations.tolist()
    np.testing.assert_array_equal(cmp.times, gd.iterations * lr)
    # the distance is the max-abs gap to the flow's dense output at t = k lr
    for k in (0, 1, len(gd.iterations) // 3, len(gd.iterations) - 1):
        flow_p = flow.params_at(k * lr)
        expected = max(np.max(np.abs(gd.states[k, :, :2] - flow_p.W)), np.max(np.abs(gd.states[k, :, 3] - flow_p.a)))
        assert cmp.distance[k] == expected
    assert cmp.distance[0] == 0.0
    assert cmp.max_distance <= lr  # measured 0.83 lr
    # events: each crossing matched to the GD flip of its surface, within O(lr) (measured <= 1.3 lr)
    assert len(cmp.event_alignment) == 21 and all(e.kind == "cross" and e.k >= 0 for e in cmp.event_alignment)
    assert cmp.max_event_shift <= 2 * lr
    assert cmp.unmatched_flips == 0 and cmp.chatter == ()
    table = cmp.table()
    assert len(table.splitlines()) == 24 and f"(relative {cmp.max_relative_distance:.3e})" in table


def test_compare_mpmath_descent_matches_float64():
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    flow = fl.gradient_flow(prob, p0, 1.0)
    c64 = fl.compare(flow, fl.gradient_descent(prob, p0, 1e-2, 100))
    cmp = fl.compare(flow, fl.gradient_descent(prob, p0, 1e-2, 100, dps=30, record_every=10))
    assert cmp.iterations.tolist() == list(range(0, 101, 10))
    # the two descents differ by float64 rounding only (test_descent.py: <= 1e-12 relative)
    assert np.max(np.abs(cmp.distance - c64.distance[::10])) <= 1e-12 * np.max(np.abs(flow.states))
    assert cmp.distance[-1] > 1e-6  # ... which is far below the distances compared


def test_compare_with_an_mpmath_flow(e1_flow):
    prob, p0 = e1_problem()
    flow_mp = fl.gradient_flow(prob, p0, 10.0, dps=30)
    gd = fl.gradient_descent(prob, p0, 1e-2, 1000, record_every=50)
    cmp, c64 = fl.compare(flow_mp, gd), fl.compare(e1_flow, gd)
    # the float64 flow is the 30-digit one to 1e-12 on E1 (test_nonsmooth.py): the distances agree to that
    assert np.max(np.abs(cmp.distance - c64.distance)) <= 1e-12
    assert cmp.event_alignment[0].t_flow == pytest.approx(E1_T_STAR, rel=1e-15)
    assert cmp.chatter[0].n_flips == c64.chatter[0].n_flips == 103


def test_compare_leaves_out_iterates_beyond_the_flow(os_case):
    prob, p0, flow = os_case
    cmp = fl.compare(flow, fl.gradient_descent(prob, p0, 0.01, 300))
    assert cmp.iterations[-1] == 200 and len(cmp.distance) == 201


# --------------------------------------------------------------------------------------------------------------
# plots and bad input
# --------------------------------------------------------------------------------------------------------------
def test_plots(e1_flow):
    from matplotlib.figure import Figure

    matplotlib.use("Agg")

    prob, p0 = e1_problem()
    cmp = fl.compare(e1_flow, fl.gradient_descent(prob, p0, 1e-2, 1000))
    fig = cmp.plot()
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert len(ax.lines[0].get_xdata()) == 1000  # k = 1 ... 1000 (k = 0 has t = 0 and distance 0)
    assert ax.lines[1].get_xdata()[0] == pytest.approx(E1_T_STAR)  # the slide_start marker
    study = fl.convergence_study(prob, p0, 10.0, E1_LRS[:3], flow_result=e1_flow)
    fig2 = study.plot()
    np.testing.assert_array_equal(fig2.axes[0].lines[0].get_ydata(), study.errors)
    import matplotlib.pyplot as plt

    plt.close(fig)
    plt.close(fig2)


def test_compare_rejects_mismatched_runs(e1_flow):
    prob, p0 = e1_problem()
    gd = fl.gradient_descent(prob, p0, 0.1, 10)
    other_prob = fl.Problem(prob.X, prob.y, loss="square", reduction="sum", bias=False, train_outer=False)
    with pytest.raises(ValueError, match="problem"):
        fl.compare(e1_flow, fl.gradient_descent(other_prob, p0, 0.1, 10))
    with pytest.raises(ValueError, match="initialisation"):
        fl.compare(e1_flow, fl.gradient_descent(prob, fl.Params(W=[[1.0, 0.25]], b=None, a=[1.0]), 0.1, 10))
    with pytest.raises(ValueError, match="dense_output"):
        fl.compare(fl.gradient_flow(prob, p0, 1.0, dense_output=False), gd)
    with pytest.raises(ValueError, match="flow_result"):
        fl.compare(gd, gd)
    with pytest.raises(ValueError, match="descent_result"):
        fl.compare(e1_flow, e1_flow)


@pytest.mark.parametrize("kwargs, name", [
    ({"lrs": [0.1]}, "lrs"), ({"lrs": [0.1, -0.01]}, "lrs"), ({"lrs": [[0.1, 0.01]]}, "lrs"),
    ({"lrs": ["a", "b"]}, "lrs"), ({"t_end": 0.0}, "t_end"), ({"t_end": float("inf")}, "t_end"),
    ({"metric": "mean"}, "metric"), ({"t_end": 20.0}, "flow_result"),
])
def test_convergence_study_bad_arguments(e1_flow, kwargs, name):
    prob, p0 = e1_problem()
    args = {"t_end": 10.0, "lrs": [0.1, 0.01], "flow_result": e1_flow}
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        fl.convergence_study(prob, p0, args.pop("t_end"), args.pop("lrs"), **args)


# --------------------------------------------------------------------------------------------------------------
# relative distances, descents that stop early, the module
# --------------------------------------------------------------------------------------------------------------
def test_relative_distance_is_the_distance_over_the_flows_size(os_case):
    prob, p0, flow = os_case
    gd = fl.gradient_descent(prob, p0, 1e-2, 200, record_every=20)
    cmp = fl.compare(flow, gd)
    for q, t in enumerate(cmp.times):
        state = flow.states_at([t])[0]
        assert cmp.flow_norm[q] == np.max(np.abs(state))
        assert cmp.relative_distance[q] == cmp.distance[q] / np.max(np.abs(state))
    assert cmp.max_relative_distance == np.max(cmp.relative_distance)
    assert cmp.max_relative_distance > cmp.max_distance > 0  # the flow's weights stay below 1 (small initialisation)
    assert not cmp.stopped_early and cmp.descent_status == "success"


def test_compare_warns_when_the_descent_stopped_on_its_flip_budget(e1_flow):
    import warnings

    prob, p0 = e1_problem()
    gd = fl.gradient_descent(prob, p0, 1e-3, 10_000, max_events=50)
    assert gd.status == "max_events" and gd.steps < 10_000
    with pytest.warns(fl.compare.StoppedEarlyWarning, match="stopped early.*max_events"):
        cmp = fl.compare(e1_flow, gd)
    assert issubclass(fl.compare.StoppedEarlyWarning, RuntimeWarning)
    assert cmp.stopped_early and cmp.times[-1] == gd.steps * 1e-3
    assert "descent stopped early, max_events" in cmp.table().splitlines()[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a descent that ran all its iterations: no warning
        fl.compare(e1_flow, fl.gradient_descent(prob, p0, 1e-2, 1000))


def test_convergence_study_keeps_the_step_sizes_that_finished(e1_flow):
    prob, p0 = e1_problem()
    full = fl.convergence_study(prob, p0, 10.0, E1_LRS[:3], flow_result=e1_flow)
    with pytest.warns(fl.compare.StoppedEarlyWarning, match="lr = 0.001 \\(max_events"):
        study = fl.convergence_study(prob, p0, 10.0, E1_LRS[:3], flow_result=e1_flow, max_events=200)
    assert study.status == ("success", "success", "max_events")  # 11, 103 and 1023 flips without a budget
    np.testing.assert_array_equal(study.errors[:2], full.errors[:2])
    assert math.isnan(study.errors[2]) and study.steps[2] < 10_000 and study.n_flips[2] == 200
    assert study.stopped.tolist() == [False, False, True]
    expected = math.log(full.errors[1] / full.errors[0]) / math.log(0.1)
    assert study.order == pytest.approx(expected, rel=1e-12)  # fitted on the two that finished
    table = study.table().splitlines()
    assert len(table) == 5 and "stopped early (max_events)" in table[-1]
    np.testing.assert_allclose(study.relative_errors[:2], study.errors[:2] / np.max(np.abs(e1_flow.states[-1])))


def test_convergence_study_bad_max_events(e1_flow):
    prob, p0 = e1_problem()
    with pytest.raises(ValueError, match="max_events"):
        fl.convergence_study(prob, p0, 10.0, [0.1, 0.01], flow_result=e1_flow, max_events=0)


def test_flowlib_compare_is_the_module_and_calls_compare(e1_flow):
    import importlib
    import inspect
    import sys
    import types

    import flowlib.compare as module

    assert isinstance(module, types.ModuleType) and module is sys.modules["flowlib.compare"] is fl.compare
    assert importlib.import_module("flowlib.compare") is module
    from flowlib.compare import Comparison, compare

    prob, p0 = e1_problem()
    gd = fl.gradient_descent(prob, p0, 1e-2, 1000)
    assert isinstance(fl.compare(e1_flow, gd), Comparison)
    np.testing.assert_array_equal(fl.compare(e1_flow, gd).distance, compare(e1_flow, gd).distance)
    assert list(inspect.signature(fl.compare).parameters) == ["flow_result", "descent_result"]
    assert fl.compare.__call__.__doc__ == compare.__doc__
