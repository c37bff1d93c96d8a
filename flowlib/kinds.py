"""Kinds of plain values (what JSON and TOML hold): a :class:`Kind` says in words what a value must be and tests it.

Shared by the run configurations (:mod:`flowlib.config`) and the loader of saved results (:mod:`flowlib.loading`),
so both refuse the same things with the same words.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

_LARGEST_INT = 2**63 - 1


@dataclass(frozen=True)
class Kind:
    """What a configuration value must be: ``want`` words it for the error message, ``accepts`` tests it."""

    want: str
    accepts: Callable[[object], bool]


def is_real(value) -> bool:
    """A finite real number that is not a boolean (an int or a float within float64's range)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and abs(value) <= sys.float_info.max


def _is_real_array(value, ndim: int) -> bool:
    """Nested lists of finite reals, ``ndim`` deep, non-empty and rectangular."""
    if ndim == 0:
        return is_real(value)
    if not isinstance(value, list) or not value or not all(_is_real_array(v, ndim - 1) for v in value):
        return False
    return ndim == 1 or len({len(v) for v in value}) == 1


def real(low: float | None = None, high: float | None = None, *, above: bool = False) -> Kind:
    """A finite real number (not a boolean) in ``[low, high]`` (``(low, high]`` with ``above``)."""
    bounds = "" if low is None else f" {'>' if above else '>='} {low:g}"
    bounds += "" if high is None else f"{' and' if bounds else ''} <= {high:g}"

    def accepts(value) -> bool:
        if not is_real(value):
            return False
        if low is not None and (value <= low if above else value < low):
            return False
        return high is None or value <= high

    return Kind("a finite real number" + bounds, accepts)


def integer(low: int, high: int = _LARGEST_INT) -> Kind:
    """An integer (not a boolean, not a float) in ``[low, high]``."""
    want = f"an integer >= {low}" + ("" if high == _LARGEST_INT else f" and <= {high}")
    return Kind(want, lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high)


def choice(*options: str) -> Kind:
    """One of the strings ``options``."""
    return Kind(f"one of {list(options)}", lambda v: isinstance(v, str) and v in options)


def array(ndim: int) -> Kind:
    """A non-empty rectangular array of finite reals with ``ndim`` dimensions (nested lists)."""
    return Kind(f"a non-empty {'list' if ndim == 1 else 'list of equally long lists'} of finite real numbers",
                lambda v: _is_real_array(v, ndim))


TEXT = Kind("a string", lambda v: isinstance(v, str))
FLAG = Kind("true or false", lambda v: isinstance(v, bool))
TABLE = Kind("a table", lambda v: isinstance(v, dict))
PATH = Kind("a non-empty string (a path)", lambda v: isinstance(v, str) and v.strip() != "" and "\0" not in v)
