"""The Taylor step-size rule and the budget check shared by every integrator of the project."""

import math

from . import status
from ._jit import jit
from .constants import STEP_SAFETY_EXPONENT
from .series import max_abs

#: the safety factor ``e^-2`` of the step-size rule (Jorba & Zou) in float64
STEP_SAFETY = math.exp(STEP_SAFETY_EXPONENT)


@jit
def taylor_step(size, below, top, order, tol=1.0):
    """Step ``h = rho min(e^-2, tol^(1/K)) exp(-0.7 / (K - 1))`` with ``rho = min_k (size / |x^[k]|)^(1/k)``,
    ``k in {K-1, K}``.

    Jorba & Zou (2005), the rule heyoka uses: the local truncation error is then about ``tol * size`` for the
    order ``K = ceil(-ln(tol) / 2) + 1``, where ``tol^(1/K) > e^-2`` and the step is theirs (bit for bit, as with the
    default ``tol = 1``). At a lower order (a step an event will cut short, :func:`.driver.integrate_chunk`) the
    factor ``tol^(1/K)`` keeps the truncation error ``size (h / rho)^(K + 1)`` below ``tol * size``. ``size`` is
    ``max |x|`` (1 when the state is 0), ``below`` and ``top`` the max-norms of the coefficients of orders ``K - 1``
    and ``K``. Returns ``inf`` when both vanish (a polynomial solution: any step is exact).
    """
    rho = math.inf
    if below > 0.0:
        rho = (size / below) ** (1.0 / (order - 1))
    if top > 0.0:
        rho = min(rho, (size / top) ** (1.0 / order))
    return rho * min(STEP_SAFETY, tol ** (1.0 / order)) * math.exp(-0.7 / (order - 1))


@jit
def order_needed(C, order, h, size, tol, lowest):
    """The lowest order ``k >= lowest`` (at most ``order``) at which the step ``h`` just taken met the tolerance
    as the step-size rule measures it: ``|x^[l]| h^l <= tol * size`` for every ``l`` from ``k - 1`` to ``order``
    (``C`` the step's coefficients, ``size`` its ``max |x|``). The order controller of
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
