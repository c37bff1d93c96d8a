"""``gradient_descent``: full-batch gradient descent in float64 (Numba) or at any precision (mpmath).

Python never loops over iterations in float64: it calls :func:`flowlib.kernels.descent.descend_chunk` for chunks
sized to take about 50 ms, collects the recorded iterates and the flip log, reports progress, and stops cleanly on
Ctrl-C (``status="interrupted"``, with everything computed so far). With ``dps=...`` the same iteration runs over
mpmath numbers (:mod:`flowlib.mp.descent`), driven the same way. The run minimises ``L + lambda/2 |theta_trained|^2``
with ``lambda = problem.weight_decay``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from flowlib.kernels import descent as kdescent
from flowlib.kernels import status as kstatus
from flowlib.problem import Params, Problem
from flowlib.result import DescentResult, FlipLog, Status
from flowlib.running import check_budget, check_dps, check_problem_params, progress_bar, sigint_flag

_CHUNK_SECONDS = 0.05
_FIRST_CHUNK_STEPS = {"float64": 1024, "mpmath": 4}
_MAX_CHUNK_STEPS = 1 << 22
_CHUNK_RECORD_FLOATS = 1 << 21  # at most 16 MB of recorded states per float64 chunk
_CHUNK_FLIPS = 1 << 16


def _check_positive_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_real(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    return float(value)


class _Float64Run:
    """The Numba backend: the state lives in float64 arrays the kernel updates in place."""

    kind = "float64"

    def __init__(self, problem: Problem, P: np.ndarray, lr: float, selection: float, steps: int,
                 record_every: int):
        self.problem, self.lr, self.selection, self.steps, self.record_every = (problem, lr, selection, steps,
                                                                                 record_every)
        self.P = P
        self.active = np.empty((problem.n, P.shape[0]), dtype=np.bool_)
        kdescent.activation_sides(problem.augmented_inputs, P, self.active)
        self.k = 0
        self._record_cap = max(64, _CHUNK_RECORD_FLOATS // P.size)
        self.advance(0, 1)  # compiles (or loads) the kernel now, so that wall_s excludes compilation

    def loss(self) -> float:
        p = self.problem
        return kdescent.objective(p.augmented_inputs, p.y, p.loss_code, p.scale, p.leak, p.bias, p.train_outer,
                                  p.weight_decay, self.P)

    def state(self) -> np.ndarray:
        return self.P.copy()

    def chunk_limit(self, steps: int) -> int:
        return min(steps, self._record_cap * self.record_every)

    def advance(self, max_steps: int, max_flips: int, interrupt: dict | None = None):
        p = self.problem
        n, m = p.n, self.P.shape[0]
        cap = max_steps // self.record_every + 2
        out_iter, out_states, out_loss = np.empty(cap, np.int64), np.empty((cap,) + self.P.shape), np.empty(cap)
        size = max_flips + n * m
        f_iter, f_neuron, f_sample = np.empty(size, np.int64), np.empty(size, np.int64), np.empty(size, np.int64)
        f_side = np.empty(size, np.int8)
        code, self.k, r, e = kdescent.descend_chunk(
            p.augmented_inputs, p.y, p.loss_code, p.scale, p.leak, self.selection, p.bias, p.train_outer, self.lr,
            p.weight_decay, 1.0, None, None, self.P, self.active, self.k, self.steps, max_steps, self.record_every,
            max_flips, out_iter, out_states, out_loss, f_iter, f_neuron, f_sample, f_side)
        records = (out_iter[:r], out_states[:r], out_loss[:r])
        flips = (f_iter[:e], f_neuron[:e], f_sample[:e], f_side[:e])
        outcome = {kstatus.SUCCESS: "success", kstatus.RUNNING: "running", kstatus.EVENT_BUFFER_FULL: "running",
                   kstatus.NONFINITE: "nonfinite"}[code]
        return outcome, records, flips


class _MPRun:
    """The mpmath backend (:class:`flowlib.mp.descent.MPDescent`), repackaged as arrays of mpf objects."""

    kind = "mpmath"

    def __init__(self, problem: Problem, P: np.ndarray, lr: float, selection: float, steps: int,
                 record_every: int, dps: int):
        from flowlib.mp.descent import MPDescent

        self.run = MPDescent(problem, P.tolist(), lr, selection, steps, dps, record_every)

    @property
    def k(self) -> int:
        return self.run.k

    def loss(self):
        return self.run.loss()

    def state(self) -> np.ndarray:
        return _object_array(self.run.P)

    def chunk_limit(self, steps: int) -> int:
        return steps

    def advance(self, max_steps: int, max_flips: int, interrupt: dict | None = None):
        code, recs, flips = self.run.advance(max_steps, max_flips, interrupt)
        states = np.empty((len(recs), len(self.run.P), len(self.run.P[0])), dtype=object)
        for r, rec in enumerate(recs):
            states[r] = _object_array(rec[1])
        records = (np.array([r[0] for r in recs], dtype=np.int64), states,
                   np.array([r[2] for r in recs], dtype=object))
        columns = tuple(np.array([f[q] for f in flips], dtype=np.int64) for q in range(4))
        return ("running" if code == "flips_full" else code), records, columns


def _next_chunk(steps: int, elapsed: float) -> int:
    """Iterations of the next chunk after one of ``steps`` that took ``elapsed`` seconds: doubled while a chunk
    takes under ~25 ms, shrunk in proportion over ~100 ms, so that Ctrl-C and callbacks are served within ~0.1 s
    (chunk boundaries never change the iterates)."""
    if elapsed < 0.5 * _CHUNK_SECONDS:
        return min(2 * steps, _MAX_CHUNK_STEPS)
    if elapsed > 2.0 * _CHUNK_SECONDS:
        return max(1, int(steps * _CHUNK_SECONDS / elapsed))
    return steps


def _nonfinite_message(run, losses) -> str:
    """What became non-finite: the loss of the last recorded iterate (kept), or the next iterate (not taken)."""
    if len(losses) and not losses[-1] < math.inf:
        return f"the loss became non-finite (L = {losses[-1]}) at iteration {run.k} (divergence: try a smaller lr)"
    return f"iterate {run.k + 1} would not be finite (divergence: try a smaller lr); iterate {run.k} is the last"


def _object_array(rows) -> np.ndarray:
    out = np.empty((len(rows), len(rows[0])), dtype=object)
    for j, row in enumerate(rows):
        for q, v in enumerate(row):
            out[j, q] = v
    return out


def gradient_descent(problem: Problem, params0: Params, lr: float, steps: int, *, dps: int | None = None,
                     record_every: int = 1, selection: float | None = None, max_flips: int = 1_000_000,
                     progress: bool = False, callback=None) -> DescentResult:
    """Full-batch gradient descent ``theta_{k+1} = theta_k - lr (grad L(theta_k) + lambda theta_k)`` from
    ``params0``.

    The gradient is backpropagation's: ``sigma'(z) = 1`` for ``z > 0``, ``leak`` for ``z < 0`` and ``selection``
    at exactly ``z = 0``. Biases stay 0 without bias and ``a`` stays fixed unless ``problem.train_outer``. Weight
    decay ``lambda = problem.weight_decay`` adds ``lambda theta`` to the gradient of the trained parameters only
    (``W``; ``b`` with bias; ``a`` when ``train_outer``), as ``torch.optim.SGD(weight_decay=lambda)`` does; the
    losses reported are the objective ``L + lambda/2 |theta_trained|^2``. Every activation flip (iterate ``k`` at
    which ``z_ij = <w_j, x_i> + b_j`` changes side, ``z > 0`` against ``z <= 0``) is logged. Iterate ``k`` is the
    gradient-flow approximation at time ``t = k lr`` (docs/design.md, Gradient descent and the comparison with the
    flow); :func:`flowlib.compare` measures the distance.

    Parameters
    ----------
    problem : Problem
    params0 : Params
        Initial parameters; must fit ``problem``.
    lr : float
        Step size, positive and finite.
    steps : int
        Number of iterations, ``>= 0``.
    dps : int, optional
        Decimal digits (``>= 16``) for an mpmath run; ``None`` (default) runs the float64 Numba kernel. The
        inputs are converted exactly from their float64 values and the arithmetic runs under
        ``mpmath.mp.workdps(dps)`` (the global precision is untouched).
    record_every : int
        Record the state and loss at every iterate ``k`` with ``k % record_every == 0``; the last iterate is
        always recorded. The flip log is complete whatever this is. Memory: ``m (d + 2)`` numbers per record.
    selection : float, optional
        ``sigma'(0)`` in ``[leak, 1]``. Default ``leak`` (PyTorch's choice: 0 for ReLU).
    max_flips : int
        Budget of logged flips; when used up the run stops with status ``"max_events"``.
    progress : bool
        Show a tqdm progress bar (needs the ``progress`` extra).
    callback : callable, optional
        Called after every chunk as ``callback(k, n_flips)``; returning ``True`` stops the run
        (``status="interrupted"``).

    Returns
    -------
    DescentResult
        With ``status`` ``"success"`` after ``steps`` iterations; otherwise ``"interrupted"`` (Ctrl-C between
        chunks, or the callback), ``"max_events"`` or ``"failed"`` (the next iterate would overflow; the last finite
        one is kept), with everything computed so far.

    Raises
    ------
    ValueError
        Naming the argument, for invalid input.

    See Also
    --------
    gradient_flow : the limit ``lr -> 0`` at ``t = k lr``.
    compare, convergence_study : GD against the flow.

    Examples
    --------
    >>> import flowlib as fl
    >>> prob = fl.Problem(X=[[1.0], [-1.0]], y=[1.0, -1.0], loss="logistic", bias=False, train_outer=True)
    >>> gd = fl.gradient_descent(prob, fl.Params(W=[[0.5]], b=None, a=[0.5]), lr=0.1, steps=100, record_every=10)
    >>> gd.status, gd.steps, gd.iterations[-3:].tolist()
    (<Status.SUCCESS: 'success'>, 100, [80, 90, 100])
    >>> round(float(gd.loss[-1]), 6) < round(float(gd.loss[0]), 6)
    True
    """
    check_problem_params(problem, params0)
    lr = _check_real(lr, "lr")
    if not math.isfinite(lr) or lr <= 0.0:
        raise ValueError(f"lr must be positive and finite, got {lr!r}")
    steps = _check_positive_int(steps, "steps", 0)
    record_every = _check_positive_int(record_every, "record_every", 1)
    if dps is not None:
        dps = check_dps(dps)
    selection = problem.leak if selection is None else _check_real(selection, "selection")
    if not problem.leak <= selection <= 1.0:
        raise ValueError(f"selection must lie in [leak, 1] = [{problem.leak}, 1], got {selection!r}")
    max_flips = check_budget(max_flips, "max_flips")
    if callback is not None and not callable(callback):
        raise ValueError("callback must be callable")
    if not isinstance(progress, (bool, np.bool_)):
        raise ValueError(f"progress must be True or False, got {progress!r}")

    P = params0.packed()
    if dps is None:
        run = _Float64Run(problem, P, lr, selection, steps, record_every)
    else:
        run = _MPRun(problem, P, lr, selection, steps, record_every, dps)
    iter_parts = [np.zeros(1, np.int64)]
    state_parts = [run.state()[None]]
    loss_parts = [np.array([run.loss()], dtype=object if dps else np.float64)]
    flip_parts = []
    n_flips = 0
    chunk = _FIRST_CHUNK_STEPS[run.kind]
    outcome, message = Status.SUCCESS, f"reached iteration {steps}"
    bar = progress_bar(progress, steps, "gradient descent", unit="it")
    started = time.perf_counter()
    try:
        with sigint_flag() as interrupted:
            while run.k < steps:
                budget = min(_CHUNK_FLIPS, max_flips - n_flips)
                tick = time.perf_counter()
                code, (it, st, lo), flips = run.advance(run.chunk_limit(chunk), budget, interrupted)
                elapsed = time.perf_counter() - tick
                if len(it):
                    iter_parts.append(it)
                    state_parts.append(st)
                    loss_parts.append(lo)
                if len(flips[0]):
                    flip_parts.append(flips)
                    n_flips += len(flips[0])
                if bar is not None:
                    bar.update(run.k - bar.n)
                stop_requested = bool(callback(run.k, n_flips)) if callback is not None else False
                if code == "nonfinite":
                    outcome, message = Status.FAILED, _nonfinite_message(run, lo)
                    break
                if code == "success":
                    break
                if code == "interrupted" or interrupted["set"] or stop_requested:
                    outcome, message = Status.INTERRUPTED, f"interrupted at iteration {run.k}"
                    break
                if n_flips >= max_flips:
                    outcome, message = Status.MAX_EVENTS, f"max_flips = {max_flips} used up at iteration {run.k}"
                    break
                chunk = _next_chunk(chunk, elapsed)
    finally:
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - started

    if iter_parts[-1][-1] != run.k:  # stopped early: the current iterate is always recorded
        iter_parts.append(np.array([run.k], np.int64))
        state_parts.append(run.state()[None])
        loss_parts.append(np.array([run.loss()], dtype=loss_parts[0].dtype))
    columns = [np.concatenate([f[q] for f in flip_parts]) if flip_parts else np.empty(0, np.int64)
               for q in range(4)]
    flips = FlipLog(*columns)
    return DescentResult(problem=problem, lr=lr, steps=int(run.k), iterations=np.concatenate(iter_parts),
                         states=np.concatenate(state_parts), loss=np.concatenate(loss_parts), flips=flips,
                         status=outcome, message=message, dps=dps, selection=float(selection), wall_s=wall,
                         options={"record_every": record_every, "max_flips": max_flips})
