"""Gradient descent (full batch or mini-batch) at any precision: the mpmath twin of :mod:`flowlib.kernels.descent`.

Same layout, loss conventions, slopes, weight decay, mini-batch weights and flip log as the float64 kernel (see its
module docstring): one row ``(w_j, b_j, a_j)`` per neuron, ``sigma'(0) = selection``, a flip at iterate ``k`` when
the side of ``z_ij`` ("z > 0" against "z <= 0") differs from iterate ``k - 1``. Every number is an mpf at ``dps``
digits: the data, labels, step size, weight decay and initial state are converted exactly from their float64
values, the reduction factor is ``mpf(1) / n`` (a batch of ``|B|`` samples: ``mpf(1) / |B|`` for the mean,
``mpf(n) / |B|`` for the sum), and the arithmetic runs inside ``mp.workdps(dps)`` (the global precision is never
touched).
The state is kept as lists of raw mpf tuples, updated with the operations of mpf arithmetic on raw tuples
(:func:`flowlib.mp.fast.arithmetic`: same precision, same rounding, same order, so the same numbers), which saves
creating an mpf object per operation.

This module imports no numba (of :mod:`flowlib.kernels` only the plain constants of its status codes, which the
float64 kernel returns too); the public entry point is :func:`flowlib.gradient_descent` with ``dps=...``.
"""

from __future__ import annotations

from mpmath import mp, mpf
from mpmath.libmp import fone, fzero, mpf_sub

from flowlib.kernels import status as kstatus
from flowlib.mp.fast import arithmetic
from flowlib.running import StepInterrupted

LOSSES = ("exp", "logistic", "square")


def _positive(z) -> bool:
    """``z > 0`` for a finite raw mpf."""
    return bool(z[1]) and not z[0]


class MPDescent:
    """One gradient-descent run over mpmath numbers, advanced a chunk at a time by :meth:`advance`.

    Each step is ``theta <- theta - lr (g + lambda theta_trained)`` with ``g`` the full gradient, or the mini-batch
    gradient when :meth:`advance` is given the batches, and ``lambda = problem.weight_decay`` (no decay term is
    computed for 0).

    Parameters
    ----------
    problem : flowlib.Problem
        Read through its attributes ``X``, ``y``, ``loss``, ``reduction``, ``leak``, ``bias``, ``train_outer``,
        ``weight_decay``.
    P0 : array_like, shape (m, d + 2)
        Initial packed state ``(w_j, b_j, a_j)`` (float64; converted exactly).
    lr, selection : float
        Step size and ``sigma'(0)``, converted exactly from their float64 values.
    steps : int
        Index of the last iterate.
    dps : int
        Decimal digits of the arithmetic (at least 16, so that float64 inputs convert exactly).
    record_every : int
        Iterates with ``k % record_every == 0``, and the last one, are recorded.

    Attributes
    ----------
    k : int
        Index of the current iterate.
    P : list of list of mpf
        The current iterate.
    """

    def __init__(self, problem, P0, lr: float, selection: float, steps: int, dps: int, record_every: int = 1):
        if problem.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {problem.loss!r}")
        self.dps = int(dps)
        self.steps = int(steps)
        self.record_every = int(record_every)
        self.loss_name = problem.loss
        self.bias = bool(problem.bias)
        self.train_outer = bool(problem.train_outer)
        with mp.workdps(self.dps):
            self.Xa = [[mpf(float(v))._mpf_ for v in row] + [fone] for row in problem.X]
            self.y = [mpf(float(v)) for v in problem.y]
            self.c = mpf(1) / len(self.y) if problem.reduction == "mean" else mpf(1)
            self.batch_c = mpf(1) if problem.reduction == "mean" else mpf(len(self.y))
            self.weight_decay = mpf(float(problem.weight_decay))._mpf_
            self.leak = mpf(float(problem.leak))._mpf_
            self.selection = mpf(float(selection))._mpf_
            self.lr = mpf(float(lr))._mpf_
            self._P = [[mpf(float(v))._mpf_ for v in row] for row in P0]
            self.Z = self._preactivations()
        self.active = [[_positive(z) for z in row] for row in self.Z]
        self.decay = float(problem.weight_decay) != 0.0
        self.k = 0

    @property
    def P(self) -> list:
        """The current iterate (list of list of mpf)."""
        make = mp.make_mpf
        return [[make(v) for v in p] for p in self._P]

    # ----- the formulas (call inside mp.workdps) ------------------------------------------------------------
    # Raw mpf tuples and the operations of mpf arithmetic on them, at the same precision and rounding: the numbers
    # of the same formulas written with mpf objects (the iterates are the same bit for bit), without an object per
    # operation.
    def _preactivations(self) -> list:
        """``Z[i][j] = <P[j][:d + 1], Xa[i]>``, accumulated left to right (one rounding per operation)."""
        prec, rnd = mp._prec_rounding
        times, plus, _ = arithmetic(rnd)
        da = len(self.Xa[0])
        Z = []
        for x in self.Xa:
            row = []
            for p in self._P:
                acc = times(p[0], x[0], prec)
                for q in range(1, da):
                    acc = plus(acc, times(p[q], x[q], prec), prec)
                row.append(acc)
            Z.append(row)
        return Z

    def _outputs(self, samples=None) -> list:
        """``f_i = sum_j a_j sigma(z_ij)`` at the current iterate (``active`` holds ``z_ij > 0``), raw, for every
        sample or for the indices ``samples`` (in their order)."""
        prec, rnd = mp._prec_rounding
        times, plus, _ = arithmetic(rnd)
        leak, P = self.leak, self._P
        out = []
        rows = zip(self.Z, self.active) if samples is None else ((self.Z[i], self.active[i]) for i in samples)
        for row, up in rows:
            f = fzero
            for p, z, u in zip(P, row, up):
                f = plus(f, times(p[-1], z if u else times(leak, z, prec), prec), prec)
            out.append(f)
        return out

    def _loss_derivatives(self, F, c, Y) -> list:
        """``G_i = c l'(f_i)`` (raw) for the outputs ``F`` (raw) and labels ``Y``."""
        F = [mp.make_mpf(f) for f in F]
        if self.loss_name == "square":
            return [(c * (f - t))._mpf_ for f, t in zip(F, Y)]
        if self.loss_name == "exp":
            return [(-c * t * mp.exp(-t * f))._mpf_ for f, t in zip(F, Y)]
        return [(-c * t / (1 + mp.exp(t * f)))._mpf_ for f, t in zip(F, Y)]

    def loss(self):
        """``L = c sum_i l(f_i, y_i) + lambda/2 |theta_trained|^2`` at the current iterate (an mpf at the run's
        precision; the squares summed row by row: ``w_j``, then ``b_j`` with bias, then ``a_j`` if trained)."""
        with mp.workdps(self.dps):
            total = mpf(0)
            for f, t in zip(self._outputs(), self.y):
                f = mp.make_mpf(f)
                if self.loss_name == "square":
                    total += (f - t) ** 2 / 2
                elif self.loss_name == "exp":
                    total += mp.exp(-t * f)
                else:
                    total += mp.log1p(mp.exp(-t * f))
            total = self.c * total
            if self.decay:
                d = len(self.Xa[0]) - 1
                trained = list(range(d)) + ([d] if self.bias else []) + ([d + 1] if self.train_outer else [])
                squares = mpf(0)
                for p in self.P:
                    for q in trained:
                        squares += p[q] * p[q]
                total += mp.make_mpf(self.weight_decay) * squares / 2
            return total

    def _step(self, batch=None) -> None:
        """One step ``theta <- theta - lr (g + lambda theta_trained)``, ``g`` the full gradient (``batch=None``) or
        that of the samples of ``batch`` (a list of indices, summed in its order); leaves ``Z`` at the new
        iterate."""
        prec, rnd = mp._prec_rounding
        times, plus, _ = arithmetic(rnd)
        if batch is None:
            samples = range(len(self.Xa))
            G = self._loss_derivatives(self._outputs(), self.c, self.y)
        else:
            samples = batch
            G = self._loss_derivatives(self._outputs(batch), self.batch_c / len(batch), [self.y[i] for i in batch])
        leak, selection, lr, Xa, decay = self.leak, self.selection, self.lr, self.Xa, self.weight_decay
        da = len(Xa[0])
        for j, p in enumerate(self._P):
            gw = [fzero] * da
            ga = fzero
            for t, i in enumerate(samples):
                x = Xa[i]
                z = self.Z[i][j]
                if self.active[i][j]:
                    g = G[t]
                    ga = plus(ga, times(g, z, prec), prec)
                elif z != fzero:  # z < 0
                    g = times(G[t], leak, prec)
                    ga = plus(ga, times(g, z, prec), prec)
                else:  # z == 0 exactly
                    g = times(G[t], selection, prec)
                for q in range(da):
                    gw[q] = plus(gw[q], times(g, x[q], prec), prec)
            a = p[-1]
            for q in range(da - 1 if not self.bias else da):
                step = times(a, gw[q], prec)
                if self.decay:
                    step = plus(step, times(decay, p[q], prec), prec)
                p[q] = mpf_sub(p[q], times(lr, step, prec), prec, rnd)
            if self.train_outer:
                if self.decay:
                    ga = plus(ga, times(decay, a, prec), prec)
                p[-1] = mpf_sub(a, times(lr, ga, prec), prec, rnd)
        self.Z = self._preactivations()

    # ----- driving ------------------------------------------------------------------------------------------
    def advance(self, max_steps: int, max_events: int, interrupt: dict | None = None, batches=None):
        """Take up to ``max_steps`` steps (never past the last iterate).

        ``interrupt`` is the flag of :func:`flowlib.running.sigint_flag`: when given, each iterate runs with it
        armed, and Ctrl-C inside an iterate discards that iterate and ends the call (``RUNNING``, with the flag's
        ``"set"`` entry true). ``batches`` is ``None`` for full-batch steps, or a sequence of lists of sample
        indices: ``batches[s]`` is the mini-batch of the step from iterate ``k + s`` (``k`` the iterate on entry);
        it must cover the steps this call may take.

        Returns
        -------
        code : int
            The float64 kernel's codes (:mod:`flowlib.kernels.status`): ``SUCCESS`` (the last iterate reached),
            ``RUNNING`` (``max_steps`` taken, or Ctrl-C), ``EVENT_BUFFER_FULL`` (at least ``max_events`` flips
            logged in this call, checked after each whole iterate) or ``NONFINITE`` (the next iterate, or its loss,
            is not finite: the current iterate is kept).
        records : list of (int, list of list of mpf, mpf)
            ``(k, state, loss)`` of the iterates recorded during this call (copies).
        flips : list of (int, int, int, int)
            ``(k, neuron, sample, side)`` in iteration order.
        """
        records, flips = [], []
        start = self.k
        stop = min(self.steps, self.k + max_steps)
        with mp.workdps(self.dps):
            while self.k < stop:
                saved = self._snapshot(len(records), len(flips))
                batch = None if batches is None else batches[self.k - start]
                try:
                    if interrupt is not None:
                        interrupt["raise"] = True
                    finite = self._iterate(records, flips, batch)
                    if interrupt is not None:
                        interrupt["raise"] = False
                except StepInterrupted:
                    interrupt["raise"] = False
                    self._restore(saved, records, flips)
                    return kstatus.RUNNING, records, flips
                if not finite:
                    self._restore(saved, records, flips)
                    return kstatus.NONFINITE, records, flips
                if len(flips) >= max_events and self.k < self.steps:
                    return kstatus.EVENT_BUFFER_FULL, records, flips
        return (kstatus.SUCCESS if self.k == self.steps else kstatus.RUNNING), records, flips

    def rewind(self, k: int, state) -> None:
        """Make iterate ``k``, whose state (list of list of mpf) a record of :meth:`advance` holds, the current one
        (a stop rule met there: the iterates the call took after it are dropped)."""
        with mp.workdps(self.dps):
            self._P = [[mpf(v)._mpf_ for v in row] for row in state]
            self.Z = self._preactivations()
        self.active = [[_positive(z) for z in row] for row in self.Z]
        self.k = int(k)

    def _iterate(self, records: list, flips: list, batch=None) -> bool:
        """One iterate with its flips and record; False when the iterate or its recorded loss is not finite."""
        self._step(batch)
        if not all(man or not exp for p in self._P for _, man, exp, _ in p):
            return False
        self.k += 1
        for i, row in enumerate(self.Z):
            for j, z in enumerate(row):
                up = _positive(z)
                if up != self.active[i][j]:
                    self.active[i][j] = up
                    flips.append((self.k, j, i, 1 if up else -1))
        if self.k % self.record_every == 0 or self.k == self.steps:
            loss = self.loss()
            records.append((self.k, self.P, loss))
            if not loss < mp.inf:
                return False
        return True

    def _snapshot(self, n_records: int, n_flips: int) -> tuple:
        return [list(p) for p in self._P], self.Z, [list(row) for row in self.active], self.k, n_records, n_flips

    def _restore(self, saved: tuple, records: list, flips: list) -> None:
        """Back to the iterate of :meth:`_snapshot` (an iterate interrupted, or not finite, is discarded)."""
        self._P, self.Z, self.active, self.k, n_records, n_flips = saved
        del records[n_records:]
        del flips[n_flips:]
