"""One status table for the flow and the ensembles; per-kind event counts; every ensemble member's message."""

import numpy as np
import pytest

import flowlib as fl
from flowlib import examples
from flowlib.ensemble_result import STATUS_NAMES
from flowlib.kernels import status as kstatus
from flowlib.statuses import KERNEL_STATUS, PENDING_CODE, Status, status_of


def test_every_kernel_code_has_one_status_and_message():
    codes = {v for k, v in vars(kstatus).items() if k.isupper() and isinstance(v, int)} - {kstatus.RUNNING,
                                                                                          kstatus.EVENT_BUFFER_FULL}
    assert codes | {PENDING_CODE} == set(KERNEL_STATUS)
    assert STATUS_NAMES == {code: outcome.value for code, (outcome, _) in KERNEL_STATUS.items()}
    assert {Status.REACHED, Status.DEADLINE, Status.PENDING} <= {outcome for outcome, _ in KERNEL_STATUS.values()}
    assert status_of(12345) == (Status.FAILED, "unknown kernel status code 12345")


def test_event_counts_by_kind_in_the_summary():
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)  # sticks on both kinks (seed 000's closed form)
    res = fl.gradient_flow(prob, p0, 200.0, dense_output=False)
    assert res.event_counts == {"cross": 0, "slide_start": 0, "slide_end": 0, "stick": 2, "tie": 0, "zeno": 0}
    assert "2 events (stick 2)" in res.summary()


def test_an_ensemble_member_keeps_the_message_of_the_same_run_alone():
    X = np.array([[1.0, 0.5], [-0.3, 1.0]])
    prob = fl.Problem(X, [1.0, -1.0], loss="exp", reduction="sum", bias=False, train_outer=True)
    good = np.array([[[0.1, 0.2, 0.0, 0.3]]])
    bad = np.array([[[700.0, 0.0, 0.0, -1.0]]])  # y f = -700 on the first sample: the flow overflows at once
    ens = fl.ensemble(prob, np.concatenate([good, bad]), "flow", t_end=10.0)
    assert list(ens.status) == ["success", "failed"]
    alone = fl.gradient_flow(prob, fl.Params.unpacked(bad[0], False), 10.0)
    assert alone.status == "failed" and "non-finite" in alone.message
    assert ens.messages[0] == "reached t_end"
    assert ens.messages[1].startswith(status_of(kstatus.NONFINITE)[1]) and ens.messages[1].endswith("(t = 0.0)")
    assert f"failed (1): {status_of(kstatus.NONFINITE)[1]}" in ens.summary()


def test_gd_members_report_their_iteration_and_stop_rule():
    prob, _ = examples.gd_rate_network(1.0, 0.0, -1.0, 0.0)
    inits = fl.random_inits(prob, m=2, count=6, scheme="he", a=[1.0, -1.0], bias=0.0, seed=6)
    ens = fl.ensemble(prob, inits, "gd", lr=0.05, steps=300, until=fl.Until(loss_below=0.5))
    for name, message, steps in zip(ens.status, ens.messages, ens.steps):
        assert message == {"success": f"reached iteration {steps}",
                           "reached": f"met the stop rule (until) (iteration {steps})"}[name]
    assert set(ens.status) == {"success", "reached"}
    rule = fl.Until(loss_below=0.5)
    for r, (name, message) in enumerate(zip(ens.status, ens.messages)):  # a member says what its run alone says
        alone = fl.gradient_descent(prob, fl.Params.unpacked(inits[r], prob.bias), 0.05, 300, until=rule)
        assert (alone.status, alone.message) == (name, message)
