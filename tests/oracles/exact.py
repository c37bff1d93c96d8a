"""Closed forms and event-by-event mpmath references for the benchmark problems (BENCHMARKS.md).

Everything here is computed from the mathematics alone (numpy and mpmath, no flowlib code), at ``DPS = 40``
digits unless stated, and returned as float64 numbers (plus mpf where the benchmark reports digits):

* :func:`e1_exact`: E1, one ReLU neuron sliding on ``<w, x_1> = 0`` after ``t* = 1.5592639816...``;
* :func:`seed000_exact`: seed 000's two-neuron network, decoupled ``u/v`` closed form through both sticking kinks
  (docs/design.md, Reference values derived for the checks);
* :func:`leaky_crossing_exact`: one leaky-ReLU neuron crossing its only hyperplane at ``ln((w0 - y)/(-y))``;
* :func:`affine_cells_exact`: square loss, fixed outer layer, no bias: the flow is affine in each cell, solved
  by the exponential of the augmented matrix through a prescribed sequence of crossings (B1's two crossings in
  one step);
* :data:`TWIST_T_ACC`: accumulation time of the twisting oscillator (E3), ``2 sqrt 2 + (2/3) sqrt 6``;
* :func:`oscillator_exact`: nosnoc's oscillator (B7), ``x(t) = e^{t-1} (cos w(t-1), -sin w(t-1))`` after the
  switch at ``t = 1``;
* :func:`switched_single_surface`: exact event-by-event solution of ``x' = A0 x + c0 + sigma c1`` with one linear
  surface (affine phases by matrix exponentials, sliding with Filippov's equivalent control, roots located by
  bracketing on a fine grid and polished by bisection at 50 digits): the relay feedback system of
  Piiroinen & Kuznetsov (2008) eq. (32), B7.
"""

from __future__ import annotations

import math
from functools import lru_cache

import mpmath as mp

__all__ = ["DPS", "TWIST_T_ACC", "affine_cells_exact", "e1_exact", "leaky_crossing_exact", "oscillator_exact",
           "seed000_exact", "switched_single_surface"]

DPS = 40
#: twisting oscillator x1' = x2, x2' = -2 sgn x1 - sgn x2 from (1, 0): Zeno time (E3)
TWIST_T_ACC = "4.4614202866016421631"


def _mpf(v):
    """Exact mpf of a float64 (or mpf, int, str)."""
    return v if isinstance(v, mp.mpf) else mp.mpf(v) if isinstance(v, (int, str)) else mp.mpf(float(v))


# ----------------------------------------------------------------------------------------------------------------
# E1 (sliding, closed form)
# ----------------------------------------------------------------------------------------------------------------

E1_X = ((1.0, 0.0), (0.5, math.sqrt(3.0) / 2.0))
E1_Y = (-1.0, 1.0)
E1_W0 = (1.0, 0.5)


@lru_cache(maxsize=None)
def e1_exact(t: float, dps: int = DPS):
    """E1 (BENCHMARKS.md): ``w(t)`` and the sliding-entry time ``t*`` (both as mpf pairs).

    ``L = 1/4 sum_k (relu(<w, x_k>) - y_k)^2``, ``x_1 = (1, 0)``, ``x_2 = (1/2, sqrt 3/2)`` (float64),
    ``y = (-1, 1)``, ``a = 1`` frozen, ``w0 = (1, 1/2)``. Phase 1 (both active) is affine,
    ``w(t) = e^{At}(w0 + A^-1 b) - A^-1 b``; it reaches ``<w, x_1> = 0`` at ``t*``, after which the Filippov
    solution slides: ``w_1 = 0``, ``w_2 -> 1/s`` like ``e^{-(s^2/2)(t - t*)}``.

    Returns
    -------
    w : tuple of mpf
    t_star : mpf
    """
    with mp.workdps(dps + 10):
        X = mp.matrix([[_mpf(v) for v in row] for row in E1_X])
        Y = mp.matrix([_mpf(v) for v in E1_Y])
        A = -(X.T * X) / 2
        g = (X.T * Y) / 2
        w0 = mp.matrix([_mpf(v) for v in E1_W0])
        Ag = mp.lu_solve(A, g)

        def phase1(tt):
            return mp.expm(A * tt) * (w0 + Ag) - Ag

        t_star = mp.findroot(lambda tt: phase1(tt)[0], mp.mpf("1.559"))
        tt = _mpf(t)
        if tt <= t_star:
            w = phase1(tt)
        else:
            s = X[1, 1]
            w2 = phase1(t_star)[1]
            w = mp.matrix([0, 1 / s + (w2 - 1 / s) * mp.exp(-(s ** 2 / 2) * (tt - t_star))])
        return (+w[0], +w[1]), +t_star


# ----------------------------------------------------------------------------------------------------------------
# seed 000 (two neurons, sticking kinks)
# ----------------------------------------------------------------------------------------------------------------

def seed000_exact(theta0, t, dps: int = DPS):
    """Seed 000's network ``relu(w1 x + b1) - relu(w2 x + b2)`` on ``(-1, -1), (1, 1)``, exp loss (mean).

    Decoupled closed form in ``u = w + b``, ``v = w - b`` (docs/design.md, Reference values derived for the checks;
    requires ``u1 > 0``, ``v2 < 0``): the
    kinks ``v1 = 0`` (neuron 0 on sample 0) and ``u2 = 0`` (neuron 1 on sample 1) are reached at
    ``t_v = -e^{-v2} sinh v1`` and ``t_u = e^{u1} sinh u2`` and stick.

    Returns
    -------
    state : list of mpf
        ``(w1, b1, w2, b2)(t)``.
    events : dict
        ``{"v": t_v, "u": t_u}`` for the kinks that exist.
    """
    with mp.workdps(dps + 10):
        w1, b1, w2, b2 = (_mpf(v) for v in theta0)
        u1, u2, v1, v2 = w1 + b1, w2 + b2, w1 - b1, w2 - b2
        t = _mpf(t)
        events = {}
        if v1 < 0:
            c = v1 + v2
            t_v = -mp.exp(-v2) * mp.sinh(v1)
            events["v"] = t_v
            if t <= t_v:
                diff = mp.log(mp.exp(v1 - v2) + 2 * t)
                v1t, v2t = (c + diff) / 2, (c - diff) / 2
            else:
                v1t, v2t = mp.mpf(0), -mp.log(mp.exp(-c) + (t - t_v))
        else:
            v1t, v2t = v1, -mp.log(mp.exp(-v2) + t)
        if u2 > 0:
            c = u1 + u2
            t_u = mp.exp(u1) * mp.sinh(u2)
            events["u"] = t_u
            if t <= t_u:
                diff = mp.log(mp.exp(u1 - u2) + 2 * t)
                u1t, u2t = (c + diff) / 2, (c - diff) / 2
            else:
                u1t, u2t = mp.log(mp.exp(c) + (t - t_u)), mp.mpf(0)
        else:
            u1t, u2t = mp.log(mp.exp(u1) + t), u2
        state = [(u1t + v1t) / 2, (u1t - v1t) / 2, (u2t + v2t) / 2, (u2t - v2t) / 2]
        return state, events


# ----------------------------------------------------------------------------------------------------------------
# transversal crossings of affine cells
# ----------------------------------------------------------------------------------------------------------------

def leaky_crossing_exact(w0: float, y: float, leak: float, t: float, dps: int = DPS):
    """One sample ``x = 1``, one neuron, ``a = 1``, square loss (sum), leaky ReLU, ``w0 > 0 > y``.

    ``w' = -(w - y)`` until ``w = 0`` at ``t* = ln((w0 - y)/(-y))``, then ``w' = -leak (leak w - y)``.

    Returns
    -------
    w : mpf
    t_star : mpf
    """
    with mp.workdps(dps + 10):
        w0, y, leak, t = _mpf(w0), _mpf(y), _mpf(leak), _mpf(t)
        t_star = mp.log((w0 - y) / (-y))
        if t <= t_star:
            return y + (w0 - y) * mp.exp(-t), t_star
        w_inf = y / leak
        return w_inf - w_inf * mp.exp(-leak ** 2 * (t - t_star)), t_star


def _affine_phase(X, y, slopes, a, w0, t):
    """``w(t)`` in the cell with the given slopes (square loss, sum, no bias, fixed ``a``)."""
    d = len(w0)
    aug = mp.zeros(d + 1, d + 1)
    for xi, yi, s in zip(X, y, slopes):
        for p in range(d):
            for q in range(d):
                aug[p, q] -= (a * s) ** 2 * xi[p] * xi[q]
            aug[p, d] += a * s * yi * xi[p]
    return list((mp.expm(aug * t) * mp.matrix([*w0, 1]))[:d])


def affine_cells_exact(X, y, w0, a, leak, crossings, t_end, guesses, dps: int = DPS):
    """One neuron, square loss (sum), no bias, fixed ``a``, through a prescribed sequence of crossings.

    Parameters
    ----------
    X, y : array_like
        Data (float64, taken exactly).
    w0 : array_like
        Initial weight.
    a, leak : float
    crossings : sequence of int
        The samples whose hyperplanes are crossed, in order (each flips active to inactive).
    t_end : float
    guesses : sequence of float
        Starting points for ``findroot``: the first crossing time, then each gap to the next.

    Returns
    -------
    w : list of mpf
        ``w(t_end)``.
    times : list of mpf
        The crossing times.
    """
    with mp.workdps(dps + 10):
        X = [[_mpf(v) for v in row] for row in X]
        y = [_mpf(v) for v in y]
        a, leak = _mpf(a), _mpf(leak)
        w = [_mpf(v) for v in w0]
        slopes = [mp.mpf(1) if mp.fdot(x, w) > 0 else leak for x in X]
        t, times = mp.mpf(0), []
        for sample, guess in zip(crossings, guesses):
            start = list(w)
            tau = mp.findroot(lambda s: mp.fdot(_affine_phase(X, y, slopes, a, start, s), X[sample]), guess)
            w = _affine_phase(X, y, slopes, a, start, tau)
            t += tau
            times.append(+t)
            slopes[sample] = leak
        w = _affine_phase(X, y, slopes, a, w, _mpf(t_end) - t)
        return [+v for v in w], times


# ----------------------------------------------------------------------------------------------------------------
# B7: nosnoc's oscillator and the relay feedback system
# ----------------------------------------------------------------------------------------------------------------

def oscillator_exact(t: float, omega: float = 2 * math.pi, dps: int = DPS):
    """nosnoc's oscillator from ``x0 = (e^-1, 0)``: ``x' = A2 x`` inside the unit circle, ``A1 x`` outside.

    ``A1 = [[1, w], [-w, 1]]``, ``A2 = [[1, -w], [w, 1]]``: the radius grows like ``e^t`` and reaches 1 at
    ``t = 1`` (one full turn counter-clockwise), then turns clockwise: ``x(t) = e^{t-1} (cos w(t-1),
    -sin w(t-1))`` (nosnoc's ``X_SOL`` at ``T = pi/2``).

    Returns
    -------
    x : tuple of mpf
    t_switch : mpf
        ``1``.
    """
    with mp.workdps(dps + 10):
        t, w = _mpf(t), _mpf(omega)
        if t <= 1:
            r, phi = mp.exp(t - 1), w * t
        else:
            r, phi = mp.exp(t - 1), w - w * (t - 1)  # 2 pi (one turn) then clockwise
        return (r * mp.cos(phi), r * mp.sin(phi)), mp.mpf(1)


class _Phase:
    """One affine phase ``y' = M y`` of the augmented state ``y = (x, 1)``."""

    def __init__(self, M, grid):
        self.M = M
        self.step = mp.expm(M * grid)
        self.grid = grid

    def at(self, y0, tau):
        return mp.expm(self.M * tau) * y0


def _augmented(A, c):
    N = A.rows
    M = mp.zeros(N + 1, N + 1)
    for p in range(N):
        for q in range(N):
            M[p, q] = A[p, q]
        M[p, N] = c[p]
    return M


def _first_root(phase, y0, funcs, horizon, signs0):
    """Earliest ``tau`` in ``(0, horizon]`` where one of the linear functionals ``funcs`` changes sign.

    The sign at ``tau = 0`` is given (``signs0``: the side a phase starts on); brackets come from the grid of
    ``phase``, roots are polished by bisection to the working precision. Returns ``(tau, index)`` or
    ``(horizon, None)``.
    """
    y, tau = y0, mp.mpf(0)
    prev = list(signs0)
    while tau < horizon:
        h = min(phase.grid, horizon - tau)
        y_next = phase.step * y if h == phase.grid else phase.at(y, h)
        vals = [f(y_next) for f in funcs]
        hits = [k for k, v in enumerate(vals) if v * prev[k] <= 0]
        if hits:
            roots = [(_polish(lambda s, k=k: funcs[k](phase.at(y, s)), h), k) for k in hits]
            root, k = min(roots, key=lambda rk: rk[0])
            return tau + root, k
        prev = [mp.sign(v) if v != 0 else prev[k] for k, v in enumerate(vals)]
        y, tau = y_next, tau + h
    return horizon, None


def _polish(f, h):
    """Root of ``f`` in ``(0, h]`` (one sign change) to the working precision: Anderson-Bjorck bracketing."""
    if f(h) == 0:
        return h
    return mp.findroot(f, (mp.mpf(0) if f(mp.mpf(0)) != 0 else h * mp.eps, h), solver="anderson")


def switched_single_surface(A0, c0, c1, normal, x0, t_end, *, grid=1e-3, dps: int = 50):
    """Exact Filippov solution of ``x' = A0 x + c0 + sigma c1``, ``sigma = sign(<n, x>)``, event by event.

    Phases: the two modes ``sigma = +-1`` (affine), and sliding on ``<n, x> = 0`` with the equivalent control
    ``sigma_eq = -<n, A0 x + c0> / <n, c1>`` (affine too), left when ``sigma_eq`` reaches ``+-1`` (onto that side).
    At the surface a state slides when both one-sided normal velocities point into it, else crosses. Roots are
    bracketed on a grid of step ``grid`` (fine against the system's time scales) and bisected at ``dps`` digits.

    Returns
    -------
    x : list of mpf
        ``x(t_end)``.
    events : list of tuple
        ``(t, kind)`` with kind ``"slide_start"``, ``"slide_end"`` or ``"cross"`` (mpf times).
    """
    with mp.workdps(dps):
        A0 = mp.matrix([[_mpf(v) for v in row] for row in A0])
        c0 = mp.matrix([_mpf(v) for v in c0])
        c1 = mp.matrix([_mpf(v) for v in c1])
        n = mp.matrix([_mpf(v) for v in normal])
        N = A0.rows
        nc1 = mp.fdot(n, c1)
        proj = mp.eye(N) - c1 * n.T / nc1
        modes = {s: _Phase(_augmented(A0, c0 + s * c1), _mpf(grid)) for s in (1, -1)}
        slide = _Phase(_augmented(proj * A0, proj * c0), _mpf(grid))

        def g(yv):
            return sum(n[p] * yv[p] for p in range(N))

        def control(yv):
            f = A0 * mp.matrix([yv[p] for p in range(N)]) + c0
            return -mp.fdot(n, f) / nc1

        y = mp.matrix([*(_mpf(v) for v in x0), 1])
        t, T, events = mp.mpf(0), _mpf(t_end), []
        mode = _classify(y, g, control, A0, c0, c1, n, N)
        if mode == 0:
            events.append((t, "slide_start"))
        while t < T:
            if mode == 0:
                tau, k = _first_root(slide, y, [lambda v: control(v) - 1, lambda v: control(v) + 1], T - t,
                                     [-1, 1])
                y, t = slide.at(y, tau), t + tau
                if k is None:
                    break
                mode = 1 if k == 0 else -1
                events.append((t, "slide_end"))
            else:
                tau, k = _first_root(modes[mode], y, [g], T - t, [mode])
                y, t = modes[mode].at(y, tau), t + tau
                if k is None:
                    break
                new = _classify(y, g, control, A0, c0, c1, n, N)
                events.append((t, "slide_start" if new == 0 else "cross"))
                mode = new if new != 0 else 0
        return [+y[p] for p in range(N)], events


def _classify(y, g, control, A0, c0, c1, n, N):
    """On the surface: ``0`` to slide, else the side (``+-1``) both normal velocities lead to; off it: the side."""
    if abs(g(y)) > mp.eps ** (mp.mpf(3) / 4):
        return 1 if g(y) > 0 else -1
    x = mp.matrix([y[p] for p in range(N)])
    f = A0 * x + c0
    v_plus, v_minus = mp.fdot(n, f + c1), mp.fdot(n, f - c1)
    if v_plus < 0 < v_minus:
        return 0
    if v_plus > 0 and v_minus > 0:
        return 1
    if v_plus < 0 and v_minus < 0:
        return -1
    raise ValueError("repelling or tangential surface: not covered by this reference")
