"""The adaptive Taylor order: after an event a step stops its coefficients at the first order (from the lowest, 3)
whose step reaches twice the predicted time of the next crossing. Checked against the closed form of that
prediction and of the step-size rule at low orders and, on event-dense flows where most steps end at a crossing,
against an independent mpmath reference at 40 digits (``tests/oracles/reference.py``) and against the same flow at
a tighter tolerance."""

import math

import numpy as np
import pytest
from mpmath import mp, mpf

import flowlib as fl
from flowlib import examples
from flowlib.kernels import driver, stepping
from flowlib.kernels.constants import DROP_CROSSED, DROP_NONE, MODE_FREE, MODE_HELD
from flowlib.mp import flow as mpflow
from flowlib.running import order_for
from tests.oracles.reference import reference_flow


def test_the_predicted_crossing_is_the_earliest_root_of_the_free_linear_parts():
    Z0 = np.array([[1.0, -2.0, 0.5], [-3.0, 4.0, -1.0]])
    Z1 = np.array([[-4.0, 1.0, 2.0], [1.0, -1.0, 0.25]])
    mode = np.full(Z0.shape, MODE_FREE, np.int8)
    drop = np.full(Z0.shape, DROP_NONE, np.int8)
    # roots -z0/z1 where z moves towards 0: 1/4 (0, 0), 2 (0, 1), 3 (1, 0), 4 (1, 1), 4 (1, 2); (0, 2) moves away
    assert driver._linear_crossing(Z0, Z1, mode, drop) == 0.25
    drop[0, 0] = DROP_CROSSED  # just crossed: its root at 0 is divided out, not predicted
    assert driver._linear_crossing(Z0, Z1, mode, drop) == 2.0
    mode[0, 1] = MODE_HELD  # held: its multiplier, not its linear part, decides when it is left
    assert driver._linear_crossing(Z0, Z1, mode, drop) == 3.0
    Z1[1] = 0.0
    assert driver._linear_crossing(Z0, Z1, mode, drop) == math.inf


@pytest.mark.parametrize("seed", range(4))
def test_the_predicted_crossing_equals_a_plain_scan_on_random_patterns(seed):
    """The kernel keeps one minimum per neuron and computes every quotient (no branch); a plain scan of the pairs
    that count, in Python, gives the same number bit for bit, also with exact zeros, ties and signed zeros."""
    rng = np.random.default_rng(seed)
    n, m = 37, 11
    Z0 = rng.standard_normal((n, m))
    Z1 = rng.standard_normal((n, m))
    Z0[rng.random((n, m)) < 0.1] = 0.0
    Z1[rng.random((n, m)) < 0.1] = -0.0
    Z0[3, :], Z1[3, :] = 1.0, -2.0  # one root, 0.5, in every column: a tie across neurons
    Z0[3, 4] = 0.25  # the earliest unless it is dropped
    mode = np.where(rng.random((n, m)) < 0.2, MODE_HELD, MODE_FREE).astype(np.int8)
    drop = np.where(rng.random((n, m)) < 0.1, DROP_CROSSED, DROP_NONE).astype(np.int8)
    mode[3, :], drop[3, :] = MODE_FREE, DROP_NONE
    if seed % 2:
        drop[3, 4] = DROP_CROSSED
    roots = [-float(Z0[i, j]) / float(Z1[i, j]) for i in range(n) for j in range(m)
             if Z0[i, j] * Z1[i, j] < 0.0 and mode[i, j] == MODE_FREE and drop[i, j] == DROP_NONE]
    expected = min(roots, default=math.inf)
    assert expected <= (0.5 if seed % 2 else 0.125)  # the planted roots of row 3 count
    assert driver._linear_crossing(Z0, Z1, mode, drop) == expected


def _dense_case(seed, n, m):
    """``n`` points in the plane with a bias and ``m`` neurons: most steps end at a crossing."""
    rng = np.random.default_rng(seed)
    loss = ("exp", "logistic")[seed % 2]
    X = rng.standard_normal((n, 2))
    y = np.sign(X[:, 0] + 0.3 * rng.standard_normal(n))
    prob = fl.Problem(X, y, loss=loss, activation="relu", bias=True, train_outer=True)
    return prob, examples.random_init(m, 2, rng, bias=True)


@pytest.mark.parametrize("tol", [1e-13, 1e-8, 1e-3, 1e-16])
def test_a_low_order_step_keeps_the_truncation_error_of_a_full_step(tol):
    # coefficients of a geometric series, |x^[l]| = size / rho^l: the truncation error of a step h at order k is
    # its first neglected term, size (h / rho)^(k + 1). At the tolerance's order K the step is Jorba & Zou's,
    # rho e^-2 exp(-0.7 / (K - 1)), with an error under tol * size / 100; below K it is the longer of their form at
    # order k (rho tol^(1/k) exp(-0.7 / (k - 1)): last computed terms at tol) and the step with a full step's error
    size, rho = 3.0, 0.25
    K = order_for(tol)
    assert stepping.tolerance_order(tol) == K
    full_error = (math.exp(-2.0 - 0.7 / (K - 1))) ** (K + 1)
    assert full_error <= tol / 100
    longer = 0
    for k in range(3, K + 1):
        h = stepping.taylor_step(size, size / rho ** (k - 1), size / rho ** k, k, tol)
        jorba_zou = rho * min(math.exp(-2.0), tol ** (1.0 / k)) * math.exp(-0.7 / (k - 1))
        as_full = rho * full_error ** (1.0 / (k + 1))
        if k == K:
            assert h == pytest.approx(rho * math.exp(-2.0 - 0.7 / (K - 1)), rel=1e-14)
            assert as_full == pytest.approx(h, rel=1e-14)
        assert h == pytest.approx(max(jorba_zou, as_full), rel=1e-14)
        longer += as_full > jorba_zou * (1 + 1e-12)
        assert (h / rho) ** (k + 1) <= tol  # every step keeps its truncation error under the tolerance
        with mp.workdps(30):
            exact = mpflow._taylor_step(mpf(size), mpf(size) / mpf(rho) ** (k - 1), mpf(size) / mpf(rho) ** k, k,
                                        mpf(tol))
        assert h == pytest.approx(float(exact), rel=1e-14)
    if tol == 1e-13:  # the orders where events are dense: the step of order 3 five times longer than Jorba & Zou's
        assert longer == 5
        h3 = stepping.taylor_step(size, size / rho ** 2, size / rho ** 3, 3, tol)
        assert h3 / (rho * tol ** (1 / 3) * math.exp(-0.35)) == pytest.approx(5.10, abs=0.01)


def _scale(P):
    return np.max(np.abs(P))


@pytest.mark.parametrize("seed", [3, 6])
def test_event_dense_flows_agree_with_a_tighter_tolerance(seed):
    prob, p0 = _dense_case(seed, 100, 6)
    res = fl.gradient_flow(prob, p0, 3.0)
    tight = fl.gradient_flow(prob, p0, 3.0, rtol=1e-15)
    assert res.status == tight.status == "success"
    assert len(res.events) >= 50 and res.n_steps <= 1.25 * len(res.events)
    assert [(e.neuron, e.sample, e.side) for e in res.events] == [(e.neuron, e.sample, e.side) for e in tight.events]
    assert max(abs(a.t - b.t) / b.t for a, b in zip(res.events, tight.events)) <= 1e-12
    assert _scale(res.states[-1] - tight.states[-1]) <= 1e-12 * _scale(tight.states[-1])


@pytest.mark.slow
def test_an_event_dense_flow_matches_the_40_digit_reference():
    prob, p0 = _dense_case(5, 60, 4)
    t_end = 2.0
    res = fl.gradient_flow(prob, p0, t_end)
    assert res.status == "success"
    assert len(res.events) >= 40 and res.n_steps <= 1.25 * len(res.events)
    ref = reference_flow(prob.X, prob.y, p0.W, p0.b, p0.a, t_end, loss=prob.loss, reduction=prob.reduction,
                         leak=prob.leak, bias=prob.bias, train_outer=prob.train_outer, dps=40)
    assert [(e.neuron, e.sample, e.side) for e in res.events] == [(int(j), int(i), int(s))
                                                                   for _, j, i, s in ref["events"]]
    for ev, (t_ref, *_) in zip(res.events, ref["events"]):
        assert abs(ev.t - float(t_ref)) <= 1e-12 * float(t_ref)
    final = np.column_stack([np.array(ref["W"], float), np.array(ref["b"], float), np.array(ref["a"], float)])
    assert _scale(res.states[-1] - final) <= 1e-12 * _scale(final)
