"""``ensemble``: many trajectories in one call, in parallel with Numba or on a Dask cluster, streamed to disk.

The members are cut into chunks. A chunk runs the batch kernels of :mod:`flowlib.kernels.ensemble` (every member
computes exactly what the serial kernels compute), locally on a pool of threads (the kernels release the GIL) or as
one Dask task. Finished chunks are written to ``out`` (:mod:`flowlib.ensemble_store`) as they arrive. Ctrl-C sets
the kernels' stop flag: the members running stop within a gradient-descent iteration or a few flow steps, the chunk
in flight is dropped (its members ``"pending"``), and the same call resumes, recomputing them from the start.
"""

from __future__ import annotations

import math
import numbers
import os
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial

import numpy as np

from flowlib.ensemble_result import PENDING, EnsembleResult, empty_members, versions
from flowlib.ensemble_store import ChunkStore, chunk_bounds
from flowlib.kernels import status as kstatus
from flowlib.flow import (TIE_POLICIES, check_rtol, check_solution, initial_surfaces, kernel_bundles,
                          kernel_network, resolve_horizon)
from flowlib.problem import Params, Problem, as_real_array
from flowlib.progress import check_callback, report
from flowlib.running import check_budget, order_for, progress_bar, sigint_flag
from flowlib.until import Until, check_until

METHODS = ("flow", "gd")
#: The options of :func:`ensemble` that one method only takes (the others apply to both), with their defaults.
METHOD_OPTIONS = {
    "flow": {"t_end": None, "log_t_end": None, "clock": "auto", "rtol": None, "solution": "filippov", "tie": "stay",
             "max_steps": 1_000_000, "max_events": 100_000},
    "gd": {"lr": None, "steps": None},
}
#: Seconds between two looks at the Ctrl-C flag while chunks run.
_POLL_S = 0.05
#: Codes that a member with a non-finite state or loss must not keep (it is reported ``"failed"``).
_FINISHED_CODES = (kstatus.SUCCESS, kstatus.REACHED, kstatus.DEADLINE, kstatus.MAX_STEPS, kstatus.MAX_EVENTS)

__all__ = ["ensemble", "random_inits"]


@dataclass(frozen=True)
class _Job:
    """What one chunk needs, picklable for a Dask worker: the members' problems, initial states and settings."""

    method: str
    problems: tuple
    which: np.ndarray
    inits: np.ndarray
    settings: dict


def ensemble(problem, inits, method: str = "flow", *, t_end: float | None = None, log_t_end: float | None = None,
             clock: str | None = None, lr: float | None = None, steps: int | None = None, until: Until | None = None,
             rtol: float | None = None, solution: str | None = None, selection: float | None = None,
             tie: str | None = None, max_steps: int | None = None, max_events: int | None = None,
             chunk_size: int | None = None, workers: int | None = None, client=None, out=None,
             progress: bool = False, callback=None) -> EnsembleResult:
    """Run the gradient flow (or gradient descent) from many initialisations at once.

    Options that the chosen method does not take are refused (``ValueError`` naming the option and the method),
    never ignored:

    * flow only: ``t_end``, ``log_t_end``, ``clock``, ``rtol``, ``solution``, ``tie``, ``max_steps``,
      ``max_events``;
    * gradient descent only: ``lr``, ``steps``;
    * both: ``until``, ``selection``, ``chunk_size``, ``workers``, ``client``, ``out``, ``progress``, ``callback``.

    Parameters
    ----------
    problem : Problem or sequence of Problem
        One problem for all members, or one per member (same ``d``; members of equal problems run together).
    inits : array_like, shape (R, m, d + 2), or sequence of Params
        Initial parameters, packed as :meth:`Params.packed` (rows ``(w_j, b_j, a_j)``); see :func:`random_inits`.
        Real and finite; complex, boolean, string or object arrays, and integers that float64 cannot hold exactly,
        are refused.
    method : {"flow", "gd"}
        The exact flow (:func:`flowlib.gradient_flow`'s float64 engine) or float64 gradient descent
        (:func:`flowlib.gradient_descent`'s update rule).
    t_end, log_t_end, clock
        Horizon of the flow, as in :func:`flowlib.gradient_flow` (``clock`` defaults to ``"auto"``, which
        integrates in ``ln(1 + t)`` when ``t_end > 1e6``). Flow only.
    lr, steps : float, int
        Step size and largest number of iterations of gradient descent. Gradient descent only.
    until : Until, optional
        Stop rule (and failure deadline) applied to every member, as :func:`flowlib.gradient_flow` and
        :func:`flowlib.gradient_descent` apply it to a run alone (the same status, time and state, bit for bit).
    rtol, solution, tie
        As in :func:`flowlib.gradient_flow` (defaults ``1e-13``, ``"filippov"``, ``"stay"``). Flow only.
    selection : float, optional
        ``sigma'(0)`` in ``[leak, 1]``: the Caratheodory selection of the flow, GD's slope at 0 (default ``leak``).
    max_steps, max_events : int
        Budgets of each flow member (defaults 1,000,000 and 100,000). Flow only.
    chunk_size : int, optional
        Members per chunk (the unit of progress, of streaming to ``out`` and of a Dask task). Default: about 20
        chunks, at most 2000 members each.
    workers : int, optional
        Threads of a local run (default: the number of cores); the Numba kernels release the GIL.
    client : dask.distributed.Client or str, optional
        Run the chunks as tasks on this Dask cluster (or on the scheduler at this address); results are the same,
        bit for bit, as a local run. Needs the ``dask`` extra. On Ctrl-C the tasks not started are cancelled and
        the call returns; tasks already running on workers may finish in the background (their results are
        dropped).
    out : path, optional
        Folder to stream finished chunks to (locked against a second writer while the call runs); re-running the
        same call with the same folder resumes, verifying every chunk read back (a damaged one is computed again,
        with a ``UserWarning``). See :mod:`flowlib.ensemble_store`.
    progress : bool
        tqdm progress bar over members (``progress`` extra).
    callback : callable, optional
        Called as ``callback(progress)`` with a :class:`flowlib.Progress` after each chunk of members (``done``
        and ``total`` count members; ``steps`` and ``events`` are summed over the members computed); a true return
        value stops the run as Ctrl-C does.

    Returns
    -------
    EnsembleResult
        Summary arrays; ``complete`` is False when interrupted (the missing members are ``"pending"``). Ctrl-C
        returns within about a second: the members running are stopped and their chunk is dropped. A member whose
        state or loss is not finite is ``"failed"``.

    Raises
    ------
    ValueError
        Naming the argument, for invalid input; naming ``out`` for a folder that holds another ensemble, is
        written by another run, or was written by other versions of flowlib, numba or numpy.

    Examples
    --------
    >>> import flowlib as fl
    >>> from flowlib import examples
    >>> prob, _ = examples.gd_rate_network(1.0, 0.0, -1.0, 0.0)
    >>> inits = fl.random_inits(prob, m=2, count=8, scheme="he", a=[1.0, -1.0], bias=0.0, seed=6)
    >>> ens = fl.ensemble(prob, inits, "gd", lr=0.05, steps=2000)
    >>> ens.counts()
    {'success': 8}
    """
    started = time.perf_counter()
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    problems, which = _problems(problem)
    inits = _inits(inits, problems)
    if len(problems) == 1:
        which = np.zeros(len(inits), np.int64)
    elif len(which) != len(inits):
        raise ValueError(f"problem is a sequence of {len(which)} problems but inits has {len(inits)} members")
    check_until(until, inits.shape[1:])
    given = {"t_end": t_end, "log_t_end": log_t_end, "clock": clock, "rtol": rtol, "solution": solution,
             "tie": tie, "max_steps": max_steps, "max_events": max_events, "lr": lr, "steps": steps}
    options = _method_options(method, given)
    settings = _settings(method, problems, inits.shape[1:], until, selection, options)
    size = _chunk_size(chunk_size, len(inits))
    check_callback(callback)
    if workers is not None:
        workers = check_budget(workers, "workers")
    description = {"method": method, "problems": [p.to_dict() for p in problems],
                   "problem_index": None if len(problems) == 1 else which.tolist(),
                   "options": settings["options"], "chunk_size": size, "n_members": len(inits)}
    store = ChunkStore(out, description, inits) if out is not None else None
    try:
        members, complete = _run_chunks(method, problems, which, inits, settings, size, store, client, workers,
                                        progress, callback)
    finally:
        if store is not None:
            store.close()
    meta = {"versions": versions()}
    if store is not None:
        meta["fingerprint"] = store.fingerprint
    return EnsembleResult(method=method, problems=problems, problem_index=which, inits=inits,
                          options=settings["options"], wall_s=time.perf_counter() - started, complete=complete,
                          meta=meta, **members)


def _run_chunks(method, problems, which, inits, settings, size, store, client, workers, progress,
                callback) -> tuple[dict, bool]:
    """The member arrays (chunks of ``store`` read back, the others computed) and whether all were computed."""
    members = empty_members(len(inits), inits.shape[1:])
    bounds = chunk_bounds(len(inits), size)
    jobs, done = {}, 0
    for index, (lo, hi) in enumerate(bounds):
        arrays = store.read(index) if store is not None else None
        if arrays is None:
            jobs[index] = _Job(method, problems, which[lo:hi], inits[lo:hi], settings)
        else:
            _place(members, lo, arrays)
            done += hi - lo
    runner = _dask_runner(client) if client is not None else _local_runner(workers)
    bar = progress_bar(progress, len(inits), f"ensemble ({method})", unit="runs")
    if bar is not None:
        bar.update(done)
    try:
        with sigint_flag() as interrupted:
            for index, arrays in runner(jobs, interrupted):
                if arrays is None:  # stopped inside the chunk: its members stay pending
                    break
                lo, hi = bounds[index]
                _place(members, lo, arrays)
                if store is not None:
                    store.write(index, arrays)
                done += hi - lo
                if bar is not None:
                    bar.update(hi - lo)
                computed = members["status_code"] != PENDING
                stop = report(callback, "ensemble", done, len(inits), members["steps"][computed].sum(),
                              members["events"][computed].sum()) if callback is not None else False
                if interrupted["set"] or stop:
                    break
    finally:
        runner.close()
        if bar is not None:
            bar.close()
    return members, done == len(inits)


def random_inits(problem: Problem, m: int, count: int, *, scheme: str = "he", scale: float = 1.0, a=None,
                 bias: float | None = 0.0, seed=0, norm: str | None = None) -> np.ndarray:
    """``count`` random initialisations of an ``m``-neuron network, packed (shape ``(count, m, d + 2)``).

    This is flowlib's one random initialiser; :func:`flowlib.examples.balanced_init` is a thin wrapper of its
    ``scheme="balanced", norm="sphere"`` law.

    Parameters
    ----------
    problem : Problem
    m, count : int
    scheme : {"he", "normal", "balanced"}
        ``"he"``: ``w_j ~ N(0, 2/d I)`` (He et al.; seed 000's Section 6 draws ``N(0, 2)`` with ``d = 1``),
        ``a_j ~ N(0, 1/m)``, every draw times ``scale``. ``"normal"``: ``w_j ~ N(0, scale^2 I)``,
        ``a_j ~ N(0, scale^2)``. ``"balanced"``: each neuron balanced, ``a_j^2 = |w_j|^2 + b_j^2`` (the quantity
        ``a_j^2 - |w_j|^2 - b_j^2`` is conserved by the flow when ``a`` is trained: Wang & Pilanci, Lemma 1;
        Boursier & Flammarion, Lemma 1), with ``a_j = s_j |(w_j, b_j)|`` and a random sign ``s_j = +-1``; the size
        of ``(w_j, b_j)`` follows ``norm``.
    scale : float
        Multiplies every draw of ``"he"``; the standard deviation of ``"normal"``; the size of ``"balanced"``.
    a : array_like, optional
        Fixed outer weights (shape ``(m,)``, finite reals) instead of random ones (seed 000: ``(1, -1)``); the
        neurons are then not balanced.
    bias : float or None
        Value of every bias (default 0, finite); ``None`` draws biases like the weights. Ignored (the biases are 0)
        when ``problem.bias`` is false.
    seed : int or numpy.random.Generator
        An integer ``>= 0``, a ``Generator`` (or ``BitGenerator``/``SeedSequence``), or ``None`` (fresh entropy).
    norm : {"gaussian", "sphere"}, optional
        The norm law of ``scheme="balanced"`` (and only of it; default ``"gaussian"``):

        * ``"gaussian"``: ``w_j ~ N(0, scale^2 / d I)``, so that ``|w_j|`` is random with ``E |w_j|^2 = scale^2``
          (drawn biases ``b_j ~ N(0, scale^2 / d)`` too); ``a_j = s_j |(w_j, b_j)|``.
        * ``"sphere"``: ``|(w_j, b_j)| = scale`` exactly (to rounding), the direction uniform on the sphere:
          ``(w_j, b_j) = scale g_j / |g_j|`` with ``g_j ~ N(0, I)`` over the weights and the drawn biases (a fixed
          bias ``c`` is then set, and ``|w_j| = scale``); ``a_j = s_j hypot(scale, c)``, i.e. ``s_j scale`` with
          drawn or zero biases.

    Returns
    -------
    ndarray, shape (count, m, d + 2)
        Rows ``(w_j, b_j, a_j)`` (:meth:`Params.packed`; ``Params.unpacked(out[r], problem.bias)`` is member ``r``).

    Raises
    ------
    ValueError
        Naming the argument (``norm`` also when given with another scheme).

    Notes
    -----
    The draws are, in this order, from ``numpy.random.default_rng(seed)``: ``W`` (``normal``, shape
    ``(count, m, d)``), the biases if drawn (shape ``(count, m)``), then the outer weights if drawn (``"he"`` and
    ``"normal"``: ``normal``; ``"balanced"``: the signs, ``choice([-1.0, 1.0], size=(count, m))``). With
    ``norm="sphere"`` the first draw is ``g = standard_normal((count, m, k))`` instead, ``k = d + 1`` when the
    biases are drawn and ``d`` otherwise, then the signs.

    Examples
    --------
    >>> import numpy as np
    >>> import flowlib as fl
    >>> prob = fl.Problem([[1.0, 0.0], [0.0, 1.0]], [1.0, -1.0], bias=True, train_outer=True)
    >>> inits = fl.random_inits(prob, m=3, count=2, scheme="balanced", norm="sphere", scale=0.1, bias=None, seed=0)
    >>> inits.shape
    (2, 3, 4)
    >>> bool(np.allclose(np.linalg.norm(inits[:, :, :3], axis=2), 0.1))
    True
    >>> bool(np.allclose(inits[:, :, 3] ** 2, np.sum(inits[:, :, :3] ** 2, axis=2)))
    True
    """
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a flowlib.Problem, got {type(problem).__name__}")
    m, count = check_budget(m, "m"), check_budget(count, "count")
    if scheme not in ("he", "normal", "balanced"):
        raise ValueError(f"scheme must be 'he', 'normal' or 'balanced', got {scheme!r}")
    if norm is not None and scheme != "balanced":
        raise ValueError(f"norm is for scheme='balanced' only, got norm={norm!r} with scheme={scheme!r}")
    norm = "gaussian" if norm is None else norm
    if norm not in BALANCED_NORMS:
        raise ValueError(f"norm must be one of {BALANCED_NORMS}, got {norm!r}")
    _check_scale(scale)
    bias = _check_bias(bias)
    if a is not None:
        a = as_real_array(a, "a", None)
        if a.shape != (m,):
            raise ValueError(f"a must have shape ({m},), got {a.shape}")
    rng = np.random.default_rng(_check_seed(seed))
    d = problem.d
    if scheme == "balanced" and norm == "sphere":
        return _sphere_balanced(rng, count, m, d, scale, drawn_bias=problem.bias and bias is None,
                                fixed_bias=bias if problem.bias and bias is not None else 0.0, a=a)
    sd = {"he": scale * math.sqrt(2.0 / d), "normal": scale, "balanced": scale / math.sqrt(d)}[scheme]
    out = np.zeros((count, m, d + 2))
    out[:, :, :d] = rng.normal(0.0, sd, size=(count, m, d))
    if problem.bias:
        out[:, :, d] = rng.normal(0.0, sd, size=(count, m)) if bias is None else bias
    if a is not None:
        out[:, :, d + 1] = a
    elif scheme == "balanced":
        norms = np.linalg.norm(out[:, :, : d + (1 if problem.bias else 0)], axis=2)
        out[:, :, d + 1] = norms * rng.choice([-1.0, 1.0], size=(count, m))
    else:
        out[:, :, d + 1] = rng.normal(0.0, scale / math.sqrt(m) if scheme == "he" else sd, size=(count, m))
    return out


#: Norm laws of ``random_inits(..., scheme="balanced")``.
BALANCED_NORMS = ("gaussian", "sphere")


def _sphere_balanced(rng: np.random.Generator, count: int, m: int, d: int, scale: float, *, drawn_bias: bool,
                     fixed_bias: float = 0.0, a=None) -> np.ndarray:
    """The ``norm="sphere"`` law of :func:`random_inits` (its one implementation, also behind
    :func:`flowlib.examples.balanced_init`): packed ``(count, m, d + 2)``, arguments already checked."""
    k = d + 1 if drawn_bias else d
    g = rng.standard_normal((count, m, k))
    g *= scale / np.linalg.norm(g, axis=2, keepdims=True)
    out = np.zeros((count, m, d + 2))
    out[:, :, :k] = g
    if not drawn_bias:
        out[:, :, d] = fixed_bias
    if a is not None:
        out[:, :, d + 1] = a
    else:
        out[:, :, d + 1] = math.hypot(scale, fixed_bias) * rng.choice([-1.0, 1.0], size=(count, m))
    return out


def _check_scale(scale) -> float:
    """A positive finite real number, or ``ValueError`` naming scale."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0 or not math.isfinite(scale):
        raise ValueError(f"scale must be a positive number, got {scale!r}")
    return float(scale)


# ----- argument checks ------------------------------------------------------------------------------------------
def _problems(problem) -> tuple[tuple, np.ndarray]:
    """Distinct problems and each member's index into them."""
    if isinstance(problem, Problem):
        return (problem,), np.zeros(0, np.int64)
    try:
        items = list(problem)
    except TypeError:
        raise ValueError(f"problem must be a flowlib.Problem or a sequence of them, got {type(problem).__name__}")
    if not items or not all(isinstance(p, Problem) for p in items):
        raise ValueError("problem must be a flowlib.Problem or a non-empty sequence of them")
    if len({p.d for p in items}) != 1:
        raise ValueError("the problems of one ensemble must share the input dimension d")
    distinct, index, seen = [], [], {}
    for p in items:
        if id(p) not in seen:
            seen[id(p)] = len(distinct)
            distinct.append(p)
        index.append(seen[id(p)])
    return tuple(distinct), np.asarray(index, np.int64)


def _inits(inits, problems) -> np.ndarray:
    if isinstance(inits, Params):
        raise ValueError("inits must hold many initialisations: an array (R, m, d + 2) or a sequence of Params")
    if isinstance(inits, (list, tuple)) and inits and all(isinstance(p, Params) for p in inits):
        for p in inits:
            p.check_against(problems[0])
        inits = np.stack([p.packed() for p in inits])
    arr = as_real_array(inits, "inits", None)
    d = problems[0].d
    if arr.ndim != 3 or arr.shape[0] == 0 or arr.shape[1] == 0 or arr.shape[2] != d + 2:
        raise ValueError(f"inits must have shape (R, m, {d + 2}) (rows (w_j, b_j, a_j)), got {arr.shape}")
    for p in problems:
        if not p.bias and np.any(arr[:, :, d] != 0.0):
            raise ValueError("inits has nonzero biases but the problem has bias=False")
    return np.ascontiguousarray(arr)


def _check_seed(seed):
    """``seed`` for ``numpy.random.default_rng``: None, an integer >= 0, a Generator, BitGenerator or
    SeedSequence; ``ValueError`` naming seed otherwise."""
    if seed is None or isinstance(seed, (np.random.Generator, np.random.BitGenerator, np.random.SeedSequence)):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0 or a numpy.random.Generator, got {seed!r}")
    return int(seed)


def _check_bias(bias):
    """``None`` or a finite real number; ``ValueError`` naming bias otherwise."""
    if bias is None:
        return None
    if isinstance(bias, bool) or not isinstance(bias, numbers.Real) or not math.isfinite(bias):
        raise ValueError(f"bias must be None or a finite real number, got {bias!r}")
    return float(bias)


def _chunk_size(chunk_size, count: int) -> int:
    if chunk_size is None:
        return max(1, min(2000, math.ceil(count / 20)))
    return check_budget(chunk_size, "chunk_size")


def _method_options(method: str, given: dict) -> dict:
    """The options of ``method`` (those given, the others at their defaults); ``ValueError`` naming an option
    given that applies to the other method only."""
    for other, names in METHOD_OPTIONS.items():
        if other == method:
            continue
        for name in names:
            if given[name] is not None:
                raise ValueError(f"{name} applies to method={other!r} only (got {name}={given[name]!r} with "
                                 f"method={method!r})")
    return {name: default if given[name] is None else given[name] for name, default in METHOD_OPTIONS[method].items()}


def _settings(method, problems, shape, until, selection, given: dict) -> dict:
    """Checked options of the run: kernel arguments (``kernel``) and their JSON record (``options``); ``given``
    holds the options of ``method`` (:func:`_method_options`)."""
    # sigma'(0) must lie in [leak, 1] for every problem: check against the one with the largest leak
    solution, tie = given.get("solution", "filippov"), given.get("tie", "stay")
    selection = check_solution(max(problems, key=lambda p: p.leak), solution, selection, tie)
    rule = until if until is not None else Until()
    loss_below, coef, offset, lin_tol = rule.kernel_arguments(shape)
    options = {"method": method, "until": rule.to_dict(), "selection": selection}
    if method == "gd":
        lr = given["lr"]
        if isinstance(lr, bool) or not isinstance(lr, (int, float, np.floating)) or not (lr > 0 and math.isfinite(lr)):
            raise ValueError(f"lr must be a positive number, got {lr!r}")
        steps = check_budget(given["steps"], "steps")
        options.update(lr=float(lr), steps=steps)
        kernel = {"lr": float(lr), "selection": selection, "steps": steps,
                  "deadline_steps": rule.deadline_iterations(lr), "loss_below": loss_below, "coef": coef,
                  "offset": offset, "lin_tol": lin_tol}
        return {"kernel": kernel, "options": options}
    clock, t_end, u_end = resolve_horizon(given["t_end"], given["log_t_end"], given["clock"],
                                          max(p.weight_decay for p in problems))
    rtol = check_rtol(given["rtol"])
    log_clock = clock == "log"
    deadline = math.inf if rule.deadline is None else rule.deadline
    order = order_for(rtol)
    options.update(t_end=t_end, clock=clock, rtol=rtol, solution=solution, tie=tie,
                   max_steps=check_budget(given["max_steps"], "max_steps"),
                   max_events=check_budget(given["max_events"], "max_events"))
    kernel = {"order": order, "rtol": rtol, "caratheodory": solution == "caratheodory", "selection": selection,
              "tie": TIE_POLICIES[tie], "log_clock": log_clock, "u_end": u_end,
              "u_deadline": math.log1p(deadline) if log_clock else deadline, "max_steps": options["max_steps"],
              "max_events": options["max_events"], "loss_below": loss_below, "coef": coef, "offset": offset,
              "lin_tol": lin_tol}
    return {"kernel": kernel, "options": options}


# ----- computing chunks -----------------------------------------------------------------------------------------
def compute_chunk(job: _Job, pool=None, threads: int = 1, interrupted=None) -> dict | None:
    """The per-member arrays of one chunk (what a Dask task returns). With a thread ``pool`` the members are run in
    small slices on its threads (the kernels release the GIL); each member's numbers are the same either way.

    While the slices run, the calling thread looks at ``interrupted["set"]`` (Ctrl-C) every :data:`_POLL_S`
    seconds and, once it is set, sets the kernels' stop flag; the chunk is then ``None`` unless every member had
    already finished.
    """
    count, shape = len(job.inits), job.inits.shape[1:]
    members = empty_members(count, shape)
    stop = np.zeros(1, np.int64)
    tasks = []
    for index, problem in enumerate(job.problems):
        rows = np.flatnonzero(job.which == index) if len(job.problems) > 1 else np.arange(count)
        if not len(rows):
            continue
        step = len(rows) if pool is None else max(1, len(rows) // (8 * threads))
        run = partial(_run_group, job.method, problem, settings=job.settings["kernel"], stop=stop)
        tasks += [(rows[lo: lo + step], run) for lo in range(0, len(rows), step)]
    if pool is None:
        parts = [run(np.ascontiguousarray(job.inits[rows])) for rows, run in tasks]
    else:
        futures = [pool.submit(run, np.ascontiguousarray(job.inits[rows])) for rows, run in tasks]
        _wait(futures, stop, interrupted)
        parts = [future.result() for future in futures]
    for (rows, _), part in zip(tasks, parts):
        for name, values in part.items():
            members[name][rows] = values
    return None if np.any(members["status_code"] == PENDING) else members


def _wait(futures, stop, interrupted) -> None:
    """Wait for ``futures``, setting ``stop[0]`` once ``interrupted["set"]`` is (the kernels then return soon)."""
    pending = set(futures)
    while pending:
        _, pending = wait(pending, timeout=_POLL_S)
        if interrupted is not None and interrupted["set"]:
            stop[0] = 1


def _run_group(method, problem, P0, settings, stop) -> dict:
    """Members of one problem through the batch kernel of ``method``."""
    from flowlib.kernels import bundles, ensemble as kens

    k = settings
    count = len(P0)
    out_P, out_code = np.empty_like(P0), np.empty(count, np.int64)
    if method == "gd":
        out_steps, out_info = np.empty(count, np.int64), np.empty((count, 3))
        descent = bundles.descent(k["selection"], k["lr"], 1.0)  # full batch: batch_c is not used
        kens.descend_batch(kernel_network(problem), descent, P0, k["steps"], k["loss_below"], k["deadline_steps"],
                           k["coef"], k["offset"], k["lin_tol"], out_P, out_code, out_steps, out_info, stop)
        return _finished({"final": out_P, "loss": out_info[:, 0], "t": out_steps * k["lr"], "steps": out_steps,
                          "events": out_info[:, 1].astype(np.int64), "event_counts": np.zeros((count, 6), np.int64),
                          "status_code": out_code.astype(np.int16), "energy_residual": np.full(count, np.nan),
                          "inclusion_residual": np.full(count, np.nan)})
    net, method = kernel_bundles(problem, k["order"], k["rtol"], k["caratheodory"], k["selection"], k["tie"],
                                 k["log_clock"], plain=True)
    surfaces = [initial_surfaces(problem, P) for P in P0]
    active0 = np.ascontiguousarray(np.stack([s[0] for s in surfaces]))
    mode0 = np.ascontiguousarray(np.stack([s[1] for s in surfaces]))
    out_counts, out_info = np.empty((count, 6), np.int64), np.empty((count, 6))
    kens.flow_batch(net, method, P0, active0, mode0, k["u_end"], k["u_deadline"], k["max_steps"], k["max_events"],
                    k["loss_below"], k["coef"], k["offset"], k["lin_tol"], out_P, out_code, out_counts, out_info, stop)
    with np.errstate(over="ignore"):
        t = np.expm1(out_info[:, 0]) if k["log_clock"] else out_info[:, 0]
        loss = np.exp(out_info[:, 1]) if k["log_clock"] else out_info[:, 1]
        first = np.exp(out_info[:, 5]) if k["log_clock"] else out_info[:, 5]
    return _finished({"final": out_P, "loss": loss, "t": t, "steps": out_info[:, 2].astype(np.int64),
                      "events": out_counts.sum(axis=1), "event_counts": out_counts,
                      "status_code": out_code.astype(np.int16),
                      "energy_residual": _energy_residuals(first, loss, out_info[:, 3], out_info[:, 2]),
                      "inclusion_residual": out_info[:, 4].copy()})


def _energy_residuals(first, last, dissipated, steps) -> np.ndarray:
    """Per member, ``|L(0) - L(T) - int |theta'|^2 dt| / max(L(0), int |theta'|^2 dt)``, as
    :attr:`flowlib.FlowResult.energy_residual` (0 without a step; NaN where a term is not finite)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.maximum(first, dissipated)
        out = np.where(scale > 0, np.abs(first - last - dissipated) / scale, 0.0)
    out[steps == 0] = 0.0
    out[~(np.isfinite(first) & np.isfinite(last) & np.isfinite(dissipated))] = np.nan
    return out


def _finished(part: dict) -> dict:
    """``part`` with members stopped by the stop flag blanked (pending) and members whose final state or loss is
    not finite marked failed (``NONFINITE``) whatever code the kernel gave."""
    code = part["status_code"]
    stopped = code == PENDING
    if stopped.any():
        blank = empty_members(int(stopped.sum()), part["final"].shape[1:])
        for name, values in blank.items():
            part[name][stopped] = values
    finite = np.isfinite(part["loss"]) & np.all(np.isfinite(part["final"].reshape(len(code), -1)), axis=1)
    code[~finite & np.isin(code, _FINISHED_CODES)] = kstatus.NONFINITE
    return part


def _place(members: dict, lo: int, arrays: dict) -> None:
    for name, values in arrays.items():
        members[name][lo: lo + len(values)] = values


class _local_runner:
    """Chunks one after the other in this process, the members of a chunk in slices on a pool of threads."""

    def __init__(self, workers):
        self.threads = workers or os.cpu_count() or 1
        self.pool = ThreadPoolExecutor(max_workers=self.threads)

    def __call__(self, jobs: dict, interrupted: dict):
        for index, job in jobs.items():
            yield index, compute_chunk(job, self.pool, self.threads, interrupted)

    def close(self):
        self.pool.shutdown(cancel_futures=True)


class _dask_runner:
    """Chunks as tasks on a Dask cluster, yielded as they finish; pending tasks are cancelled on close."""

    def __init__(self, client):
        try:
            from dask.distributed import Client
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("client= needs dask.distributed: pip install 'flowlib[dask]'") from exc
        self._own = isinstance(client, str)
        if not self._own and not isinstance(client, Client):
            raise ValueError(f"client must be a dask.distributed.Client or a scheduler address, got {client!r}")
        self.client = Client(client) if self._own else client
        self._futures = {}

    def __call__(self, jobs: dict, interrupted: dict):
        """Finished chunks, as they finish; on Ctrl-C it stops (:meth:`close` cancels the rest)."""
        self._futures = {self.client.submit(compute_chunk, job, pure=False): index for index, job in jobs.items()}
        pending = list(self._futures)
        while pending and not interrupted["set"]:
            finished = [future for future in pending if future.done()]
            for future in finished:
                pending.remove(future)
                yield self._futures[future], future.result()
            if not finished:
                time.sleep(_POLL_S)

    def close(self):
        pending = [f for f in self._futures if not f.done()]
        if pending:
            self.client.cancel(pending)
        if self._own:
            self.client.close()

