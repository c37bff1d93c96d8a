"""``flowlib.ensemble``: every member equals the serial run, bit for bit; the stop rule; streaming and resuming;
Dask; saving."""

from __future__ import annotations

import numpy as np
import pytest

import flowlib as fl
from flowlib import examples
from flowlib.flow import kernel_network
from flowlib.kernels import constants as kconst, driver

HE_RULE = fl.Until(loss_below=0.5, linear=[[1, 1, 0], [1, -1, 0]], tol=1e-3, deadline=1e4 * 0.05)


def _seed000(count, seed=6):
    prob, _ = examples.gd_rate_network(1.0, 0.0, -1.0, 0.0)
    return prob, fl.random_inits(prob, m=2, count=count, scheme="he", a=[1.0, -1.0], bias=0.0, seed=seed)


def _functional(P):
    return P[..., 0, 0] + P[..., 0, 1] + P[..., 1, 0] - P[..., 1, 1]


def test_he_inits_are_the_papers_draws():
    """Section 6 of seed 000: w1, w2 ~ N(0, 2), b = 0, a = (1, -1); drawn in the order of the validation claim."""
    _, inits = _seed000(50)
    w = np.random.default_rng(6).normal(0.0, np.sqrt(2.0), size=(50, 2))
    assert np.array_equal(inits[:, :, 0], w)
    assert np.all(inits[:, :, 1] == 0.0) and np.all(inits[:, :, 2] == [1.0, -1.0])


def test_gd_members_equal_serial_descent():
    prob, p0 = examples.three_points(4, 1e-1, seed=3)
    inits = fl.random_inits(prob, m=4, count=5, scheme="normal", scale=0.5, seed=2)
    ens = fl.ensemble(prob, inits, "gd", lr=0.05, steps=300, chunk_size=2)
    assert ens.counts() == {"success": 5}
    for r in range(5):
        ref = fl.gradient_descent(prob, ens.params(r, "init"), 0.05, 300)
        assert np.array_equal(ens.final[r], ref.states[-1])
        assert ens.loss[r] == ref.loss[-1]
        assert ens.events[r] == ref.n_flips
        assert ens.steps[r] == 300 and ens.t[r] == 300 * 0.05


def test_flow_members_equal_serial_flow():
    prob, p0 = examples.os_logistic(m=6, n=8, d=3, scale=1e-2, seed=11)
    inits = np.stack([p0.packed() * s for s in (1.0, 0.7, 1.3)])
    ens = fl.ensemble(prob, inits, "flow", t_end=10.0)
    for r in range(3):
        ref = fl.gradient_flow(prob, ens.params(r, "init"), 10.0, dense_output=False)
        assert np.array_equal(ens.final[r], ref.states[-1])
        assert ens.loss[r] == ref.loss[-1] and ens.t[r] == 10.0
        assert ens.steps[r] == ref.n_steps and ens.events[r] == ref.n_events > 0
        kinds = [ev.kind for ev in ref.events]
        assert list(ens.event_counts[r]) == [kinds.count(k) for k in fl.ensemble_result.EVENT_COLUMNS]
        # each member certifies itself with the diagnostics of the serial run
        assert ens.inclusion_residual[r] == ref.inclusion_residual
        assert abs(ens.energy_residual[r] - ref.energy_residual) <= 1e-15 and ens.energy_residual[r] <= 1e-14


def test_member_energy_residuals_are_the_serial_runs():
    """At rtol = 1e-5 the energy identity is off by a measurable amount: each member reports the serial run's."""
    prob, p0 = examples.os_logistic(m=6, n=8, d=3, scale=1e-2, seed=11)
    inits = np.stack([p0.packed() * s for s in (1.0, 0.7, 1.3)])
    ens = fl.ensemble(prob, inits, "flow", t_end=10.0, rtol=1e-5)
    for r in range(3):
        ref = fl.gradient_flow(prob, ens.params(r, "init"), 10.0, rtol=1e-5, dense_output=False)
        assert ref.energy_residual > 1e-12
        assert ens.energy_residual[r] == pytest.approx(ref.energy_residual, rel=1e-6)
    assert "largest energy-identity residual" in ens.summary()
    gd = fl.ensemble(prob, inits, "gd", lr=0.05, steps=10)
    assert np.all(np.isnan(gd.energy_residual)) and np.all(np.isnan(gd.inclusion_residual))


def test_flow_members_slide_like_the_serial_flow():
    prob, p0 = examples.sliding_two_points(1e-3)
    ens = fl.ensemble(prob, p0.packed()[None], "flow", t_end=20.0)
    ref = fl.gradient_flow(prob, p0, 20.0, dense_output=False)
    assert np.array_equal(ens.final[0], ref.states[-1])
    assert ens.event_counts[0, kconst.EVENT_SLIDE_START] == 1


def test_gd_stop_rule_reproduces_the_validation_trials():
    """The validation claim 000-he-init finds each trial's first iterate with L < 0.5 and |w1 + w2 + b1 - b2| <=
    1e-3 by its own search; the ensemble's stop rule gives the same iterate and state, bit for bit."""
    from flowlib.validation.seed000_gd_rate import he_trial

    prob, inits = _seed000(24)
    ens = fl.ensemble(prob, inits, "gd", lr=0.05, steps=10**9, until=HE_RULE)
    for r in range(24):
        trial = he_trial(inits[r, 0, 0], inits[r, 1, 0])
        assert (ens.status[r] == "reached") == trial["success"]
        if trial["success"]:
            assert ens.steps[r] == trial["k"]
            assert abs(_functional(ens.final[r])) <= 1e-3 < abs(_functional(inits[r]))
        else:
            assert ens.status[r] == "deadline" and ens.steps[r] == 10**4


def test_flow_stop_rule_is_located_inside_the_step():
    """Paper 000, Section 6 with the flow: success exactly in the quadrant w2 < 0 < w1; the stop point is where
    |g| first reaches 1e-3, with g the Theorem 5.2 quantity w1 + w2 + b1 - b2 (a serial flow to that time agrees)."""
    prob, inits = _seed000(60)
    ens = fl.ensemble(prob, inits, "flow", t_end=1e7, until=HE_RULE)
    quadrant = (inits[:, 1, 0] < 0) & (inits[:, 0, 0] > 0)
    assert np.array_equal(ens.status == "reached", quadrant)
    assert np.all(ens.status[~quadrant] == "deadline") and np.all(ens.loss[~quadrant] >= 0.5)
    g = _functional(ens.final[quadrant])  # the kernel's Horner value is <= 1e-3; this sum of 4 terms rounds again
    assert np.all(np.abs(np.abs(g) - 1e-3) <= 1e-13)
    r = int(np.flatnonzero(quadrant)[0])
    ref = fl.gradient_flow(prob, ens.params(r, "init"), ens.t[r], dense_output=False)
    assert np.max(np.abs(ref.states[-1] - ens.final[r])) <= 1e-12 * np.max(np.abs(ens.final[r]))
    # the energy of the last, partial step is integrated to the stop point
    assert np.all(ens.energy_residual <= 1e-12) and abs(ens.energy_residual[r] - ref.energy_residual) <= 1e-13


def test_flow_loss_threshold_stops_at_the_first_step_below_it():
    """With a loss threshold alone a member stops at the start of the first step whose loss is below it (the
    kernel then keeps only each step's starting state): that step of the serial flow, bit for bit."""
    prob, p0 = examples.os_logistic(m=6, n=8, d=3, scale=1e-2, seed=11)
    inits = np.stack([p0.packed() * s for s in (1.0, 1.3)])
    full = [fl.gradient_flow(prob, fl.Params.unpacked(P, prob.bias), 10.0, dense_output=False) for P in inits]
    threshold = 0.5 * (full[0].loss[0] + full[0].loss[-1])
    ens = fl.ensemble(prob, inits, "flow", t_end=10.0, until=fl.Until(loss_below=threshold))
    for r, ref in enumerate(full):
        q = int(np.argmax(ref.loss < threshold))
        assert 0 < q < ref.n_steps and ens.status[r] == "reached"
        assert np.array_equal(ens.final[r], ref.states[q]) and ens.t[r] == ref.t[q] and ens.steps[r] == q
        # a member's loss is evaluated at its final state, the serial log's from the step's Taylor outputs: the
        # same number up to the order of a sum
        net = kernel_network(prob)
        at_state = driver.loss_along(net.Xa, net.y, net.loss_kind, net.c, net.leak, net.bias, net.train_outer,
                                     net.decay, ref.states[q:q + 1].copy(), False)[0]
        assert ens.loss[r] == at_state and abs(ens.loss[r] - ref.loss[q]) <= 4e-16 * ref.loss[q]


def test_flow_and_gd_hitting_times_agree_to_order_lr():
    """k lr of GD (lr = 0.05) against the flow's stop time: the same quantity up to O(lr)."""
    prob, inits = _seed000(40)
    gd = fl.ensemble(prob, inits, "gd", lr=0.05, steps=10**9, until=HE_RULE)
    flow = fl.ensemble(prob, inits, "flow", t_end=1e7, until=HE_RULE)
    ok = gd.status == "reached"
    assert ok.any() and np.array_equal(ok, flow.status == "reached")
    assert np.max(np.abs(flow.t[ok] / gd.t[ok] - 1.0)) < 0.05


def test_members_of_several_problems():
    prob_a, p0 = examples.os_logistic(m=3, n=6, d=2, scale=1e-1, seed=1)
    prob_b = fl.Problem(prob_a.X, -prob_a.y, loss=prob_a.loss, reduction=prob_a.reduction, bias=prob_a.bias,
                        train_outer=prob_a.train_outer)
    inits = np.stack([p0.packed()] * 4)
    ens = fl.ensemble([prob_a, prob_b, prob_a, prob_b], inits, "flow", t_end=3.0)
    assert len(ens.problems) == 2 and list(ens.problem_index) == [0, 1, 0, 1]
    for r, prob in enumerate([prob_a, prob_b]):
        ref = fl.gradient_flow(prob, p0, 3.0, dense_output=False)
        assert np.array_equal(ens.final[r], ref.states[-1]) and np.array_equal(ens.final[r + 2], ref.states[-1])


def test_interrupted_ensemble_resumes_with_identical_results(tmp_path):
    prob, inits = _seed000(40)
    whole = fl.ensemble(prob, inits, "gd", lr=0.05, steps=30_000, until=HE_RULE, chunk_size=8)
    out = tmp_path / "run"
    part = fl.ensemble(prob, inits, "gd", lr=0.05, steps=30_000, until=HE_RULE, chunk_size=8, out=out,
                       callback=lambda progress: progress.done >= 16)
    assert not part.complete and part.counts()["pending"] == 24 and np.all(part.done[:16])
    assert len(list(out.glob("chunk_*.npz"))) == 2
    on_disk = fl.load(out)
    assert not on_disk.complete and np.array_equal(on_disk.final[:16], whole.final[:16])
    calls = []
    rest = fl.ensemble(prob, inits, "gd", lr=0.05, steps=30_000, until=HE_RULE, chunk_size=8, out=out,
                       callback=lambda progress: calls.append(progress.done))
    assert calls == [24, 32, 40]  # the two finished chunks were read back, not recomputed
    assert rest.complete
    for name in fl.ensemble_result.MEMBER_ARRAYS:
        assert np.array_equal(getattr(rest, name), getattr(whole, name), equal_nan=True), name
    with pytest.raises(ValueError, match="out"):
        fl.ensemble(prob, inits, "gd", lr=0.04, steps=30_000, until=HE_RULE, chunk_size=8, out=out)


def test_save_and_load(tmp_path):
    prob, inits = _seed000(6)
    ens = fl.ensemble(prob, inits, "flow", t_end=100.0, until=HE_RULE)
    back = fl.load(ens.save(tmp_path / "ens"))
    assert isinstance(back, fl.EnsembleResult) and back.method == "flow"
    assert back.problem.to_dict() == ens.problem.to_dict() and back.options == ens.options
    for name in fl.ensemble_result.MEMBER_ARRAYS:
        assert np.array_equal(getattr(back, name), getattr(ens, name), equal_nan=True)
    assert list(back.status) == list(ens.status)


@pytest.mark.slow
def test_dask_local_cluster_gives_the_same_arrays():
    distributed = pytest.importorskip("dask.distributed", reason="the dask extra is not installed")
    prob, inits = _seed000(48)
    local = fl.ensemble(prob, inits, "flow", t_end=1e7, until=HE_RULE, chunk_size=6)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = fl.ensemble(prob, inits, "flow", t_end=1e7, until=HE_RULE, chunk_size=6, client=client)
        remote_gd = fl.ensemble(prob, inits, "gd", lr=0.05, steps=20_000, until=HE_RULE, chunk_size=6,
                                client=client)
    local_gd = fl.ensemble(prob, inits, "gd", lr=0.05, steps=20_000, until=HE_RULE, chunk_size=6)
    for name in fl.ensemble_result.MEMBER_ARRAYS:
        assert np.array_equal(getattr(remote, name), getattr(local, name), equal_nan=True), name
        assert np.array_equal(getattr(remote_gd, name), getattr(local_gd, name), equal_nan=True), name


@pytest.mark.parametrize("kwargs, name", [
    (dict(method="newton", t_end=1.0), "method"),
    (dict(method="gd", lr=-1.0, steps=10), "lr"),
    (dict(method="gd", lr=0.1, steps=0), "steps"),
    (dict(method="flow", t_end=1.0, lr=0.1), "lr"),
    (dict(method="flow", t_end=1.0, until="L < 0.5"), "until"),
    (dict(method="flow", t_end=1.0, chunk_size=0), "chunk_size"),
    (dict(method="flow", t_end=1.0, client=42), "client"),
    (dict(method="flow", t_end=-1.0), "t_end"),
])
def test_bad_arguments_are_named(kwargs, name):
    prob, inits = _seed000(2)
    method = kwargs.pop("method")
    with pytest.raises(ValueError, match=name):
        fl.ensemble(prob, inits, method, **kwargs)


def test_bad_inits_and_rules_are_named():
    prob, inits = _seed000(2)
    with pytest.raises(ValueError, match="inits"):
        fl.ensemble(prob, inits[:, :, :2], "flow", t_end=1.0)
    with pytest.raises(ValueError, match="until.linear"):
        fl.ensemble(prob, inits, "flow", t_end=1.0, until=fl.Until(linear=np.ones((3, 3)), tol=0.1))
    with pytest.raises(ValueError, match="deadline"):
        fl.Until(deadline=1.0)
    with pytest.raises(ValueError, match="tol"):
        fl.Until(linear=np.ones((2, 3)))
