"""Peers and exact references for the benchmarks (:mod:`flowlib.bench`; the designs are described in BENCHMARKS.md).

Modules
-------
scipy_peer
    SciPy ``solve_ivp(DOP853)``: event restart with mask (sign) flip, and the naive RHS; networks and switched
    affine systems. Independent of flowlib (numpy and scipy only).
heyoka_peer
    heyoka.py (optional, ``pip install 'flowlib[heyoka]'``; imported lazily): naive ``relu/relup`` RHS, and masks
    as parameters with terminal events flipping by ``d_sgn``.
gd_peer
    Tiny-step gradient descent (flowlib's float64 Numba kernel), with a step search for a target accuracy.
reference
    The independent mpmath oracle for transversal problems (no flowlib code).
exact
    Closed forms (E1, seed 000, crossings, twisting, nosnoc's oscillator) and an event-by-event mpmath solution
    of single-surface relay systems.
stored
    40-digit references too slow to recompute in each run, stored with a digest of their inputs.
"""

from flowlib.peers.heyoka_peer import available as heyoka_available

__all__ = ["heyoka_available"]
