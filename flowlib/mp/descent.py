"""Full-batch gradient descent at any precision: the mpmath twin of :mod:`flowlib.kernels.descent`.

Same layout, loss conventions, slopes and flip log as the float64 kernel (see its module docstring): one row
``(w_j, b_j, a_j)`` per neuron, ``sigma'(0) = selection``, a flip at iterate ``k`` when the side of ``z_ij``
("z > 0" against "z <= 0") differs from iterate ``k - 1``. Every number is an mpf at ``dps`` digits: the data,
labels, step size and initial state are converted exactly from their float64 values, the reduction factor is
``mpf(1) / n``, and the arithmetic runs inside ``mp.workdps(dps)`` (the global precision is never touched).
Plain lists of mpf are used: for the small networks this is meant for they are faster than mpmath matrices.

This module imports neither numba nor :mod:`flowlib.kernels`; the public entry point is
:func:`flowlib.gradient_descent` with ``dps=...``.
"""

from __future__ import annotations

from mpmath import mp, mpf

from flowlib.running import StepInterrupted

RUNNING = "running"  #: the call's step budget was used up
SUCCESS = "success"  #: the last iterate was reached
FLIPS_FULL = "flips_full"  #: at least ``max_flips`` flips were logged in this call
INTERRUPTED = "interrupted"  #: Ctrl-C arrived inside an iterate (discarded)
NONFINITE = "nonfinite"  #: the next iterate or its loss is not finite (not taken)

LOSSES = ("exp", "logistic", "square")


class MPDescent:
    """One gradient-descent run over mpmath numbers, advanced a chunk at a time by :meth:`advance`.

    Parameters
    ----------
    problem : flowlib.Problem
        Read through its attributes ``X``, ``y``, ``loss``, ``reduction``, ``leak``, ``bias``, ``train_outer``.
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
            self.Xa = [[mpf(float(v)) for v in row] + [mpf(1)] for row in problem.X]
            self.y = [mpf(float(v)) for v in problem.y]
            self.c = mpf(1) / len(self.y) if problem.reduction == "mean" else mpf(1)
            self.leak = mpf(float(problem.leak))
            self.selection = mpf(float(selection))
            self.lr = mpf(float(lr))
            self.P = [[mpf(float(v)) for v in row] for row in P0]
            self.Z = self._preactivations()
        self.active = [[z > 0 for z in row] for row in self.Z]
        self.k = 0

    # ----- the formulas (call inside mp.workdps) ------------------------------------------------------------
    def _preactivations(self) -> list:
        """``Z[i][j] = <P[j][:d + 1], Xa[i]>``."""
        da = len(self.Xa[0])
        Z = []
        for x in self.Xa:
            row = []
            for p in self.P:
                acc = p[0] * x[0]
                for q in range(1, da):
                    acc += p[q] * x[q]
                row.append(acc)
            Z.append(row)
        return Z

    def _outputs(self) -> list:
        """``f_i = sum_j a_j sigma(z_ij)`` at the current iterate (``active`` holds ``z_ij > 0``)."""
        leak, P = self.leak, self.P
        out = []
        for row, up in zip(self.Z, self.active):
            f = mpf(0)
            for p, z, u in zip(P, row, up):
                f += p[-1] * (z if u else leak * z)
            out.append(f)
        return out

    def _loss_derivatives(self, F) -> list:
        """``G_i = c l'(f_i)``."""
        c = self.c
        if self.loss_name == "square":
            return [c * (f - t) for f, t in zip(F, self.y)]
        if self.loss_name == "exp":
            return [-c * t * mp.exp(-t * f) for f, t in zip(F, self.y)]
        return [-c * t / (1 + mp.exp(t * f)) for f, t in zip(F, self.y)]

    def loss(self):
        """``L = c sum_i l(f_i, y_i)`` at the current iterate (an mpf at the run's precision)."""
        with mp.workdps(self.dps):
            total = mpf(0)
            for f, t in zip(self._outputs(), self.y):
                if self.loss_name == "square":
                    total += (f - t) ** 2 / 2
                elif self.loss_name == "exp":
                    total += mp.exp(-t * f)
                else:
                    total += mp.log1p(mp.exp(-t * f))
            return self.c * total

    def _step(self) -> None:
        """One step ``theta <- theta - lr grad L(theta)``; leaves ``Z`` at the new iterate."""
        G = self._loss_derivatives(self._outputs())
        leak, selection, lr, Xa = self.leak, self.selection, self.lr, self.Xa
        da = len(Xa[0])
        zero = mpf(0)
        for j, p in enumerate(self.P):
            gw = [zero] * da
            ga = zero
            for i, x in enumerate(Xa):
                z = self.Z[i][j]
                if self.active[i][j]:
                    g = G[i]
                    ga += g * z
                elif z:  # z < 0
                    g = G[i] * leak
                    ga += g * z
                else:  # z == 0 exactly
                    g = G[i] * selection
                for q in range(da):
                    gw[q] += g * x[q]
            a = p[-1]
            for q in range(da - 1):
                p[q] -= lr * (a * gw[q])
            if self.bias:
                p[da - 1] -= lr * (a * gw[da - 1])
            if self.train_outer:
                p[-1] = a - lr * ga
        self.Z = self._preactivations()

    # ----- driving ------------------------------------------------------------------------------------------
    def advance(self, max_steps: int, max_flips: int, interrupt: dict | None = None):
        """Take up to ``max_steps`` steps (never past the last iterate).

        ``interrupt`` is the flag of :func:`flowlib.running.sigint_flag`: when given, each iterate runs with it
        armed, and Ctrl-C inside an iterate discards that iterate and ends the call with :data:`INTERRUPTED`.

        Returns
        -------
        code : str
            :data:`SUCCESS`, :data:`RUNNING`, :data:`FLIPS_FULL` (checked after each whole iterate),
            :data:`INTERRUPTED` or :data:`NONFINITE` (the next iterate, or its loss, is not finite: the current
            iterate is kept).
        records : list of (int, list of list of mpf, mpf)
            ``(k, state, loss)`` of the iterates recorded during this call (copies).
        flips : list of (int, int, int, int)
            ``(k, neuron, sample, side)`` in iteration order.
        """
        records, flips = [], []
        stop = min(self.steps, self.k + max_steps)
        with mp.workdps(self.dps):
            while self.k < stop:
                saved = self._snapshot(len(records), len(flips))
                try:
                    if interrupt is not None:
                        interrupt["raise"] = True
                    finite = self._iterate(records, flips)
                    if interrupt is not None:
                        interrupt["raise"] = False
                except StepInterrupted:
                    interrupt["raise"] = False
                    self._restore(saved, records, flips)
                    return INTERRUPTED, records, flips
                if not finite:
                    self._restore(saved, records, flips)
                    return NONFINITE, records, flips
                if len(flips) >= max_flips and self.k < self.steps:
                    return FLIPS_FULL, records, flips
        return (SUCCESS if self.k == self.steps else RUNNING), records, flips

    def _iterate(self, records: list, flips: list) -> bool:
        """One iterate with its flips and record; False when the iterate or its recorded loss is not finite."""
        self._step()
        if not all(mp.isfinite(v) for p in self.P for v in p):
            return False
        self.k += 1
        for i, row in enumerate(self.Z):
            for j, z in enumerate(row):
                up = z > 0
                if up != self.active[i][j]:
                    self.active[i][j] = up
                    flips.append((self.k, j, i, 1 if up else -1))
        if self.k % self.record_every == 0 or self.k == self.steps:
            loss = self.loss()
            records.append((self.k, [list(p) for p in self.P], loss))
            if not loss < mp.inf:
                return False
        return True

    def _snapshot(self, n_records: int, n_flips: int) -> tuple:
        return [list(p) for p in self.P], self.Z, [list(row) for row in self.active], self.k, n_records, n_flips

    def _restore(self, saved: tuple, records: list, flips: list) -> None:
        """Back to the iterate of :meth:`_snapshot` (an iterate interrupted, or not finite, is discarded)."""
        self.P, self.Z, self.active, self.k, n_records, n_flips = saved
        del records[n_records:]
        del flips[n_flips:]
