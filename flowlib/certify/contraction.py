"""How fast two solutions of one configuration's field can separate: a rigorous logarithmic norm.

For two solutions in a convex box ``B`` of an analytic field ``F``, ``|theta_a(s) - theta_b(s)| <= e^(mu s)
|theta_a(0) - theta_b(0)|`` (Euclidean norm) with ``mu`` any upper bound of the largest eigenvalue of the symmetric
part ``(J + J^T)/2`` of the Jacobian ``J = DF`` over ``B`` (the logarithmic norm). A gradient flow's Jacobian is
minus the Hessian of the loss, so ``mu`` is minus its smallest curvature: negative where the flow contracts.

The certifier carries its uncertainty about the true state as a Euclidean ball around an exact centre and widens it
by ``e^(mu h)`` a step. Boxes propagated through the Taylor polynomial would instead grow with the Jacobian's
absolute values (the wrapping effect), which on a converging flow means exponential growth where the true
uncertainty shrinks.

The bound is proven, not estimated: ``mu I - S`` is shown positive definite for every symmetric ``S`` in the
enclosure of the symmetric part, by a Cholesky factorisation in ball arithmetic whose pivots are all positive.
The candidate ``mu`` comes from float64 eigenvalues of the midpoint; Gershgorin's bound is the fallback.
"""

from __future__ import annotations

import numpy as np

from flowlib.certify.balls import flint, upper

#: attempts at proving a float64 candidate, each doubling its margin
ATTEMPTS = 6


def _positive_definite(S: list, mu: float) -> bool:
    """``mu I - S`` positive definite for every symmetric member of the ball matrix ``S`` (Cholesky with proven
    positive pivots)."""
    arb = flint().arb
    n = len(S)
    L = [[arb(0)] * n for _ in range(n)]
    shift = arb(mu)
    for i in range(n):
        for j in range(i + 1):
            total = (shift if i == j else arb(0)) - S[i][j]
            for k in range(j):
                total -= L[i][k] * L[j][k]
            if i == j:
                if not total > 0:
                    return False
                L[i][i] = total.sqrt()
            else:
                L[i][j] = total / L[j][j]
    return True


def log_norm_bound(J: list) -> float:
    """A float ``mu`` proven to bound the largest eigenvalue of ``(J + J^T)/2`` for every ``J`` in the ball matrix.

    Returns ``inf`` for an empty or non-finite matrix.
    """
    n = len(J)
    if n == 0:
        return 0.0
    S = [[(J[i][j] + J[j][i]) / 2 for j in range(n)] for i in range(n)]
    if not all(x.is_finite() for row in S for x in row):
        return float("inf")
    arb = flint().arb
    gershgorin = max(upper(S[i][i] + sum((abs(S[i][j]) for j in range(n) if j != i), arb(0))) for i in range(n))
    mid = np.array([[float(x.mid()) for x in row] for row in S])
    spread = upper(sum((x.rad() ** 2 for row in S for x in row), arb(0)).sqrt())
    scale = float(np.max(np.abs(mid))) if mid.size else 0.0
    candidate = float(np.linalg.eigvalsh(mid)[-1])
    margin = spread + 1e-12 * scale + 1e-300
    for _ in range(ATTEMPTS):
        mu = candidate + margin
        if mu >= gershgorin:
            break
        if _positive_definite(S, mu):
            return mu
        margin *= 4.0
    return gershgorin
