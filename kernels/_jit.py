"""The project's single Numba decorator.

Every kernel in :mod:`flowlib.kernels` is compiled with :data:`jit`: ``cache=True`` (compiled code is reused
across processes), no ``fastmath`` (IEEE semantics: ``isfinite`` checks and rounding stay meaningful when we compare
with mpmath), ``error_model="numpy"`` (a division by zero gives inf/nan that the kernels test for, instead of an
exception path in hot loops).

Numba's cache does not notice edits in *another* module that a kernel calls; set ``NUMBA_CACHE_DIR`` to a fresh
folder (``.ci/run`` does) when developing kernels.
"""

import functools

import numba

jit = functools.partial(numba.njit, cache=True, fastmath=False, error_model="numpy", nogil=True)


@jit
def last_use(*values):
    """Nothing: the last use of ``values`` (the arrays a kernel received or unpacked), made just before the kernel's
    single ``return``.

    Numba takes a reference to each array a function receives and releases it after the array's last use, on each
    path. Its reference-count pruning removes such a pair when the release is in the entry block or in one block
    that every path reaches; where the last uses lie on different branches (an early ``return``, an array read in
    one branch only), the compiler merges the releases into one block with a choice of arrays and the pair stays:
    two atomic operations per array and call. With one exit and every array used last here, the release is a single
    one that every path reaches, and the pruning removes it (this empty call is inlined away).

    It does not help in a kernel that calls other compiled functions which stay calls (the compiler inlines only
    small ones): each such call's error check is an exit that bypasses the releases, and there the references stay
    whatever the kernel does. ``series.max_abs`` and ``series._loss_derivative_order``, called several times per
    Taylor order, use it; ``tests/test_reference_counts.py`` checks their compiled code.
    """
