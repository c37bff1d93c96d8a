"""Test oracles: exact answers computed without flowlib's code, for the tests and the benchmarks.

Modules
-------
reference
    The independent mpmath integrator of the network gradient flow at arbitrary precision (transversal crossings
    only; numpy and mpmath, no flowlib code).
exact
    Closed forms (E1, seed 000, crossings, twisting, nosnoc's oscillator) and an event-by-event mpmath solution
    of single-surface relay systems.
"""
