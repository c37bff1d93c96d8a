"""Earliest real root of a polynomial on an interval: exclusion, Descartes isolation, bisection.

The switching functions ``z_ij(t0 + tau)`` are polynomials in ``tau`` over a Taylor step (linear combinations of
the state's Taylor polynomials). A sign test at the step ends misses two crossings inside one step, so every
candidate interval is examined:

1. exclusion: on ``x in [0, 1]``, ``|r(x) - r_0| <= sum_{k>=1} |r_k|``, so ``|r_0| > sum |r_k|`` proves no root;
2. isolation: the number of sign variations of the coefficients of ``(1 + v)^deg r(1 / (1 + v))`` bounds the
   number of roots in ``(0, 1)`` and equals it modulo 2 (Descartes' rule, as in the Vincent–Collins–Akritas
   method heyoka uses); intervals with one variation hold exactly one root, the rest are bisected, leftmost first;
3. polishing: bisection on the scaled polynomial down to adjacent floating-point numbers.
"""

import math

from ._jit import jit
from .tolerances import EPS64 as _EPS, LINEAR_CLEAR

STACK = 128


@jit
def _horner(r, deg, x):
    acc = r[deg]
    for k in range(deg - 1, -1, -1):
        acc = acc * x + r[k]
    return acc


@jit
def _taylor_shift(src, deg, a, out):
    """Coefficients of ``p(a + x)`` from those of ``p(x)`` (``out`` may not alias ``src``)."""
    for k in range(deg + 1):
        out[k] = src[k]
    for i in range(deg):
        for k in range(deg - 1, i - 1, -1):
            out[k] += a * out[k + 1]


@jit
def _sign_variations(s, deg, tmp):
    """Descartes bound on the roots of ``s(u)`` in ``(0, 1)``: variations of ``(1+v)^deg s(1/(1+v))``."""
    for k in range(deg + 1):
        tmp[k] = s[deg - k]
    for i in range(deg):
        for k in range(deg - 1, i - 1, -1):
            tmp[k] += tmp[k + 1]
    count = 0
    last = 0.0
    for k in range(deg + 1):
        v = tmp[k]
        if v != 0.0:
            if last != 0.0 and (v > 0.0) != (last > 0.0):
                count += 1
            last = v
    return count


@jit
def excluded(g, order, bound, drop):
    """True when ``g(tau) / tau^drop`` provably has no root in ``[0, bound]`` (the cheap first test).

    ``|g_drop| > sum_{k > drop} |g_k| bound^(k - drop)`` bounds the polynomial away from 0 on the interval.
    """
    tail = 0.0
    for k in range(order, drop, -1):
        tail = tail * bound + abs(g[k])
    return abs(g[drop]) > tail * bound


@jit
def linear_clear(g0, g1, rest, bound):
    """True when ``g0 + g1 tau + r(tau)``, ``|r| <= rest`` on ``[0, bound]``, provably keeps the sign of ``g0 != 0``.

    The linear part is monotone, so its smallest distance to 0 on the interval is at an end; it must exceed
    ``rest`` plus a margin for the rounding of ``g0 + g1 bound``.
    """
    if g0 == 0.0:
        return False
    end = g0 + g1 * bound
    slack = rest + LINEAR_CLEAR * (abs(g0) + abs(g1) * bound)
    if g0 > 0.0:
        return g0 > slack and end > slack
    return g0 < -slack and end < -slack


@jit
def excluded_linear(g, order, bound, drop):
    """True when ``g(tau) / tau^drop`` provably has no root in ``[0, bound]``, by its linear part.

    Sharper than :func:`excluded` for a polynomial that moves away from 0 or stops short of it within the
    interval: the terms of degree ``>= drop + 2`` are bounded by ``sum |g_k| bound^(k - drop)``, the linear part
    ``g_drop + g_{drop+1} tau`` is checked at both ends (:func:`linear_clear`).
    """
    if order < drop + 1:
        return False
    tail = 0.0
    for k in range(order, drop + 1, -1):
        tail = tail * bound + abs(g[k])
    return linear_clear(g[drop], g[drop + 1], tail * bound * bound, bound)


@jit
def earliest_root(g, order, bound, drop, work):
    """Smallest root in ``(0, bound]`` of ``g(tau) = sum_k g[k] tau^k``, or ``inf`` when there is none.

    Parameters
    ----------
    g : ndarray, shape (order + 1,)
        Coefficients, lowest degree first (may be a strided view).
    order : int
        Degree of ``g``.
    bound : float
        Right end of the search interval, ``> 0``.
    drop : int
        Number of leading coefficients known to vanish: treat ``g[0..drop-1]`` as exactly 0 and look for roots of
        ``g(tau) / tau^drop``. A switching function whose surface the state just crossed has ``drop = 1`` (so the
        crossing just made is not found again); one left tangentially has ``drop = 2``.
    work : ndarray, shape (6, >= max(order + 1, STACK))
        Scratch space (rows 4 and 5 hold the interval stack).

    Returns
    -------
    float
        The root (the first floating-point point past the sign change, within ``bound * eps``), ``bound``
        or below; ``inf`` if there is none. An identically zero polynomial has no isolated root: ``inf``.
    """
    r = work[0]
    shifted = work[1]
    s = work[2]
    tmp = work[3]
    first = drop
    deg = order - first
    # vanishing top coefficients first: scaled by bound^k they would give 0 * inf = NaN on a long interval
    while deg > 0 and g[deg + first] == 0.0:
        deg -= 1
    scale = 1.0
    for k in range(deg + 1):
        r[k] = g[k + first] * scale
        scale *= bound
    while deg > 0 and r[deg] == 0.0:
        deg -= 1
    # a root exactly at tau = 0 is the event already processed: divide it out
    lead = 0
    while lead < deg and r[lead] == 0.0:
        lead += 1
    if lead > 0:
        for k in range(deg - lead + 1):
            r[k] = r[k + lead]
        deg -= lead
    if deg == 0:
        return math.inf
    tail = 0.0
    for k in range(1, deg + 1):
        tail += abs(r[k])
    if abs(r[0]) > tail:
        return math.inf

    stack_a = work[4]
    stack_b = work[5]
    capacity = min(len(stack_a), STACK)
    stack_a[0] = 0.0
    stack_b[0] = 1.0
    top = 1
    while top > 0:
        top -= 1
        a = stack_a[top]
        b = stack_b[top]
        width = b - a
        _taylor_shift(r, deg, a, shifted)
        p = 1.0
        tail = 0.0
        for k in range(deg + 1):
            s[k] = shifted[k] * p
            if k > 0:
                tail += abs(s[k])
            p *= width
        if abs(s[0]) > tail:
            continue
        variations = _sign_variations(s, deg, tmp)
        fa = _horner(r, deg, a)
        if fa == 0.0 and a > 0.0:
            return a * bound
        fb = _horner(r, deg, b)
        change = (fa > 0.0) != (fb > 0.0)
        if variations == 0 and not change:
            continue
        # a sign change at the ends proves a root even when rounding hid it from the coefficient signs (a root
        # within rounding of an end point)
        if variations <= 1 and change:
            lo = a
            hi = b
            while True:
                mid = 0.5 * (lo + hi)
                if mid <= lo or mid >= hi:
                    break
                fm = _horner(r, deg, mid)
                if fm == 0.0:
                    return mid * bound
                if (fm > 0.0) == (fa > 0.0):
                    lo = mid
                else:
                    hi = mid
            return hi * bound
        if width <= 4.0 * _EPS or top + 2 > capacity:
            # a cluster of roots (tangency) narrower than the working precision
            return a * bound if a > 0.0 else b * bound
        mid = 0.5 * (a + b)
        stack_a[top] = mid
        stack_b[top] = b
        stack_a[top + 1] = a
        stack_b[top + 1] = mid
        top += 2
    # Descartes counts roots in the open interval: a root exactly at the bound is checked last
    if _horner(r, deg, 1.0) == 0.0:
        return bound
    return math.inf
