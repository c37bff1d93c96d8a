"""Codes and limits shared by the float64 kernels and the mpmath backend (plain Python: no numba import).

Event kinds are logged as these integers by the kernels; :mod:`flowlib.result` maps them to the names of
docs/design.md (Solution concept).
"""

EVENT_CROSS = 0
EVENT_SLIDE_START = 1
EVENT_SLIDE_END = 2
EVENT_STICK = 3
EVENT_TIE = 4
EVENT_ZENO = 5

TIE_STAY = 0
TIE_LEAVE = 1

#: Modes of a (sample, neuron) surface: the state is in a cell on one side (free), kept on the surface (held:
#: sliding, sticking, or a tie it stays on), or there is no surface (void: ``x_i = 0`` without bias).
MODE_FREE = 0
MODE_HELD = 1
MODE_VOID = 2

#: ``drop`` values: how many leading Taylor terms of a switching polynomial are known to vanish (the state sits
#: on a surface it has just crossed, or been released from).
DROP_NONE = 0
DROP_CROSSED = 1
DROP_RELEASED = 2

#: Above this many hyperplanes of one neuron held or met at once (a neuron at the origin sits on all ``n``), the
#: test for dependent normals screens them against two greedy bases before its per-column least squares
#: (kernels/events.py, ``dependent_columns``); there is no limit on the number of surfaces.
SCREEN_COLUMNS = 16
#: Largest number of repelling surfaces (of one neuron, at one instant) whose decisions are all compared: 3^r
#: least-squares problems (2^r with ``tie="leave"``); beyond it a branch and bound (an ascent with ``tie="leave"``)
#: finds a consistent configuration for any number of surfaces (kernels/events.py).
MAX_ENUMERATED = 7
#: The same with ``tie="leave"``, whose search compares only the 2^r vertices: 2^11 = 2048 vertices cost no more
#: than 3^7 = 2187 decisions. Beyond it an ascent ends at a consistent vertex that is a local maximum of ``|v|``;
#: the global one is NP-hard to find in general (docs/design.md, Several surfaces at once).
MAX_ENUMERATED_LEAVE = 11
#: Largest number of search nodes (least-squares problems) of the branch and bound beyond ``MAX_ENUMERATED``.
NODE_LIMIT = 4096

#: Decision of one surface in the configuration search of a neuron on several surfaces (kernels/events.py).
LCP_FREE = 0  #: attracting, neutral or undecided: its slope is a variable of the least-squares problem
LCP_DOWN = 1  #: left downwards: slope fixed at ``leak``
LCP_UP = 2  #: left upwards: slope fixed at 1
LCP_HOLD = 3  #: repelling and held: its slope is a variable and its normal velocity must vanish

#: The order controller (kernels/driver.py ``_next_order``): a step after one that an event ended is taken at the
#: order that step needed (kernels/stepping.py ``order_needed``) plus ``ORDER_MARGIN``, and at least
#: ``LOWEST_ORDER``, where that at least halves the tolerance's order (else the tolerance's); a step after any
#: other goes ``ORDER_CLIMB`` orders up, to the tolerance's at most. The next
#: event is rarely as close as the last (B9: inter-event times spread over a decade), and at orders 6 to 8 one
#: order lengthens the step less than twice (1.9 from 6 to 7 at ``rtol = 1e-13``, kernels/stepping.py
#: ``taylor_step``), hence a margin of two. The
#: floor: the tangency tests after an event (a crossing's or a release's vanishing leading terms, the side a held
#: surface leaves to) read the step's coefficients, so a step keeps that many.
LOWEST_ORDER = 6
ORDER_MARGIN = 2
ORDER_CLIMB = 4
#: A step after one an event ended stops its Taylor coefficients at the first order from ``ADAPTIVE_MIN_ORDER`` on
#: (``LOWEST_ORDER`` where a surface is held or released; at most the controller's) whose step reaches this many times
#: the predicted time of the next crossing (the earliest root of the switching functions' linear parts,
#: kernels/driver.py ``_linear_crossing``): where events are dense that order is mostly 3, and the margin keeps the
#: truncation error at the crossing far below the tolerance, ``(1 / margin)^(K + 1)`` of it.
ADAPTIVE_MARGIN = 2.0
#: The lowest order such a step may stop at. The step-size rule keeps the truncation error under the tolerance at
#: any order, and order 3 is the lowest at which it still reads two coefficients past the velocity's; where events
#: are dense the step is a small fraction of the coefficients' radius and stops there or at 4 (each order spared
#: is two matrix products of an event's six to eight; B8's first t = 0.05: 1 275 of 1 426 steps at 3, 150 at 4).
ADAPTIVE_MIN_ORDER = 3
#: the lowest Taylor order a step is ever taken at (``order_for``'s floor): where a huge loss makes the
#: coefficients overflow above some order, the step is taken at that order if it is at least this
MIN_ORDER = 4
#: The step-size rule's safety factor is ``e^STEP_SAFETY_EXPONENT`` (Jorba & Zou), in both backends; the same
#: factor scales the logistic loss's radius where its coefficients are flat to rounding.
STEP_SAFETY_EXPONENT = -2
#: Width of the noise band of a held surface's exit polynomial ``a_j G_i (s_ij - beta)``, in units of its noise
#: estimate (kernels/driver.py): an excursion of the multiplier beyond ``beta`` that stays inside the band is rounding
#: (or a tangency), not an exit.
NOISE_BAND = 4.0
#: A square-loss flow has converged to working precision when every residual ``|f(x_i) - y_i|`` is at most this many
#: rounding errors of the network output at the current state (kernels/driver.py); it then coasts to ``t_end``. The
#: float64 flow's residuals stall at about ten of them (seed 003's three points: 8 to 12), where a step's velocity
#: is rounding of the state.
CONVERGED_ROUNDINGS = 16.0
#: The inclusion residual does not count distances within this many roundings of the velocity's terms (kernels/
#: inclusion.py): a velocity that is itself rounding (a neuron dead at the origin) has no measurable direction.
INCLUSION_ROUNDINGS = 64.0

#: Longest cycle of event instants the Zeno detectors recognise (kernels/zeno.py and its mpmath twin), the
#: instants they keep (enough for ``3 p + 1`` instants of the longest cycle) and the largest time ratio per cycle
#: taken for a geometric accumulation.
ZENO_MAX_CYCLE = 16
ZENO_MEMORY = 3 * ZENO_MAX_CYCLE + 1
ZENO_MAX_RATIO = 0.99
