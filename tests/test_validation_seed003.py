"""Seed 003 (Boursier & Flammarion) validation claims: closed-form helpers (fast) and the claims in quick mode (slow).

Pinned numbers are quick-mode measurements (seed 0) and, where quick mode reaches them, independently
recomputed values (docs/design.md, Reference values derived for the checks).
"""

import math
from fractions import Fraction

import numpy as np
import pytest

import flowlib as fl
from flowlib.validation import seed003_early_alignment as s3

IDS = ("003-lemma1-balancedness", "003-early-alignment-exponent", "003-three-point-stuck",
       "003-thm2-ols-on-data-cone", "003-sliding-v10")


# ----- fast: exact reference values and closed forms ------------------------------------------------------------

def test_b1_ols_and_spurious_loss_exact():
    """beta* = (-4/65, 251/390), L(beta*) = 256/2925, and the two-neuron interpolant (recomputed exactly)."""
    X = [(Fraction(x).limit_denominator(1000), Fraction(1)) for x in s3.B1_X]
    y = [Fraction(v).limit_denominator(1000) for v in s3.B1_Y]
    g = [[sum(p[i] * p[j] for p in X) for j in range(2)] for i in range(2)]
    r = [sum(p[i] * v for p, v in zip(X, y)) for i in range(2)]
    det = g[0][0] * g[1][1] - g[0][1] * g[1][0]
    beta = ((g[1][1] * r[0] - g[0][1] * r[1]) / det, (g[0][0] * r[1] - g[1][0] * r[0]) / det)
    assert beta == s3.BETA_STAR
    assert sum((p[0] * beta[0] + beta[1] - v) ** 2 for p, v in zip(X, y)) / 6 == s3.L_STAR
    relu = lambda z: max(z, Fraction(0))  # noqa: E731
    h = [relu(Fraction(28, 25) * p[0] + Fraction(33, 50)) + relu(Fraction(-22, 5) * p[0] - Fraction(11, 5))
         for p in X]
    assert h == y  # a global minimum with loss 0: 256/2925 is spurious


def test_ols_loss_exact():
    """256/2925 for the decimal data; the float64 labels and 1/n (what flowlib's mpmath flow takes as exact) move it
    by 8.654e-18, the plateau the 30-digit flow reaches (full mode of 003-three-point-stuck)."""
    assert s3.ols_loss_exact([Fraction(11, 10), Fraction(1, 10), Fraction(8, 10)], Fraction(1, 3)) == s3.L_STAR
    shifted = s3.ols_loss_exact([1.1, 0.1, 0.8], 1.0 / 3.0) - s3.L_STAR
    assert float(shifted) == pytest.approx(8.654046140667887e-18, rel=1e-12)


def test_b1_extremal_vector():
    Xa = np.column_stack([s3.B1_X, np.ones(3)])
    assert np.allclose(Xa.T @ s3.B1_Y / 3, s3.D_STAR, rtol=0, atol=1e-15)
    assert abs(np.linalg.norm(s3.D_STAR) - 0.7149689193) < 1e-10
    assert abs(s3.D_MAX - np.linalg.norm(s3.D_STAR)) < 1e-15


def test_misalignment_closed_form_matches_independent_values():
    """Independently computed: mis(1e-3) = 1.0322e-3 and mis(1e-6) = 3.2662e-5 (eps = 0.25, offset 0.3 rad)."""
    assert s3.misalignment_closed_form(1e-3, 0.25, 0.3) == pytest.approx(1.0322e-3, rel=1e-4)
    assert s3.misalignment_closed_form(1e-6, 0.25, 0.3) == pytest.approx(3.2662e-5, rel=1e-4)
    # slope 2 eps between two tiny lambdas (the asymptotic exponent of the closed form)
    lo, hi = s3.misalignment_closed_form(1e-12, 0.25, 0.3), s3.misalignment_closed_form(1e-10, 0.25, 0.3)
    assert math.log(hi / lo) / math.log(100.0) == pytest.approx(0.5, abs=1e-6)  # 0.49999996


def test_v10_closed_forms():
    """Multiplier 0.4 (positive neuron on x2's hyperplane) and 0.5 (negative on x1's) at h = 0; hit time."""
    assert s3.v10_multiplier_closed_form(np.zeros(2), 1) == pytest.approx(0.4, abs=1e-15)
    assert s3.v10_multiplier_closed_form(np.zeros(2), 0) == pytest.approx(0.5, abs=1e-15)
    # the sliding velocity D(0.4) = (1/2)(x1 - 0.4 x2) = (0.4, -0.2) is tangent to x2's hyperplane
    X = np.asarray(s3.V10_X)
    D = 0.5 * (X[0] - 0.4 * X[1])
    assert np.allclose(D, s3.V10_D_SLIDE, atol=1e-15) and abs(D @ X[1]) < 1e-15
    cf = s3.v10_closed_form(1.0, 0.3, 6.0)
    # integrate the angle ODE phi' = -|D| sin(phi - phi_D) (h = 0) to the ray with a fine RK4 as a cross-check
    nd, phi_d, phi = np.linalg.norm(s3.V10_D_BOTH), math.atan2(-0.5, 0.25), 0.3
    target, t, dt = math.atan2(-1.0, 2.0), 0.0, 1e-4
    f = lambda p: -nd * math.sin(p - phi_d)  # noqa: E731
    while phi > target:
        k1 = f(phi); k2 = f(phi + dt * k1 / 2); k3 = f(phi + dt * k2 / 2); k4 = f(phi + dt * k3)  # noqa: E702
        phi_new = phi + dt * (k1 + 2 * k2 + 2 * k3 + k4) / 6
        if phi_new <= target:
            t += dt * (phi - target) / (phi - phi_new)
            break
        phi, t = phi_new, t + dt
    assert cf["T"] == pytest.approx(t, abs=1e-6)


def test_gd_balancedness_identity_one_step():
    """A hand-made GD step: the measured change of a^2 - |w|^2 - b^2 is eta^2 (g_a^2 - |g_w|^2 - g_b^2)."""
    rng = np.random.default_rng(7)
    prob = fl.Problem(X=rng.standard_normal((6, 3)), y=rng.standard_normal(6), loss="square", reduction="mean",
                      bias=True, train_outer=True)
    S0 = rng.standard_normal((1, 5, 5))
    lr = 0.05
    g_a, g_wb = s3.gd_gradients(prob, S0)
    S1 = S0.copy()
    S1[0, :, :4] -= lr * g_wb[0]
    S1[0, :, 4] -= lr * g_a[0]
    measured, predicted = s3.gd_balancedness_step(prob, np.concatenate([S0, S1]), lr)
    scale = np.sum(S0[0] ** 2, axis=1)
    assert np.all(np.abs(measured[0] - predicted[0]) <= 16 * np.finfo(float).eps * scale)
    assert np.max(np.abs(predicted)) > 1e-4  # not a vacuous comparison
    # the gradient itself against central finite differences of the loss
    def loss(S):
        Xa = prob.augmented_inputs
        h = np.maximum(S[:, :4] @ Xa.T, 0.0).T @ S[:, 4]
        return 0.5 * np.mean((h - prob.y) ** 2)
    num = np.zeros_like(S0[0])
    for idx in np.ndindex(*num.shape):
        e = np.zeros_like(num)
        e[idx] = 1e-6
        num[idx] = (loss(S0[0] + e) - loss(S0[0] - e)) / 2e-6
    assert np.allclose(num[:, :4], g_wb[0], atol=1e-8) and np.allclose(num[:, 4], g_a[0], atol=1e-8)


# ----- slow: the claims, once each, in quick mode ---------------------------------------------------------------

@pytest.fixture(scope="module")
def records(tmp_path_factory):
    from flowlib.validation import runner

    out = tmp_path_factory.mktemp("val003")
    return {i: runner.run_claim(i, quick=True, out=str(out)) for i in IDS}, out


@pytest.mark.slow
@pytest.mark.parametrize("claim_id", IDS)
def test_claim_passes_and_plots(records, claim_id):
    recs, out = records
    rec = recs[claim_id]
    assert rec.status == "pass", rec.detail
    assert rec.plots and all((out / p).is_file() for p in rec.plots)


@pytest.mark.slow
def test_lemma1_numbers(records):
    data = records[0]["003-lemma1-balancedness"].data
    assert data["max_flow_drift"] <= 1e-13  # measured 8.8e-15 (random data), ~5e-16 on the B1 runs
    assert all(v["drift"] <= 1e-15 for k, v in data["flow"].items() if k.startswith("B1"))
    assert data["worst_rounding_ratio"] <= 2.0  # measured 0.96 eps |theta_j|^2
    assert data["slope_one_step"] == pytest.approx(2.0, abs=1e-8)
    assert data["slope_fixed_t"] == pytest.approx(0.9592, abs=2e-3)
    first = data["gd"][0]
    assert first["lr"] == 0.1 and first["one_step_drift"] == pytest.approx(9.0553e-4, rel=1e-3)
    assert first["drift_at_t"] == pytest.approx(1.2696e-6, rel=1e-3)


@pytest.mark.slow
def test_alignment_exponent_numbers(records):
    data = records[0]["003-early-alignment-exponent"].data
    for fit in data["fits"].values():
        assert fit["slope"] >= fit["eps"]  # the theorem's exponent holds ...
        assert fit["slope"] == pytest.approx(2 * fit["eps"], abs=1e-3)  # ... and is loose by 2 (0.1994, 0.4999, 0.6)
    assert data["mis_1e-3"] == pytest.approx(1.0322e-3, rel=5e-3)  # the closed form's value
    assert data["mis_1e-6"] == pytest.approx(3.2662e-5, rel=5e-3)
    assert data["worst_rel_closed_form"] <= 1e-4  # measured 7.4e-6


@pytest.mark.slow
def test_three_point_numbers(records):
    data = records[0]["003-three-point-stuck"].data
    assert data["L_star"] == float(Fraction(256, 2925))
    assert data["worst_gap"] <= 1e-16  # measured 5.6e-17 (float64 rounding of L)
    runs = {(r["seed"], r["init"]): r for r in data["runs"]}
    for seed in range(4):
        for init in ("balanced", "dominated"):
            assert runs[seed, init]["final_loss"] == pytest.approx(256 / 2925, abs=1e-16)
            assert runs[seed, init]["sign_flips"] == 0
    escaped = sorted(seed for seed in range(4) if runs[seed, "unbalanced"]["final_loss"] <= 1e-20)
    assert escaped == [0, 1, 3]
    assert runs[2, "unbalanced"]["final_loss"] == pytest.approx(256 / 2925, abs=1e-15)


@pytest.mark.slow
def test_ols_only_on_data_cone(records):
    rec = records[0]["003-thm2-ols-on-data-cone"]
    assert rec.expect == "paper-wrong"
    data = rec.data
    assert data["inside_max_error"] <= 1e-13  # measured 1.1e-15
    assert data["outside_min_gap"] == pytest.approx(229 / 390, abs=1e-4)  # |x^T beta*| at x = 20, h(20) ~ -5e-6
    assert data["kink_ols"] == pytest.approx(16315 / 1560, abs=1e-12)
    assert 10.0 < data["kinks_min"] <= data["kink_ols"] <= data["kinks_max"] < 11.2  # 10.19 .. 11.03
    assert data["mixed_neurons"] == 0
    assert data["relu_error"] <= 5e-5  # measured 1.2e-5 at x = 50


@pytest.mark.slow
def test_sliding_v10_numbers(records):
    data = records[0]["003-sliding-v10"].data
    single = data["single"]
    assert single["T_flow"] == pytest.approx(1.671200217218906, abs=1e-12)
    assert single["T_flow"] == pytest.approx(single["T_closed_form"], abs=1e-12)
    assert single["multiplier"] == pytest.approx(0.4, abs=1e-14)
    assert single["a_final"] == pytest.approx(single["a_closed_form"], rel=1e-12)
    ens = data["ensemble"]
    assert ens["multipliers"] == [0.4, 0.5]
    assert ens["max_multiplier_error"] <= 1e-13 and ens["on_surface"] <= 1e-15
    assert ens["slide_ends"] == 0 and ens["events_after_entry"] == 0 and ens["max_events_per_neuron"] <= 2
    assert (ens["positive_sliding"], ens["negative_sliding"]) == (9, 7)
    assert data["chatter_cos_slope"] == pytest.approx(0.986, abs=0.01)
    cos = {c["lr"]: c["cos_amplitude"] for c in data["chatter"]}
    assert cos[1e-2] == pytest.approx(2.449e-3, rel=1e-2) and cos[1e-4] == pytest.approx(2.609e-5, rel=1e-2)
    ratios = [c["amplitude_over_lr"] for c in data["chatter"]]
    assert max(ratios) / min(ratios) < 1.1  # compare()'s chatter amplitude is proportional to lr (2.9e-4 lambda)
    assert data["distance_slope"] == pytest.approx(1.0, abs=0.02)
