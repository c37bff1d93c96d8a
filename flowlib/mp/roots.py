"""Earliest real root of a polynomial on an interval, over mpmath numbers.

The algorithm of :mod:`flowlib.kernels.roots` (exclusion test, Descartes / Vincent–Collins–Akritas isolation by
bisection, leftmost first) at working precision; an isolated root is polished by safeguarded Newton iteration
inside its bracket instead of plain bisection (a few iterations instead of ``3.3 dps``). Call inside
``mp.workdps(...)``.
"""

from __future__ import annotations

from mpmath import mp, mpf

#: Deepest bisection before an unresolved cluster of roots is reported at its left end.
MAX_DEPTH = 400


def _horner(r, x):
    acc = r[-1]
    for c in reversed(r[:-1]):
        acc = acc * x + c
    return acc


def _horner_with_derivative(r, x):
    value, slope = r[-1], mpf(0)
    for c in reversed(r[:-1]):
        slope = slope * x + value
        value = value * x + c
    return value, slope


def _shift_scale(r, a, width):
    """Coefficients of ``r(a + width u)``."""
    out = list(r)
    deg = len(r) - 1
    for i in range(deg):
        for k in range(deg - 1, i - 1, -1):
            out[k] += a * out[k + 1]
    p = mpf(1)
    for k in range(deg + 1):
        out[k] *= p
        p *= width
    return out


def _sign_variations(s):
    """Descartes bound on the roots of ``s(u)`` in ``(0, 1)``: variations of ``(1 + v)^deg s(1 / (1 + v))``."""
    tmp = list(reversed(s))
    deg = len(s) - 1
    for i in range(deg):
        for k in range(deg - 1, i - 1, -1):
            tmp[k] += tmp[k + 1]
    count, last = 0, 0
    for v in tmp:
        if v:
            if last and (v > 0) != (last > 0):
                count += 1
            last = v
    return count


def excluded(g, bound, drop: int) -> bool:
    """True when ``g(tau) / tau^drop`` provably has no root in ``[0, bound]``."""
    tail = mpf(0)
    for c in reversed(g[drop + 1:]):
        tail = tail * bound + abs(c)
    return abs(g[drop]) > tail * bound


def _polish(r, lo, hi, f_lo):
    """Root of ``r`` in ``[lo, hi]`` (a sign change): safeguarded Newton; returns the bracket end past it."""
    tol = 8 * mp.eps * hi
    x = (lo + hi) / 2
    for _ in range(MAX_DEPTH):
        value, slope = _horner_with_derivative(r, x)
        if value == 0:
            return x
        if (value > 0) == (f_lo > 0):
            lo = x
        else:
            hi = x
        if hi - lo <= tol:
            break
        step = value / slope if slope else hi - lo
        guess = x - step
        if abs(step) <= tol / 4:
            # converged from one side: step a little past the root so the next point closes the bracket
            guess -= tol / 4 if step > 0 else -tol / 4
        x = guess if lo < guess < hi else (lo + hi) / 2
    return hi


def earliest_root(g, bound, drop: int = 0):
    """Smallest root in ``(0, bound]`` of ``g(tau) = sum_k g[k] tau^k`` divided by ``tau^drop``, or ``None``.

    Parameters
    ----------
    g : list of mpf
        Coefficients, lowest degree first.
    bound : mpf
        Right end of the search interval, ``> 0``.
    drop : int
        Leading coefficients treated as exactly 0 (see :func:`flowlib.kernels.roots.earliest_root`).

    Returns
    -------
    mpf or None
        The root (within a few ulps of working precision, on the far side of the sign change), or ``None``.
    """
    r = []
    p = mpf(1)
    for c in g[drop:]:
        r.append(c * p)
        p *= bound
    while len(r) > 1 and r[-1] == 0:
        r.pop()
    while len(r) > 1 and r[0] == 0:
        r.pop(0)
    if len(r) == 1:
        return None
    if abs(r[0]) > mp.fsum(abs(c) for c in r[1:]):
        return None
    eps = mp.eps
    stack = [(mpf(0), mpf(1), 0)]
    while stack:
        a, b, depth = stack.pop()
        s = _shift_scale(r, a, b - a)
        if abs(s[0]) > mp.fsum(abs(c) for c in s[1:]):
            continue
        variations = _sign_variations(s)
        fa, fb = s[0], mp.fsum(s)
        if fa == 0 and a > 0:
            return a * bound
        change = (fa > 0) != (fb > 0) and fb != 0
        if variations == 0 and not change:
            continue
        if variations <= 1 and change:
            return _polish(r, a, b, fa) * bound
        if b - a <= 4 * eps or depth >= MAX_DEPTH:
            # a cluster of roots (tangency) narrower than the working precision
            return a * bound if a > 0 else b * bound
        mid = (a + b) / 2
        stack.append((mid, b, depth + 1))
        stack.append((a, mid, depth + 1))
    if _horner(r, mpf(1)) == 0:
        return bound
    return None
