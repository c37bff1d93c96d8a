"""Earliest-root isolation on polynomials: every root inside the interval, earliest first."""

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from flowlib.kernels.roots import STACK, earliest_root


def call(coeffs, bound, drop=0):
    coeffs = np.asarray(coeffs, dtype=float)
    return earliest_root(coeffs, len(coeffs) - 1, bound, int(drop), np.empty((6, max(len(coeffs), STACK))))


def poly_from_roots(roots, scale=1.0, extra=()):
    # prod (t - r_i) * prod (t^2 + e) ; numpy's poly gives highest degree first
    c = np.poly(roots) * scale
    for e in extra:
        c = np.polymul(c, [1.0, 0.0, e])
    return c[::-1].copy()


def test_two_close_roots_both_inside_one_interval():
    # roots 0.3 and 0.3 + 1e-4 (a dip of 2.5e-9, far above rounding): a sign test at the ends sees no change
    c = poly_from_roots([0.3, 0.3 + 1e-4], extra=[0.5])
    assert call(c, 1.0) == pytest.approx(0.3, rel=1e-12)
    assert np.polyval(c[::-1], 0.0) > 0 and np.polyval(c[::-1], 1.0) > 0


def test_drop_constant_skips_root_at_zero():
    # g(t) = t (t - 0.25) (t - 0.7): with the surface at t = 0 already processed the next root is 0.25
    c = poly_from_roots([0.0, 0.25, 0.7])
    c[0] = -1e-18  # rounding left the state a hair on the wrong side of the surface
    assert call(c, 1.0, drop=1) == pytest.approx(0.25, rel=1e-14)
    assert 0.0 < call(c, 1.0, drop=0) < 1e-15  # without the flag the crossing just made fires again


def test_no_root_and_identically_zero():
    assert math.isinf(call([1.0, 0.5, 0.25], 1.0))
    assert math.isinf(call([0.0, 0.0, 0.0], 1.0))
    assert math.isinf(call([0.0, 0.0, 0.0], 1.0, drop=1))


def test_root_beyond_bound_is_ignored():
    c = poly_from_roots([1.5, 2.0])
    assert math.isinf(call(c, 1.0))
    assert call(c, 1.6) == pytest.approx(1.5, rel=1e-14)


def test_root_at_bound():
    c = poly_from_roots([0.5])
    assert call(c, 0.5) == pytest.approx(0.5, rel=1e-15)


@given(st.lists(st.floats(0.01, 0.99), min_size=1, max_size=6), st.lists(st.floats(-2.0, -0.01), max_size=4),
       st.floats(0.1, 10.0))
def test_matches_numpy_roots(inside, outside, scale):
    roots = sorted(inside) + outside
    if len(inside) > 1 and np.min(np.diff(sorted(inside))) < 1e-6:
        return  # clusters tighter than the conditioning of the polynomial's coefficients
    c = poly_from_roots(roots, scale)
    got = call(c, 1.0)
    assert got == pytest.approx(min(inside), abs=1e-9)


@pytest.mark.parametrize("degree", [8, 16, 24])
def test_high_degree_taylor_like(degree, rng):
    # decaying coefficients, as in a Taylor step inside the radius of convergence
    for _ in range(50):
        c = rng.standard_normal(degree + 1) * np.exp(-1.5 * np.arange(degree + 1))
        bound = 1.0
        real = [r.real for r in np.roots(c[::-1]) if abs(r.imag) < 1e-12 and 0 < r.real <= bound]
        got = call(c, bound)
        if real:
            assert got == pytest.approx(min(real), rel=1e-9, abs=1e-12)
        else:
            assert math.isinf(got)
