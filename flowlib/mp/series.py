"""Taylor coefficients of the gradient-flow field under a fixed activation pattern, over mpmath numbers.

The arbitrary-precision twin of :mod:`flowlib.kernels.series` (same recurrences, same layout, see its module
docstring): ``P[j] = (w_j, b_j, a_j)`` as a list of ``d + 2`` mpf, ``Xa[i] = (x_i, 1)``, slopes ``S[i][j]`` in
``{leak, 1}`` (0 on held surfaces). Every function here must be called inside ``mp.workdps(...)``; the data are
converted once, exactly from their float64 values, by :class:`MPData`.

The hot loops (the recurrences, the state polynomial, the step's energy) run on raw mpf tuples and, for the exact
sums that ``mp.fdot`` rounds once, on Python integers (:mod:`flowlib.mp.fast`): the numbers are those of the same
formulas over mpf objects bit for bit, several times faster.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import repeat
from operator import mul, neg

from mpmath import mp, mpf
from mpmath.libmp import fone, from_int, fzero, mpf_add, mpf_div, mpf_mul, mpf_mul_int, mpf_pow_int, mpf_sub, mpf_sum
from mpmath.libmp import round_nearest as ROUND_NEAREST

from flowlib.mp.fast import Fixed, Inexact, Track, arithmetic, check_span, combination, convolutions, div_all, \
    div_int, dot, dots, horner_all, mul_add, round_all, times, times_all, unpacked
from flowlib.problem import Problem

LOSS_EXP, LOSS_LOGISTIC, LOSS_SQUARE = 0, 1, 2

_new = object.__new__


@dataclass(frozen=True)
class MPData:
    """A :class:`~flowlib.Problem` with every number an exact mpf (float64 values are exact binary fractions); the
    reduction factor ``1/n`` of the mean is computed at working precision, not taken from its float64 rounding."""

    Xa: tuple
    normals: tuple
    y: tuple
    c: mpf
    leak: mpf
    loss_kind: int
    bias: bool
    train_outer: bool
    decay: mpf = mpf(0)

    @classmethod
    def from_problem(cls, problem: Problem) -> "MPData":
        Xa = tuple(tuple(mpf(float(v)) for v in row) for row in problem.augmented_inputs)
        d = problem.d
        normals = tuple(row if problem.bias else row[:d] + (mpf(0),) for row in Xa)
        return cls(Xa=Xa, normals=normals, y=tuple(mpf(float(v)) for v in problem.y),
                   c=mpf(1) / problem.n if problem.reduction == "mean" else mpf(1),
                   leak=mpf(problem.leak), loss_kind=problem.loss_code, bias=problem.bias,
                   train_outer=problem.train_outer, decay=mpf(problem.weight_decay))

    @property
    def n(self) -> int:
        return len(self.Xa)

    @property
    def da(self) -> int:
        return len(self.Xa[0])


def preactivations(data: MPData, P) -> list:
    """``z[i][j] = <P[j][:d + 1], Xa[i]>``, each as ``mp.fdot`` gives it."""
    return _wrap(_preactivations_raw(data, P))


def _preactivations_raw(data: MPData, P) -> list:
    """:func:`preactivations` as raw mpf (on integers, :func:`_switching`, where that reproduces ``mp.fdot``)."""
    if mp._prec_rounding[1] == ROUND_NEAREST:
        try:
            return _exact_preactivations(data, P)
        except Inexact:
            pass
    da = data.da
    return [[mp.fdot(P[j][:da], x)._mpf_ for j in range(len(P))] for x in data.Xa]


def _exact_preactivations(data: MPData, P) -> list:
    """:func:`_preactivations_raw` on integers (:func:`_switching`); raises :class:`Inexact` where the state
    spans too many bits for that to reproduce ``mp.fdot``."""
    da = data.da
    return _switching([[x._mpf_ for x in row[:da]] for row in P], _Inputs(data), da, mp.prec)


def outputs(data: MPData, P, S) -> list:
    """Network outputs ``f_i = sum_j a_j s_ij z_ij`` under slopes ``S``: the mpf expression
    ``mp.fsum(P[j][d + 1] * S[i][j] * Z[i][j] for j)`` (two rounded products, an exact sum rounded once), on raw
    mpf."""
    Z = _preactivations_raw(data, P)
    da = data.da
    prec, rnd = mp._prec_rounding
    product = arithmetic(rnd)[0]
    a = [row[da]._mpf_ for row in P]
    return [mp.make_mpf(mpf_sum([product(product(aj, s._mpf_, prec), z, prec) for aj, s, z in zip(a, Si, Zi)],
                                prec, rnd)) for Si, Zi in zip(S, Z)]


def penalty(data: MPData, P) -> mpf:
    """``|theta_trained|^2`` (``w_j``, ``b_j`` with a bias, ``a_j`` when trained), as one exact sum rounded once."""
    d = data.da - 1
    trained = [x for row in P for x in (row[:d + 1] if data.bias else row[:d])]
    if data.train_outer:
        trained += [row[d + 1] for row in P]
    return mp.fdot(trained, trained)


def loss_value(data: MPData, P, S) -> mpf:
    """``L = c sum_i l(f_i, y_i)``, plus ``decay/2 |theta_trained|^2`` with weight decay."""
    total = []
    for f, y in zip(outputs(data, P, S), data.y):
        if data.loss_kind == LOSS_SQUARE:
            total.append((f - y) ** 2 / 2)
        elif data.loss_kind == LOSS_EXP:
            total.append(mp.exp(-y * f))
        else:
            total.append(mp.log1p(mp.exp(-y * f)))
    value = data.c * mp.fsum(total)
    return value + data.decay / 2 * penalty(data, P) if data.decay else value


def _sigmoid(u) -> mpf:
    return 1 / (1 + mp.exp(-u))


def residual_weights(data: MPData, P, S, s0=None) -> list:
    """``G_i = c l'(f_i)`` at ``P`` (order 0 of the series); ``e^s0 G_i`` in the log clock."""
    G = []
    shift = 0 if s0 is None else s0
    for f, y in zip(outputs(data, P, S), data.y):
        if data.loss_kind == LOSS_SQUARE:
            G.append(data.c * (f - y) * mp.exp(shift))
        elif data.loss_kind == LOSS_EXP:
            G.append(-data.c * y * mp.exp(shift - y * f))
        else:
            G.append(-data.c * y * mp.exp(shift - y * f) * _sigmoid(y * f))
    return G


def slopes(data: MPData, active, held) -> list:
    """``S[i][j]``: 1 on the active side, ``leak`` on the other, 0 on held or void surfaces."""
    one, zero = mpf(1), mpf(0)
    return [[zero if held[i][j] else (one if active[i][j] else data.leak) for j in range(len(active[0]))]
            for i in range(len(active))]


class Series:
    """Taylor coefficients of one step (lists indexed by order first).

    Attributes
    ----------
    C : list
        ``C[k][j][q]``: the state, orders ``0..K``.
    Z : list
        ``Z[k][i][j]``: the switching functions, orders ``0..K`` (made from ``Zr`` when first read).
    G : list
        ``G[k][i]``: the residual weights, orders ``0..K - 1``.
    Cm : list
        ``Cm[slot][k]``: ``N_j^+ v`` of each held surface, orders ``0..K - 1`` (the multiplier is
        ``Cm / (a_j G_i)``).
    F : list
        ``F[k][i]``: the network outputs, orders ``0..K - 1``.
    Cr : list
        ``Cr[k]``: the raw mpf of ``C[k]`` row by row (``Cr[k][j (d + 2) + q]``), as :func:`raw_orders` gives them.
    Zr : list
        ``Zr[k][i][j]``: the raw mpf of ``Z``.
    """

    __slots__ = ("C", "G", "Cm", "F", "Cr", "Zr", "_Z")

    def __init__(self, C, G, Cm, F, Cr, Zr, Z=None):
        self.C, self.G, self.Cm, self.F, self.Cr, self.Zr, self._Z = C, G, Cm, F, Cr, Zr, Z

    @classmethod
    def of_mpf(cls, C, Z, G, Cm, F) -> "Series":
        """The series of mpf lists ``C``, ``Z``, ``G``, ``Cm``, ``F`` (the raw tuples read from them)."""
        return cls(C, G, Cm, F, raw_orders(C), [[[x._mpf_ for x in row] for row in Zk] for Zk in Z], Z)

    @property
    def Z(self) -> list:
        if self._Z is None:
            self._Z = [_wrap(Zk) for Zk in self.Zr]
        return self._Z


def raw_orders(C) -> list:
    """``[[x._mpf_ for row in Ck for x in row] for Ck in C]``: each order's coefficients as one flat list of raw
    mpf, row by row."""
    return [[x._mpf_ for row in Ck for x in row] for Ck in C]


def _loss_derivative_order(data: MPData, F, k, G, A0, A1, A2, s0) -> None:
    """Append order ``k`` of ``G = c l'(f)`` (and of the auxiliary series ``A0``, ``A1``, ``A2``).

    With ``s0`` (the log clock, ``s = ln(1 + t) = s0 + tau``) the series of ``G~ = e^s G``, by the recurrences of
    :func:`flowlib.kernels.series._loss_derivative_order`.
    """
    c, y = data.c, data.y
    n = data.n
    log_clock = s0 is not None

    def exp_series(target, shift, with_f=None):
        """Order ``k`` of ``exp(shift - y f)`` (``shift = s`` contributes ``1`` to the derivative of the exponent);
        of ``exp(shift)`` for the samples whose ``with_f`` is false."""
        use = [True] * n if with_f is None else with_f
        if k == 0:
            target.append([mp.exp(shift - y[i] * F[0][i]) if use[i] else mp.exp(shift) for i in range(n)])
            return
        target.append([((-y[i] * mp.fdot([l * F[l][i] for l in range(1, k + 1)], [target[k - l][i] for l in
                                                                                   range(1, k + 1)])
                         if use[i] else 0) + (target[k - 1][i] if log_clock else 0)) / k for i in range(n)])

    if data.loss_kind == LOSS_SQUARE:
        plain = [c * (F[k][i] - (y[i] if k == 0 else 0)) for i in range(n)]
        if not log_clock:
            G.append(plain)
            return
        A0.append(plain)
        weights = [mp.exp(s0) / mp.factorial(l) for l in range(k + 1)]
        G.append([mp.fdot(weights, [A0[k - l][i] for l in range(k + 1)]) for i in range(n)])
        return
    if data.loss_kind == LOSS_EXP:
        exp_series(A0, s0 if log_clock else 0)
        G.append([-c * y[i] * A0[k][i] for i in range(n)])
        return
    # logistic (kernel: the same per-sample branch): A0 = r = sigma(g q), A1 = r (1 - r), r' = g q' r (1 - r), with
    # q = y f and g = -1 in the t clock (p = sigma(-q)); in the log clock g = +1 where q >= 0 (G~ = -c y
    # exp(s - q) sigma(q), A2 = exp(s - q)), else g = -1 (G~ = -c y e^s sigma(-q), A2 = e^s)
    sgn = [1 if log_clock and y[i] * F[0][i] >= 0 else -1 for i in range(n)]
    if log_clock:
        exp_series(A2, s0, [g > 0 for g in sgn])
    if k == 0:
        A0.append([_sigmoid(sgn[i] * y[i] * F[0][i]) for i in range(n)])
        # r (1 - r) as a product: r - r^2 cancels once r rounds to 1 (|q| > 69 at 30 digits)
        A1.append([A0[0][i] * _sigmoid(-sgn[i] * y[i] * F[0][i]) for i in range(n)])
    else:
        A0.append([sgn[i] * y[i] * mp.fdot([l * F[l][i] for l in range(1, k + 1)], [A1[k - l][i] for l in
                                                                                  range(1, k + 1)]) / k
                   for i in range(n)])
        A1.append([A0[k][i] - mp.fdot([A0[l][i] for l in range(k + 1)], [A0[k - l][i] for l in range(k + 1)])
                   for i in range(n)])
    if log_clock:
        G.append([-c * y[i] * mp.fdot([A2[l][i] for l in range(k + 1)], [A0[k - l][i] for l in range(k + 1)])
                  for i in range(n)])
    else:
        G.append([-c * y[i] * A0[k][i] for i in range(n)])


def flat_loss_radius(data: MPData, F) -> mpf:
    """Kernel :func:`flowlib.kernels.series.flat_loss_radius` at working precision: ``min_i sqrt(q_i^2 + pi^2) /
    |q_i'|`` over the logistic samples with ``|q_i| >= ln(1 / eps)`` whose margin falls, ``inf`` otherwise."""
    r = mp.inf
    if data.loss_kind != LOSS_LOGISTIC:
        return r
    flat = -mp.log(mp.eps)
    for i in range(data.n):
        q, dq = data.y[i] * F[0][i], data.y[i] * F[1][i]
        if abs(q) >= flat and q * dq < 0:
            r = min(r, mp.sqrt(q * q + mp.pi ** 2) / abs(dq))
    return r


def taylor_coefficients(data: MPData, S, P, order: int, constraints, s0=None) -> Series:
    """Taylor coefficients of the flow under slopes ``S`` from state ``P`` up to ``order``.

    ``constraints[j]`` lists ``(slot, sample, pinv_row)`` for the surfaces neuron ``j`` is held on; its velocity is
    projected order by order exactly as in :func:`flowlib.kernels.series.taylor_coefficients`. With ``s0`` the
    expansion is in the log clock ``s = ln(1 + t)`` about ``s0``.

    Every sum is an exact sum of products rounded once, as ``mp.fdot`` does; they are computed on Python integers
    (:mod:`flowlib.mp.fast`), the other operations with the libmp functions of mpf arithmetic on raw tuples. The
    numbers are those of :func:`_taylor_reference` bit for bit, which runs instead where the integer path cannot
    guarantee that (see :class:`flowlib.mp.fast.Inexact`).
    """
    if mp._prec_rounding[1] == ROUND_NEAREST:
        try:
            return _taylor_integer(data, S, P, order, constraints, s0)
        except Inexact:
            pass
    return _taylor_reference(data, S, P, order, constraints, s0)


def _scale(s, x, prec):
    """``s * x`` rounded (raw mpf; a slope ``s`` of exactly 1 returns ``x``, which is already rounded)."""
    return x if s == fone else times(s, x, prec)


def _wrap(rows) -> list:
    """Nested lists of raw mpf as nested lists of mpf."""
    return [wrap_all(row) for row in rows]


def wrap_all(values) -> list:
    """``[mp.make_mpf(x) for x in values]``: the same objects (an ``mpf`` holding each raw tuple), made and filled
    in two C-level loops."""
    values = list(values)
    made = list(map(_new, repeat(mp.mpf, len(values))))
    deque(map(setattr, made, repeat("_mpf_"), values), 0)
    return made


class _Inputs:
    """The data as integers for :func:`_taylor_integer`: ``rows[i]`` is ``Xa[i]`` and ``columns[q]`` column ``q``,
    at exponent ``exp``; ``lo``, ``hi`` the exponent range of the nonzero entries."""

    def __init__(self, data: MPData):
        da = data.da
        flat = Fixed([x._mpf_ for row in data.Xa for x in row])
        if flat.ints is None:
            raise Inexact
        self.rows = [flat.ints[i * da:(i + 1) * da] for i in range(data.n)]
        self.columns = [list(col) for col in zip(*self.rows)]
        self.exp, self.lo, self.hi = flat.exp, flat.lo, flat.hi


def _switching(Ck, inputs: _Inputs, da: int, prec: int) -> list:
    """``Z[i][j] = fdot(Ck[j][:da], Xa[i])`` (raw)."""
    block = Fixed([x for row in Ck for x in row[:da]])
    if block.ints is None:
        raise Inexact
    check_span([(block.lo, block.hi, inputs.lo, inputs.hi)], prec)
    columns = [block.ints[q::da] for q in range(da)]  # by component q, one integer per neuron
    exp = block.exp + inputs.exp
    return [round_all(combination(columns, x), exp, prec) for x in inputs.rows]


def _taylor_integer(data: MPData, S, P, order: int, constraints, s0) -> Series:
    """:func:`taylor_coefficients` on Python integers (raises :class:`~flowlib.mp.fast.Inexact` where it cannot
    reproduce ``mp.fdot``).

    A neuron whose slopes are all 0 (held surfaces included) does not move without weight decay: its velocity is
    an exact 0 at every order, and so are the coefficients of order ``k >= 1`` of its state, pre-activations and
    projection coefficients; its products add exact zeros to every sum (which ``mpf_sum`` skips). The
    recurrences run on the other neurons (:func:`_taylor_moving`) and the still ones are filled in."""
    n_slots = sum(len(c) for c in constraints)
    moving = [j for j in range(len(P)) if data.decay or any(row[j] for row in S)]
    if not moving or len(moving) == len(P):
        return _taylor_moving(data, S, P, order, constraints, s0, n_slots)
    part = _taylor_moving(data, [[row[j] for j in moving] for row in S], [P[j] for j in moving], order,
                          [constraints[j] for j in moving], s0, n_slots)
    return _with_still_neurons(data, part, P, moving, constraints, order)


def _with_still_neurons(data: MPData, part: Series, P, moving, constraints, order: int, Z0=None) -> Series:
    """The series of the whole network from ``part``, that of the neurons ``moving``: the others keep their state
    (exact zeros at every order above 0, and in the projection coefficients of their held surfaces). ``Z0``: the
    whole network's raw ``Z[0]`` where the caller has it."""
    zero = mpf(0)
    for j in set(range(len(P))) - set(moving):
        for slot, _, _ in constraints[j]:
            part.Cm[slot] = [zero] * order
    where = {j: p for p, j in enumerate(moving)}
    width = data.da + 1
    C = [[list(part.C[0][where[j]]) if j in where else list(P[j]) for j in range(len(P))]]
    C += [[Ck[where[j]] if j in where else [zero] * width for j in range(len(P))] for Ck in part.C[1:]]
    Zr = [Z0 if Z0 is not None else _exact_preactivations(data, P)]
    Zr += [_whole_layer(Zk, where, len(P)) for Zk in part.Zr[1:]]
    return Series(C=C, G=part.G, Cm=part.Cm, F=part.F, Cr=raw_orders(C), Zr=Zr)


def _whole_layer(Zk, where: dict, m: int) -> list:
    """A raw layer ``Z[k]`` (``k >= 1``) of the moving neurons (``where``: neuron -> its column in ``Zk``) as the
    whole network's: an exact zero in the columns of the still neurons."""
    return [[row[where[j]] if j in where else fzero for j in range(m)] for row in Zk]


def _taylor_moving(data: MPData, S, P, order: int, constraints, s0, n_slots: int) -> Series:
    """The recurrences of :func:`_taylor_integer` for the neurons of ``P`` (``n_slots`` held surfaces in all)."""
    return _Recurrence(data, S, P, constraints, s0, n_slots).series(order)


class _Recurrence:
    """The recurrences of :func:`_taylor_integer` for the neurons of ``P`` (``n_slots`` held surfaces in all), run
    one order at a time as far as :meth:`series` asks: the coefficients of an order do not depend on the orders
    above it."""

    def __init__(self, data: MPData, S, P, constraints, s0, n_slots: int):
        n, m, da = data.n, len(P), data.da
        self.data, self.s0, self.n, self.m, self.da = data, s0, n, m, da
        self.prec = mp.prec
        self.inputs = _Inputs(data)
        self.Sr = Sr = [[s._mpf_ for s in row] for row in S]
        normals = [[x._mpf_ for x in row] for row in data.normals]
        self.held = [[(slot, normals[i], [x._mpf_ for x in row]) for slot, i, row in c] for c in constraints]
        self.Cm = [[] for _ in range(n_slots)]
        self.C = [[[x._mpf_ for x in row] for row in P]]
        self.Z, self.F, self.G, self.A0, self.A1, self.A2 = [], [], [], [], [], []
        # by order: a^[l]_j, U^[l]_ij (component i m + j), G^[l]_i, R^[l]_jq (component q m + j)
        self.a, self.U, self.g, self.R = Track(m), Track(n * m), Track(n), Track(da * m)
        self.cells = [[j for j in range(m) if Sr[i][j] != fzero] for i in range(n)]
        self.rows = [[i for i in range(n) if Sr[i][j] != fzero] for j in range(m)]

    def switching(self, k: int) -> list:
        """``Z[k]`` (raw), from ``C[k]``."""
        if len(self.Z) == k:
            self.Z.append(_switching(self.C[k], self.inputs, self.da, self.prec))
        return self.Z[k]

    def extend(self, order: int) -> None:
        """Run the recurrences up to ``C[order]``."""
        data, n, m, da, prec = self.data, self.n, self.m, self.da, self.prec
        train = data.train_outer
        decay = data.decay._mpf_
        a, U, g, R, Sr, C, F, G, Cm = self.a, self.U, self.g, self.R, self.Sr, self.C, self.F, self.G, self.Cm
        for k in range(len(C) - 1, order):
            if k == _REGRID_ORDER:
                _regrid((a, U, g, R), U.lo)
            Ck = C[k]
            Zk = self.switching(k)
            U.append([z if s == fone else (fzero if s == fzero else times(s, z, prec))  # z is finite
                      for i in range(n) for s, z in zip(Sr[i], Zk[i])])
            if train or k == 0:
                a.append([row[da] for row in Ck])
            lmax = k if train else 0
            F.append([mp.make_mpf(f) for f in _outputs(a, U, lmax, k, self.cells, prec)])
            _loss_derivative_order(data, F, k, G, self.A0, self.A1, self.A2, self.s0)
            g.append([x._mpf_ for x in G[k]])
            R.append(_residual_rows(Sr, G[k], self.inputs, prec))
            velocity = _velocity(a, R, lmax, k, m, da, prec)
            if train:
                outer = _outer_velocity(g, U, k, self.rows, prec)
            if not data.bias:
                velocity[da - 1] = [fzero] * m
            moved = [list(v) for v in zip(*velocity)]  # by neuron
            for j in range(m):
                v = moved[j]
                if self.held[j]:
                    v = _project_velocity(v, self.held[j], Cm, prec, ROUND_NEAREST)
                if decay != fzero:
                    v = [mpf_sub(vq, mpf_mul(decay, cq, prec, ROUND_NEAREST), prec, ROUND_NEAREST)
                         for vq, cq in zip(v, Ck[j])]
                if train and decay != fzero:
                    outer[j] = mpf_sub(outer[j], mpf_mul(decay, Ck[j][da], prec, ROUND_NEAREST), prec,
                                       ROUND_NEAREST)
                moved[j] = v
            quotients = div_all([vq for v in moved for vq in v] + (outer if train else []), k + 1, prec)
            C.append([quotients[j * da:(j + 1) * da] + [quotients[m * da + j] if train else fzero]
                      for j in range(m)])

    def series(self, order: int) -> Series:
        """The series to ``order``: ``C``, ``Z`` to ``order``, ``G``, ``Cm``, ``F`` to ``order - 1``."""
        self.extend(order)
        C = self.C[:order + 1]
        Z = [self.switching(k) for k in range(order + 1)]
        return Series(C=[_wrap(Ck) for Ck in C], G=self.G[:order], Cm=[row[:order] for row in self.Cm],
                      F=self.F[:order], Cr=[[x for row in Ck for x in row] for Ck in C], Zr=Z)


class TaylorExpansion:
    """:func:`taylor_coefficients` to an order chosen as they are computed: :meth:`series` to any order, the
    recurrences run once as far as the highest order asked (the coefficients of an order do not depend on the
    orders above it); :meth:`raw_order` the raw ``C[k]`` alone. The numbers are those of
    ``taylor_coefficients(data, S, P, order, constraints, s0)`` for each ``order``."""

    def __init__(self, data: MPData, S, P, constraints, s0=None):
        self.data, self.S, self.P, self.constraints, self.s0 = data, S, P, constraints, s0
        self.moving = [j for j in range(len(P)) if data.decay or any(row[j] for row in S)]
        self._z0 = None  # the whole network's raw Z[0] when some neurons are still (:meth:`_still_switching`)
        self.recurrence = None
        if mp._prec_rounding[1] == ROUND_NEAREST:
            moving = self.moving if self.moving and len(self.moving) < len(P) else range(len(P))
            try:
                self.recurrence = _Recurrence(data, [[row[j] for j in moving] for row in S], [P[j] for j in moving],
                                              [constraints[j] for j in moving], s0,
                                              sum(len(c) for c in constraints))
            except Inexact:
                pass

    def series(self, order: int) -> Series:
        """The coefficients to ``order`` (:func:`taylor_coefficients`)."""
        if self.recurrence is not None:
            try:
                part = self.recurrence.series(order)
                if not self.moving or len(self.moving) == len(self.P):
                    return part
                return _with_still_neurons(self.data, part, self.P, self.moving, self.constraints, order,
                                           self._still_switching())
            except Inexact:
                self.recurrence = None
        return _taylor_reference(self.data, self.S, self.P, order, self.constraints, self.s0)

    def raw_switching(self, k: int) -> list:
        """``series(k).Zr[k]``: the raw ``Z[k]``, without making the mpf of the series."""
        if self.recurrence is not None:
            try:
                self.recurrence.extend(k)
                Zk = self.recurrence.switching(k)
                if not self.moving or len(self.moving) == len(self.P):
                    return Zk
                if k == 0:
                    return self._still_switching()
                return _whole_layer(Zk, {j: p for p, j in enumerate(self.moving)}, len(self.P))
            except Inexact:
                self.recurrence = None
        return self.series(k).Zr[k]

    def _still_switching(self) -> list:
        """The whole network's raw ``Z[0]`` (the recurrence runs on the moving neurons only), made once."""
        if self._z0 is None:
            self._z0 = _exact_preactivations(self.data, self.P)
        return self._z0

    def raw_order(self, k: int) -> list:
        """``raw_orders(series(k).C)[k]``: the raw ``C[k]`` row by row, for ``k >= 1`` without making the rest."""
        if self.recurrence is not None and k >= 1:
            try:
                self.recurrence.extend(k)
            except Inexact:
                self.recurrence = None
            else:
                rows = self.recurrence.C[k]
                if not self.moving or len(self.moving) == len(self.P):
                    return [x for row in rows for x in row]
                where = {j: p for p, j in enumerate(self.moving)}
                width = self.data.da + 1
                return [x for j in range(len(self.P)) for x in (rows[where[j]] if j in where else [fzero] * width)]
        return self.series(k).Cr[k]


#: Order at which :func:`_taylor_integer` puts its tracks on the grid of the coefficients' decay, measured from
#: order 1 (order 0 often decays faster than the rest).
_REGRID_ORDER = 6


def _regrid(tracks, lo) -> None:
    """Put ``tracks`` on one grid: the slope of ``lo`` (lowest exponent of each order) from order 1 on."""
    known = [(k, e) for k, e in enumerate(lo) if k and e is not None]
    if len(known) > 1:
        slope = (known[0][1] - known[-1][1]) // (known[-1][0] - known[0][0])
        for track in tracks:
            track.regrid(slope)


def _outputs(a: Track, U: Track, lmax: int, k: int, cells, prec: int) -> list:
    """``f_i^[k] = fdot(a^[0..lmax], U_i^[k..k-lmax])`` (raw). ``cells[i]`` lists the neurons with a slope
    ``s_ij != 0`` (``U_ij`` is an exact 0 at every order for the others): the exact sum is taken over them, by
    neuron, where they are fewer than the orders, else over ``l``."""
    check_span([(a.lo[l], a.hi[l], U.lo[k - l], U.hi[k - l]) for l in range(lmax + 1)], prec)
    exp = a.exp_at(0) + U.exp_at(k)
    m = len(a.columns)
    totals = []
    for i, cell in enumerate(cells):
        if len(cell) <= lmax:
            totals.append(sum(convolutions([a.columns[j] for j in cell], [U.columns[i * m + j] for j in cell])))
        else:
            totals.append(sum(map(sum, map(map, repeat(mul), a.blocks[:lmax + 1],
                                           [U.blocks[k - l][i * m:(i + 1) * m] for l in range(lmax + 1)]))))
    return round_all(totals, exp, prec)


def _outer_velocity(g: Track, U: Track, k: int, rows, prec: int) -> list:
    """``a_j' = -fdot(G^[0..k], U_.j^[k..0])`` (raw): the exact sums over the samples, every neuron's at once from
    ``U`` packed by sample (:meth:`~flowlib.mp.fast.Track.packed`: ``sum_i sum_l G_i^[l] (sum_j U_ij^[k-l]
    2^(w j))`` holds neuron ``j``'s sum in field ``j``), one product per sample and order instead of one per
    sample, neuron and order. ``U_ij`` is an exact 0 at every order where the slope ``s_ij`` is 0 (the samples
    outside ``rows[j]``), so the sums are those over ``rows[j]``."""
    check_span([(g.lo[l], g.hi[l], U.lo[k - l], U.hi[k - l]) for l in range(k + 1)], prec)
    exp = g.exp_at(0) + U.exp_at(k)
    m, n = len(rows), len(g.columns)
    # |sum_i sum_l G_i^[l] U_ij^[k-l]| <= n (k + 1) max|G| max|U| < 2^(width - 1)
    field = g.width(0, k) + U.width(0, k) + (n * (k + 1)).bit_length() + 1
    packs, width = U.packed("by sample", [slice(i * m, (i + 1) * m) for i in range(n)], field)
    total = sum(sum(map(mul, g.columns[i], [packs[k - l][i] for l in range(k + 1)])) for i in range(n))
    return round_all(list(map(neg, unpacked(total, m, width))), exp, prec)


def _residual_rows(Sr, Gk, inputs: _Inputs, prec: int) -> list:
    """Order ``k`` of ``R_jq = fdot(s_.j G_., Xa[.][q])`` (raw), component ``q m + j``. ``R_j`` depends on ``j``
    through the slopes ``s_.j`` only: each distinct column of slopes is summed once."""
    n, m = len(Sr), len(Sr[0])
    Gr = [x._mpf_ for x in Gk]
    patterns, which = {}, []
    for j in range(m):
        which.append(patterns.setdefault(tuple(Sr[i][j] for i in range(n)), len(patterns)))
    # the same values as the block of every neuron's s_ij G_i, so the same exponent range
    block = Fixed([_scale(s, g, prec) for pattern in patterns for s, g in zip(pattern, Gr)])
    if block.ints is None:
        raise Inexact
    check_span([(block.lo, block.hi, inputs.lo, inputs.hi)], prec)
    rows = [block.ints[p * n:(p + 1) * n] for p in range(len(patterns))]
    exp = block.exp + inputs.exp
    out = []
    for col in inputs.columns:
        sums = round_all([sum(map(mul, row, col)) for row in rows], exp, prec)
        out.extend([sums[p] for p in which])
    return out


def _velocity(a: Track, R: Track, lmax: int, k: int, m: int, da: int, prec: int) -> list:
    """``v[q][j] = -fdot(a_j^[0..lmax], R_jq^[k..k-lmax])`` (raw)."""
    check_span([(a.lo[l], a.hi[l], R.lo[k - l], R.hi[k - l]) for l in range(lmax + 1)], prec)
    exp = a.exp_at(0) + R.exp_at(k)
    return [round_all(map(neg, convolutions(a.columns, R.columns[q * m:(q + 1) * m])), exp, prec) for q in range(da)]


def _project_velocity(v, held, Cm, prec, rnd) -> list:
    """Project the velocity ``v`` (raw mpf) off the held surfaces ``held = [(slot, normal, pinv_row)]``, appending
    each coefficient ``<pinv_row, v>`` (an mpf) to ``Cm[slot]``."""
    coefs = []
    for slot, _, row in held:
        coefs.append(mpf_sum([mpf_mul(r, vq) for r, vq in zip(row, v)], prec, rnd))
        Cm[slot].append(mp.make_mpf(coefs[-1]))
    for (_, normal, _), coef in zip(held, coefs):
        v = [mpf_sub(vq, mpf_mul(coef, nq, prec, rnd), prec, rnd) for vq, nq in zip(v, normal)]
    return v


def _taylor_reference(data: MPData, S, P, order: int, constraints, s0=None) -> Series:
    """:func:`taylor_coefficients` with mpf objects and ``mp.fdot`` throughout: the definition of its numbers, and
    the path for what the integer path does not reproduce (non-finite values, sums spanning more than ``2 prec``
    bits)."""
    n, m, da = data.n, len(P), data.da
    d = da - 1
    Xa, normals = data.Xa, data.normals
    columns = [[x[q] for x in Xa] for q in range(da)]
    n_slots = sum(len(c) for c in constraints)
    C = [[list(row) for row in P]]
    # every sum below is an mp.fdot over flat lists (several times faster than summing mpf products)
    Z, U, UT, F, G, A0, A1, A2, R, outer = [], [], [], [], [], [], [], [], [], []
    Cm = [[] for _ in range(n_slots)]
    zero = mpf(0)
    for k in range(order):
        Ck = C[k]
        outer.append([Ck[j][da] for j in range(m)])
        Z.append([[mp.fdot(Ck[j][:da], x) for j in range(m)] for x in Xa])
        U.append([[s_ij * z_ij for s_ij, z_ij in zip(S[i], Z[k][i])] for i in range(n)])
        UT.append([[U[k][i][j] for i in range(n)] for j in range(m)])
        lmax = k if data.train_outer else 0
        # f_i^[k] = sum_l sum_j a_j^[l] s_ij z_ij^[k-l]
        a_flat = [a for l in range(lmax + 1) for a in outer[l]]
        F.append([mp.fdot(a_flat, [u for l in range(lmax + 1) for u in U[k - l][i]]) for i in range(n)])
        _loss_derivative_order(data, F, k, G, A0, A1, A2, s0)
        # R_j^[k] = sum_i s_ij G_i^[k] Xa_i
        Rk = []
        for j in range(m):
            sg = [S[i][j] * G[k][i] for i in range(n)]
            Rk.append([mp.fdot(sg, col) for col in columns])
        R.append(Rk)
        g_flat = [g for l in range(k + 1) for g in G[l]] if data.train_outer else None
        nxt = []
        for j in range(m):
            a_hist = [outer[l][j] for l in range(lmax + 1)]
            v = [-mp.fdot(a_hist, [R[k - l][j][q] for l in range(lmax + 1)]) for q in range(da)]
            if not data.bias:
                v[d] = zero
            coefs = []
            for slot, _, row in constraints[j]:
                coefs.append(mp.fdot(row, v))
                Cm[slot].append(coefs[-1])
            for (_, i, _), coef in zip(constraints[j], coefs):
                v = [vq - coef * nq for vq, nq in zip(v, normals[i])]
            if data.decay:
                v = [vq - data.decay * cq for vq, cq in zip(v, Ck[j])]
            row = [vq / (k + 1) for vq in v]
            if data.train_outer:
                # a_j' = -sum_l sum_i G_i^[l] s_ij z_ij^[k-l] (- decay a_j^[k])
                outer_v = -mp.fdot(g_flat, [u for l in range(k + 1) for u in UT[k - l][j]])
                if data.decay:
                    outer_v -= data.decay * Ck[j][da]
                row.append(outer_v / (k + 1))
            else:
                row.append(zero)
            nxt.append(row)
        C.append(nxt)
    Z.append([[mp.fdot(C[order][j][:da], x) for j in range(m)] for x in Xa])
    return Series.of_mpf(C=C, Z=Z, G=G, Cm=Cm, F=F)



def rounded_convolution(a, g, lmax: int) -> list:
    """``[mp.fsum(a[l] * g[k - l] for l in range(min(k, lmax) + 1)) for k in range(len(g))]`` (mpf lists; each
    product rounded, each sum exact and rounded once), on raw mpf."""
    prec, rnd = mp._prec_rounding
    product = arithmetic(rnd)[0]
    a = [x._mpf_ for x in a[:lmax + 1]]
    g = [x._mpf_ for x in g]
    make = mp.make_mpf
    return [make(mpf_sum([product(a[l], g[k - l], prec) for l in range(min(k, lmax) + 1)], prec, rnd))
            for k in range(len(g))]


def _horner_raw(coefs, tau, prec, rnd):
    """``sum_k coefs[k] tau^k`` over raw mpf, rounded at each step as mpf arithmetic is. Exact zeros at the top
    (for a finite ``tau``) keep the sum at 0, so the steps over them are left out."""
    acc = coefs[-1]
    if acc == fzero and len(coefs) > 1 and (tau[1] or not tau[2]):
        top = len(coefs) - 1
        while top and coefs[top] == fzero:
            top -= 1
        coefs = coefs[:top + 1]
        acc = mpf_add(fzero, coefs[-1], prec, rnd)  # 0 * tau + c
    if rnd == ROUND_NEAREST:
        for c in reversed(coefs[:-1]):
            acc = mul_add(acc, tau, c, prec)
        return acc
    for c in reversed(coefs[:-1]):
        acc = mpf_add(mpf_mul(acc, tau, prec, rnd), c, prec, rnd)
    return acc


def horner(coefs, tau):
    """``sum_k coefs[k] tau^k`` for a list of mpf."""
    prec, rnd = mp._prec_rounding
    return mp.make_mpf(_horner_raw([c._mpf_ for c in coefs], mp.convert(tau)._mpf_, prec, rnd))


def state_at(C, tau) -> list:
    """The state polynomial ``sum_k C[k] tau^k``, as ``P[j][q]``."""
    return state_rows(state_raw(raw_orders(C), mp.convert(tau)._mpf_), len(C[0][0]))


def state_raw(orders, t) -> list:
    """The state polynomial at the raw ``t`` from its coefficients as :func:`raw_orders` gives them: the raw
    values, row by row, of :func:`state_at` (Horner's rule for each entry, :func:`_horner_raw`; with the rounding
    to nearest, all entries at once by :func:`flowlib.mp.fast.horner_all`, the same numbers without skipping the
    exact zeros at the top: over them the sum stays an exact 0)."""
    prec, rnd = mp._prec_rounding
    if rnd == ROUND_NEAREST:
        return horner_all(orders, t, prec)
    return [_horner_raw(list(column), t, prec, rnd) for column in zip(*orders)]


def state_rows(values, width: int) -> list:
    """The raw values of :func:`state_raw` as the rows ``P[j][q]`` of mpf, ``width`` to a row."""
    made = wrap_all(values)
    return [made[p:p + width] for p in range(0, len(made), width)]


def _moving_entries(orders) -> list:
    """The rows ``orders[1:]`` (raw, as :func:`raw_orders` gives them) keeping only the entries (``(j, q)``
    positions) that are not an exact 0 at every order: the others add exact zeros to every dot product of the
    derivative's coefficients."""
    rows = orders[1:]
    if not rows:
        return rows
    keep = [p for p, column in enumerate(zip(*rows)) if column.count(fzero) != len(column)]
    if len(keep) == len(rows[0]):
        return rows
    return [[row[p] for p in keep] for row in rows]


def _derivative_blocks(orders, h=None) -> list:
    """``D[k] = (k + 1) C[k + 1] h^k`` flattened, as :class:`~flowlib.mp.fast.Fixed` blocks (rounded as the mpf
    expression ``(k + 1) * c * h**k``; without ``h``, ``(k + 1) * c``), without the entries that are 0 at every
    order (:func:`_moving_entries`); ``orders`` are those of :func:`raw_orders`."""
    prec, rnd = mp._prec_rounding
    if rnd == ROUND_NEAREST:
        scale = times_all
    else:
        def scale(values, y, prec, then=None):
            out = [mpf_mul(x, y, prec, rnd) for x in values]
            return out if then is None else [mpf_mul(x, then, prec, rnd) for x in out]
    blocks = []
    for k, row in enumerate(_moving_entries(orders)):
        hk = None if h is None else mpf_pow_int(h._mpf_, k, prec, rnd)
        if row.count(fzero) == len(row) and (hk is None or hk[1] or not hk[2]):
            blocks.append(Fixed(row))  # 0 times a finite number is 0
            continue
        blocks.append(Fixed(scale(row, from_int(k + 1), prec, hk)))
    return blocks


def velocity_energy(C, h, raw=None) -> mpf:
    """``int_0^h |theta'(tau)|^2 dtau`` for the state polynomial (exact for the polynomial); ``raw`` is
    ``raw_orders(C)`` where the caller has it."""
    prec, rnd = mp._prec_rounding
    divide = div_int if rnd == ROUND_NEAREST else (lambda x, d, prec: mpf_div(x, from_int(d), prec, rnd))
    K = len(C) - 1
    D = _derivative_blocks(raw_orders(C) if raw is None else raw, h)
    nonzero = [k for k in range(K) if D[k].lo is not None or D[k].ints is None]  # the others' dots are exact 0
    products = dots([D[k] for k in nonzero])
    total = []
    for a, k in enumerate(nonzero):
        for b in range(a, len(nonzero)):
            l = nonzero[b]
            value = divide(products[a, b], k + l + 1, prec)
            total.append(value if k == l else mpf_mul_int(value, 2, prec, rnd))
    return mp.make_mpf(mpf_mul(mpf_sum(total, prec, rnd), h._mpf_, prec, rnd))


def velocity_energy_log(C, h, s0) -> mpf:
    """``int_0^h |P'(tau)|^2 e^-(s0 + tau) dtau`` (the log clock's ``int |theta'|^2 dt``), exact for the polynomial:
    ``sum_n q_n gamma(n + 1, h)`` with the lower incomplete gamma function by its series of positive terms
    ``gamma(n + 1, h) = h^(n+1) e^-h sum_j h^j / ((n + 1) ... (n + 1 + j))``. The part past ``tau = 50 + 2.4 dps``
    (below ``e^-50`` of the rest at working precision) is left out, as in the float64 kernel."""
    K = len(C) - 1
    span = min(h, 50 + mpf(24) / 10 * mp.dps)
    D = _derivative_blocks(raw_orders(C))
    total = []
    for n in range(2 * K - 1):
        q_n = mp.fsum(mp.make_mpf(dot(D[k], D[n - k])) for k in range(max(0, n - K + 1), min(n, K - 1) + 1))
        term, acc, j = mpf(1), mpf(0), 0
        while True:
            term /= n + 1 + j
            acc += term
            j += 1
            term *= span
            if term < mp.eps * acc:
                break
        total.append(q_n * acc * span ** (n + 1))
    return mp.fsum(total) * mp.exp(-span - s0)


def loss_at_state(data: MPData, P, log: bool = False) -> mpf:
    """The loss (``ln L`` when ``log``) at ``P`` with the pattern read from the state (``s = 1`` where ``z > 0``)."""
    Z = preactivations(data, P)
    S = [[mpf(1) if z > 0 else data.leak for z in row] for row in Z]
    value = loss_value(data, P, S)
    return mp.log(value) if log else value
