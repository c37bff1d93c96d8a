"""Plain-numpy references shared by the gradient-descent tests: per-sample losses and the regularised objective."""

import numpy as np


def numpy_losses(prob, f, y):
    """Per-sample losses ``l(f, y)`` and their derivatives ``dl/df`` (float64)."""
    if prob.loss == "square":
        return 0.5 * (f - y) ** 2, f - y
    if prob.loss == "exp":
        e = np.exp(-y * f)
        return e, -y * e
    return np.log1p(np.exp(-y * f)), -y / (1.0 + np.exp(y * f))


def numpy_objective(prob, state):
    """``L + lambda/2 |theta_trained|^2`` over all samples at a packed state ``(w_j, b_j, a_j)`` (float64)."""
    d = prob.d
    W, b, a = state[:, :d], state[:, d], state[:, d + 1]
    Z = prob.X @ W.T + b
    f = np.where(Z > 0, Z, prob.leak * Z) @ a
    c = 1.0 / prob.n if prob.reduction == "mean" else 1.0
    trained = np.sum(W ** 2) + (np.sum(b ** 2) if prob.bias else 0.0) + (np.sum(a ** 2) if prob.train_outer else 0.0)
    return c * np.sum(numpy_losses(prob, f, prob.y)[0]) + 0.5 * prob.weight_decay * trained


def numpy_step(prob, W, b, a, Xb, yb, weight, lr, selection):
    """One (mini-batch) gradient step with weight decay on the samples ``Xb, yb``, the batch gradient scaled by
    ``weight``, ``sigma'(0) = selection``: the new ``(W, b, a)`` (``b`` and ``a`` move only when trained)."""
    lam, leak = prob.weight_decay, prob.leak
    Z = Xb @ W.T + b
    S = np.where(Z > 0, 1.0, np.where(Z < 0, leak, selection))
    H = np.where(Z > 0, Z, leak * Z)
    D = weight * numpy_losses(prob, H @ a, yb)[1]
    M = D[:, None] * S * a[None, :]
    gW, gb, ga = M.T @ Xb + lam * W, M.sum(axis=0) + lam * b, H.T @ D + lam * a
    return W - lr * gW, (b - lr * gb) if prob.bias else b, (a - lr * ga) if prob.train_outer else a
