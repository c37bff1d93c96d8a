"""The tolerances of :mod:`flowlib.kernels.tolerances` at mpmath's working precision.

Each is ``value * (eps / EPS64) ** power`` with the float64 ``value`` and the ``power`` of the one table the Numba
kernels read, evaluated at ``mp.eps``: the two backends share one rule, not two lists of numbers. Call inside
``mp.workdps(...)``.
"""

from __future__ import annotations

from mpmath import mp, mpf

from flowlib.kernels.tolerances import EPS64, TABLE

_CACHE: dict = {}


def tolerance(name: str) -> mpf:
    """Tolerance ``name`` (a key of :data:`flowlib.kernels.tolerances.TABLE`) at the current working precision.

    Examples
    --------
    >>> from mpmath import mp
    >>> with mp.workprec(53):
    ...     float(tolerance("stay")) == 1e-9
    True
    >>> with mp.workdps(30):
    ...     tolerance("on_surface") == 64 * mp.eps
    True
    """
    key = (name, mp.prec)
    if key not in _CACHE:
        row = TABLE[name]
        ratio = mp.eps / mpf(EPS64)
        power = row.power
        scale = ratio if power == 1 else ratio ** (mpf(power.numerator) / power.denominator)
        _CACHE[key] = mpf(row.value) * scale
    return _CACHE[key]
