"""What happens at a switching surface: classify the hyperplanes a neuron sits on and pick the new pattern.

At ``z_ij = 0`` the network output is continuous (``sigma(0) = 0`` whatever the slope), so the residual weights
``G`` are too, and the only discontinuity of the field is the slope ``s_ij`` of the neuron's own surfaces. The
velocity of neuron ``j`` is affine in the slopes ``s_I`` of the surfaces ``I`` it sits on:

    (w_j, b_j)' = v0 + sum_{k in I} s_k e_k,   e_k = -a_j G_k (x_k, 1),

and so are the normal velocities ``u_i = <(w_j, b_j)', (x_i, 1)>`` for ``i in I``. A **transversal crossing**
is a unique assignment ``s_I in {leak, 1}^I`` whose normal velocities agree with it strictly (``u_i > 0`` on the
active side, ``u_i < 0`` on the other): the state leaves every surface of ``I`` into that cell. Anything else
(sliding, sticking, a repelling tie: DESIGN.md §1) is reported as non-transversal.
"""

import numpy as np

from . import status
from ._jit import jit

EVENT_CROSS = 0
EVENT_SLIDE_START = 1
EVENT_SLIDE_END = 2
EVENT_STICK = 3
EVENT_TIE = 4
EVENT_ZENO = 5

#: Largest number of simultaneous hyperplanes of one neuron whose 2^k sign assignments are enumerated.
MAX_SURFACES = 12


@jit
def classify_neuron(Xa, G, P, S, leak, bias, j, hit, out_side):
    """Decide the side of each surface in ``hit[:, j]`` for neuron ``j``.

    Parameters
    ----------
    Xa : ndarray, shape (n, d + 1)
    G : ndarray, shape (n,)
        Residual weights at the event state.
    P : ndarray, shape (m, d + 2)
        Event state.
    S : ndarray, shape (n, m)
        Slopes before the event (only the rows not in ``hit`` are used).
    leak : float
    bias : bool
    j : int
        Neuron.
    hit : ndarray of bool, shape (n, m)
        Surfaces the state sits on.
    out_side : ndarray of int8, shape (n,)
        Filled for the rows with ``hit[i, j]``: +1 active side, -1 inactive side.

    Returns
    -------
    int
        ``status.RUNNING`` when a transversal crossing was found, ``status.NONTRANSVERSAL`` or
        ``status.TOO_MANY_SURFACES`` otherwise.
    """
    n, da = Xa.shape
    d = da - 1
    a_j = P[j, da]
    count = 0
    for i in range(n):
        if hit[i, j]:
            count += 1
    if count > MAX_SURFACES:
        return status.TOO_MANY_SURFACES
    idx = np.empty(count, np.int64)
    q = 0
    for i in range(n):
        if hit[i, j]:
            idx[q] = i
            q += 1
    v0 = np.zeros(da)
    for i in range(n):
        if not hit[i, j]:
            coef = -a_j * G[i] * S[i, j]
            for r in range(da):
                v0[r] += coef * Xa[i, r]
    if not bias:
        v0[d] = 0.0
    # base[p] = <v0, Xa_p>,  M[p, k] = <e_k, Xa_p> for p, k in I
    base = np.empty(count)
    M = np.empty((count, count))
    for p in range(count):
        ip = idx[p]
        acc = 0.0
        for r in range(da):
            acc += v0[r] * Xa[ip, r]
        base[p] = acc
        for k in range(count):
            ik = idx[k]
            dot = 0.0
            for r in range(d):
                dot += Xa[ik, r] * Xa[ip, r]
            if bias:
                dot += 1.0
            M[p, k] = -a_j * G[ik] * dot
    found = 0
    chosen = -1
    for code in range(1 << count):
        consistent = True
        for p in range(count):
            u = base[p]
            for k in range(count):
                s_k = 1.0 if (code >> k) & 1 else leak
                u += s_k * M[p, k]
            if (code >> p) & 1:
                if not u > 0.0:
                    consistent = False
                    break
            elif not u < 0.0:
                consistent = False
                break
        if consistent:
            found += 1
            chosen = code
    if found != 1:
        return status.NONTRANSVERSAL
    for p in range(count):
        out_side[idx[p]] = 1 if (chosen >> p) & 1 else -1
    return status.RUNNING
