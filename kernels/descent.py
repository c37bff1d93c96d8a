"""Full-batch gradient descent ``theta <- theta - lr * grad L(theta)`` on the packed state, chunk by chunk.

Layout and loss conventions are those of :mod:`.series`: ``P`` has one row ``(w_j, b_j, a_j)`` per neuron,
``Xa`` is the data with a column of ones appended, ``z_ij = <P[j, :d + 1], Xa[i]>``,
``f_i = sum_j a_j sigma(z_ij)`` with ``sigma(z) = z`` for ``z > 0`` and ``leak z`` otherwise, and
``L = c sum_i l(f_i, y_i)``. Backpropagation uses the slope ``sigma'(z) = 1`` for ``z > 0``, ``leak`` for
``z < 0`` and ``selection`` at exactly ``z = 0`` (PyTorch computes ``selection = leak``: 0 for ReLU):

    grad_{w_j} L = a_j sum_i G_i sigma'(z_ij) x_i,   grad_{b_j} L = a_j sum_i G_i sigma'(z_ij),
    grad_{a_j} L = sum_i G_i sigma(z_ij),            G_i = c l'(f_i).

An activation flip at iterate ``k`` is logged when the side of ``z_ij`` ("z > 0" against "z <= 0") at iterate
``k`` differs from the side at iterate ``k - 1``.
"""

import math

import numpy as np

from . import status
from ._jit import jit
from .series import LOSS_EXP, LOSS_SQUARE, _stable_sigmoid, loss_terms, preactivations


@jit
def _outputs(P, Z, leak, out_f):
    """``out_f[i] = f_i = sum_j a_j sigma(z_ij)``."""
    n, m = Z.shape
    da = P.shape[1] - 1
    for i in range(n):
        acc = 0.0
        for j in range(m):
            z = Z[i, j]
            acc += P[j, da] * (z if z > 0.0 else leak * z)
        out_f[i] = acc


@jit
def activation_sides(Xa, P, out_active):
    """``out_active[i, j] = z_ij > 0`` (bool, shape ``(n, m)``), with the summation order of :func:`descend_chunk`."""
    Z = np.empty(out_active.shape)
    preactivations(Xa, P, Z)
    for i in range(Z.shape[0]):
        for j in range(Z.shape[1]):
            out_active[i, j] = Z[i, j] > 0.0


@jit
def descent_loss(Xa, y, loss_kind, c, leak, P):
    """Loss ``L = c sum_i l(f_i, y_i)`` at the packed state ``P``."""
    n = Xa.shape[0]
    Z = np.empty((n, P.shape[0]))
    f = np.empty(n)
    preactivations(Xa, P, Z)
    _outputs(P, Z, leak, f)
    total = 0.0
    for i in range(n):
        total += loss_terms(loss_kind, f[i], y[i])
    return c * total


@jit
def iterate_loss(y, loss_kind, c, leak, P, Z, work):
    """Loss ``c sum_i l(f_i, y_i)`` at ``P`` from its pre-activations ``Z`` (``work``: scratch of shape ``(n,)``)."""
    _outputs(P, Z, leak, work)
    total = 0.0
    for i in range(Z.shape[0]):
        total += loss_terms(loss_kind, work[i], y[i])
    return c * total


@jit
def descent_step(Xa, y, loss_kind, c, leak, selection, bias, train_outer, lr, P, Z, G, grad):
    """One iteration ``P <- P - lr grad L(P)`` in place (the single update rule of every GD kernel).

    ``Z`` holds the pre-activations of ``P`` on entry and those of the new iterate on return; ``G`` (shape
    ``(n,)``) and ``grad`` (shape of ``P``) are scratch. Returns ``False``, with ``P`` and ``Z`` unchanged, when the
    next iterate would not be finite.
    """
    n, da = Xa.shape
    m = P.shape[0]
    d = da - 1
    # residual weights G_i = c l'(f_i) at the current iterate
    _outputs(P, Z, leak, G)
    for i in range(n):
        f = G[i]
        if loss_kind == LOSS_SQUARE:
            G[i] = c * (f - y[i])
        elif loss_kind == LOSS_EXP:
            G[i] = -c * y[i] * math.exp(-y[i] * f)
        else:
            G[i] = -c * y[i] * _stable_sigmoid(-y[i] * f)
    # gradient, one neuron (row) at a time
    finite = True
    for j in range(m):
        for q in range(da + 1):
            grad[j, q] = 0.0
        for i in range(n):
            z = Z[i, j]
            if z > 0.0:
                slope, value = 1.0, z
            elif z < 0.0:
                slope, value = leak, leak * z
            else:
                slope, value = selection, 0.0
            g = G[i] * slope
            for q in range(da):
                grad[j, q] += g * Xa[i, q]
            grad[j, da] += G[i] * value
        a = P[j, da]
        for q in range(da):
            grad[j, q] *= a
        if not bias:
            grad[j, d] = 0.0
        if not train_outer:
            grad[j, da] = 0.0
        for q in range(da + 1):
            if not math.isfinite(P[j, q] - lr * grad[j, q]):
                finite = False
    if not finite:
        return False
    for j in range(m):
        for q in range(da + 1):
            P[j, q] -= lr * grad[j, q]
    preactivations(Xa, P, Z)
    return True


@jit
def descend_chunk(Xa, y, loss_kind, c, leak, selection, bias, train_outer, lr, P, active, k_start, k_end,
                  max_steps, record_every, max_flips, out_iter, out_states, out_loss, out_flip_iter,
                  out_flip_neuron, out_flip_sample, out_flip_side):
    """Run up to ``max_steps`` gradient-descent steps from iterate ``k_start`` (at most up to ``k_end``).

    Parameters
    ----------
    Xa : ndarray, shape (n, d + 1), float64, C-contiguous
        Data with a column of ones appended.
    y : ndarray, shape (n,), float64
        Labels (targets for the square loss).
    loss_kind : int
        ``LOSS_EXP``, ``LOSS_LOGISTIC`` or ``LOSS_SQUARE`` (:mod:`.series`).
    c : float
        Reduction factor (``1/n`` for the mean, 1 for the sum).
    leak, selection : float
        Negative-side slope of the activation, and the slope ``sigma'(0)`` used where ``z_ij == 0``.
    bias, train_outer : bool
        Whether ``b`` and ``a`` move (``b_j`` stays 0 without bias; ``a`` stays fixed unless ``train_outer``).
    lr : float
        Step size.
    P : ndarray, shape (m, d + 2), float64, C-contiguous
        The state at iterate ``k_start`` on entry, at the iterate reached on return (updated in place).
    active : ndarray, shape (n, m), bool
        ``z_ij > 0`` at iterate ``k_start`` on entry; kept in step with ``P``.
    k_start, k_end : int
        Index of the iterate held in ``P`` and of the last iterate of the run.
    max_steps : int
        Steps this call may take.
    record_every : int
        Iterates with ``k % record_every == 0``, and iterate ``k_end``, are recorded (``k_start`` is not: the
        caller has it).
    max_flips : int
        The call returns ``EVENT_BUFFER_FULL`` once at least this many flips are logged; the flip buffers must
        hold ``max_flips + n * m`` entries (an iterate's flips are never split across calls).
    out_iter, out_states, out_loss : ndarray, shapes (R,), (R, m, d + 2), (R,)
        Recorded iteration indices (int64), states and losses; ``R`` must cover the records of ``max_steps``
        steps (``max_steps // record_every + 2`` does).
    out_flip_iter, out_flip_neuron, out_flip_sample, out_flip_side : ndarray, int64, int64, int64, int8
        Flip log: iterate ``k`` at which ``z_ij`` changed side, neuron ``j``, sample ``i``, side entered (+1:
        ``z > 0``, -1: ``z <= 0``).

    Returns
    -------
    code : int
        ``status.SUCCESS`` (iterate ``k_end`` reached), ``status.RUNNING`` (``max_steps`` taken),
        ``status.EVENT_BUFFER_FULL`` or ``status.NONFINITE`` (the next iterate would not be finite: ``P`` keeps
        the last finite one; or the loss of the recorded iterate ``k``, the last record, is ``+inf`` or NaN).
    k : int
        Index of the iterate now held in ``P``.
    n_records, n_flips : int
        Entries written to the record and flip buffers.
    """
    n, da = Xa.shape
    m = P.shape[0]
    Z = np.empty((n, m))
    G = np.empty(n)
    grad = np.empty((m, da + 1))
    preactivations(Xa, P, Z)
    k = k_start
    n_rec = 0
    n_flip = 0
    stop = min(k_end, k_start + max_steps)
    while k < stop:
        if not descent_step(Xa, y, loss_kind, c, leak, selection, bias, train_outer, lr, P, Z, G, grad):
            return status.NONFINITE, k, n_rec, n_flip
        k += 1
        for i in range(n):
            for j in range(m):
                up = Z[i, j] > 0.0
                if up != active[i, j]:
                    active[i, j] = up
                    out_flip_iter[n_flip] = k
                    out_flip_neuron[n_flip] = j
                    out_flip_sample[n_flip] = i
                    out_flip_side[n_flip] = 1 if up else -1
                    n_flip += 1
        if k % record_every == 0 or k == k_end:
            out_iter[n_rec] = k
            for j in range(m):
                for q in range(da + 1):
                    out_states[n_rec, j, q] = P[j, q]
            out_loss[n_rec] = iterate_loss(y, loss_kind, c, leak, P, Z, G)
            n_rec += 1
            if not out_loss[n_rec - 1] < math.inf:  # +inf or NaN: the loss overflowed at a finite iterate
                return status.NONFINITE, k, n_rec, n_flip
            if n_rec == out_iter.shape[0] and k < k_end:
                return status.RUNNING, k, n_rec, n_flip
        if n_flip >= max_flips and k < k_end:
            return status.EVENT_BUFFER_FULL, k, n_rec, n_flip
    return (status.SUCCESS if k == k_end else status.RUNNING), k, n_rec, n_flip
