"""flowlib against its peers: SciPy ``solve_ivp``, heyoka.py and tiny-step gradient descent.

The benchmark designs B0-B7 of BENCHMARKS.md (except B5, width scaling: ``benchmarks/scaling.py``),
each on a problem with an exact answer:

========  ==============================================================================  ====================
case      problem                                                                         reference
========  ==============================================================================  ====================
B0-e1p1   E1 phase 1, t = 1.5 (one activation pattern)                                    closed form
B0-seed0  seed 000's network from (2, 3, -2, 3.1), t = 100 (smooth before its kinks)      closed form
B1-one    one leaky-ReLU crossing at ln 1.5, t = 5                                        closed form
B1-two    two crossings 2.5e-10 apart inside one natural step (``two_crossings``), t = 2  closed form
B1-os     orthogonally separable, n = 8, d = 3, m = 6, logistic, 9 crossings, t = 10     mpmath oracle
B1-wide   the same family, n = 16, d = 4, m = 12, 85 crossings, t = 10                    mpmath oracle
B1-wider  the same family, n = 32, d = 6, m = 24, 379 crossings, t = 10 (full run only)    mpmath oracle
B2-e1     E1: slides from t* = 1.5593, t = 10                                             closed form
B2-v10    V10: m = 400 (quick 40) neurons slide on two rays, t = 6                       mpmath flow
B3-twist  twisting oscillator (E3), Zeno at t_acc = 4.46142028660164, t = 10             closed form
B4-e4-m*  E4: seed 003's three points, m = 5, 50, 200 (quick 5, 50), t = 20             mpmath flow
B6-e1     GD at lr 1e-1 ... 1e-5, float64 and mpmath (30 digits), against the flow (E1)  closed form
B6-os     tiny-step GD reaching 1e-6 at t = 100 (os_logistic)                           mpmath oracle
B7-osc    nosnoc's oscillator (switching on a circle), t = pi/2                          closed form
B7-relay  relay feedback system (Piiroinen & Kuznetsov eq. 32), t = 10                   mpmath, event by event
B8-digits digits 0 vs 1, m = 50, exp loss, t = 20 (quick 2): the flow against GD at lr 2e-3 GD over the same t
B9-wide   Gaussian teacher, m = n = 500, d = 20, logistic: 60 s (quick 5 s) of flow vs GD   GD over the same t
========  ==============================================================================  ====================

B8 and B9 are event-dense (:mod:`benchmarks.event_dense`): one timed run each, the flow against float64 GD over the
flow time reached, with the cost per event in numpy gradient evaluations; they get a table of their own after the
others' and a list ``event_dense`` in ``bench.json``.

Every method runs on every case it applies to: flowlib (``gradient_flow``, or ``PiecewiseAffine`` for B3/B7),
SciPy DOP853 with event restarts and with the naive RHS, heyoka.py naive and with masks + terminal events (when
installed), and tiny-step GD at the step its final state needs for a relative error of 1e-6. Each run has a budget
(3e5 RHS evaluations or 60 s; quick mode 3e4 or 10 s) and gets a label from the failure taxonomy of
BENCHMARKS.md, computed against the reference:

``OK``            reached ``t_end`` with relative state error ``<= 1e-3``;
``SILENT-WRONG``  reached ``t_end`` (success status) with a larger error;
``STALL``         a budget (evaluations, seconds, events) ran out before ``t_end``;
``LIVELOCK``      100 or more consecutive events at one instant;
``ABORT``         the solver failed (error status, exception, non-finite state).

Timings: one warm-up run, then the best and median of repeats (``time.perf_counter``) for ``repeat_s`` seconds
(at least 3, at most ``max_repeats``: runs of tens of microseconds get hundreds of repeats, so that their best is
not one cold-cache call); a run longer than a second is timed once. Compilation is reported separately:
flowlib's :func:`flowlib.warmup` (Numba cache load or compile) and heyoka's construction (LLVM JIT) per case.
``python -m benchmarks [--quick] [--out DIR] [--cases IDS] [--no-heyoka]`` (from a checkout of the repository; also
``flowlib bench``) prints the table and writes ``DIR/bench.json``, ``DIR/bench.txt`` (the table) and ``DIR/bench.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

import flowlib as fl
from flowlib import examples
from benchmarks import event_dense
from benchmarks.peers import gd_peer, heyoka_peer, scipy_peer, stored
from tests.oracles import exact

__all__ = ["CASES", "LABELS", "Case", "Outcome", "Reference", "Row", "Settings", "assess", "case_rows", "guarded",
           "label", "main", "measure", "run_cases", "select_cases", "settings"]

LABELS = ("OK", "SILENT-WRONG", "STALL", "LIVELOCK", "ABORT")
#: relative state error above which a run that reached t_end is SILENT-WRONG
WRONG = 1e-3
#: consecutive events at one instant that make a LIVELOCK
LIVELOCK_EVENTS = 100
#: relative accuracy tiny-step GD is asked to reach (the benchmarks' acceptance target)
GD_TARGET = 1e-6
FLOWLIB = "flowlib"
SCIPY_RESTART = "scipy DOP853 restart"
SCIPY_NAIVE = "scipy DOP853 naive"
HEYOKA_NAIVE = "heyoka naive"
HEYOKA_EVENTS = "heyoka masks+events"
GD_TINY = "GD f64 @1e-6"


# =================================================================================================================
# settings, references, outcomes, rows
# =================================================================================================================

@dataclass(frozen=True)
class Settings:
    """Budgets and timing effort of one benchmark run.

    Attributes
    ----------
    quick : bool
        Smaller problems and budgets (CI smoke, ``--quick``).
    max_nfev : int
        RHS evaluations per peer run (full: 3e5).
    max_seconds : float
        Wall-clock seconds per peer run and per GD step search (full: 60 s).
    repeat_s : float
        Time spent on timed repeats of one method (after the warm-up run).
    max_repeats : int
    heyoka : bool
        Run the heyoka peers (installed and not switched off).
    """

    quick: bool
    max_nfev: int
    max_seconds: float
    repeat_s: float
    max_repeats: int
    heyoka: bool


def settings(quick: bool, heyoka: bool | None = None) -> Settings:
    """The full (BENCHMARKS.md budgets) or quick settings; ``heyoka=None`` runs heyoka when it is installed."""
    use_heyoka = heyoka_peer.available() if heyoka is None else heyoka
    if quick:
        return Settings(True, 30_000, 10.0, 0.2, 200, use_heyoka)
    return Settings(False, 300_000, 60.0, 1.0, 1000, use_heyoka)


@dataclass
class Reference:
    """The exact answer of a case.

    Attributes
    ----------
    final : ndarray
        Final state (packed ``(m, d + 2)`` for networks, ``(N,)`` for switched systems).
    events : list of tuple
        ``(t, key)`` in time order (the key is compared with the runs' event keys, see :attr:`Case.event_key`).
    source : str
        Where it comes from (closed form, mpmath oracle, mpmath flow ...).
    scale : float
        ``max |final|`` (errors are relative to it), or a given scale when the answer is 0.
    """

    final: np.ndarray
    events: list
    source: str
    scale: float = 0.0

    def __post_init__(self):
        self.final = np.asarray(self.final, dtype=np.float64)
        if not self.scale:
            self.scale = float(np.max(np.abs(self.final)))


@dataclass
class Outcome:
    """What one run produced, in the case's common layout.

    Attributes
    ----------
    final : ndarray
        State where the run stopped.
    t_reached : float
    events : list of tuple
        ``(t, surface, kind)``; peers' kinds are ``"flip"``.
    status : str
        ``"ok"``, or why the run stopped (``"livelock"``, ``"nfev_budget"``, ``"time_budget"``, ``"event_budget"``,
        ``"max_steps"``, ``"max_events"``, ``"failed: ..."``).
    nfev : int or None
        RHS evaluations (SciPy ``nfev``; heyoka steps x order; GD iterations).
    extra : dict
    timed_s : float or None
        The method's own timing of the work, when it excludes bookkeeping the wall clock would count (GD: its
        iterations, without the Python flip log built afterwards); ``None``: the wall clock is used.
    """

    final: np.ndarray
    t_reached: float
    events: list
    status: str
    nfev: int | None = None
    extra: dict = field(default_factory=dict)
    timed_s: float | None = None


@dataclass
class Case:
    """One benchmark problem and the methods run on it.

    Attributes
    ----------
    id : str
    bench : str
        ``"B0"`` ... ``"B7"``.
    title : str
    t_end : float
    reference : callable
        ``() -> Reference`` (lazy: some are stored or computed).
    methods : dict
        Method name -> ``prepare(settings) -> (runner, compile_s)``; ``runner() -> Outcome`` is what is timed.
    event_key : str
        How events are compared: ``"surface"`` (default), ``"kind"``, or ``"zeno"`` (only zeno events, by kind).
    """

    id: str
    bench: str
    title: str
    t_end: float
    reference: Callable[[], Reference]
    methods: dict
    event_key: str = "surface"


@dataclass
class Row:
    """One line of the table and of ``bench.json``.

    Attributes
    ----------
    case, bench, method : str
    time_s, median_s : float
        Best and median wall time per trajectory (compile excluded).
    repeats : int
    ratio : float or None
        ``time_s`` over flowlib's on the same case (> 1: flowlib is faster); a lower bound when the peer stopped
        on a budget.
    state_error : float
        ``max |x - x_ref| / scale`` where the run stopped.
    event_time_error : float or None
        ``max |t - t_ref| / max(1, t_ref)`` over the events that match the reference's in order.
    events_match : bool
        Same number and sequence of events as the reference.
    label : str
        One of :data:`LABELS`.
    status : str
    t_reached, t_end : float
    n_events : int
    nfev : int or None
    compile_s : float or None
    reference : str
    extra : dict
    """

    case: str
    bench: str
    method: str
    time_s: float
    median_s: float
    repeats: int
    ratio: float | None
    state_error: float
    event_time_error: float | None
    events_match: bool
    label: str
    status: str
    t_reached: float
    t_end: float
    n_events: int
    nfev: int | None
    compile_s: float | None
    reference: str
    extra: dict = field(default_factory=dict)


# =================================================================================================================
# labels and errors
# =================================================================================================================

def livelocked(times, count: int = LIVELOCK_EVENTS) -> bool:
    """``count`` consecutive event times within ``1e-9 max(1, |t|)`` of each other (the LIVELOCK label)."""
    times = np.asarray(times, dtype=np.float64)
    if len(times) < count:
        return False
    spans = times[count - 1:] - times[: len(times) - count + 1]
    return bool(np.any(spans <= 1e-9 * np.maximum(1.0, np.abs(times[count - 1:]))))


def state_error(outcome: Outcome, ref: Reference) -> float:
    """``max |x - x_ref| / scale`` (``inf`` for a non-finite or mis-shaped state)."""
    final = np.asarray(outcome.final, dtype=np.float64)
    if final.shape != ref.final.shape or not np.all(np.isfinite(final)):
        return math.inf
    return float(np.max(np.abs(final - ref.final)) / ref.scale)


def label(outcome: Outcome, ref: Reference, t_end: float) -> str:
    """The failure-taxonomy label of a run (BENCHMARKS.md), computed against the reference."""
    if outcome.status.startswith("failed") or not np.all(np.isfinite(np.asarray(outcome.final, float))):
        return "ABORT"
    if outcome.status == "livelock" or livelocked([e[0] for e in outcome.events]):
        return "LIVELOCK"
    if outcome.status != "ok" or outcome.t_reached < t_end * (1 - 1e-12):
        return "STALL"
    return "SILENT-WRONG" if state_error(outcome, ref) > WRONG else "OK"


def keyed_events(events, event_key: str) -> list:
    """``(t, key)`` pairs of a run's ``(t, surface, kind)`` events, as the case compares them."""
    if event_key == "kind":
        return [(t, kind) for t, _, kind in events]
    if event_key == "zeno":
        return [(t, kind) for t, _, kind in events if kind == "zeno"]
    return [(t, surface) for t, surface, _ in events]


def event_time_error(events: list, ref_events: list) -> tuple[float | None, bool]:
    """Largest ``|t - t_ref| / max(1, |t_ref|)`` over the events matching the reference in order, and whether
    the whole sequences match."""
    worst, matched = None, 0
    for (t, key), (t_ref, key_ref) in zip(events, ref_events):
        if key != key_ref:
            break
        err = abs(float(t) - float(t_ref)) / max(1.0, abs(float(t_ref)))
        worst = err if worst is None else max(worst, err)
        matched += 1
    return worst, matched == len(ref_events) == len(events)


# =================================================================================================================
# timing
# =================================================================================================================

def guarded(runner) -> Callable[[], Outcome]:
    """``runner`` with any exception turned into an ABORT outcome."""

    def call():
        try:
            return runner()
        except Exception as exc:  # a peer that raises is a peer that aborted
            return Outcome(np.array([np.nan]), math.nan, [], f"failed: {type(exc).__name__}: {exc}")

    return call


def measure(runner, cfg: Settings) -> tuple[Outcome, float, float, int]:
    """Warm-up run (its outcome is returned), then timed repeats: ``(outcome, best, median, repeats)``.

    A warm-up run longer than one second (a peer running into its budget) is not repeated: its own time is
    reported. The time of a run is the wall clock around the runner, or the outcome's ``timed_s`` when set.
    """
    runner = guarded(runner)

    def timed():
        tick = time.perf_counter()
        out = runner()
        wall = time.perf_counter() - tick
        return out, (wall if out.timed_s is None else out.timed_s), wall

    outcome, first, first_wall = timed()
    if first_wall > 1.0:
        return outcome, first, first, 1
    times: list[float] = []
    walls = 0.0
    while len(times) < cfg.max_repeats and (len(times) < 3 or walls < cfg.repeat_s):
        _, seconds, wall = timed()
        times.append(seconds)
        walls += wall
    return outcome, min(times), statistics.median(times), len(times)


# =================================================================================================================
# methods on networks
# =================================================================================================================

def _peer_kwargs(prob) -> dict:
    return dict(loss=prob.loss, reduction=prob.reduction, leak=prob.leak, bias=prob.bias,
                train_outer=prob.train_outer)


def _packed(flat, m: int, d: int) -> np.ndarray:
    """``concat(W.ravel(), b, a)`` -> packed rows ``(w_j, b_j, a_j)``."""
    flat = np.asarray(flat, dtype=np.float64)
    if flat.shape != (m * d + 2 * m,):
        return np.full((m, d + 2), np.nan)
    return np.column_stack([flat[: m * d].reshape(m, d), flat[m * d: m * d + m], flat[m * d + m:]])


def flowlib_flow(prob, p0, t_end):
    """``prepare`` for flowlib's :func:`~flowlib.gradient_flow` (rtol 1e-13, no dense output)."""

    def prepare(cfg):
        def run():
            res = fl.gradient_flow(prob, p0, t_end, dense_output=False)
            status = "ok" if res.status == "success" else str(res.status)
            if res.status == "failed":
                status = f"failed: {res.message}"
            events = [(e.t, (e.neuron, e.sample), e.kind) for e in res.events]
            return Outcome(res.states[-1], res.t_final, events, status, None,
                           {"n_steps": res.n_steps, "order": res.order})

        return run, None

    return prepare


def _scipy_status(status: str) -> str:
    return f"failed: {status}" if status.startswith("solver_failed") else status


def scipy_restart_flow(prob, p0, t_end):
    """``prepare`` for SciPy DOP853 with event restarts (rtol 1e-12, the README's comparison)."""

    def prepare(cfg):
        def run():
            r = scipy_peer.scipy_flow(prob.X, prob.y, p0.W, p0.b, p0.a, t_end, rtol=1e-12,
                                      livelock_events=LIVELOCK_EVENTS, max_nfev=cfg.max_nfev,
                                      max_seconds=cfg.max_seconds, **_peer_kwargs(prob))
            events = [(t, (int(j), int(i)), "flip") for t, j, i in zip(r.event_times, r.event_neurons,
                                                                      r.event_samples)]
            final = np.column_stack([r.W, r.b, r.a])
            return Outcome(final, r.t_final, events, _scipy_status(r.status), r.nfev, {"restarts": r.n_restarts})

        return run, None

    return prepare


def scipy_naive_flow(prob, p0, t_end):
    """``prepare`` for SciPy DOP853 on the non-smooth field (rtol 1e-12)."""

    def prepare(cfg):
        def run():
            r = scipy_peer.scipy_flow_naive(prob.X, prob.y, p0.W, p0.b, p0.a, t_end, rtol=1e-12,
                                            max_nfev=cfg.max_nfev, max_seconds=cfg.max_seconds,
                                            **_peer_kwargs(prob))
            return Outcome(np.column_stack([r.W, r.b, r.a]), r.t_final, [], _scipy_status(r.status), r.nfev)

        return run, None

    return prepare


def _heyoka_outcome(res, unflatten, key) -> Outcome:
    events = [(t, key(int(k)), "flip") for t, k in zip(res.event_times, res.event_surfaces)]
    return Outcome(unflatten(res.state), res.t_final, events, res.status, res.nfev, {"n_steps": res.n_steps})


def heyoka_flow(prob, p0, t_end, events: bool):
    """``prepare`` for heyoka's naive (``events=False``) or masks+events peer; compile time = construction."""

    def prepare(cfg):
        run = heyoka_peer.build_flow(prob.X, prob.y, p0.W, p0.b, p0.a, t_end, events=events,
                                     livelock_events=LIVELOCK_EVENTS, max_nfev=cfg.max_nfev,
                                     max_seconds=cfg.max_seconds, **_peer_kwargs(prob))
        m, d = p0.W.shape

        def go():
            return _heyoka_outcome(run.run(), lambda s: _packed(s, m, d), lambda k: divmod(k, m)[::-1])

        return go, run.construct_s

    return prepare


def gd_tiny(prob, p0, t_end, reference):
    """``prepare`` for tiny-step GD: the step search (untimed) finds the step reaching :data:`GD_TARGET`."""

    def prepare(cfg):
        search = gd_peer.gd_for_accuracy(prob, p0, t_end, reference().final, target=GD_TARGET,
                                         max_seconds=cfg.max_seconds)
        status = "ok" if search.reached else search.status

        def run():
            gd = gd_peer.run_gd(prob, p0, t_end, search.steps)
            return Outcome(np.asarray(gd.states[-1], float), t_end if search.reached else gd.steps * gd.lr, [],
                           status, search.steps,
                           {"lr": search.lr, "steps": search.steps, "search_s": search.search_s,
                            "flips": gd.n_flips, "reached_target": search.reached,
                            "search": [list(h) for h in search.history]}, gd.wall_s)

        return run, None

    return prepare


def network_methods(prob, p0, t_end, reference, *, gd: bool = True) -> dict:
    """flowlib and every peer on one network problem."""
    methods = {FLOWLIB: flowlib_flow(prob, p0, t_end), SCIPY_RESTART: scipy_restart_flow(prob, p0, t_end),
               SCIPY_NAIVE: scipy_naive_flow(prob, p0, t_end), HEYOKA_NAIVE: heyoka_flow(prob, p0, t_end, False),
               HEYOKA_EVENTS: heyoka_flow(prob, p0, t_end, True)}
    if gd:
        methods[GD_TINY] = gd_tiny(prob, p0, t_end, reference)
    return methods


# =================================================================================================================
# methods on switched affine systems (B3, B7)
# =================================================================================================================

def flowlib_switched(system: fl.PiecewiseAffine, x0, t_end, to_output=None):
    """``prepare`` for :class:`flowlib.PiecewiseAffine` (``to_output`` maps its state to the compared one)."""
    convert = to_output or (lambda x: x)

    def prepare(cfg):
        def run():
            res = system.solve(x0, t_end)
            status = "ok" if res.status == "success" else str(res.status)
            if res.status == "failed":
                status = f"failed: {res.message}"
            events = [(e.t, e.surface, e.kind) for e in res.events]
            return Outcome(convert(res.final), float(res.t[-1]), events, status, None, {"n_steps": len(res.t) - 1})

        return run, None

    return prepare


def scipy_switched(system: scipy_peer.SwitchedSystem, x0, t_end, naive: bool):
    """``prepare`` for SciPy on a switched system (event restart, or naive)."""

    def prepare(cfg):
        def run():
            if naive:
                r = scipy_peer.scipy_switched_naive(system, x0, t_end, max_nfev=cfg.max_nfev,
                                                    max_seconds=cfg.max_seconds)
            else:
                r = scipy_peer.scipy_switched(system, x0, t_end, livelock_events=LIVELOCK_EVENTS,
                                              max_nfev=cfg.max_nfev, max_seconds=cfg.max_seconds)
            events = [(t, int(k), "flip") for t, k in zip(r.event_times, r.event_surfaces)]
            return Outcome(r.x, r.t_final, events, _scipy_status(r.status), r.nfev, {"restarts": r.n_restarts})

        return run, None

    return prepare


def heyoka_switched(system: scipy_peer.SwitchedSystem, x0, t_end, events: bool):
    """``prepare`` for heyoka on a switched system (signs via ``relup``, or as parameters + events)."""

    def prepare(cfg):
        run = heyoka_peer.build_switched(system, x0, t_end, events=events, livelock_events=LIVELOCK_EVENTS,
                                         max_nfev=cfg.max_nfev, max_seconds=cfg.max_seconds)
        return (lambda: _heyoka_outcome(run.run(), lambda s: s, int)), run.construct_s

    return prepare


def switched_methods(flowlib_prepare, system, x0, t_end) -> dict:
    """flowlib and every peer on one switched system."""
    return {FLOWLIB: flowlib_prepare, SCIPY_RESTART: scipy_switched(system, x0, t_end, False),
            SCIPY_NAIVE: scipy_switched(system, x0, t_end, True),
            HEYOKA_NAIVE: heyoka_switched(system, x0, t_end, False),
            HEYOKA_EVENTS: heyoka_switched(system, x0, t_end, True)}


# =================================================================================================================
# the problems
# =================================================================================================================

def e1_problem():
    """E1 (BENCHMARKS.md): one ReLU neuron, ``a = 1`` frozen, ``L = 1/4 sum (relu - y)^2``."""
    prob = fl.Problem(X=exact.E1_X, y=exact.E1_Y, loss="square", reduction="mean", bias=False, train_outer=False)
    return prob, fl.Params(W=[exact.E1_W0], b=None, a=[1.0])


def e1_reference(t_end: float) -> Reference:
    """E1's closed form at ``t_end``: ``w``, and the sliding entry ``t*`` when reached."""
    w, t_star = exact.e1_exact(t_end)
    events = [(float(t_star), (0, 0))] if t_end > t_star else []
    return Reference([[float(w[0]), float(w[1]), 0.0, 1.0]], events, "closed form (E1)")


def seed000_reference(theta0, t_end: float) -> Reference:
    """Seed 000's closed form (u/v form); the kinks ``v1 = 0`` / ``u2 = 0`` are (neuron, sample) (0, 0) / (1, 1)."""
    (w1, b1, w2, b2), kinks = exact.seed000_exact(theta0, t_end)
    events = sorted((float(t), {"v": (0, 0), "u": (1, 1)}[k]) for k, t in kinks.items() if t <= t_end)
    return Reference([[float(w1), float(b1), 1.0], [float(w2), float(b2), -1.0]], events,
                     "closed form (u = w + b, v = w - b)")


def one_crossing_problem():
    """One sample ``x = 1``, ``y = -1``, one leaky-ReLU neuron (leak 0.1), ``w0 = 0.5``, square loss (sum)."""
    prob = fl.Problem(X=[[1.0]], y=[-1.0], loss="square", reduction="sum", activation="leaky_relu", leak=0.1,
                      bias=False, train_outer=False)
    return prob, fl.Params(W=[[0.5]], b=None, a=[1.0])


def one_crossing_reference(t_end: float) -> Reference:
    w, t_star = exact.leaky_crossing_exact(0.5, -1.0, 0.1, t_end)
    return Reference([[float(w), 0.0, 1.0]], [(float(t_star), (0, 0))], "closed form")


def two_crossings_reference(t_end: float) -> Reference:
    """``examples.two_crossings``: affine cells, crossings of samples 0 then 1 (2.5e-10 apart)."""
    prob, p0 = examples.two_crossings()
    w, times = exact.affine_cells_exact(prob.X, prob.y, p0.W[0], 1.0, prob.leak, [0, 1], t_end, [0.2, 2.5e-10])
    return Reference([[float(w[0]), float(w[1]), 0.0, 1.0]], [(float(times[0]), (0, 0)), (float(times[1]), (0, 1))],
                     "closed form (affine cells, expm)")


def stored_reference(name: str, prob, p0, t_end: float, source: str) -> Reference:
    """A 40-digit reference from :mod:`benchmarks.peers.stored` (computed now when no valid file exists)."""
    ref = stored.get(name, prob, p0, t_end, source)
    what = "mpmath oracle, 40 digits" if source == "oracle" else "flowlib mpmath flow, 40 digits"
    where = "stored" if ref.stored else f"computed now in {ref.wall_s:.1f} s"
    return Reference(ref.final, [(t, (j, i)) for t, _, j, i in ref.events], f"{what} ({where})")


def os_transversal():
    """B1's orthogonally separable problem (n = 8, d = 3, m = 6, logistic, sum; 9 crossings to t = 10)."""
    return examples.os_logistic(m=6, n=8, d=3, scale=1e-2, seed=11)


def os_wide(m: int = 12):
    """B1's wider orthogonally separable problems: ``m = 12`` (n = 16, d = 4; 85 crossings to t = 10) or ``m = 24``
    (n = 32, d = 6; 379 crossings); logistic, sum."""
    if m not in (12, 24):
        raise ValueError(f"m must be 12 or 24, got {m!r}")
    n, d = (16, 4) if m == 12 else (32, 6)
    return examples.os_logistic(m=m, n=n, d=d, scale=1e-2, seed=11)


V10_X = ((1.0, 0.0), (0.5, 1.0))
V10_Y = (1.0, -1.0)


def v10_problem(m: int):
    """V10 (BENCHMARKS.md): ``x1 = (1, 0), y1 = 1; x2 = (0.5, 1), y2 = -1``, balanced, ``lambda = 1e-4``."""
    prob = fl.Problem(X=V10_X, y=V10_Y, loss="square", reduction="mean", bias=False, train_outer=True)
    return prob, examples.balanced_init(m, 2, 1e-4 / math.sqrt(m), seed=10)


def twisting():
    """Twisting oscillator ``x1' = x2, x2' = -2 sgn x1 - sgn x2`` (E3) for flowlib and for the peers."""
    args = dict(A0=[[0.0, 1.0], [0.0, 0.0]], c0=[0.0, 0.0], A=np.zeros((2, 2, 2)), c=[[0.0, -2.0], [0.0, -1.0]],
                normals=[[1.0, 0.0], [0.0, 1.0]])
    return fl.PiecewiseAffine(**args), scipy_peer.SwitchedSystem(**args)


RELAY_OMEGA, RELAY_XI, RELAY_SIGMA = 25.0, 0.05, 1.0
RELAY_X0 = (0.0, -0.001, -0.02)


def relay():
    """Relay feedback ``x' = A x - b sgn x1`` (Piiroinen & Kuznetsov 2008, eq. 32; nosnoc's example)."""
    om, xi, sg = RELAY_OMEGA, RELAY_XI, RELAY_SIGMA
    A = np.array([[-(2 * xi * om + 1), 1, 0], [-(2 * xi * om + om ** 2), 0, 1], [-om ** 2, 0, 0]])
    b = np.array([1.0, -2 * sg, 1.0])
    args = dict(A0=A, c0=np.zeros(3), A=np.zeros((1, 3, 3)), c=[-b], normals=[[1.0, 0.0, 0.0]])
    return fl.PiecewiseAffine(**args), scipy_peer.SwitchedSystem(**args), A, b


@lru_cache(maxsize=None)
def relay_reference(t_end: float) -> Reference:
    """Event-by-event mpmath solution of the relay system (sliding phases included)."""
    _, _, A, b = relay()
    x, events = exact.switched_single_surface(A, np.zeros(3), -b, [1.0, 0.0, 0.0], RELAY_X0, t_end)
    return Reference([float(v) for v in x], [(float(t), kind) for t, kind in events],
                     "mpmath, event by event (50 digits)")


OSC_OMEGA = 2 * math.pi


def oscillator():
    """nosnoc's oscillator: Cartesian form (circle ``|x| = 1``) for the peers, log-polar form for flowlib.

    ``PiecewiseAffine`` takes linear switching functions only; in ``(rho, phi) = (ln |x|, arg x)`` the system is
    ``rho' = 1``, ``phi' = -omega sgn(rho)`` and the circle is the line ``rho = 0``.
    """
    w = OSC_OMEGA
    A1, A2 = np.array([[1.0, w], [-w, 1.0]]), np.array([[1.0, -w], [w, 1.0]])
    peers = scipy_peer.SwitchedSystem(A0=(A1 + A2) / 2, c0=[0.0, 0.0], A=[(A1 - A2) / 2], c=[[0.0, 0.0]],
                                      normals=[[0.0, 0.0]], offsets=[-1.0], quadratic=[np.eye(2)])
    polar = fl.PiecewiseAffine(A0=np.zeros((2, 2)), c0=[1.0, 0.0], A=np.zeros((1, 2, 2)), c=[[0.0, -w]],
                               normals=[[1.0, 0.0]])
    return polar, peers


def _polar_to_cartesian(state):
    rho, phi = state
    return np.array([math.exp(rho) * math.cos(phi), math.exp(rho) * math.sin(phi)])


def oscillator_reference(t_end: float) -> Reference:
    x, t_switch = exact.oscillator_exact(t_end, OSC_OMEGA)
    return Reference([float(v) for v in x], [(float(t_switch), 0)], "closed form (nosnoc X_SOL)")


# =================================================================================================================
# the cases
# =================================================================================================================

def network_case(case_id, bench, title, prob, p0, t_end, reference, *, gd=True) -> Case:
    """A :class:`Case` running flowlib and every peer on a network problem."""
    reference = lru_cache(maxsize=None)(reference)
    return Case(case_id, bench, title, t_end, reference, network_methods(prob, p0, t_end, reference, gd=gd))


def b0_cases(quick: bool) -> list[Case]:
    """B0: speed inside one activation pattern (no events)."""
    prob, p0 = e1_problem()
    seed0, s0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    return [network_case("B0-e1p1", "B0", "E1 phase 1, t = 1.5 (one pattern)", prob, p0, 1.5,
                         lambda: e1_reference(1.5), gd=not quick),
            network_case("B0-seed0", "B0", "seed 000 network, t = 100 (before its kinks)", seed0, s0, 100.0,
                         lambda: seed000_reference((2.0, 3.0, -2.0, 3.1), 100.0))]


def b1_cases(quick: bool) -> list[Case]:
    """B1: transversal crossings (one; two inside one step; 9, 85 and 379 on networks of 24, 60 and 168 parameters
    with 48, 192 and 768 switching surfaces, where the per-trajectory comparison with heyoka turns; no GD on the
    two wider ones (B0-seed0 and B6-os time it); the widest in the full run only)."""
    one, p_one = one_crossing_problem()
    two, p_two = examples.two_crossings()
    os_prob, os_p0 = stored.pinned("b1-os", *os_transversal(), 10.0)
    wide, wide_p0 = stored.pinned("b1-wide", *os_wide(), 10.0)
    wider, wider_p0 = stored.pinned("b1-wider", *os_wide(24), 10.0)
    return [network_case("B1-one", "B1", "one leaky crossing at ln 1.5, t = 5", one, p_one, 5.0,
                         lambda: one_crossing_reference(5.0), gd=not quick),
            network_case("B1-two", "B1", "two crossings 2.5e-10 apart in one step, t = 2", two, p_two, 2.0,
                         lambda: two_crossings_reference(2.0), gd=not quick),
            network_case("B1-os", "B1", "orth. separable n=8 d=3 m=6 logistic, 9 crossings, t = 10", os_prob,
                         os_p0, 10.0, lambda: stored_reference("b1-os", os_prob, os_p0, 10.0, "oracle"),
                         gd=not quick),
            network_case("B1-wide", "B1", "orth. separable n=16 d=4 m=12 logistic, 85 crossings, t = 10", wide,
                         wide_p0, 10.0, lambda: stored_reference("b1-wide", wide, wide_p0, 10.0, "oracle"),
                         gd=False)] + ([] if quick else [
            network_case("B1-wider", "B1", "orth. separable n=32 d=6 m=24 logistic, 379 crossings, t = 10", wider,
                         wider_p0, 10.0, lambda: stored_reference("b1-wider", wider, wider_p0, 10.0, "oracle"),
                         gd=False)])


def b2_cases(quick: bool) -> list[Case]:
    """B2: sliding (E1 closed form; V10 with many neurons)."""
    prob, p0 = e1_problem()
    m = 40 if quick else 400
    v10, v0 = stored.pinned(f"b2-v10-m{m}", *v10_problem(m), 6.0)
    return [network_case("B2-e1", "B2", "E1 sliding from t* = 1.5593, t = 10", prob, p0, 10.0,
                         lambda: e1_reference(10.0), gd=not quick),
            network_case(f"B2-v10-m{m}", "B2", f"V10, m = {m}, slides on two rays, t = 6", v10, v0, 6.0,
                         lambda: stored_reference(f"b2-v10-m{m}", v10, v0, 6.0, "mp-flow"), gd=not quick)]


def b3_cases(quick: bool) -> list[Case]:
    """B3: Zeno (twisting oscillator)."""
    flow, peers = twisting()
    x0, t_end = [1.0, 0.0], 10.0
    ref = Reference([0.0, 0.0], [(float(exact.TWIST_T_ACC), "zeno")], "closed form (Zeno time, x = 0 after)",
                    scale=1.0)
    return [Case("B3-twist", "B3", "twisting oscillator, Zeno at 4.4614, t = 10", t_end, lambda: ref,
                 switched_methods(flowlib_switched(flow, x0, t_end), peers, x0, t_end), event_key="zeno")]


def b4_cases(quick: bool) -> list[Case]:
    """B4: dead neurons on their last hyperplane (E4: seed 003's three points)."""
    cases = []
    for m in ((5, 50) if quick else (5, 50, 200)):
        prob, p0 = stored.pinned(f"b4-e4-m{m}", *examples.three_points(m, 1e-3, 0), 20.0)
        cases.append(network_case(f"B4-e4-m{m}", "B4", f"E4 three points, m = {m}, t = 20", prob, p0, 20.0,
                                  lambda prob=prob, p0=p0, m=m: stored_reference(f"b4-e4-m{m}", prob, p0, 20.0,
                                                                                 "mp-flow"),
                                  gd=not quick))
    return cases


def gd_lr_methods(prob, p0, t_end, lrs, mp_lrs, dps: int = 30) -> dict:
    """GD at fixed steps, float64 and mpmath (B6)."""
    methods = {FLOWLIB: flowlib_flow(prob, p0, t_end)}
    for lr in lrs:
        methods[f"GD f64 lr={lr:g}"] = gd_fixed(prob, p0, t_end, lr, None)
    for lr in mp_lrs:
        methods[f"GD mp{dps} lr={lr:g}"] = gd_fixed(prob, p0, t_end, lr, dps)
    return methods


def gd_fixed(prob, p0, t_end, lr, dps):
    """``prepare`` for GD at step ``lr`` (``t_end / lr`` iterations), float64 or at ``dps`` digits."""
    steps = int(round(t_end / lr))

    def prepare(cfg):
        def run():
            gd = gd_peer.run_gd(prob, p0, t_end, steps, dps=dps)
            return Outcome(np.asarray(gd.states[-1], dtype=np.float64), gd.steps * gd.lr, [],
                           "ok" if gd.status == "success" else str(gd.status), steps,
                           {"lr": lr, "flips": gd.n_flips}, gd.wall_s)

        return run, None

    return prepare


def b6_cases(quick: bool) -> list[Case]:
    """B6: GD against the flow (E1, fixed steps), and tiny-step GD at 1e-6 at t = 100 (os_logistic)."""
    prob, p0 = e1_problem()
    lrs = [1e-1, 1e-2, 1e-3, 1e-4, 1e-5]
    mp_lrs = [1e-1, 1e-2] if quick else [1e-1, 1e-2, 1e-3]
    e1_ref = lru_cache(maxsize=None)(lambda: e1_reference(10.0))
    os_prob, os_p0 = stored.pinned("b6-os-t100", *examples.os_logistic(), 100.0)
    os_ref = lru_cache(maxsize=None)(lambda: stored_reference("b6-os-t100", os_prob, os_p0, 100.0, "oracle"))
    return [Case("B6-e1", "B6", "E1: GD lr 1e-1..1e-5 (f64, mpmath 30 digits) vs the flow, t = 10", 10.0,
                 e1_ref, gd_lr_methods(prob, p0, 10.0, lrs, mp_lrs)),
            Case("B6-os", "B6", "os_logistic n=8 d=2 m=6: tiny-step GD to 1e-6 at t = 100", 100.0, os_ref,
                 {FLOWLIB: flowlib_flow(os_prob, os_p0, 100.0), GD_TINY: gd_tiny(os_prob, os_p0, 100.0, os_ref)})]


def b7_cases(quick: bool) -> list[Case]:
    """B7: external Filippov cross-checks (nosnoc's oscillator and relay examples)."""
    polar, osc_peers = oscillator()
    T = math.pi / 2
    flow, peers, _, _ = relay()
    return [Case("B7-osc", "B7", "nosnoc oscillator (switch on |x| = 1 at t = 1), t = pi/2", T,
                 lambda: oscillator_reference(T),
                 switched_methods(flowlib_switched(polar, [-1.0, 0.0], T, _polar_to_cartesian), osc_peers,
                                  [math.exp(-1.0), 0.0], T)),
            Case("B7-relay", "B7", "relay feedback (PK eq. 32), slides from t = 0, t = 10", 10.0,
                 lambda: relay_reference(10.0),
                 switched_methods(flowlib_switched(flow, list(RELAY_X0), 10.0), peers, list(RELAY_X0), 10.0),
                 event_key="kind")]


#: every case family, in order
CASES = {"B0": b0_cases, "B1": b1_cases, "B2": b2_cases, "B3": b3_cases, "B4": b4_cases, "B6": b6_cases,
         "B7": b7_cases}


def select_cases(quick: bool, wanted: list[str] | None = None) -> list[Case]:
    """The cases of every family, keeping those whose id starts with one of ``wanted`` (all when ``None``)."""
    cases = [case for make in CASES.values() for case in make(quick)]
    if not wanted:
        return cases
    return [case for case in cases if any(case.id.lower().startswith(w.lower()) for w in wanted)]


# =================================================================================================================
# running
# =================================================================================================================

def assess(case: Case, outcome: Outcome, ref: Reference) -> dict:
    """Label, state error and event-time error of one outcome against the case's reference."""
    err_t, match = event_time_error(keyed_events(outcome.events, case.event_key), ref.events)
    return {"label": label(outcome, ref, case.t_end), "state_error": state_error(outcome, ref),
            "event_time_error": err_t, "events_match": match}


def run_method(case: Case, method: str, ref: Reference, cfg: Settings) -> Row:
    """Prepare (compile, search) and time one method on one case; label it against the reference."""
    runner, compile_s = case.methods[method](cfg)
    outcome, best, median, repeats = measure(runner, cfg)
    grade = assess(case, outcome, ref)
    return Row(case.id, case.bench, method, best, median, repeats, None, grade["state_error"],
               grade["event_time_error"], grade["events_match"], grade["label"], outcome.status, outcome.t_reached,
               case.t_end, len(outcome.events), outcome.nfev, compile_s, ref.source, outcome.extra)


def case_rows(case: Case, cfg: Settings, log=None) -> list[Row]:
    """Every applicable method on ``case``, flowlib first; ratios relative to flowlib's time."""
    ref = case.reference()
    rows, base = [], None
    for method in case.methods:
        if method.startswith("heyoka") and not cfg.heyoka:
            continue
        row = run_method(case, method, ref, cfg)
        base = row.time_s if method == FLOWLIB else base
        row.ratio = row.time_s / base if base else None
        rows.append(row)
        if log:
            log(format_row(row))
    return rows


def run_cases(cases: list[Case], cfg: Settings, log=None) -> list[Row]:
    """All rows of all cases."""
    return [row for case in cases for row in case_rows(case, cfg, log)]


# =================================================================================================================
# reporting
# =================================================================================================================

def _fmt_time(s: float) -> str:
    if not math.isfinite(s):
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1.0:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def _fmt_err(e) -> str:
    if e is None or (isinstance(e, float) and math.isnan(e)):
        return "-"
    return "inf" if math.isinf(e) else f"{e:.1e}"


HEADER = f"{'case':<14}{'method':<22}{'time/traj':>11}{'ratio':>9}{'state err':>11}{'event err':>11}  " \
         f"{'label':<13}note"


def format_row(row: Row) -> str:
    """One line of the printed table."""
    ratio = "-" if row.ratio is None else f"{row.ratio:.3g}"
    if row.ratio is not None and row.label in ("STALL", "LIVELOCK"):
        ratio = ">" + ratio
    note = [] if row.label == "OK" or row.t_reached >= row.t_end else [f"t={row.t_reached:.6g}"]
    if row.status != "ok":
        note.append(row.status[:40])
    if "lr" in row.extra:
        note.append(f"lr={row.extra['lr']:.3g}")
    if row.compile_s is not None:
        note.append(f"build {row.compile_s:.2f} s")
    return f"{row.case:<14}{row.method:<22}{_fmt_time(row.time_s):>11}{ratio:>9}{_fmt_err(row.state_error):>11}" \
           f"{_fmt_err(row.event_time_error):>11}  {row.label:<13}{', '.join(note)}"


def table(rows: list[Row]) -> str:
    """The printed table (one line per row, a blank line between cases)."""
    lines, last = [HEADER], None
    for row in rows:
        if last is not None and row.case != last:
            lines.append("")
        lines.append(format_row(row))
        last = row.case
    return "\n".join(lines)


def _rows_of(rows, cases, method):
    return [r for r in rows if r.method == method and any(r.case.startswith(c) for c in cases)]


def _flowlib_of(rows, case):
    return next((r for r in rows if r.case == case and r.method == FLOWLIB), None)


def acceptance(rows: list[Row]) -> dict:
    """The acceptance targets of the benchmark suite, as measured in this run (nothing asserted here)."""
    out = {}
    scipy = [(r, _flowlib_of(rows, r.case)) for r in _rows_of(rows, ("B0", "B1"), SCIPY_RESTART)]
    if scipy:
        out["transversal_vs_scipy"] = [
            {"case": r.case, "speedup": r.ratio, "flowlib_state_error": f.state_error, "scipy_state_error": r.state_error,
             "flowlib_event_error": f.event_time_error, "scipy_event_error": r.event_time_error,
             "event_accuracy_ratio": (r.event_time_error / max(f.event_time_error, 1e-17)
                                      if r.event_time_error is not None and f.event_time_error is not None
                                      else None),
             "speed_target_met": bool(r.ratio >= 20 and f.state_error <= max(r.state_error, 1e-15))}
            for r, f in scipy if f is not None]
    gd = [r for r in rows if r.method == GD_TINY and r.t_end == 100.0]
    if gd:
        out["vs_tiny_step_gd_t100"] = [{"case": r.case, "speedup": r.ratio, "gd_lr": r.extra.get("lr"),
                                        "gd_error": r.state_error, "target_met": bool(r.ratio and r.ratio >= 100)}
                                       for r in gd]
    hey = _rows_of(rows, ("B0", "B1"), HEYOKA_EVENTS) + _rows_of(rows, ("B0", "B1"), HEYOKA_NAIVE)
    if hey:
        out["transversal_vs_heyoka"] = [{"case": r.case, "method": r.method, "ratio": r.ratio, "label": r.label,
                                         "state_error": r.state_error, "build_s": r.compile_s,
                                         "flowlib_faster": bool(r.ratio is not None and r.ratio > 1.0)}
                                        for r in hey]
    hard = [r for r in rows if r.bench in ("B2", "B3", "B4", "B7")]
    if hard:
        out["nonsmooth_labels"] = {case: {r.method: r.label for r in hard if r.case == case}
                                   for case in dict.fromkeys(r.case for r in hard)}
    return out


def _versions() -> dict:
    import mpmath
    import numba
    import scipy

    versions = {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
                "numba": numba.__version__, "mpmath": mpmath.__version__, "flowlib": fl.__version__}
    try:
        import heyoka

        versions["heyoka"] = heyoka.__version__
    except ImportError:
        versions["heyoka"] = None
    return versions


def _machine() -> dict:
    model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os

    return {"cpu": model or platform.machine(), "cores": os.cpu_count(), "system": platform.platform(),
            "node": platform.node()}


def write_json(path: Path, rows, cases, cfg: Settings, compile_info: dict, argv, wall: float,
               dense_rows: list | None = None) -> None:
    """``bench.json``: machine, versions, settings, compile times, every row and the acceptance summary, and the
    event-dense rows (:func:`benchmarks.event_dense.measure`)."""
    payload = {"command": "python -m benchmarks " + " ".join(argv), "machine": _machine(),
               "versions": _versions(), "settings": asdict(cfg), "compile": compile_info,
               "cases": [{"id": c.id, "bench": c.bench, "title": c.title, "t_end": c.t_end} for c in cases],
               "rows": [asdict(r) for r in rows], "acceptance": acceptance(rows), "wall_s": wall,
               "labels": {"OK": "reached t_end, relative state error <= 1e-3",
                          "SILENT-WRONG": "reached t_end, larger error", "STALL": "budget used up before t_end",
                          "LIVELOCK": ">= 100 consecutive events at one instant", "ABORT": "solver error"},
               "event_dense": dense_rows or []}
    path.write_text(json.dumps(payload, indent=1, default=_json_default))


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


LABEL_COLORS = {"OK": "tab:green", "SILENT-WRONG": "tab:red", "STALL": "tab:orange", "LIVELOCK": "tab:purple",
                "ABORT": "black"}
METHOD_MARKERS = {FLOWLIB: "*", SCIPY_RESTART: "s", SCIPY_NAIVE: "D", HEYOKA_NAIVE: "^", HEYOKA_EVENTS: "v",
                  GD_TINY: "o"}


def plot(path: Path, rows: list[Row]) -> None:
    """``bench.png``: time ratio peer / flowlib (left) and relative state error (right) per case and method,
    colour = label, marker = method (GD at fixed steps: small dots)."""
    import matplotlib

    if matplotlib.get_backend().lower() != "agg":
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(r.case for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(15, 0.45 * len(cases) + 2.5), sharey=True)
    methods = list(dict.fromkeys(r.method for r in rows))
    offsets = {m: (k - (len(methods) - 1) / 2) * 0.6 / max(len(methods), 1) for k, m in enumerate(methods)}
    for r in rows:
        y = len(cases) - 1 - cases.index(r.case) + offsets[r.method]
        marker = METHOD_MARKERS.get(r.method, ".")
        color = LABEL_COLORS[r.label]
        if r.ratio is not None and r.method != FLOWLIB:
            axes[0].scatter(r.ratio, y, marker=marker, color=color, s=50, edgecolor="k", linewidth=0.4, zorder=3)
        err = r.state_error if math.isfinite(r.state_error) else 10.0
        axes[1].scatter(max(err, 1e-17), y, marker=marker, color=color, s=50, edgecolor="k", linewidth=0.4,
                        zorder=3)
    for ax, title in zip(axes, ("time per trajectory: method / flowlib (flowlib = 1; > 1: flowlib faster)",
                                "relative state error at the end (1e-17 floor; 10 = no finite state)")):
        ax.set_xscale("log")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", axis="x", alpha=0.4)
        for k in range(len(cases)):
            ax.axhline(k + 0.5, color="0.85", lw=0.6)
    axes[0].axvline(1.0, color="k", lw=0.8)
    axes[1].axvline(WRONG, color="tab:red", lw=0.8, ls="--")
    axes[0].set_yticks(range(len(cases)))
    axes[0].set_yticklabels(cases[::-1])
    axes[0].set_ylim(-0.6, len(cases) - 0.4)
    handles = [plt.Line2D([], [], ls="", marker=mk, color="0.5", label=m) for m, mk in METHOD_MARKERS.items()]
    handles.append(plt.Line2D([], [], ls="", marker=".", color="0.5", label="GD at fixed lr (B6)"))
    handles += [plt.Line2D([], [], ls="", marker="o", color=c, label=lab) for lab, c in LABEL_COLORS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=7, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


# =================================================================================================================
# command line
# =================================================================================================================

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small problems and budgets (about 2 minutes)")
    parser.add_argument("--out", default="bench-out", help="folder for bench.json and bench.png")
    parser.add_argument("--cases", default=None,
                        help="comma-separated case ids or prefixes (e.g. B0,B2-e1); default: all")
    parser.add_argument("--no-heyoka", action="store_true", help="skip the heyoka peers")
    return parser


def warm_heyoka() -> float | None:
    """Build one tiny heyoka integrator (its first build pays one-off LLVM set-up); seconds, or None."""
    if not heyoka_peer.available():
        return None
    tick = time.perf_counter()
    heyoka_peer.build_switched(scipy_peer.SwitchedSystem(A0=[[0.0]], c0=[0.0], A=[[[0.0]]], c=[[-1.0]],
                                                         normals=[[1.0]]), [1.0], 1.0, events=True).run()
    return time.perf_counter() - tick


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks, print the table, write ``bench.json`` and ``bench.png``; returns 0."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    started = time.perf_counter()
    cfg = settings(args.quick, heyoka=False if args.no_heyoka else None)
    wanted = [c.strip() for c in args.cases.split(",")] if args.cases else None
    cases = select_cases(args.quick, wanted)
    dense_cases = event_dense.select(wanted)
    compile_info = {"flowlib_warmup_s": fl.warmup(), "heyoka_first_build_s": warm_heyoka() if cfg.heyoka else None}
    print(f"flowlib bench ({'quick' if cfg.quick else 'full'}): {len(cases) + len(dense_cases)} cases; budgets {cfg.max_nfev:.0e} RHS "
          f"evaluations or {cfg.max_seconds:g} s per run; flowlib warm-up {compile_info['flowlib_warmup_s']:.2f} s"
          + ("" if cfg.heyoka else "; heyoka peers skipped (" + heyoka_peer.INSTALL_HINT + ")"))
    print(HEADER)
    rows = run_cases(cases, cfg, log=lambda line: print(line, flush=True))
    dense_rows, dense_table = [], ""
    if dense_cases:
        print("\nevent-dense: the flow against float64 GD over the same flow time (benchmarks/event_dense.py)")
        print("\n".join(event_dense.table([]).splitlines()[:2]))
        dense_rows = event_dense.run(cfg.quick, dense_cases, log=lambda line: print(line, flush=True))
        dense_table = "\n\n" + event_dense.table(dense_rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    wall = time.perf_counter() - started
    write_json(out / "bench.json", rows, cases, cfg, compile_info, argv, wall, dense_rows)
    (out / "bench.txt").write_text(table(rows) + dense_table + "\n")
    written = [out / "bench.json", out / "bench.txt"]
    if rows:  # the figure shows the peer comparisons (none when only B8/B9 ran)
        plot(out / "bench.png", rows)
        written.append(out / "bench.png")
    print(f"\nwrote {', '.join(str(p) for p in written)} ({wall:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
