"""Certified trajectories (flowlib.certify): every enclosure contains an independent 50-digit answer (closed forms,
or the mpmath flow at 50 digits), the enclosures are narrow, and a wrong log is rejected with the reason."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from mpmath import mp, mpf

import flowlib as fl
from flowlib import examples
from flowlib.result import EventLog
from flowlib.validation.seed000_gd_rate import two_block_closed_form
from tests.oracles import exact

flint = pytest.importorskip("flint")

DPS = 50


def _inside(value, bounds) -> bool:
    lo, hi = bounds
    return lo <= value <= hi


def _relative_width(bounds, scale) -> float:
    return float((bounds[1] - bounds[0]) / scale)


# -- seed 000: Smorodinsky, Gimpleson & Safran's two-neuron network against its closed form ------------------------

#: Initialisations (w1, b1, w2, b2) with u1 > 0 > v2, so the closed form holds: no kink, one kink, both kinks.
SEED000 = ((1.0, 0.0, -0.5, 0.0), (2.8, 0.0, -0.3, 0.0), (1.0, 0.2, -1.0, 0.3), (0.5, 1.0, -0.8, 0.1),
           (1.0, 0.0, 0.5, 1.0), (2.0, 3.0, -2.0, 3.1), (0.3, 0.8, -0.2, 0.4))


@pytest.mark.parametrize("theta0", SEED000)
def test_seed000_kink_times_and_states_enclose_the_closed_form(theta0):
    prob, p0 = examples.gd_rate_network(*theta0)
    res = fl.gradient_flow(prob, p0, t_end=1e4)
    cert = fl.certify(res, times=[1.0, 100.0, 1e4])
    assert cert.status == "certified", cert.reason
    with mp.workdps(DPS):
        for t, (lo, hi), (loss_lo, loss_hi) in zip(cert.times, cert.states, cert.losses):
            first, second, kinks = two_block_closed_form(theta0, t)
            neurons = (first, second)
            for j, (w, b) in enumerate(neurons):
                assert _inside(w, (lo[j, 0], hi[j, 0])) and _inside(b, (lo[j, 1], hi[j, 1]))
                assert _relative_width((lo[j, 0], hi[j, 0]), max(1, abs(w))) <= 1e-12
                assert _relative_width((lo[j, 1], hi[j, 1]), max(1, abs(b))) <= 1e-12
            # the outer weights are fixed at +1 and -1: their enclosures are exact
            assert lo[0, 2] == hi[0, 2] == 1 and lo[1, 2] == hi[1, 2] == -1
            # the loss 1/2 (exp(-y1 f(-1)) + exp(-y2 f(1))) of the closed-form state
            (w1, b1), (w2, b2) = first, second
            f = [max(-w1 + b1, 0) - max(-w2 + b2, 0), max(w1 + b1, 0) - max(w2 + b2, 0)]
            loss = (mp.exp(f[0]) + mp.exp(-f[1])) / 2
            assert _inside(loss, (loss_lo, loss_hi)) and _relative_width((loss_lo, loss_hi), loss) <= 1e-12
        kinks = two_block_closed_form(theta0, res.t[-1])[2]
        assert {(e.neuron, e.sample): e.kind for e in cert.events} == {key: "stick" for key in kinks}
        for e in cert.events:
            t_kink = kinks[(e.neuron, e.sample)]
            assert _inside(t_kink, e.t) and _relative_width(e.t, t_kink) <= 1e-12


# -- sliding: E1 against its closed form, Wang & Pilanci's V12 against the 50-digit flow --------------------------

def test_e1_slides_at_its_closed_form_time_and_stays_on_the_surface():
    prob = fl.Problem(X=exact.E1_X, y=exact.E1_Y, loss="square", reduction="mean", bias=False, train_outer=False)
    res = fl.gradient_flow(prob, fl.Params(W=[exact.E1_W0], b=None, a=[1.0]), t_end=10.0)
    cert = fl.certify(res, times=[1.0, 5.0, 10.0])
    assert cert.status == "certified", cert.reason
    [event] = cert.events
    assert (event.kind, event.neuron, event.sample) == ("slide_start", 0, 0)
    with mp.workdps(DPS):
        for t, (lo, hi) in zip(cert.times, cert.states):
            w, t_star = exact.e1_exact(t)
            for q in range(2):
                assert _inside(w[q], (lo[0, q], hi[0, q]))
                assert hi[0, q] - lo[0, q] <= 1e-12 * max(1, abs(w[q]))
        assert _inside(t_star, event.t) and _relative_width(event.t, t_star) <= 1e-12
        # the multiplier of the sliding field at entry, s* = -<e_2-part> ... lies in (leak, 1) = (0, 1)
        assert 0 < event.multiplier[0] <= event.multiplier[1] < 1


def test_v12_hit_time_state_and_loss_enclose_the_50_digit_flow():
    prob, p0 = examples.sliding_two_points()
    res = fl.gradient_flow(prob, p0, t_end=6.0)
    ref = fl.gradient_flow(prob, p0, t_end=6.0, dps=DPS)
    cert = fl.certify(res, times=[2.0, 6.0])
    assert cert.status == "certified", cert.reason
    assert [e.kind for e in cert.events] == [e.kind for e in ref.events] == ["slide_start"]
    with mp.workdps(DPS):
        assert _inside(ref.events.t[0], cert.events[0].t)
        assert _relative_width(cert.events[0].t, ref.events.t[0]) <= 1e-12
        lo, hi = cert.states[-1]
        final = ref.states[-1]
        scale = max(abs(v) for v in final.ravel())
        for j, q in np.ndindex(final.shape):
            assert lo[j, q] <= final[j, q] <= hi[j, q]
            assert hi[j, q] - lo[j, q] <= 1e-12 * scale
        assert _inside(ref.loss[-1], cert.losses[-1])
    # an mpmath result is certified the same way (its mpf initial state is taken exactly)
    assert fl.certify(ref).certified


def test_exact_balls_of_mpf_keep_their_sign_and_refuse_non_finite_values():
    """mpmath keeps an mpf's sign apart from its mantissa: a negative mpf is enclosed as itself, exactly."""
    from flowlib.certify.balls import exact as exact_ball
    from flowlib.certify.balls import working

    with mp.workdps(40), working(53, 8):
        for number in (-1.5, -3e20, -2.0**-1074, 0.0, 0.75):  # binary fractions: the float path agrees exactly
            ball = exact_ball(mpf(number))
            assert ball.rad() == 0 and ball.mid() == flint.arb(number).mid()
        for text in ("-0.1", "1e-30", "-7.25e-12"):  # 40-digit values: the same number to 40 digits, its sign kept
            value = mpf(text)
            ball = exact_ball(value)
            assert ball.rad() == 0 and (ball < 0) == (value < 0)
            with working(300, 8):  # the decimal's own ball, 90 digits wide
                assert abs(ball - flint.arb(text)) < abs(flint.arb(text)) * flint.arb("1e-39")
        for bad in (mp.inf, -mp.inf, mp.nan):
            with pytest.raises(ValueError, match="non-finite"):
                exact_ball(bad)


def test_an_mpmath_run_with_negative_weights_is_certified():
    """Seed 003's three points (m = 8, negative inner and outer weights) at 30 digits: the certifier starts from the
    run's own mpf state and proves each of its events, as it does for the float64 run."""
    prob, p0 = examples.three_points(8)[:2]
    assert (p0.W < 0).any() and (p0.a < 0).any()
    ref = fl.gradient_flow(prob, p0, 1.0, dps=30)
    cert = fl.certify(ref)
    assert cert.status == "certified", cert.reason
    assert [e.kind for e in cert.events] == [e.kind for e in ref.events] == ["cross", "stick", "cross", "cross"]
    with mp.workdps(DPS):
        for found, t in zip(cert.events, ref.events.t):  # the run's own event times, to its 30 digits
            lo, hi = found.t
            assert hi - lo <= 1e-35 and lo - 1e-28 <= t <= hi + 1e-28


def test_the_end_of_an_mpmath_run_in_the_log_clock_is_certified_by_default():
    """A 30-digit run in the log clock ends at ``expm1(s_end)``, whose float64 (the default requested time) lies
    above it: the certifier takes that float as the run's end, and the loss enclosure there holds the run's loss."""
    prob, p0 = examples.os_logistic()[:2]
    ref = fl.gradient_flow(prob, p0, log_t_end=0.3, dps=30)
    with mp.workdps(30):
        assert ref.t_final > ref.t[-1]  # the case this test is about
    cert = fl.certify(ref)
    assert cert.status == "certified", cert.reason
    assert list(cert.times) == [ref.t_final]
    with mp.workdps(DPS):
        lo, hi = cert.losses[0]
        assert hi - lo <= 1e-28 and lo - 1e-28 <= ref.loss[-1] <= hi + 1e-28


def _slide_end_problem(seed: int):
    """Three Gaussian points in the plane, square loss, two neurons, outer layer trained: for seed 72 (leaky ReLU,
    leak 0.25) and 97 (ReLU) a neuron slides on a hyperplane and leaves it where its multiplier reaches a bound."""
    rng = np.random.default_rng(seed)
    X, y = rng.standard_normal((3, 2)), rng.standard_normal(3)
    leak = 0.0 if seed % 2 else 0.25
    prob = fl.Problem(X, y, loss="square", reduction="mean", activation="leaky_relu" if leak else "relu", leak=leak,
                      bias=False, train_outer=True)
    return prob, fl.Params(W=rng.standard_normal((2, 2)), b=None, a=rng.standard_normal(2))


@pytest.mark.parametrize("seed, kinds", [(72, ["cross", "slide_start", "slide_end"]),
                                         (97, ["slide_start", "cross", "slide_end"])])
def test_a_slide_that_ends_at_its_multipliers_bound_encloses_the_50_digit_flow(seed, kinds):
    prob, p0 = _slide_end_problem(seed)
    res = fl.gradient_flow(prob, p0, t_end=9.0)
    ref = fl.gradient_flow(prob, p0, t_end=9.0, dps=DPS)
    cert = fl.certify(res, times=[9.0])
    assert cert.status == "certified", cert.reason
    assert [e.kind for e in cert.events] == [e.kind for e in ref.events] == kinds
    with mp.workdps(DPS):
        for e, t_ref in zip(cert.events, ref.events.t):
            assert _inside(t_ref, e.t) and _relative_width(e.t, t_ref) <= 1e-12
        start, end = cert.events[kinds.index("slide_start")], cert.events[-1]
        bound = prob.leak if end.side < 0 else 1.0
        # the multiplier starts inside the box and its range while held ends at the bound it reaches
        assert prob.leak < start.multiplier[0] <= start.multiplier[1] < 1
        lo, hi = start.multiplier_range
        assert lo <= start.multiplier[0] and start.multiplier[1] <= hi
        # it reaches the bound (so the range holds it) and never passes it (to the balls' rounding)
        reached = lo if end.side < 0 else hi
        assert abs(reached - bound) <= 1e-30, (lo, hi)
        lo, hi = cert.states[-1]
        assert all(lo[j, q] <= ref.states[-1][j, q] <= hi[j, q] for j, q in np.ndindex(lo.shape))


@pytest.mark.slow
def test_b1_os_nine_crossings_enclose_the_50_digit_flow_at_100_bits():
    prob, p0 = examples.os_logistic(m=6, n=8, d=3, scale=1e-2, seed=11)
    res = fl.gradient_flow(prob, p0, t_end=10.0)
    ref = fl.gradient_flow(prob, p0, t_end=10.0, dps=DPS)
    cert = fl.certify(res, prec=100)
    assert cert.status == "certified", cert.reason
    assert len(cert.events) == 9 and all(e.kind == "cross" for e in cert.events)
    with mp.workdps(DPS):
        for e, t_ref in zip(cert.events, ref.events.t):
            assert _inside(t_ref, e.t) and _relative_width(e.t, t_ref) <= 1e-12
        lo, hi = cert.states[-1]
        final = ref.states[-1]
        scale = max(abs(v) for v in final.ravel())
        assert all(lo[j, q] <= final[j, q] <= hi[j, q] for j, q in np.ndindex(final.shape))
        assert max(hi[j, q] - lo[j, q] for j, q in np.ndindex(final.shape)) <= 1e-12 * scale


# -- a wrong log is rejected with the reason ----------------------------------------------------------------------

def _with_log(res, **changes):
    """``res`` with its event log's columns replaced (``t``, ``kind``, ``neuron``, ``sample``, ``side``)."""
    log = res.events
    columns = {"t": log.t, "kind": log.kind, "neuron": log.neuron, "sample": log.sample, "side": log.side,
               "multiplier": log.multiplier}
    columns.update(changes)
    return dataclasses.replace(res, events=EventLog(**columns))


@pytest.fixture(scope="module")
def crossing_run():
    """B1-os to t = 0.5: one crossing (neuron 1, sample 1, t = 0.1697...)."""
    prob, p0 = examples.os_logistic(m=6, n=8, d=3, scale=1e-2, seed=11)
    res = fl.gradient_flow(prob, p0, t_end=0.5)
    assert [(e.kind, e.neuron, e.sample) for e in res.events] == [("cross", 1, 1)]
    return res


@pytest.fixture(scope="module")
def sliding_run():
    prob, p0 = examples.sliding_two_points()
    return fl.gradient_flow(prob, p0, t_end=3.0)


def test_a_removed_crossing_is_rejected(crossing_run):
    cert = fl.certify(_with_log(crossing_run, t=[], kind=np.array([], dtype=np.int8), neuron=[], sample=[], side=[],
                                multiplier=[]))
    assert cert.status == "rejected"
    assert "cross of neuron 1 on sample 1" in cert.reason and "log does not have" in cert.reason
    # what came before the disagreement stays proven
    assert 0.16 < cert.t_certified[0] < 0.17


def test_a_perturbed_event_time_is_rejected(crossing_run, sliding_run):
    for res in (crossing_run, sliding_run):
        assert fl.certify(res).certified
        cert = fl.certify(_with_log(res, t=res.events.t + 1e-6))
        assert cert.status == "rejected" and "outside the proven enclosure" in cert.reason


def test_a_slide_relabelled_as_a_crossing_is_rejected(sliding_run):
    cert = fl.certify(_with_log(sliding_run, kind=["cross"], side=[-1], multiplier=[float("nan")]))
    assert cert.status == "rejected"
    assert "slide_start of neuron 0 on sample 1" in cert.reason and "the log has a cross" in cert.reason


def test_a_crossing_that_never_happens_is_rejected(sliding_run):
    log = sliding_run.events
    cert = fl.certify(_with_log(sliding_run, t=np.append(log.t, 2.5), kind=["slide_start", "cross"],
                                neuron=[0, 0], sample=[1, 0], side=[0, -1],
                                multiplier=np.append(log.multiplier, np.nan)))
    assert cert.status == "rejected" and "does not happen" in cert.reason


def test_a_tie_in_the_log_is_undecided_not_certified(sliding_run):
    cert = fl.certify(_with_log(sliding_run, kind=["tie"]))
    assert cert.status == "undecided" and "tie" in cert.reason


def test_a_start_on_a_surface_is_undecided():
    prob = fl.Problem(X=[[1.0, 1.0], [1.0, -1.0]], y=[1.0, -1.0], loss="logistic", bias=False, train_outer=True)
    res = fl.gradient_flow(prob, fl.Params(W=[[1.0, -1.0]], b=None, a=[0.5]), t_end=1.0)
    cert = fl.certify(res)
    assert cert.status == "undecided" and "starts on the surface of sample 0" in cert.reason
    assert cert.t_certified == (0, 0) and not cert.events


# -- the API ------------------------------------------------------------------------------------------------------

def test_certify_restores_python_flints_context_and_reports(sliding_run):
    before = (flint.ctx.prec, flint.ctx.cap)
    cert = fl.certify(sliding_run, prec=160, order=30)
    assert (flint.ctx.prec, flint.ctx.cap) == before
    assert cert.prec == 160 and cert.order == 30 and cert.n_steps > 0
    assert "certified" in repr(cert) and "slide_start" in cert.summary()
    assert cert.widths["events"] < 1e-40


@pytest.mark.parametrize("kwargs, name", [({"prec": 32}, "prec"), ({"prec": True}, "prec"), ({"order": 2}, "order"),
                                          ({"time_tol": 0.0}, "time_tol"), ({"max_steps": 0}, "max_steps"),
                                          ({"times": [-1.0]}, "times"), ({"times": ["x"]}, "times")])
def test_bad_arguments_name_themselves(sliding_run, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fl.certify(sliding_run, **kwargs)
    with pytest.raises(ValueError, match="result"):
        fl.certify("not a result")


def test_a_step_budget_ends_undecided_with_the_time_reached(sliding_run):
    cert = fl.certify(sliding_run, max_steps=2)
    assert cert.status == "undecided" and "max_steps" in cert.reason
    assert 0 < cert.t_certified[0] < 3.0


# -- the validation report's certified variants --------------------------------------------------------------------

def test_certified_variants_agree_with_a_right_reference_and_not_with_a_wrong_one(sliding_run):
    from flowlib.validation import certified

    with mp.workdps(DPS):
        hit = fl.gradient_flow(*examples.sliding_two_points(), t_end=3.0, dps=DPS).events.t[0]
        text, ok, data = certified.hit_time(sliding_run, hit, 1e-30)
        assert ok and text.startswith("certified") and data["closed_form_offset"] < 1e-30
        assert not certified.hit_time(sliding_run, hit + mpf("1e-20"), 1e-30)[1]
    prob, p0 = examples.gd_rate_network(0.3, 0.8, -0.2, 0.4)
    res = fl.gradient_flow(prob, p0, t_end=10.0)
    with mp.workdps(DPS):
        kinks = two_block_closed_form((0.3, 0.8, -0.2, 0.4), 10.0)[2]
    text, ok, _ = certified.kink_times(res, kinks)
    assert ok and "the enclosures hold the closed-form kink times" in text
    with mp.workdps(DPS):
        assert not certified.kink_times(res, {k: v * (1 + mpf("1e-25")) for k, v in kinks.items()})[1]


# -- random small problems: never a crash, never a rejected log of flowlib's own flow, every certificate right -----

def _random_problem(seed: int):
    """A small random problem of any loss, activation, bias and trained outer layer (the stress family)."""
    rng = np.random.default_rng(seed)
    n, d, m = rng.integers(2, 6), rng.integers(1, 4), rng.integers(1, 4)
    loss = ["exp", "logistic", "square"][seed % 3]
    leak = [0.0, 0.2][(seed // 3) % 2]
    bias, outer = bool(rng.integers(0, 2)), bool(rng.integers(0, 2))
    X = rng.standard_normal((n, d))
    y = np.where(rng.standard_normal(n) >= 0, 1.0, -1.0) if loss != "square" else rng.standard_normal(n)
    prob = fl.Problem(X, y, loss=loss, reduction="mean", activation="leaky_relu" if leak else "relu", leak=leak,
                      bias=bias, train_outer=outer)
    return prob, fl.Params(W=rng.standard_normal((m, d)), b=rng.standard_normal(m) if bias else None,
                           a=rng.standard_normal(m))


@pytest.mark.slow
def test_random_small_flows_are_certified_right_or_stop_undecided():
    statuses = []
    for seed in range(12):
        prob, p0 = _random_problem(seed)
        res = fl.gradient_flow(prob, p0, t_end=4.0)
        cert = fl.certify(res, max_steps=3000)
        statuses.append(cert.status)
        assert cert.status in ("certified", "undecided"), (seed, cert.reason)
        if cert.status != "certified":
            continue
        ref = fl.gradient_flow(prob, p0, t_end=4.0, dps=DPS)
        assert sorted((e.kind, e.neuron, e.sample) for e in cert.events) == \
            sorted((e.kind, e.neuron, e.sample) for e in ref.events), seed
        with mp.workdps(DPS):
            times = {(e.neuron, e.sample, e.kind): t for e, t in zip(ref.events, ref.events.t)}
            assert all(_inside(times[(e.neuron, e.sample, e.kind)], e.t) for e in cert.events), seed
            lo, hi = cert.states[-1]
            assert all(lo[j, q] <= ref.states[-1][j, q] <= hi[j, q] for j, q in np.ndindex(lo.shape)), seed
    assert statuses.count("certified") >= 10


def test_crossing_a_hyperplane_that_two_samples_share():
    """One dimension, no bias: the surfaces of both samples are w = 0, crossed at one instant (proportional
    switching functions, one proven zero), and the log's two crossings at that instant match."""
    prob, p0 = _random_problem(11)
    assert prob.d == 1 and not prob.bias
    res = fl.gradient_flow(prob, p0, t_end=4.0)
    ref = fl.gradient_flow(prob, p0, t_end=4.0, dps=DPS)
    cert = fl.certify(res)
    assert cert.status == "certified", cert.reason
    assert [(e.kind, e.neuron, e.sample) for e in cert.events] == [("cross", 0, 0), ("cross", 0, 1)]
    assert cert.events[0].t == cert.events[1].t
    with mp.workdps(DPS):
        assert all(_inside(t, cert.events[0].t) for t in ref.events.t)


def test_the_command_line_certifies_a_saved_flow(sliding_run, tmp_path, capsys):
    from flowlib.cli import main

    path = sliding_run.save(tmp_path / "v12.npz")
    assert main(["certify", str(path), "--times", "1.0", "3.0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("certificate: certified to t = 3") and "slide_start neuron 0 sample 1" in out
    assert main(["certify", str(path), "--time-tol", "1e-30"]) == 1  # the float64 log's time is off by ~1e-16
    assert "rejected" in capsys.readouterr().out
    assert main(["certify", str(path), "--prec", "8"]) == 2
    assert "prec must be" in capsys.readouterr().err


def test_progress_reaches_the_callback_and_a_true_return_stops_the_walk(sliding_run):
    seen = []
    cert = fl.certify(sliding_run, callback=seen.append)
    assert cert.certified and len(seen) == cert.n_steps - 1 and {p.kind for p in seen} == {"certify"}
    assert all(0 < p.done < p.total == 3.0 for p in seen) and seen[-1].events == 1
    stopped = fl.certify(sliding_run, callback=lambda progress: progress.steps >= 3)
    assert stopped.status == "interrupted" and stopped.n_steps == 3 and 0 < stopped.t_certified[0] < 3.0
    with pytest.raises(ValueError, match="callback"):
        fl.certify(sliding_run, callback=42)


def test_a_crossing_that_releases_a_held_surface_at_the_same_instant():
    """Neuron 0 slides on sample 2's hyperplane when it crosses sample 0's at t = 1.80798...: the crossing changes
    one slope, the held multiplier jumps out of [leak, 1], and the surface is released at that instant (both
    backends log a cross and a slide_end there). A walk that kept holding it would follow a multiplier outside the
    box: not a solution of the inclusion."""
    prob, p0 = _random_problem(76)
    res = fl.gradient_flow(prob, p0, t_end=4.0)
    ref = fl.gradient_flow(prob, p0, t_end=4.0, dps=DPS)
    cert = fl.certify(res)
    assert cert.status == "certified", cert.reason
    kinds = [(e.kind, e.neuron, e.sample) for e in cert.events]
    assert kinds[-2:] == [("cross", 0, 0), ("slide_end", 0, 2)] and cert.events[-1].side == -1
    assert kinds == [(e.kind, e.neuron, e.sample) for e in ref.events]
    with mp.workdps(DPS):
        assert all(_inside(t, e.t) for e, t in zip(cert.events, ref.events.t))
        lo, hi = cert.states[-1]
        assert all(lo[j, q] <= ref.states[-1][j, q] <= hi[j, q] for j, q in np.ndindex(lo.shape))
        # while held, the multiplier stayed inside the box
        start = cert.events[1]
        assert prob.leak < start.multiplier_range[0] and start.multiplier_range[1] < 1


def test_a_held_neuron_whose_outer_weight_passes_through_zero():
    """Neuron 2 slides on sample 0's hyperplane from t = 0.2459 while its trained outer weight a_2 goes from 0.129
    through 0 (t ~ 0.54) to -0.27: the multiplier's system has the factor a_2 on both sides and is solved with it
    cancelled, so the walk goes through (it stalled there before) and encloses the 50-digit flow."""
    prob, p0 = _random_problem(69)
    res = fl.gradient_flow(prob, p0, t_end=4.0)
    assert p0.a[2] > 0 > res.final.a[2]
    ref = fl.gradient_flow(prob, p0, t_end=4.0, dps=DPS)
    cert = fl.certify(res)
    assert cert.status == "certified", cert.reason
    assert [(e.kind, e.neuron, e.sample) for e in cert.events] == [("slide_start", 2, 0)]
    with mp.workdps(DPS):
        assert _inside(ref.events.t[0], cert.events[0].t)
        lo, hi = cert.states[-1]
        assert all(lo[j, q] <= ref.states[-1][j, q] <= hi[j, q] for j, q in np.ndindex(lo.shape))


def test_a_taylor_model_is_finite_on_balls_that_reach_a_hair_below_zero():
    """A step-time ball spanned from 0 reaches slightly below 0 (the radius carries ~30 bits), and a ball centred
    at 0 has no finite power in python-flint: the model takes the nonnegative part, and encloses g exactly there."""
    from flowlib.certify.balls import span, working
    from flowlib.certify.models import TaylorModel

    with working(128, 8):
        arb = flint.arb
        model = TaylorModel((arb(1), arb(2), arb(3)), arb(5))  # 1 + 2 s + 3 s^2 + [5] s^3
        for s in (arb(0, 1e-3), span(arb(0), arb(0.5))):
            assert s.lower() < 0 and model.value(s).is_finite() and model.value(s, 1).is_finite()
        value = model.value(arb(0.5))
        assert value.contains(arb(1) + 1 + arb(3) / 4 + arb(5) / 8)
