"""Exact dot products of mpf vectors with Python integers, rounded once: the same numbers as ``mp.fdot``.

``mp.fdot`` multiplies its terms exactly and adds them with :func:`mpmath.libmp.mpf_sum`, which keeps the sum exact
and rounds once to nearest, except that it drops a term (or the partial sum) more than ``2 prec`` bits below the
lowest bit of the others. This module does the same exact arithmetic on whole vectors of Python integers scaled by
a common power of two (one C-level ``sum(map(mul, ...))`` per dot product instead of one mpf object per product)
and rounds once exactly as ``from_man_exp`` does. Where the exponents of the nonzero products might span more than
``2 prec`` bits (so that ``mpf_sum`` could drop something), or a value is not finite, the exact path is not taken:
:func:`dot` then calls ``mpf_sum`` on the products in the order of ``fdot``, and :class:`Track` raises
:class:`Inexact` for its caller to take the mpf path. The results are identical bit for bit in every case.

The single roundings (:func:`round_nearest`, :func:`div_int`, :func:`times`, :func:`plus`, :func:`mul_add`) are
the operations of mpf arithmetic on raw tuples without its general-purpose dispatch; each equals its libmp
counterpart bit for bit (and calls it for the cases it does not handle itself).

Numbers are raw mpf tuples ``(sign, man, exp, bc)`` (``x._mpf_``); ``prec`` is the working precision in bits
(``mp.prec``); the rounding is to nearest (mpmath's default, ``mp._prec_rounding[1] == 'n'``).
"""

from __future__ import annotations

from functools import lru_cache
from operator import mul

from mpmath import mp
from mpmath.libmp import fzero, mpf_add, mpf_mul, mpf_sum
from mpmath.libmp import round_nearest as ROUND_NEAREST


class Inexact(Exception):
    """The integer path cannot reproduce ``mpf_sum`` here (a non-finite value, or products spanning more than
    ``2 prec`` bits): take the mpf path."""


def round_nearest(man: int, exp: int, prec: int) -> tuple:
    """``man 2^exp`` rounded to ``prec`` bits, to nearest with ties to even: ``from_man_exp(man, exp, prec, 'n')``."""
    if man > 0:
        return round_magnitude(0, man, exp, prec)
    if man:
        return round_magnitude(1, -man, exp, prec)
    return fzero


def round_magnitude(sign: int, man: int, exp: int, prec: int) -> tuple:
    """:func:`round_nearest` of ``(-1)^sign man 2^exp`` for ``man > 0``."""
    n = man.bit_length() - prec
    if n > 0:
        t = man >> (n - 1)
        man = (t >> 1) + 1 if t & 1 and (t & 2 or man & ((1 << (n - 1)) - 1)) else t >> 1
        exp += n
    if man & 1:
        return sign, man, exp, man.bit_length()
    zeros = (man & -man).bit_length() - 1
    man >>= zeros
    return sign, man, exp + zeros, man.bit_length()


def div_int(x: tuple, d: int, prec: int) -> tuple:
    """``x / d`` for a positive int ``d``, rounded to nearest: ``mpf_div(x, from_int(d), prec, 'n')`` (the same
    sticky-bit construction, for finite ``x``)."""
    sign, man, exp, bc = x
    if not man:
        return x
    odd, zeros, bits = _odd_part(d)
    exp -= zeros
    if odd == 1:
        return round_magnitude(sign, man, exp, prec)
    extra = prec - bc + bits + 5
    if extra < 5:
        extra = 5
    quot, rem = divmod(man << extra, odd)
    if rem:
        return round_magnitude(sign, (quot << 1) + 1, exp - extra - 1, prec)
    return round_magnitude(sign, quot, exp - extra, prec)


@lru_cache(maxsize=256)
def _odd_part(d: int) -> tuple:
    """``(odd, zeros, odd.bit_length())`` with ``d = odd 2^zeros``."""
    zeros = (d & -d).bit_length() - 1
    return d >> zeros, zeros, (d >> zeros).bit_length()


def times(x: tuple, y: tuple, prec: int) -> tuple:
    """``x y`` rounded: ``mpf_mul(x, y, prec, 'n')``."""
    xs, xm, xe, _ = x
    ys, ym, ye, _ = y
    if xm and ym:
        return round_magnitude(xs ^ ys, xm * ym, xe + ye, prec)
    if (xm or not xe) and (ym or not ye):
        return fzero  # a finite number times 0
    return mpf_mul(x, y, prec, ROUND_NEAREST)


def plus(x: tuple, y: tuple, prec: int) -> tuple:
    """``x + y`` rounded: ``mpf_add(x, y, prec, 'n')`` (whose exact branch, for exponents within 100 bits, this
    is; the other cases call it)."""
    xs, xm, xe, _ = x
    ys, ym, ye, _ = y
    if xm and ym:
        offset = xe - ye
        if 0 <= offset <= 100:
            return round_nearest(((-xm if xs else xm) << offset) + (-ym if ys else ym), ye, prec)
        if -100 <= offset < 0:
            return round_nearest(((-ym if ys else ym) << -offset) + (-xm if xs else xm), xe, prec)
    return mpf_add(x, y, prec, ROUND_NEAREST)


def mul_add(x: tuple, y: tuple, z: tuple, prec: int) -> tuple:
    """``x y + z`` with both roundings (a Horner step): ``mpf_add(mpf_mul(x, y, prec, 'n'), z, prec, 'n')``."""
    return plus(times(x, y, prec), z, prec)


def arithmetic(rnd: str) -> tuple:
    """``(mul, add, mul_add)`` on raw mpf with signature ``(..., prec)`` for the rounding mode ``rnd``: the functions
    above for round-to-nearest, libmp's otherwise."""
    if rnd == ROUND_NEAREST:
        return times, plus, mul_add
    return (lambda x, y, prec: mpf_mul(x, y, prec, rnd), lambda x, y, prec: mpf_add(x, y, prec, rnd),
            lambda x, y, z, prec: mpf_add(mpf_mul(x, y, prec, rnd), z, prec, rnd))


def _span(values):
    """Lowest and highest exponent of the nonzero raw mpf ``values`` (``(None, None)`` when all are 0); raises
    :class:`Inexact` on a value that is not finite."""
    lo = hi = None
    for _, man, e, _ in values:
        if man:
            if lo is None:
                lo = hi = e
            elif e < lo:
                lo = e
            elif e > hi:
                hi = e
        elif e:
            raise Inexact
    return lo, hi


class Track:
    """The coefficients of one vector quantity, order by order, as Python integers on a grid of exponents.

    ``blocks[k][j] * 2**exp_at(k)`` is component ``j`` of order ``k`` exactly, with ``exp_at(k) = base - slope k``,
    and ``columns[j]`` holds the same numbers by component (``columns[j][k]``). For tracks of one ``slope`` every
    product of a convolution ``sum_l x^[l]_j y^[k-l]_j`` has the exponent ``x.exp_at(0) + y.exp_at(k)``, and the
    sum is one ``sum(map(mul, x.columns[j], reversed(y.columns[j])))``; a slope that follows the geometric decay of
    Taylor coefficients keeps the integers short (:meth:`regrid`). ``lo[k]``, ``hi[k]`` are the lowest and highest
    exponent of the nonzero values of order ``k`` (``None`` when all are 0). The base moves down (every integer
    shifted) when an order needs it, with ``MARGIN`` bits to spare.
    """

    __slots__ = ("base", "slope", "blocks", "columns", "lo", "hi")

    #: Bits below the lowest exponent seen that a move of the base leaves, so that it seldom moves.
    MARGIN = 32

    def __init__(self, width: int):
        self.base, self.slope = None, 0
        self.blocks = []
        self.columns = [[] for _ in range(width)]
        self.lo, self.hi = [], []

    def exp_at(self, k: int) -> int:
        """Exponent of the integers of order ``k``."""
        return (self.base or 0) - self.slope * k

    def append(self, values) -> None:
        """Add the next order (raw mpf, one per component)."""
        lo, hi = _span(values)
        k = len(self.blocks)
        self.lo.append(lo)
        self.hi.append(hi)
        if lo is not None and (self.base is None or lo < self.exp_at(k)):
            self._move(lo + self.slope * k - self.MARGIN, self.slope)
        base = self.exp_at(k)
        ints = [(-(man << (e - base)) if sign else man << (e - base)) if man else 0 for sign, man, e, _ in values]
        self.blocks.append(ints)
        for column, v in zip(self.columns, ints):
            column.append(v)

    def regrid(self, slope: int) -> None:
        """Put the orders on the grid of ``slope`` (exact: each order's integers shifted by its own amount)."""
        bases = [lo + slope * k for k, lo in enumerate(self.lo) if lo is not None]
        if bases:
            self._move(min(bases) - self.MARGIN, slope)
        self.slope = slope

    def _move(self, base: int, slope: int) -> None:
        if self.base is not None:
            shifts = [self.exp_at(k) - (base - slope * k) for k in range(len(self.blocks))]
            self.blocks = [[v << s for v in block] if s >= 0 else [v >> -s for v in block]
                           for block, s in zip(self.blocks, shifts)]
            self.columns = [list(column) for column in zip(*self.blocks)] if self.blocks else self.columns
        self.base, self.slope = base, slope


def check_span(pairs, prec: int) -> None:
    """Raise :class:`Inexact` unless the products of the blocks ``pairs = [(x_lo, x_hi, y_lo, y_hi)]`` (exponent
    ranges of nonzero values) lie within ``2 prec`` bits: then ``mpf_sum`` adds them exactly."""
    lo = hi = None
    for x_lo, x_hi, y_lo, y_hi in pairs:
        if x_lo is None or y_lo is None:
            continue
        low, high = x_lo + y_lo, x_hi + y_hi
        if lo is None or low < lo:
            lo = low
        if hi is None or high > hi:
            hi = high
    if lo is not None and hi - lo > 2 * prec:
        raise Inexact


class Fixed:
    """A vector of raw mpf as integers at its own exponent: ``raw[i] == ints[i] * 2**exp`` (``ints`` is None when a
    value is not finite); ``lo``, ``hi`` as in :class:`Track`."""

    __slots__ = ("raw", "ints", "exp", "lo", "hi")

    def __init__(self, raw):
        self.raw = raw
        try:
            self.lo, self.hi = _span(raw)
        except Inexact:
            self.ints, self.exp, self.lo, self.hi = None, 0, None, None
            return
        base = self.exp = self.lo or 0
        self.ints = [(-(man << (e - base)) if sign else man << (e - base)) if man else 0 for sign, man, e, _ in raw]


def dot(x: Fixed, y: Fixed) -> tuple:
    """``<x, y>`` rounded once, as ``mp.fdot(x, y)`` (raw mpf)."""
    prec, rnd = mp._prec_rounding
    spread = x.hi + y.hi - x.lo - y.lo if x.lo is not None and y.lo is not None else 0
    if rnd != ROUND_NEAREST or x.ints is None or y.ints is None or spread > 2 * prec:
        return mpf_sum([mpf_mul(a, b) for a, b in zip(x.raw, y.raw)], prec, rnd)
    return round_nearest(sum(map(mul, x.ints, y.ints)), x.exp + y.exp, prec)
