"""Codes and limits shared by the float64 kernels and the mpmath backend (plain Python: no numba import).

Event kinds are logged as these integers by the kernels; :mod:`flowlib.result` maps them to the names of
DESIGN.md §3.
"""

EVENT_CROSS = 0
EVENT_SLIDE_START = 1
EVENT_SLIDE_END = 2
EVENT_STICK = 3
EVENT_TIE = 4
EVENT_ZENO = 5

TIE_STAY = 0
TIE_LEAVE = 1

#: Largest number of hyperplanes one neuron may sit on at once.
MAX_SURFACES = 64
#: Largest number of simultaneous surfaces whose 3^k configurations are checked for consistency.
MAX_ENUMERATED = 7
