"""The arbitrary-precision flow (``gradient_flow(..., dps=N)``, :mod:`flowlib.mp`).

References: the seed-000 closed form (Smorodinsky et al.; ``tests/test_nonsmooth.py``) through
both kink events, the E1 sliding closed form (``tests.oracles.exact.e1_exact``), and the float64 engine.
"""

import mpmath as mp
import numpy as np
import pytest

import flowlib as fl
from flowlib import examples
from test_nonsmooth import SEED000_INITS, e1_exact, e1_problem, seed000_exact


def _relative(got, exact):
    scale = max(abs(v) for v in exact)
    return max(abs(g - e) for g, e in zip(got, exact)) / scale


def _seed000_check(theta0, dps=50, t_end=1000):
    prob, p0 = examples.gd_rate_network(*theta0)
    res = fl.gradient_flow(prob, p0, t_end, dps=dps, t_eval=[3.0])
    assert res.status == "success" and res.dps == dps
    with mp.workdps(dps + 10):
        _, kinks = seed000_exact(theta0, 0)
        for t, packed in [(3, res.states_eval[0]), (t_end, res.states[-1])]:
            exact, _ = seed000_exact(theta0, t)
            got = [packed[0, 0], packed[0, 1], packed[1, 0], packed[1, 1]]
            assert _relative(got, exact) <= mp.mpf("1e-40"), t
        # v1 = 0 is neuron 0 on sample 0, u2 = 0 neuron 1 on sample 1; both stick, at the closed-form times
        assert [e.kind for e in res.events] == ["stick"] * len(kinks)
        for e in res.events:
            t_ref = kinks["v" if e.neuron == 0 else "u"]
            assert abs(e.t - t_ref) <= mp.mpf("1e-40") * t_ref
    return res


def test_seed000_closed_form_through_both_kinks_at_50_digits():
    res = _seed000_check((2.0, 3.0, -2.0, 3.1))
    assert res.n_events == 2


@pytest.mark.slow
@pytest.mark.parametrize("theta0", SEED000_INITS[1:])
def test_seed000_closed_form_other_initialisations(theta0):
    _seed000_check(theta0)


def test_e1_sliding_at_50_digits():
    prob, p0 = e1_problem()
    res = fl.gradient_flow(prob, p0, 10.0, dps=50)
    assert res.status == "success"
    assert [(e.kind, e.neuron, e.sample) for e in res.events] == [("slide_start", 0, 0)]
    with mp.workdps(60):
        exact, t_star = e1_exact(mp.mpf(10))
        assert abs(res.events[0].t - t_star) <= mp.mpf("1e-45") * t_star
        assert abs(res.states[-1][0, 0]) <= mp.mpf("1e-45")
        assert abs(res.states[-1][0, 1] - exact[1]) <= mp.mpf("1e-45")
    assert res.energy_residual <= 1e-45


def test_e1_caratheodory_stops_at_the_hit_at_30_digits():
    prob, p0 = e1_problem()
    res = fl.gradient_flow(prob, p0, 10.0, dps=30, solution="caratheodory")
    assert res.status == "no_caratheodory_solution"
    with mp.workdps(40):
        _, t_star = e1_exact(mp.mpf(1))
        assert abs(res.t[-1] - t_star) <= mp.mpf("1e-25")


def random_problem(seed):
    """Small random problems (the generator of the property tests, without the degenerate geometries)."""
    rng = np.random.default_rng(seed)
    n, d, m = rng.integers(2, 5), rng.integers(1, 3), rng.integers(1, 4)
    loss = ["exp", "logistic", "square"][rng.integers(3)]
    leak = [0.0, 0.1][rng.integers(2)]
    bias, train_outer = bool(rng.integers(2)), bool(rng.integers(2))
    X = rng.standard_normal((n, d))
    W = rng.standard_normal((m, d)) * 0.5
    b = rng.standard_normal(m) * 0.3 if bias else None
    a = rng.standard_normal(m)
    y = np.sign(rng.standard_normal(n)) if loss != "square" else rng.standard_normal(n)
    prob = fl.Problem(X, y, loss=loss, reduction="mean", activation="leaky_relu" if leak else "relu", leak=leak,
                      bias=bias, train_outer=train_outer)
    return prob, fl.Params(W=W, b=b, a=a)


#: seeds of :func:`random_problem` whose flow on [0, 5] slides, sticks or ties (found with the float64 engine)
NONSMOOTH_SEEDS = [4, 13, 14, 15, 16, 20, 23, 39]
FAST_SEEDS = [14, 16]


def _agreement(seed):
    prob, p0 = random_problem(seed)
    r64 = fl.gradient_flow(prob, p0, 5.0)
    r30 = fl.gradient_flow(prob, p0, 5.0, dps=30)
    r60 = fl.gradient_flow(prob, p0, 5.0, dps=60)
    kinds = {e.kind for e in r64.events}
    assert kinds & {"slide_start", "stick", "tie"}, "the case must exercise a nonsmooth event"
    assert r30.status == r60.status == r64.status == "success"
    ids = [[(e.kind, e.neuron, e.sample, e.side) for e in r.events] for r in (r64, r30, r60)]
    assert ids[0] == ids[1] == ids[2]
    with mp.workdps(60):
        final = r60.states[-1].ravel()
        assert _relative(r30.states[-1].ravel(), final) <= mp.mpf("1e-25")
        for e30, e60 in zip(r30.events, r60.events):
            assert abs(e30.t - e60.t) <= mp.mpf("1e-25") * max(1, abs(e60.t))
    final64 = r60.float64("states")[-1]
    assert np.max(np.abs(r64.states[-1] - final64)) <= 1e-12 * np.max(np.abs(final64))


@pytest.mark.parametrize("seed", FAST_SEEDS)
def test_30_and_60_digits_agree_with_each_other_and_float64(seed):
    _agreement(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", sorted(set(NONSMOOTH_SEEDS) - set(FAST_SEEDS)))
def test_30_and_60_digits_agree_on_more_nonsmooth_problems(seed):
    _agreement(seed)


def test_dense_output_save_load_and_precision_hygiene(tmp_path):
    prob, p0 = e1_problem()
    before = mp.mp.prec
    res = fl.gradient_flow(prob, p0, 10.0, dps=40, t_eval=[1.0, 5.0])
    assert mp.mp.prec == before  # never global precision
    with mp.workdps(40):
        # dense output at full precision, strings taken exactly
        at = res.states_at(["5", 2.0])
        assert all(a == b for a, b in zip(at[0].ravel(), res.states_eval[1].ravel()))
        exact, _ = e1_exact(mp.mpf(2))
        assert abs(at[1][0, 1] - exact[1]) <= mp.mpf("1e-35")
        assert isinstance(res.loss_at(2.0), mp.mpf)
    assert isinstance(res.params_at(2.0).W[0, 0], np.floating)
    back = fl.load(res.save(tmp_path / "e1"))
    assert back.dps == 40
    for name in ("t", "states", "loss", "energy", "coefficients", "t_eval", "states_eval"):
        a, b = getattr(res, name), getattr(back, name)
        assert a.shape == b.shape and all(x == y for x, y in zip(a.ravel(), b.ravel())), name
    assert back.events == res.events
    assert "mpmath, 40 digits" in res.summary()


def test_final_parameters_of_an_mpmath_run_are_its_state_rounded_to_float64():
    """``final`` (and what reads it: ``to_torch``, ``params_at`` of a run without steps) is the last mpf state
    rounded to nearest, each entry within half an ulp of the 40-digit value, with the signs of negative weights."""
    prob, p0 = examples.three_points(8)[:2]
    res = fl.gradient_flow(prob, p0, 0.5, dps=40)
    final = res.final
    with mp.workdps(40):
        last = res.states[-1]
        for j in range(8):
            for q, value in enumerate((final.W[j, 0], final.b[j], final.a[j])):
                exact = last[j, q]
                assert abs(mp.mpf(float(value)) - exact) <= abs(exact) * mp.mpf(2) ** -53
    assert (final.W < 0).any() and final.W.dtype == np.float64
    np.testing.assert_allclose(fl.predict(final, prob.X, problem=prob), fl.predict(res, prob.X).astype(float),
                               rtol=1e-14)
    still = fl.gradient_flow(prob, p0, 0.0, dps=30)
    assert still.n_steps == 0 and np.array_equal(still.params_at(0.0).W, p0.W)


def test_the_time_reached_as_a_float_names_the_end_of_an_mpmath_run():
    """In the log clock a 30-digit run ends at ``t = expm1(3)``, whose float64 (``t_final``) lies above it: that
    float still names the end (the last state exactly, its loss to rounding), and any other float beyond it is
    refused."""
    prob, p0 = examples.os_logistic()[:2]
    res = fl.gradient_flow(prob, p0, log_t_end=3.0, dps=30)
    with mp.workdps(30):
        assert res.t_final > res.t[-1]  # the case this test is about
    reached, final = res.params_at(res.t_final), res.final
    assert np.array_equal(reached.W, final.W) and np.array_equal(reached.a, final.a)
    at = res.states_at(np.array([0.0, res.t_final]))
    assert all(a == b for a, b in zip(at[1].ravel(), res.states[-1].ravel()))
    assert all(a == b for a, b in zip(at[0].ravel(), res.states[0].ravel()))
    with mp.workdps(30):
        assert abs(res.loss_at(res.t_final) - res.loss[-1]) <= mp.mpf("1e-28") * res.loss[-1]
    with pytest.raises(ValueError, match="interval the run covered"):
        res.params_at(np.nextafter(res.t_final, np.inf))


@pytest.mark.parametrize("kwargs, name", [({"dps": 10}, "dps"), ({"dps": 2.5}, "dps"), ({"dps": True}, "dps"),
                                          ({"dps": 30, "rtol": 1e-40}, "rtol"), ({"dps": 30, "rtol": "x"}, "rtol"),
                                          ({"dps": 30, "rtol": 0.1}, "rtol")])
def test_bad_precision_arguments_name_themselves(kwargs, name):
    prob, p0 = e1_problem()
    with pytest.raises(ValueError, match=name):
        fl.gradient_flow(prob, p0, 1.0, **kwargs)


def test_budgets_and_callback_stop_the_mpmath_run():
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    res = fl.gradient_flow(prob, p0, 1000.0, dps=30, max_steps=3)
    assert res.status == "max_steps" and res.n_steps == 3
    res = fl.gradient_flow(prob, p0, 1000.0, dps=30, callback=lambda progress: progress.steps >= 2)
    assert res.status == "interrupted" and res.n_steps == 2


def test_decision_boundary_beyond_float64():
    """Seed 000 from (2, 3, -2, 3.1): x*(t) = (b2 - b1) / (w1 - w2) ~ K / (t ln t) cancels ~16 digits by
    t = 1e14 (float64 keeps only ~9% there, README); 40 digits keep it to 1e-20 (against the closed form)."""
    from benchmarks.float64_limit import THETA0, boundary, exact_state

    prob, p0 = examples.gd_rate_network(*THETA0)
    res = fl.gradient_flow(prob, p0, 1e14, dps=40)
    assert res.status == "success" and res.n_steps < 400
    s = res.states[-1]
    with mp.workdps(60):
        exact = boundary(*exact_state(1e14))
        assert abs(boundary(s[0, 0], s[0, 1], s[1, 0], s[1, 1]) - exact) <= mp.mpf("1e-20") * exact


def test_a_run_leaves_the_garbage_collector_as_it_found_it():
    # the run pauses the collector and sets each step's objects aside (gc.freeze), then gives them back to the
    # oldest generation: the collector is on again and nothing stays frozen; where objects were frozen before the
    # run (as before a fork), they stay frozen; where the collector was off, it stays off; the numbers are the same
    import gc

    prob, p0 = examples.three_points(5)
    start = gc.get_freeze_count()  # 0, unless the launcher froze objects itself
    reference = fl.gradient_flow(prob, p0, 5.0, dps=20)
    assert reference.status == "success" and reference.n_steps > 3
    assert gc.isenabled() and gc.get_freeze_count() == start
    kept = [[object()] for _ in range(100)]
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        again = fl.gradient_flow(prob, p0, 5.0, dps=20)
        assert gc.isenabled() and gc.get_freeze_count() == before
    finally:
        gc.unfreeze()
    gc.disable()
    try:
        off = fl.gradient_flow(prob, p0, 5.0, dps=20)
        assert not gc.isenabled() and gc.get_freeze_count() == start
    finally:
        gc.enable()
    for other in (again, off):
        assert np.array_equal(other.states, reference.states) and np.array_equal(other.t, reference.t)
    assert len(kept) == 100
