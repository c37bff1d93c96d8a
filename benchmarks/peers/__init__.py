"""Peers and stored references for the benchmarks (:mod:`benchmarks.bench`; the designs are described in BENCHMARKS.md).

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
stored
    40-digit references too slow to recompute in each run, stored with their exact inputs (``data/``).

The exact references the benchmarks compare with are the test oracles: :mod:`tests.oracles.reference` (the
independent mpmath integrator for transversal problems, no flowlib code) and :mod:`tests.oracles.exact` (closed
forms and event-by-event mpmath solutions).
"""

from benchmarks.peers.heyoka_peer import available as heyoka_available

__all__ = ["heyoka_available"]
