"""Small kernels of the Taylor recurrence that promise the same numbers as a plain loop, to the last bit."""

import numpy as np
import pytest

from flowlib.kernels import series


@pytest.mark.parametrize("n", range(10))
@pytest.mark.parametrize("width", [1, 2, 5, 65])
def test_row_dots_sum_each_row_in_order(n, width):
    """Four rows at a time (any remainder of rows), ``A`` one column wider than ``B`` (allowed; the extra column is
    not read): each row is ``sum_q A_iq B_iq`` added in increasing ``q``, which the wide dynamic range makes
    order-sensitive."""
    rng = np.random.default_rng(100 * n + width)
    A = rng.standard_normal((n, width + 1)) * 10.0 ** rng.integers(-8, 9, (n, width + 1))
    B = rng.standard_normal((n, width)) * 10.0 ** rng.integers(-8, 9, (n, width))
    out = np.full(n, np.nan)
    series.row_dots(A, B, out)
    expected = []
    for i in range(n):
        acc = 0.0
        for q in range(width):
            acc += float(A[i, q]) * float(B[i, q])
        expected.append(acc)
    assert out.tolist() == expected


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 16, 23])
@pytest.mark.parametrize("k", [0, 1])
def test_first_outputs_sum_each_sample_in_order(n, k):
    """Eight samples at a time (any remainder): ``f_i^[0] = sum_j s_ij (a_j z_ij)`` and ``f_i^[1] = sum_j s_ij (a_j
    z_ij' + a_j' z_ij)``, each added in increasing ``j``, on values whose wide dynamic range makes the order show;
    leaky slopes and exact zeros among the ``s_ij``."""
    m, da = 6, 4
    rng = np.random.default_rng(10 * n + k)
    C = rng.standard_normal((3, m, da + 1)) * 10.0 ** rng.integers(-6, 7, (3, m, da + 1))
    S = rng.choice([0.0, 0.1, 1.0], (n, m))
    Z0 = rng.standard_normal((n, m)) * 10.0 ** rng.integers(-6, 7, (n, m))
    Z1 = rng.standard_normal((n, m)) * 10.0 ** rng.integers(-6, 7, (n, m))
    out = np.full(n, np.nan)
    series.first_outputs(C, S, Z0, Z1, k, out)
    expected = []
    for i in range(n):
        acc = 0.0
        for j in range(m):
            a0, a1 = float(C[0, j, da]), float(C[1, j, da])
            acc += float(S[i, j]) * (a0 * float(Z0[i, j]) if k == 0 else a0 * float(Z1[i, j]) + a1 * float(Z0[i, j]))
        expected.append(acc)
    assert out.tolist() == expected
