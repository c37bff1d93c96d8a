"""The inclusion residual: how far the integrator's velocity is from the Filippov set at a step's start.

At a state ``theta`` the backprop field of neuron ``j`` is a set: on the surfaces ``I_j`` it sits on (held, or just
crossed or released, so that ``z_ij = 0`` there) the slopes ``s_i`` range over ``[leak, 1]``, and

    F_j = { v0_j + sum_{i in I_j} s_i e_i : s in [leak, 1]^I_j },   e_i = -a_j G_i n_i,
    v0_j = -a_j sum_{i not in I_j} S_ij G_i n_i,                       n_i = (x_i, 1) (or (x_i, 0) without bias),

(docs/design.md, Solution concept). Any solution of the inclusion has ``(w_j, b_j)' in F_j``. The step's first Taylor
coefficient ``C[1]`` is the velocity the integrator follows, so ``dist(C[1]_j, F_j)`` (a small box-constrained least
squares problem, :func:`.events.box_least_squares`) certifies the classification independently of how it was made.
Neurons on no surface have a single-valued field that ``C[1]`` evaluates by construction; ``a_j'`` is single-valued
too (``sigma(0) = 0`` whatever the slope). Both clocks work unchanged: in ``s = ln(1 + t)`` the field and ``C[1]``
carry the same factor ``e^s`` (``G`` is the recurrence's own).

A held surface whose multiplier lies beyond a bound of ``[leak, 1]`` by less than its noise band is held on purpose
(the engine does not release on noise: near a stationary point the residual weights are as uncertain as the state,
whose local error is the step tolerance). Its slope's box is widened by that band over ``|G_i|``, the same numbers
the engine decided with, so the residual measures the classification and not the noise the engine allows for.
Surfaces with dependent normals (duplicate samples, a class of parallel ones) are held or released together, by a
combined gap whose band is the sum of their bands (weighted by the class's ratios): each member's box widened by its
own band widens the class's combined range by no more than that.
"""

import math

import numpy as np

from ._jit import jit
from .constants import DROP_NONE, INCLUSION_ROUNDINGS, MODE_HELD, MODE_VOID
from .events import box_least_squares, box_residual
from .tolerances import EPS64 as _EPS


@jit
def _widen(G0, held, j, on, lo, hi, free):
    """``lo[k]``, ``hi[k]``: how far the slope of surface ``on[k]`` of neuron ``j`` may go below ``leak`` and above
    1: its noise band over ``|G_i|`` for a held slot (``held = (samples, dependent, band, cons_offset)``, the
    driver's; a dependent slot's too), 0 otherwise. ``free[k]``: for a held slot with ``G_i = 0`` exactly
    (a sample fitted exactly, as at a converged square loss), whose slope does not enter the velocity, the band
    itself, ``max(band)``: the limit of the widened slope's range times ``|G_i|`` (0 otherwise)."""
    samples, _, band, cons_offset = held  # dependent slots are widened alike (module doc)
    for k in range(len(on)):
        lo[k] = 0.0
        hi[k] = 0.0
        free[k] = 0.0
        g = abs(G0[on[k]])
        for slot in range(cons_offset[j], cons_offset[j + 1]):
            if samples[slot] == on[k]:
                if g > 0.0:
                    lo[k] = band[slot, 0] / g
                    hi[k] = band[slot, 1] / g
                else:
                    free[k] = max(band[slot, 0], band[slot, 1])


@jit
def _neuron_distance(Xa, G0, R0, reach, C, S, leak, bias, decay, j, on, lo, hi, free):
    """``dist(C[1, j, :d + 1], F_j)`` for neuron ``j`` whose surfaces are the samples ``on`` (slope ``k`` in
    ``[leak - lo[k], 1 + hi[k]]``; where ``free[k] > 0`` the column ``e_k = 0`` is replaced by the normal ``n_i``
    times ``[-free[k], free[k]] |a_j|``, the widened box's limit at ``G_i = 0``), less the rounding of the velocity
    (``INCLUSION_ROUNDINGS`` epsilons of its terms' magnitudes: a neuron whose velocity is rounding, such as one
    dead at the origin, is not measured against that rounding).

    The other samples' part ``v0_j = -a_j sum_{i not in on} s_ij G_i n_i`` is the recurrence's residual row ``R0_j =
    sum_i s_ij G_i (x_i, 1)`` (every sample with its slope; held ones have ``s = 0``) less the surfaces' own terms, so
    that a neuron costs ``O(n + |on| d)``; ``reach[i] = |n_i|_1``."""
    n, da = Xa.shape
    d = da - 1
    width = da if bias else d
    a = C[0, j, da]
    v0 = np.zeros(da)
    E = np.zeros((da, len(on)))
    for q in range(width):
        v0[q] = -a * R0[j, q]
    # the velocity's rounding: its terms' magnitudes, sum_i |a_j s_ij G_i| |n_i|_1 (on surfaces at the largest slope)
    gross = 0.0
    for i in range(n):
        gross += abs(a * G0[i]) * reach[i] * abs(S[i, j])
    for k in range(len(on)):
        i = on[k]
        s = S[i, j]
        gross += abs(a * G0[i]) * reach[i] * (1.0 - abs(s))
        for q in range(width):
            E[q, k] = -a * G0[i] * Xa[i, q]
            v0[q] += a * s * G0[i] * Xa[i, q]
    for q in range(width):
        v0[q] -= decay * C[0, j, q]
    for q in range(da):
        v0[q] -= C[1, j, q]
    # a widened box as [leak, 1] by an affine change of the slope: s = leak - lo + (u - leak) r
    for k in range(len(on)):
        r = (1.0 - leak + lo[k] + hi[k]) / (1.0 - leak)
        shift = leak - lo[k] - leak * r
        for q in range(da):
            v0[q] += E[q, k] * shift
            E[q, k] *= r
        if free[k] > 0.0:
            # t in [-1, 1] as s in [leak, 1]: t = (2 s - 1 - leak) / (1 - leak)
            half = abs(a) * free[k]
            for q in range(width):
                E[q, k] = Xa[on[k], q] * 2.0 * half / (1.0 - leak)
                v0[q] -= Xa[on[k], q] * half * (1.0 + leak) / (1.0 - leak)
    s = np.empty(len(on))
    box_least_squares(E, v0, leak, 1.0, s)
    total = box_residual(E, v0, s, np.empty(da))
    return max(0.0, math.sqrt(total) - INCLUSION_ROUNDINGS * _EPS * gross)


@jit
def inclusion_residual(Xa, G0, R0, reach, C, S, mode, drop, leak, bias, decay, held):
    """``max_j dist(C[1]_j, F_j) / |C[1]|`` at the state ``C[0]`` with residual weights ``G0`` (the absolute
    distance when ``C[1] = 0``): 0 up to rounding for a velocity in the Filippov set. With weight decay ``decay``
    the set is shifted by ``-decay (w_j, b_j)``. ``held = (samples, dependent, band, cons_offset)``: the held slots
    grouped by neuron and their noise bands (``band[slot, 0]`` at ``leak``, ``band[slot, 1]`` at 1), which widen
    their slopes' boxes (module doc). ``R0`` (``m, d + 1``): the residual rows ``sum_i s_ij G_i (x_i, 1)`` of
    ``G0`` under the slopes ``S`` (0 on held surfaces); ``reach[i] = |n_i|_1`` (:func:`_neuron_distance`)."""
    n = Xa.shape[0]
    m = C.shape[1]
    size = 0.0
    for j in range(m):
        for q in range(C.shape[2]):
            size += C[1, j, q] * C[1, j, q]
    size = math.sqrt(size)
    worst = 0.0
    on = np.empty(n, np.int64)
    lo = np.empty(n)
    hi = np.empty(n)
    free = np.empty(n)
    # which neurons sit on a surface: one pass in memory order, then a column for those alone
    sits = np.zeros(m, np.bool_)
    for i in range(n):
        for j in range(m):
            sits[j] |= (mode[i, j] == MODE_HELD) | ((mode[i, j] != MODE_VOID) & (drop[i, j] != DROP_NONE))
    for j in range(m):
        if not sits[j]:
            continue
        count = 0
        for i in range(n):
            if mode[i, j] == MODE_HELD or (mode[i, j] != MODE_VOID and drop[i, j] != DROP_NONE):
                on[count] = i
                count += 1
        if count:
            _widen(G0, held, j, on[:count], lo, hi, free)
            worst = max(worst, _neuron_distance(Xa, G0, R0, reach, C, S, leak, bias, decay, j, on[:count],
                                                lo[:count], hi[:count], free[:count]))
    return worst / size if size > 0.0 else worst
