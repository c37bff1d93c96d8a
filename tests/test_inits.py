"""The balanced initialiser: one law per ``norm``, re-implemented here from its documented description.

``fl.random_inits(..., scheme="balanced")`` is flowlib's one balanced initialiser; ``norm="gaussian"`` (the default,
what ensembles and run configurations have always drawn) and ``norm="sphere"`` (what ``examples.balanced_init``, a
thin wrapper, has always drawn). Every array is compared for equality, bit for bit, with a re-implementation of the
documented draws from ``numpy.random.default_rng(seed)``, so that no number computed before the two were merged
changes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import flowlib as fl
from flowlib import config, examples

CASES = [(m, d, scale, seed, bias) for m, d in [(1, 1), (3, 2), (10, 3), (50, 10)] for scale in (1e-3, 0.7)
         for seed in (0, 5) for bias in (False, True)]


def sphere_reference(rng, count, m, d, scale, drawn_bias, fixed_bias=0.0):
    """The documented ``norm="sphere"`` law, neuron by neuron: ``g ~ N(0, I)`` over the weights (and the drawn
    bias), ``(w_j, b_j) = g (scale / |g|)``, then the signs ``s_j`` and ``a_j = s_j hypot(scale, fixed_bias)``."""
    k = d + 1 if drawn_bias else d
    g = rng.standard_normal((count, m, k))
    out = np.zeros((count, m, d + 2))
    for r in range(count):
        for j in range(m):
            out[r, j, :k] = g[r, j] * (scale / np.sqrt(np.sum(g[r, j] * g[r, j])))
            if not drawn_bias:
                out[r, j, d] = fixed_bias
    signs = rng.choice([-1.0, 1.0], size=(count, m))
    out[:, :, d + 1] = math.hypot(scale, fixed_bias) * signs
    return out


def gaussian_reference(rng, count, m, d, scale, has_bias, bias):
    """The documented ``norm="gaussian"`` law: ``W ~ N(0, scale^2 / d)``, drawn biases likewise, then the signs,
    ``a_j = s_j |(w_j, b_j)|``."""
    sd = scale / math.sqrt(d)
    out = np.zeros((count, m, d + 2))
    out[:, :, :d] = rng.normal(0.0, sd, size=(count, m, d))
    if has_bias:
        out[:, :, d] = rng.normal(0.0, sd, size=(count, m)) if bias is None else bias
    k = d + 1 if has_bias else d
    norms = np.sqrt(np.sum(out[:, :, :k] ** 2, axis=2))
    out[:, :, d + 1] = norms * rng.choice([-1.0, 1.0], size=(count, m))
    return out


def _problem(d, bias, seed=0):
    X = np.random.default_rng(seed).standard_normal((4, d))
    return fl.Problem(X, [1.0, -1.0, 1.0, -1.0], loss="logistic", reduction="sum", bias=bias, train_outer=True)


def _balanced(packed, bias):
    """``a_j^2 - |w_j|^2 - b_j^2`` relative to ``a_j^2``."""
    d = packed.shape[-1] - 2
    k = d + 1 if bias else d
    return np.abs(packed[..., d + 1] ** 2 - np.sum(packed[..., :k] ** 2, axis=-1)) / packed[..., d + 1] ** 2


@pytest.mark.parametrize("m, d, scale, seed, bias", CASES)
def test_balanced_init_is_the_sphere_law(m, d, scale, seed, bias):
    p = examples.balanced_init(m, d, scale, seed, bias=bias)
    ref = sphere_reference(np.random.default_rng(seed), 1, m, d, scale, drawn_bias=bias)[0]
    assert np.array_equal(p.packed(), ref)
    assert (p.b is not None) == bias
    assert np.all(np.abs(p.a) == scale)
    norms = np.linalg.norm(p.packed()[:, : d + (1 if bias else 0)], axis=1)
    assert np.allclose(norms, scale, rtol=4e-16 * (d + 1), atol=0)
    assert np.all(_balanced(p.packed(), bias) <= 8e-16 * (d + 1))


@pytest.mark.parametrize("m, d, scale, seed, bias", CASES)
def test_balanced_init_is_random_inits_with_the_sphere_norm(m, d, scale, seed, bias):
    """The wrapper and the public initialiser give the same numbers (one implementation)."""
    inits = fl.random_inits(_problem(d, bias), m, 1, scheme="balanced", norm="sphere", scale=scale,
                            bias=None if bias else 0.0, seed=seed)
    assert np.array_equal(examples.balanced_init(m, d, scale, seed, bias=bias).packed(), inits[0])


def test_balanced_init_shares_a_generator():
    """A Generator passed as seed is drawn from in turn (as tests/test_invariants.py does)."""
    rng, ref = np.random.default_rng(3), np.random.default_rng(3)
    first, second = examples.balanced_init(4, 3, 0.1, rng), examples.balanced_init(4, 3, 0.1, rng)
    assert np.array_equal(first.packed(), sphere_reference(ref, 1, 4, 3, 0.1, False)[0])
    assert np.array_equal(second.packed(), sphere_reference(ref, 1, 4, 3, 0.1, False)[0])


@pytest.mark.parametrize("bias, bias_value", [(False, 0.0), (True, 0.0), (True, None), (True, 0.3)])
@pytest.mark.parametrize("m, count, scale, seed", [(4, 5, 1e-3, 0), (20, 100, 1e-3, 0), (3, 2, 1.5, 7)])
def test_random_inits_balanced_gaussian_is_unchanged(bias, bias_value, m, count, scale, seed):
    """The default norm of scheme="balanced" is the Gaussian law ensembles have always drawn."""
    prob = _problem(3, bias)
    default = fl.random_inits(prob, m, count, scheme="balanced", scale=scale, bias=bias_value, seed=seed)
    named = fl.random_inits(prob, m, count, scheme="balanced", norm="gaussian", scale=scale, bias=bias_value,
                            seed=seed)
    ref = gaussian_reference(np.random.default_rng(seed), count, m, 3, scale, bias, bias_value)
    assert np.array_equal(default, ref) and np.array_equal(named, ref)
    assert np.all(_balanced(default, bias) <= 1e-15)


@pytest.mark.parametrize("bias, bias_value", [(False, 0.0), (True, 0.0), (True, None), (True, 0.3)])
def test_random_inits_sphere_law(bias, bias_value):
    prob = _problem(3, bias)
    inits = fl.random_inits(prob, 6, 40, scheme="balanced", norm="sphere", scale=0.2, bias=bias_value, seed=4)
    drawn = bias and bias_value is None
    fixed = bias_value if bias and bias_value is not None else 0.0
    ref = sphere_reference(np.random.default_rng(4), 40, 6, 3, 0.2, drawn, fixed)
    assert np.array_equal(inits, ref)
    assert np.all(_balanced(inits, bias) <= 1e-15)
    assert np.allclose(np.linalg.norm(inits[:, :, : 4 if drawn else 3], axis=2), 0.2, rtol=1e-15, atol=0)
    assert set(np.sign(inits[:, :, 4]).ravel()) == {-1.0, 1.0}


def test_the_two_norms_differ_as_documented():
    """Gaussian: E |w_j|^2 = scale^2 with a spread; sphere: |w_j| = scale for every neuron."""
    prob = _problem(5, False)
    gauss = fl.random_inits(prob, 50, 200, scheme="balanced", scale=2.0, seed=1)
    sphere = fl.random_inits(prob, 50, 200, scheme="balanced", norm="sphere", scale=2.0, seed=1)
    sq = np.sum(gauss[:, :, :5] ** 2, axis=2)
    # |w_j|^2 / scale^2 ~ chi^2_5 / 5: mean 1, standard deviation sqrt(2/5); 10^4 draws
    assert abs(sq.mean() / 4.0 - 1.0) < 5 * math.sqrt(2 / 5) / 100 and sq.std() / 4.0 > 0.5
    assert np.allclose(np.linalg.norm(sphere[:, :, :5], axis=2), 2.0, rtol=1e-15, atol=0)
    # uniform directions: the mean of u_j over 10^4 neurons is ~ N(0, I/(5 10^4))
    mean = (sphere[:, :, :5] / 2.0).reshape(-1, 5).mean(axis=0)
    assert np.all(np.abs(mean) < 5 / math.sqrt(5 * 10_000))


@pytest.mark.parametrize("name, m, scale, seed", [("os_logistic", 6, 1e-2, 4), ("convex_geometry", 10, 1e-3, 1)])
def test_examples_draw_the_sphere_law(name, m, scale, seed):
    """The shipped examples that use balanced_init (os_logistic draws with seed + 1)."""
    _, p0 = getattr(examples, name)()
    ref = sphere_reference(np.random.default_rng(seed), 1, m, 2, scale, False)[0]
    assert np.array_equal(p0.packed(), ref)


@pytest.mark.parametrize("name", ["seed002-early-alignment", "seed004-convex-geometry"])
def test_shipped_balanced_configs_draw_the_gaussian_law(name):
    cfg = config.load(name)
    m = cfg.inits.shape[1]
    raw = {"seed002-early-alignment": (1e-3, 3), "seed004-convex-geometry": (1e-3, 1)}[name]
    ref = gaussian_reference(np.random.default_rng(raw[1]), 1, m, cfg.problem.d, raw[0], False, 0.0)
    assert np.array_equal(cfg.inits, ref)


def test_config_names_the_norm(tmp_path):
    text = ("[problem]\nX = [[1.0, 0.0], [0.0, 1.0]]\ny = [1.0, -1.0]\nbias = true\ntrain_outer = true\n"
            "[init]\nscheme = 'balanced'\nnorm = 'sphere'\nm = 5\nscale = 0.1\nseed = 2\nbias = 'random'\n"
            "[flow]\nt_end = 1.0\n")
    path = tmp_path / "sphere.toml"
    path.write_text(text)
    cfg = config.load(path)
    assert np.array_equal(cfg.inits, sphere_reference(np.random.default_rng(2), 1, 5, 2, 0.1, True))
    path.write_text(text.replace("'sphere'", "'unit'"))
    with pytest.raises(ValueError, match=r"sphere\.toml.*init\.norm"):
        config.load(path)
    path.write_text(text.replace("'balanced'", "'he'"))
    with pytest.raises(ValueError, match=r"sphere\.toml.*init.*norm"):
        config.load(path)


@pytest.mark.parametrize("kwargs, name", [
    ({"scheme": "he", "norm": "sphere"}, "norm"), ({"scheme": "balanced", "norm": "unit"}, "norm"),
    ({"scheme": "balanced", "norm": 1}, "norm"), ({"scheme": "balanced", "norm": "sphere", "scale": 0.0}, "scale"),
    ({"scheme": "balanced", "norm": "sphere", "seed": -1}, "seed"),
    ({"scheme": "balanced", "norm": "sphere", "bias": float("nan")}, "bias")])
def test_random_inits_refuses_bad_norms(kwargs, name):
    with pytest.raises(ValueError, match=name):
        fl.random_inits(_problem(2, True), 3, 2, **kwargs)


@pytest.mark.parametrize("args, kwargs, name", [
    ((0, 2, 0.1), {}, "m"), ((2, 0, 0.1), {}, "d"), ((2, 2, -1.0), {}, "scale"), ((2, 2, float("inf")), {}, "scale"),
    ((2, 2, 0.1), {"bias": "yes"}, "bias"), ((2, 2, 0.1, -3), {}, "seed"), ((2.5, 2, 0.1), {}, "m")])
def test_balanced_init_refuses_bad_input(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        examples.balanced_init(*args, **kwargs)
