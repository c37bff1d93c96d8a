"""Seed 004 (Wang & Pilanci, The Convex Geometry of Backpropagation): the validation claims of
``validation/seed004_convex_geometry.py``, run once each in quick mode, with pinned numbers.

References: the closed forms of docs/design.md, Reference values derived for the checks (P*, 1/(2P*), lambda* of
F2); values computed independently from the paper's Prop. 2, Theorem 3, Lemma 3 and App. F (lambda*, optimal
neurons, spike-free values, the Lemma 3 bounds for one neuron on F1); independent long-horizon runs (gap
constants).
"""

import numpy as np
import pytest

from flowlib.validation import runner
from flowlib.validation import seed004_convex_geometry as s004

P_F1, P_F2 = 1.28243222467676176, 0.733581897125772865
LAM_F1 = (0.582874904396684, -0.699557320280078)
LAM_F2 = (0.214441006848562, 0.519140890277211)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("val004")
    cache = {}

    def get(claim_id):
        if claim_id not in cache:
            cache[claim_id] = runner.run_claim(claim_id, quick=True, out=str(out))
        return cache[claim_id]

    return get


def _case(rec, name):
    return next(c for c in rec.data["cases"] if c["case"] == name)


# ------------------------------------------------------------------------------------------------------------------
# fast unit checks of the helpers (no flow, no cvxpy)
# ------------------------------------------------------------------------------------------------------------------
def test_closed_forms_and_os_shortcut_match_exact_values():
    assert float(s004.closed_form_p_star("F1")) == pytest.approx(P_F1, abs=1e-16)
    assert float(s004.closed_form_p_star("F2")) == pytest.approx(P_F2, abs=1e-16)
    X, y, ref = s004.reference("F1")
    assert ref["p_star"] == pytest.approx(P_F1, rel=1e-15)
    np.testing.assert_allclose(ref["lam"], LAM_F1, atol=1e-15)
    np.testing.assert_allclose(ref["u_plus"], (0.560576204389482, -0.159679282462458), atol=1e-15)
    np.testing.assert_allclose(ref["u_minus"], (-0.230008808847998, 0.660663599882549), atol=1e-15)
    _, _, ref2 = s004.reference("F2")
    np.testing.assert_allclose(ref2["u_plus"], (0.438552775839729, 0.588059403966909), atol=1e-15)
    np.testing.assert_allclose(ref2["lam"], LAM_F2, atol=1e-15)


def test_certificate_nnls_equals_the_exact_2d_maximum():
    rng = np.random.default_rng(4)
    for case in ("F1", "F2"):
        X, y = s004.paper_data(case)
        pats = s004.arrangements(X)
        for _ in range(20):
            lam = y * rng.uniform(0.0, 1.0, 2)
            exact, u = s004.certificate_2d(X, lam)
            assert abs(np.linalg.norm(u) - 1) <= 1e-15
            assert s004.certificate_nnls(X, lam, pats) == pytest.approx(exact, rel=1e-12)
            # no unit vector on a fine grid beats the exact maximum
            ang = np.linspace(0, 2 * np.pi, 20001)
            grid = np.abs(lam @ np.maximum(X @ np.stack([np.cos(ang), np.sin(ang)]), 0.0)).max()
            assert grid <= exact + 1e-15 and grid >= exact - 1e-6


def test_lemma3_bounds_reproduce_independent_values():
    """Lemma 3 (Eqs. 26-27) for one neuron on F1: s = +1, u0 at -60 degrees, only x1 active."""
    X, _ = s004.paper_data("F1")
    z0 = 0.718120499112163
    n1 = np.linalg.norm(X[0])
    printed = [s004.t_star(n1 / 4, z0, 1 - d, np.sqrt(1 - d / 8)) for d in (0.1, 0.01, 0.001)]
    corrected = [s004.t_star(n1 / 2, z0, 1 - d, np.sqrt(1 - d / 4)) for d in (0.1, 0.01, 0.001)]
    np.testing.assert_allclose(printed, (1.3837, 4.1389, 6.8285), atol=6e-5)
    np.testing.assert_allclose(corrected, (0.7240, 2.1098, 3.4546), atol=6e-5)


def test_spike_free_values():
    assert s004.spike_free_value(s004.paper_data("F1")[0])[0] == pytest.approx(1.222195075122607, abs=1e-14)
    assert s004.spike_free_value(s004.paper_data("F2")[0])[0] == pytest.approx(1.0, abs=1e-14)


# ------------------------------------------------------------------------------------------------------------------
# the claims (quick mode)
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_convex_program(run):
    pytest.importorskip("cvxpy")
    rec = run("004-convex-program")
    assert rec.status == "pass", rec.detail
    f1, f2 = _case(rec, "F1"), _case(rec, "F2")
    assert f1["p_star_cvxpy"] == pytest.approx(P_F1, rel=1e-10)
    assert f2["p_star_cvxpy"] == pytest.approx(P_F2, rel=1e-10)
    assert (f1["nonzero_blocks"], f2["nonzero_blocks"]) == (2, 1)
    assert (f1["arrangements"], f2["arrangements"]) == (3, 3)  # p = 4 with the empty pattern
    for row in rec.data["cases"]:
        assert row["rel_err"] <= 1e-10 and row["duality_gap"] <= 1e-10
    os8 = _case(rec, "OS n=8 d=3 seed=0")
    assert os8["p_star_reference"] == pytest.approx(2.7377589992751625, rel=1e-14)
    assert os8["nonzero_blocks"] == 2


@pytest.mark.slow
def test_optimal_neurons_paper_wrong(run):
    pytest.importorskip("cvxpy")
    rec = run("004-optimal-neurons")
    assert rec.status == "pass" and rec.expect == "paper-wrong", rec.detail
    assert rec.data["max_err"] <= 1e-6
    np.testing.assert_allclose(rec.data["printed_minus_exact"], (0.0194238, 0.0006636, 0.0085528), atol=1e-6)


@pytest.mark.slow
def test_dual_program_paper_wrong(run):
    pytest.importorskip("cvxpy")
    rec = run("004-dual-program")
    assert rec.status == "pass" and rec.expect == "paper-wrong", rec.detail
    for row, p, lam in zip(rec.data["cases"], (P_F1, P_F2), (LAM_F1, LAM_F2)):
        assert row["printed_status"] == "unbounded"
        assert row["d_star"] == pytest.approx(p, rel=1e-10)
        np.testing.assert_allclose(row["lam"], lam, atol=1e-6)  # CVXPY's dual: 1.2e-7 off


@pytest.mark.slow
def test_flow_limit(run):
    rec = run("004-flow-limit")
    assert rec.status == "pass", rec.detail
    assert rec.data["log_t_end"] == 1e4
    f1, f2 = _case(rec, "F1"), _case(rec, "F2")
    assert f1["target"] == pytest.approx(0.389884151675950, abs=1e-15)
    assert f2["target"] == pytest.approx(0.681587157424462, abs=1e-15)
    # Richardson in 1/q_min from ln t <= 1e4: measured 4.5e-13 (F1), 8.7e-11 (F2)
    assert abs(f1["extrapolation_err"]) <= 1e-11 and abs(f2["extrapolation_err"]) <= 1e-9
    # gap * ln t constants (an independent run: 0.032306 and 0.17606 at ln t = 1e4)
    assert f1["gap_times_log_t"] == pytest.approx(0.0323063, abs=2e-6)
    assert f2["gap_times_log_t"] == pytest.approx(0.1760680, abs=2e-6)
    assert (f1["events"], f2["events"]) == (5, 10)
    assert f1["angle_exponent"] == pytest.approx(-0.5, abs=0.01)
    assert f2["angle_exponent"] == pytest.approx(-1.0, abs=0.01)
    for row in rec.data["cases"]:
        assert abs(row["extrapolation_err"]) <= 1e-8 and row["gap_positive"]
        assert row["balancedness_drift"] <= 1e-13
        if row["case"].startswith("OS"):
            assert row["angle_exponent"] == pytest.approx(-0.5, abs=0.01)
    assert _case(rec, "OS n=8 d=3 seed=0")["init_seed"] == 21


@pytest.mark.slow
def test_dual_certificate(run):
    rec = run("004-dual-certificate")
    assert rec.status == "pass", rec.detail
    for name, lam, p in (("F1", LAM_F1, P_F1), ("F2", LAM_F2, P_F2)):
        row = _case(rec, name)
        np.testing.assert_allclose(row["lam_star"], lam, atol=1e-14)
        assert row["y_lam_star"] == pytest.approx(p, rel=1e-14)
        assert row["cert_nnls"] == pytest.approx(1.0, abs=1e-13)
        assert row["cert_exact_2d"] == pytest.approx(1.0, abs=1e-13)
    for row in rec.data["cases"]:
        assert row["support_flow"] == row["support_convex"]
        assert row["lam_flow_extrapolated_err"] <= 1e-8  # measured <= 3.2e-9
        assert row["cert_flow_end"] <= 1 + 1e-12
        assert abs(row["cert_flow_extrapolated"] - 1) <= 1e-9
    assert _case(rec, "F1")["lam_flow_end_err"] <= 1e-9  # 1.2e-10: F1's multiplier converges fast


@pytest.mark.slow
def test_alignment_time(run):
    rec = run("004-alignment-time")
    assert rec.status == "pass", rec.detail
    # the printed T*/T^shift (y/4, sqrt(1 - delta/8)) are about twice the measured times
    assert 0.45 <= rec.data["max_ratio_printed"] <= 0.55
    # the corrected ones are tight; they fail only at scale 1e-2, where lambda~ drifts off y/2
    assert 0.99 <= rec.data["max_ratio_corrected_small_scale"] <= 1.0
    assert [c[1] for c in rec.data["corrected_failures"]] == [0.01]
    assert rec.data["event_time_spread"] <= 1e-5
    n6 = rec.data["neurons"]["F1 #6"]
    assert n6["0.0001"]["T_i"]["0.001"] == pytest.approx(5.15242, abs=1e-4)
    assert n6["0.001"]["T_i"]["0.001"] == pytest.approx(5.15541, abs=1e-4)
    assert rec.data["neurons"]["F2 #7"]["0.0001"]["T_i"]["0.01"] == pytest.approx(2.36151, abs=1e-4)


@pytest.mark.slow
def test_lambda_half_paper_wrong(run):
    rec = run("004-lambda-half")
    assert rec.status == "pass" and rec.expect == "paper-wrong", rec.detail
    assert rec.data["g0_half"] == pytest.approx(0.857816996800600, abs=1e-14)
    assert rec.data["z0"] == pytest.approx(0.718120499112163, abs=1e-14)
    assert rec.data["err_half"] <= 1e-11  # measured 2.1e-13
    assert rec.data["err_quarter"] == pytest.approx(0.07325, abs=1e-4)
    assert 0.5 <= rec.data["lambda_inf_max"] <= 0.5 + 1e-5


@pytest.mark.slow
def test_spike_free_paper_wrong(run):
    rec = run("004-spike-free")
    assert rec.status == "pass" and rec.expect == "paper-wrong", rec.detail
    assert rec.data["values"]["F1"] == pytest.approx(1.222195075122607, abs=1e-14)
    assert rec.data["values"]["F2"] == pytest.approx(1.0, abs=1e-14)
