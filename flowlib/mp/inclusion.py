"""The inclusion residual over mpmath numbers: how far a step's velocity is from the Filippov set at its start.

The computation of :mod:`flowlib.kernels.inclusion` (read its module docstring): per neuron on surfaces (held, or
just crossed or released), the distance of ``C[1]_j`` to ``{v0_j + sum_k s_k e_k : s in [leak, 1]^k}``, a small
box-constrained least-squares problem; the largest over the neurons, relative to ``|C[1]|``. Call inside
``mp.workdps(...)``.
"""

from __future__ import annotations

from mpmath import mp, mpf

from flowlib.kernels.constants import DROP_NONE, INCLUSION_ROUNDINGS, MODE_HELD, MODE_VOID
from flowlib.mp import linalg


def _neuron_distance(data, G0, C, S, j, on) -> mpf:
    """``dist(C[1][j][:d + 1], F_j)`` for neuron ``j`` on the surfaces of the samples ``on``, less the rounding of
    the velocity (see the kernel's)."""
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
    s = linalg.box_least_squares(E, v0, data.leak, mpf(1))
    return max(mpf(0), linalg.norm(linalg.combine(v0, E, s)) - INCLUSION_ROUNDINGS * mp.eps * gross)


def inclusion_residual(data, G0, C, S, mode, drop) -> mpf:
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
    """
    size = mp.sqrt(mp.fsum(x * x for row in C[1] for x in row))
    worst = mpf(0)
    for j in range(len(C[0])):
        on = [i for i in range(data.n) if mode[i][j] == MODE_HELD or (
            mode[i][j] != MODE_VOID and drop[i][j] != DROP_NONE)]
        if on:
            worst = max(worst, _neuron_distance(data, G0, C, S, j, on))
    return worst / size if size > 0 else worst
