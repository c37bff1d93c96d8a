"""Earliest real root of a polynomial on an interval, over mpmath numbers.

The algorithm of :mod:`flowlib.kernels.roots` (exclusion test, Descartes / Vincent–Collins–Akritas isolation by
bisection, leftmost first) at working precision; an isolated root is polished by safeguarded Newton iteration
inside its bracket instead of plain bisection (a few iterations instead of ``3.3 dps``). Call inside
``mp.workdps(...)``.

The arithmetic runs on raw mpf tuples with the libmp operations that mpf arithmetic calls, at the same precision
and rounding: the numbers are those of the same formulas written with mpf objects, without creating one object per
operation.
"""

from __future__ import annotations

from mpmath import mp
from mpmath.libmp import fone, from_int, fzero, mpf_abs, mpf_add, mpf_div, mpf_gt, mpf_le, mpf_lt, mpf_mul, \
    mpf_mul_int, mpf_neg, mpf_sub, mpf_sum

from flowlib.mp.fast import arithmetic

#: Deepest bisection before an unresolved cluster of roots is reported at its left end.
MAX_DEPTH = 400

_TWO, _FOUR = from_int(2), from_int(4)
_AT_BOUND = "bound"  #: the root is the bound itself (returned as given)


def _horner(r, x, prec, rnd):
    mul_add = arithmetic(rnd)[2]
    acc = r[-1]
    for c in reversed(r[:-1]):
        acc = mul_add(acc, x, c, prec)
    return acc


def _horner_with_derivative(r, x, prec, rnd):
    mul_add = arithmetic(rnd)[2]
    value, slope = r[-1], fzero
    for c in reversed(r[:-1]):
        slope = mul_add(slope, x, value, prec)
        value = mul_add(value, x, c, prec)
    return value, slope


def _shift_scale(r, a, width, prec, rnd):
    """Coefficients of ``r(a + width u)``."""
    mul, _, mul_add = arithmetic(rnd)
    out = list(r)
    deg = len(r) - 1
    for i in range(deg):
        for k in range(deg - 1, i - 1, -1):
            out[k] = mul_add(a, out[k + 1], out[k], prec)
    p = fone
    for k in range(deg + 1):
        out[k] = mul(out[k], p, prec)
        p = mul(p, width, prec)
    return out


def _sign_variations(s, prec, rnd):
    """Descartes bound on the roots of ``s(u)`` in ``(0, 1)``: variations of ``(1 + v)^deg s(1 / (1 + v))``."""
    add = arithmetic(rnd)[1]
    tmp = list(reversed(s))
    deg = len(s) - 1
    for i in range(deg):
        for k in range(deg - 1, i - 1, -1):
            tmp[k] = add(tmp[k], tmp[k + 1], prec)
    count, last = 0, None
    for v in tmp:
        if v != fzero:
            if last is not None and mpf_gt(v, fzero) != mpf_gt(last, fzero):
                count += 1
            last = v
    return count


def _dominant(r, prec, rnd) -> bool:
    """``|r[0]| > sum |r[1:]|`` (no root in ``[0, 1]``), with the roundings of ``abs`` and ``mp.fsum``."""
    tail = mpf_sum([mpf_abs(c, prec, rnd) for c in r[1:]], prec, rnd)
    return mpf_gt(mpf_abs(r[0], prec, rnd), tail)


def excluded(g, bound, drop: int) -> bool:
    """True when ``g(tau) / tau^drop`` provably has no root in ``[0, bound]``: ``|g[drop]| > sum_k |g[k]| bound^(k -
    drop)`` with the sum by Horner's rule, rounded at each operation as mpf arithmetic is.

    The answer is decided from the exact sum (Python integers) when ``|g[drop]|`` lies outside the sum's rounding
    bound; only a near tie runs the rounded recurrence, so the answer is always that of the rounded one."""
    return excluded_raw([c._mpf_ for c in g[drop:]], bound._mpf_)


def excluded_raw(coefs, b) -> bool:
    """:func:`excluded` for the raw coefficients ``coefs = g[drop:]`` and the raw bound ``b``."""
    prec, rnd = mp._prec_rounding
    decided = _excluded_exact(coefs, b, prec)
    return _excluded_rounded(coefs, b, prec, rnd) if decided is None else decided


def _excluded_rounded(coefs, b, prec, rnd) -> bool:
    tail = fzero
    for c in reversed(coefs[1:]):
        tail = mpf_add(mpf_mul(tail, b, prec, rnd), mpf_abs(c, prec, rnd), prec, rnd)
    return mpf_gt(mpf_abs(coefs[0], prec, rnd), mpf_mul(tail, b, prec, rnd))


#: Widest exponent gap the exact test of :func:`excluded` aligns (beyond it the rounded recurrence decides).
_MAX_GAP = 4096


def _excluded_exact(coefs, b, prec):
    """:func:`excluded` from the exact ``X = sum_k |c_k| b^k`` (k >= 1): True or False when ``|c_0|`` is outside
    ``X (1 +- (6n + 8) 2^-prec)`` (the rounded Horner sum, ``n`` steps of two roundings, the final product and the
    roundings of ``abs``, lies inside), None otherwise or for a value that is not finite."""
    _, bm, be, bbc = b
    if not bm or b[0]:
        return None
    quick = _excluded_by_size(coefs, be + bbc)
    if quick is not None:
        return quick
    man, exp = 0, 0
    for sign, cm, ce, _ in reversed(coefs[1:]):
        if not cm and ce:
            return None
        if not man:
            man, exp = cm, ce
            continue
        man, exp = man * bm, exp + be
        if cm:
            gap = exp - ce
            if abs(gap) > _MAX_GAP:
                return None
            man, exp = ((man << gap) + cm, ce) if gap > 0 else (man + (cm << -gap), exp)
    _, lm, le, _ = coefs[0]
    if not lm and le:
        return None
    if not man:
        return bool(lm)  # the tail is an exact 0
    if not lm:
        return False
    man, exp = man * bm, exp + be
    top_l, top_x = le + lm.bit_length(), exp + man.bit_length()
    if top_l > top_x + 1:
        return True
    if top_l < top_x - 1:
        return False
    low = min(le, exp)
    lhs = (lm << (le - low)) << prec
    slack = (6 * len(coefs) + 8) * (man << (exp - low))
    rhs = (man << (exp - low)) << prec
    if lhs > rhs + slack:
        return True
    if lhs < rhs - slack:
        return False
    return None


def _excluded_by_size(coefs, top_b):
    """:func:`_excluded_exact` where the leading bits decide it: ``|c_0|`` and the largest term ``|c_k| b^k`` of
    ``X`` (``2^(top - 1) <= |x| < 2^top`` with ``top = exp + bc``, ``2^(top_b - 1) <= b < 2^top_b``) that many
    binades apart that ``|c_0| > 2 X`` or ``|c_0| < X / 2``, far outside the exact test's rounding bound; None
    otherwise, or for a zero ``c_0``, a tail that is 0, or a value that is not finite."""
    _, lm, le, lbc = coefs[0]
    if not lm or any(not c[1] and c[2] for c in coefs):
        return None
    upper = [c[2] + c[3] + k * top_b for k, c in enumerate(coefs) if k and c[1]]  # |c_k| b^k < 2^upper
    if not upper:
        return None
    top_l = le + lbc
    if top_l - 1 >= max(upper) + len(upper).bit_length() + 1:  # |c_0| >= 2^(top_l - 1) >= 2 len 2^max > 2 X
        return True
    lower = max(c[2] + c[3] - 1 + k * (top_b - 1) for k, c in enumerate(coefs) if k and c[1])  # a term >= 2^lower
    if top_l + 1 <= lower:  # |c_0| < 2^top_l <= 2^lower / 2 <= X / 2
        return False
    return None


def _polish(r, lo, hi, f_lo, prec, rnd):
    """Root of ``r`` in ``[lo, hi]`` (a sign change): safeguarded Newton; returns the bracket end past it."""
    tol = mpf_mul(mpf_mul_int(mp.eps._mpf_, 8, prec, rnd), hi, prec, rnd)
    quarter = mpf_div(tol, _FOUR, prec, rnd)
    up = mpf_gt(f_lo, fzero)
    x = mpf_div(mpf_add(lo, hi, prec, rnd), _TWO, prec, rnd)
    for _ in range(MAX_DEPTH):
        value, slope = _horner_with_derivative(r, x, prec, rnd)
        if value == fzero:
            return x
        if mpf_gt(value, fzero) == up:
            lo = x
        else:
            hi = x
        if mpf_le(mpf_sub(hi, lo, prec, rnd), tol):
            break
        step = mpf_div(value, slope, prec, rnd) if slope != fzero else mpf_sub(hi, lo, prec, rnd)
        guess = mpf_sub(x, step, prec, rnd)
        if mpf_le(mpf_abs(step, prec, rnd), quarter):
            # converged from one side: step a little past the root so the next point closes the bracket
            guess = mpf_sub(guess, quarter if mpf_gt(step, fzero) else mpf_neg(quarter), prec, rnd)
        x = guess if mpf_lt(lo, guess) and mpf_lt(guess, hi) else mpf_div(mpf_add(lo, hi, prec, rnd), _TWO, prec, rnd)
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
    return earliest_root_raw([c._mpf_ for c in g], bound, drop)


def earliest_root_raw(g, bound, drop: int = 0):
    """:func:`earliest_root` for the raw coefficients ``g`` (``bound`` an mpf, as there)."""
    prec, rnd = mp._prec_rounding
    scale = bound._mpf_
    r = []
    p = fone
    for c in g[drop:]:
        r.append(mpf_mul(c, p, prec, rnd))
        p = mpf_mul(p, scale, prec, rnd)
    while len(r) > 1 and r[-1] == fzero:
        r.pop()
    while len(r) > 1 and r[0] == fzero:
        r.pop(0)
    if len(r) == 1 or _dominant(r, prec, rnd):
        return None
    root = _isolate(r, prec, rnd)
    if root is None or root is _AT_BOUND:
        return None if root is None else bound
    return mp.make_mpf(mpf_mul(root, scale, prec, rnd))


def _isolate(r, prec, rnd):
    """The leftmost root of ``r`` in ``(0, 1]`` (raw), :data:`_AT_BOUND` for an exact root at 1 found after the
    search, or ``None``: bisection with Descartes' rule, then :func:`_polish`."""
    four_eps = mpf_mul_int(mp.eps._mpf_, 4, prec, rnd)
    stack = [(fzero, fone, 0)]
    while stack:
        a, b, depth = stack.pop()
        s = _shift_scale(r, a, mpf_sub(b, a, prec, rnd), prec, rnd)
        if _dominant(s, prec, rnd):
            continue
        variations = _sign_variations(s, prec, rnd)
        fa, fb = s[0], mpf_sum(s, prec, rnd)
        if fa == fzero and mpf_gt(a, fzero):
            return a
        change = mpf_gt(fa, fzero) != mpf_gt(fb, fzero) and fb != fzero
        if variations == 0 and not change:
            continue
        if variations <= 1 and change:
            return _polish(r, a, b, fa, prec, rnd)
        if mpf_le(mpf_sub(b, a, prec, rnd), four_eps) or depth >= MAX_DEPTH:
            # a cluster of roots (tangency) narrower than the working precision
            return a if mpf_gt(a, fzero) else b
        mid = mpf_div(mpf_add(a, b, prec, rnd), _TWO, prec, rnd)
        stack.append((mid, b, depth + 1))
        stack.append((a, mid, depth + 1))
    if _horner(r, fone, prec, rnd) == fzero:
        return _AT_BOUND
    return None
