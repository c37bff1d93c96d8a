"""Kernels called once per Taylor order compile without Numba's atomic reference-count operations.

``series.max_abs`` and ``series._loss_derivative_order`` run several times per order of every step; each array
reference Numba keeps in them costs two atomic operations a call (on B1-os, before they were written for it, 13,600
of a run's 46,700). They are compiled here afresh, outside the cache (whose code carries no IR), and their own
function body in the optimised module is searched for calls to ``NRT_incref`` / ``NRT_decref``.
"""

import math
import re

import mpmath
import numba
import numpy as np
import pytest

from flowlib.kernels import series
from flowlib.kernels._jit import jit
from flowlib.kernels.series import LOSS_EXP, LOSS_LOGISTIC, LOSS_SQUARE


def _own_body(dispatcher, name: str) -> str:
    """The optimised LLVM IR of ``name``'s body in ``dispatcher``'s only compiled version (not the Python wrapper)."""
    (library,) = [overload.library for overload in dispatcher.overloads.values()]
    for block in re.split(r"\ndefine ", library.get_llvm_str()):
        head = block.split("\n", 1)[0]
        if f"{len(name)}{name}B" in head and "cpython" not in head and "cfunc" not in head:
            return block
    raise AssertionError(f"no body of {name} in the compiled module")


def _fresh(kernel):
    """``kernel`` compiled again with the project's options but without the cache, so that its IR can be read."""
    return numba.njit(kernel.py_func, **{**jit.keywords, "cache": False})


@pytest.mark.parametrize("shape", [(7, 5), (30,)])
def test_max_abs_keeps_no_reference_counts(shape):
    fresh = _fresh(series.max_abs)
    values = np.linspace(-3.0, 2.0, math.prod(shape)).reshape(shape)
    assert fresh(values) == 3.0
    body = _own_body(fresh, "max_abs")
    assert "NRT_incref" not in body and "NRT_decref" not in body


def _residual_weight(loss_kind, y, c, f):
    """``G = c l'(f)`` in mpmath: exp loss ``-c y e^(-y f)``, logistic ``-c y / (1 + e^(y f))``, square
    ``c (f - y)``."""
    if loss_kind == LOSS_EXP:
        return -c * y * mpmath.exp(-y * f)
    if loss_kind == LOSS_LOGISTIC:
        return -c * y / (1 + mpmath.exp(y * f))
    return c * (f - y)


@pytest.mark.parametrize("loss_kind", [LOSS_EXP, LOSS_LOGISTIC, LOSS_SQUARE])
def test_loss_derivative_order_keeps_no_reference_counts(loss_kind):
    """No reference-count call in its IR, and the series it builds order by order are those of ``c l'(f(t))`` for
    the output polynomial ``f(t) = sum_k F[k] t^k``, against mpmath's Taylor coefficients at 40 digits."""
    fresh = _fresh(series._loss_derivative_order)
    rng = np.random.default_rng(loss_kind)
    n, order, c = 4, 5, 0.25
    F = rng.standard_normal((order, n))
    y = np.sign(rng.standard_normal(n))
    G, A0, A1, A2 = (np.zeros((order, n)) for _ in range(4))
    for k in range(order):
        fresh(loss_kind, y, c, F, k, G, A0, A1, A2, False, 0.0)
    with mpmath.workdps(40):
        for i in range(n):
            def weight(t, i=i):
                return _residual_weight(loss_kind, mpmath.mpf(y[i]), mpmath.mpf(c),
                                        sum(mpmath.mpf(F[k, i]) * t ** k for k in range(order)))
            expected = [float(v) for v in mpmath.taylor(weight, 0, order - 1)]
            assert G[:, i] == pytest.approx(expected, rel=1e-12, abs=1e-14 * max(map(abs, expected)))
    body = _own_body(fresh, "_loss_derivative_order")
    assert "NRT_incref" not in body and "NRT_decref" not in body


def test_max_abs_is_exact_on_every_magnitude_and_sees_nan_and_inf():
    """The integer maximum over bit patterns is the float maximum of ``|x|``, subnormals, signed zeros and
    infinities included, and any NaN wins."""
    rng = np.random.default_rng(7)
    values = rng.standard_normal((6, 9)) * 10.0 ** rng.integers(-320, 300, (6, 9))
    values[0, 0], values[1, 1] = -0.0, 5e-324
    assert series.max_abs(values) == np.abs(values).max()
    assert series.max_abs(np.zeros((2, 3))) == 0.0
    values[2, 2] = -math.inf
    assert series.max_abs(values) == math.inf
    values[3, 3] = math.nan
    assert math.isnan(series.max_abs(values))
