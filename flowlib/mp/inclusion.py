"""The inclusion residual over mpmath numbers: how far a step's velocity is from the Filippov set at its start.

The computation of :mod:`flowlib.kernels.inclusion` (read its module docstring): per neuron on surfaces (held, or
just crossed or released), the distance of ``C[1]_j`` to ``{v0_j + sum_k s_k e_k : s in [leak, 1]^k}``, a small
box-constrained least-squares problem; the largest over the neurons, relative to ``|C[1]|``; a held slot's box
widened by its noise band over ``|G_i|`` (at ``G_i = 0``, the limit: the normal times the band). Call
inside ``mp.workdps(...)``.
"""

from __future__ import annotations

from mpmath import mp, mpf
from mpmath.libmp import mpf_sum

from flowlib.kernels.constants import DROP_NONE, INCLUSION_ROUNDINGS, MODE_HELD, MODE_VOID
from flowlib.mp import linalg
from flowlib.mp.fast import arithmetic


def _neuron_distance(data, G0, C, S, j, on, widen, free) -> mpf:
    """``dist(C[1][j][:d + 1], F_j)`` for neuron ``j`` on the surfaces of the samples ``on`` (slope of sample
    ``i`` in ``[leak - lo, 1 + hi]`` with ``(lo, hi) = widen.get(i, (0, 0))``; the column of a sample in ``free``
    replaced by its normal times ``[-free[i], free[i]] |a_j|``), less the rounding of the velocity (see the
    kernel's)."""
    da = data.da
    a = C[0][j][da]
    E = [[-a * G0[i] * x for x in data.normals[i]] for i in on]
    v0 = [-x for x in C[1][j][:da]]
    if data.decay:  # the set shifted by -decay (w_j, b_j) (see the kernel's)
        v0 = [v - data.decay * p for v, p in zip(v0, C[0][j][:da])]
    members = set(on)
    gross = mpf(0)
    for i in range(data.n):
        slope = 1 if i in members else S[i][j]
        gross += abs(a * G0[i] * slope) * mp.fsum(abs(x) for x in data.normals[i])
        if i not in members and S[i][j] != 0:
            coef = -a * S[i][j] * G0[i]
            v0 = [v + coef * x for v, x in zip(v0, data.normals[i])]
    leak = data.leak
    for k, i in enumerate(on):  # the widened box as [leak, 1]: s = leak - lo + (u - leak) r (the kernel's)
        lo, hi = widen.get(i, (mpf(0), mpf(0)))
        r = (1 - leak + lo + hi) / (1 - leak)
        shift = leak - lo - leak * r
        v0 = [v + e * shift for v, e in zip(v0, E[k])]
        E[k] = [e * r for e in E[k]]
        if i in free:  # t in [-1, 1] as s in [leak, 1]: t = (2 s - 1 - leak) / (1 - leak)
            half = abs(a) * free[i]
            E[k] = [x * 2 * half / (1 - leak) for x in data.normals[i]]
            v0 = [v - x * half * (1 + leak) / (1 - leak) for v, x in zip(v0, data.normals[i])]
    s = linalg.box_least_squares(E, v0, leak, mpf(1))
    return max(mpf(0), linalg.norm(linalg.combine(v0, E, s)) - INCLUSION_ROUNDINGS * mp.eps * gross)


def inclusion_residual(data, G0, C, S, mode, drop, held=None) -> mpf:
    """``max_j dist(C[1]_j, F_j) / |C[1]|`` (the absolute distance when ``C[1] = 0``).

    Parameters
    ----------
    data : flowlib.mp.series.MPData
    G0 : list of mpf
        Residual weights at the step's start.
    C : list
        The step's Taylor coefficients (``C[0]`` the state, ``C[1]`` the velocity), rows per neuron.
    S : list of list of mpf
        Slopes of the cells (0 on held and void surfaces).
    mode, drop : list of list of int
        The surfaces' modes and drop flags (``flowlib.kernels.constants``).
    held : flowlib.mp.flow.Held, optional
        The step's held surfaces and their noise bands, which widen their slopes' boxes.
    """
    prec, rnd = mp._prec_rounding
    square = arithmetic(rnd)[0]  # mpf multiplication on raw tuples: mp.fsum(x * x for ...) without the objects
    size = mp.sqrt(mp.make_mpf(mpf_sum([square(x, x, prec) for x in (v._mpf_ for row in C[1] for v in row)], prec,
                                       rnd)))
    widening, free = {}, {}
    if held is not None:
        for slot, (i, j) in enumerate(held.slots):
            if (slot, data.leak) not in held.band:
                continue
            if G0[i] != 0:
                widening.setdefault(j, {})[i] = (held.band[slot, data.leak] / abs(G0[i]),
                                                 held.band[slot, mpf(1)] / abs(G0[i]))
            else:
                free.setdefault(j, {})[i] = max(held.band[slot, data.leak], held.band[slot, mpf(1)])
    worst = mpf(0)
    for j in range(len(C[0])):
        on = [i for i in range(data.n) if mode[i][j] == MODE_HELD or (
            mode[i][j] != MODE_VOID and drop[i][j] != DROP_NONE)]
        if on:
            worst = max(worst, _neuron_distance(data, G0, C, S, j, on, widening.get(j, {}), free.get(j, {})))
    return worst / size if size > 0 else worst
