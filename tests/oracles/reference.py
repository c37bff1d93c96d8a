"""Independent high-precision reference ("oracle") for the flowlib gradient flow.

This module integrates the gradient flow of a two-layer (leaky-)ReLU network

    f(x) = sum_j a_j * sigma(<w_j, x> + b_j),   sigma(z) = z if z > 0 else leak * z,

with loss ``L = c * sum_i l(f(x_i), y_i)`` (``c = 1/n`` for ``reduction="mean"``,
``c = 1`` for ``reduction="sum"``) and ``l`` one of ``exp``, ``logistic`` or
``square``, in arbitrary precision with :mod:`mpmath`.  It is written directly
from the mathematical definition and deliberately shares **no code** with
``flowlib`` or ``kernels``: it exists only so that the test suite and the
benchmarks (:mod:`benchmarks.bench`) can compare the library against an
independently computed answer.  It is not part of the installed package.

Method
------
Inside an activation cell (fixed slopes ``s_ij``) the vector field is a
polynomial in the parameters composed with ``exp`` / the logistic function, so
the Taylor coefficients of the solution follow from power-series arithmetic
(Cauchy products, the recurrence ``E' = -y f' E`` for ``E = exp(-y f)`` and
``p' = -p (1 - p) (y f)'`` for ``p = 1 / (1 + exp(y f))``).  A fixed order
``N ~ 1.15 (dps + 6)`` is used with the step ``h = rho / e^2`` (Jorba & Zou),
where ``rho`` is estimated from the last Taylor coefficients; the local
truncation error is then ``~ e^{-2N}``, well below ``10^{-dps}``.  All
internal arithmetic uses ``dps + 10`` digits.

Every switching function ``z_ij(tau)`` is, within a step, the polynomial
``<W_j(tau), x_i> + b_j(tau)``.  Its earliest root in ``(0, h]`` is found by a
cheap exclusion bound, sign sampling on 64 sub-intervals, a check for double
crossings inside each sub-interval (sign of the polynomial at interior extrema)
and a bracketed Newton/bisection refinement.  A surface crossed in the previous
step starts at ~0, so its polynomial is used with the constant term dropped and
divided by ``tau``.  Steps are truncated at the earliest event.

At an event the neurons involved are classified with the normal velocities
``dz_ij/dt = <w_j', x_i> + b_j'``: all sign assignments (active / inactive) of
the neuron's simultaneous surfaces are enumerated and an assignment is
consistent when every surface's velocity, computed with that assignment, has
the matching strict sign.  A unique consistent assignment is applied (only
changed entries are reported as events); otherwise
:class:`NonTransversalEvent` is raised: this oracle only covers
transversal-only problems.

Conventions
-----------
* Initial surfaces with ``z_ij == 0`` exactly are classified the same way at
  ``t = 0``.  The default pattern is "inactive" (``z > 0`` is false), so an
  event ``(0, j, i, +1)`` is reported when such an entry is switched on and
  nothing is reported when it stays inactive.
* Global mpmath precision is never modified; everything runs inside
  ``mpmath.workdps``.
"""

import itertools
import math

import mpmath
import numpy as np

__all__ = ["NonTransversalEvent", "reference_flow", "loss_value"]

_LOSSES = ("exp", "logistic", "square")
_REDUCTIONS = ("mean", "sum")
_GUARD = 10          # extra decimal digits used internally
_NSAMP = 64          # sign samples per step for the root search
_H_MAX = 1           # largest step allowed (flow time)


class NonTransversalEvent(Exception):
    """Raised when an event is not a transversal crossing.

    Parameters
    ----------
    t : mpmath.mpf
        Time of the event.
    neuron : int
        Index ``j`` of the neuron.
    sample : int or tuple of int
        Index ``i`` of the sample (a tuple when several surfaces of the same
        neuron are hit simultaneously).
    kind : str
        ``"sliding"`` (no consistent assignment) or ``"repelling"`` (several
        consistent assignments).
    """

    def __init__(self, t, neuron, sample, kind):
        self.t = t
        self.neuron = neuron
        self.sample = sample
        self.kind = kind
        super().__init__(
            f"non-transversal ({kind}) event at t={mpmath.nstr(t, 20)}, "
            f"neuron {neuron}, sample {sample}")


# ----------------------------------------------------------------------------
# input handling
# ----------------------------------------------------------------------------

def _num(v):
    """Convert a scalar to mpf at the current precision (floats exactly)."""
    if isinstance(v, mpmath.mpf):
        return +v
    if isinstance(v, (int, str)):
        return mpmath.mpf(v)
    return mpmath.mpf(float(v))


class _Problem:
    """Data of one problem converted to mpf (at the current precision)."""

    def __init__(self, X, y, m, *, loss, reduction, leak, bias, train_outer):
        if loss not in _LOSSES:
            raise ValueError(f"loss must be one of {_LOSSES}, got {loss!r}")
        if reduction not in _REDUCTIONS:
            raise ValueError(f"reduction must be one of {_REDUCTIONS}")
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float).reshape(-1)
        if X.ndim != 2 or X.shape[0] != y.shape[0]:
            raise ValueError("X must be (n, d) and y (n,)")
        self.n, self.d = X.shape
        self.m = m
        self.X = [[mpmath.mpf(float(v)) for v in row] for row in X]
        self.y = [mpmath.mpf(float(v)) for v in y]
        self.loss = loss
        self.c = mpmath.mpf(1) / self.n if reduction == "mean" else mpmath.mpf(1)
        self.leak = _num(leak)
        if not (0 <= self.leak < 1):
            raise ValueError("leak must lie in [0, 1)")
        self.bias = bool(bias)
        self.train_outer = bool(train_outer)

    def state(self, W, b, a):
        """Convert (W, b, a) to lists of mpf."""
        W = np.asarray(W, dtype=float)
        if W.ndim != 2 or W.shape != (self.m, self.d):
            raise ValueError("W must be (m, d)")
        Wl = [[mpmath.mpf(float(v)) for v in row] for row in W]
        if b is None or not self.bias:
            if b is not None and np.any(np.asarray(b, dtype=float) != 0):
                raise ValueError("bias=False requires b to be None or zero")
            bl = [mpmath.mpf(0)] * self.m
        else:
            bl = [mpmath.mpf(float(v)) for v in np.asarray(b, dtype=float).reshape(-1)]
        al = [mpmath.mpf(float(v)) for v in np.asarray(a, dtype=float).reshape(-1)]
        if len(bl) != self.m or len(al) != self.m:
            raise ValueError("b and a must have length m")
        return Wl, bl, al

    def z(self, W, b, i, j):
        return mpmath.fdot(self.X[i], W[j]) + b[j]

    def slopes(self, active):
        one, lk = mpmath.mpf(1), self.leak
        return [[one if act else lk for act in row] for row in active]


def _loss_terms(prob, W, b, a):
    """Loss at state (W, b, a), computed from sigma directly (no pattern)."""
    total = []
    for i in range(prob.n):
        f = mpmath.mpf(0)
        for j in range(prob.m):
            z = prob.z(W, b, i, j)
            f += a[j] * (z if z > 0 else prob.leak * z)
        yi = prob.y[i]
        if prob.loss == "exp":
            total.append(mpmath.exp(-yi * f))
        elif prob.loss == "logistic":
            total.append(mpmath.log1p(mpmath.exp(-yi * f)))
        else:
            total.append((f - yi) ** 2 / 2)
    return prob.c * mpmath.fsum(total)


def loss_value(X, y, W, b, a, *, loss, reduction, leak, dps=40):
    """Loss of a network, evaluated in high precision.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Inputs.
    y : array_like, shape (n,)
        Targets / labels.
    W : array_like, shape (m, d)
        First-layer weights (numbers or mpf).
    b : array_like, shape (m,), or None
        Biases (``None`` means zero).
    a : array_like, shape (m,)
        Outer weights.
    loss : {"exp", "logistic", "square"}
        Per-sample loss.
    reduction : {"mean", "sum"}
        Reduction over samples.
    leak : float
        Negative slope of the activation, in ``[0, 1)``.
    dps : int, optional
        Decimal digits (``dps + 10`` are used internally).

    Returns
    -------
    mpmath.mpf
        ``L = c * sum_i l(f(x_i), y_i)``.
    """
    with mpmath.workdps(dps + _GUARD):
        Wa = _mp_matrix(W)
        prob = _Problem(X, y, len(Wa), loss=loss, reduction=reduction,
                        leak=leak, bias=True, train_outer=False)
        ba = [mpmath.mpf(0)] * prob.m if b is None else _mp_vector(b)
        aa = _mp_vector(a)
        return _loss_terms(prob, Wa, ba, aa)


def _mp_vector(v):
    return [_num(x) for x in (v.tolist() if isinstance(v, np.ndarray) else v)]


def _mp_matrix(M):
    rows = M.tolist() if isinstance(M, np.ndarray) else M
    return [[_num(x) for x in row] for row in rows]


# ----------------------------------------------------------------------------
# Taylor series of the flow inside one cell
# ----------------------------------------------------------------------------

def _cauchy(u, v, k):
    """Coefficient k of the product of the series u and v."""
    return mpmath.fdot(u[:k + 1], v[k::-1])


def _taylor(prob, W, b, a, s, N):
    """Taylor coefficients (orders 0..N) of the flow in the cell with slopes s.

    With ``U_j = a_j w_j`` and ``V_j = a_j b_j`` (series products when ``a`` is
    trained) the field reads ``f_i = sum_j s_ij (<U_j, x_i> + V_j)``,
    ``S_j = sum_i G_i s_ij x_i``, ``T_j = sum_i G_i s_ij``,
    ``w_j' = -a_j S_j``, ``b_j' = -a_j T_j`` and
    ``a_j' = -sum_i G_i s_ij z_ij = -(<w_j, S_j> + b_j T_j)``.

    Returns
    -------
    Wc, bc, ac : nested lists
        ``Wc[j][l][k]``, ``bc[j][k]``, ``ac[j][k]``: coefficient of ``tau^k``.
    """
    n, m, d = prob.n, prob.m, prob.d
    X, y, c = prob.X, prob.y, prob.c
    to, bias = prob.train_outer, prob.bias
    zero = mpmath.mpf(0)
    Wc = [[[W[j][l]] for l in range(d)] for j in range(m)]
    bc = [[b[j]] for j in range(m)]
    ac = [[a[j]] for j in range(m)]
    fc = [[] for _ in range(n)]       # f_i
    Gc = [[] for _ in range(n)]       # G_i = c l'(f_i)
    Ec = [[] for _ in range(n)]       # exp(-y f) or p = 1/(1+exp(y f))
    Qc = [[] for _ in range(n)]       # p (1 - p) (logistic only)
    uc = [[] for _ in range(n)]       # k * (-y f)_k or k * (y f)_k
    Sc = [[[] for _ in range(d)] for _ in range(m)]   # sum_i G_i s_ij x_i
    Tc = [[] for _ in range(m)]                       # sum_i G_i s_ij
    for k in range(N):
        # U_j = a_j w_j and V_j = a_j b_j, order k
        if to:
            Uk = [[_cauchy(ac[j], Wc[j][l], k) for l in range(d)] for j in range(m)]
            Vk = [_cauchy(ac[j], bc[j], k) if bias else zero for j in range(m)]
        else:
            Uk = [[a[j] * Wc[j][l][k] for l in range(d)] for j in range(m)]
            Vk = [a[j] * bc[j][k] for j in range(m)]
        # network outputs f_i, order k
        for i in range(n):
            fc[i].append(mpmath.fsum(s[i][j] * (mpmath.fdot(X[i], Uk[j]) + Vk[j])
                                     for j in range(m) if s[i][j] != 0))
        # residual weights G_i, order k
        for i in range(n):
            yi = y[i]
            if prob.loss == "square":
                Gk = c * (fc[i][0] - yi) if k == 0 else c * fc[i][k]
            elif prob.loss == "exp":
                # E = exp(-y f):  E' = (-y f)' E
                uc[i].append(-yi * fc[i][k] * k)
                if k == 0:
                    Ek = mpmath.exp(-yi * fc[i][0])
                else:
                    Ek = mpmath.fdot(uc[i][1:k + 1], Ec[i][k - 1::-1]) / k
                Ec[i].append(Ek)
                Gk = -c * yi * Ek
            else:
                # p = 1/(1 + exp(y f)):  p' = -p (1 - p) (y f)'
                uc[i].append(yi * fc[i][k] * k)
                if k == 0:
                    pk = 1 / (1 + mpmath.exp(yi * fc[i][0]))
                else:
                    pk = -mpmath.fdot(uc[i][1:k + 1], Qc[i][k - 1::-1]) / k
                Ec[i].append(pk)
                Qc[i].append(pk - _cauchy(Ec[i], Ec[i], k))
                Gk = -c * yi * pk
            Gc[i].append(Gk)
        # S_j and T_j, order k
        for j in range(m):
            gs = [Gc[i][k] * s[i][j] for i in range(n)]
            for l in range(d):
                Sc[j][l].append(mpmath.fdot(gs, [X[i][l] for i in range(n)]))
            Tc[j].append(mpmath.fsum(gs))
        # derivatives of the state at order k -> state coefficients k+1
        k1 = k + 1
        for j in range(m):
            for l in range(d):
                r = _cauchy(ac[j], Sc[j][l], k) if to else a[j] * Sc[j][l][k]
                Wc[j][l].append(-r / k1)
            if bias:
                r = _cauchy(ac[j], Tc[j], k) if to else a[j] * Tc[j][k]
                bc[j].append(-r / k1)
            else:
                bc[j].append(zero)
            if to:
                r = mpmath.fsum(_cauchy(Wc[j][l], Sc[j][l], k) for l in range(d))
                if bias:
                    r += _cauchy(bc[j], Tc[j], k)
                ac[j].append(-r / k1)
            else:
                ac[j].append(zero)
    return Wc, bc, ac


def _field(prob, W, b, a, s):
    """Vector field -grad L at (W, b, a) with slopes s: (W', b', a')."""
    Wc, bc, ac = _taylor(prob, W, b, a, s, 1)
    return ([[Wc[j][l][1] for l in range(prob.d)] for j in range(prob.m)],
            [bc[j][1] for j in range(prob.m)], [ac[j][1] for j in range(prob.m)])


def _horner(p, t):
    r = mpmath.mpf(0)
    for coef in reversed(p):
        r = r * t + coef
    return r


def _deriv(p):
    return [k * p[k] for k in range(1, len(p))]


def _sgn(v):
    return (v > 0) - (v < 0)


# ----------------------------------------------------------------------------
# root finding for one switching polynomial
# ----------------------------------------------------------------------------

def _refine(P, D, lo, hi, slo, eps):
    """Root of P in [lo, hi] with sign(P(lo)) = slo != sign(P(hi)).

    Newton iteration safeguarded by bisection on the bracket.
    """
    x = (lo + hi) / 2
    scale = max(abs(lo), abs(hi))
    for _ in range(1000):
        px = _horner(P, x)
        if px == 0:
            return x
        if _sgn(px) == slo:
            lo = x
        else:
            hi = x
        dx = _horner(D, x)
        xn = x - px / dx if dx != 0 else None
        if xn is None or not (lo <= xn <= hi):
            xn = (lo + hi) / 2
        if abs(xn - x) <= eps * scale or hi - lo <= eps * scale:
            return xn
        x = xn
    raise RuntimeError("root refinement did not converge")


def _first_root(P, h, eps):
    """Earliest root of the polynomial P (coefficient list) in (0, h], or None.

    ``P(0)`` must be nonzero.  Sub-intervals of a uniform grid are scanned in
    order; on each one a sign change is refined by :func:`_refine`, and
    without a sign change an interior extremum of the other sign (a double
    crossing) is looked for unless the derivative bound excludes a root.
    """
    p0 = P[0]
    if p0 == 0:
        raise RuntimeError("switching function exactly zero at step start")
    # cheap exclusion: |P(0)| > sum_k |P_k| h^k  ==>  no root in [0, h]
    absP = [abs(q) for q in P]
    if abs(p0) > _horner([mpmath.mpf(0)] + absP[1:], h):
        return None
    D = _deriv(P)
    D2 = _deriv(D)
    M = _horner(_deriv(absP), h)          # >= max |P'| on [0, h]
    delta = h / _NSAMP
    ta, va = mpmath.mpf(0), p0
    for q in range(1, _NSAMP + 1):
        tb = h * q / _NSAMP
        vb = _horner(P, tb)
        sa, sb = _sgn(va), _sgn(vb)
        if sb == 0:
            return tb
        if sa != sb:
            return _refine(P, D, ta, tb, sa, eps)
        # same sign at both ends: a root inside needs |P(ta)| + |P(tb)| <= M delta;
        # then look for an interior extremum of the other sign (double crossing)
        if abs(va) + abs(vb) <= M * delta:
            da, db = _sgn(_horner(D, ta)), _sgn(_horner(D, tb))
            if da != 0 and db != 0 and da != db:
                te = _refine(D, D2, ta, tb, da, eps)
                se = _sgn(_horner(P, te))
                if se == 0:
                    return te
                if se != sa:
                    return _refine(P, D, ta, te, sa, eps)
        ta, va = tb, vb
    return None


# ----------------------------------------------------------------------------
# event classification
# ----------------------------------------------------------------------------

def _classify(prob, W, b, a, active, j, samples, t, vtol):
    """Unique consistent activation assignment of neuron j's surfaces.

    Returns a dict ``{i: bool}`` (True = active); raises
    :class:`NonTransversalEvent` when there is none or more than one.
    """
    consistent = []
    for sigma in itertools.product((False, True), repeat=len(samples)):
        act = [row[:] for row in active]
        for i, sg in zip(samples, sigma):
            act[i][j] = sg
        Wd, bd, _ = _field(prob, W, b, a, prob.slopes(act))
        vscale = max([abs(v) for v in Wd[j]] + [abs(bd[j])])
        ok = True
        for i, sg in zip(samples, sigma):
            v = mpmath.fdot(prob.X[i], Wd[j]) + bd[j]
            thr = vtol * vscale * (1 + mpmath.fsum(abs(x) for x in prob.X[i]))
            if not ((v > thr) if sg else (v < -thr)) or v == 0:
                ok = False
                break
        if ok:
            consistent.append(dict(zip(samples, sigma)))
    if len(consistent) != 1:
        kind = "sliding" if not consistent else "repelling"
        smp = samples[0] if len(samples) == 1 else tuple(samples)
        raise NonTransversalEvent(t, j, smp, kind)
    return consistent[0]


def _apply_events(prob, W, b, a, active, hits, t, vtol, events):
    """Classify the surfaces in ``hits`` at time t, update ``active``."""
    by_neuron = {}
    for i, j in sorted(hits):
        by_neuron.setdefault(j, []).append(i)
    new = {}
    for j, samples in sorted(by_neuron.items()):
        new[j] = _classify(prob, W, b, a, active, j, samples, t, vtol)
    for j, assign in sorted(new.items()):
        for i, act in sorted(assign.items()):
            if act != active[i][j]:
                active[i][j] = act
                events.append((t, j, i, 1 if act else -1))


# ----------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------

def _eval_state(Wc, bc, ac, tau):
    W = [[_horner(cl, tau) for cl in row] for row in Wc]
    b = [_horner(cb, tau) for cb in bc]
    a = [_horner(ca, tau) for ca in ac]
    return W, b, a


def _copy_state(W, b, a):
    return [row[:] for row in W], b[:], a[:]


def reference_flow(X, y, W, b, a, t_end, *, loss, reduction="mean", leak=0.0,
                   bias=True, train_outer=False, dps=40, t_eval=()):
    """Integrate the piecewise-smooth gradient flow in high precision.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Inputs (converted exactly from float64).
    y : array_like, shape (n,)
        Targets / labels.
    W : array_like, shape (m, d)
        Initial first-layer weights.
    b : array_like, shape (m,), or None
        Initial biases.  With ``bias=False`` it must be ``None`` or zero
        (biases are then zero and frozen); a nonzero ``b`` raises ValueError.
    a : array_like, shape (m,)
        Initial outer weights (frozen unless ``train_outer``).
    t_end : float or mpmath.mpf
        Final flow time (``>= 0``).
    loss : {"exp", "logistic", "square"}
        Per-sample loss.
    reduction : {"mean", "sum"}, optional
        ``c = 1/n`` or ``c = 1``.
    leak : float, optional
        Negative slope of the activation, in ``[0, 1)``.
    bias : bool, optional
        Whether biases are trained.
    train_outer : bool, optional
        Whether the outer weights ``a`` are trained.
    dps : int, optional
        Target decimal digits; ``dps + 10`` digits are used internally.
    t_eval : sequence of float, optional
        Times in ``[0, t_end]`` at which the state is also returned.

    Returns
    -------
    dict
        ``'events'``: list of ``(t, j, i, direction)`` sorted by time, with
        ``t`` an mpf, neuron ``j``, sample ``i`` and direction ``+1`` (becomes
        active) or ``-1`` (becomes inactive);
        ``'W'``, ``'b'``, ``'a'``: state at ``t_end`` as nested lists of mpf;
        ``'at'``: list of ``(W, b, a)`` at each time of ``t_eval`` (in the given
        order); ``'loss'``: loss at ``t_end`` (mpf).

    Raises
    ------
    NonTransversalEvent
        If an event (including a zero pre-activation at ``t = 0``) is not a
        transversal crossing.
    """
    wp = dps + _GUARD
    with mpmath.workdps(wp):
        m = np.asarray(W, dtype=float).shape[0]
        prob = _Problem(X, y, m, loss=loss, reduction=reduction, leak=leak,
                        bias=bias, train_outer=train_outer)
        W, b, a = prob.state(W, b, a)
        n, d = prob.n, prob.d
        t_end = _num(t_end)
        if t_end < 0:
            raise ValueError("t_end must be >= 0")
        tev = [_num(t) for t in t_eval]
        if any(t < 0 or t > t_end for t in tev):
            raise ValueError("t_eval times must lie in [0, t_end]")
        order = sorted(range(len(tev)), key=lambda q: tev[q])
        at = [None] * len(tev)
        pos = 0                                  # next index into `order`

        eps = mpmath.mpf(2) ** (-mpmath.mp.prec + 6)
        tol_t = mpmath.mpf(10) ** (-((3 * dps) // 4))   # simultaneity, 1e-30 @ 40
        vtol = tol_t                                    # "zero" normal velocity
        N = int(math.ceil((dps + 6) * math.log(10) / 2)) + 2
        e2 = mpmath.exp(-2)

        # initial pattern and exact zeros
        active = [[prob.z(W, b, i, j) > 0 for j in range(m)] for i in range(n)]
        hits = [(i, j) for i in range(n) for j in range(m)
                if prob.z(W, b, i, j) == 0]
        events = []
        t = mpmath.mpf(0)
        if hits:
            _apply_events(prob, W, b, a, active, hits, t, vtol, events)
        just = set(hits)

        while True:
            while pos < len(order) and tev[order[pos]] <= t:
                at[order[pos]] = _copy_state(W, b, a)
                pos += 1
            if t >= t_end:
                break
            s = prob.slopes(active)
            Wc, bc, ac = _taylor(prob, W, b, a, s, N)
            # step size from the last coefficients
            comps = ([cl for row in Wc for cl in row]
                     + (bc if prob.bias else []) + (ac if prob.train_outer else []))
            xnorm = max([mpmath.mpf(1)] + [abs(cs[0]) for cs in comps])
            inv_rho = mpmath.mpf(0)
            for k in range(N - 3, N + 1):
                ck = max(abs(cs[k]) for cs in comps)
                if ck > 0:
                    inv_rho = max(inv_rho, (ck / xnorm) ** (mpmath.mpf(1) / k))
            h = _num(_H_MAX) if inv_rho == 0 else min(e2 / inv_rho, _num(_H_MAX))
            last = t_end - t <= h
            if last:
                h = t_end - t
            # earliest root of every switching polynomial in (0, h]
            roots = {}
            for i in range(n):
                for j in range(m):
                    P = [mpmath.fdot(prob.X[i], [Wc[j][l][k] for l in range(d)])
                         + bc[j][k] for k in range(N + 1)]
                    if (i, j) in just:
                        P = P[1:]
                    r = _first_root(P, h, eps)
                    if r is not None:
                        roots[(i, j)] = r
            if roots:
                tau = min(roots.values())
                lim = tau + tol_t * max(1, abs(t + tau))
                hits = [key for key, r in roots.items() if r <= lim]
            else:
                tau, hits = h, []
            # dense output inside the step
            t_new = t_end if (last and not hits) else t + tau
            while pos < len(order) and tev[order[pos]] <= t_new:
                at[order[pos]] = _eval_state(Wc, bc, ac, tev[order[pos]] - t)
                pos += 1
            W, b, a = _eval_state(Wc, bc, ac, tau)
            t = t_new
            if hits:
                _apply_events(prob, W, b, a, active, hits, t, vtol, events)
            just = set(hits)

        events.sort(key=lambda e: (e[0], e[1], e[2]))
        return {
            "events": events,
            "W": W, "b": b, "a": a,
            "at": at,
            "loss": _loss_terms(prob, W, b, a),
        }
