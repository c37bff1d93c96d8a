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
"""

import math

import numpy as np

from ._jit import jit

LOSS_EXP = 0
LOSS_LOGISTIC = 1
LOSS_SQUARE = 2


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
def preactivations(Xa, P, out_Z):
    """``out_Z[i, j] = <P[j, :d+1], Xa[i]>`` for the ``(n, m)`` pre-activations of one coefficient layer."""
    n, da = Xa.shape
    m = P.shape[0]
    for i in range(n):
        for j in range(m):
            acc = 0.0
            for k in range(da):
                acc += P[j, k] * Xa[i, k]
            out_Z[i, j] = acc


@jit
def network_outputs(Xa, P, S, out_f):
    """``out_f[i] = f_i = sum_j a_j s_ij z_ij`` at parameters ``P`` under slopes ``S``.

    With ``S`` the slopes of the current pattern this is the network's output, since ``sigma(z) = s z`` on each
    side.
    """
    n, da = Xa.shape
    m = P.shape[0]
    for i in range(n):
        f = 0.0
        for j in range(m):
            z = 0.0
            for k in range(da):
                z += P[j, k] * Xa[i, k]
            f += P[j, da] * S[i, j] * z
        out_f[i] = f


@jit
def network_loss(Xa, y, P, S, loss_kind, c):
    """Loss ``L = c sum_i l(f_i, y_i)`` at parameters ``P`` under slopes ``S``."""
    f = np.empty(Xa.shape[0])
    network_outputs(Xa, P, S, f)
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
        return
    if loss_kind == LOSS_EXP:
        for i in range(n):
            if k == 0:
                A0[0, i] = math.exp((s0 if log_clock else 0.0) - y[i] * F[0, i])
            else:
                acc = 0.0
                for l in range(1, k + 1):
                    acc += l * F[l, i] * A0[k - l, i]
                A0[k, i] = (-y[i] * acc + (A0[k - 1, i] if log_clock else 0.0)) / k
            G[k, i] = -c * y[i] * A0[k, i]
        return
    # logistic
    if log_clock:
        for i in range(n):
            if k == 0:
                q = y[i] * F[0, i]
                A0[0, i] = _stable_sigmoid(q)
                A2[0, i] = math.exp(s0 - q)
            else:
                acc = 0.0
                acc2 = 0.0
                for l in range(1, k + 1):
                    acc += l * F[l, i] * A1[k - l, i]
                    acc2 += l * F[l, i] * A2[k - l, i]
                A0[k, i] = y[i] * acc / k
                A2[k, i] = (-y[i] * acc2 + A2[k - 1, i]) / k
            sq = 0.0
            for l in range(k + 1):
                sq += A0[l, i] * A0[k - l, i]
            A1[k, i] = A0[k, i] - sq
            acc = 0.0
            for l in range(k + 1):
                acc += A2[l, i] * A0[k - l, i]
            G[k, i] = -c * y[i] * acc
        return
    for i in range(n):
        if k == 0:
            A0[0, i] = _stable_sigmoid(-y[i] * F[0, i])
        else:
            acc = 0.0
            for l in range(1, k + 1):
                acc += l * F[l, i] * A1[k - l, i]
            A0[k, i] = -y[i] * acc / k
        sq = 0.0
        for l in range(k + 1):
            sq += A0[l, i] * A0[k - l, i]
        A1[k, i] = A0[k, i] - sq
        G[k, i] = -c * y[i] * A0[k, i]


@jit
def taylor_coefficients(Xa, y, S, loss_kind, c, bias, train_outer, order, cons_offset, cons_sample, cons_pinv,
                        C, Z, F, G, A0, A1, A2, R, Cm, log_clock, s0):
    """Taylor coefficients of the flow under the fixed slopes ``S``, from ``C[0]`` up to order ``order``.

    Parameters
    ----------
    Xa : ndarray, shape (n, d + 1)
        Data with a column of ones appended.
    y : ndarray, shape (n,)
        Labels (targets for the square loss).
    S : ndarray, shape (n, m)
        Slopes of the current activation pattern.
    loss_kind : int
        ``LOSS_EXP``, ``LOSS_LOGISTIC`` or ``LOSS_SQUARE``.
    c : float
        Reduction factor (``1/n`` for the mean, 1 for the sum).
    bias, train_outer : bool
        Whether ``b`` and ``a`` move.
    order : int
        Highest order ``K`` computed.
    cons_offset, cons_sample, cons_pinv : ndarray
        Surfaces the state is constrained to (sliding, sticking): neuron ``j`` is held on the hyperplanes of the
        samples ``cons_sample[cons_offset[j]:cons_offset[j + 1]]``, whose normals ``N_j`` (columns ``(x_i, 1)``,
        or ``(x_i, 0)`` without bias) have pseudo-inverse rows ``cons_pinv[slot]`` (shape ``(d + 1,)``). The
        velocity of such a neuron is the projection ``v - N_j N_j^+ v`` of its velocity ``v`` without those
        samples: the Filippov sliding field (events.py). The projection is constant, so it commutes with the
        Taylor recurrence and is applied order by order.
    C : ndarray, shape (>= K + 1, m, d + 2)
        ``C[0]`` holds the state on entry; ``C[1..K]`` are filled.
    Z, F, G, A0, A1, A2, R : ndarray
        Work arrays of shapes ``(>= K + 1, n, m)``, ``(>= K + 1, n)`` (five of them) and ``(>= K + 1, m, d + 1)``.
        On return ``Z[0..K]`` holds the Taylor coefficients of every switching function ``z_ij``.
    Cm : ndarray, shape (>= K, n_slots)
        Output: the coefficients ``N_j^+ v`` of each constrained surface; the Filippov multiplier is
        ``Cm / (a_j G_i)``.
    log_clock : bool
        Expand in ``s = ln(1 + t)`` instead of ``t`` (``d theta / ds = e^s theta'``, see
        :func:`_loss_derivative_order`); ``s0`` is the expansion point.
    s0 : float
    """
    n, da = Xa.shape
    m = C.shape[1]
    d = da - 1
    U = np.empty((order + 1, n, m))
    outer = np.empty(m)
    for k in range(order):
        preactivations(Xa, C[k], Z[k])
        for i in range(n):
            for j in range(m):
                U[k, i, j] = S[i, j] * Z[k, i, j]
        # f_i^[k] = sum_l sum_j a_j^[l] s_ij z_ij^[k-l]   (contiguous inner loops)
        lmax = k if train_outer else 0
        for i in range(n):
            F[k, i] = 0.0
        for l in range(lmax + 1):
            for j in range(m):
                outer[j] = C[l, j, da]
            for i in range(n):
                acc = 0.0
                for j in range(m):
                    acc += outer[j] * U[k - l, i, j]
                F[k, i] += acc
        _loss_derivative_order(loss_kind, y, c, F, k, G, A0, A1, A2, log_clock, s0)
        # R_j^[k] = sum_i s_ij G_i^[k] Xa_i
        for j in range(m):
            for q in range(da):
                R[k, j, q] = 0.0
        for i in range(n):
            for j in range(m):
                sg = S[i, j] * G[k, i]
                if sg != 0.0:
                    for q in range(da):
                        R[k, j, q] += sg * Xa[i, q]
        inv = 1.0 / (k + 1)
        for j in range(m):
            # (w_j, b_j)' = -sum_l a_j^[l] R_j^[k-l]
            for q in range(da):
                acc = 0.0
                for l in range(lmax + 1):
                    acc += C[l, j, da] * R[k - l, j, q]
                C[k + 1, j, q] = -acc
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
            for q in range(da):
                C[k + 1, j, q] *= inv
            C[k + 1, j, da] = 0.0
        if train_outer:
            # a_j' = -sum_l sum_i G_i^[l] s_ij z_ij^[k-l]
            for j in range(m):
                outer[j] = 0.0
            for l in range(k + 1):
                for i in range(n):
                    g = G[l, i]
                    for j in range(m):
                        outer[j] += g * U[k - l, i, j]
            for j in range(m):
                C[k + 1, j, da] = -outer[j] * inv
    preactivations(Xa, C[order], Z[order])


@jit
def velocity_inner(Xa, y, S, loss_kind, c, P, G, log_clock, s):
    """Residual weights ``G_i = c l'(f_i)`` at ``P`` under slopes ``S`` (order 0 of the series), into ``G``.

    With ``log_clock``: ``e^s G_i``, computed in the log domain (see :func:`_loss_derivative_order`).
    """
    network_outputs(Xa, P, S, G)
    for i in range(len(G)):
        f = G[i]
        if loss_kind == LOSS_SQUARE:
            G[i] = c * (f - y[i]) * (math.exp(s) if log_clock else 1.0)
        elif loss_kind == LOSS_EXP:
            G[i] = -c * y[i] * math.exp((s if log_clock else 0.0) - y[i] * f)
        elif log_clock:
            q = y[i] * f
            G[i] = -c * y[i] * (math.exp(s - q) / (1.0 + math.exp(-q)) if q >= 0.0 else
                                math.exp(s) / (1.0 + math.exp(q)))
        else:
            G[i] = -c * y[i] * _stable_sigmoid(-y[i] * f)


@jit
def log_network_loss(Xa, y, P, S, loss_kind, c):
    """``ln L`` at ``P`` under slopes ``S``, without underflow (``-inf`` only when ``L`` is exactly 0)."""
    n = Xa.shape[0]
    f = np.empty(n)
    network_outputs(Xa, P, S, f)
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
            terms[i] = -q + math.log1p(-0.5 * math.exp(-q)) if q > 30.0 else math.log(math.log1p(math.exp(-q)))
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
            acc = C[order, j, q]
            for k in range(order - 1, -1, -1):
                acc = acc * tau + C[k, j, q]
            out[j, q] = acc


@jit
def velocity_energy(C, order, h):
    """``int_0^h |theta'(tau)|^2 dtau`` for the Taylor polynomial ``C`` (exact for the polynomial).

    With ``D_k = (k + 1) C[k + 1] h^k`` (bounded: the step keeps ``|C[k]| h^k`` small, even where ``C[k]`` itself
    overflows a product) it is ``h sum_{k, l} <D_k, D_l> / (k + l + 1)``. Every product is kept: near
    convergence the velocity is tiny next to the state that sets the step, so its high-order terms are not
    negligible relative to the velocity itself.
    """
    m, w = C.shape[1], C.shape[2]
    total = 0.0
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


@jit
def max_abs(A):
    """``max |A|`` over a 2-D array."""
    best = 0.0
    for x in A.ravel():
        if abs(x) > best:
            best = abs(x)
    return best

