"""Gradient descent ``theta <- theta - lr (grad L(theta) + lambda theta)`` on the packed state, chunk by chunk, full
batch or mini-batch.

Layout and loss conventions are those of :mod:`.series`: ``P`` has one row ``(w_j, b_j, a_j)`` per neuron,
``Xa`` is the data with a column of ones appended, ``z_ij = <P[j, :d + 1], Xa[i]>``,
``f_i = sum_j a_j sigma(z_ij)`` with ``sigma(z) = z`` for ``z > 0`` and ``leak z`` otherwise, and
``L = c sum_i l(f_i, y_i)``. Backpropagation uses the slope ``sigma'(z) = 1`` for ``z > 0``, ``leak`` for
``z < 0`` and ``selection`` at exactly ``z = 0`` (PyTorch computes ``selection = leak``: 0 for ReLU):

    grad_{w_j} L = a_j sum_i G_i sigma'(z_ij) x_i,   grad_{b_j} L = a_j sum_i G_i sigma'(z_ij),
    grad_{a_j} L = sum_i G_i sigma(z_ij),            G_i = c l'(f_i).

A mini-batch step sums over the samples of the batch only, with ``c`` the batch's factor (``1/|B|`` for the mean,
``n/|B|`` for the sum: an unbiased estimate of the full gradient). Weight decay ``lambda`` adds ``lambda theta`` to
the gradient of every trained parameter (``W``; ``b`` with bias; ``a`` when the outer layer is trained) before the
step, as PyTorch's ``torch.optim.SGD(weight_decay=lambda)`` does; the objective recorded is
``L + lambda/2 |theta_trained|^2``. With ``lambda = 0`` no decay term is computed at all (the numbers of plain
gradient descent, bit for bit).

An activation flip at iterate ``k`` is logged when the side of ``z_ij`` ("z > 0" against "z <= 0") at iterate
``k`` differs from the side at iterate ``k - 1``, for every sample (not only those of the batch).
"""

import math

import numpy as np

from . import status
from ._jit import jit
from .series import LOSS_EXP, LOSS_SQUARE, _stable_sigmoid, loss_terms, penalty, preactivations


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
    """Loss ``L = c sum_i l(f_i, y_i)`` at the packed state ``P`` (no weight decay: see :func:`objective`)."""
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
def objective(net, P):
    """``L(P) + lambda / 2 |theta_trained|^2`` on the :class:`.bundles.Network` ``net`` (:func:`descent_loss`, plus
    :func:`penalty` when ``lambda = net.decay != 0``)."""
    total = descent_loss(net.Xa, net.y, net.loss_kind, net.c, net.leak, P)
    if net.decay != 0.0:
        total += 0.5 * net.decay * penalty(P, net.bias, net.train_outer)
    return total


@jit
def iterate_objective(net, P, Z, work):
    """:func:`objective` from the pre-activations ``Z`` of ``P`` (``work``: scratch of shape ``(n,)``)."""
    total = iterate_loss(net.y, net.loss_kind, net.c, net.leak, P, Z, work)
    if net.decay != 0.0:
        total += 0.5 * net.decay * penalty(P, net.bias, net.train_outer)
    return total


@jit
def descent_update(net, descent, P, Z, G, grad, batch):
    """One iteration ``P <- P - lr (g + lambda P)`` in place, ``g`` the (mini-batch) gradient: the single update
    rule of every GD and SGD kernel.

    Parameters
    ----------
    net : Network
        The objective (:class:`.bundles.Network`); ``net.decay`` is the weight decay ``lambda``.
    descent : Descent
        ``selection``, ``lr`` and ``batch_c`` (:class:`.bundles.Descent`).
    P : ndarray, shape (m, d + 2), float64
        The iterate, updated in place.
    Z : ndarray, shape (n, m), float64
        The pre-activations of ``P`` (every sample) on entry, those of the new iterate on return.
    G, grad : ndarray, shapes (at least as long as the batch,), (m, d + 2), float64
        Scratch.
    batch : None or ndarray of int64
        ``None`` for the full gradient (every sample, in order, each term weighted by ``net.c``), or sample indices:
        the gradient then sums over these, in this order (a repeated index counts each time), each term weighted by
        ``descent.batch_c / len(batch)``.

    Returns
    -------
    bool
        ``False``, with ``P`` and ``Z`` unchanged, when the next iterate would not be finite.

    Notes
    -----
    The decay term is added to the gradient of trained parameters only, and only when ``lambda != 0``.
    """
    Xa, y, loss_kind, leak = net.Xa, net.y, net.loss_kind, net.leak
    bias, train_outer, weight_decay = net.bias, net.train_outer, net.decay
    selection, lr = descent.selection, descent.lr
    n, da = Xa.shape
    m = P.shape[0]
    d = da - 1
    nb = n if batch is None else batch.shape[0]
    c = net.c if batch is None else descent.batch_c / nb
    # residual weights G_t = c l'(f_i) at the current iterate, i the t-th sample of the batch
    for t in range(nb):
        i = t if batch is None else batch[t]
        f = 0.0
        for j in range(m):
            z = Z[i, j]
            f += P[j, da] * (z if z > 0.0 else leak * z)
        if loss_kind == LOSS_SQUARE:
            G[t] = c * (f - y[i])
        elif loss_kind == LOSS_EXP:
            G[t] = -c * y[i] * math.exp(-y[i] * f)
        else:
            G[t] = -c * y[i] * _stable_sigmoid(-y[i] * f)
    # gradient, one neuron (row) at a time
    finite = True
    for j in range(m):
        for q in range(da + 1):
            grad[j, q] = 0.0
        for t in range(nb):
            i = t if batch is None else batch[t]
            z = Z[i, j]
            if z > 0.0:
                slope, value = 1.0, z
            elif z < 0.0:
                slope, value = leak, leak * z
            else:
                slope, value = selection, 0.0
            g = G[t] * slope
            for q in range(da):
                grad[j, q] += g * Xa[i, q]
            grad[j, da] += G[t] * value
        a = P[j, da]
        for q in range(da):
            grad[j, q] *= a
        if not bias:
            grad[j, d] = 0.0
        if not train_outer:
            grad[j, da] = 0.0
        if weight_decay != 0.0:
            for q in range(d):
                grad[j, q] += weight_decay * P[j, q]
            if bias:
                grad[j, d] += weight_decay * P[j, d]
            if train_outer:
                grad[j, da] += weight_decay * P[j, da]
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
def log_flips(Z, active, k, flips, n_flip):
    """Bring ``active`` (``z_ij > 0``, bool, shape ``(n, m)``) to the sides of the pre-activations ``Z`` of iterate
    ``k``, logging each change into the :class:`.bundles.FlipLog` ``flips`` from entry ``n_flip`` on, sample by
    sample, neuron by neuron (``flips`` ``None``: only count them). Returns ``n_flip`` plus the number of changes."""
    for i in range(Z.shape[0]):
        for j in range(Z.shape[1]):
            up = Z[i, j] > 0.0
            if up != active[i, j]:
                active[i, j] = up
                if flips is not None:
                    flips.k[n_flip] = k
                    flips.neuron[n_flip] = j
                    flips.sample[n_flip] = i
                    flips.side[n_flip] = 1 if up else -1
                n_flip += 1
    return n_flip


@jit
def descend_chunk(net, descent, P, active, batches, offsets, k_start, k_end, max_steps, record_every, max_flips,
                  records, flips):
    """Run up to ``max_steps`` steps of (stochastic) gradient descent from iterate ``k_start`` (at most up to
    ``k_end``).

    Parameters
    ----------
    net : Network
        The objective (:class:`.bundles.Network`): data ``Xa`` (``n, d + 1``, with a column of ones), labels ``y``,
        loss code, reduction factor ``c`` (the factor of the full gradient), ``leak``, whether ``b`` and ``a`` move
        (``b_j`` stays 0 without bias; ``a`` stays fixed unless ``train_outer``), and the weight decay
        ``lambda = net.decay >= 0``: ``lambda theta`` is added to the gradient of the trained parameters, and
        ``lambda/2 |theta_trained|^2`` to the recorded losses (nothing is computed for 0).
    descent : Descent
        The slope ``sigma'(0)`` used where ``z_ij == 0``, the step size, and the factor of mini-batch steps
        (:class:`.bundles.Descent`).
    P : ndarray, shape (m, d + 2), float64, C-contiguous
        The state at iterate ``k_start`` on entry, at the iterate reached on return (updated in place).
    active : ndarray, shape (n, m), bool
        ``z_ij > 0`` at iterate ``k_start`` on entry; kept in step with ``P``.
    batches, offsets : None, or ndarray of int64, shapes (S,), (max_steps + 1,)
        ``None`` for full-batch steps. Otherwise step ``k_start + s + 1`` uses the samples
        ``batches[offsets[s]:offsets[s + 1]]`` (non-empty; summed in this order); ``offsets`` must cover the
        steps this call may take.
    k_start, k_end : int
        Index of the iterate held in ``P`` and of the last iterate of the run.
    max_steps : int
        Steps this call may take.
    record_every : int
        Iterates with ``k % record_every == 0``, and iterate ``k_end``, are recorded (``k_start`` is not: the
        caller has it).
    max_flips : int
        The call returns ``EVENT_BUFFER_FULL`` once at least this many flips are logged; ``flips`` must hold
        ``max_flips + n * m`` entries (an iterate's flips are never split across calls).
    records : IterateLog
        Recorded iteration indices, states and objectives ``L + lambda/2 |theta_trained|^2``
        (:class:`.bundles.IterateLog`); its length must cover the records of ``max_steps`` steps
        (``max_steps // record_every + 2`` does).
    flips : FlipLog
        Flip log (:class:`.bundles.FlipLog`): iterate ``k`` at which ``z_ij`` changed side, neuron ``j``, sample
        ``i``, side entered (+1: ``z > 0``, -1: ``z <= 0``).

    Returns
    -------
    code : int
        ``status.SUCCESS`` (iterate ``k_end`` reached), ``status.RUNNING`` (``max_steps`` taken),
        ``status.EVENT_BUFFER_FULL`` or ``status.NONFINITE`` (the next iterate would not be finite: ``P`` keeps
        the last finite one; or the loss of the recorded iterate ``k``, the last record, is ``+inf`` or NaN).
    k : int
        Index of the iterate now held in ``P``.
    n_records, n_flips : int
        Entries written to ``records`` and ``flips``.
    """
    n, da = net.Xa.shape
    m = P.shape[0]
    Z = np.empty((n, m))
    G = np.empty(n)
    grad = np.empty((m, da + 1))
    preactivations(net.Xa, P, Z)
    k = k_start
    n_rec = 0
    n_flip = 0
    stop = min(k_end, k_start + max_steps)
    while k < stop:
        if batches is None:
            ok = descent_update(net, descent, P, Z, G, grad, None)
        else:
            s = k - k_start
            ok = descent_update(net, descent, P, Z, G, grad, batches[offsets[s]:offsets[s + 1]])
        if not ok:
            return status.NONFINITE, k, n_rec, n_flip
        k += 1
        n_flip = log_flips(Z, active, k, flips, n_flip)
        if k % record_every == 0 or k == k_end:
            records.k[n_rec] = k
            for j in range(m):
                for q in range(da + 1):
                    records.P[n_rec, j, q] = P[j, q]
            records.loss[n_rec] = iterate_objective(net, P, Z, G)
            n_rec += 1
            if not records.loss[n_rec - 1] < math.inf:  # +inf or NaN: the loss overflowed at a finite iterate
                return status.NONFINITE, k, n_rec, n_flip
            if n_rec == records.k.shape[0] and k < k_end:
                return status.RUNNING, k, n_rec, n_flip
        if n_flip >= max_flips and k < k_end:
            return status.EVENT_BUFFER_FULL, k, n_rec, n_flip
    return (status.SUCCESS if k == k_end else status.RUNNING), k, n_rec, n_flip
