"""Small dense linear algebra over mpmath numbers: vectors are lists of mpf, a matrix is a list of its columns.

Call inside ``mp.workdps(...)``. ``rcond`` cut-offs are relative to the largest singular value; callers pass the
one of the tolerance table at the working precision (:func:`rcond`).
"""

from __future__ import annotations

from mpmath import matrix, mp, mpf

from flowlib.mp.tolerances import tolerance


def rcond() -> mpf:
    """Singular-value cut-off at the working precision (the table's ``rcond``)."""
    return tolerance("rcond")


def dot(u, v) -> mpf:
    return mp.fdot(u, v)


def norm(u) -> mpf:
    return mp.sqrt(mp.fdot(u, u))


def combine(base, columns, coefs) -> list:
    """``base + sum_k coefs[k] columns[k]``."""
    out = list(base)
    for col, c in zip(columns, coefs):
        if c:
            out = [o + c * x for o, x in zip(out, col)]
    return out


def pinv_rows(columns, cut) -> list:
    """Rows of the pseudo-inverse of the matrix whose columns are ``columns`` (singular values below
    ``cut * sigma_max`` are dropped): ``len(columns)`` rows of length ``len(columns[0])``."""
    p, q = len(columns[0]), len(columns)
    A = matrix(p, q)
    for c, col in enumerate(columns):
        for r, x in enumerate(col):
            A[r, c] = x
    U, S, V = mp.svd_r(A, full_matrices=False)
    top = max((abs(s) for s in S), default=mpf(0))
    rows = [[mpf(0)] * p for _ in range(q)]
    for k in range(len(S)):
        if top == 0 or S[k] <= cut * top:
            continue
        inv = 1 / S[k]
        for c in range(q):
            vk = V[k, c] * inv
            if vk:
                rows[c] = [x + vk * U[r, k] for r, x in enumerate(rows[c])]
    return rows


def lstsq(columns, rhs, cut) -> list:
    """Minimum-norm least-squares coefficients ``x`` of ``sum_k x_k columns[k] ~ rhs``."""
    return [dot(row, rhs) for row in pinv_rows(columns, cut)]


def box_least_squares(columns, v0, lo, hi) -> list:
    """Minimise ``|v0 + sum_k s_k columns[k]|`` over ``lo <= s_k <= hi`` (active-set method).

    The algorithm of :func:`flowlib.kernels.events.box_least_squares`: start at the lower bounds, free the bound
    variable whose gradient points into the box, step to the minimum over the free set (minimum-norm solve),
    stop at the first blocking bound, release only at a minimum over the free set; exact at termination (where the
    minimum is 0 or nearly so, once the kernel's refinement, :func:`_refine`, has passed the release test's
    rounding threshold). The iteration count is bounded (``20 q + 20``); on exhaustion the kernel's fallback
    (coordinate descent and a polishing solve) is used.
    """
    q = len(columns)
    H = [[dot(a, b) for b in columns] for a in columns]
    g0 = [dot(a, v0) for a in columns]
    span = max(abs(lo), abs(hi))
    # gradient components are zero to rounding relative to their own column (see the kernel's)
    lengths = [mp.sqrt(H[k][k]) for k in range(q)]
    size = norm(v0) + span * mp.fsum(lengths)
    tol = [tolerance("box_gradient") * size * length for length in lengths]
    s = [mpf(lo)] * q
    free = [False] * q
    at_minimum = True  # release only at the minimum over the free set (see the kernel's)

    def gradient():
        return [mp.fdot(H[k], s) + g0[k] for k in range(q)]

    def pulls_inward(k, grad):
        return (s[k] <= lo and grad[k] < -tol[k]) or (s[k] >= hi and grad[k] > tol[k])

    for _ in range(20 * q + 20):
        grad = gradient()
        if not any(free):
            at_minimum = True
        changed = False
        for k in range(q):
            if at_minimum and not free[k] and pulls_inward(k, grad):
                free[k] = changed = True
                break
        if not any(free):
            return _refine(columns, v0, s, free, lo, hi)
        if _free_step(columns, v0, s, free, lo, hi):
            at_minimum = False
            continue
        at_minimum = True
        if not changed:
            grad = gradient()
            if not any(not free[k] and pulls_inward(k, grad) for k in range(q)):
                return _refine(columns, v0, s, free, lo, hi)
    return _coordinate_descent(columns, v0, H, g0, lo, hi, s)


def _free_step(columns, v0, s, free, lo, hi) -> bool:
    """The kernel's ``_free_step``: the step to the minimum over the free variables (solved on the columns, not the
    normal equations), cut short where it first meets a bound, which binds that variable; ``s`` and ``free`` are
    updated in place. Returns whether a bound cut it short."""
    idx = [k for k in range(len(s)) if free[k]]
    step = lstsq([columns[k] for k in idx], [-x for x in combine(v0, columns, s)], rcond())
    alpha, blocking = mpf(1), None
    for a, k in enumerate(idx):
        if step[a] > 0 and s[k] + step[a] > hi:
            r = (hi - s[k]) / step[a]
        elif step[a] < 0 and s[k] + step[a] < lo:
            r = (lo - s[k]) / step[a]
        else:
            continue
        if r < alpha:
            alpha, blocking = r, (k, hi if step[a] > 0 else lo)
    for a, k in enumerate(idx):
        s[k] = min(hi, max(lo, s[k] + alpha * step[a]))
    if blocking is None:
        return False
    s[blocking[0]] = blocking[1]
    free[blocking[0]] = False
    return True


def _refine(columns, v0, s, free, lo, hi) -> list:
    """The kernel's ``_refine``: where a gradient below the release test could hide a residual (the bound on the
    gap ``sum inward gradient (hi - lo)`` above ``box_gradient`` times ``|r|^2``), release the bound variable with the
    largest inward gradient, move to the minimum over the free set, and keep it only if the residual decreased;
    at most ``q + 1`` times. Returns ``s``."""
    q = len(s)
    for _ in range(q + 1):
        r = combine(v0, columns, s)
        f = dot(r, r)
        gap, best, largest = mpf(0), None, mpf(0)
        for k in range(q):
            if free[k]:
                continue
            g = dot(columns[k], r)
            inward = -g if s[k] <= lo else (g if s[k] >= hi else mpf(0))
            if inward > 0:
                gap += inward * (hi - lo)
                if inward > largest:
                    largest, best = inward, k
        if best is None or gap <= tolerance("box_gradient") * f:
            return s
        trial, trial_free = list(s), list(free)
        trial_free[best] = True
        for _ in range(q + 1):
            if not (any(trial_free) and _free_step(columns, v0, trial, trial_free, lo, hi)):
                break
        r = combine(v0, columns, trial)
        if not dot(r, r) < f:
            return s
        s[:] = trial
        free[:] = trial_free
    return s


def _coordinate_descent(columns, v0, H, g0, lo, hi, s):
    """The kernel's fallback when the active set cycles: cyclic coordinate descent from the box centre, then one
    least-squares polish of the interior variables (thresholds as powers of the working epsilon)."""
    q = len(s)
    s = [(lo + hi) / 2] * q
    for _ in range(100_000):
        change = mpf(0)
        for k in range(q):
            if H[k][k] <= 0:
                continue
            grad = g0[k] + mp.fdot(H[k], s)
            new = min(hi, max(lo, s[k] - grad / H[k][k]))
            change = max(change, abs(new - s[k]))
            s[k] = new
        if change <= tolerance("box_converged") * (hi - lo):
            break
    margin = tolerance("box_margin") * (hi - lo)
    idx = [k for k in range(q) if lo + margin < s[k] < hi - margin]
    if not idx:
        return s
    step = lstsq([columns[k] for k in idx], [-x for x in combine(v0, columns, s)], rcond())
    polished = [s[k] + d for k, d in zip(idx, step)]
    if all(lo <= x <= hi for x in polished):
        for k, x in zip(idx, polished):
            s[k] = x
    return s
