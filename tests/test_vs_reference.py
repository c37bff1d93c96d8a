"""Acceptance criterion: on transversal-only problems the float64 flow agrees with an independent
mpmath reference at 40 digits (``tests/oracles/reference.py``) to <= 1e-12 relative in the final state and in every
event time, and with SciPy DOP853 (rtol 1e-13, event restarts) to SciPy's own accuracy."""

import numpy as np
import pytest

import flowlib as fl
from benchmarks.peers.scipy_peer import scipy_flow
from flowlib import examples
from tests.oracles.reference import reference_flow

T_END = 5.0


def os_case():
    """Orthogonally separable data, logistic loss, small balanced init (Wang & Pilanci §3.1)."""
    return examples.os_logistic(m=6, n=8, d=3, scale=1e-2, seed=11)


def random_case(seed):
    """Random data with bias; the seeds used below were checked (by the reference, which raises otherwise) to
    have only transversal crossings up to T_END."""
    rng = np.random.default_rng(seed)
    loss = ("exp", "logistic", "square")[seed % 3]
    leak = (0.0, 0.2)[seed % 2]
    X = rng.standard_normal((5, 2))
    y = np.sign(rng.standard_normal(5)) if loss != "square" else rng.standard_normal(5)
    prob = fl.Problem(X, y, loss=loss, activation="leaky_relu" if leak else "relu", leak=leak, bias=True,
                      train_outer=bool(seed % 2))
    return prob, examples.random_init(4, 2, rng, bias=True)


CASES = {"os-logistic": os_case, "random-exp-leaky": lambda: random_case(3),
         "random-logistic-relu": lambda: random_case(4), "random-square-leaky": lambda: random_case(5)}


def packed(W, b, a):
    return np.column_stack([np.asarray(W, float), np.asarray(b, float), np.asarray(a, float)])


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    prob, p0 = CASES[request.param]()
    ref = reference_flow(prob.X, prob.y, p0.W, p0.b, p0.a, T_END, loss=prob.loss, reduction=prob.reduction,
                         leak=prob.leak, bias=prob.bias, train_outer=prob.train_outer, dps=40)
    b_ref = [float(v) for v in ref["b"]] if prob.bias else np.zeros(p0.m)
    final = packed([[float(v) for v in row] for row in ref["W"]], b_ref, [float(v) for v in ref["a"]])
    events = [(float(t), int(j), int(i), int(s)) for t, j, i, s in ref["events"]]
    return prob, p0, final, events


def test_matches_mpmath_reference(case):
    prob, p0, final, events = case
    res = fl.gradient_flow(prob, p0, T_END)
    assert res.status == "success"
    assert all(e.kind == "cross" for e in res.events)
    assert [(e.neuron, e.sample, e.side) for e in res.events] == [(j, i, s) for _, j, i, s in events]
    for ev, (t_ref, *_) in zip(res.events, events):
        assert abs(ev.t - t_ref) <= 1e-12 * t_ref
    got = packed(res.final.W, res.final.b if prob.bias else np.zeros(p0.m), res.final.a)
    assert np.max(np.abs(got - final)) <= 1e-12 * np.max(np.abs(final))


def test_matches_scipy_dop853(case):
    prob, p0, final, events = case
    res = fl.gradient_flow(prob, p0, T_END)
    peer = scipy_flow(prob.X, prob.y, p0.W, p0.b, p0.a, T_END, loss=prob.loss, reduction=prob.reduction,
                      leak=prob.leak, bias=prob.bias, train_outer=prob.train_outer, rtol=1e-13)
    assert peer.status == "ok"
    peer_final = packed(peer.W, peer.b, peer.a)
    scipy_error = np.max(np.abs(peer_final - final)) / np.max(np.abs(final))
    got = packed(res.final.W, res.final.b if prob.bias else np.zeros(p0.m), res.final.a)
    # the two agree to SciPy's own accuracy (measured against the reference), with a factor 10 of slack
    assert np.max(np.abs(got - peer_final)) / np.max(np.abs(final)) <= 10 * max(scipy_error, 1e-15)
    assert len(peer.event_times) == res.n_events
    peer_event_error = max((abs(tp - t) / t for tp, (t, *_) in zip(peer.event_times, events)), default=0.0)
    for ev, tp in zip(res.events, peer.event_times):
        assert abs(ev.t - tp) <= 10 * max(peer_event_error, 1e-15) * ev.t
