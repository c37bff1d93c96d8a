"""Validation claims of paper 000 (Smorodinsky, Gimpleson & Safran), ``validation/seed000_gd_rate.py``.

Each slow test runs one claim once in quick mode (module-scoped fixture) and checks its status and pinned numbers:
values measured in quick mode (float64 GD is deterministic), and independently recomputed reference values
(docs/design.md, Reference values derived for the checks) where quick mode reaches them. The unmarked tests check
the module's closed forms against those values.
"""

import mpmath as mp
import numpy as np
import pytest
from scipy.special import erfc

from flowlib.validation import runner
from flowlib.validation import seed000_gd_rate as s0


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = tmp_path_factory.mktemp("val000")
    cache = {}

    def get(claim_id):
        if claim_id not in cache:
            cache[claim_id] = runner.run_claim(claim_id, quick=True, out=str(out))
        return cache[claim_id]

    return get


# ----- fast checks of the helpers ----------------------------------------------------------------------------------

def test_f_b_law_matches_exact_value():
    """P(B > 1) = erfc(1/sqrt 2)^2 = 0.100685958400220 (recomputed exactly); f_B is F_B's derivative (Eq. 15)."""
    assert 1.0 - float(s0.f_b_cdf(1.0)) == pytest.approx(0.100685958400220, rel=1e-13)
    assert s0.P_B_GT_1 == pytest.approx(erfc(1 / np.sqrt(2)) ** 2, rel=1e-15)
    x = np.linspace(0.05, 4.0, 50)
    h = 1e-6
    assert np.allclose((s0.f_b_cdf(x + h) - s0.f_b_cdf(x - h)) / (2 * h), s0.f_b_pdf(x), rtol=1e-7)
    # B = |W1 - W2|/2 with W half-normal(sigma^2 = 2): Monte Carlo, 4 sigma
    rng = np.random.default_rng(1)
    b = np.abs(np.abs(rng.normal(0, np.sqrt(2), 200_000)) - np.abs(rng.normal(0, np.sqrt(2), 200_000))) / 2
    assert abs(np.mean(b > 1) - s0.P_B_GT_1) <= 4 * np.sqrt(0.1 * 0.9 / 200_000)


def test_final_phase_constants_match_independent_values():
    """A_v, A_u, K and the second stick time of theta0 = (2, 3, -2, 3.1) (decoupled closed form, recomputed)."""
    with mp.workdps(30):
        c = s0.final_phase((2.0, 3.0, -2.0, 3.1))
        assert float(c["A_v"]) == pytest.approx(253.09902883993947, rel=1e-15)
        assert float(c["A_u"]) == pytest.approx(247.63010959402357, rel=1e-15)
        assert float((c["A_v"] - c["A_u"]) / 2) == pytest.approx(2.7344596229579513, rel=1e-15)
        assert float(c["t_last"]) == pytest.approx(198.2276604884934, rel=1e-14)
        assert c["v1f"] == 0 and c["u2f"] == 0
        # the closed-form state at t = 1e10 (independently computed: w1 = 11.5129254773517, w2 = -11.5129254776252)
        th = s0.closed_form_theta(c, mp.log(mp.mpf(10) ** 10))
        assert float(th[0]) == pytest.approx(11.5129254773517, abs=1e-12)
        assert float(th[2]) == pytest.approx(-11.5129254776252, abs=1e-12)


def test_gf_decision_boundary_closed_form_matches_independent_values():
    """x*_GF(tau) from (2.8, 0, -0.3, 0): independently computed values at tau = 1, 10, 100, 1e3, 1e7."""
    tau = np.array([1.0, 10.0, 100.0, 1e3, 1e7])
    x = s0._gf_xstar_zero_bias(2.8, -0.3, np.log(tau))
    assert np.allclose(x, [0.0726984, 0.1878808, 0.1892565, 0.1467556, 0.0707490], atol=1e-7)


def test_he_trial_stops_at_the_first_equilibrium_iterate():
    """The segmented search finds the first iterate with |u1 + v2| <= 1e-3, as one GD run recorded at every step."""
    import flowlib as fl
    from flowlib import examples

    t = s0.he_trial(1.0, -0.5)
    assert t["success"] and t["reached"]
    k = t["k"]
    assert k > s0.HE_FAIL_STEPS  # the search went through the doubling segments
    prob, p0 = examples.gd_rate_network(1.0, 0.0, -0.5, 0.0)
    gd = fl.gradient_descent(prob, p0, s0.HE_ETA, k)
    u1, _, _, v2 = s0._uv(gd.states)
    first = int(np.flatnonzero(np.abs(u1 + v2) <= s0.HE_TOL)[0])
    assert first == k
    assert t["numerator"] == pytest.approx(0.25 - abs(u1[-1] + v2[-1]) / 2, abs=1e-13)
    assert not s0.he_trial(-0.3, -1.0)["success"]


# ----- the claims (quick mode) -------------------------------------------------------------------------------------

@pytest.mark.slow
def test_margin_rate(records):
    rec = records("000-margin-rate")
    assert rec.status == "pass", rec.detail
    d = rec.data
    assert d["two_kink_flow_constant"] / d["two_kink_closed_form_K"] == pytest.approx(1.0, abs=1e-10)
    assert d["two_kink_gd_frozen_numerator"] == pytest.approx(1.56054279e-5, rel=1e-6)


@pytest.mark.slow
def test_thm52(records):
    rec = records("000-thm5.2")
    assert rec.status == "pass", rec.detail
    d = rec.data
    measured = {"0.3": 6.474970623766388, "0.1": 6.337942460788186, "0.05": 6.320001174119712,
                "0.01": 6.305788452734519}
    last_fail = {"0.3": 1, "0.1": 4, "0.05": 9, "0.01": 47}  # Thm 5.2 fails only for t <= 1, 4, ..., 47
    for eta, value in measured.items():
        row = d["per_eta"][eta]
        assert row["sim_min_ratio"] == pytest.approx(value, rel=1e-9)
        assert row["sim_min_ratio"] == pytest.approx(d["recomputed"][eta], abs=6e-5)  # recomputed, 4 digits
        assert row["at"] == [2.7, -0.5] and row["argmin_t"] == row["t0"]
        assert row["corner_last_fail_t"] == last_fail[eta]
    # the infimum over all t is 5 S* = 5.5 at the corner, approached as t -> inf (Lemma B.3 tail)
    assert 5.4999 <= d["gd_inf_all_t"] <= 5.5
    assert d["gd_inf_all_t"] == pytest.approx(5.499987503358822, rel=1e-9)
    assert d["flow_at_tau7_corner"] == pytest.approx(6.302254315518279, rel=1e-12)
    assert d["flow_inf"] == pytest.approx(5.5, rel=1e-12)
    assert d["flow_vs_closed_form_rel"] <= 1e-10


@pytest.mark.slow
def test_thm31(records):
    rec = records("000-thm3.1")
    assert rec.status == "pass", rec.detail
    d = rec.data
    assert d["max_richardson_dev"] <= 1e-11  # measured 3.0e-13
    expected_c = {(1.0, 0.0, -0.5, 0.0): 0.3125, (2.8, 0.0, -0.3, 0.0): 1.9825, (1.0, 0.2, -1.0, 0.3): 0.2825,
                  (0.5, 1.0, -0.8, 0.1): 0.1225, (1.0, 0.0, 0.5, 1.0): 0.25}
    for run in d["runs"]:
        theta0 = tuple(run["theta0"])
        assert run["log_loss_end"] < np.log(0.5)
        if theta0 in expected_c:
            assert run["C"] == pytest.approx(expected_c[theta0], rel=1e-14)
            assert run["scaled_end"] == pytest.approx(run["C"], rel=1e-7)  # at ln t = 1e4
            assert run["closed_form_rel"] <= 1e-11
            assert run["exponent"] == pytest.approx(-2.0, abs=1e-5)
        else:
            assert run["C"] == 0.0 and len(run["events"]) == 2 and run["one_minus_cos_end"] <= 1e-30
    mp_run = d["two_kink_mp"]
    assert mp_run["one_minus_cos"][-1] == pytest.approx(7.835002643145758e-64, rel=1e-8)
    assert mp_run["one_minus_cos"][2] == pytest.approx(7.051502012213925e-23, rel=1e-8)  # independently: 7e-23 at 1e10
    assert mp_run["rel_to_closed_form"] <= 1e-8
    assert mp_run["scaled_by_K2_over_2t2ln2t"] == pytest.approx(1.0, abs=1e-8)


@pytest.mark.slow
def test_eq13(records):
    rec = records("000-eq13")
    assert rec.status == "pass", rec.detail
    d = rec.data
    assert d["max_dev_gd"] <= 1e-8 and d["max_dev_flow"] <= 1e-12 and d["flow_conserved_rel"] <= 1e-10
    assert d["v3_gap_eta_t"] == pytest.approx(14.967220253048197, rel=1e-9)
    assert d["v3_gap_eta_t"] == pytest.approx(14.967, abs=1e-3)  # an independent GD run, at t = 1e6
    s_gd = {(tuple(r["theta0"]), r["eta"]): r["S_star"] for r in d["gd_kink"]}
    assert s_gd[((2.0, 3.0, -2.0, 3.1), 0.05)] == pytest.approx(1.56054279e-5, rel=1e-6)  # an independent GD run
    assert s_gd[((2.0, 3.0, -2.0, 3.1), 0.1)] == pytest.approx(-4.608e-5, rel=1e-3)
    assert s_gd[((2.0, 3.0, -2.0, 3.1), 0.01)] == pytest.approx(-2.334e-6, rel=1e-3)
    assert s_gd[((2.0, 3.0, -2.0, 3.1), 0.3)] == pytest.approx(4.3526292e-5, rel=1e-6)
    assert s_gd[((0.3, 0.8, -0.2, 0.4), 0.3)] == pytest.approx(1.3348813733538412e-2, rel=1e-9)
    for r in d["gd_kink"]:
        assert 0 < abs(r["S_star"]) < r["eta"]
        assert r["dev"] <= 1e-2 * abs(r["S_star"])
    for f in d["flow"][len(s0.EQ13_INITS):]:  # the flow sticks: S* = 0
        assert f["events"] == ["stick", "stick"] and abs(f["num_1e300"]) <= 1e-12


@pytest.mark.slow
def test_he_init(records):
    rec = records("000-he-init")
    assert rec.status == "pass", rec.detail
    d = rec.data
    assert d["n"] == 1000 and d["n_success"] == 254 and d["n_reached"] == 254 and d["quadrant_mismatch"] == 0
    assert d["ks_pvalue"] == pytest.approx(0.24972908955353212, rel=1e-6)
    assert d["p_numerator_gt_1"] == pytest.approx(31 / 254, abs=1e-12)
    assert d["max_B_minus_numerator"] <= 5e-4 + 1e-12 and d["all_monotone"]
    assert d["k_eq_percentiles"]["50"] == 53803 and d["k_eq_percentiles"]["max"] == 2192436
    assert d["k_eq_over_prediction_median"] == pytest.approx(0.99, abs=0.01)
