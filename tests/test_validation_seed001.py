"""Seed 001 (Sarussi, Brutzkus & Globerson, linear teachers) validation claims: fast unit checks of the helpers,
and each claim run once in quick mode (slow) with pinned numbers."""

import numpy as np
import pytest

from flowlib.validation import runner
from flowlib.validation import seed001_linear_teachers as s1

IDS = ("001-sgd-loss", "001-thm5.1", "001-nar-conservation", "001-par-svm", "001-assumption6.1")


# ----------------------------------------------------------------------------------------------------------------
# fast unit checks
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n, eps, expected", [(10, 0.1, 9.3e9), (100, 0.1, 2.6e13), (400, 0.1, 5.7e15),
                                              (10, 0.01, 8.5e11), (100, 0.01, 2.5e15), (400, 0.01, 5.7e17)])
def test_theorem41_bound_matches_independent_values(n, eps, expected):
    # computed independently of the module: R_x = 1, alpha = 0.1, R_0 = 1e-3, k = 50, eta = 1e-3, v = 1, |w*| = 10
    M = s1.theorem41_M(n, eps, 1.0, 0.1, 1e-3, 50, 1e-3, 1.0, 10.0)
    assert M == pytest.approx(expected, rel=0.05)


def test_theorem41_M_is_eq19_at_eps0_plus_n():
    args = dict(R_x=3.0, alpha=0.1, R0=0.01, k=10, eta=1e-2, v=1.0, w_norm=2.0)
    eps0 = s1.theorem41_eps0(100, 0.05, 3.0, 10, 1e-2, 1.0)
    assert eps0 == pytest.approx(0.05 / (1 + 2 * 9.0 * 1e-2 * 10 * 100))
    assert s1.theorem41_M(100, 0.05, **args) == pytest.approx(s1.theorem41_T(100, eps0, **args) + 100, rel=1e-15)


def test_svm7_on_lt7_matches_the_reference_solution():
    prob, _ = s1.lt7()
    w, u, support = s1.svm7(prob.X, prob.y, prob.leak)
    # an independent mpmath KKT solve (40 digits)
    assert support.tolist() == [29, 69, 73]
    np.testing.assert_allclose(w, [1.3886339105637591, 1.0333931273150634], rtol=1e-12)
    np.testing.assert_allclose(u, [-1.4243412737724938, -0.65057555834060155], rtol=1e-12)
    assert np.sqrt(10) / np.linalg.norm(np.r_[w, u]) == pytest.approx(1.354794406097188, rel=1e-13)


def test_hard_margin_svm_is_feasible_and_tight():
    prob, _ = s1.lt7()
    w = s1.hard_margin_svm(prob.X, prob.y)
    margins = prob.y * (prob.X @ w)
    assert margins.min() == pytest.approx(1.0, abs=1e-12)
    assert np.sum(np.abs(margins - 1) < 1e-9) >= 2


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.3, 0.6])
def test_theorem51_sharpness_construction(alpha):
    below = s1.sharpness_construction(alpha, 1 - 1e-6)
    above = s1.sharpness_construction(alpha, 1 + 1e-6)
    assert below["disagrees"] and not above["disagrees"]
    assert below["sup_ratio"] == pytest.approx((1 - alpha) / (1 + alpha))


def test_theorem51_check_counts_a_disagreement_only_inside_the_cone():
    W = np.array([[1.0, 0.0], [1.0, 0.2], [0.0, 1.0], [0.2, 1.0]])  # k = 2
    X = np.array([[1.0, -1.0], [-1.0, 1.0], [1.0, 1.0], [3.0, -0.1]])
    res = s1.theorem51_check(W, X, 2, 0.1)
    assert res["violations"] == 0
    wb, ub, r, ang = s1.clusters(W, 2)
    assert r == pytest.approx(0.1) and ang == pytest.approx(np.arctan(0.2))


def test_sgd_kernel_matches_a_plain_numpy_loop():
    prob, _ = s1.lt7()
    X, y, k, alpha, eta = prob.X, prob.y, 10, 0.1, 1e-2
    W0 = 1e-3 * np.random.default_rng(0).standard_normal((2 * k, 2))
    out = s1.sgd_theorem41(X, y, W0, k, alpha, eta, eps=(0.5,), seed=7)
    # reference: epochs of batch-1 updates, permutations from numpy's legacy generator (what numba's seed gives)
    rs = np.random.RandomState(7)
    W = W0.copy()
    sign = np.r_[np.ones(k), -np.ones(k)]
    t_eps, t = None, 0
    for _ in range(out["epochs"]):
        for i in rs.permutation(len(y)):
            t += 1
            z = W @ X[i]
            q = y[i] * np.sum(sign * np.where(z > 0, z, alpha * z))
            p = np.where(z > 0, 1.0, alpha)
            W += (sign * eta * y[i] * p / (1 + np.exp(q)))[:, None] * X[i]
            loss = np.mean(np.log1p(np.exp(-y * s1.net_outputs(W, X, k, alpha))))
            if t_eps is None and loss < 0.5:
                t_eps = t
    np.testing.assert_allclose(out["W"], W, rtol=1e-13, atol=1e-16)
    assert out["t_eps"][0] == t_eps and out["steps"] == t and out["identity"] <= 1e-14


def test_smoothed_margin_in_the_log_domain():
    # log(1/(e^{nL} - 1)) / |W|, also where L underflows
    n, L, Wn = 100, 1e-3, 2.0
    assert s1.smoothed_margin(np.log(L), Wn, n) == pytest.approx(-np.log(np.expm1(n * L)) / Wn, rel=1e-14)
    assert s1.smoothed_margin(-1e4, 1.0, n) == pytest.approx(1e4 - np.log(n), rel=1e-15)


# ----------------------------------------------------------------------------------------------------------------
# the claims, quick mode
# ----------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = tmp_path_factory.mktemp("val001")
    return {i: runner.run_claim(i, quick=True, out=str(out)) for i in IDS}


@pytest.mark.slow
def test_sgd_loss_claim(records):
    rec = records["001-sgd-loss"]
    assert rec.status == "pass", rec.detail
    configs = rec.data["configs"]
    # quick mode, ctx.seed = 0 (measured): first update with L < eps for eps = 0.1, 0.03, 0.01
    assert configs[0]["t_eps"] == pytest.approx([1400, 6291, 23341], rel=0.05)  # eta 1e-3, std 1e-3
    assert configs[1]["t_eps"] == pytest.approx([141, 622, 2326], rel=0.05)  # eta 1e-2, std 1e-4
    assert configs[2]["t_eps"] == pytest.approx([175, 175, 175], rel=0.05)  # eta 1, std 30
    assert configs[0]["w_star_norm"] == pytest.approx(1.8925582171323074, rel=1e-10)
    for c in configs:
        assert all(t < 1e-6 * M for t, M in zip(c["t_eps"], c["M"]))  # the bound is very loose
        assert all(v <= b for v, b in zip(c["violating_epochs"], c["epoch_bound"]))
        assert all(L <= e for L, e in zip(c["clean_loss"], c["eps_clean"]))
    assert rec.data["max_excess13"] <= 1e-14 and rec.data["max_excess14"] <= 1e-14
    assert rec.data["max_identity"] <= 1e-14
    assert configs[0]["violating_epochs"] == pytest.approx([18411], rel=0.05)
    assert -1.4 <= rec.data["t_eps_slope_in_eps"][0] <= -1.0  # ~1/eps, far better than the bound's 1/eps^2


@pytest.mark.slow
def test_theorem51_claim(records):
    rec = records["001-thm5.1"]
    assert rec.status == "pass", rec.detail
    d = rec.data
    assert d["trained_violations"] == 0 and d["random_nets"]["violations"] == 0
    assert d["trained_points_in_region"] > 1e5 and d["random_nets"]["in_region"] > 5e4
    assert d["trained_max_disagreement_ratio"] < 2 and d["random_nets"]["max_ratio"] < 2
    assert d["final_small_init_nonlinear_fraction"] == 0.0
    assert d["final_small_init_max_angle"] == pytest.approx(2.36e-5, rel=0.05)  # measured, ln t = 1e3
    assert d["final_large_init_nonlinear_fraction"] > 0.3  # std 30: no clustering (Figs. 1b, 2b)
    for key in ("0.001/1", "0.001/2"):
        assert d["final_r_over_c"][key] < 2e-5
    assert d["events"][:2] == [1095, 1150]  # init seeds 1, 2 at std 1e-3 (an independent run: ~1100 crossings)


@pytest.mark.slow
def test_nar_conservation_claim(records):
    rec = records["001-nar-conservation"]
    assert rec.status == "pass", rec.detail
    d = rec.data
    assert d["n_events"] == 1095 and d["t_par"] == pytest.approx(0.012852218950384171, rel=1e-9)
    assert d["flow_drift_rel"] <= 1e-15 and d["gd_drift_rel"] <= 1e-14
    assert d["change_before_par"] == pytest.approx(2.57e-4, rel=0.02)
    assert d["gd_flips"] == 1095 and d["gd_last_flip"] == 13
    assert d["reduced_oracle_rel_error"] <= 1e-12


@pytest.mark.slow
def test_par_svm_claim(records):
    rec = records["001-par-svm"]
    assert rec.status == "pass", rec.detail
    d = rec.data
    assert d["event_kinds"] == ["cross"] and d["n_events"] == 1095 and d["in_par"]
    # an independent computation (GD + reduced ODE): angle * ln t = 2.519 (w), 0.732 (u) at ln t = 1e4
    assert d["C_w"] == pytest.approx(2.5193, rel=2e-4) and d["C_u"] == pytest.approx(0.73169, rel=2e-4)
    assert d["angle_w"][0] == pytest.approx(8.9062e-2, rel=1e-4)  # t = 1e10
    assert d["angle_u"][0] == pytest.approx(3.1316e-2, rel=1e-4)
    assert -1.0 <= d["exponent_w"] <= -0.98 and -1.01 <= d["exponent_u"] <= -0.99
    assert d["one_minus_cos_w"] == pytest.approx(3.1734e-8, rel=1e-3)
    assert d["gamma_star"] == pytest.approx(1.354794406097188, rel=1e-13)
    assert d["extrapolation_error"] <= 1e-12
    assert d["norm_ratio_svm"] == pytest.approx(1.1054163, rel=1e-7)


@pytest.mark.slow
def test_assumption61_claim(records):
    rec = records["001-assumption6.1"]
    assert rec.expect == "paper-wrong"
    assert rec.status == "pass", rec.detail
    d = rec.data
    assert d["t_one_over_n"] == pytest.approx(23.354990589066407, rel=1e-8)
    assert d["t_log2_over_n"] == pytest.approx(35.873222463422394, rel=1e-8)  # an independent run: "t ~ 40"
    assert d["max_smoothed_margin_between"] < 0 < d["min_smoothed_margin_after"]
    assert d["max_relative_decrease_after"] <= 1e-12
    assert d["counterexample"]["L"] < 0.5 and min(d["counterexample"]["q"]) < 0
