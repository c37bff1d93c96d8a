"""Taylor coefficients of the gradient-flow field of a two-layer network under a fixed activation pattern.

Layout (shared by every kernel)
-------------------------------
``P : ndarray, shape (m, d + 2), float64`` holds one row per neuron ``j``: ``P[j, :d] = w_j``, ``P[j, d] = b_j``
(kept at 0 when the problem has no bias) and ``P[j, d + 1] = a_j``.
``Xa : ndarray, shape (n, d + 1)`` is the data with a column of ones appended, so that the pre-activation is
``z_ij = <P[j, :d + 1], Xa[i]>``.
``S : ndarray, shape (n, m)`` holds the slopes ``s_ij`` (1 on the active side ``z_ij > 0``, ``leak`` otherwise).

Inside a cell the loss is ``L = c * sum_i l(f_i, y_i)`` with ``f_i = sum_j a_j s_ij z_ij`` and the flow is
``theta' = -grad L``:

    w_j' = -a_j sum_i G_i s_ij x_i,   b_j' = -a_j sum_i G_i s_ij,   a_j' = -sum_i G_i s_ij z_ij,

with ``G_i = c l'(f_i)``. All of it is built from linear maps, products and ``exp``/logistic, so the Taylor
coefficients ``theta^[k]`` of the solution follow from the classical power-series recurrences (automatic
differentiation in Taylor mode): Cauchy products for ``a_j z_ij`` and ``G_i z_ij``, ``E' = -y f' E`` for the
exponential loss and ``p' = -p (1 - p) (y f)'`` for the logistic one.

Cost. Each order takes two matrix products of size ``n m (d + 1)``, the two of one gradient evaluation
(:func:`taylor_coefficients`; ``np.dot`` on C-contiguous arrays, i.e. BLAS, from :data:`BLAS_MIN_WORK`
multiply-adds up, plain loops below), plus Cauchy sums of ``O(k m d + k n)``.
"""

import math
from typing import NamedTuple

import numpy as np

from ._jit import jit, last_use
from .tolerances import EPS64

LOSS_EXP = 0
LOSS_LOGISTIC = 1
LOSS_SQUARE = 2

#: Products with at least this many multiply-adds go to BLAS (``np.dot`` on C-contiguous float64 arrays inside
#: Numba); smaller ones run as plain loops, where a library call would cost more than the arithmetic.
BLAS_MIN_WORK = 4096


@jit
def matmul_nt(A, B, out):
    """``out = A @ B.T`` for C-contiguous ``A (p, r)``, ``B (q, r)``, ``out (p, q)``."""
    p, r = A.shape
    q = B.shape[0]
    if p * q * r >= BLAS_MIN_WORK:
        np.dot(A, B.T, out)
        return
    loops_nt(A, B, out)


@jit
def loops_nt(A, B, out):
    """:func:`matmul_nt` as plain loops (see :func:`loops_nn`), over the first ``r = A.shape[1]`` columns of ``B``
    (so that ``B`` may be the packed state, whose last column is ``a``)."""
    p, r = A.shape
    q = B.shape[0]
    for a in range(p):
        for b in range(q):
            acc = 0.0
            for k in range(r):
                acc += A[a, k] * B[b, k]
            out[a, b] = acc


@jit
def matmul_nn(A, B, out):
    """``out = A @ B`` for C-contiguous ``A (p, r)``, ``B (r, q)``, ``out (p, q)``."""
    p, r = A.shape
    q = B.shape[1]
    if p * q * r >= BLAS_MIN_WORK:
        np.dot(A, B, out)
        return
    loops_nn(A, B, out)


@jit
def loops_nn(A, B, out):
    """:func:`matmul_nn` as plain loops, for callers that decided once that their products are small (a BLAS
    branch in a small kernel's inner loop costs it about 1 us per Taylor series)."""
    p, r = A.shape
    q = B.shape[1]
    for a in range(p):
        for b in range(q):
            out[a, b] = 0.0
        for k in range(r):
            x = A[a, k]
            for b in range(q):
                out[a, b] += x * B[k, b]


@jit
def matmul_tn(A, B, out):
    """``out = A.T @ B`` for C-contiguous ``A (r, p)``, ``B (r, q)``, ``out (p, q)``."""
    r, p = A.shape
    q = B.shape[1]
    if p * q * r >= BLAS_MIN_WORK:
        np.dot(A.T, B, out)
        return
    loops_tn(A, B, out)


@jit
def loops_tn(A, B, out):
    """:func:`matmul_tn` as plain loops (see :func:`loops_nn`)."""
    r, p = A.shape
    q = B.shape[1]
    for a in range(p):
        for b in range(q):
            out[a, b] = 0.0
    for k in range(r):
        for a in range(p):
            x = A[k, a]
            for b in range(q):
                out[a, b] += x * B[k, b]


@jit
def row_dots(A, B, out):
    """``out_i = sum_q A_iq B_iq`` over the columns of ``B`` (``A`` may be wider), each sum in increasing ``q``.

    Four rows at a time, in four independent chains of additions: a single chain waits on each addition's latency
    (sampled on B8, whose rows hold 65 features, it was the largest loop of the recurrence outside BLAS). The
    numbers are the same, to the last bit, as one row at a time.
    """
    n, width = B.shape
    top = n - n % 4
    for i in range(0, top, 4):
        acc0 = 0.0
        acc1 = 0.0
        acc2 = 0.0
        acc3 = 0.0
        for q in range(width):
            acc0 += A[i, q] * B[i, q]
            acc1 += A[i + 1, q] * B[i + 1, q]
            acc2 += A[i + 2, q] * B[i + 2, q]
            acc3 += A[i + 3, q] * B[i + 3, q]
        out[i] = acc0
        out[i + 1] = acc1
        out[i + 2] = acc2
        out[i + 3] = acc3
    for i in range(top, n):
        acc = 0.0
        for q in range(width):
            acc += A[i, q] * B[i, q]
        out[i] = acc


@jit
def _stable_sigmoid(u):
    """Return ``1 / (1 + exp(-u))`` without overflow."""
    if u >= 0.0:
        return 1.0 / (1.0 + math.exp(-u))
    e = math.exp(u)
    return e / (1.0 + e)


@jit
def loss_terms(loss_kind, f, y):
    """Return ``l(f, y)`` for one sample, computed without overflow where the loss allows it."""
    if loss_kind == LOSS_SQUARE:
        r = f - y
        return 0.5 * r * r
    q = y * f
    if loss_kind == LOSS_EXP:
        return math.exp(-q)
    # logistic: log(1 + exp(-q)) = max(-q, 0) + log1p(exp(-|q|))
    return max(-q, 0.0) + math.log1p(math.exp(-abs(q)))


@jit
def preactivations(Xa, P, out_Z, cols=None):
    """``out_Z[i, j] = <P[j, :d+1], Xa[i]>`` for the ``(n, m)`` pre-activations of one coefficient layer; with
    ``cols``, ``Xa`` is a network's ``Xc`` (the columns ``cols`` of its data, :class:`.bundles.Network`) and the
    sum runs over those columns of ``P``.

    The product is ``Xa @ Pt`` with ``Pt`` the transposed columns of ``P`` copied C-contiguous: OpenBLAS's kernels
    for two non-transposed operands took about a quarter less time than for ``Xa @ P.T`` at ``n = 360``, ``nc =
    52``, ``m = 50`` and nearly half less at ``m = 20`` (on Intel Xeon and AMD EPYC alike; the same from ``m =
    100``). Below ``BLAS_MIN_WORK`` the loops sum each entry over the columns in increasing order."""
    n, da = Xa.shape
    m = P.shape[0]
    if cols is None:
        if n * m * da >= BLAS_MIN_WORK:
            Pt = np.empty((da, m))
            for j in range(m):
                for k in range(da):
                    Pt[k, j] = P[j, k]
            matmul_nn(Xa, Pt, out_Z)
            return
        loops_nt(Xa, P, out_Z)
        return
    Pt = np.empty((da, m))
    for j in range(m):
        for k in range(da):
            Pt[k, j] = P[j, cols[k]]
    matmul_nn(Xa, Pt, out_Z)


@jit
def network_outputs(Xa, P, S, out_f):
    """``out_f[i] = f_i = sum_j a_j s_ij z_ij`` at parameters ``P`` under slopes ``S``.

    With ``S`` the slopes of the current pattern this is the network's output, since ``sigma(z) = s z`` on each
    side.
    """
    n, da = Xa.shape
    m = P.shape[0]
    if n * m * da >= BLAS_MIN_WORK:
        # f_i = <(S @ Q)_i, Xa_i> with Q_j = a_j (w_j, b_j): one matrix product
        Q = np.empty((m, da))
        for j in range(m):
            for k in range(da):
                Q[j, k] = P[j, da] * P[j, k]
        T = np.empty((n, da))
        matmul_nn(S, Q, T)
        row_dots(T, Xa, out_f)
        return
    for i in range(n):
        f = 0.0
        for j in range(m):
            z = 0.0
            for k in range(da):
                z += P[j, k] * Xa[i, k]
            f += P[j, da] * S[i, j] * z
        out_f[i] = f


@jit
def network_loss(Xa, y, P, S, loss_kind, c, log):
    """Loss ``L = c sum_i l(f_i, y_i)`` at parameters ``P`` under slopes ``S``; with ``log``, ``ln L`` without
    underflow (``-inf`` only when ``L`` is exactly 0)."""
    f = np.empty(Xa.shape[0])
    network_outputs(Xa, P, S, f)
    return log_loss_from_outputs(f, y, loss_kind, c) if log else loss_from_outputs(f, y, loss_kind, c)


@jit
def loss_from_outputs(f, y, loss_kind, c):
    """``L = c sum_i l(f_i, y_i)`` from the network outputs ``f``."""
    total = 0.0
    for i in range(len(f)):
        total += loss_terms(loss_kind, f[i], y[i])
    return c * total


@jit
def _loss_derivative_order(loss_kind, y, c, F, k, G, A0, A1, A2, log_clock, s0):
    """Order-``k`` coefficient of ``G = c l'(f)`` given ``F[0..k]`` (and the auxiliary series up to ``k - 1``).

    ``A0``/``A1``/``A2`` hold auxiliary series: ``E = exp(-y f)`` (exp loss) or ``p = 1/(1 + exp(y f))`` and
    ``H = p (1 - p)`` (logistic loss). Each is updated to order ``k``.

    With ``log_clock`` the independent variable is ``s = ln(1 + t)`` (``dt/ds = e^s``, ``s = s0 + tau``) and the
    series is that of ``G~ = e^s G``, computed in the log domain so that it neither overflows nor underflows at
    ``t = 1e300`` or ``ln t = 1e5``: ``E = exp(s - y f)`` for the exp loss (``E' = (1 - y f') E``);
    ``G~ = -c y exp(s - q) sigma(q)`` with ``q = y f`` for the logistic loss (``A2 = exp(s - q)``,
    ``A0 = r = sigma(q)``, ``A1 = r (1 - r)``, ``r' = q' r (1 - r)``); ``e^s`` times the plain series for the
    square loss (``A0`` holds the plain series).
    """
    n = F.shape[1]
    if loss_kind == LOSS_SQUARE:
        for i in range(n):
            plain = c * (F[k, i] - (y[i] if k == 0 else 0.0))
            if not log_clock:
                G[k, i] = plain
                continue
            A0[k, i] = plain
            acc = 0.0
            coef = math.exp(s0)
            for l in range(k + 1):
                acc += coef * A0[k - l, i]
                coef /= l + 1
            G[k, i] = acc
    elif loss_kind == LOSS_EXP:
        for i in range(n):
            if k == 0:
                A0[0, i] = math.exp((s0 if log_clock else 0.0) - y[i] * F[0, i])
            else:
                acc = 0.0
                for l in range(1, k + 1):
                    acc += l * F[l, i] * A0[k - l, i]
                A0[k, i] = (-y[i] * acc + (A0[k - 1, i] if log_clock else 0.0)) / k
            G[k, i] = -c * y[i] * A0[k, i]
    else:
        # logistic: A0 = r = sigma(+-q), A1 = r (1 - r), r' = +-q' r (1 - r)
        for i in range(n):
            q = y[i] * F[0, i]
            # the sign of sigma's argument: -q in the t clock (p = sigma(-q)); in the log clock +q where the sample is
            # classified right (G~ = -c y exp(s - q) sigma(q): exp(s - q) cannot overflow), else -q (G~ = -c y e^s
            # sigma(-q): exp(s - q) would overflow where q < -709 at a finite state)
            sgn = 1.0 if log_clock and q >= 0.0 else -1.0
            shift = sgn > 0.0  # A2 = exp(s - q) (else e^s)
            if k == 0:
                A0[0, i] = _stable_sigmoid(sgn * q)
                # r (1 - r) as a product: r - r^2 cancels to 0 once r rounds to 1 (|q| > 37 in float64), and then the
                # whole series of G vanishes and the step-size rule sees a linear flow (see flat_loss_radius)
                A1[0, i] = A0[0, i] * _stable_sigmoid(-sgn * q)
                if log_clock:
                    A2[0, i] = math.exp(s0 - q) if shift else math.exp(s0)
            else:
                acc = 0.0
                acc2 = 0.0
                for l in range(1, k + 1):
                    acc += l * F[l, i] * A1[k - l, i]
                    if shift:
                        acc2 += l * F[l, i] * A2[k - l, i]
                A0[k, i] = sgn * y[i] * acc / k
                if log_clock:
                    A2[k, i] = (-y[i] * acc2 + A2[k - 1, i]) / k
                sq = 0.0
                for l in range(k + 1):
                    sq += A0[l, i] * A0[k - l, i]
                A1[k, i] = A0[k, i] - sq
            if log_clock:
                acc = 0.0
                for l in range(k + 1):
                    acc += A2[l, i] * A0[k - l, i]
                G[k, i] = -c * y[i] * acc
            else:
                G[k, i] = -c * y[i] * A0[k, i]
    last_use(y, F, G, A0, A1, A2)


#: ``ln(1 / eps)`` in float64: beyond this margin ``|y f|`` the logistic loss's derivative ``sigma(-|y f|)`` is
#: below the rounding of its value (see :func:`flat_loss_radius`).
FLAT_MARGIN = -math.log(EPS64)


@jit
def flat_loss_radius(loss_kind, y, F, flat):
    """A bound on the radius of convergence (in the expansion variable) of the logistic loss's residual weights,
    from the samples whose margin ``|q_i| = |y_i f_i|`` is at least ``flat`` (``ln(1 / eps)``) and falling:
    ``min_i sqrt(q_i^2 + pi^2) / |q_i'|``, ``inf`` for other losses or where no such sample approaches the boundary.

    ``sigma(-q)`` is singular at ``q = +-i pi``, so ``G_i`` as a function of time is singular about where
    ``q_i(t)`` reaches it, at ``|t| ~ sqrt(q_i^2 + pi^2) / |q_i'|``. The step-size rule sees that radius in the
    decay of the Taylor coefficients, except where they underflow or drown in rounding: for a sample this far from
    the boundary, the variation of ``sigma`` is about ``e^-|q_i|`` relative to its value (0 in float64 past
    ``|q_i| ~ 745``), and a misclassified sample at ``q = -800`` would look like a linear flow to the rule, which
    would step over the whole approach to ``q = 0`` in one step. Where ``|q_i|`` grows, that variation stays below
    rounding and bounds nothing. ``F`` holds the outputs' series (at least orders 0 and 1).
    """
    r = math.inf
    if loss_kind != LOSS_LOGISTIC:
        return r
    for i in range(F.shape[1]):
        q = y[i] * F[0, i]
        dq = y[i] * F[1, i]
        if abs(q) >= flat and q * dq < 0.0:
            r = min(r, math.sqrt(q * q + math.pi * math.pi) / abs(dq))
    return r


class SeriesWork(NamedTuple):
    """The arrays of :func:`taylor_coefficients` (build them with :func:`series_work`): ``C`` (``K + 1, m, d + 2``):
    the state's Taylor coefficients; ``F``, ``G``, ``A0``, ``A1``, ``A2`` (``K + 1, n``): those of the network
    outputs, the residual weights and the loss derivative's auxiliary series; ``R`` (``K + 1, m, d + 1``): the
    residual rows ``S.T @ (G^[k] Xa)`` (0 in the columns the network's ``Xc`` drops); ``Q`` and ``Rc`` (``m, nc``),
    ``T`` and ``Xg`` (``n, nc``): scratch of the products over ``Xc``'s ``nc`` columns; ``Z0`` and ``Z1`` (``n,
    m``): the pre-activations ``z_ij`` at ``C[0]`` (the caller's, on entry) and their first derivatives ``z_ij'``
    (written by the recurrence), which the event screen reads too. All C-contiguous float64."""

    C: np.ndarray
    F: np.ndarray
    G: np.ndarray
    A0: np.ndarray
    A1: np.ndarray
    A2: np.ndarray
    R: np.ndarray
    Q: np.ndarray
    T: np.ndarray
    Xg: np.ndarray
    Z0: np.ndarray
    Z1: np.ndarray
    Rc: np.ndarray


@jit
def series_work(order, n, m, da, nc):
    """A :class:`SeriesWork` for order ``order``, ``n`` samples, ``m`` neurons, ``da = d + 1`` and ``nc`` columns
    in the network's ``Xc`` (zeros; callable from Python and from kernels)."""
    return SeriesWork(np.zeros((order + 1, m, da + 1)), np.zeros((order + 1, n)), np.zeros((order + 1, n)),
                      np.zeros((order + 1, n)), np.zeros((order + 1, n)), np.zeros((order + 1, n)),
                      np.zeros((order + 1, m, da)), np.zeros((m, nc)), np.zeros((n, nc)), np.zeros((n, nc)),
                      np.zeros((n, m)), np.zeros((n, m)), np.zeros((m, nc)))


@jit
def first_outputs(C, S, Z0, Z1, k, out):
    """``out_i = f_i^[k]`` for ``k`` in {0, 1} from the pre-activations' first two coefficients: ``f^[0] = sum_j s_ij
    a_j z_ij`` and ``f^[1] = sum_j s_ij (a_j z_ij' + a_j' z_ij)`` (``a_j^[l] = C[l, j, -1]``), ``O(n m)`` instead of
    a matrix product of ``n m (d + 1)``. Eight samples at a time, in eight independent chains of additions (as
    :func:`row_dots`, with twice its chains: ``f^[1]`` at ``n = 360``, ``m = 50`` took 10 us against 14.5 with four);
    every sum runs over ``j`` in increasing order, the same numbers to the last bit as one sample at a time."""
    n, m = S.shape
    da = C.shape[2] - 1
    top = n - n % 8
    for i in range(0, top, 8):
        acc0 = 0.0
        acc1 = 0.0
        acc2 = 0.0
        acc3 = 0.0
        acc4 = 0.0
        acc5 = 0.0
        acc6 = 0.0
        acc7 = 0.0
        if k == 0:
            for j in range(m):
                a0 = C[0, j, da]
                acc0 += S[i, j] * (a0 * Z0[i, j])
                acc1 += S[i + 1, j] * (a0 * Z0[i + 1, j])
                acc2 += S[i + 2, j] * (a0 * Z0[i + 2, j])
                acc3 += S[i + 3, j] * (a0 * Z0[i + 3, j])
                acc4 += S[i + 4, j] * (a0 * Z0[i + 4, j])
                acc5 += S[i + 5, j] * (a0 * Z0[i + 5, j])
                acc6 += S[i + 6, j] * (a0 * Z0[i + 6, j])
                acc7 += S[i + 7, j] * (a0 * Z0[i + 7, j])
        else:
            for j in range(m):
                a0 = C[0, j, da]
                a1 = C[1, j, da]
                acc0 += S[i, j] * (a0 * Z1[i, j] + a1 * Z0[i, j])
                acc1 += S[i + 1, j] * (a0 * Z1[i + 1, j] + a1 * Z0[i + 1, j])
                acc2 += S[i + 2, j] * (a0 * Z1[i + 2, j] + a1 * Z0[i + 2, j])
                acc3 += S[i + 3, j] * (a0 * Z1[i + 3, j] + a1 * Z0[i + 3, j])
                acc4 += S[i + 4, j] * (a0 * Z1[i + 4, j] + a1 * Z0[i + 4, j])
                acc5 += S[i + 5, j] * (a0 * Z1[i + 5, j] + a1 * Z0[i + 5, j])
                acc6 += S[i + 6, j] * (a0 * Z1[i + 6, j] + a1 * Z0[i + 6, j])
                acc7 += S[i + 7, j] * (a0 * Z1[i + 7, j] + a1 * Z0[i + 7, j])
        out[i] = acc0
        out[i + 1] = acc1
        out[i + 2] = acc2
        out[i + 3] = acc3
        out[i + 4] = acc4
        out[i + 5] = acc5
        out[i + 6] = acc6
        out[i + 7] = acc7
    for i in range(top, n):
        total = 0.0
        for j in range(m):
            a0 = C[0, j, da]
            if k == 0:
                total += S[i, j] * (a0 * Z0[i, j])
            else:
                total += S[i, j] * (a0 * Z1[i, j] + C[1, j, da] * Z0[i, j])
        out[i] = total


@jit
def taylor_coefficients(net, order, log_clock, s0, S, cons_offset, cons_sample, cons_pinv, Cm, work, start=0):
    """Taylor coefficients of the flow under the fixed slopes ``S``, from ``C[0]`` up to order ``order``; with
    ``start > 0``, those above order ``start`` only, continuing a call that stopped there (every series of ``work``
    up to that order is as that call left it).

    Each order costs two matrix products of size ``n m nc`` (BLAS on large problems; ``nc <= d + 1`` the columns
    of the network's ``Xc``, which leaves out those that contribute nothing), the two of one gradient evaluation,
    and ``O(k m d + k n)`` for the Cauchy sums; orders 0 and 1 of the outputs come from the pre-activations instead
    (``O(n m)``), so that with the product that gives ``Z1`` and the caller's ``Z0`` a step of order ``K`` costs
    ``2 K`` products in all:

    * ``f^[k] = sum_l sum_j a_j^[l] s_ij z_ij^[k-l]``: for ``k <= 1`` from ``Z0`` and ``Z1`` (:func:`first_outputs`),
      above as ``<(S @ Q^[k])_i, Xa_i>`` with ``Q_j^[k] = sum_l a_j^[l] p_j^[k-l]`` (``p_j = (w_j, b_j)``,
      ``z_ij = <p_j, Xa_i>``);
    * ``R^[k] = S.T @ (G^[k] Xa)``, i.e. ``R_j^[k] = sum_i s_ij G_i^[k] Xa_i``; then
      ``p_j'^[k] = -sum_l a_j^[l] R_j^[k-l]`` and
      ``a_j'^[k] = -sum_l sum_i G_i^[l] s_ij z_ij^[k-l] = -sum_l <p_j^[k-l], R_j^[l]>``;
    * ``Z1 = Xa @ p^[1].T`` once ``C[1]`` is known (the switching functions' derivatives, which the event screen
      reads as well);
    * with weight decay ``lambda``, ``-lambda theta^[k]`` is added to each trained parameter's ``theta'^[k]``
      (after the projection onto held surfaces: ``-lambda p_j`` is tangent to every hyperplane ``z_ij = 0`` that
      ``p_j`` lies on, so the multipliers do not see it).

    Every Cauchy sum runs over ``l`` in increasing order with the features innermost (contiguous, so that the
    compiler vectorises it without reordering any sum). The switching functions' coefficients ``z_ij^[k]`` above
    the first are not needed by the recurrence; the event screen computes them only where it cannot rule a root out
    (:func:`.driver.earliest_switching`).

    Parameters
    ----------
    net : :class:`.bundles.Network`
        Data with a column of ones ``Xa`` (``n, d + 1``, C-contiguous), labels (targets for the square loss), loss
        code (``LOSS_EXP``, ``LOSS_LOGISTIC`` or ``LOSS_SQUARE``), reduction factor ``c`` (``1/n`` for the mean, 1
        for the sum), whether ``b`` and ``a`` move, and the weight decay ``lambda >= 0`` (the flow of
        ``L + lambda/2 |theta_trained|^2``; 0 adds nothing, bit for bit). ``leak`` is not read: the slopes are ``S``.
    order : int
        Highest order ``K`` computed.
    log_clock : bool
        Expand in ``s = ln(1 + t)`` instead of ``t`` (``d theta / ds = e^s theta'``, see
        :func:`_loss_derivative_order`); ``s0`` is the expansion point.
    s0 : float
    S : ndarray, shape (n, m), C-contiguous
        Slopes of the current activation pattern.
    cons_offset, cons_sample, cons_pinv : ndarray
        Surfaces the state is constrained to (sliding, sticking): neuron ``j`` is held on the hyperplanes of the
        samples ``cons_sample[cons_offset[j]:cons_offset[j + 1]]``, whose normals ``N_j`` (columns ``(x_i, 1)``,
        or ``(x_i, 0)`` without bias) have pseudo-inverse rows ``cons_pinv[slot]`` (shape ``(d + 1,)``). The
        velocity of such a neuron is the projection ``v - N_j N_j^+ v`` of its velocity ``v`` without those
        samples: the Filippov sliding field (events.py). The projection is constant, so it commutes with the
        Taylor recurrence and is applied order by order.
    Cm : ndarray, shape (>= K, n_slots)
        Output: the coefficients ``N_j^+ v`` of each constrained surface; the Filippov multiplier is
        ``Cm / (a_j G_i)``.
    work : :class:`SeriesWork`
        ``C[0]`` holds the state on entry and ``Z0`` its pre-activations (:func:`preactivations`); ``C[1..K]`` and
        ``Z1`` are filled, and on return ``F[0..K-1]`` holds the series of the network outputs (``F[0]``: the
        outputs at ``C[0]``) and ``G`` that of the residual weights.
    """
    Xa, y, loss_kind, c, bias, train_outer, decay = net.Xa, net.y, net.loss_kind, net.c, net.bias, \
        net.train_outer, net.decay
    Xc, cols = net.Xc, net.cols
    C, F, G, A0, A1, A2, R, Q, T, Xg, Z0, Z1, Rc = work
    n, da = Xa.shape
    nc = Xc.shape[1]
    m = C.shape[1]
    d = da - 1
    blas = n * m * nc >= BLAS_MIN_WORK  # both products go to BLAS, decided once (see loops_nn)
    for k in range(start, order):
        lmax = k if train_outer else 0
        # f^[k]
        if k < 2:
            first_outputs(C, S, Z0, Z1, k, F[k])
        else:
            for j in range(m):
                a0 = C[0, j, da]
                for q in range(nc):
                    Q[j, q] = a0 * C[k, j, cols[q]]
                for l in range(1, lmax + 1):
                    al = C[l, j, da]
                    for q in range(nc):
                        Q[j, q] += al * C[k - l, j, cols[q]]
            if blas:
                np.dot(S, Q, T)
            else:
                loops_nn(S, Q, T)
            row_dots(T, Xc, F[k])
        _loss_derivative_order(loss_kind, y, c, F, k, G, A0, A1, A2, log_clock, s0)
        # R_j^[k] = sum_i s_ij G_i^[k] Xa_i, over the columns of Xc (the others' sums are 0)
        for i in range(n):
            g = G[k, i]
            for q in range(nc):
                Xg[i, q] = g * Xc[i, q]
        out = R[k] if nc == da else Rc
        if blas:
            np.dot(S.T, Xg, out)
        else:
            loops_tn(S, Xg, out)
        if nc < da:
            R[k, :, :] = 0.0
            for j in range(m):
                for q in range(nc):
                    R[k, j, cols[q]] = Rc[j, q]
        inv = 1.0 / (k + 1)
        for j in range(m):
            # (w_j, b_j)' = -sum_l a_j^[l] R_j^[k-l]
            a0 = C[0, j, da]
            for q in range(da):
                C[k + 1, j, q] = a0 * R[k, j, q]
            for l in range(1, lmax + 1):
                al = C[l, j, da]
                for q in range(da):
                    C[k + 1, j, q] += al * R[k - l, j, q]
            for q in range(da):
                C[k + 1, j, q] = -C[k + 1, j, q]
            if not bias:
                C[k + 1, j, d] = 0.0
            for slot in range(cons_offset[j], cons_offset[j + 1]):
                acc = 0.0
                for q in range(da):
                    acc += cons_pinv[slot, q] * C[k + 1, j, q]
                Cm[k, slot] = acc
            for slot in range(cons_offset[j], cons_offset[j + 1]):
                i = cons_sample[slot]
                for q in range(d):
                    C[k + 1, j, q] -= Cm[k, slot] * Xa[i, q]
                if bias:
                    C[k + 1, j, d] -= Cm[k, slot]
            if decay != 0.0:
                for q in range(da):
                    C[k + 1, j, q] -= decay * C[k, j, q]
            for q in range(da):
                C[k + 1, j, q] *= inv
            C[k + 1, j, da] = 0.0
            if train_outer:
                # a_j' = -sum_l sum_i G_i^[l] s_ij z_ij^[k-l] = -sum_l <p_j^[k-l], R_j^[l]>
                acc = 0.0
                for l in range(k + 1):
                    part = 0.0
                    for q in range(da):
                        part += C[k - l, j, q] * R[l, j, q]
                    acc += part
                if decay != 0.0:
                    acc += decay * C[k, j, da]
                C[k + 1, j, da] = -acc * inv
        if k == 0:
            preactivations(Xc, C[1], Z1, cols)


@jit
def residual_from_outputs(f, y, loss_kind, c, log_clock, s, G):
    """``G_i = c l'(f_i)`` from the network outputs ``f`` (may be ``G`` itself); with ``log_clock``, ``e^s G_i``
    computed in the log domain (see :func:`_loss_derivative_order`)."""
    for i in range(len(G)):
        fi = f[i]
        if loss_kind == LOSS_SQUARE:
            G[i] = c * (fi - y[i]) * (math.exp(s) if log_clock else 1.0)
        elif loss_kind == LOSS_EXP:
            G[i] = -c * y[i] * math.exp((s if log_clock else 0.0) - y[i] * fi)
        elif log_clock:
            q = y[i] * fi
            G[i] = -c * y[i] * (math.exp(s - q) / (1.0 + math.exp(-q)) if q >= 0.0 else
                                math.exp(s) / (1.0 + math.exp(q)))
        else:
            G[i] = -c * y[i] * _stable_sigmoid(-y[i] * fi)


@jit
def velocity_inner(Xa, y, S, loss_kind, c, P, G, log_clock, s):
    """Residual weights ``G_i = c l'(f_i)`` at ``P`` under slopes ``S`` (order 0 of the series), into ``G``.

    With ``log_clock``: ``e^s G_i``, computed in the log domain (see :func:`_loss_derivative_order`).
    """
    network_outputs(Xa, P, S, G)
    residual_from_outputs(G, y, loss_kind, c, log_clock, s, G)


@jit
def residual_weights(Z, P, S, y, loss_kind, c, log_clock, s, G):
    """:func:`velocity_inner` from the pre-activations ``Z`` of ``P`` (``O(n m)``, no matrix product): ``f_i =
    sum_j s_ij a_j z_ij`` (:func:`first_outputs`), then ``G``."""
    first_outputs(P.reshape((1, P.shape[0], P.shape[1])), S, Z, Z, 0, G)
    residual_from_outputs(G, y, loss_kind, c, log_clock, s, G)


@jit
def penalty(P, bias, train_outer):
    """``|theta_trained|^2``: the squares of ``w_j``, of ``b_j`` with ``bias`` and of ``a_j`` with ``train_outer``,
    summed neuron by neuron (row by row, left to right); the weight-decay term of the objective is ``lambda/2`` of
    it."""
    m, cols = P.shape
    d = cols - 2
    total = 0.0
    for j in range(m):
        for q in range(d):
            total += P[j, q] * P[j, q]
        if bias:
            total += P[j, d] * P[j, d]
        if train_outer:
            total += P[j, d + 1] * P[j, d + 1]
    return total


@jit
def log_loss_from_outputs(f, y, loss_kind, c):
    """``ln L`` from the network outputs ``f``, without underflow (``-inf`` only when ``L`` is exactly 0)."""
    n = len(f)
    terms = np.empty(n)
    top = -math.inf
    for i in range(n):
        if loss_kind == LOSS_SQUARE:
            r = f[i] - y[i]
            terms[i] = math.log(0.5 * r * r) if r != 0.0 else -math.inf
        elif loss_kind == LOSS_EXP:
            terms[i] = -y[i] * f[i]
        else:
            q = y[i] * f[i]
            # ln ln(1 + e^-q): for large q, ln(1 + u) = u (1 - u/2 + ...) with u = e^-q
            # and for q < -709 (e^-q overflows), ln(1 + e^-q) = -q + ln(1 + e^q)
            if q > 30.0:
                terms[i] = -q + math.log1p(-0.5 * math.exp(-q))
            elif q < -709.0:
                terms[i] = math.log(-q + math.log1p(math.exp(q)))
            else:
                terms[i] = math.log(math.log1p(math.exp(-q)))
        top = max(top, terms[i])
    if top == -math.inf:
        return -math.inf
    total = 0.0
    for i in range(n):
        total += math.exp(terms[i] - top)
    return math.log(c) + top + math.log(total)


@jit
def horner_state(C, order, tau, out):
    """Evaluate the state's Taylor polynomial ``sum_k C[k] tau^k`` into ``out`` (shape ``C.shape[1:]``)."""
    m, w = C.shape[1], C.shape[2]
    for j in range(m):
        for q in range(w):
            out[j, q] = C[order, j, q]
    for k in range(order - 1, -1, -1):
        for j in range(m):
            for q in range(w):
                out[j, q] = out[j, q] * tau + C[k, j, q]


@jit
def velocity_energy(C, order, h):
    """``int_0^h |theta'(tau)|^2 dtau`` for the Taylor polynomial ``C`` (exact for the polynomial).

    With ``D_k = (k + 1) C[k + 1] h^k`` (bounded: the step keeps ``|C[k]| h^k`` small, even where ``C[k]`` itself
    overflows a product) it is ``h sum_{k, l} <D_k, D_l> / (k + l + 1)``. Every product is kept: near
    convergence the velocity is tiny next to the state that sets the step, so its high-order terms are not
    negligible relative to the velocity itself. On large states the Gram matrix ``<C[k], C[l]>`` is one matrix
    product (then scaled), or ``<D_k, D_l>`` when some ``C[k]`` is too large or too small to be squared.
    """
    m, w = C.shape[1], C.shape[2]
    total = 0.0
    if order * order * m * w >= BLAS_MIN_WORK:  # from ~m (d + 2) = 16 at order 16 (B1-os: 2.3 -> 1.2 us)
        rows = C.reshape(C.shape[0], m * w)[1:order + 1]
        squarable = True
        for k in range(order):
            top = max_abs(rows[k])
            if not (top == 0.0 or 1e-140 < top < 1e140):
                squarable = False
        gram = np.empty((order, order))
        if squarable:
            matmul_nt(rows, rows, gram)
        else:
            D = np.empty((order, m * w))
            hk = 1.0
            for k in range(order):
                sk = (k + 1) * hk
                for p in range(m * w):
                    D[k, p] = rows[k, p] * sk
                hk *= h
            matmul_nt(D, D, gram)
        hk = 1.0
        for k in range(order):
            sk = (k + 1) * hk
            hl = hk
            for l in range(k, order):
                sl = (l + 1) * hl
                dot = gram[k, l] * sk * sl if squarable else gram[k, l]
                term = dot / (k + l + 1)
                total += term if k == l else 2.0 * term
                hl *= h
            hk *= h
        return total * h
    hk = 1.0
    for k in range(order):
        sk = (k + 1) * hk
        hl = hk
        for l in range(k, order):
            sl = (l + 1) * hl
            dot = 0.0
            for j in range(m):
                for q in range(w):
                    dot += (C[k + 1, j, q] * sk) * (C[l + 1, j, q] * sl)
            term = dot / (k + l + 1)
            total += term if k == l else 2.0 * term
            hl *= h
        hk *= h
    return total * h


@jit
def velocity_energy_log(C, order, h, s0, nodes, weights):
    """``int |d theta/dt|^2 dt`` over a step of the log clock: ``int_0^h |P'(tau)|^2 e^-(s0 + tau) dtau``.

    ``P'`` is the ``s``-derivative of the state polynomial. Gauss–Legendre (``nodes``, ``weights`` on
    ``[0, 1]``, at least ``order + 1`` of them) on pieces of length <= 1, up to ``tau = 50`` (the rest is below
    ``e^-50`` of the step's first unit) and never past ``s = 745`` (where ``e^-s`` underflows).
    """
    m, w = C.shape[1], C.shape[2]
    span = min(h, 50.0, max(0.0, 745.0 - s0))
    if span <= 0.0:
        return 0.0
    pieces = int(math.ceil(span))
    width = span / pieces
    total = 0.0
    n_nodes = len(nodes)
    if n_nodes * order * m * w >= 2 * BLAS_MIN_WORK:
        # on large states P'(tau) at the nodes of a piece is one matrix product: powers (n_nodes, order) times
        # the coefficients C[1..order] (order, m (d + 2))
        rows = C.reshape(C.shape[0], m * w)[1:order + 1]
        powers = np.empty((n_nodes, order))
        values = np.empty((n_nodes, m * w))
        for p in range(pieces):
            for g in range(n_nodes):
                tau = (p + nodes[g]) * width
                tk = 1.0
                for k in range(order):
                    powers[g, k] = (k + 1) * tk
                    tk *= tau
            matmul_nn(powers, rows, values)
            for g in range(n_nodes):
                tau = (p + nodes[g]) * width
                sq = 0.0
                for x in values[g]:
                    sq += x * x
                total += weights[g] * width * sq * math.exp(-(s0 + tau))
        return total
    for p in range(pieces):
        for g in range(len(nodes)):
            tau = (p + nodes[g]) * width
            sq = 0.0
            for j in range(m):
                for q in range(w):
                    acc = order * C[order, j, q]
                    for k in range(order - 1, 0, -1):
                        acc = acc * tau + k * C[k, j, q]
                    sq += acc * acc
            total += weights[g] * width * sq * math.exp(-(s0 + tau))
    return total


#: the bits of a float64 below its sign: ``bits & _MAGNITUDE`` is the bit pattern of ``|x|``
_MAGNITUDE = np.uint64(2 ** 63 - 1)
#: the bit pattern of ``+inf``: those of NaNs (as magnitudes) are larger
_INF_BITS = np.array([math.inf]).view(np.uint64)[0]


@jit
def max_abs(A):
    """``max |A|`` over a C-contiguous array; NaN when ``A`` holds a NaN (so that an ``isfinite`` guard on it fires:
    ``abs(nan) > best`` is false, a plain running maximum would skip it).

    The magnitudes of non-negative float64 numbers are ordered like their bit patterns read as unsigned integers, and
    every NaN's pattern lies above that of infinity: one integer maximum over the patterns (which the compiler
    vectorises, as it cannot a floating-point one without reordering) gives both the value and the NaN test.
    """
    top = np.uint64(0)
    for x in A.flat:  # each number's pattern (a view of the array itself would cost four atomic operations a call)
        top = max(top, np.float64(x).view(np.uint64) & _MAGNITUDE)
    found = np.uint64(top)  # one definition: the scalar view below refuses a variable assigned in the loop
    largest = math.nan if top > _INF_BITS else found.view(np.float64)
    last_use(A)
    return largest

