"""One convention for every runner: ``callback(progress)``, ``max_events``, ``until=`` for single runs (against closed
forms, a numpy reference and the same ensemble member), options an ensemble's method does not take are refused, and
the mpmath flow driver says what the float64 one says (flow time ``t``, the same messages from one status table)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from mpmath import mp, mpf

import flowlib as fl
from flowlib import examples
from flowlib.kernels import status as kstatus
from flowlib.statuses import KERNEL_STATUS, Status, at_time, ended, status_of
from numpy_reference import numpy_objective

HE_RULE = fl.Until(loss_below=0.5, linear=[[1, 1, 0], [1, -1, 0]], tol=1e-3, deadline=1e4 * 0.05)


def _linear_neuron():
    """One sample ``x = 1``, target ``y = 2``, one ReLU neuron with ``a = 1`` fixed and ``w0 = 0.5``: ``w x > 0``
    throughout, so the flow is linear. The residual ``r = w - 2`` obeys ``r' = -r``: ``w(t) = 2 - 1.5 e^-t`` and
    ``L(t) = r(t)^2 / 2``."""
    prob = fl.Problem(X=[[1.0]], y=[2.0], loss="square", bias=False, train_outer=False)
    return prob, fl.Params(W=[[0.5]], b=None, a=[1.0])


def _seed000(count):
    prob, _ = examples.gd_rate_network(1.0, 0.0, -1.0, 0.0)
    return prob, fl.random_inits(prob, m=2, count=count, scheme="he", a=[1.0, -1.0], bias=0.0, seed=6)


def _numbers_out(message: str) -> str:
    """The message with every number replaced by ``#`` (the wording, not the digits of either backend)."""
    return re.sub(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[-+]?inf", "#", message)


# ----- the mpmath driver says what the float64 one says ---------------------------------------------------------------
def test_log_clock_callback_sees_the_flow_time_in_both_backends():
    small = fl.Problem(X=[[1.0], [-1.0]], y=[1.0, -1.0], loss="logistic", bias=False, train_outer=True)
    s0 = fl.Params(W=[[0.5]], b=None, a=[0.5])
    seen = {None: [], 30: []}
    runs = {dps: fl.gradient_flow(small, s0, 50.0, clock="log", dps=dps, callback=seen[dps].append)
            for dps in seen}
    for dps, res in runs.items():
        assert res.clock == "log" and seen[dps][-1].done == seen[dps][-1].total == 50.0
        assert {p.done for p in seen[dps]} <= {float(t) for t in res.t}  # step boundaries, in flow time
    assert [p.done for p in seen[30]] == [float(t) for t in runs[30].t[1:]]  # after every step


@pytest.mark.parametrize("stop", [{"max_steps": 3}, {"max_events": 1}, {"callback": "stop"}])
@pytest.mark.parametrize("clock", ["t", "log"])
def test_budget_and_interrupt_messages_read_the_same_in_both_backends(stop, clock):
    """Same words from :mod:`flowlib.statuses`; the numbers are the flow time ``t`` (with the log clock also
    ``ln(1+t)``) at which each run ended."""
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)  # sticks on a kink early
    kwargs = dict(stop)
    if "callback" in kwargs:
        kwargs["callback"] = lambda progress: True
    messages = {}
    for dps in (None, 20):
        # a horizon the float64 run does not reach in its first chunk, whose end the callback stops
        res = fl.gradient_flow(prob, p0, 1e4 if clock == "t" else 1e300, clock=clock, dps=dps, **kwargs)
        t = res.t[-1]
        assert res.status == {"max_steps": "max_steps", "max_events": "max_events", "callback": "interrupted"}[
            next(iter(stop))]
        with mp.workdps(dps or 16):
            where = at_time(t, res.s[-1] if clock == "log" else None) if dps else \
                at_time(float(t), float(res.s[-1]) if clock == "log" else None)
        assert res.message.endswith(f"at {where}"), res.message
        messages[dps] = _numbers_out(res.message)
    assert messages[None] == messages[20]


def test_failures_come_from_the_one_table_in_both_backends():
    """The Caratheodory solution cannot follow a sliding flow: both backends stop there with the table's words."""
    prob, p0 = examples.sliding_two_points(1e-3)
    outcome, words = status_of(kstatus.NO_CARATHEODORY)
    for dps in (None, 25):
        res = fl.gradient_flow(prob, p0, 20.0, dps=dps, solution="caratheodory")
        assert res.status == outcome == Status.NO_CARATHEODORY_SOLUTION
        with mp.workdps(dps or 16):
            assert res.message == f"{words} ({at_time(res.t[-1])})"


def test_an_overflow_from_a_huge_loss_says_so():
    """An exp loss 300 past its margin (``L = (e^300 + e^-1) / 2``, finite) has a field whose Taylor coefficients
    overflow float64 from order 3, below the lowest order a step is taken at: the failure names the loss and what
    to do, not only the overflow."""
    prob = fl.Problem(np.array([[300.0], [1.0]]), np.array([-1.0, 1.0]), loss="exp", reduction="mean", bias=False,
                      train_outer=True)
    res = fl.gradient_flow(prob, fl.Params(W=np.array([[1.0]]), b=None, a=np.array([1.0])), 1.0)
    words = ended(kstatus.NONFINITE, "t = 0.0")[1]
    assert res.status == "failed" and res.message.startswith(words + ": the loss there is ")
    shown = float(res.message[len(words + ": the loss there is "):].split(",")[0])
    assert shown == pytest.approx((np.exp(300.0) + np.exp(-1.0)) / 2, rel=1e-14)
    assert "smaller initialisation" in res.message


@pytest.mark.parametrize("w0", [40.0, 150.0])
def test_a_huge_loss_whose_low_orders_are_finite_is_integrated(w0):
    """One ReLU neuron, ``x = 1``, ``y = -1``, exp loss, outer weight fixed at 1: ``L = e^w`` and ``w' = -e^w`` while
    ``w > 0``, so ``w(t) = -ln(e^-w0 + t)``; it reaches the kink at ``t* = 1 - e^-w0`` and sticks there (the field
    beyond is 0). At ``w0 = 150`` (``L = 1.4e65``) the coefficients overflow float64 above order 4 and the run
    used to fail at ``t = 0``; it now starts at the orders that are finite and climbs as the loss falls."""
    prob = fl.Problem(np.array([[1.0]]), np.array([-1.0]), loss="exp", activation="relu", bias=False,
                      train_outer=False)
    res = fl.gradient_flow(prob, fl.Params(W=np.array([[w0]]), b=None, a=np.array([1.0])), 2.0,
                           t_eval=[0.25, 0.5, 0.75])
    assert res.status == "success"
    expected = -np.log(np.exp(-w0) + np.array([0.25, 0.5, 0.75]))
    assert np.max(np.abs(res.states_eval[:, 0, 0] - expected)) <= 1e-12
    assert [e.kind for e in res.events] == ["stick"]
    assert res.events[0].t == pytest.approx(1.0 - np.exp(-w0), abs=1e-13)
    assert res.final.W[0, 0] == 0.0 and res.energy_residual <= 1e-10


def test_every_mpmath_failure_is_a_code_of_the_table(monkeypatch):
    """The mpmath engine's failures carry the kernels' codes; the message is the table's, at the time reached."""
    from flowlib.mp import flow as mpflow

    prob, p0 = _linear_neuron()
    for code in (kstatus.NONFINITE, kstatus.NO_PROGRESS, kstatus.NO_CONSISTENT, kstatus.TOO_MANY_SURFACES,
                 kstatus.NO_CARATHEODORY):
        def fail(engine, t_end, max_releases, code=code):
            raise mpflow._Stop(code)

        monkeypatch.setattr(mpflow, "_one_instant", fail)
        res = fl.gradient_flow(prob, p0, 1.0, dps=20)
        assert (res.status, res.message) == ended(code, "t = 0.0") and code in KERNEL_STATUS


# ----- until= for a flow alone ----------------------------------------------------------------------------------------
def test_flow_reaches_a_linear_condition_at_the_closed_form_time():
    """``|w - 2| <= 1e-3`` first holds at ``t* = ln(1500)`` (``w = 2 - 1.5 e^-t``), located inside the step."""
    prob, p0 = _linear_neuron()
    rule = fl.Until(linear=[[1.0, 0.0, 0.0]], offset=-2.0, tol=1e-3)
    res = fl.gradient_flow(prob, p0, 20.0, until=rule)
    assert res.status == "reached" and res.message == f"met the stop rule (until) (t = {res.t_final!r})"
    assert abs(res.t_final - math.log(1500.0)) <= 1e-12
    assert abs(res.states[-1, 0, 0] - (2.0 - 1e-3)) <= 1e-14
    assert res.t[-2] < res.t_final and res.params_at(res.t_final).W[0, 0] == pytest.approx(2.0 - 1e-3, abs=1e-14)
    plain = fl.gradient_flow(prob, p0, 20.0)
    n = res.n_steps
    np.testing.assert_array_equal(res.t[:-1], plain.t[:n])  # the steps before the stop are the plain run's
    np.testing.assert_array_equal(res.coefficients, plain.coefficients[:n])
    with mp.workdps(40):  # the mpmath run to its own precision
        deep = fl.gradient_flow(prob, p0, 20.0, dps=40, until=rule)
        # w = 2 - tol exactly, with the float64 tol = 1e-3 + 2.1e-20 taken exactly
        assert deep.status == "reached" and abs(deep.t[-1] - mp.log(mpf(1.5) / mpf(1e-3))) <= mpf("1e-30")


def test_flow_loss_threshold_and_deadline_in_both_backends():
    """``L(t) = 1.125 e^-2t``: the loss threshold is met at the first step boundary past the closed-form time; a
    threshold not met by the deadline ends the run at the deadline, with the closed-form state."""
    prob, p0 = _linear_neuron()
    threshold = 1e-3
    t_star = 0.5 * math.log(1.125 / threshold)
    for dps in (None, 20):
        res = fl.gradient_flow(prob, p0, 20.0, dps=dps, until=fl.Until(loss_below=threshold))
        plain = fl.gradient_flow(prob, p0, 20.0, dps=dps)
        q = res.n_steps
        assert res.status == "reached" and res.t[-1] == plain.t[q] and res.t[-2] == plain.t[q - 1]
        assert float(res.t[-2]) < t_star < float(res.t[-1])  # the first boundary past t*
        assert res.loss[-1] < threshold <= plain.loss[q - 1]
        late = fl.gradient_flow(prob, p0, 20.0, dps=dps, until=fl.Until(loss_below=threshold, deadline=1.0))
        assert late.status == "deadline" and late.t[-1] == 1.0
        with mp.workdps(dps or 16):
            assert late.message == ended(kstatus.DEADLINE, at_time(late.t[-1]))[1]
        assert abs(float(late.states[-1, 0, 0]) - (2.0 - 1.5 * math.exp(-1.0))) <= 1e-13


# ----- one name for event budgets -------------------------------------------------------------------------------------
def test_max_events_budgets_flips_and_max_flips_is_gone(tmp_path):
    prob, p0 = examples.three_points(4, 1e-1, seed=3)
    gd = fl.gradient_descent(prob, p0, 0.5, 3000, max_events=2)
    sgd = fl.stochastic_gradient_descent(prob, p0, 0.5, 3000, batch_size=2, max_events=2)
    for run in (gd, sgd):
        assert run.status == "max_events" and run.n_flips >= 2
        assert run.message == f"max_events = 2 used up at iteration {run.steps}" and run.options["max_events"] == 2
    with pytest.raises(TypeError, match="max_flips"):
        fl.gradient_descent(prob, p0, 0.5, 3000, max_flips=2)
    config = tmp_path / "old.toml"
    config.write_text('[problem]\nexample = "two_crossings"\n[gd]\nlr = 0.1\nsteps = 10\nmax_flips = 5\n')
    from flowlib import config as run_config

    with pytest.raises(ValueError, match=rf"{re.escape(str(config))}: gd.max_flips was renamed gd.max_events"):
        run_config.load(config)
    config.write_text('[problem]\nexample = "two_crossings"\n[gd]\nlr = 0.1\nsteps = 10\nmax_events = 5\n')
    assert run_config.load(config).gd["max_events"] == 5


# ----- until= for descent alone ---------------------------------------------------------------------------------------
def test_descent_reaches_the_first_iterate_below_the_threshold():
    """The numpy objective of every iterate of a plain run picks the iterate; GD, SGD (float64 and mpmath) stop
    there, with its state, the records ``record_every`` asks for and the flips up to it."""
    prob, p0 = examples.os_logistic(m=6, n=8, d=3, scale=1e-2, seed=11)
    for method, kwargs in (("gd", {}), ("sgd", {"batch_size": 3, "seed": 5})):
        run = fl.gradient_descent if method == "gd" else fl.stochastic_gradient_descent
        plain = run(prob, p0, 0.5, 400, **kwargs)
        losses = np.array([numpy_objective(prob, P) for P in plain.states])
        lowest = np.minimum.accumulate(losses)
        first = next(k for k in range(150, 400) if losses[k] < lowest[k - 1] * (1 - 1e-9))  # a new low, clearly
        threshold = 0.5 * (losses[first] + lowest[first - 1])
        for dps in (None, 30):
            res = run(prob, p0, 0.5, 400, dps=dps, record_every=7, until=fl.Until(loss_below=threshold), **kwargs)
            assert res.status == "reached" and res.steps == first
            assert res.message == f"met the stop rule (until) (iteration {first})"
            assert res.iterations.tolist() == list(range(0, first, 7)) + [first]
            assert np.allclose(res.states[-1].astype(float), plain.states[first], rtol=0, atol=1e-13)
            assert res.flips.k.tolist() == [f for f in plain.flips.k.tolist() if f <= first]
            shorter = run(prob, p0, 0.5, first, dps=dps, **kwargs)  # the same iterate, bit for bit
            assert all(u == v for u, v in zip(res.states[-1].ravel(), shorter.states[-1].ravel()))


def test_descent_deadline_and_a_rule_met_at_the_start():
    prob, p0 = examples.three_points(4, 1e-1, seed=3)
    late = fl.gradient_descent(prob, p0, 0.05, 1000, until=fl.Until(loss_below=1e-9, deadline=10.0))
    assert late.status == "deadline" and late.steps == 200 and late.iterations[-1] == 200
    assert late.message == "the loss did not go below until.loss_below by until.deadline (iteration 200)"
    now = fl.gradient_descent(prob, p0, 0.05, 1000, until=fl.Until(loss_below=1e9))
    assert now.status == "reached" and now.steps == 0 and now.iterations.tolist() == [0]


@pytest.mark.parametrize("until", ["L < 0.5", fl.Until(linear=np.ones((3, 3)), tol=0.1)])
def test_a_bad_rule_is_named(until):
    prob, p0 = _linear_neuron()
    for call in (lambda: fl.gradient_flow(prob, p0, 1.0, until=until),
                 lambda: fl.gradient_descent(prob, p0, 0.1, 10, until=until),
                 lambda: fl.stochastic_gradient_descent(prob, p0, 0.1, 10, batch_size=1, until=until)):
        with pytest.raises(ValueError, match="until"):
            call()


# ----- one callback convention ----------------------------------------------------------------------------------------
def test_every_runner_calls_back_with_a_progress():
    prob, p0 = _linear_neuron()
    seen = {name: [] for name in ("flow", "mp", "gd", "sgd", "ensemble")}
    flow = fl.gradient_flow(prob, p0, 3.0, callback=seen["flow"].append)
    mpflow = fl.gradient_flow(prob, p0, 3.0, dps=20, callback=seen["mp"].append)
    gd = fl.gradient_descent(prob, p0, 0.01, 300, callback=seen["gd"].append)
    two = fl.Problem(X=[[1.0], [2.0]], y=[2.0, 4.0], loss="square", bias=False, train_outer=False)
    sgd = fl.stochastic_gradient_descent(two, p0, 0.01, 300, batch_size=1, callback=seen["sgd"].append)
    inits = np.stack([p0.packed() * s for s in (1.0, 2.0, 3.0)])
    ens = fl.ensemble(prob, inits, "gd", lr=0.01, steps=300, chunk_size=1, callback=seen["ensemble"].append)
    assert all(isinstance(p, fl.Progress) for calls in seen.values() for p in calls)
    assert seen["flow"][-1] == fl.Progress("flow", 3.0, 3.0, flow.n_steps, flow.n_events)
    assert seen["mp"][-1] == fl.Progress("flow", 3.0, 3.0, mpflow.n_steps, mpflow.n_events)
    assert [p.done for p in seen["mp"]] == [float(t) for t in mpflow.t[1:]]  # after every step
    assert seen["gd"][-1] == fl.Progress("descent", 300, 300, 300, gd.n_flips)
    assert seen["sgd"][-1] == fl.Progress("descent", 300, 300, 300, sgd.n_flips)
    assert seen["ensemble"] == [fl.Progress("ensemble", r, 3, 300 * r, int(ens.events[:r].sum())) for r in (1, 2, 3)]
    with pytest.raises(AttributeError):
        seen["gd"][-1].done = 0  # frozen


def test_a_true_return_stops_every_runner():
    prob, p0 = _linear_neuron()
    wide, w0 = examples.os_logistic(m=6, n=8, d=3, scale=1e-2, seed=11)  # more than one chunk of steps
    assert fl.gradient_flow(wide, w0, 1e4, clock="t", callback=lambda p: True).status == "interrupted"
    assert fl.gradient_flow(prob, p0, 3.0, dps=20, callback=lambda p: p.steps >= 2).n_steps == 2
    gd = fl.gradient_descent(prob, p0, 1e-6, 10**7, callback=lambda p: p.done > 0)
    assert gd.status == "interrupted" and gd.message == f"interrupted at iteration {gd.steps}"
    ens = fl.ensemble(prob, np.stack([p0.packed()] * 4), "gd", lr=0.01, steps=10, chunk_size=1,
                      callback=lambda p: p.done >= 2)
    assert not ens.complete and ens.counts() == {"pending": 2, "success": 2}


@pytest.mark.parametrize("run", ["flow", "mp", "gd", "sgd", "ensemble"])
def test_a_callback_that_is_not_callable_is_named(run):
    prob, p0 = _linear_neuron()
    calls = {"flow": lambda: fl.gradient_flow(prob, p0, 1.0, callback=3),
             "mp": lambda: fl.gradient_flow(prob, p0, 1.0, dps=20, callback=3),
             "gd": lambda: fl.gradient_descent(prob, p0, 0.1, 10, callback=3),
             "sgd": lambda: fl.stochastic_gradient_descent(prob, p0, 0.1, 10, batch_size=1, callback=3),
             "ensemble": lambda: fl.ensemble(prob, p0.packed()[None], "gd", lr=0.1, steps=10, callback=3)}
    with pytest.raises(ValueError, match=r"callback must be callable .*callback\(progress\)"):
        calls[run]()


# ----- a run alone is the same member of an ensemble ------------------------------------------------------------------
def test_a_run_alone_is_the_same_member_of_an_ensemble():
    """Status, time, state, steps and events, bit for bit, for the flow (log clock, linear rule with a deadline;
    a loss threshold alone) and gradient descent."""
    prob, inits = _seed000(8)
    inits = inits[[0, 1, 5]]  # the last one starts in the quadrant w2 < 0 < w1, where the rule is met
    flows = [(fl.ensemble(prob, inits, "flow", t_end=1e7, until=HE_RULE), HE_RULE),
             (fl.ensemble(prob, inits, "flow", t_end=50.0, until=fl.Until(loss_below=0.55)), fl.Until(loss_below=0.55))]
    for ens, rule in flows:
        for r in range(len(inits)):
            alone = fl.gradient_flow(prob, ens.params(r, "init"), ens.options["t_end"], until=rule)
            assert alone.status == ens.status[r]
            assert alone.t[-1] == ens.t[r] and np.array_equal(alone.states[-1], ens.final[r])
            assert alone.n_steps == ens.steps[r] and alone.n_events == ens.events[r]
    assert set(flows[0][0].status) == {"reached", "deadline"}
    ens = fl.ensemble(prob, inits, "gd", lr=0.05, steps=10**6, until=HE_RULE)
    assert list(ens.status) == ["deadline", "deadline", "reached"]
    for r in range(len(inits)):
        alone = fl.gradient_descent(prob, ens.params(r, "init"), 0.05, 10**6, until=HE_RULE, record_every=1000)
        assert alone.status == ens.status[r] and alone.steps == ens.steps[r] and alone.steps * 0.05 == ens.t[r]
        assert np.array_equal(alone.states[-1], ens.final[r]) and alone.loss[-1] == ens.loss[r]
        assert alone.n_flips == ens.events[r]


# ----- ensemble options of the other method ---------------------------------------------------------------------------
@pytest.mark.parametrize("method, option, value", [
    ("gd", "t_end", 1.0), ("gd", "log_t_end", 3.0), ("gd", "clock", "auto"), ("gd", "rtol", 1e-10),
    ("gd", "solution", "filippov"), ("gd", "tie", "stay"), ("gd", "max_steps", 10), ("gd", "max_events", 10),
    ("flow", "lr", 0.1), ("flow", "steps", 10),
])
def test_ensemble_refuses_options_of_the_other_method(method, option, value):
    prob, inits = _seed000(2)
    horizon = {"lr": 0.1, "steps": 10} if method == "gd" else {"t_end": 1.0}
    other = "flow" if method == "gd" else "gd"
    with pytest.raises(ValueError, match=rf"^{option} applies to method='{other}' only .*method='{method}'"):
        fl.ensemble(prob, inits, method, **horizon, **{option: value})
