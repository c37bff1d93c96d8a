"""Concise reprs: one line with the status, times, counts, final loss and shapes, never an array, whatever the size;
and a small HTML table for notebooks."""

import re

import numpy as np
import pytest

import flowlib as fl
from flowlib import ensemble_result as er
from flowlib import examples
from flowlib.piecewise import PiecewiseEvent, PiecewiseResult

LIMIT = 400


@pytest.fixture(scope="module")
def big():
    """n = 1000 samples in d = 5 dimensions, three neurons: a flow and a descent."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 5))
    prob = fl.Problem(X, np.where(X[:, 0] > 0, 1.0, -1.0), loss="logistic", bias=True, train_outer=True)
    p0 = fl.Params(W=rng.normal(size=(3, 5)), b=np.zeros(3), a=rng.normal(size=3))
    return prob, p0, fl.gradient_flow(prob, p0, 0.05), fl.gradient_descent(prob, p0, 0.01, 20)


def _fields(text):
    return dict(re.findall(r"(\w+)=('[^']*'|[^,)]*)", text))


def _check(obj, status=None):
    text = repr(obj)
    assert len(text) < LIMIT and "\n" not in text and "array" not in text and "[" not in text, text
    assert text.startswith(type(obj).__name__ + "(")
    if status is not None:
        assert _fields(text)["status"] == repr(str(status))
        page = obj._repr_html_()
        assert page.startswith("<table>") and page.endswith("</table>") and len(page) < 4 * LIMIT
        assert f">status</th><td style=\"text-align:left\">{status}</td>" in page
    return _fields(text)


def test_problem_and_params(big):
    prob, p0, _, _ = big
    assert _check(prob) == {"n": "1000", "d": "5", "loss": "'logistic'", "reduction": "'mean'",
                            "activation": "'relu'", "bias": "True", "train_outer": "True"}
    leaky = fl.Problem(prob.X, prob.y, activation="leaky_relu", leak=0.1, bias=True, train_outer=False)
    assert _check(leaky)["leak"] == "0.1"
    fields = _check(p0)
    assert fields["m"] == "3" and fields["d"] == "5" and fields["bias"] == "True"
    assert float(fields["max_abs"]) == pytest.approx(max(np.abs(p0.W).max(), np.abs(p0.a).max()), rel=1e-5)
    assert "<table>" in prob._repr_html_() and ">1000</td>" in prob._repr_html_()


def test_flow_and_descent(big):
    prob, _, flow, gd = big
    fields = _check(flow, flow.status)
    assert fields["n_steps"] == str(flow.n_steps) and fields["n_events"] == str(flow.n_events)
    assert float(fields["t_final"]) == 0.05 and float(fields["loss"]) == pytest.approx(flow.loss[-1], rel=1e-5)
    assert (fields["m"], fields["n"], fields["d"]) == ("3", "1000", "5")
    fields = _check(gd, "success")
    assert fields["steps"] == "20" and fields["n_flips"] == str(gd.n_flips) and float(fields["lr"]) == 0.01
    assert float(fields["loss"]) == pytest.approx(gd.loss[-1], rel=1e-5)
    stopped = fl.gradient_descent(prob, fl.Params.unpacked(flow.states[0], True), 1.0, 10_000, max_events=1)
    assert _check(stopped, "max_events")["status"] == "'max_events'"


def test_mpmath_and_log_clock_flows():
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    assert _check(fl.gradient_flow(prob, p0, 0.5, dps=20), "success")["dps"] == "20"
    fields = _check(fl.gradient_flow(prob, p0, 1e8), "success")
    assert fields["clock"] == "'log'" and float(fields["t_final"]) == 1e8


def test_ensemble_and_piecewise_results():
    count = 1000
    members = er.empty_members(count, (3, 4))
    members["status_code"][:] = er.REACHED
    members["status_code"][:10] = er.DEADLINE
    members["t"][:] = np.arange(count, dtype=float)
    members["loss"][:] = 0.5
    prob = fl.Problem(X=[[1.0, 0.0], [0.0, 1.0]], y=[1.0, -1.0], bias=True, train_outer=False)
    ens = fl.EnsembleResult(method="gd", problems=(prob,), problem_index=np.zeros(count, np.int64),
                            inits=np.zeros((count, 3, 4)), options={}, **members)
    fields = _check(ens)
    assert fields["members"] == "1000" and fields["status"] == "'deadline 10, reached 990'"
    assert float(fields["median_t"]) == 499.5 and (fields["m"], fields["d"]) == ("3", "2")
    assert "reached 990" in ens._repr_html_()
    steps = 1000
    events = tuple(PiecewiseEvent(t=float(k), kind="cross", surface=0, side=1, control=np.nan) for k in range(50))
    pwa = PiecewiseResult(t=np.linspace(0.0, 2.0, steps + 1), x=np.zeros((steps + 1, 7)), events=events,
                          status=fl.Status.SUCCESS, message="reached t_end", coefficients=np.zeros((steps, 17, 7)),
                          wall_s=0.0, h=np.full(steps, 2e-3))
    assert _check(pwa, "success") == {"status": "'success'", "t_final": "2", "n_steps": "1000", "n_events": "50",
                                      "n_zeno": "0", "N": "7"}
