"""Hostile inputs to the engine: overflow never ends in ``success``, huge horizons in ``PiecewiseAffine``, argument
checks, the memory budget and the ``dps`` ceiling."""

import math
import time
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
import mpmath
from mpmath import mp, mpf

import flowlib as fl
from flowlib import flow
from flowlib.kernels import series
from flowlib.mp.fast import max_magnitude


def one_neuron(loss, w, a, reduction="sum", x=1.0, y=1.0):
    prob = fl.Problem(np.array([[x]]), np.array([y]), loss=loss, reduction=reduction, activation="relu", bias=False,
                      train_outer=True)
    return prob, fl.Params(W=[[w]], b=None, a=[a])


def assert_never_silent(res):
    """Never ``success`` with a non-finite final state or loss; a failure keeps a finite last state."""
    final_finite = bool(np.all(np.isfinite(np.asarray(res.states[-1], dtype=float))))
    loss_finite = bool(np.isfinite(float(res.loss[-1])))
    if res.status == "success":
        assert final_finite and loss_finite, res.message
    if res.status == "failed" and "non-finite" in res.message:
        assert final_finite
        res.final  # noqa: B018 - raises on a non-finite state


# ----- overflow --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("loss, w, a, t_end", [
    ("exp", math.sqrt(700.0), -math.sqrt(700.0), 10.0),       # y f = -700: L(0) = 1e304, finite
    ("square", 1e77, 1e77, 10.0),                              # f = 1e154
])
def test_flow_overflow_fails_with_last_finite_state(loss, w, a, t_end):
    prob, p0 = one_neuron(loss, w, a)
    res = fl.gradient_flow(prob, p0, t_end)
    assert res.status == "failed"
    assert "non-finite" in res.message and "t = 0.0" in res.message
    assert res.t_final == 0.0
    np.testing.assert_array_equal(res.final.W, [[w]])  # the last finite state: the initial one
    assert np.isfinite(res.loss[-1])
    text = res.summary()
    assert "nan" not in text.lower().replace("not available", "")
    assert "balancedness drift 0.00e+00" in text  # computed from finite states only


def test_logistic_log_clock_at_large_negative_margin_follows_the_closed_form():
    """logistic, y f = -800 (L = 800), t_end = 1e8 (log clock). Once ln L was NaN with ``success``, then the log
    clock's series ``exp(s - q) sigma(q)`` overflowed at ``q = -800`` and the run failed at t = 0; a misclassified
    sample now takes the equal form ``e^s sigma(-q)``. Balanced ``a = -w``: ``u = a w`` solves
    ``u' = -2 u sigma(-u)``, i.e. ``-(ln|u| + Ei(u)) / 2 = t + const`` (40 digits)."""
    w0 = math.sqrt(800.0)
    prob, p0 = one_neuron("logistic", w0, -w0)
    res = fl.gradient_flow(prob, p0, 1e8)
    assert_never_silent(res)
    assert res.status == "success" and res.clock == "log"
    assert res.log_loss[0] == pytest.approx(math.log(800.0), rel=1e-14)
    with mpmath.workdps(40):
        u0 = -mpmath.mpf(w0) ** 2
        F = lambda u: -(mpmath.log(-u) + mpmath.ei(u)) / 2  # noqa: E731
        for t in (0.5, 3.0, 20.0):
            u_exact = mpmath.findroot(lambda u: F(u) - F(u0) - t, (u0, -mpmath.mpf("1e-30")), solver="anderson")
            state = res.params_at(t)
            assert abs(state.W[0, 0] * state.a[0] - u_exact) <= 1e-12 * abs(u_exact), t


def test_max_abs_sees_nan():
    assert math.isnan(series.max_abs(np.array([[1.0, math.nan], [3.0, 0.0]])))
    assert series.max_abs(np.array([[1.0, -4.0], [3.0, 0.0]])) == 4.0
    with mp.workdps(30):
        assert mp_is_nan(mp.make_mpf(max_magnitude([mpf(1)._mpf_, mpf("nan")._mpf_, mpf(3)._mpf_],
                                                   *mp._prec_rounding)))


def mp_is_nan(x):
    return x != x


def test_summary_says_when_a_diagnostic_is_not_available():
    prob, p0 = one_neuron("logistic", 0.5, 0.5)
    res = fl.gradient_flow(prob, p0, 1.0)
    broken = type(res)(**{**res.__dict__, "states": np.full_like(res.states, np.nan),
                          "loss": np.full_like(res.loss, np.nan)})
    assert math.isnan(broken.balancedness_drift) and math.isnan(broken.energy_residual)
    text = broken.summary()
    assert "balancedness drift not available (a state is not finite)" in text
    assert "energy-identity residual not available (a loss or energy is not finite)" in text


def test_descent_overflow_keeps_last_finite_iterate():
    prob, p0 = one_neuron("exp", math.sqrt(700.0), -math.sqrt(700.0))
    gd = fl.gradient_descent(prob, p0, 1e5, 100)  # the first step would be 2.7e309
    assert gd.status == "failed" and "not be finite" in gd.message
    assert np.all(np.isfinite(gd.states[-1])) and gd.steps == 0
    np.testing.assert_array_equal(gd.final.W, [[math.sqrt(700.0)]])


@settings(max_examples=60, deadline=None)
@given(loss=st.sampled_from(["exp", "logistic", "square"]), reduction=st.sampled_from(["mean", "sum"]),
       log_w=st.floats(0.0, 160.0), log_a=st.floats(0.0, 160.0), log_x=st.floats(-2.0, 160.0),
       sign=st.sampled_from([-1.0, 1.0]), t_end=st.sampled_from([1.0, 1e8]), lr=st.sampled_from([1e-3, 1.0]))
def test_overflow_never_reported_as_success(loss, reduction, log_w, log_a, log_x, sign, t_end, lr):
    """Large weights, large |y f| and large data scales, for every loss and reduction: flow and GD never end in
    ``success`` with a non-finite final state or loss."""
    w, a, x = 10.0 ** (log_w / 2), sign * 10.0 ** (log_a / 2), 10.0 ** (log_x / 2)
    prob = fl.Problem(np.array([[x], [-x]]), np.array([1.0, -1.0]), loss=loss, reduction=reduction,
                      activation="relu", bias=False, train_outer=True)
    p0 = fl.Params(W=[[w]], b=None, a=[a])
    assert_never_silent(fl.gradient_flow(prob, p0, t_end, max_steps=2000))
    gd = fl.gradient_descent(prob, p0, lr, 50)
    assert_never_silent(gd)


# ----- PiecewiseAffine ---------------------------------------------------------------------------------------------
def relay():
    return fl.PiecewiseAffine(A0=np.zeros((1, 1)), c0=[0.0], A=np.zeros((1, 1, 1)), c=[[-1.0]], normals=[[1.0]])


def twisting():
    return fl.PiecewiseAffine(A0=[[0, 1], [0, 0]], c0=[0, 0], A=np.zeros((2, 2, 2)), c=[[0, -2], [0, -1]],
                              normals=[[1, 0], [0, 1]])


@pytest.mark.parametrize("t_end", [1e20, 1e100, 1.7e308, np.int64(10)])
def test_relay_sticks_at_one_whatever_the_horizon(t_end):
    res = relay().solve([1.0], t_end)
    assert res.status == "success"
    assert [(e.t, e.kind) for e in res.events] == [(1.0, "slide_start")]
    assert res.final.tolist() == [0.0] and res.t[-1] == float(t_end)


@pytest.mark.parametrize("t_end", [1e20, 1e308, 1.7e308])
def test_twisting_oscillator_reaches_its_zeno_point_at_any_horizon(t_end):
    res = twisting().solve([1.0, 0.0], t_end)
    assert res.status == "success"
    exact = 2 * math.sqrt(2) + 2 / 3 * math.sqrt(6)
    assert res.zeno_times() == [pytest.approx(exact, rel=1e-12)]
    assert res.final.tolist() == [0.0, 0.0]


def test_piecewise_nonfinite_state_fails_with_last_finite_state():
    """x' = x from 1 overflows near t = 709.8: ``failed``, never ``success`` with inf."""
    growth = fl.PiecewiseAffine(A0=[[1.0]], c0=[0.0], A=np.zeros((1, 1, 1)), c=[[0.0]], normals=[[1.0]],
                                offsets=[1.0])
    res = growth.solve([1.0], 1e4)
    assert res.status == "failed" and "non-finite" in res.message
    assert np.all(np.isfinite(res.x)) and res.t[-1] < 710.0


@pytest.mark.parametrize("kwargs, name", [({"rtol": "1e-10"}, "rtol"), ({"max_steps": -1}, "max_steps"),
                                          ({"max_events": -5}, "max_events"), ({"max_steps": 2.5}, "max_steps")])
def test_piecewise_solve_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        twisting().solve([1.0, 0.0], 1.0, **kwargs)


@pytest.mark.parametrize("t_end", [-1.0, math.inf, math.nan, "1"])
def test_piecewise_bad_horizon(t_end):
    with pytest.raises(ValueError, match="t_end"):
        relay().solve([1.0], t_end)


def test_piecewise_without_surfaces_is_refused():
    with pytest.raises(ValueError, match="normals"):
        fl.PiecewiseAffine(A0=np.zeros((1, 1)), c0=[0.0], A=np.zeros((0, 1, 1)), c=np.zeros((0, 1)),
                           normals=np.zeros((0, 1)))


def test_piecewise_buffers_grow_with_the_steps_taken():
    """``max_steps = 10**9`` allocated (K + 1) N floats a step up front (a MemoryError); now it costs nothing."""
    started = time.perf_counter()
    res = twisting().solve([1.0, 0.0], 10.0, max_steps=10**9, max_events=10**9)
    assert time.perf_counter() - started < 5.0
    small = twisting().solve([1.0, 0.0], 10.0)
    assert res.status == "success"
    np.testing.assert_array_equal(res.t, small.t)
    np.testing.assert_array_equal(res.x, small.x)


def test_piecewise_chunks_continue_the_same_trajectory(monkeypatch):
    """Chunk boundaries (buffers of 1 step, events 1 at a time) do not change the trajectory or the Zeno point."""
    from flowlib import piecewise

    whole = twisting().solve([1.0, 0.0], 10.0)
    monkeypatch.setattr(piecewise, "_FIRST_CHUNK", 1)
    monkeypatch.setattr(piecewise, "_MAX_CHUNK", 1)
    monkeypatch.setattr(piecewise, "_CHUNK_EVENTS", 1)
    pieces = twisting().solve([1.0, 0.0], 10.0)
    np.testing.assert_array_equal(pieces.t, whole.t)
    np.testing.assert_array_equal(pieces.x, whole.x)
    assert [repr(e) for e in pieces.events] == [repr(e) for e in whole.events]  # repr: controls may be NaN
    assert pieces.status == whole.status


def test_piecewise_step_budget_still_ends_the_run():
    res = twisting().solve([1.0, 0.0], 10.0, max_steps=3)
    assert res.status == "max_steps" and len(res.t) == 4


# ----- memory budget -------------------------------------------------------------------------------------------------
def test_memory_budget_stops_the_run_and_names_itself():
    prob, p0 = one_neuron("logistic", 0.5, 0.5)
    order = 16
    per_step = flow.stored_bytes_per_step(order, 1, 3, True)
    assert per_step == 8 * (17 * 3 + 3 + 4)
    res = fl.gradient_flow(prob, p0, 1e4, clock="t", memory_budget=5 * per_step)
    assert res.status == "max_steps" and res.n_steps == 5
    assert "memory_budget" in res.message
    full = fl.gradient_flow(prob, p0, 1e4, clock="t")
    np.testing.assert_array_equal(full.states[:6], res.states)  # the same trajectory, cut short
    res = fl.gradient_flow(prob, p0, 1e4, clock="t", memory_budget=5 * per_step, dense_output=False)
    assert res.n_steps > 5  # without dense output a step costs far less


def test_memory_budget_is_checked():
    prob, p0 = one_neuron("logistic", 0.5, 0.5)
    with pytest.raises(ValueError, match="memory_budget"):
        fl.gradient_flow(prob, p0, 1.0, memory_budget=0)


# ----- dps ------------------------------------------------------------------------------------------------------------
def test_dps_has_a_ceiling_and_warns_about_the_cost():
    prob, p0 = one_neuron("logistic", 0.5, 0.5)
    with pytest.raises(ValueError, match="dps"):
        fl.gradient_flow(prob, p0, 1.0, dps=flow.MAX_DPS + 1)
    with pytest.warns(UserWarning, match="dps = 401"):
        res = fl.gradient_flow(prob, p0, 0.0, dps=401)
    assert res.status == "success"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fl.gradient_flow(prob, p0, 0.0, dps=340)  # seed 000's long-horizon precision: no warning


# ----- chunk sizing ----------------------------------------------------------------------------------------------
def test_chunks_shrink_when_steps_become_slow():
    assert flow.next_chunk_steps(64, 64, 0.001) == 128
    assert flow.next_chunk_steps(64, 64, 0.05) == 64
    assert flow.next_chunk_steps(8192, 8192, 5.0) == int(8192 * flow._CHUNK_SECONDS / 5.0)
    assert flow.next_chunk_steps(4, 4, 100.0) == 1
