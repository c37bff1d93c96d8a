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
counterpart bit for bit (and calls it for the cases it does not handle itself). Where libmp rounds in C (the gmpy2
backend, :data:`C_ROUNDING`) they call that rounding itself. Their vector forms (:func:`round_all`,
:func:`div_all`, :func:`times_all`, :func:`horner_all`) give the same numbers for whole lists with one loop, and
:func:`convolutions`, :func:`combination` and :func:`dots` the exact integer sums of many products at once.

Numbers are raw mpf tuples ``(sign, man, exp, bc)`` (``x._mpf_``); ``prec`` is the working precision in bits
(``mp.prec``); the rounding is to nearest (mpmath's default, ``mp._prec_rounding[1] == 'n'``).
"""

from __future__ import annotations

from collections import deque
from functools import lru_cache
from itertools import repeat
from operator import add, lshift, mul

from mpmath import mp
from mpmath.libmp import BACKEND, finf, fnan, from_man_exp, fzero, mpf_abs, mpf_add, mpf_mul, mpf_sum, normalize
from mpmath.libmp import round_nearest as ROUND_NEAREST

#: libmp rounds in C (gmpy2's ``_mpmath_create`` and ``_mpmath_normalize``): the roundings below call it directly,
#: being then the very functions of mpf arithmetic; the pure-Python bodies serve the other backends.
C_ROUNDING = BACKEND == "gmpy"
try:  # gmpy2's field splitter, for :func:`unpacked` (libmp's "gmpy" backend can be the older gmpy, without it)
    from gmpy2 import unpack
except ImportError:
    unpack = None


class Inexact(Exception):
    """The integer path cannot reproduce ``mpf_sum`` here (a non-finite value, or products spanning more than
    ``2 prec`` bits): take the mpf path."""


def round_nearest(man: int, exp: int, prec: int) -> tuple:
    """``man 2^exp`` rounded to ``prec`` bits, to nearest with ties to even: ``from_man_exp(man, exp, prec, 'n')``."""
    if C_ROUNDING:
        return from_man_exp(man, exp, prec, ROUND_NEAREST)
    if man > 0:
        return round_magnitude(0, man, exp, prec)
    if man:
        return round_magnitude(1, -man, exp, prec)
    return fzero


def round_all(totals, exp: int, prec: int) -> list:
    """``[round_nearest(t, exp, prec) for t in totals]`` (one C-level loop where libmp rounds in C)."""
    if C_ROUNDING:
        return list(map(from_man_exp, totals, repeat(exp), repeat(prec), repeat(ROUND_NEAREST)))
    return [round_nearest(t, exp, prec) for t in totals]


def convolutions(xs, ys) -> list:
    """``[sum_l x[l] y[k - l] for x, y in zip(xs, ys)]`` with ``k = len(y) - 1`` and ``l < min(len(x), k + 1)``:
    the exact integer sums of the Cauchy products of the integer sequences ``xs[c]`` and ``ys[c]`` at their last
    order (the pairs of the one ``sum(map(mul, x, reversed(y)))`` each, in one C-level loop)."""
    return list(map(sum, map(map, repeat(mul), xs, map(reversed, ys))))


def unpacked(total: int, count: int, width: int) -> list:
    """The ``count`` signed fields of ``width`` bits of a sum of packed products (:meth:`Track.packed`):
    ``total = sum_t v_t 2^(width t)`` with every ``|v_t| < 2^(width - 1)`` gives ``[v_0, ..., v_(count - 1)]``.
    Adding ``2^(width - 1)`` to every field makes each one nonnegative and alone (the top one nonzero), read off
    by gmpy2's ``unpack`` where libmp computes with gmpy2, else by a shift and a mask."""
    half = 1 << (width - 1)
    total += _field_offsets(count, width)
    if C_ROUNDING and unpack is not None:
        return [field - half for field in unpack(total, width)]
    mask = (1 << width) - 1
    return [((total >> shift) & mask) - half for shift in range(0, width * count, width)]


@lru_cache(maxsize=64)
def _field_offsets(count: int, width: int) -> int:
    """``sum_t 2^(width - 1) 2^(width t)`` for ``t < count``: :func:`unpacked`'s offset."""
    return sum(map(lshift, repeat(1 << (width - 1), count), range(0, width * count, width)))


def combination(columns, weights) -> list:
    """``[sum_q weights[q] columns[q][j] for j]``: the exact integer combination of the integer ``columns``."""
    acc = list(map(mul, columns[0], repeat(weights[0])))
    for column, w in zip(columns[1:], weights[1:]):
        acc = list(map(add, acc, map(mul, column, repeat(w))))
    return acc


def round_magnitude(sign: int, man: int, exp: int, prec: int) -> tuple:
    """:func:`round_nearest` of ``(-1)^sign man 2^exp`` for ``man > 0``."""
    if C_ROUNDING:
        return normalize(sign, man, exp, man.bit_length(), prec, ROUND_NEAREST)
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
    return div_all((x,), d, prec)[0]


def div_all(values, d: int, prec: int) -> list:
    """``[div_int(x, d, prec) for x in values]``."""
    odd, zeros, bits = _odd_part(d)
    out = []
    for x in values:
        sign, man, exp, bc = x
        if not man:
            out.append(x)
            continue
        exp -= zeros
        if odd != 1:
            extra = prec - bc + bits + 5
            if extra < 5:
                extra = 5
            man, rem = divmod(man << extra, odd)
            exp -= extra
            if rem:  # the sticky bit
                man, exp = (man << 1) + 1, exp - 1
        if C_ROUNDING:
            out.append(normalize(sign, man, exp, man.bit_length(), prec, ROUND_NEAREST))
        else:
            out.append(round_magnitude(sign, man, exp, prec))
    return out


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
        if C_ROUNDING:
            man = xm * ym
            return normalize(xs ^ ys, man, xe + ye, man.bit_length(), prec, ROUND_NEAREST)
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
            man, exp = ((-xm if xs else xm) << offset) + (-ym if ys else ym), ye
        elif -100 <= offset < 0:
            man, exp = ((-ym if ys else ym) << -offset) + (-xm if xs else xm), xe
        else:
            return mpf_add(x, y, prec, ROUND_NEAREST)
        return from_man_exp(man, exp, prec, ROUND_NEAREST) if C_ROUNDING else round_nearest(man, exp, prec)
    return mpf_add(x, y, prec, ROUND_NEAREST)


def mul_add(x: tuple, y: tuple, z: tuple, prec: int) -> tuple:
    """``x y + z`` with both roundings (a Horner step): ``mpf_add(mpf_mul(x, y, prec, 'n'), z, prec, 'n')``."""
    return plus(times(x, y, prec), z, prec)


def times_all(values, y: tuple, prec: int, then: tuple | None = None) -> list:
    """``[times(x, y, prec) for x in values]``, and with ``then`` each product times ``then`` in turn
    (``times(times(x, y, prec), then, prec)``), the common case (nonzero finite numbers) inline."""
    ys, ym, ye, _ = y
    if not (C_ROUNDING and ym and (then is None or then[1])):
        out = [times(x, y, prec) for x in values]
        return out if then is None else [times(x, then, prec) for x in out]
    ts, tm, te, _ = then if then is not None else (0, 0, 0, 0)
    out = []
    for x in values:
        xm = x[1]
        if xm:
            man = xm * ym
            x = normalize(x[0] ^ ys, man, x[2] + ye, man.bit_length(), prec, ROUND_NEAREST)
            if tm:
                man = x[1] * tm
                x = normalize(x[0] ^ ts, man, x[2] + te, man.bit_length(), prec, ROUND_NEAREST)
            out.append(x)
        elif x == fzero:
            out.append(fzero)  # a finite number times 0
        else:
            x = times(x, y, prec)
            out.append(x if then is None else times(x, then, prec))
    return out


def horner_all(orders, tau: tuple, prec: int) -> list:
    """Horner's rule for many polynomials at one point ``tau``: ``orders[k][p]`` is coefficient ``k`` of polynomial
    ``p``, and each value is ``acc = orders[-1][p]``, then ``acc = mul_add(acc, tau, orders[k][p], prec)`` for ``k``
    from the top down (the roundings of ``acc * tau + c`` in mpf arithmetic), the product inline."""
    ts, tm, te, _ = tau
    acc = orders[-1]
    for row in reversed(orders[:-1]):
        if not (C_ROUNDING and tm):
            acc = [mul_add(a, tau, c, prec) for a, c in zip(acc, row)]
            continue
        nxt = []
        for a, c in zip(acc, row):
            am = a[1]
            if am:
                man = am * tm
                product = ps, pm, pe, _ = normalize(a[0] ^ ts, man, a[2] + te, man.bit_length(), prec,
                                                    ROUND_NEAREST)
                cs, cm, ce, _ = c
                offset = pe - ce
                if cm and 0 <= offset <= 100:  # plus(product, c, prec), its exact branch inline
                    nxt.append(from_man_exp(((-pm if ps else pm) << offset) + (-cm if cs else cm), ce, prec,
                                            ROUND_NEAREST))
                elif cm and -100 <= offset < 0:
                    nxt.append(from_man_exp(((-cm if cs else cm) << -offset) + (-pm if ps else pm), pe, prec,
                                            ROUND_NEAREST))
                else:
                    nxt.append(plus(product, c, prec))
            elif a == c == fzero:
                nxt.append(fzero)  # 0 * tau + 0, tau finite
            else:
                nxt.append(mul_add(a, tau, c, prec))
        acc = nxt
    return list(acc)


def arithmetic(rnd: str) -> tuple:
    """``(mul, add, mul_add)`` on raw mpf with signature ``(..., prec)`` for the rounding mode ``rnd``: the functions
    above for round-to-nearest, libmp's otherwise."""
    if rnd == ROUND_NEAREST:
        return times, plus, mul_add
    return (lambda x, y, prec: mpf_mul(x, y, prec, rnd), lambda x, y, prec: mpf_add(x, y, prec, rnd),
            lambda x, y, z, prec: mpf_add(mpf_mul(x, y, prec, rnd), z, prec, rnd))


def max_magnitude(values, prec: int, rnd: str) -> tuple:
    """``max |x|`` over the raw mpf ``values`` with ``abs`` rounded to ``prec`` bits as ``mpf.__abs__`` rounds it:
    ``fzero`` when there are none or all are 0, ``fnan`` when one is NaN, ``finf`` when one is infinite (and none is
    NaN). Magnitudes are compared on the tuples (leading bit position, then the aligned mantissas), exactly."""
    best, top = fzero, None
    infinite = False
    for x in values:
        man = x[1]
        if man:
            exp, bc = x[2], x[3]
            t = exp + bc
            if top is None or t > top:
                best, top = x, t
            elif t == top:
                best_bc = best[3]
                if (man > best[1] << (bc - best_bc)) if bc >= best_bc else (man << (best_bc - bc) > best[1]):
                    best = x
        elif x[2]:
            if x == fnan:
                return fnan
            infinite = True
    if infinite:
        return finf
    return mpf_abs(best, prec, rnd)


def _span(values):
    """Lowest and highest exponent of the nonzero raw mpf ``values`` (``(None, None)`` when all are 0); raises
    :class:`Inexact` on a value that is not finite."""
    exps = [x[2] for x in values if x[1]]
    if len(exps) < len(values) and any(x[2] for x in values if not x[1]):
        raise Inexact
    return (min(exps), max(exps)) if exps else (None, None)


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

    __slots__ = ("base", "slope", "blocks", "columns", "lo", "hi", "widths", "_packs")

    #: Bits below the lowest exponent seen that a move of the base leaves, so that it seldom moves.
    MARGIN = 32

    #: Bits a packing's fields get beyond the width asked (:meth:`packed`), so that it is seldom made again.
    PACK_SPARE = 64

    def __init__(self, width: int):
        self.base, self.slope = None, 0
        self.blocks = []
        self.columns = [[] for _ in range(width)]
        self.lo, self.hi = [], []
        self.widths = []  # per order, the bit length of its largest integer (0 when all are 0)
        self._packs = {}  # the packings of :meth:`packed`, by key: (field, groups, per order the packed integers)

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
        self.widths.append(max(map(abs, ints), default=0).bit_length())
        deque(map(list.append, self.columns, ints), 0)

    def width(self, lo: int, hi: int) -> int:
        """Bit length of the largest integer of the orders ``lo..hi``."""
        return max(self.widths[lo:hi + 1], default=0)

    def packed(self, key: str, groups, field: int) -> tuple:
        """Every order's integers packed by group (Kronecker substitution): ``(packs, width)`` with
        ``packs[k][g] = sum_t blocks[k][groups[g]][t] 2^(width t)``, signed and exact, for fields of ``width >=
        field`` bits. A packing is kept under ``key`` (with its ``groups``, slices of the components) and extended
        order by order; it is made afresh when the base moves, or for a wider ``field`` (then with
        :data:`PACK_SPARE` bits more than asked)."""
        kept = self._packs.get(key)
        if kept is None or kept[0] < field:
            kept = self._packs[key] = (field + self.PACK_SPARE, groups, [])
        width, groups, packs = kept
        for block in self.blocks[len(packs):]:
            packs.append([sum(map(lshift, block[group], range(0, width * len(block[group]), width)))
                          for group in groups])
        return packs, width

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
            self.widths = [max(map(abs, block), default=0).bit_length() for block in self.blocks]
            self._packs = {}
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


#: Widest integer (bits) of a block that :func:`dots` packs; wider ones take :func:`dot` pair by pair.
PACK_WIDTH = 4096


def dots(blocks) -> dict:
    """``{(a, b): dot(blocks[a], blocks[b])}`` for ``a <= b`` over :class:`Fixed` blocks of one length: the numbers
    of :func:`dot`, whose exact integer sums come here from one sum of products per block (Kronecker substitution):
    the integers of every finite block that is not all 0 are packed, one block to a field of ``B`` bits, into one
    integer per component, with ``B`` such that every sum ``|sum_p x_p y_p| < n 2^(2 w) <= 2^(B - 1)`` (``w``
    the widest integer, ``n`` the length) fits its field; adding ``2^(B - 1)`` to every field leaves each one
    nonnegative and alone, to be read off by a shift and a mask. The pairs that :func:`dot` does not sum exactly
    (a non-finite block, or exponents spanning more than ``2 prec`` bits), and all of them with another rounding
    or wider integers than :data:`PACK_WIDTH`, are :func:`dot`'s own."""
    prec, rnd = mp._prec_rounding
    packable = [a for a, x in enumerate(blocks) if x.ints is not None and x.lo is not None]
    width = max((max(map(abs, blocks[a].ints)).bit_length() for a in packable), default=0)
    if rnd != ROUND_NEAREST or width > PACK_WIDTH:
        packable = []
    out = {}
    if packable:
        field = 2 * width + len(blocks[packable[0]].ints).bit_length() + 1
        half, mask = 1 << (field - 1), (1 << field) - 1
        shifts = [field * f for f in range(len(packable))]
        packed = [sum(map(lshift, column, shifts)) for column in zip(*(blocks[a].ints for a in packable))]
        offset = sum(map(lshift, repeat(half, len(packable)), shifts))
        for f, a in enumerate(packable):
            x = blocks[a]
            total = sum(map(mul, x.ints, packed)) + offset
            for g in range(f, len(packable)):
                y = blocks[packable[g]]
                if x.hi + y.hi - x.lo - y.lo <= 2 * prec:
                    out[a, packable[g]] = round_nearest(((total >> shifts[g]) & mask) - half, x.exp + y.exp, prec)
    for a in range(len(blocks)):
        for b in range(a, len(blocks)):
            if (a, b) not in out:
                out[a, b] = dot(blocks[a], blocks[b])
    return out
