"""The Taylor step-size rule and the budget check shared by every integrator of the project."""

import math

from . import status
from ._jit import jit
from .constants import MIN_ORDER, STEP_SAFETY_EXPONENT
from .series import max_abs

#: the safety factor ``e^-2`` of the step-size rule (Jorba & Zou) in float64
STEP_SAFETY = math.exp(STEP_SAFETY_EXPONENT)


@jit
def tolerance_order(tol):
    """The Taylor order of a full step at tolerance ``tol``: ``ceil(-ln(tol) / 2) + 1``, at least ``MIN_ORDER``
    (Jorba & Zou 2005; :func:`flowlib.running.order_for` in Python, the same number)."""
    return max(MIN_ORDER, int(math.ceil(-0.5 * math.log(tol))) + 1)


@jit
def taylor_step(size, below, top, order, tol=1.0):
    """Step ``h = rho min(e^-2, tol^(1/k)) exp(-0.7 / (k - 1))`` at order ``k`` with ``rho = min_l (size /
    |x^[l]|)^(1/l)``, ``l in {k-1, k}``; below the tolerance's order ``K`` (:func:`tolerance_order`) the longer of
    that and ``rho r_K^((K + 1) / (k + 1))``, ``r_K`` the ratio ``h / rho`` of the step at order ``K``.

    Jorba & Zou (2005), the rule heyoka uses: at ``k = K`` (where ``tol^(1/K) > e^-2``) the step is theirs, bit for
    bit (as with the default ``tol = 1``), and its truncation error, the first neglected term ``size (h /
    rho)^(K + 1) = size r_K^(K + 1)``, is below ``tol * size / 100``. A step of lower order (one an event will cut
    short, :func:`.driver.integrate_chunk`) takes the longer of two steps that both keep its truncation error
    ``size (h / rho)^(k + 1)`` under ``tol * size``: the one that bounds its last computed terms by the tolerance
    (Jorba & Zou's form at order ``k``; truncation error ``tol^((k + 1) / k)``), and the one whose first neglected
    term is that of a full step, ``size r_K^(K + 1)``. The second is the longer below order 8 at ``tol = 1e-13``:
    five times at order 3, where the first had made most steps between dense events pay an order more. ``size`` is
    ``max |x|`` (1 when the state is 0), ``below`` and ``top`` the max-norms of the coefficients of orders ``k - 1``
    and ``k``. Returns ``inf`` when both vanish (a polynomial solution: any step is exact).
    """
    rho = math.inf
    if below > 0.0:
        rho = (size / below) ** (1.0 / (order - 1))
    if top > 0.0:
        rho = min(rho, (size / top) ** (1.0 / order))
    factor = tol ** (1.0 / order)
    safety = math.exp(-0.7 / (order - 1))
    if not factor < STEP_SAFETY:
        # the tolerance's order or one close to it, where the second step is never the longer
        return rho * STEP_SAFETY * safety
    # a low order: tolerance_order(tol) > order, and tol^(1/K) > e^-2 at K = tolerance_order(tol), so r_K is
    # e^-2 exp(-0.7 / (K - 1))
    full = tolerance_order(tol)
    ratio = (STEP_SAFETY * math.exp(-0.7 / (full - 1))) ** ((full + 1.0) / (order + 1.0))
    if ratio > factor * safety:
        return rho * ratio
    return rho * factor * safety


@jit
def order_needed(C, order, h, size, tol, lowest):
    """The lowest order ``k >= lowest`` (at most ``order``) at which the step ``h`` just taken met the tolerance
    by its last computed terms: ``|x^[l]| h^l <= tol * size`` for every ``l`` from ``k - 1`` to ``order`` (``C`` the
    step's coefficients, ``size`` its ``max |x|``). Below the tolerance's order this is stricter than
    :func:`taylor_step`, which bounds the first neglected term, so the guess errs towards a higher order (a longer
    step or a larger cap for the adaptive order, never a less accurate one). The order controller of
    :func:`.driver.integrate_chunk` gives the next step, which an event will likely end as soon, one order more."""
    bound = tol * size
    if _term(C, order, h) > bound or _term(C, order - 1, h) > bound:
        return order
    k = order
    while k > lowest and _term(C, k - 2, h) <= bound:
        k -= 1
    return k


@jit
def _term(C, k, h):
    """``max |x^[k]| h^k`` (0 for a vanishing coefficient, whatever ``h^k``; NaN compares as not small)."""
    top = max_abs(C[k])
    if top == 0.0:
        return 0.0
    if not top < math.inf:
        return math.inf
    return top * h ** k


@jit
def budget_spent(t, t_end, n_steps, max_steps, n_events, max_events, events_code):
    """Whether a chunk ends before its next step, and its code: ``SUCCESS`` at ``t_end``, ``RUNNING`` when its
    steps are used up (the caller decides whether that ends the run), ``events_code`` when its events are."""
    if t >= t_end:
        return True, status.SUCCESS
    if n_steps >= max_steps:
        return True, status.RUNNING
    if n_events >= max_events:
        return True, events_code
    return False, status.RUNNING
