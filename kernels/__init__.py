"""Numba kernels of flowlib (installed as ``flowlib.kernels``).

Kernels import only numpy, numba and math, take and return float64/int/bool scalars and arrays, and report
failures through the integer codes of :mod:`.status` instead of raising. They are compiled with the one project
decorator in :mod:`._jit`.
"""
