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
