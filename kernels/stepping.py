"""The Taylor step-size rule and the budget check shared by every integrator of the project."""

import math

from . import status
from ._jit import jit

_SAFETY = math.exp(-2.0)


@jit
def taylor_step(size, below, top, order):
    """Step ``h = rho / e^2 * exp(-0.7 / (K - 1))`` with ``rho = min_k (size / |x^[k]|)^(1/k)``, ``k in {K-1, K}``.

    Jorba & Zou (2005), the rule heyoka uses: the local truncation error is then about ``tol * size`` for the
    order ``K = ceil(-ln(tol) / 2) + 1``. ``size`` is ``max |x|`` (1 when the state is 0), ``below`` and ``top`` the
    max-norms of the coefficients of orders ``K - 1`` and ``K``. Returns ``inf`` when both vanish (a polynomial
    solution: any step is exact).
    """
    rho = math.inf
    if below > 0.0:
        rho = (size / below) ** (1.0 / (order - 1))
    if top > 0.0:
        rho = min(rho, (size / top) ** (1.0 / order))
    return rho * _SAFETY * math.exp(-0.7 / (order - 1))


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
