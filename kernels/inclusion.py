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
"""

import math

import numpy as np

from ._jit import jit
from .constants import DROP_NONE, INCLUSION_ROUNDINGS, MODE_HELD, MODE_VOID
from .events import box_least_squares
from .tolerances import EPS64 as _EPS


@jit
def _neuron_distance(Xa, G0, C, S, mode, drop, leak, bias, decay, j, on):
    """``dist(C[1, j, :d + 1], F_j)`` for neuron ``j`` whose surfaces are the samples ``on``, less the rounding
    of the velocity (``INCLUSION_ROUNDINGS`` epsilons of its terms' magnitudes: a neuron whose velocity is rounding,
    such as one dead at the origin, is not measured against that rounding)."""
    n, da = Xa.shape
    d = da - 1
    width = da if bias else d
    a = C[0, j, da]
    v0 = np.zeros(da)
    E = np.zeros((da, len(on)))
    is_on = np.zeros(n, np.bool_)
    for k in range(len(on)):
        is_on[on[k]] = True
        for q in range(width):
            E[q, k] = -a * G0[on[k]] * Xa[on[k], q]
    # the velocity's rounding: its terms' magnitudes, sum_i |a_j s_ij G_i| |n_i|_1 (on surfaces at the largest slope)
    gross = 0.0
    for i in range(n):
        if mode[i, j] == MODE_VOID:
            continue
        reach = 0.0
        for q in range(width):
            reach += abs(Xa[i, q])
        gross += abs(a * G0[i]) * reach * (1.0 if is_on[i] else abs(S[i, j]))
        if is_on[i] or S[i, j] == 0.0:
            continue
        for q in range(width):
            v0[q] -= a * S[i, j] * G0[i] * Xa[i, q]
    for q in range(width):
        v0[q] -= decay * C[0, j, q]
    for q in range(da):
        v0[q] -= C[1, j, q]
    s = np.empty(len(on))
    box_least_squares(E, v0, leak, 1.0, s)
    total = 0.0
    for q in range(da):
        r = v0[q]
        for k in range(len(on)):
            r += E[q, k] * s[k]
        total += r * r
    return max(0.0, math.sqrt(total) - INCLUSION_ROUNDINGS * _EPS * gross)


@jit
def inclusion_residual(Xa, G0, C, S, mode, drop, leak, bias, decay):
    """``max_j dist(C[1]_j, F_j) / |C[1]|`` at the state ``C[0]`` with residual weights ``G0`` (the absolute
    distance when ``C[1] = 0``): 0 up to rounding for a velocity in the Filippov set. With weight decay ``decay``
    the set is shifted by ``-decay (w_j, b_j)``."""
    n = Xa.shape[0]
    m = C.shape[1]
    size = 0.0
    for j in range(m):
        for q in range(C.shape[2]):
            size += C[1, j, q] * C[1, j, q]
    size = math.sqrt(size)
    worst = 0.0
    on = np.empty(n, np.int64)
    for j in range(m):
        count = 0
        for i in range(n):
            if mode[i, j] == MODE_HELD or (mode[i, j] != MODE_VOID and drop[i, j] != DROP_NONE):
                on[count] = i
                count += 1
        if count:
            worst = max(worst, _neuron_distance(Xa, G0, C, S, mode, drop, leak, bias, decay, j, on[:count]))
    return worst / size if size > 0.0 else worst
