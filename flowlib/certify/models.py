"""Taylor models of scalar functions over one step, and the rigorous search for their first zero.

A model of ``g`` on ``[0, h]`` is a polynomial ``sum_k g_k s^k`` (``k <= K``, ball coefficients) and a ball ``r``
such that ``g(s) - sum_k g_k s^k = g_{K+1}(xi) s^(K+1)`` with ``g_{K+1}(xi) in r`` (Lagrange's remainder; ``r``
encloses the coefficient ``K + 1`` of the expansion at every point of the step). The same ``r`` bounds the
derivatives' remainders: ``g^(mu)(s)`` is the polynomial's ``mu``-th derivative plus a member of
``r (K+1)! / (K+1-mu)! s^(K+1-mu)``.

:func:`first_zero` proves where ``g`` first vanishes on ``[0, h]``, or that it does not: bisection discards the
pieces whose enclosure excludes 0, and on a piece where ``g'`` keeps one sign a sign change proves exactly one
simple zero, which interval Newton then narrows to the working precision. A zero that ``g`` is known to have at
``s = 0`` (a surface just crossed, or just left tangentially) is handled through the sign of the derivative of its
multiplicity.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import factorial

from flowlib.certify.balls import decided_sign, flint, span

#: bisection depth below which a piece that can be neither excluded nor resolved is reported as undecided
MAX_DEPTH = 60
#: interval Newton passes (each at least halves the enclosure of a simple zero, in practice far more)
NEWTON_PASSES = 60


@dataclass(frozen=True)
class TaylorModel:
    """``g`` on ``[0, h]``: coefficients ``coeffs[0..K]`` and the remainder coefficient ``remainder``."""

    coeffs: tuple
    remainder: object

    @property
    def order(self) -> int:
        return len(self.coeffs) - 1

    def value(self, s, mu: int = 0):
        """An enclosure of ``g^(mu)(s)`` for every ``s`` in the ball ``s`` (inside the step, ``s >= 0``)."""
        K = self.order
        arb_poly = flint().arb_poly
        poly = arb_poly(list(self.coeffs))
        for _ in range(mu):
            poly = poly.derivative()
        weight = factorial(K + 1) // factorial(K + 1 - mu)
        # step times are >= 0; a ball spanned from 0 can reach a hair below it (its radius carries ~30 bits), and
        # python-flint's power of a ball centred at 0 is NaN: take the nonnegative part there
        power = s if s >= 0 else s.nonnegative_part()
        return poly(s) + self.remainder * weight * power ** (K + 1 - mu)


@dataclass(frozen=True)
class Zero:
    """Where a model first vanishes: ``at`` encloses the zero; ``proven`` is False when the search could only
    narrow it to ``at`` without deciding (a tangency, a double zero, or overestimation it could not beat)."""

    at: object
    proven: bool


def _newton(model: TaylorModel, lo, hi):
    """Narrow the enclosure ``[lo, hi]`` of the unique simple zero of ``model`` (``g'`` of one sign on it)."""
    arb = flint().arb
    for _ in range(NEWTON_PASSES):
        box = span(lo, hi)
        mid = box.mid()
        image = mid - model.value(mid) / model.value(box, 1)
        new_lo = max(lo, image.lower()) if image.is_finite() else lo
        new_hi = min(hi, image.upper()) if image.is_finite() else hi
        if new_lo > new_hi:  # pragma: no cover - impossible when a zero is proven inside
            break
        if not (new_hi - new_lo < (hi - lo) * arb(0.75)):
            lo, hi = new_lo, new_hi
            break
        lo, hi = new_lo, new_hi
    return span(lo, hi)


def leading_sign(model: TaylorModel, mu: int, h):
    """For a model known to vanish to order ``mu`` at ``s = 0`` (``g = ... = g^(mu-1) = 0`` there), a length
    ``s1 <= h`` and the sign of ``g`` on ``(0, s1]``, proven from the sign of ``g^(mu)`` on ``[0, s1]``; ``None``
    when no ``s1 >= h 2**-MAX_DEPTH`` decides it."""
    arb = flint().arb
    s1 = h
    for _ in range(MAX_DEPTH):
        sign = decided_sign(model.value(span(arb(0), s1), mu))
        if sign:
            return s1, sign
        s1 = s1 / 2
    return None


def first_zero(model: TaylorModel, h, start=None) -> Zero | None:
    """The first zero of ``model`` on ``[start, h]`` (``start = 0`` by default), or ``None`` when it has none.

    Returns a proven :class:`Zero` (exactly one simple zero in ``at`` and none before it) or an unproven one (the
    first piece the search could neither exclude nor resolve).
    """
    arb = flint().arb
    start = arb(0) if start is None else start
    stack = [(start, h, 0)]
    while stack:
        a, b, depth = stack.pop()
        box = span(a, b)
        if decided_sign(model.value(box)):
            continue
        if decided_sign(model.value(box, 1)):
            left, right = decided_sign(model.value(a)), decided_sign(model.value(b))
            if left and right and left == right:
                continue
            if left and right:
                return Zero(_newton(model, a, b), True)
        if depth >= MAX_DEPTH:
            return Zero(box, False)
        mid = box.mid()
        stack.append((mid, b, depth + 1))
        stack.append((a, mid, depth + 1))
    return None
