"""Plain-numpy and plain-mpmath references shared by the gradient-descent tests: per-sample losses, the
regularised objective, one update step, and a whole (mini-batch) descent at any precision."""

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


def mp_descent(prob, p0, lr, batches, dps):
    """Plain mpmath (mini-batch) gradient descent with weight decay, ``sigma'(0) = leak``: one step per entry of
    ``batches`` (sample indices; ``range(n)`` for a full-batch step, each term weighted by ``1/|B|`` for the mean and
    ``n/|B|`` for the sum). Returns the packed states (lists of mpf) and the objectives
    ``L + lambda/2 |theta_trained|^2`` over all samples, at every iterate."""
    import mpmath as mp

    with mp.workdps(dps):
        X = [[mp.mpf(float(v)) for v in row] for row in prob.X]
        Y = [mp.mpf(float(v)) for v in prob.y]
        n, d = len(X), len(X[0])
        alpha, eta, lam = mp.mpf(float(prob.leak)), mp.mpf(float(lr)), mp.mpf(float(prob.weight_decay))
        c = 1 / mp.mpf(n) if prob.reduction == "mean" else mp.mpf(1)
        W = [[mp.mpf(float(v)) for v in row] for row in p0.W]
        b = [mp.mpf(float(v)) for v in (p0.b if p0.b is not None else np.zeros(len(p0.a)))]
        a = [mp.mpf(float(v)) for v in p0.a]
        m = len(a)

        def act(u):
            return u if u > 0 else alpha * u

        def dact(u):
            return mp.mpf(1) if u > 0 else alpha

        def loss_and_derivative(f, t):
            if prob.loss == "square":
                return (f - t) ** 2 / 2, f - t
            if prob.loss == "exp":
                e = mp.exp(-t * f)
                return e, -t * e
            return mp.log1p(mp.exp(-t * f)), -t / (1 + mp.exp(t * f))

        def evaluate():
            Z = [[mp.fsum([W[j][q] * X[i][q] for q in range(d)]) + b[j] for j in range(m)] for i in range(n)]
            pairs = [loss_and_derivative(mp.fsum([a[j] * act(Z[i][j]) for j in range(m)]), Y[i]) for i in range(n)]
            squares = mp.fsum([w * w for row in W for w in row])
            squares += mp.fsum([v * v for v in b]) if prob.bias else 0
            squares += mp.fsum([v * v for v in a]) if prob.train_outer else 0
            return Z, [p[1] for p in pairs], c * mp.fsum([p[0] for p in pairs]) + lam * squares / 2

        states, objective = [], []
        for B in list(batches) + [None]:
            Z, dl, value = evaluate()
            states.append([list(W[j]) + [b[j], a[j]] for j in range(m)])
            objective.append(value)
            if B is None:
                break
            B = [int(i) for i in B]
            weight = (mp.mpf(1) if prob.reduction == "mean" else mp.mpf(n)) / len(B)
            D = {i: weight * dl[i] for i in set(B)}
            gW = [[mp.fsum([D[i] * a[j] * dact(Z[i][j]) * X[i][q] for i in B]) + lam * W[j][q] for q in range(d)]
                  for j in range(m)]
            gb = [mp.fsum([D[i] * a[j] * dact(Z[i][j]) for i in B]) + lam * b[j] for j in range(m)]
            ga = [mp.fsum([D[i] * act(Z[i][j]) for i in B]) + lam * a[j] for j in range(m)]
            W = [[W[j][q] - eta * gW[j][q] for q in range(d)] for j in range(m)]
            if prob.bias:
                b = [b[j] - eta * gb[j] for j in range(m)]
            if prob.train_outer:
                a = [a[j] - eta * ga[j] for j in range(m)]
    return states, objective


def relative(a, b):
    """``max |a - b| / max |b|`` (float64)."""
    return float(np.max(np.abs(np.asarray(a, float) - np.asarray(b, float))) / np.max(np.abs(np.asarray(b, float))))
