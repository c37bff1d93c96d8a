"""``gradient_descent`` and ``stochastic_gradient_descent``, in float64 (Numba) or at any precision (mpmath).

Python never loops over iterations in float64: it calls :func:`flowlib.kernels.descent.descend_chunk` for chunks
sized to take about 50 ms, collects the recorded iterates and the flip log, reports progress, and stops cleanly on
Ctrl-C (``status="interrupted"``, with everything computed so far). With ``dps=...`` the same iteration runs over
mpmath numbers (:mod:`flowlib.mp.descent`), driven the same way. Both minimise ``L + lambda/2 |theta_trained|^2``
with ``lambda = problem.weight_decay``. The mini-batches of a stochastic run are drawn here, in numpy, from one
generator, step by step in order (:class:`_BatchStream`), and handed to either backend a chunk at a time: the
float64 and the mpmath run of one seed see the very same batches, whatever the chunk sizes.
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
_CHUNK_INDICES = 1 << 22  # at most 32 MB of mini-batch indices per chunk


def _check_positive_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_real(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    return float(value)


def _batch_factor(problem: Problem) -> float:
    """``c_B |B|``: a mini-batch ``B`` weights each sample's loss derivative by ``1/|B|`` for the mean, ``n/|B|`` for
    the sum (the batch gradient then estimates the full one without bias)."""
    return 1.0 if problem.reduction == "mean" else float(problem.n)


class _BatchStream:
    """The mini-batches of a stochastic run, step after step, from ``numpy.random.default_rng(seed)``.

    Without replacement every epoch is a fresh ``rng.permutation(n)`` cut into consecutive batches of
    ``batch_size`` (the last one of an epoch smaller when ``batch_size`` does not divide ``n``); with replacement
    batch after batch is ``rng.integers(0, n, batch_size)``. The indices of a batch are then sorted: a batch is a
    (multi)set, its gradient terms are summed in increasing sample order (so ``batch_size = n`` without replacement
    is full-batch gradient descent, bit for bit). Batches are generated in order as they are asked for and kept
    until the run has taken them, so that the sequence never depends on how the run is cut into chunks, nor on a
    chunk that stopped early.

    Several epochs' permutations are drawn in one ``rng.permuted`` call and several batches with replacement in one
    ``rng.integers`` call: numpy draws these exactly as the one-at-a-time calls above (tests/test_sgd.py checks it
    against a loop of such calls).
    """

    def __init__(self, n: int, batch_size: int, replacement: bool, seed: int):
        self.n, self.batch_size, self.replacement = n, batch_size, replacement
        self.rng = np.random.default_rng(seed)
        self.first = 1  # the step that the first pending batch is for
        self.flat = np.empty(0, np.int64)
        self.offsets = np.zeros(1, np.int64)
        full, rest = divmod(n, batch_size)
        sizes = [batch_size] * full + ([rest] if rest else [])
        self._epoch_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def take(self, k: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """The batches of steps ``k + 1, ..., k + count`` as ``(flat, offsets)``: step ``k + s + 1`` uses
        ``flat[offsets[s]:offsets[s + 1]]`` (int64 arrays; those of steps up to ``k`` are dropped)."""
        used = k + 1 - self.first
        if used < 0 or used > len(self.offsets) - 1:
            raise RuntimeError(f"batches asked for step {k + 1}, the stream is at step {self.first}")
        if used:
            self.flat = self.flat[self.offsets[used]:]
            self.offsets = self.offsets[used:] - self.offsets[used]
            self.first = k + 1
        missing = count - (len(self.offsets) - 1)
        if missing > 0:
            flat, offsets = self._draw(missing)
            self.offsets = np.concatenate([self.offsets, offsets[1:] + self.offsets[-1]])
            self.flat = np.concatenate([self.flat, flat])
        return self.flat[:self.offsets[count]], self.offsets[:count + 1]

    def _draw(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """At least ``count`` new batches (whole epochs without replacement), each sorted."""
        n, size = self.n, self.batch_size
        if self.replacement:
            draws = np.sort(self.rng.integers(0, n, (count, size)), axis=1)
            return draws.ravel().astype(np.int64), np.arange(count + 1, dtype=np.int64) * size
        per_epoch = len(self._epoch_offsets) - 1
        epochs = -(-count // per_epoch)
        perms = self.rng.permuted(np.tile(np.arange(n, dtype=np.int64), (epochs, 1)), axis=1)
        full = (n // size) * size
        perms[:, :full] = np.sort(perms[:, :full].reshape(-1, size), axis=1).reshape(epochs, full)
        perms[:, full:] = np.sort(perms[:, full:], axis=1)
        offsets = (self._epoch_offsets[None, 1:] + n * np.arange(epochs, dtype=np.int64)[:, None]).ravel()
        return perms.ravel(), np.concatenate([[0], offsets]).astype(np.int64)


class _Float64Run:
    """The Numba backend: the state lives in float64 arrays the kernel updates in place."""

    kind = "float64"

    def __init__(self, problem: Problem, P: np.ndarray, lr: float, selection: float, steps: int,
                 record_every: int, batches: _BatchStream | None = None):
        self.problem, self.lr, self.selection, self.steps, self.record_every = (problem, lr, selection, steps,
                                                                                 record_every)
        self.batches = batches
        self.P = P
        self.active = np.empty((problem.n, P.shape[0]), dtype=np.bool_)
        kdescent.activation_sides(problem.augmented_inputs, P, self.active)
        self.k = 0
        self._record_cap = max(64, _CHUNK_RECORD_FLOATS // P.size)
        self._batch_cap = None if batches is None else max(1, _CHUNK_INDICES // batches.batch_size)
        self.advance(0, 1)  # compiles (or loads) the kernel now, so that wall_s excludes compilation

    def loss(self) -> float:
        p = self.problem
        return kdescent.objective(p.augmented_inputs, p.y, p.loss_code, p.scale, p.leak, p.bias, p.train_outer,
                                  p.weight_decay, self.P)

    def state(self) -> np.ndarray:
        return self.P.copy()

    def chunk_limit(self, steps: int) -> int:
        limit = min(steps, self._record_cap * self.record_every)
        return limit if self._batch_cap is None else min(limit, self._batch_cap)

    def advance(self, max_steps: int, max_flips: int, interrupt: dict | None = None):
        p = self.problem
        n, m = p.n, self.P.shape[0]
        cap = max_steps // self.record_every + 2
        out_iter, out_states, out_loss = np.empty(cap, np.int64), np.empty((cap,) + self.P.shape), np.empty(cap)
        size = max_flips + n * m
        f_iter, f_neuron, f_sample = np.empty(size, np.int64), np.empty(size, np.int64), np.empty(size, np.int64)
        f_side = np.empty(size, np.int8)
        flat = offsets = None
        if self.batches is not None:
            flat, offsets = self.batches.take(self.k, min(max_steps, self.steps - self.k))
        code, self.k, r, e = kdescent.descend_chunk(
            p.augmented_inputs, p.y, p.loss_code, p.scale, p.leak, self.selection, p.bias, p.train_outer, self.lr,
            p.weight_decay, _batch_factor(p), flat, offsets, self.P, self.active, self.k, self.steps, max_steps,
            self.record_every, max_flips, out_iter, out_states, out_loss, f_iter, f_neuron, f_sample, f_side)
        records = (out_iter[:r], out_states[:r], out_loss[:r])
        flips = (f_iter[:e], f_neuron[:e], f_sample[:e], f_side[:e])
        outcome = {kstatus.SUCCESS: "success", kstatus.RUNNING: "running", kstatus.EVENT_BUFFER_FULL: "running",
                   kstatus.NONFINITE: "nonfinite"}[code]
        return outcome, records, flips


class _MPRun:
    """The mpmath backend (:class:`flowlib.mp.descent.MPDescent`), repackaged as arrays of mpf objects."""

    kind = "mpmath"

    def __init__(self, problem: Problem, P: np.ndarray, lr: float, selection: float, steps: int,
                 record_every: int, dps: int, batches: _BatchStream | None = None):
        from flowlib.mp.descent import MPDescent

        self.run = MPDescent(problem, P.tolist(), lr, selection, steps, dps, record_every)
        self.batches = batches
        self._batch_cap = None if batches is None else max(1, _CHUNK_INDICES // batches.batch_size)

    @property
    def k(self) -> int:
        return self.run.k

    def loss(self):
        return self.run.loss()

    def state(self) -> np.ndarray:
        return _object_array(self.run.P)

    def chunk_limit(self, steps: int) -> int:
        return steps if self._batch_cap is None else min(steps, self._batch_cap)

    def advance(self, max_steps: int, max_flips: int, interrupt: dict | None = None):
        batches = None
        if self.batches is not None:
            count = min(max_steps, self.run.steps - self.run.k)
            flat, offsets = self.batches.take(self.run.k, count)
            batches = [flat[offsets[s]:offsets[s + 1]].tolist() for s in range(count)]
        code, recs, flips = self.run.advance(max_steps, max_flips, interrupt, batches)
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


def _check_options(problem, params0, lr, steps, dps, record_every, selection, max_flips, progress, callback):
    """The arguments gradient descent and SGD share, validated (``ValueError`` naming the argument)."""
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
    return lr, steps, dps, record_every, selection, max_flips


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
    stochastic_gradient_descent : the same with mini-batches.
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
    lr, steps, dps, record_every, selection, max_flips = _check_options(
        problem, params0, lr, steps, dps, record_every, selection, max_flips, progress, callback)
    return _descend(problem, params0, lr, steps, dps, record_every, selection, max_flips, progress, callback,
                    None, {"record_every": record_every, "max_flips": max_flips})


def stochastic_gradient_descent(problem: Problem, params0: Params, lr: float, steps: int, *, batch_size: int,
                                replacement: bool = False, seed: int = 0, dps: int | None = None,
                                record_every: int = 1, selection: float | None = None, max_flips: int = 1_000_000,
                                progress: bool = False, callback=None) -> DescentResult:
    """Mini-batch stochastic gradient descent ``theta_{k+1} = theta_k - lr (g_{B_k}(theta_k) + lambda theta_k)``.

    One step is one mini-batch update. ``g_B`` estimates the full gradient without bias: with the per-sample
    losses ``l_i``, it is ``(1/|B|) sum_{i in B} grad l_i`` for ``reduction="mean"`` and
    ``(n/|B|) sum_{i in B} grad l_i`` for ``reduction="sum"``; weight decay ``lambda = problem.weight_decay`` is
    added to the gradient of the trained parameters, as in :func:`gradient_descent` (and PyTorch's
    ``torch.optim.SGD(params, lr, weight_decay=lambda)``). The batches come from
    ``rng = numpy.random.default_rng(seed)``:

    * without replacement (random reshuffling): each epoch a fresh ``rng.permutation(n)`` is cut into consecutive
      batches of ``batch_size``; the last batch of an epoch is smaller when ``batch_size`` does not divide ``n``;
    * with replacement: batch after batch is ``rng.integers(0, n, batch_size)`` (a sample may repeat; each
      occurrence counts).

    The batch gradient sums its samples in increasing index order, so ``batch_size = n`` without replacement is
    :func:`gradient_descent` bit for bit. The indices are drawn in numpy and handed to the backend: a float64 run
    and an mpmath run (``dps=...``) of the same seed take the same batches. Recorded losses, the flip log (every
    sample, not only the batch's) and the time ``t = k lr`` at which :func:`flowlib.compare` sets iterate ``k``
    against the flow are those of :func:`gradient_descent`.

    Parameters
    ----------
    problem : Problem
    params0 : Params
        Initial parameters; must fit ``problem``.
    lr : float
        Step size, positive and finite.
    steps : int
        Number of mini-batch updates, ``>= 0``.
    batch_size : int
        Samples per batch, in ``[1, n]``.
    replacement : bool
        Draw batches with replacement (default: without, by epochs).
    seed : int
        Seed (``>= 0``) of ``numpy.random.default_rng``.
    dps, record_every, selection, max_flips, progress, callback
        As for :func:`gradient_descent`.

    Returns
    -------
    DescentResult
        As for :func:`gradient_descent`, with ``method == "sgd"`` and ``batch_size``, ``replacement`` and ``seed``
        (also in ``options``, saved with the result).

    Raises
    ------
    ValueError
        Naming the argument, for invalid input.

    See Also
    --------
    gradient_descent : the full-batch method.
    compare : a run against the gradient flow at ``t = k lr``.

    Examples
    --------
    >>> import flowlib as fl
    >>> prob = fl.Problem(X=[[1.0], [-1.0], [2.0]], y=[1.0, -1.0, 1.0], loss="logistic", bias=False,
    ...                   train_outer=True, weight_decay=1e-3)
    >>> p0 = fl.Params(W=[[0.5]], b=None, a=[0.5])
    >>> sgd = fl.stochastic_gradient_descent(prob, p0, lr=0.1, steps=300, batch_size=2, seed=1, record_every=100)
    >>> sgd.method, sgd.batch_size, sgd.replacement, sgd.iterations.tolist()
    ('sgd', 2, False, [0, 100, 200, 300])
    >>> bool(sgd.loss[-1] < sgd.loss[0])
    True
    >>> full = fl.stochastic_gradient_descent(prob, p0, lr=0.1, steps=300, batch_size=3)
    >>> bool((full.states == fl.gradient_descent(prob, p0, lr=0.1, steps=300).states).all())
    True
    """
    lr, steps, dps, record_every, selection, max_flips = _check_options(
        problem, params0, lr, steps, dps, record_every, selection, max_flips, progress, callback)
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or \
            not 1 <= batch_size <= problem.n:
        raise ValueError(f"batch_size must be an integer in [1, n] = [1, {problem.n}], got {batch_size!r}")
    if not isinstance(replacement, (bool, np.bool_)):
        raise ValueError(f"replacement must be True or False, got {replacement!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    batch_size, replacement, seed = int(batch_size), bool(replacement), int(seed)
    stream = _BatchStream(problem.n, batch_size, replacement, seed)
    options = {"record_every": record_every, "max_flips": max_flips, "method": "sgd", "batch_size": batch_size,
               "replacement": replacement, "seed": seed}
    return _descend(problem, params0, lr, steps, dps, record_every, selection, max_flips, progress, callback,
                    stream, options)


def _descend(problem, params0, lr, steps, dps, record_every, selection, max_flips, progress, callback, stream,
             options) -> DescentResult:
    """Drive a (stochastic) gradient-descent run chunk by chunk (arguments validated)."""
    P = params0.packed()
    if dps is None:
        run = _Float64Run(problem, P, lr, selection, steps, record_every, stream)
    else:
        run = _MPRun(problem, P, lr, selection, steps, record_every, dps, stream)
    iter_parts = [np.zeros(1, np.int64)]
    state_parts = [run.state()[None]]
    loss_parts = [np.array([run.loss()], dtype=object if dps else np.float64)]
    flip_parts = []
    n_flips = 0
    chunk = _FIRST_CHUNK_STEPS[run.kind]
    outcome, message = Status.SUCCESS, f"reached iteration {steps}"
    label = "gradient descent" if stream is None else "stochastic gradient descent"
    bar = progress_bar(progress, steps, label, unit="it")
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
                         options=options)
