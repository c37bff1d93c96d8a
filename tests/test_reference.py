"""Tests of the independent mpmath oracle (``tests/oracles/reference.py``) itself.

The oracle is checked against closed forms (affine flows of the square loss),
against :func:`mpmath.odefun` on a smooth piece, against the energy identity
``dL/dt = -|theta'|^2`` across events, and for self-consistency (precision and
step-size independence).  Nothing from ``flowlib`` is used.
"""

import numpy as np
import mpmath
import pytest

from tests.oracles import reference
from tests.oracles.reference import NonTransversalEvent, loss_value, reference_flow


def mpf(v):
    """Exact mpf of a float64."""
    return mpmath.mpf(float(v))


def flat(W, b, a):
    return [v for row in W for v in row] + list(b) + list(a)


def max_abs_diff(u, v):
    return max(abs(p - q) for p, q in zip(u, v))


def field(X, y, W, b, a, *, loss, reduction, leak, bias, train_outer):
    """-grad L written directly from the definition (pattern from sign of z)."""
    n, m, d = len(X), len(W), len(X[0])
    c = mpmath.mpf(1) / n if reduction == "mean" else mpmath.mpf(1)
    z = [[mpmath.fdot(X[i], W[j]) + b[j] for j in range(m)] for i in range(n)]
    s = [[1 if z[i][j] > 0 else leak for j in range(m)] for i in range(n)]
    f = [mpmath.fsum(a[j] * s[i][j] * z[i][j] for j in range(m)) for i in range(n)]
    if loss == "exp":
        G = [-c * y[i] * mpmath.exp(-y[i] * f[i]) for i in range(n)]
    elif loss == "logistic":
        G = [-c * y[i] / (1 + mpmath.exp(y[i] * f[i])) for i in range(n)]
    else:
        G = [c * (f[i] - y[i]) for i in range(n)]
    dW = [[-mpmath.fsum(G[i] * a[j] * s[i][j] * X[i][l] for i in range(n))
           for l in range(d)] for j in range(m)]
    db = [(-mpmath.fsum(G[i] * a[j] * s[i][j] for i in range(n)) if bias else 0)
          for j in range(m)]
    da = [(-mpmath.fsum(G[i] * s[i][j] * z[i][j] for i in range(n)) if train_outer
           else 0) for j in range(m)]
    return dW, db, da


# ----------------------------------------------------------------------------
# (a) square loss, ReLU, affine flow until a sliding event
# ----------------------------------------------------------------------------

X_A = np.array([[1.0, 0.0], [np.cos(np.pi / 3), np.sin(np.pi / 3)]])
Y_A = np.array([-1.0, 1.0])
W_A = np.array([[1.0, 0.5]])
A_A = np.array([1.0])


def _closed_form_a():
    """w(t) = expm(A t)(w0 + A^{-1} b) - A^{-1} b (both samples active)."""
    Xm = mpmath.matrix([[mpf(v) for v in row] for row in X_A])
    ym = mpmath.matrix([mpf(v) for v in Y_A])
    A = -(Xm.T * Xm) / 2
    bb = Xm.T * ym / 2
    w0 = mpmath.matrix([mpf(v) for v in W_A[0]])
    shift = mpmath.lu_solve(A, bb)
    return lambda t: mpmath.expm(A * t) * (w0 + shift) - shift


def test_square_affine_closed_form():
    r = reference_flow(X_A, Y_A, W_A, None, A_A, 1.5, loss="square",
                       reduction="mean", bias=False, t_eval=[0.75, 0.0])
    assert r["events"] == []
    with mpmath.workdps(40):
        w = _closed_form_a()
        for t, (Wt, bt, at) in zip([mpmath.mpf("0.75"), 0], r["at"]):
            ref = w(t)
            assert max(abs(Wt[0][l] - ref[l]) for l in range(2)) < mpmath.mpf("1e-35")
            assert bt == [0] and at == [1]
        ref = w(mpmath.mpf("1.5"))
        assert max(abs(r["W"][0][l] - ref[l]) for l in range(2)) < mpmath.mpf("1e-35")
        # loss = 1/4 sum (w.x_i - y_i)^2 (both samples active)
        Xm = [[mpf(v) for v in row] for row in X_A]
        L = mpmath.fsum((mpmath.fdot(Xm[i], ref) - mpf(Y_A[i])) ** 2 for i in range(2)) / 4
        assert abs(r["loss"] - L) < mpmath.mpf("1e-35")


def test_square_sliding_event_raises():
    with mpmath.workdps(40):
        w = _closed_form_a()
        t_star = mpmath.findroot(lambda t: w(t)[0], mpmath.mpf("1.56"))
        # sample 2 stays strictly active up to t*
        assert mpmath.fdot([mpf(v) for v in X_A[1]], w(t_star)) > 0.1
    assert abs(t_star - mpmath.mpf("1.5592639816054089")) < 1e-14
    with pytest.raises(NonTransversalEvent) as info:
        reference_flow(X_A, Y_A, W_A, None, A_A, 2.0, loss="square",
                       reduction="mean", bias=False)
    err = info.value
    assert (err.neuron, err.sample, err.kind) == (0, 0, "sliding")
    with mpmath.workdps(40):
        assert abs(err.t - t_star) < mpmath.mpf("1e-30")


# ----------------------------------------------------------------------------
# (b) leaky ReLU, one sample: scalar linear ODE for z with a crossing
# ----------------------------------------------------------------------------

def _scalar_closed_form(z0, a, lam, y, r, t):
    """z(t) and crossing time for z' = -(a s z - y) a s r, s switching at 0."""
    s0 = 1 if z0 > 0 else lam
    kappa, zinf = a * a * s0 * s0 * r, y / (a * s0)
    t_star = None
    if zinf * z0 < 0:
        t_star = mpmath.log((zinf - z0) / zinf) / kappa
    if z0 == 0:
        t_star = mpmath.mpf(0)
    if t_star is None or t < t_star:
        return zinf + (z0 - zinf) * mpmath.exp(-kappa * t), t_star
    s1 = lam if s0 == 1 and z0 != 0 else 1
    kappa1, zinf1 = a * a * s1 * s1 * r, y / (a * s1)
    return zinf1 * (1 - mpmath.exp(-kappa1 * (t - t_star))), t_star


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("w0, b0, y, direction", [
    ([-1.0, 0.5], -0.0625, 1.0, 1),      # inactive -> active
    ([1.0, -0.5], 0.0625, -1.0, -1),     # active -> inactive
    ([1.5, -1.0], 0.0, 1.0, 1),          # z = 0 exactly at t = 0
])
def test_leaky_scalar_crossing(bias, w0, b0, y, direction):
    x, a, lam, T = [0.5, 0.75], 1.5, 0.25, 3.0
    if not bias:
        b0 = 0.0
    r = reference_flow(np.array([x]), np.array([y]), np.array([w0]),
                       np.array([b0]), np.array([a]), T, loss="square",
                       reduction="sum", leak=lam, bias=bias, t_eval=[1.0])
    with mpmath.workdps(40):
        xm, wm = [mpf(v) for v in x], [mpf(v) for v in w0]
        rr = mpmath.fdot(xm, xm) + (1 if bias else 0)
        z0 = mpmath.fdot(xm, wm) + mpf(b0)
        if w0 == [1.5, -1.0]:
            assert z0 == 0
        for t, W, b in [(mpmath.mpf(T), r["W"], r["b"]),
                        (mpmath.mpf(1), r["at"][0][0], r["at"][0][1])]:
            zt, t_star = _scalar_closed_form(z0, mpf(a), mpf(lam), mpf(y), rr, t)
            for l in range(2):
                assert abs(W[0][l] - (wm[l] + (zt - z0) / rr * xm[l])) < mpmath.mpf("1e-35")
            if bias:
                assert abs(b[0] - (mpf(b0) + (zt - z0) / rr)) < mpmath.mpf("1e-35")
            else:
                assert b[0] == 0
        assert len(r["events"]) == 1
        te, j, i, dirn = r["events"][0]
        assert (j, i, dirn) == (0, 0, direction)
        assert abs(te - t_star) < mpmath.mpf("1e-30")
        assert 0 <= t_star < T


def test_relu_dying_neuron_is_not_transversal():
    # leak = 0, single sample crossing downwards: velocity with s = 0 is 0
    with pytest.raises(NonTransversalEvent) as info:
        reference_flow(np.array([[0.6, 0.8]]), np.array([-1.0]), np.array([[1.0, -0.5]]),
                       None, np.array([1.5]), 3.0, loss="square", reduction="sum",
                       leak=0.0, bias=False)
    assert info.value.kind == "sliding"
    with mpmath.workdps(40):
        xm = [mpf(0.6), mpf(0.8)]
        z0 = mpmath.fdot(xm, [mpf(1.0), mpf(-0.5)])
        _, t_star = _scalar_closed_form(z0, mpf(1.5), mpmath.mpf(0), mpf(-1.0),
                                        mpmath.fdot(xm, xm), mpmath.mpf(0))
        assert abs(info.value.t - t_star) < mpmath.mpf("1e-30")


def test_simultaneous_crossing():
    # symmetric samples: w_2 stays 0, so z_1 = z_2 = w_1 cross together
    X = np.array([[1.0, 0.5], [1.0, -0.5]])
    y, a, lam = np.array([1.0, 1.0]), 1.5, 0.25
    r = reference_flow(X, y, np.array([[-0.25, 0.0]]), None, np.array([a]), 2.0,
                       loss="square", reduction="sum", leak=lam, bias=False)
    with mpmath.workdps(40):
        zt, t_star = _scalar_closed_form(mpf(-0.25), mpf(a), mpf(lam), mpmath.mpf(1),
                                         mpmath.mpf(2), mpmath.mpf(2))
        assert [e[1:] for e in r["events"]] == [(0, 0, 1), (0, 1, 1)]
        assert all(abs(e[0] - t_star) < mpmath.mpf("1e-30") for e in r["events"])
        assert abs(r["W"][0][0] - zt) < mpmath.mpf("1e-35") and r["W"][0][1] == 0


# ----------------------------------------------------------------------------
# (c) exp / logistic losses: odefun on a smooth piece, energy identity
# ----------------------------------------------------------------------------

X_C = np.array([[0.0, 0.25], [0.125, -0.875], [-1.125, 0.375]])
Y_C = np.array([1.0, -1.0, 1.0])
W_C = np.array([[0.375, 1.875], [-0.625, 0.375]])
B_C = np.array([0.125, -0.125])
A_C = np.array([-1.25, -1.5])
KW_C = dict(reduction="mean", leak=0.2, bias=True, train_outer=True)


def _mp_data():
    return [[mpf(v) for v in row] for row in X_C], [mpf(v) for v in Y_C]


def _unflat(th, m=2, d=2):
    W = [th[j * d:(j + 1) * d] for j in range(m)]
    return W, th[m * d:m * d + m], th[m * d + m:]


@pytest.mark.parametrize("loss, T", [("exp", "0.12"), ("logistic", "0.4")])
def test_smooth_piece_against_odefun(loss, T):
    r = reference_flow(X_C, Y_C, W_C, B_C, A_C, T, loss=loss, dps=30,
                       **KW_C)
    assert r["events"] == []
    with mpmath.workdps(30):
        Xm, ym = _mp_data()

        def F(t, th):
            dW, db, da = field(Xm, ym, *_unflat(list(th)), loss=loss, **KW_C)
            return flat(dW, db, da)

        sol = mpmath.odefun(F, 0, flat([[mpf(v) for v in row] for row in W_C],
                                        [mpf(v) for v in B_C], [mpf(v) for v in A_C]))
        ref = sol(mpmath.mpf(T))
        assert max_abs_diff(flat(r["W"], r["b"], r["a"]), ref) < mpmath.mpf("1e-25")


@pytest.mark.parametrize("loss", ["exp", "logistic"])
def test_energy_identity_across_events(loss):
    T, dps = mpmath.mpf(3), 40
    r0 = reference_flow(X_C, Y_C, W_C, B_C, A_C, T, loss=loss, dps=dps, **KW_C)
    assert len(r0["events"]) == 3
    with mpmath.workdps(dps + 10):
        # Gauss-Legendre nodes on sub-pieces (length <= 1/16) between events
        cuts = [mpmath.mpf(0)] + [e[0] for e in r0["events"]] + [T]
        gl = mpmath.calculus.quadrature.GaussLegendre(mpmath.mp)
        base = gl.calc_nodes(4, mpmath.mp.prec)            # 24 nodes on [-1, 1]
        nodes, weights = [], []
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            k = int(mpmath.ceil((hi - lo) * 16))
            for q in range(k):
                u, v = lo + (hi - lo) * q / k, lo + (hi - lo) * (q + 1) / k
                for xq, wq in base:
                    nodes.append((u + v) / 2 + (v - u) / 2 * xq)
                    weights.append((v - u) / 2 * wq)
    r = reference_flow(X_C, Y_C, W_C, B_C, A_C, T, loss=loss, dps=dps,
                       t_eval=nodes, **KW_C)
    with mpmath.workdps(dps + 10):
        Xm, ym = _mp_data()
        dissipation = mpmath.fsum(
            wq * mpmath.fsum(v ** 2 for v in flat(*field(Xm, ym, *st, loss=loss, **KW_C)))
            for wq, st in zip(weights, r["at"]))
        L0 = loss_value(X_C, Y_C, W_C, B_C, A_C, loss=loss, reduction="mean",
                        leak=0.2, dps=dps)
        assert abs(r["loss"] - (L0 - dissipation)) < mpmath.mpf("1e-35") * L0
        assert r["loss"] < L0
        # the final loss agrees with loss_value at the final state
        Lend = loss_value(X_C, Y_C, r["W"], r["b"], r["a"], loss=loss,
                          reduction="mean", leak=0.2, dps=dps)
        assert abs(Lend - r["loss"]) < mpmath.mpf("1e-40")
    # events are also unchanged by the extra t_eval points
    assert [e[1:] for e in r["events"]] == [e[1:] for e in r0["events"]]


# ----------------------------------------------------------------------------
# self-consistency
# ----------------------------------------------------------------------------

def test_precision_and_step_independence(monkeypatch):
    kw = dict(loss="exp", **KW_C)
    r40 = reference_flow(X_C, Y_C, W_C, B_C, A_C, 1.5, dps=40, **kw)
    r55 = reference_flow(X_C, Y_C, W_C, B_C, A_C, 1.5, dps=55, **kw)
    monkeypatch.setattr(reference, "_H_MAX", mpmath.mpf(1) / 32)
    rsm = reference_flow(X_C, Y_C, W_C, B_C, A_C, 1.5, dps=40, **kw)
    assert len(r40["events"]) == 3
    with mpmath.workdps(60):
        s40 = flat(r40["W"], r40["b"], r40["a"])
        for other in (r55, rsm):
            assert [e[1:] for e in other["events"]] == [e[1:] for e in r40["events"]]
            assert max(abs(e[0] - f[0]) for e, f in
                       zip(other["events"], r40["events"])) < mpmath.mpf("1e-38")
            assert max_abs_diff(s40, flat(other["W"], other["b"], other["a"])) \
                < mpmath.mpf("1e-38")


def test_loss_value_closed_form():
    X, y = np.array([[1.0, 2.0], [-1.0, 0.5]]), np.array([1.0, -1.0])
    W, b, a = np.array([[0.5, -0.25]]), np.array([0.25]), np.array([2.0])
    # z = (0.25, -0.375) -> f = (0.5, 2 * 0.1 * (-0.375))
    with mpmath.workdps(40):
        f = [mpmath.mpf("0.5"), 2 * mpf(0.1) * mpmath.mpf("-0.375")]
        yf = [f[0], -f[1]]
        expect = {
            "exp": mpmath.fsum(mpmath.exp(-v) for v in yf) / 2,
            "logistic": mpmath.fsum(mpmath.log(1 + mpmath.exp(-v)) for v in yf),
            "square": ((f[0] - 1) ** 2 + (f[1] + 1) ** 2) / 2,
        }
        for loss, red in [("exp", "mean"), ("logistic", "sum"), ("square", "sum")]:
            got = loss_value(X, y, W, b, a, loss=loss, reduction=red, leak=0.1)
            assert abs(got - expect[loss]) < mpmath.mpf("1e-38")


def test_global_precision_untouched():
    before = mpmath.mp.prec
    reference_flow(X_A, Y_A, W_A, None, A_A, 0.5, loss="square", bias=False)
    assert mpmath.mp.prec == before
