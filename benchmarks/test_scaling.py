"""pytest-benchmark: the large-problem path of the kernels (benchmark B5, scaling), on a small grid.

Timings are recorded, never asserted. What is asserted is that the BLAS-shaped kernels compute what they
should: the Taylor coefficients against the independent mpmath implementation (:mod:`flowlib.mp.series`, every
order, held surfaces included) and the first two against numpy formulas (``theta' = -grad L``,
``theta'' = -H theta'``); the event screen against an exhaustive root search over every switching polynomial;
one flow step at ``m = 2000`` against numpy. ``python -m benchmarks.scaling`` prints the full table.
"""

import numpy as np
import pytest
from mpmath import mp, mpf

import flowlib as fl
from benchmarks.scaling import StepParts, case, numpy_gradient
from flowlib.kernels import driver, roots, series
from flowlib.running import order_for

ORDER = order_for(1e-13)
GRID = [(16, 24, 10), (64, 100, 20), (200, 200, 30)]


def _relative(got, want):
    """Largest error of ``got`` relative to the largest entry of ``want`` (per leading index when 2-D+)."""
    scale = np.max(np.abs(want))
    return float(np.max(np.abs(got - want)) / scale) if scale > 0 else float(np.max(np.abs(got)))


def _held_case(m, n, d, seed=3):
    """A case whose every other neuron is held on one of its surfaces (the sliding/sticking projection)."""
    prob, p0 = case(m, n, d, seed=seed)
    parts = StepParts(prob, p0, ORDER)
    mode = np.zeros((n, m), np.int8)
    for j in range(0, m, 2):
        mode[(3 * j) % n, j] = driver.MODE_HELD
    offset = np.zeros(m + 1, np.int64)
    samples, _, pinv, _, _, _ = driver.build_constraints(parts.Xa, prob.bias, mode, offset,
                                                         driver.no_surfaces(parts.Xa.shape[1]))
    parts.S[mode == driver.MODE_HELD] = 0.0
    parts.cons = (offset, samples, pinv)
    parts.Cm = np.zeros((ORDER + 1, len(samples)))
    return prob, parts, mode


@pytest.mark.parametrize("loss", ["logistic", "exp", "square"])
@pytest.mark.parametrize("log_clock", [False, True])
def test_taylor_coefficients_match_mpmath(loss, log_clock):
    m, n, d = 16, 24, 10  # n m (d + 1) above BLAS_MIN_WORK: the matrix-product path
    assert n * m * (d + 1) >= series.BLAS_MIN_WORK
    prob, parts, _ = _held_case(m, n, d)
    if loss != "logistic":
        y = prob.y if loss == "exp" else prob.y * 0.5
        prob = fl.Problem(prob.X, y, loss=loss, reduction="mean", bias=True, train_outer=True)
        parts.prob = prob
    s0 = 0.25
    offset, samples, pinv = parts.cons
    series.taylor_coefficients(parts.network(), ORDER, log_clock, s0, parts.S, offset, samples, pinv, parts.Cm,
                               parts.recurrence)
    from flowlib.mp import series as mps

    with mp.workdps(40):
        data = mps.MPData.from_problem(prob)
        S = [[mpf(float(v)) for v in row] for row in parts.S]
        P = [[mpf(float(v)) for v in row] for row in parts.P]
        constraints = [[(slot, int(samples[slot]), [mpf(float(v)) for v in pinv[slot]])
                        for slot in range(offset[j], offset[j + 1])] for j in range(m)]
        ref = mps.taylor_coefficients(data, S, P, ORDER, constraints, mpf(s0) if log_clock else None)
        want = np.array([[[float(v) for v in row] for row in Ck] for Ck in ref.C])
        want_m = np.array([[float(v) for v in col] for col in ref.Cm]).T
    for k in range(ORDER + 1):
        assert _relative(parts.C[k], want[k]) <= 1e-12, (k, _relative(parts.C[k], want[k]))
    assert _relative(parts.Cm[:ORDER], want_m[:ORDER]) <= 1e-12


def test_first_coefficients_match_numpy_gradient_and_hessian():
    m, n, d = 64, 100, 20
    prob, p0 = case(m, n, d, seed=5)
    parts = StepParts(prob, p0, ORDER)
    Xa, P, S, c, y = parts.Xa, parts.P, parts.S, prob.scale, prob.y
    da = d + 1
    grad_wb, grad_a = numpy_gradient(Xa, y, c, P)
    v = -np.column_stack([grad_wb, grad_a])
    assert _relative(parts.C[1], v) <= 1e-12
    # theta'' = -H v under the fixed pattern (forward mode on the gradient of the logistic loss)
    W, a = P[:, :da], P[:, da]
    dW, da_ = v[:, :da], v[:, da]
    Z = Xa @ W.T
    f = (S * Z) @ a
    sig = 1.0 / (1.0 + np.exp(y * f))          # sigma(-y f)
    G = -c * y * sig
    df = (S * Z) @ da_ + (S * (Xa @ dW.T)) @ a
    dG = c * sig * (1.0 - sig) * df               # c l''(f) df, l'' = sigma(y f) sigma(-y f)
    dgrad_wb = da_[:, None] * ((G[:, None] * S).T @ Xa) + a[:, None] * ((dG[:, None] * S).T @ Xa)
    dgrad_a = (dG[:, None] * S * Z).sum(0) + (G[:, None] * S * (Xa @ dW.T)).sum(0)
    acc = -np.column_stack([dgrad_wb, dgrad_a])
    assert _relative(2.0 * parts.C[2], acc) <= 1e-12


@pytest.mark.parametrize("scale", [1.0, 1e-150, 1e145])
def test_energies_match_numpy(scale):
    """The energy integrals on large states (Gram matrix / node values as matrix products) against numpy."""
    prob, p0 = case(200, 50, 30, seed=9)
    parts = StepParts(prob, p0, ORDER)
    C = parts.C * scale
    h = parts.h
    K = ORDER
    D = np.array([(k + 1) * C[k + 1].ravel() * h**k for k in range(K)])
    gram = D @ D.T
    want = h * sum(gram[k, l] / (k + l + 1) for k in range(K) for l in range(K))
    got = series.velocity_energy(C, K, h)
    assert abs(got - want) <= 1e-12 * abs(want)
    nodes, weights = np.polynomial.legendre.leggauss(K + 1)
    nodes, weights = 0.5 * (nodes + 1.0), 0.5 * weights
    s0, span = 2.0, 3.5
    want = 0.0
    for p in range(4):
        width = span / 4
        for x, wgt in zip(nodes, weights):
            tau = (p + x) * width
            deriv = sum(k * C[k] * tau ** (k - 1) for k in range(1, K + 1))
            want += wgt * width * np.sum(deriv * deriv) * np.exp(-(s0 + tau))
    got = series.velocity_energy_log(C, K, span, s0, nodes, weights)
    assert abs(got - want) <= 1e-12 * abs(want)


@pytest.mark.parametrize("m,n,d", [(16, 24, 10), (200, 200, 30)])
def test_switching_screen_matches_exhaustive_search(m, n, d):
    prob, p0 = case(m, n, d, seed=7)
    parts = StepParts(prob, p0, ORDER)
    K = ORDER
    # every polynomial, then the plain scan the screen replaces: excluded() or earliest_root() on each
    Zall = np.einsum("iq,kjq->ijk", parts.Xa, parts.C[:, :, : d + 1])
    Zall[:, :, 0] = parts.Z0
    for bound in (parts.h, parts.h * 1e-3):
        want, found_want = bound, False
        work = np.empty((6, 128))
        for i in range(n):
            for j in range(m):
                g = np.ascontiguousarray(Zall[i, j])
                if roots.excluded(g, K, want, 0):
                    continue
                tau = roots.earliest_root(g, K, want, 0, work)
                if tau <= want:
                    want, found_want = tau, True
        parts.h = bound
        got, found = parts.screen()
        assert found == found_want
        assert abs(got - want) <= 1e-12 * want
        # the pairs reached at the bound found, as the driver collects them after an event
        hit = np.zeros((n, m), np.bool_)
        reach = got * (1.0 + 64 * 2.0**-52)
        driver.reached_switching(parts.Xa, parts.C, parts.Ct, parts.ready, parts.pn, parts.xn, K, parts.Z0,
                                 parts.Z1, parts.drop, parts.active, reach, hit, parts.work, parts.g, parts.cand,
                                 parts.n_cand)
        expect = np.array([[roots.earliest_root(np.ascontiguousarray(Zall[i, j]), K, reach, 0, work) <= reach
                            for j in range(m)] for i in range(n)])
        assert np.array_equal(hit, expect)
        assert hit.any() == found


def test_one_step_at_m2000_matches_numpy():
    m, n, d = 2000, 100, 20
    prob, p0 = case(m, n, d, seed=1)
    res = fl.gradient_flow(prob, p0, 1e5, max_steps=1)
    assert res.n_steps == 1 and res.status == "max_steps"
    C = res.coefficients[0]
    assert np.all(np.isfinite(C))
    P = p0.packed()
    Xa = prob.augmented_inputs
    grad_wb, grad_a = numpy_gradient(Xa, prob.y, prob.scale, P)
    assert _relative(C[1], -np.column_stack([grad_wb, grad_a])) <= 1e-12
    # the step ends at the earliest crossing of any of the n m surfaces: checked by brute force in numpy
    h = res.t[1] - res.t[0]
    Zall = np.einsum("iq,kjq->ijk", Xa, C[:, :, : d + 1])
    taus = np.linspace(0.0, h * (1.0 - 1e-9), 129)[1:]
    values = Zall @ (taus[:, None] ** np.arange(ORDER + 1)).T       # (n, m, 128)
    assert np.all(np.sign(values) == np.sign(Zall[..., :1]))          # no surface crossed before h
    at_h = np.abs(Zall @ h ** np.arange(ORDER + 1)) / (np.abs(Zall) @ h ** np.arange(ORDER + 1))
    i, j = np.unravel_index(np.argmin(at_h), at_h.shape)
    assert at_h[i, j] <= 1e-12                                         # and one reached it at h
    assert res.n_events >= 1 and (res.events[0].sample, res.events[0].neuron) == (i, j)
    assert np.all(np.isfinite(res.final.W)) and res.loss[1] < res.loss[0]
    drop = res.loss[0] - res.loss[1]
    assert abs(drop - res.energy[0]) <= 1e-9 * drop + 1e-15 * res.loss[0]


@pytest.mark.benchmark(group="scaling")
@pytest.mark.parametrize("m,n,d", GRID)
def test_taylor_step_parts(benchmark, m, n, d):
    prob, p0 = case(m, n, d)
    parts = StepParts(prob, p0, ORDER)

    def step_parts():
        parts.taylor()
        return parts.screen()

    bound, found = benchmark.pedantic(step_parts, rounds=3, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(m=m, n=n, d=d, order=ORDER, found=bool(found))
    assert np.all(np.isfinite(parts.C)) and 0.0 < bound <= parts.h


@pytest.mark.benchmark(group="scaling")
@pytest.mark.parametrize("m,n,d", GRID)
def test_numpy_gradient(benchmark, m, n, d):
    prob, p0 = case(m, n, d)
    Xa, P = np.ascontiguousarray(prob.augmented_inputs), p0.packed()
    grad_wb, grad_a = benchmark.pedantic(numpy_gradient, args=(Xa, prob.y, prob.scale, P), rounds=5, iterations=1)
    assert np.all(np.isfinite(grad_wb)) and np.all(np.isfinite(grad_a))
