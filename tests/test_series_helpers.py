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
