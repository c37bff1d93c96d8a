"""Ball arithmetic for the certifier: python-flint's ``arb`` imported lazily, its working precision, exact
conversions and the few interval predicates the proofs use.

An ``arb`` is a midpoint-radius ball that is guaranteed to contain the real number it stands for; every operation
returns a ball that contains every result of the operation on members of its operands. Comparisons are certain:
``x > 0`` is true only when every member of ``x`` is positive, so ``not x > 0`` proves nothing.

python-flint keeps its precision (bits) and series length in one process-wide context; :func:`working` sets both
for a block and restores them afterwards, the way ``mp.workprec`` does for mpmath. It is not safe to certify in
two threads at once.
"""

from __future__ import annotations

from contextlib import contextmanager
from fractions import Fraction

import numpy as np


def flint():
    """The ``flint`` module (python-flint), or an ``ImportError`` that says how to install it."""
    try:
        import flint as module
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("flowlib.certify needs python-flint (ball arithmetic): pip install 'flowlib[certify]'") \
            from exc
    return module


@contextmanager
def working(prec: int, length: int):
    """Run a block at ``prec`` bits with power series truncated at ``length`` terms, then restore the context."""
    ctx = flint().ctx
    saved = ctx.prec, ctx.cap
    ctx.prec, ctx.cap = prec, length
    try:
        yield
    finally:
        ctx.prec, ctx.cap = saved


@contextmanager
def series_length(length: int):
    """Run a block with power series truncated at ``length`` terms (the precision is left as it is)."""
    ctx = flint().ctx
    saved = ctx.cap
    ctx.cap = length
    try:
        yield
    finally:
        ctx.cap = saved


def exact(value):
    """The exact ball of a float64, an mpmath ``mpf``, an integer or a :class:`fractions.Fraction`.

    Floats and mpf numbers are binary fractions ``man * 2**exp`` and are converted without rounding, whatever
    their length and the working precision (a 50-digit mpf keeps its 167 bits); a fraction is a quotient of two
    exact integers, rounded outward at the working precision.

    Raises
    ------
    ValueError
        For an infinite or NaN value.
    """
    module = flint()
    if isinstance(value, (int, np.integer)):
        return module.arb(int(value))
    if isinstance(value, Fraction):
        return module.arb(value.numerator) / value.denominator
    raw = getattr(value, "_mpf_", None)  # mpmath's mpf: (sign, man, exp, bc), the mantissa without its sign
    if raw is not None:
        sign, man, exp, _ = raw
        if not man and exp:  # mpmath codes inf, -inf and nan as a zero mantissa with a non-zero exponent
            raise ValueError(f"cannot enclose the non-finite number {value!r}")
        return _binary(module, -int(man) if sign else int(man), int(exp))
    number = float(value)
    if not np.isfinite(number):
        raise ValueError(f"cannot enclose the non-finite number {value!r}")
    numerator, denominator = number.as_integer_ratio()  # the denominator is a power of two
    return _binary(module, numerator, 1 - denominator.bit_length())


def _binary(module, man: int, exp: int):
    """The ball of radius 0 at ``man * 2**exp`` (python-flint's ``arf`` holds it exactly)."""
    return module.arb(module.arf((man, exp))) if man else module.arb(0)


def span(lo, hi):
    """The smallest ball containing the balls ``lo`` and ``hi`` and everything between them."""
    return lo.union(hi)


def decided_sign(x) -> int:
    """+1 or -1 when every member of ``x`` has that sign, else 0 (undecided: the ball touches zero)."""
    if x > 0:
        return 1
    if x < 0:
        return -1
    return 0


def is_exact_zero(x) -> bool:
    """The ball is the single number 0 (ball arithmetic keeps exact zeros exact: ``0 * [x +/- r] = 0``)."""
    return x.is_exact() and x.is_zero()


def upper(x) -> float:
    """A float proven to be at least every member of ``x`` (the ball's upper bound, rounded up)."""
    value = float(x.upper())
    return float(np.nextafter(value, np.inf)) if np.isfinite(value) else float("inf")


def magnitude(x) -> float:
    """An upper bound of ``|x|`` as a float (rounded up)."""
    return float(abs(x).upper()) if x.is_finite() else float("inf")


def interval(x) -> tuple:
    """The endpoints ``mid -/+ rad`` of the ball ``x`` as exact mpmath numbers (computed on integers, so not rounded;
    mpmath compares them exactly, and rounds only what is computed from them)."""
    mid, rad = _man_exp(x.mid()), _man_exp(x.rad())
    return _exact_mpf(_combine(mid, rad, -1)), _exact_mpf(_combine(mid, rad, 1))


def _man_exp(x) -> tuple:
    if x.is_zero():
        return 0, 0
    man, exp = x.man_exp()
    return int(man), int(exp)


def _combine(a: tuple, b: tuple, sign: int) -> tuple:
    """``a + sign * b`` for exact binary numbers ``(man, exp)``."""
    exp = min(a[1], b[1])
    return (a[0] << (a[1] - exp)) + sign * (b[0] << (b[1] - exp)), exp


def _exact_mpf(man_exp: tuple):
    from mpmath import mp
    from mpmath.libmp import from_man_exp

    return mp.make_mpf(from_man_exp(*man_exp))


def relative_width(x) -> float:
    """``2 rad / |mid|`` as a float (``2 rad`` when the midpoint is 0): the relative width of an enclosure."""
    mid, rad = abs(x.mid()), x.rad()
    scale = float(mid.upper()) if not mid.is_zero() else 1.0
    return 2.0 * float(rad.upper()) / scale
