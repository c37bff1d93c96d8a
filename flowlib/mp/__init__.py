"""Arbitrary precision: the same algorithms as the float64 kernels, over mpmath numbers (never imports numba)."""
