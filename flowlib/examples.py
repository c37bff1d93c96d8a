"""Data sets and initialisations from the source papers, and the shipped example problems.

References
----------
Wang & Pilanci, "The Convex Geometry of Backpropagation" (ICLR 2022), §3.1 (orthogonally separable data),
Lemma 1 (balanced initialisation); the other papers' data are cited where they are built (docs/design.md,
Validation rationale).
"""

from __future__ import annotations

import numpy as np

from flowlib.problem import Params, Problem


def _rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def orthogonally_separable(n: int, d: int, seed=0, *, min_gap: float = 0.05):
    """Random binary data that are orthogonally separable with a margin.

    ``x_i^T x_k > 0`` when ``y_i = y_k`` and ``x_i^T x_k < 0`` otherwise (Wang & Pilanci §3.1, strict here).
    Construction: ``x_i = y_i alpha_i e_1 + z_i`` with ``z_i`` orthogonal to ``e_1`` and
    ``|z_i| < alpha_i / sqrt(1 + min_gap)``, then a random rotation. Labels alternate so both
    classes are present.

    Parameters
    ----------
    n, d : int
        Samples (>= 2) and dimension (>= 2).
    seed : int or numpy.random.Generator
    min_gap : float
        Keeps every inner product at least ``min_gap / (1 + min_gap) alpha_i alpha_k`` away from 0, so no
        crossing is tangential.

    Returns
    -------
    X : ndarray, shape (n, d)
    y : ndarray, shape (n,)
    """
    if n < 2:
        raise ValueError(f"n must be >= 2, got {n}")
    if d < 2:
        raise ValueError(f"d must be >= 2, got {d}")
    rng = _rng(seed)
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    alpha = rng.uniform(0.5, 1.5, size=n)
    z = rng.standard_normal((n, d - 1))
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    radius = alpha / np.sqrt(1.0 + min_gap) * rng.uniform(0.0, 1.0, size=n) ** (1.0 / (d - 1))
    X = np.column_stack([y * alpha, z * radius[:, None]])
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return X @ q.T, y


def balanced_init(m: int, d: int, scale: float, seed=0, *, bias: bool = False) -> Params:
    """Balanced initialisation with ``|(w_j, b_j)| = |a_j| = scale`` exactly, as :class:`Params`.

    A thin wrapper of :func:`flowlib.random_inits`'s balanced law with ``norm="sphere"`` (documented there):
    the same numbers as ``random_inits(problem, m, 1, scheme="balanced", norm="sphere", scale=scale,
    bias=None if bias else 0.0, seed=seed)[0]`` for any problem of dimension ``d`` with this ``bias``, without
    needing one. Directions uniform on the sphere (``scale g_j / |g_j|``, ``g_j ~ N(0, I_{d+1})`` with ``bias``,
    ``N(0, I_d)`` without), ``a_j = +-scale`` with random signs: balanced, ``a_j^2 = |w_j|^2 + b_j^2`` (conserved
    by the flow, Wang & Pilanci, Lemma 1). ``random_inits``'s default ``norm="gaussian"`` draws
    ``w_j ~ N(0, scale^2 / d I)`` instead (random norms).

    Parameters
    ----------
    m, d : int
        Neurons and input dimension (positive).
    scale : float
        ``|(w_j, b_j)| = |a_j|`` (positive).
    seed : int or numpy.random.Generator
    bias : bool
        Draw ``b_j`` with ``w_j`` (on the sphere of ``R^{d+1}``); otherwise ``b = None``.

    Returns
    -------
    Params

    Examples
    --------
    >>> import numpy as np
    >>> from flowlib import examples
    >>> p = examples.balanced_init(m=4, d=3, scale=1e-3, seed=1, bias=True)
    >>> bool(np.allclose(np.hypot(np.linalg.norm(p.W, axis=1), p.b), 1e-3)), bool(np.all(np.abs(p.a) == 1e-3))
    (True, True)
    """
    from flowlib.ensemble import _check_scale, _check_seed, _sphere_balanced
    from flowlib.running import check_budget

    m, d = check_budget(m, "m"), check_budget(d, "d")
    _check_scale(scale)
    if not isinstance(bias, (bool, np.bool_)):
        raise ValueError(f"bias must be True or False, got {bias!r}")
    rows = _sphere_balanced(np.random.default_rng(_check_seed(seed)), 1, m, d, scale, drawn_bias=bool(bias))[0]
    return Params.unpacked(rows, bool(bias))


def random_init(m: int, d: int, seed=0, *, bias: bool = True, scale: float = 1.0) -> Params:
    """Gaussian initialisation ``W, b, a ~ N(0, scale^2 / d)`` (no balance)."""
    rng = _rng(seed)
    s = scale / np.sqrt(d)
    return Params(W=s * rng.standard_normal((m, d)), b=s * rng.standard_normal(m) if bias else None,
                  a=s * rng.standard_normal(m))


def two_crossings() -> tuple[Problem, Params]:
    """One neuron whose two hyperplanes are crossed within what one Taylor step would cover.

    ``x_1 = (1, 0)``, ``x_2 = (1, 1e-9)``, one neuron, fixed ``a = 1``, no bias, square loss towards ``y = -1``:
    both pre-activations fall through 0 about ``1e-9`` apart in time. A sign test at the step ends sees at
    most one of them.
    """
    prob = Problem(X=[[1.0, 0.0], [1.0, 1e-9]], y=[-1.0, -1.0], loss="square", reduction="sum",
                   activation="leaky_relu", leak=0.2, bias=False, train_outer=False)
    return prob, Params(W=[[0.5, 0.3]], b=None, a=[1.0])


def os_logistic(m: int = 6, n: int = 8, d: int = 2, scale: float = 1e-2, seed: int = 3) -> tuple[Problem, Params]:
    """The shipped example: orthogonally separable data, logistic loss (sum), small balanced initialisation.

    Wang & Pilanci's setting (no bias, trained outer layer). For this data every crossing is transversal and each
    (neuron, sample) pair crosses at most once.
    """
    X, y = orthogonally_separable(n, d, seed)
    prob = Problem(X, y, loss="logistic", reduction="sum", bias=False, train_outer=True)
    return prob, balanced_init(m, d, scale, seed + 1)




def three_points(m: int, lam: float = 1e-3, seed=0) -> tuple[Problem, Params]:
    """Boursier & Flammarion's three-point data with a perfectly balanced small initialisation (seed 003, App. B.1).

    ``x = (-0.75, -0.5, 0.125)`` with a bias, ``y = (1.1, 0.1, 0.8)``, loss ``(1/(2n)) sum (h - y)^2`` (square,
    mean), ReLU, trained outer layer; ``(a_j, w_j, b_j) = (lam / sqrt(m)) (s_j |w~_j|, w~_j)`` with
    ``w~_j ~ N(0, I_2)`` and random signs ``s_j`` (Boursier & Flammarion, §6, App. B.1). Balanced flows from small
    initialisations get stuck at the spurious loss 256/2925 (recomputed exactly).
    """
    rng = _rng(seed)
    prob = Problem(X=[[-0.75], [-0.5], [0.125]], y=[1.1, 0.1, 0.8], loss="square", reduction="mean", bias=True,
                   train_outer=True)
    wt = rng.standard_normal((m, 2))
    a = rng.choice([-1.0, 1.0], size=m) * np.linalg.norm(wt, axis=1)
    s = lam / np.sqrt(m)
    return prob, Params(W=s * wt[:, :1], b=s * wt[:, 1], a=s * a)


def gd_rate_network(w1: float, b1: float, w2: float, b2: float) -> tuple[Problem, Params]:
    """Smorodinsky, Gimpleson & Safran's two-neuron network (seed 000, Eq. 1-2).

    ``Phi(x) = relu(w1 x + b1) - relu(w2 x + b2)`` (outer weights fixed at +1, -1), data ``(-1, -1), (+1, +1)``,
    loss ``(1/2) sum_i exp(-y_i Phi(x_i))`` (exp, mean).
    """
    prob = Problem(X=[[-1.0], [1.0]], y=[-1.0, 1.0], loss="exp", reduction="mean", bias=True, train_outer=False)
    return prob, Params(W=[[w1], [w2]], b=[b1, b2], a=[1.0, -1.0])


def sliding_two_points(scale: float = 1e-8) -> tuple[Problem, Params]:
    """Wang & Pilanci's non-separable two-point example V12 (docs/design.md): one balanced neuron that slides.

    ``X = [[1, 0], [1/2, sqrt(3)/2]]``, ``y = (+1, -1)``, logistic loss (sum), no bias, trained outer layer,
    ``w(0) = scale (cos 0.3, sin 0.3)``, ``a(0) = scale``. It hits ``<w, x_2> = 0`` at ``t = 2.1829446...`` (small
    initialisation limit) and then slides on that hyperplane towards the direction ``(sqrt(3)/2, -1/2)``.
    """
    prob = Problem(X=[[1.0, 0.0], [0.5, np.sqrt(3.0) / 2.0]], y=[1.0, -1.0], loss="logistic", reduction="sum",
                   bias=False, train_outer=True)
    return prob, Params(W=[[scale * np.cos(0.3), scale * np.sin(0.3)]], b=None, a=[scale])


def linear_teachers_data(n_per_class: int = 50, seed=4) -> tuple[np.ndarray, np.ndarray]:
    """Sarussi et al.'s PAR data (seed 001, "LT-7"): ``mu = (1, 0.5)``; positives ``x = mu + 0.7 xi``, negatives
    ``x = -(mu + 0.7 xi)``, ``xi ~ N(0, I)``, kept when ``y x.mu^ > 0.5`` (signed: unsigned makes (7) infeasible),
    ``n_per_class`` of each, positives first."""
    rng = _rng(seed)
    mu = np.array([1.0, 0.5])
    mu_hat = mu / np.linalg.norm(mu)
    rows, labels = [], []
    for label in (1.0, -1.0):
        kept = 0
        while kept < n_per_class:
            x = label * (mu + 0.7 * rng.standard_normal(2))
            if label * (x @ mu_hat) > 0.5:
                rows.append(x)
                labels.append(label)
                kept += 1
    return np.array(rows), np.array(labels)


def linear_teachers_par(k: int = 10, leak: float = 0.1, scale: float = 1e-3, data_seed: int = 4, init_seed: int = 1,
                        n_per_class: int = 50) -> tuple[Problem, Params]:
    """Seed 001's PAR example (Sarussi, Brutzkus & Globerson, Theorem 6.2; "LT-7"): linearly separable 2-D data.

    ``N(x) = sum_{i<=k} sigma(w_i.x) - sum_{i<=k} sigma(u_i.x)`` with leaky ReLU (slope ``leak``), no bias, outer
    weights fixed at +1 / -1 (rows ``0..k-1`` are the ``w_i``, ``k..2k-1`` the ``u_i``), mean logistic loss,
    Gaussian initialisation of standard deviation ``scale``. Data: :func:`linear_teachers_data`.
    ``data_seed = 4`` keeps every non-support point's margin above 1.049, so the ``1/ln t`` regime
    sets in early.
    """
    X, y = linear_teachers_data(n_per_class, data_seed)
    prob = Problem(X, y, loss="logistic", reduction="mean", activation="leaky_relu",
                   leak=leak, bias=False, train_outer=False)
    W = scale * _rng(init_seed).standard_normal((2 * k, 2))
    return prob, Params(W=W, b=None, a=np.r_[np.ones(k), -np.ones(k)])


#: Wang & Pilanci's App. F data (seed 004): F1 orthogonally separable, F2 two positive points.
CONVEX_GEOMETRY_DATA = {"F1": ([[1.65, -0.47], [-0.47, 1.35]], [1.0, -1.0]),
                        "F2": ([[1.65, 0.47], [0.47, 1.35]], [1.0, 1.0])}


def convex_geometry(case: str = "F1", m: int = 10, scale: float = 1e-3, seed: int = 1) -> tuple[Problem, Params]:
    """Seed 004's two-point examples F1 / F2 (Wang & Pilanci, App. F): ReLU, no bias, trained outer layer,
    logistic loss (sum), small balanced initialisation (:func:`balanced_init`).

    Theorem 4: the normalised margin ``min_n y_n f(x_n) / |theta|^2`` tends to ``1/(2 P*)``, with
    ``P* = 1/|x_1| + 1/|x_2|`` (F1) and ``|X^-1 1|`` (F2) (closed forms, in mpmath), provided live neurons of both
    signs exist at initialisation (condition (9)): ``seed = 1`` has them for both cases, ``seed = 0`` has no
    positive one for F1.
    """
    if case not in CONVEX_GEOMETRY_DATA:
        raise ValueError(f"case must be one of {sorted(CONVEX_GEOMETRY_DATA)}, got {case!r}")
    X, y = CONVEX_GEOMETRY_DATA[case]
    prob = Problem(X, y, loss="logistic", reduction="sum", bias=False, train_outer=True)
    return prob, balanced_init(m, 2, scale, seed)


EXAMPLES = {"os-logistic": os_logistic, "two-crossings": two_crossings,
            "three-points": lambda: three_points(50), "gd-rate": lambda: gd_rate_network(2.0, 3.0, -2.0, 3.1),
            "sliding-two-points": sliding_two_points, "par": linear_teachers_par,
            "f1": lambda: convex_geometry("F1"), "f2": lambda: convex_geometry("F2")}
