"""A neuron on several hyperplanes at once: the exact configuration solver (box-constrained LCP) and the flows
that need it.

References: brute-force enumeration of all ``3^k`` configurations (each surface left down, left up, or held with
multipliers found by a linear program), the energy identity ``L(0) - L(T) = int |theta'|^2`` and the mpmath
backend at 30 digits.
"""

import itertools

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from scipy.optimize import linprog

import flowlib as fl
from flowlib.kernels import events as kevents
from flowlib.kernels.constants import LCP_FREE, LCP_HOLD, TIE_LEAVE, TIE_STAY
from flowlib.mp import events as mpevents


# --------------------------------------------------------------------------------------------------------------
# The solver against brute force
# --------------------------------------------------------------------------------------------------------------
def brute_force(N, c, v0, leak, tol):
    """Every consistent configuration ``(sides, v, multipliers)``: sides 0 down, 1 up, 2 held.

    Held multipliers: ``s_H`` in ``[leak, 1]`` with ``N_H^T v = 0``, found by a linear program minimising the l1
    residual (exactly dependent normals have a whole segment of solutions)."""
    da, k = N.shape
    E = N * c
    found = []
    for sides in itertools.product((0, 1, 2), repeat=k):
        held = [p for p in range(k) if sides[p] == 2]
        vf = v0 + sum((1.0 if sides[p] == 1 else leak) * E[:, p] for p in range(k) if sides[p] != 2)
        s_h = np.zeros(0)
        if held:
            A = E[:, held]
            M = N[:, held].T @ A
            rhs = -N[:, held].T @ vf
            h = len(held)
            res = linprog(np.r_[np.zeros(h), np.ones(2 * h)], A_eq=np.c_[M, np.eye(h), -np.eye(h)], b_eq=rhs,
                          bounds=[(leak, 1.0)] * h + [(0, None)] * (2 * h), method="highs")
            s_h = res.x[:h]
            vf = vf + A @ s_h
        u = N.T @ vf
        if all((sides[p] == 1 and u[p] > tol[p]) or (sides[p] == 0 and u[p] < -tol[p])
               or (sides[p] == 2 and abs(u[p]) <= tol[p]) for p in range(k)):
            mult = np.array([1.0 if side == 1 else leak for side in sides])
            mult[held] = s_h
            found.append((sides, vf, mult))
    return found


def random_instance(rng, geometry):
    k, da = int(rng.integers(2, 7)), int(rng.integers(2, 5))
    N = rng.standard_normal((da, k))
    c = rng.standard_normal(k)
    if geometry == "duplicate":
        N[:, 1] = N[:, 0]
    elif geometry == "antipodal":
        N[:, 1] = -N[:, 0]
    elif geometry == "zero_G":
        c[0] = 0.0
    elif geometry == "origin":
        N[:, 0] = 0.0
    elif geometry == "dependent":
        N[:, -1] = N[:, 0] + N[:, 1]
    elif geometry == "repelling":
        c = np.abs(c)
    return N, c, rng.standard_normal(da), float(rng.choice([0.0, 0.1]))


GEOMETRIES = ["generic", "duplicate", "antipodal", "zero_G", "origin", "dependent", "repelling"]


def solve(N, c, v0, leak, tie_policy, forced=None):
    k = N.shape[1]
    E = N * c
    size = np.linalg.norm(v0) + np.linalg.norm(E, axis=0).sum()
    assign = np.empty(k, np.int64)
    seen = np.zeros(k, np.int64)
    forced = np.zeros(k, np.int8) if forced is None else forced
    outcome = kevents.solve_configuration(N, v0, E, leak, size, tie_policy, forced, assign, seen)
    s, v, u = np.empty(k), np.empty(N.shape[0]), np.empty(k)
    value = kevents._solve_node(N, v0, E, leak, assign, s, v, u)
    tol = kevents.STAY_TOL * size * np.linalg.norm(N, axis=0)
    return outcome, assign, s, v, u, value, tol


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_solver_matches_brute_force_enumeration(geometry):
    rng = np.random.default_rng(GEOMETRIES.index(geometry) + 100)
    for _ in range(8):
        N, c, v0, leak = random_instance(rng, geometry)
        k = N.shape[1]
        for tie_policy in (TIE_STAY, TIE_LEAVE):
            outcome, assign, s, v, u, value, tol = solve(N, c, v0, leak, tie_policy)
            assert outcome == 0
            # the returned slopes give a consistent configuration, checked directly
            assert np.all((s >= leak) & (s <= 1.0))
            np.testing.assert_allclose(v, v0 + (N * c) @ s, rtol=0, atol=1e-14 * (1 + np.abs(v).max()))
            for p in range(k):
                if u[p] > tol[p]:
                    assert s[p] == 1.0 or c[p] == 0.0
                elif u[p] < -tol[p]:
                    assert s[p] == leak or c[p] == 0.0
            sols = brute_force(N, c, v0, leak, tol)
            assert sols, "the box LCP always has a solution"
            norms = [float(x[1] @ x[1]) for x in sols]
            if tie_policy == TIE_STAY:
                assert value == pytest.approx(min(norms), rel=1e-9, abs=1e-15)
            else:
                # no repelling surface held with an interior multiplier; the largest |v| among the rest
                leave = [nv for nv, x in zip(norms, sols)
                         if not any(x[0][p] == 2 and c[p] > 0 and leak < x[2][p] < 1 for p in range(k))]
                assert value == pytest.approx(max(leave), rel=1e-9, abs=1e-15)


def test_antipodal_repelling_pair_has_both_leaving_continuations():
    """n_2 = -n_1, both repelling (c = 1), leak 0: u_1 = q + s_1 - s_2 = -u_2. Leaving (up, down) needs
    u_1 = q + 1 > 0, (down, up) needs q - 1 < 0; for |q| < 1 both exist, as does holding both with
    s_1 - s_2 = -q. The default holds (smallest |v|), tie="leave" takes the larger |v|."""
    n = np.array([1.0, 0.0])
    N = np.c_[n, -n]
    c = np.array([1.0, 1.0])
    v0 = np.array([0.3, 2.0])  # q = 0.3
    outcome, assign, s, v, u, value, _ = solve(N, c, v0, 0.0, TIE_STAY)
    assert outcome == 0
    np.testing.assert_allclose(v, [0.0, 2.0], atol=1e-15)  # held: s_1 - s_2 = -0.3
    outcome, assign, s, v, u, value, _ = solve(N, c, v0, 0.0, TIE_LEAVE)
    # (up, down): v = (1.3, 2); (down, up): v = (-0.7, 2): the larger is (up, down)
    np.testing.assert_allclose(v, [1.3, 2.0], atol=1e-15)
    np.testing.assert_array_equal(s, [1.0, 0.0])


def test_forced_side_is_kept_when_consistent_and_dropped_otherwise():
    N = np.eye(2)
    c = np.array([-1.0, -1.0])  # attracting
    # u_k = v0_k - s_k: surface 0 is held at s_0 = 0.5, surface 1 at its bound with u_1 = 0
    v0 = np.array([0.5, 0.0])
    outcome, assign, s, v, u, *_ = solve(N, c, v0, 0.0, TIE_STAY, np.array([0, -1], np.int8))
    assert outcome == 0 and s[1] == 0.0 and s[0] == pytest.approx(0.5)
    # forcing surface 0 down contradicts first order (u_0 = 0.5 > 0 at s_0 = 0): the forced side is kept (the
    # driver's exit test, from higher-order terms, decides it) and the other surface is decided consistently
    outcome, assign, s, v, u, *_ = solve(N, c, v0, 0.0, TIE_STAY, np.array([-1, 0], np.int8))
    assert outcome == 1 and s[0] == 0.0 and s[1] == 0.0 and u[1] == 0.0


def test_many_repelling_surfaces_beyond_the_enumeration():
    """Eleven repelling surfaces (beyond ``MAX_ENUMERATED``): branch and bound (default) and ascent
    (``tie="leave"``) both end consistent; branch and bound finds the smallest |v| of the 3^11 decisions when the
    problem separates (orthogonal normals: each surface is its own 1-d problem)."""
    rng = np.random.default_rng(3)
    k = 11
    N = np.eye(k + 1)[:, :k]
    c = rng.uniform(0.5, 1.5, k)
    v0 = rng.uniform(-2.0, 2.0, k + 1)
    for tie_policy in (TIE_STAY, TIE_LEAVE):
        outcome, assign, s, v, u, value, tol = solve(N, c, v0, 0.0, tie_policy)
        assert outcome == 0
        for p in range(k):
            assert (abs(u[p]) <= tol[p]) or (u[p] > 0 and s[p] == 1.0) or (u[p] < 0 and s[p] == 0.0)
    # separable: u_p = v0_p + c_p s_p; smallest |u_p| over the consistent choices of each surface
    outcome, assign, s, v, u, value, tol = solve(N, c, v0, 0.0, TIE_STAY)
    expected = v0[k] ** 2
    for p in range(k):
        root = -v0[p] / c[p]
        options = [v0[p] + c[p]] if v0[p] + c[p] > 0 else []
        options += [v0[p]] if v0[p] < 0 else []
        options += [0.0] if 0.0 <= root <= 1.0 else []
        expected += min(o * o for o in options)
    assert value == pytest.approx(expected, rel=1e-12)


def _repelling_instance(seed):
    """``r`` = 8 to 13 repelling surfaces (``c > 0``) with generic normals in ``r`` or ``r + 1`` dimensions."""
    rng = np.random.default_rng(seed)
    r = int(rng.integers(8, 14))
    da = r + int(rng.integers(0, 2))
    return rng.standard_normal((da, r)), rng.uniform(0.5, 1.5, r), rng.standard_normal(da) * 0.5


def _vertices(N, c, v0, leak, tol):
    """``(|v|^2, s)`` of every consistent vertex of the repelling slopes (each surface left down or up)."""
    E = N * c
    out = []
    for bits in itertools.product((leak, 1.0), repeat=N.shape[1]):
        s = np.array(bits)
        v = v0 + E @ s
        u = N.T @ v
        if all((u[p] >= -tol[p]) if s[p] == 1.0 else (u[p] <= tol[p]) for p in range(len(s))):
            out.append((float(v @ v), s))
    return out


@pytest.mark.parametrize("seed", [1, 11, 12, 16])
def test_leave_rule_is_exact_up_to_eleven_repelling_surfaces(seed):
    """``tie="leave"`` compares all ``2^r`` vertices up to ``MAX_ENUMERATED_LEAVE = 11`` repelling surfaces (the
    cost of ``3^7`` decisions): the consistent vertex of largest ``|v|``, as brute force finds it (an ascent used
    to stop at a local maximum from ``r = 8``), in both backends."""
    N, c, v0 = _repelling_instance(seed)
    assert 8 <= N.shape[1] <= 11
    outcome, assign, s, v, u, value, tol = solve(N, c, v0, 0.0, TIE_LEAVE)
    assert outcome == 0
    assert value == pytest.approx(max(x[0] for x in _vertices(N, c, v0, 0.0, tol)), rel=1e-12)
    with mp.workdps(30):
        E = [[mp.mpf(float(x)) * mp.mpf(float(cp)) for x in col] for col, cp in zip(N.T, c)]
        normals = [[mp.mpf(float(x)) for x in col] for col in N.T]
        v0m = [mp.mpf(float(x)) for x in v0]
        size = mp.sqrt(mp.fsum(x * x for x in v0m)) + mp.fsum(mp.sqrt(mp.fsum(x * x for x in e)) for e in E)
        out_mp, assign_mp, _ = mpevents.solve_configuration(normals, v0m, E, mp.mpf(0), size, True, [0] * len(c))
    assert out_mp == 0 and list(assign_mp) == list(assign)


def test_leave_rule_beyond_eleven_surfaces_ends_at_a_consistent_vertex():
    """Twelve repelling surfaces: beyond ``MAX_ENUMERATED_LEAVE`` the ascent ends at a consistent vertex (a KKT
    point of maximising ``|v|^2`` over the box: no slope can move inwards and increase it), here with
    ``|v|^2 = 131.78``, while the largest over the 4096 vertices is 196.97. Finding the largest is NP-hard in
    general (design document, Several surfaces at once: with ``v0 = -E (1 + leak) / 2`` it is MAX-CUT on the Gram
    matrix of ``E``), so this gap is pinned, not a defect to fix by more search."""
    N, c, v0 = _repelling_instance(3)
    assert N.shape == (12, 12)
    outcome, assign, s, v, u, value, tol = solve(N, c, v0, 0.0, TIE_LEAVE)
    assert outcome == 0
    vertices = _vertices(N, c, v0, 0.0, tol)
    assert any(np.array_equal(s, x[1]) for x in vertices)  # consistent
    assert value == pytest.approx(131.77746250554824, rel=1e-12)
    assert max(x[0] for x in vertices) == pytest.approx(196.96960523039428, rel=1e-12)


def test_mpmath_solver_takes_the_same_decisions():
    rng = np.random.default_rng(7)
    for geometry in GEOMETRIES:
        for _ in range(3):
            N, c, v0, leak = random_instance(rng, geometry)
            for tie_policy in (TIE_STAY, TIE_LEAVE):
                outcome, assign, s, v, *_ = solve(N, c, v0, leak, tie_policy)
                with mp.workdps(30):
                    E = [[mp.mpf(float(x)) * mp.mpf(float(cp)) for x in col] for col, cp in zip(N.T, c)]
                    normals = [[mp.mpf(float(x)) for x in col] for col in N.T]
                    v0m = [mp.mpf(float(x)) for x in v0]
                    size = mp.sqrt(mp.fsum(x * x for x in v0m)) + mp.fsum(
                        mp.sqrt(mp.fsum(x * x for x in e)) for e in E)
                    out_mp, assign_mp, _ = mpevents.solve_configuration(normals, v0m, E, mp.mpf(leak), size,
                                                                       tie_policy == TIE_LEAVE, [0] * len(c))
                    s_mp, v_mp, _, _ = mpevents._solve_node(normals, v0m, E, mp.mpf(leak), assign_mp)
                assert out_mp == outcome == 0
                np.testing.assert_allclose([float(x) for x in v_mp], v, rtol=0,
                                           atol=1e-12 * (1 + np.abs(v).max()))


# --------------------------------------------------------------------------------------------------------------
# Flows
# --------------------------------------------------------------------------------------------------------------
def relu_teacher_problem():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 10))
    y = np.sign(np.maximum(X[:, 0], 0) + np.maximum(X[:, 1], 0) - 1.5 * np.maximum(X[:, 2], 0) - 0.3)
    return fl.Problem(X, y, loss="logistic", reduction="mean", bias=False, train_outer=True)


def gaussian_mixture_problem():
    rng = np.random.default_rng(1)
    centres = rng.standard_normal((4, 8)) * 1.5
    labels = np.array([1.0, -1.0, 1.0, -1.0])
    which = rng.integers(0, 4, 120)
    X = centres[which] + 0.7 * rng.standard_normal((120, 8))
    return fl.Problem(X, labels[which], loss="logistic", reduction="mean", bias=False, train_outer=True)


def _check_members(prob, tie, members, t_end):
    inits = fl.random_inits(prob, 20, 100, scheme="balanced", scale=1e-3, seed=0)
    for k in members:
        res = fl.gradient_flow(prob, fl.Params.unpacked(inits[k], prob.bias), t_end, tie=tie)
        assert res.status == "success", (k, res.message)
        assert res.energy_residual <= 1e-10, k
        assert res.inclusion_residual <= 1e-10, k
        assert res.balancedness_drift <= 1e-11, k


#: members of the ReLU-teacher ensemble that ended with "failed" under the former fixed-point search
FORMER_FAILURES = [55, 70, 77, 90]


def test_former_failures_of_the_relu_teacher_ensemble():
    _check_members(relu_teacher_problem(), "stay", FORMER_FAILURES[:1], 1000.0)


@pytest.mark.slow
@pytest.mark.parametrize("tie", ["stay", "leave"])
def test_former_failures_succeed_with_both_tie_rules(tie):
    _check_members(relu_teacher_problem(), tie, FORMER_FAILURES, 1000.0)


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("tie", ["stay", "leave"])
@pytest.mark.parametrize("family", ["relu_teacher", "gaussian_mixture"])
def test_ensembles_with_n_much_larger_than_d_all_succeed(family, tie):
    prob = relu_teacher_problem() if family == "relu_teacher" else gaussian_mixture_problem()
    inits = fl.random_inits(prob, 20, 100, scheme="balanced", scale=1e-3, seed=0)
    ens = fl.ensemble(prob, inits, "flow", t_end=1000, tie=tie)
    assert list(ens.status) == ["success"] * 100
    assert np.all(ens.energy_residual <= 1e-10) and np.all(ens.inclusion_residual <= 1e-10)
    _check_members(prob, tie, range(0, 100, 9), 1000.0)


#: A state of the flow below (t = 22.55 from a balanced start at 1e-3, seed 2): neuron 6 sits on three
#: hyperplanes whose normals are nearly parallel (the fourth feature, scaled by 1e4, dominates them), with its
#: multiplier on sample 0 at 1.
STIFF_STATE = [
    ["0x1.c847fbc1e89c9p-3", "0x1.37d31e0795031p-5", "-0x1.46314d30e527dp-4",
     "-0x1.ff445b429960fp-12", "-0x1.07044bd428625p-5", "0x1.ef2bdf99d532fp-3"],
    ["-0x1.7ff065ed973acp-4", "-0x1.25d4dd76ff312p-4", "-0x1.28947573e25b0p-6",
     "0x1.000408b6ef4b5p-13", "0x1.05ae817c4fc72p-5", "-0x1.fa52be7e6b135p-4"],
    ["0x1.0e0789d5ab3c2p-4", "0x1.69dcbcf54470bp-7", "-0x1.786681c00edfap-6",
     "-0x1.7d0f65eda2d39p-13", "-0x1.36c635e84dc23p-7", "0x1.241b550805617p-4"],
    ["0x1.501b488f81656p-5", "0x1.b663a8925da62p-8", "-0x1.d9e2daa512ce1p-7",
     "-0x1.5b174761a4cb7p-12", "-0x1.8530953f8ad1cp-8", "0x1.6bd73a5e7b51cp-5"],
    ["0x1.929ceb5598443p-4", "0x1.0f70a0ed2af9ap-6", "-0x1.1de558030e969p-5",
     "-0x1.e172e9b031cc5p-15", "-0x1.cf12c02cfb2efp-7", "0x1.b472b50551675p-4"],
    ["-0x1.73dcd7c129d7cp-5", "-0x1.242f6597976b4p-5", "-0x1.41589234ab13fp-7",
     "0x1.dbebee5e0cbafp-18", "0x1.160e499f22b67p-6", "-0x1.f36fb7cb793cep-5"],
    ["-0x1.4a8622635fe1cp-2", "-0x1.47ef204ae6c6fp-3", "0x1.17af40c261201p-4",
     "0x1.ffff1f4ece3b1p-18", "0x1.0ea68d007b98bp-2", "-0x1.cee52d6ea8937p-2"],
    ["-0x1.b5728355f6371p-3", "-0x1.550d7f3473e54p-3", "-0x1.5148d4bfb4a71p-4",
     "0x1.3a13411d56e38p-15", "0x1.ee09f7b18383fp-4", "-0x1.3b17f72a4376ep-2"]
]


def test_a_release_where_nothing_is_consistent_to_rounding_still_makes_progress():
    """One feature 1e4 times the others: the flow is stiff (steps of ~1e-5) and a neuron's normal velocities on
    its nearly parallel hyperplanes are rounding, so that no configuration is consistent to rounding. The driver's
    release of the multiplier leaving its bound (the higher-order terms decide it) used to be re-held by the
    configuration search and released again at the same instant until the run stopped with "failed" (no progress
    in time, at t = 0 from this state); the forced side is now taken and the run goes on, certifying itself."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((30, 4))
    y = np.sign(np.maximum(X[:, 0], 0) + np.maximum(X[:, 1], 0) - 1.5 * np.maximum(X[:, 2], 0) - 0.3)
    X[:, 3] *= 1e4
    prob = fl.Problem(X, y, loss="logistic", reduction="mean", bias=True, train_outer=True)
    state = np.array([[float.fromhex(v) for v in row] for row in STIFF_STATE])
    res = fl.gradient_flow(prob, fl.Params.unpacked(state, True), 0.01)
    assert res.status == "success", res.message
    assert res.energy_residual <= 1e-10 and res.inclusion_residual <= 1e-10
    assert res.loss[-1] < res.loss[0]


@st.composite
def degenerate_problems(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n, d, m = draw(st.integers(2, 12)), draw(st.integers(1, 6)), draw(st.integers(1, 12))
    X = rng.standard_normal((n, d))
    for i in range(1, n):
        pick = draw(st.sampled_from(["generic", "duplicate", "antipodal", "collinear", "origin"]))
        j = int(rng.integers(0, i))
        if pick == "duplicate":
            X[i] = X[j]
        elif pick == "antipodal":
            X[i] = -X[j]
        elif pick == "collinear":
            X[i] = rng.uniform(-2, 2) * X[j]
        elif pick == "origin":
            X[i] = 0.0
    bias = draw(st.booleans())
    W = rng.standard_normal((m, d)) * draw(st.sampled_from([1e-3, 0.3, 1.0]))
    b = rng.standard_normal(m) * 0.3 if bias else None
    for j in range(m):
        if draw(st.booleans()) and d > 1:
            # start exactly on the hyperplanes of up to d - 1 samples (through the origin without bias)
            on = rng.choice(n, size=min(n, int(rng.integers(1, d))), replace=False)
            A = X[on]
            W[j] -= np.linalg.lstsq(A, A @ W[j], rcond=None)[0]
            if b is not None:
                b[j] = 0.0
    a = rng.standard_normal(m)
    loss = draw(st.sampled_from(["exp", "logistic", "square"]))
    y = np.sign(rng.standard_normal(n)) if loss != "square" else rng.standard_normal(n)
    y[y == 0] = 1.0
    leak = draw(st.sampled_from([0.0, 0.1]))
    prob = fl.Problem(X, y, loss=loss, reduction="mean", activation="leaky_relu" if leak else "relu", leak=leak,
                      bias=bias, train_outer=draw(st.booleans()))
    return prob, fl.Params(W=W, b=b, a=a), draw(st.sampled_from(["stay", "leave"]))


@pytest.mark.slow
@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow])
@given(degenerate_problems())
def test_degenerate_problems_never_fail(case):
    """Every run succeeds, and the energy identity and the inclusion hold to 1e-10, on data with duplicate,
    antipodal, collinear and origin points and neurons started on hyperplanes (hyperplanes with exactly dependent
    normals included: 565 of 800 examples of a local run had some)."""
    prob, p0, tie = case
    res = fl.gradient_flow(prob, p0, 5.0, tie=tie, max_steps=50_000, max_events=5_000)
    assert res.status == "success", res.message
    assert res.energy_residual <= 1e-10
    assert res.inclusion_residual <= 1e-10


def test_a_converged_flow_holding_a_surface_within_its_noise_band_certifies_itself():
    """Found by the stress test: square loss, two samples in R^6, three neurons started on both hyperplanes. By
    t = 3.9 the residuals are at the step tolerance's floor (a stiff mode that each step's truncation renews), the
    held surface's multiplier ``num / G_0`` is noise over noise and sits beyond 1 inside its noise band: the engine
    holds it, and the inclusion residual (0.135 before the box was widened by the band) must not count it."""
    X = np.array([[0.7079080519287321, -1.2978863986463782, -1.351859662103759, -0.06429817593459394,
                   0.08585991788977837, -0.5825939205970604],
                  [-1.1146307400594424, 0.23815803494308696, -0.48603928141006014, 1.80636426973369,
                   -0.5342196447004126, -1.988154558011744]])
    W = np.array([
        [2.1271150051629557e-03, -9.5079316092932067e-04, -8.1204335760622819e-04, 3.5756739195912546e-04,
         2.7835640571756214e-04, 7.7834540613891216e-04],
        [7.2519143572204506e-04, -1.7597158894137666e-03, 1.9426060235300851e-04, 1.7892286147654335e-04,
         4.0761784036617079e-04, 3.6990424926553054e-05],
        [-1.0151342106030168e-03, -7.0718105824801457e-04, 3.5647704043275840e-05, -1.5486962527574608e-03,
         1.5620370776898414e-03, 7.6710586179189709e-04],
        [6.9244923700369915e-04, 1.0127091249334504e-03, -8.1191417958405700e-04, -4.8295997996930875e-04,
         1.1718283439840565e-04, -1.0706984152526924e-03],
        [-1.4746687156348887e-04, -9.0046227110272522e-05, 4.0893298474409397e-04, -7.6402946246813415e-04,
         2.9058277688265180e-04, -8.0033122264261966e-04],
        [-2.4017931943216437e-04, 2.3538660042613508e-04, -7.4283982367899634e-04, -2.7739107434691791e-03,
         -8.6599220207252831e-04, 1.6445909454522536e-03],
        [1.1635630617655370e-03, 8.7396306176682750e-04, -2.5847375333076024e-04, 8.8429804586310059e-04,
         8.4110200939355097e-04, 9.2979563674463312e-05],
        [1.7075927652335690e-03, 4.1105133787185100e-05, 1.0503823384145055e-03, 2.6430197012824877e-04,
         -1.1677857742164797e-03, -6.5527763161796898e-04]])
    b = np.array([0.05498056344385543, 0.24119208679701937, 0.32922516185741413, 0.09090688073319503, 0.0,
                  -0.04417006657669744, 0.0, 0.0])
    a = np.array([-0.30623036963008254, 1.5000901899518926, 0.7480068788101213, 1.4059706550116087,
                  -0.1760807379678058, -0.7015898146645919, -2.1363116221752625, 0.43466428615877006])
    prob = fl.Problem(X, [0.3704665336164122, 0.8116983680411908], loss="square", reduction="mean", bias=True,
                      train_outer=False)
    res = fl.gradient_flow(prob, fl.Params(W=W, b=b, a=a), 5.0)
    assert res.status == "success", res.message
    assert any(e.kind == "slide_start" for e in res.events)
    assert res.loss[-1] <= 1e-25  # from 3.3e-2: converged to the tolerance's floor
    assert res.energy_residual <= 1e-10
    assert res.inclusion_residual <= 1e-10


def antipodal_problem():
    """Antipodal and duplicate samples without bias: every neuron's hyperplane through one sample is the
    hyperplane of two, so each event puts a neuron on two surfaces at once."""
    rng = np.random.default_rng(11)
    base = rng.standard_normal((3, 2))
    X = np.r_[base, -base[:1], base[1:2]]
    y = np.array([1.0, -1.0, 1.0, 1.0, -1.0])
    prob = fl.Problem(X, y, loss="logistic", reduction="mean", bias=False, train_outer=True)
    return prob, fl.Params(W=rng.standard_normal((3, 2)) * 0.5, b=None, a=rng.standard_normal(3))


def _multi_surface_events(res):
    times = {}
    for e in res.events:
        times.setdefault((float(e.t), e.neuron), set()).add(e.sample)
    return sum(len(v) >= 2 for v in times.values())


@pytest.mark.parametrize("tie", ["stay", "leave"])
def test_float64_and_30_digits_agree_on_multi_surface_events(tie):
    prob, p0 = antipodal_problem()
    r64 = fl.gradient_flow(prob, p0, 5.0, tie=tie)
    r30 = fl.gradient_flow(prob, p0, 5.0, dps=30, tie=tie)
    assert r64.status == r30.status == "success"
    assert _multi_surface_events(r64) >= 1
    assert [(e.kind, e.neuron, e.sample, e.side) for e in r64.events] == [
        (e.kind, e.neuron, e.sample, e.side) for e in r30.events]
    final = r30.float64("states")[-1]
    assert np.max(np.abs(r64.states[-1] - final)) <= 1e-12 * np.max(np.abs(final))


def _nearly_collinear_case():
    """Four samples without bias, two of them nearly collinear (directions 1e-8 apart after rounding), leaky ReLU,
    exp loss, fixed outer layer: neurons are held on both of their hyperplanes at once."""
    X = np.array([[2.04091912, -2.55566503, 0.41809885], [-0.5663304, 0.70916617, -0.11601738],
                  [-0.53877908, 0.67466605, -0.11037327], [3.32299952, 0.22578661, -0.35263079]])
    W = np.array([[-0.11724029, 0.14458362, -0.07156608], [0.28732761, -0.05994064, 0.00727787],
                  [0.46374626, 0.16353166, -0.15156862], [0.04893841, 0.16920973, 0.56951239],
                  [0.0234001, 0.06116915, 0.2596758], [0.02935387, -0.06745198, 0.23342584],
                  [0.10479155, 0.11425021, 0.18683188], [-0.02475418, -0.06470881, -0.27470239],
                  [0.01563914, 0.04088157, 0.1735508]])
    a = np.array([-0.92589957, 0.58405831, 0.58253842, -0.21482891, -0.78280858, 0.22915391, -2.49389428,
                  0.69012477, 0.49136826])
    prob = fl.Problem(X, [-1.0, 1.0, -1.0, 1.0], loss="exp", reduction="mean", activation="leaky_relu", leak=0.1,
                      bias=False, train_outer=False)
    return prob, fl.Params(W=W, b=None, a=a)


@pytest.mark.parametrize("tie", ["stay", "leave"])
def test_nearly_dependent_normals_succeed_and_certify_themselves(tie):
    """Neuron 7 slides on sample 0's hyperplane and reaches sample 1's, 1e-8 away in direction: holding both would
    take multipliers of order 1e9, so the consistent continuation leaves both (0 up, 1 down), with either rule."""
    prob, p0 = _nearly_collinear_case()
    res = fl.gradient_flow(prob, p0, 5.0, tie=tie)
    assert res.status == "success" and res.energy_residual <= 1e-12 and res.inclusion_residual <= 1e-10
    r30 = fl.gradient_flow(prob, p0, 5.0, dps=30, tie=tie)
    # the 30-digit time (50 digits give the same 1.3326365731734617); the two hyperplanes' normals are 1e-8 apart,
    # so reaching the second from the first is conditioned like 1e8: float64 rounding moves it by up to ~1e-7
    t30 = [float(e.t) for e in r30.events if e.neuron == 7 and e.kind == "slide_end"][0]
    assert abs(t30 - 1.3326365731734617) <= 1e-15
    t64 = [e.t for e in res.events if e.neuron == 7 and e.kind == "slide_end"][0]
    assert abs(t64 - t30) <= 2e-7
    at = [(e.kind, e.sample, e.side) for e in res.events if e.neuron == 7 and e.t == t64]
    assert at == [("slide_end", 0, 1), ("cross", 1, -1)]
    assert [(e.kind, e.neuron, e.sample, e.side) for e in res.events] == [
        (e.kind, e.neuron, e.sample, e.side) for e in r30.events]
    assert r30.inclusion_residual <= 1e-25


def test_held_surfaces_with_nearly_dependent_normals_must_hold_exactly():
    """Two hyperplanes 1e-8 apart in direction, one attracting and one repelling: the least-squares slopes in the
    box make both normal velocities vanish to the zero test (1e-9), but the exact multipliers of holding both are
    of order 1e7: that node is no solution, and the search does not hold both (float64, and mpmath at 15 digits
    where its zero test is as coarse)."""
    N = np.array([[1.0, 1.0], [0.0, 1e-8], [0.0, 0.0]])
    c = np.array([-1.0, 0.8])  # e_k = c_k n_k: sample 0 attracting, sample 1 repelling
    v0 = np.array([-0.5, 0.1, 0.2])
    leak = 0.1
    exact = np.linalg.lstsq(N, v0, rcond=None)[0] / -c
    assert np.all(np.abs(exact) > 1e6)
    E = N * c
    size = np.linalg.norm(v0) + np.linalg.norm(E, axis=0).sum()
    jump, tol = np.empty(2), np.empty(2)
    kevents._surface_scales(N, E, size, jump, tol)
    hold_both = np.array([LCP_FREE, LCP_HOLD])
    s, v, u = np.empty(2), np.empty(3), np.empty(2)
    kevents._solve_node(N, v0, E, leak, hold_both, s, v, u)
    assert kevents._violation(hold_both, s, u, jump, tol, leak)[0] == 0.0 and np.all(np.abs(u) <= tol)
    assert not kevents._holds_exactly(N, v0, E, leak, hold_both, s, u, tol)
    outcome, assign, s, v, u, value, tol = solve(N, c, v0, leak, TIE_STAY)
    assert outcome == 0 and np.sum(np.abs(u) <= tol) < 2
    with mp.workdps(15):
        normals = [[mp.mpf(float(x)) for x in col] for col in N.T]
        Em = [[mp.mpf(float(x)) for x in col] for col in E.T]
        v0m = [mp.mpf(float(x)) for x in v0]
        sizem = mp.mpf(float(size))
        _, limits = mpevents._surface_scales(normals, Em, sizem)
        sm, _, um, _ = mpevents._solve_node(normals, v0m, Em, mp.mpf(leak), list(hold_both))
        assert all(abs(x) <= lim for x, lim in zip(um, limits))
        assert not mpevents._holds_exactly(normals, v0m, Em, mp.mpf(leak), list(hold_both), sm, um, limits)
        out_mp, assign_mp, _ = mpevents.solve_configuration(normals, v0m, Em, mp.mpf(leak), sizem, False, [0, 0])
        _, _, um, _ = mpevents._solve_node(normals, v0m, Em, mp.mpf(leak), assign_mp)
    assert out_mp == 0 and sum(abs(x) <= lim for x, lim in zip(um, limits)) < 2
    assert list(assign_mp) == list(assign)


def _simultaneous_exits_case():
    """Square loss, three samples in R^4 without bias; neurons 0, 3, 4, 6, 7 start on the line where all three
    hyperplanes meet (exactly, in binary), so neurons with one pattern share their multipliers and leave their
    surfaces at one instant: neurons 3 and 7 (repelling, their velocity jumps) and neuron 5 (sliding) on sample 1's
    hyperplane at t = 1.356."""
    X = np.array([[-0.25, 1.75, 0.75, 1.0], [0.25, 1.0, 0.75, 0.25], [1.25, -1.5, -1.25, -1.0]])
    line = np.array([0.0263671875, -0.044921875, 0.0302734375, 0.0625])  # X @ line == 0 exactly
    W = np.array([-3 * line, [-0.2765625, -0.0796875, 0.0703125, 0.1828125], [0.1359375, -0.0375, 0.0328125, 0.1734375],
                  3 * line, -2 * line, [0.2390625, 0.103125, -0.2203125, -0.1125], 2 * line, 2 * line])
    a = np.array([2.25, 1.5625, 0.5625, -0.1875, 0.3125, 0.625, 1.3125, -0.875])
    prob = fl.Problem(X, [-0.6875, -0.875, -0.1875], loss="square", reduction="mean", activation="leaky_relu",
                      leak=0.1, bias=False, train_outer=False)
    return prob, fl.Params(W=W, b=None, a=a)


def test_a_tangent_exit_is_redecided_after_the_releases_of_its_instant():
    """Neuron 5's multiplier reaches leak with the repelling neurons' on the same hyperplane; on the series from
    before the instant it leaves downwards, but once neurons 3 and 7 are released the field holds it (the stress
    test found an energy residual of 4e-5 where it was left: the state went up into a cell whose slope the step did
    not use). float64 and 30 digits take the same decisions."""
    prob, p0 = _simultaneous_exits_case()
    assert np.all(prob.X @ p0.W[[0, 3, 4, 6, 7]].T == 0.0)
    res = fl.gradient_flow(prob, p0, 5.0)
    at = [(e.kind, e.neuron, e.side) for e in res.events if abs(e.t - 1.3564776767760367) < 1e-12 and e.sample == 1]
    assert at == [("slide_end", 3, 1), ("slide_end", 5, -1), ("slide_end", 7, 1), ("stick", 5, 0)]
    assert res.status == "success" and res.energy_residual <= 1e-14 and res.inclusion_residual <= 1e-14
    r30 = fl.gradient_flow(prob, p0, 5.0, dps=30)
    assert [(e.kind, e.neuron, e.sample, e.side) for e in res.events] == [
        (e.kind, e.neuron, e.sample, e.side) for e in r30.events]
    assert float(r30.energy_residual) <= 1e-28
    final = r30.float64("states")[-1]
    assert np.max(np.abs(res.states[-1] - final)) <= 1e-12 * np.max(np.abs(final))


# --------------------------------------------------------------------------------------------------------------
# A neuron at the origin sits on every sample's hyperplane
# --------------------------------------------------------------------------------------------------------------
def _screen_cases(rng):
    """Normal matrices of 17-60 columns (above the screen's threshold): generic, with duplicate and antipodal
    columns, of low rank, with a zero row (no bias) and with zero columns; every dependence is exact in binary, so
    that it is one at 30 digits too."""
    for trial in range(60):
        da, q = int(rng.integers(2, 8)), int(rng.integers(17, 61))
        N = rng.standard_normal((da, q))
        if trial % 5 == 1:
            half = q // 2
            N[:, :half] = N[:, half:2 * half] * rng.choice([-1.0, 2.0], size=half)
        elif trial % 5 == 2:
            # of rank 2 exactly (small integers), but for the one column outside the plane
            N = (rng.integers(-3, 4, (da, 2)) @ rng.integers(-3, 4, (2, q))).astype(float)
            N[:, 0] = rng.standard_normal(da)
        elif trial % 5 == 3:
            N[-1] = 0.0
        elif trial % 5 == 4:
            N[:, rng.integers(0, q, 3)] = 0.0
        yield N


def test_the_dependent_normals_screen_takes_the_direct_tests_decisions():
    """Above ``SCREEN_COLUMNS`` columns the test for dependent hyperplane normals screens them with two greedy
    bases; every verdict equals the per-column least-squares test's, in float64 and at 30 digits."""
    rng = np.random.default_rng(5)
    seen = set()
    for k, N in enumerate(_screen_cases(rng)):
        out = np.zeros(N.shape[1], np.bool_)
        kevents.dependent_columns(N, out)
        direct = [kevents._in_span_of_others(N, p) for p in range(N.shape[1])]
        assert out.tolist() == direct
        seen.update(direct)
        if k % 6 == 0:
            with mp.workdps(30):
                assert mpevents.dependent_columns([[mp.mpf(float(x)) for x in col] for col in N.T]) == direct
    assert seen == {True, False}


def _origin_problem(activation, n=70, bias=False):
    """Logistic loss, ``n`` Gaussian samples in R^2; neuron 0 starts at the origin (on all ``n`` hyperplanes, more
    than a neuron could sit on before), neuron 1 elsewhere."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((n, 2))
    y = np.sign(X[:, 0] - 0.3 * X[:, 1] + 0.2)
    leak = 0.2 if activation == "leaky_relu" else 0.0
    prob = fl.Problem(X, y, loss="logistic", reduction="mean", activation=activation, leak=leak, bias=bias,
                      train_outer=True)
    p0 = fl.Params(W=np.array([[0.0, 0.0], [0.3, -0.2]]), b=np.zeros(2) if bias else None, a=np.array([0.5, 0.4]))
    return prob, p0


@pytest.mark.parametrize("bias", [False, True])
def test_a_relu_neuron_at_the_origin_of_many_samples_stays_there(bias):
    """At the origin a ReLU neuron's velocity set ``-a sum_k G_k [0, 1] x_k`` contains 0 (every slope 0): the
    minimal-norm solution keeps it there, exactly, with ``a`` constant (``sigma(0) = 0``), and it adds nothing to
    the output, so the other neuron follows the flow of the network without it. 30 digits take the same
    decisions."""
    prob, p0 = _origin_problem("relu", bias=bias)
    res = fl.gradient_flow(prob, p0, 3.0)
    assert res.status == "success" and res.energy_residual <= 1e-13 and res.inclusion_residual <= 1e-13
    start = [(e.kind, e.multiplier) for e in res.events if e.t == 0.0 and e.neuron == 0]
    assert start == [("stick", 0.0)] * 70
    assert np.all(res.W[:, 0] == 0.0) and np.all(res.a[:, 0] == 0.5)
    if bias:
        assert np.all(res.b[:, 0] == 0.0)
    alone = fl.gradient_flow(prob, fl.Params(W=p0.W[1:], b=None if p0.b is None else p0.b[1:], a=p0.a[1:]), 3.0)
    np.testing.assert_allclose(res.final.W[1], alone.final.W[0], rtol=1e-13)
    np.testing.assert_allclose(res.final.a[1], alone.final.a[0], rtol=1e-13)
    if not bias:
        r30 = fl.gradient_flow(prob, p0, 3.0, dps=30)
        assert [(e.kind, e.neuron, e.sample) for e in r30.events] == [(e.kind, e.neuron, e.sample) for e in res.events]
        assert float(r30.energy_residual) <= 1e-28
        np.testing.assert_allclose(res.states[-1], r30.float64("states")[-1], rtol=0, atol=1e-14)


def test_a_leaky_neuron_leaves_the_origin_of_many_samples_on_a_consistent_pattern():
    """With ``leak = 0.2`` the velocity set at the origin does not contain 0 here, and the neuron leaves it. Its
    departure velocity must be a fixed point ``v = -a sum_k G_k sigma'(<x_k, v>) x_k`` (each sample on the side
    the velocity takes it to), with ``G`` of the network at ``t = 0``: compared with ``w_0(tau) / tau`` at
    ``tau = 1e-7``."""
    prob, p0 = _origin_problem("leaky_relu")
    res = fl.gradient_flow(prob, p0, 3.0)
    assert res.status == "success" and res.energy_residual <= 1e-13 and res.inclusion_residual <= 1e-13
    tau = 1e-7
    v = res.params_at(tau).W[0] / tau
    X, y = prob.X, prob.y
    z1 = X @ p0.W[1]
    f = p0.a[1] * np.where(z1 > 0, z1, 0.2 * z1)  # leaky ReLU, slope 0.2 below
    G = -y / (1.0 + np.exp(y * f)) / len(y)  # dL/df_k, logistic loss, mean
    z = X @ v
    assert np.min(np.abs(z)) > 1e-3 * np.max(np.abs(z))  # every sample on one side
    fixed = -p0.a[0] * (G * np.where(z > 0, 1.0, 0.2)) @ X
    np.testing.assert_allclose(v, fixed, rtol=1e-5)
    assert np.linalg.norm(fixed) > 1e-3


def test_a_neuron_sliding_into_the_origin_of_many_samples_stays_there():
    """``d = 1`` with a bias and an unbalanced start: neuron 2 starts on the hyperplane of the 14 samples at
    ``x = 0`` (``b = 0``, a repelling tie that the default ``tie="stay"`` keeps) and moves along it into the origin
    of ``(w, b)``, where all 80 hyperplanes meet (it used to stop the run with ``failed``; 8 of 40 seeds of this
    set-up reach the origin). It sticks there for good."""
    rng = np.random.default_rng(3)
    X = rng.integers(-2, 3, size=(80, 1)).astype(float)
    y = rng.choice([-1.0, 1.0], 80)
    prob = fl.Problem(X, y, loss="exp", reduction="mean", activation="leaky_relu", leak=0.01, bias=True,
                      train_outer=True)
    P = fl.random_inits(prob, 4, 1, scheme="normal", scale=3e-5, seed=3)[0]
    p0 = fl.Params.unpacked(P, True)
    res = fl.gradient_flow(prob, p0, 3.0)
    assert res.status == "success" and res.energy_residual <= 1e-13 and res.inclusion_residual <= 1e-13
    at = [e for e in res.events if e.neuron == 2 and e.t > 0.0]
    assert len(at) == 80 - 14 and len({e.t for e in at}) == 1 and 2.8 < at[0].t < 2.9
    assert {e.kind for e in at} <= {"stick", "tie"}
    for late in (res.params_at(2.9), res.final):  # rounding residues of the projection onto the origin
        assert abs(late.W[2, 0]) <= 1e-30 and abs(late.b[2]) <= 1e-30
