"""The one table of tolerances of both backends, each a power of the working epsilon.

A tolerance is ``value * (eps / EPS64) ** power``: ``value`` is what it is in float64 (``eps = EPS64``, the Numba
kernels, which read the module constants below) and ``power`` says how it scales with the working precision. The
mpmath backend evaluates the same rule at its own epsilon (:func:`flowlib.mp.tolerances.tolerance`), so a threshold
of ``1e-9`` in float64 (about ``eps^(9/16)``) is ``1e-9 (eps / EPS64)^(9/16)`` at 30 digits, and the two backends
take the same decisions whenever the float64 decision is not itself decided by rounding. Tolerances of power 1
are multiples of the working epsilon (rounding errors), those of a fractional power are thresholds between
rounding and genuine quantities (a root of the epsilon leaves room for the rounding of a product of a few terms).

Plain Python (no numba import), like :mod:`.constants`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

#: float64's machine epsilon ``2^-52``
EPS64 = 2.0 ** -52


class Tolerance(NamedTuple):
    """One row of :data:`TABLE`: the float64 ``value`` and the ``power`` of the epsilon it scales with."""

    value: float
    power: Fraction
    meaning: str


# name, float64 value, power of the epsilon, meaning
_ROWS = """
simultaneous  | 64 eps  | 1    | free surfaces reached within this fraction of a step (after its earliest root) are reached together
on_surface    | 64 eps  | 1    | |z_ij| below this times max|(w_j, b_j)| |(x_i, 1)|_1 is rounding: the state sits on the surface
exit_noise    | 1e-12   | 3/4  | an exit polynomial this small relative to a_j G_i is rounding: a multiplier sitting on its bound
exit_side     | 1e-8    | 1/2  | a_j G_i this small relative to its Taylor terms at an exit is 0/0: no genuine exit, re-classify
radius_safety | 1e-12   | 3/4  | relative safety of the Cauchy-Schwarz bound of the switching screen against rounding
radius_floor  | 1e-13   | 7/8  | rounding of the first-order switching coefficient (a matrix product), relative to its bound
stay          | 1e-9    | 9/16 | relative size below which a normal velocity counts as zero (the surface is kept)
rcond         | 1e-12   | 3/4  | relative singular-value cut-off of the small least-squares solves (dependent hyperplane normals)
hold_slack    | 1.3e-6  | 3/8  | how far exact multipliers of several held surfaces may lie outside [leak, 1] and still be held
box_gradient  | 1e-14   | 7/8  | a box least-squares gradient this small relative to its column and the problem size is zero
box_converged | 1e-15   | 1    | the coordinate descent of a box least-squares problem has converged when no slope moves more
box_margin    | 1e-9    | 9/16 | a slope this close to its bound (relative to the box) counts as at the bound when polishing
linear_clear  | 1e-14   | 7/8  | rounding margin of g0 + g1 bound when a polynomial's linear part proves it has no root
zeno_time     | 32 eps  | 1    | relative rounding level of an extrapolated Zeno accumulation time
zeno_snap     | 1e-6    | 3/8  | a surface this close to a Zeno limit, relative to the last cycle's amplitude, is snapped onto
"""


def _row(line: str) -> tuple[str, Tolerance]:
    name, value, power, meaning = (field.strip() for field in line.split("|", 3))
    number = float(value.split()[0]) * (EPS64 if value.endswith(" eps") else 1.0)
    return name, Tolerance(number, Fraction(power), meaning)


#: name -> :class:`Tolerance`
TABLE = dict(_row(line) for line in _ROWS.strip().splitlines())


# the float64 values as module constants the Numba kernels compile in: STAY, RCOND, EXIT_SIDE, ... (upper case)
globals().update({name.upper(): row.value for name, row in TABLE.items()})
