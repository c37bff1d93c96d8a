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

import contextlib
import math
import time

import numpy as np

from flowlib.flow import kernel_network
from flowlib.kernels import bundles
from flowlib.kernels import descent as kdescent
from flowlib.kernels import status as kstatus
from flowlib.problem import Params, Problem
from flowlib.progress import check_callback, report
from flowlib.result import DescentResult, FlipLog, Status
from flowlib.running import check_budget, check_dps, check_problem_params, progress_bar, sigint_flag
from flowlib.statuses import at_iteration, ended, interrupted, status_of, used_up
from flowlib.until import Until, check_until

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
        self.problem, self.steps, self.record_every = problem, steps, record_every
        self.batches = batches
        self.net = kernel_network(problem)
        self.descent = bundles.descent(selection, lr, _batch_factor(problem))
        self.P = P
        self.active = np.empty((problem.n, P.shape[0]), dtype=np.bool_)
        kdescent.activation_sides(problem.augmented_inputs, P, self.active)
        self.k = 0
        self._record_cap = max(64, _CHUNK_RECORD_FLOATS // P.size)
        self._batch_cap = None if batches is None else max(1, _CHUNK_INDICES // batches.batch_size)
        self.advance(0, 1)  # compiles (or loads) the kernel now, so that wall_s excludes compilation

    def loss(self) -> float:
        return kdescent.objective(self.net, self.P)

    def state(self) -> np.ndarray:
        return self.P.copy()

    def chunk_limit(self, steps: int) -> int:
        limit = min(steps, self._record_cap * self.record_every)
        return limit if self._batch_cap is None else min(limit, self._batch_cap)

    def advance(self, max_steps: int, max_events: int, interrupt: dict | None = None):
        """Up to ``max_steps`` iterations; returns the kernel's code (:mod:`flowlib.kernels.status`), the records
        ``(iterations, states, losses)`` and the flips ``(iteration, neuron, sample, side)`` of the chunk."""
        m, w = self.P.shape
        records = bundles.iterate_log(max_steps // self.record_every + 2, m, w)
        flips = bundles.flip_log(max_events + self.problem.n * m)
        flat = offsets = None
        if self.batches is not None:
            flat, offsets = self.batches.take(self.k, min(max_steps, self.steps - self.k))
        code, self.k, r, e = kdescent.descend_chunk(self.net, self.descent, self.P, self.active, flat, offsets, self.k,
                                                    self.steps, max_steps, self.record_every, max_events, records,
                                                    flips)
        return code, tuple(column[:r] for column in records), tuple(column[:e] for column in flips)

    def rewind(self, k: int, state: np.ndarray) -> None:
        """Make iterate ``k`` (its recorded ``state``) the current one: a stop rule met there."""
        self.P[...] = state
        self.k = int(k)
        kdescent.activation_sides(self.problem.augmented_inputs, self.P, self.active)

    @staticmethod
    def precision():
        """The arithmetic context of the run's numbers (none for float64)."""
        return contextlib.nullcontext()


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

    def advance(self, max_steps: int, max_events: int, interrupt: dict | None = None):
        """As :meth:`_Float64Run.advance`, over mpf numbers (object arrays)."""
        batches = None
        if self.batches is not None:
            count = min(max_steps, self.run.steps - self.run.k)
            flat, offsets = self.batches.take(self.run.k, count)
            batches = [flat[offsets[s]:offsets[s + 1]].tolist() for s in range(count)]
        code, recs, flips = self.run.advance(max_steps, max_events, interrupt, batches)
        states = np.empty((len(recs), len(self.run.P), len(self.run.P[0])), dtype=object)
        for r, rec in enumerate(recs):
            states[r] = _object_array(rec[1])
        records = (np.array([r[0] for r in recs], dtype=np.int64), states,
                   np.array([r[2] for r in recs], dtype=object))
        columns = tuple(np.array([f[q] for f in flips], dtype=np.int64) for q in range(4))
        return code, records, columns

    def rewind(self, k: int, state: np.ndarray) -> None:
        """Make iterate ``k`` (its recorded ``state``) the current one: a stop rule met there."""
        self.run.rewind(k, state.tolist())

    def precision(self):
        """The arithmetic context of the run's numbers: ``mp.workdps(dps)``."""
        from mpmath import mp

        return mp.workdps(self.run.dps)


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


def _check_options(problem, params0, lr, steps, dps, record_every, selection, max_events, progress, callback,
                   until):
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
    max_events = check_budget(max_events, "max_events")
    check_callback(callback)
    check_until(until, params0.packed().shape)
    if not isinstance(progress, (bool, np.bool_)):
        raise ValueError(f"progress must be True or False, got {progress!r}")
    return lr, steps, dps, record_every, selection, max_events


def _check_batching(problem, batch_size, replacement, seed) -> tuple[int, bool, int]:
    """The mini-batch arguments of SGD, validated (``ValueError`` naming the argument)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or \
            not 1 <= batch_size <= problem.n:
        raise ValueError(f"batch_size must be an integer in [1, n] = [1, {problem.n}], got {batch_size!r}")
    if not isinstance(replacement, (bool, np.bool_)):
        raise ValueError(f"replacement must be True or False, got {replacement!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    return int(batch_size), bool(replacement), int(seed)


def _checked_run(problem, params0, lr, steps, dps, record_every, selection, max_events, until, progress, callback,
                 batching=None) -> DescentResult:
    """:func:`gradient_descent` (``batching`` ``None``) or :func:`stochastic_gradient_descent` (``batching`` the
    ``(batch_size, replacement, seed)`` of its batches): the arguments checked, the run's options, the run."""
    lr, steps, dps, record_every, selection, max_events = _check_options(
        problem, params0, lr, steps, dps, record_every, selection, max_events, progress, callback, until)
    options = {"record_every": record_every, "max_events": max_events}
    stream = None
    if batching is not None:
        batch_size, replacement, seed = _check_batching(problem, *batching)
        stream = _BatchStream(problem.n, batch_size, replacement, seed)
        options.update(method="sgd", batch_size=batch_size, replacement=replacement, seed=seed)
    return _descend(problem, params0, lr, steps, dps, record_every, selection, max_events, progress, callback,
                    stream, options, until)


def gradient_descent(problem: Problem, params0: Params, lr: float, steps: int, *, dps: int | None = None,
                     record_every: int = 1, selection: float | None = None, max_events: int = 1_000_000,
                     until: Until | None = None, progress: bool = False, callback=None) -> DescentResult:
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
    max_events : int
        Budget of logged flips (a flip is gradient descent's event); when used up the run stops with status
        ``"max_events"``.
    until : Until, optional
        Stop rule (:class:`flowlib.Until`), checked at every iterate as a member of :func:`flowlib.ensemble`
        checks it: status ``"reached"`` at the first iterate whose objective is below ``until.loss_below`` and
        that meets the linear condition, ``"deadline"`` at iterate ``until.deadline_iterations(lr)`` when the
        objective has not gone below ``until.loss_below`` by then. The result (iterate count, records, flips) ends
        at that iterate, which is always recorded; in float64 it is the same member's iterate, bit for bit.
        The objective is evaluated at every iterate then (a non-finite one ends the run ``"failed"``).
    progress : bool
        Show a tqdm progress bar (needs the ``progress`` extra).
    callback : callable, optional
        Called as ``callback(progress)`` with a :class:`flowlib.Progress` after every chunk of iterations; a true
        return value stops the run (``status="interrupted"``).

    Returns
    -------
    DescentResult
        With ``status`` ``"success"`` after ``steps`` iterations; otherwise ``"reached"`` or ``"deadline"`` (the
        stop rule), ``"interrupted"`` (Ctrl-C between chunks, or the callback), ``"max_events"`` or ``"failed"``
        (the next iterate would overflow; the last finite one is kept), with everything computed so far.

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
    return _checked_run(problem, params0, lr, steps, dps, record_every, selection, max_events, until, progress,
                        callback)


def stochastic_gradient_descent(problem: Problem, params0: Params, lr: float, steps: int, *, batch_size: int,
                                replacement: bool = False, seed: int = 0, dps: int | None = None,
                                record_every: int = 1, selection: float | None = None,
                                max_events: int = 1_000_000, until: Until | None = None, progress: bool = False,
                                callback=None) -> DescentResult:
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
    problem, params0, lr
        As for :func:`gradient_descent`: the problem, initial parameters that fit it, and the step size.
    steps : int
        Number of mini-batch updates, ``>= 0``.
    batch_size : int
        Samples per batch, in ``[1, n]``.
    replacement : bool
        Draw batches with replacement (default: without, by epochs).
    seed : int
        Seed (``>= 0``) of ``numpy.random.default_rng``.
    dps, record_every, selection, max_events, until, progress, callback
        As for :func:`gradient_descent` (the stop rule's loss is the full-batch objective).

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
    return _checked_run(problem, params0, lr, steps, dps, record_every, selection, max_events, until, progress,
                        callback, (batch_size, replacement, seed))


class _Rule:
    """The stop rule :class:`flowlib.Until` along one descent run, checked at every iterate exactly as
    :func:`flowlib.kernels.ensemble.descend_member` checks it, so that a float64 run alone and the same member of
    an ensemble stop at the same iterate.

    The run records every iterate while a rule is given (``record_every`` 1); :meth:`judge` scans a chunk's
    records, rewinds the run to the iterate where it stops, and keeps the records ``record_every`` asked for.
    At iterate ``k``, in this order: the objective has gone below ``loss_below`` (from ``k`` on), the rule is met
    (``REACHED``), the deadline has come without the objective below ``loss_below`` (``DEADLINE``).
    """

    def __init__(self, until: Until, shape: tuple[int, int], lr: float, steps: int, record_every: int):
        loss_below, coef, self.offset, self.tol = until.kernel_arguments(shape)
        self.use_loss, self.use_lin = not math.isnan(loss_below), self.tol >= 0.0
        self.loss_below = loss_below
        # the kernel sums <coef, P> + offset term by term, row by row; a zero coefficient adds nothing (the states
        # are finite), so the nonzero terms in that order give the same number
        self.terms = [(j, q, float(coef[j, q])) for j, q in zip(*np.nonzero(coef))]
        self.deadline = until.deadline_iterations(lr)
        self.steps, self.record_every = steps, record_every
        self.below = False

    def _functional(self, states: np.ndarray) -> np.ndarray:
        """``<coef, P> + offset`` of each state, each sum in the kernel's order (numpy's elementwise operations
        round as the kernel's scalar ones)."""
        acc = np.full(len(states), self.offset, dtype=states.dtype)
        for j, q, c in self.terms:
            acc = acc + c * states[:, j, q]
        return acc

    def scan(self, iterations: np.ndarray, states: np.ndarray, losses: np.ndarray) -> tuple[int, int] | None:
        """``(r, code)``: the record ``r`` of consecutive iterates where the run stops, with ``REACHED`` or
        ``DEADLINE``; ``None`` when it goes on."""
        first = 0
        if not self.below:
            hits = np.flatnonzero(losses < self.loss_below) if self.use_loss else np.zeros(1, np.int64)
            first = int(hits[0]) if len(hits) else len(iterations)
            if self.deadline >= 0:
                late = np.flatnonzero(iterations >= self.deadline)
                if len(late) and late[0] < first:
                    return int(late[0]), kstatus.DEADLINE
            if first == len(iterations):
                return None
            self.below = True
        if not (self.use_loss or self.use_lin):
            return None
        if not self.use_lin:
            return first, kstatus.REACHED
        hits = np.flatnonzero(np.abs(self._functional(states[first:])) <= self.tol)
        return (first + int(hits[0]), kstatus.REACHED) if len(hits) else None

    def judge(self, code: int, records: tuple, flips: tuple, run) -> tuple[int, tuple, tuple]:
        """The chunk's ``code``, records and flips after the rule: cut at the iterate where it stops (the run
        rewound there, ``REACHED`` or ``DEADLINE``), and the records thinned to ``record_every``."""
        iterations, states, losses = records
        with run.precision():
            found = self.scan(iterations, states, losses)
        keep = (iterations % self.record_every == 0) | (iterations == self.steps)
        if code == kstatus.NONFINITE and len(keep):
            keep[-1] = True  # the iterate the run ends at, whose loss the failure message reads
        if found is not None:
            r, code = found
            run.rewind(iterations[r], states[r])
            keep = keep[:r + 1]
            keep[r] = True  # the last iterate is always recorded
            flips = tuple(column[flips[0] <= iterations[r]] for column in flips)
        return code, (iterations[:len(keep)][keep], states[:len(keep)][keep], losses[:len(keep)][keep]), flips


def _descend(problem, params0, lr, steps, dps, record_every, selection, max_events, progress, callback, stream,
             options, until=None) -> DescentResult:
    """Drive a (stochastic) gradient-descent run chunk by chunk (arguments validated)."""
    P = params0.packed()
    rule = None if until is None else _Rule(until, P.shape, lr, steps, record_every)
    every = record_every if rule is None else 1
    if dps is None:
        run = _Float64Run(problem, P, lr, selection, steps, every, stream)
    else:
        run = _MPRun(problem, P, lr, selection, steps, every, dps, stream)
    if rule is not None:
        options = {**options, "until": until.to_dict()}
    iter_parts = [np.zeros(1, np.int64)]
    state_parts = [run.state()[None]]
    loss_parts = [np.array([run.loss()], dtype=object if dps else np.float64)]
    flip_parts = []
    n_flips = 0
    chunk = _FIRST_CHUNK_STEPS[run.kind]
    code = kstatus.SUCCESS if steps == 0 else kstatus.RUNNING
    if rule is not None:  # iterate 0
        no_flips = tuple(np.empty(0, np.int64) for _ in range(4))
        code, _, _ = rule.judge(code, (iter_parts[0], state_parts[0], loss_parts[0]), no_flips, run)
    stop = _descent_stop(code, False, 0, max_events, run, loss_parts[0])
    label = "gradient descent" if stream is None else "stochastic gradient descent"
    bar = progress_bar(progress, steps, label, unit="it")
    started = time.perf_counter()
    try:
        with sigint_flag() as interrupted:
            while stop is None:
                budget = min(_CHUNK_FLIPS, max_events - n_flips)
                tick = time.perf_counter()
                code, records, flips = run.advance(run.chunk_limit(chunk), budget, interrupted)
                elapsed = time.perf_counter() - tick
                if rule is not None:
                    code, records, flips = rule.judge(code, records, flips, run)
                it, st, lo = records
                if len(it):
                    iter_parts.append(it)
                    state_parts.append(st)
                    loss_parts.append(lo)
                if len(flips[0]):
                    flip_parts.append(flips)
                    n_flips += len(flips[0])
                if bar is not None:
                    bar.update(run.k - bar.n)
                stop_requested = report(callback, "descent", run.k, steps, run.k, n_flips)
                stop = _descent_stop(code, interrupted["set"] or stop_requested, n_flips, max_events, run, lo)
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
                         status=stop[0], message=stop[1], dps=dps, selection=float(selection), wall_s=wall,
                         options=options)


def _descent_stop(code: int, interrupted_now: bool, n_flips: int, max_events: int, run, losses) \
        -> tuple[Status, str] | None:
    """Why a descent run stops after a chunk that returned ``code`` (statuses of :mod:`flowlib.statuses`), or
    ``None``: a non-finite iterate, the last iterate, the stop rule, Ctrl-C or the callback, ``max_events``."""
    where = at_iteration(run.k)
    if code == kstatus.NONFINITE:
        return status_of(code)[0], _nonfinite_message(run, losses)
    if code == kstatus.SUCCESS:
        return Status.SUCCESS, f"reached iteration {run.k}"
    if code not in (kstatus.RUNNING, kstatus.EVENT_BUFFER_FULL):
        return ended(code, where)
    if interrupted_now:
        return interrupted(where)
    if n_flips >= max_events:
        return used_up("max_events", max_events, where)
    return None
