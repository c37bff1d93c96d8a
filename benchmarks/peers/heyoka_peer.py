"""heyoka.py peers (optional: ``pip install 'flowlib[heyoka]'``); the results are in BENCHMARKS.md.

heyoka is the fastest Taylor integrator with event detection; it knows nothing of sliding, Zeno or sticking, so the
two ways a user would hand it the ReLU gradient flow are the peers:

*naive*
    ``relu`` / ``relup`` in the right-hand side, no events. The Taylor coefficients of ``relup`` beyond order 0
    are zero, so a step freezes the branch and walks through kinks (E1: silently wrong).
*masks + events*
    The activation pattern as runtime parameters ``par[k]``, one terminal event per switching surface whose
    callback flips the mask by the crossing direction ``d_sgn``. Right at transversal crossings (event times to
    machine precision), wrong mode after a sliding entry (E1), livelock when a neuron dies exactly on its last
    hyperplane (E4: the event function is then identically 0 and re-fires forever at one instant).

Both run under a budget so nothing hangs: at most ``max_events`` events (the callback returns ``False``), a
livelock guard (``livelock_events`` events at one instant), and a step callback that stops the run past
``max_nfev`` right-hand-side evaluations (counted as steps times the Taylor order) or ``max_seconds``. heyoka's
own warnings ("deducing a cooldown of zero ...") are silenced with ``hy.set_logger_level_error()``; uncapped, the
E4 livelock printed more than 3e7 of them in nine minutes.

The same two schemes exist for switched affine systems (:class:`~benchmarks.peers.scipy_peer.SwitchedSystem`:
twisting oscillator, relay feedback, nosnoc's oscillator), with signs instead of masks (E3).

Building an integrator JIT-compiles it (LLVM): :func:`build_flow` and :func:`build_switched` return a
:class:`HeyokaRun` whose ``construct_s`` is that compile time and whose :meth:`HeyokaRun.run` integrates from the
initial condition again (the benchmark times ``run`` only and reports ``construct_s`` separately).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

__all__ = ["HeyokaResult", "HeyokaRun", "available", "build_flow", "build_switched", "import_heyoka"]

INSTALL_HINT = "pip install 'flowlib[heyoka]'"
#: events closer than this (relative to max(1, |t|)) count as "at one instant" for the livelock guard
_SAME_INSTANT = 1e-9
#: networks with more state variables than this are compiled in compact mode, heyoka's faster choice there: on B1's
#: problems (Xeon VM, heyoka 7.13) the 24-variable one runs in 0.79 ms built plainly (1.13 ms compact), the
#: 60-variable one in 16 ms compact (33 ms plainly, after 99 s of LLVM compilation instead of 0.6 s)
_COMPACT_ABOVE = 40


def import_heyoka():
    """Import heyoka.py, with its logger set to errors only.

    Raises
    ------
    ImportError
        With the install hint when heyoka.py is missing.
    """
    try:
        import heyoka as hy
    except ImportError as exc:  # pragma: no cover - exercised only without heyoka
        raise ImportError(f"the heyoka peers need heyoka.py: {INSTALL_HINT}") from exc
    hy.set_logger_level_error()
    return hy


def available() -> bool:
    """True when heyoka.py can be imported."""
    try:
        import_heyoka()
    except ImportError:
        return False
    return True


@dataclass
class HeyokaResult:
    """Outcome of one :meth:`HeyokaRun.run`.

    Attributes
    ----------
    state : ndarray
        Final state (for networks: ``concat(W.ravel(), b, a)`` with the fixed blocks filled in).
    t_final : float
    event_times : ndarray
    event_surfaces : ndarray of int
        Surface index ``k`` of each event (for networks ``k = i m + j``: sample ``i``, neuron ``j``).
    event_directions : ndarray of int
        heyoka's ``d_sgn`` (``+1`` upwards, ``-1`` downwards, ``0`` undetermined).
    n_steps : int
    nfev : int
        Right-hand-side evaluations, counted as ``n_steps * order`` (as in BENCHMARKS.md).
    status : str
        ``"ok"``, ``"event_budget"``, ``"livelock"``, ``"nfev_budget"``, ``"time_budget"`` or
        ``"failed: <message>"``.
    """

    state: np.ndarray
    t_final: float
    event_times: np.ndarray
    event_surfaces: np.ndarray
    event_directions: np.ndarray
    n_steps: int
    nfev: int
    status: str


class _Log:
    """Event log and budget state shared by the callbacks of one run."""

    def __init__(self, max_events, livelock_events, max_nfev, max_seconds, order):
        self.max_events, self.livelock_events = max_events, livelock_events
        self.max_nfev, self.max_seconds, self.order = max_nfev, max_seconds, order
        self.reset()

    def reset(self):
        self.times, self.surfaces, self.directions = [], [], []
        self.steps = 0
        self.status = "ok"
        self.deadline = None if self.max_seconds is None else time.perf_counter() + self.max_seconds

    def record(self, t, k, d_sgn) -> bool:
        """Log one event; ``False`` (stop) past the event budget or at a livelock."""
        self.times.append(float(t))
        self.surfaces.append(k)
        self.directions.append(int(d_sgn))
        if len(self.times) >= self.max_events:
            self.status = "event_budget"
            return False
        n = self.livelock_events
        if n is not None and len(self.times) >= n:
            first, last = self.times[-n], self.times[-1]
            if last - first <= _SAME_INSTANT * max(1.0, abs(last)):
                self.status = "livelock"
                return False
        return True

    def step(self, ta) -> bool:
        """Step callback: ``False`` (stop) past the evaluation or time budget."""
        self.steps += 1
        if self.max_nfev is not None and self.steps * self.order > self.max_nfev:
            self.status = "nfev_budget"
            return False
        if self.deadline is not None and time.perf_counter() > self.deadline:
            self.status = "time_budget"
            return False
        return True


class HeyokaRun:
    """A compiled heyoka integrator plus its initial condition; :meth:`run` integrates it again.

    Attributes
    ----------
    construct_s : float
        Seconds spent building (JIT-compiling) the integrator.
    order : int
        Taylor order heyoka chose.
    n_state, n_events : int
    """

    def __init__(self, ta, x0, pars0, log: _Log, t_end: float, unpack, construct_s: float):
        self.ta, self.x0, self.pars0, self.log = ta, np.array(x0, float), np.array(pars0, float), log
        self.t_end, self.unpack, self.construct_s = float(t_end), unpack, construct_s
        self.order = int(ta.order)
        self.n_state = len(self.x0)
        self.n_events = len(ta.t_events) if ta.with_events else 0

    def run(self) -> HeyokaResult:
        """Integrate from the initial condition to ``t_end`` under the budgets."""
        ta, log = self.ta, self.log
        ta.time = 0.0
        ta.state[:] = self.x0
        if len(self.pars0):
            ta.pars[:] = self.pars0
        if ta.with_events:
            ta.reset_cooldowns()
        log.reset()
        try:
            ta.propagate_until(self.t_end, callback=log.step)
        except Exception as exc:  # heyoka raises on non-finite states
            log.status = f"failed: {exc}"
        state = np.array(ta.state, dtype=np.float64)
        if log.status == "ok" and not np.all(np.isfinite(state)):
            log.status = "failed: non-finite state"
        return HeyokaResult(self.unpack(state), float(ta.time), np.array(log.times), np.array(log.surfaces, int),
                            np.array(log.directions, int), log.steps, log.steps * self.order, log.status)


def _budget_log(max_events, livelock_events, max_nfev, max_seconds) -> _Log:
    return _Log(int(max_events), livelock_events, max_nfev, max_seconds, order=1)


def _finish(hy, sys_, x0, pars0, events, log, t_end, unpack, compact) -> HeyokaRun:
    """JIT-compile the integrator (timed) and wrap it."""
    started = time.perf_counter()
    kwargs = {"compact_mode": compact}
    if len(pars0):
        kwargs["pars"] = list(pars0)
    if events:
        kwargs["t_events"] = events
    ta = hy.taylor_adaptive(sys_, list(x0), **kwargs)
    construct = time.perf_counter() - started
    log.order = int(ta.order)
    return HeyokaRun(ta, x0, pars0, log, t_end, unpack, construct)


# ----------------------------------------------------------------------------
# networks
# ----------------------------------------------------------------------------


def _loss_derivative(hy, loss, f, y):
    """``l'(f; y)`` as a heyoka expression (``y`` a float)."""
    if loss == "exp":
        return -y * hy.exp(-y * f)
    if loss == "logistic":
        return -y * hy.sigmoid(-y * f)
    return f - y


def build_flow(X, y, W, b, a, t_end, *, loss, reduction="mean", leak=0.0, bias=True, train_outer=False,
               events=False, max_events=10_000, livelock_events=100, max_nfev=None,
               max_seconds=None) -> HeyokaRun:
    """Build the heyoka peer for the gradient flow of a two-layer (leaky-)ReLU network.

    Conventions as :func:`benchmarks.peers.scipy_peer.scipy_flow` (``L = c sum_i l(f(x_i), y_i)``, slopes
    ``s_ij = 1`` on ``z_ij > 0`` else ``leak``). The trained blocks are heyoka variables, the fixed ones constants.

    Parameters
    ----------
    X, y, W, b, a, t_end, loss, reduction, leak, bias, train_outer
        As for :func:`~benchmarks.peers.scipy_peer.scipy_flow`.
    events : bool
        ``False``: the naive peer (``relup`` slopes in the RHS). ``True``: masks as ``par[i m + j]`` and one
        terminal event per pair flipping its mask by ``d_sgn``.
    max_events, livelock_events, max_nfev, max_seconds
        Budgets (see the module docstring).

    Returns
    -------
    HeyokaRun
        ``run().state`` is ``concat(W.ravel(), b, a)``.
    """
    hy = import_heyoka()
    X = np.asarray(X, float)
    y = np.asarray(y, float).reshape(-1)
    W = np.asarray(W, float)
    n, d = X.shape
    m = W.shape[0]
    b = np.zeros(m) if b is None else np.asarray(b, float).reshape(-1)
    a = np.asarray(a, float).reshape(-1)
    c = 1.0 / n if reduction == "mean" else 1.0
    wv = [[hy.make_vars(f"w_{j}_{q}") for q in range(d)] for j in range(m)]
    bv = [hy.make_vars(f"b_{j}") for j in range(m)] if bias else [hy.expression(0.0)] * m
    av = [hy.make_vars(f"a_{j}") for j in range(m)] if train_outer else [hy.expression(float(v)) for v in a]
    z = [[hy.sum([float(X[i, q]) * wv[j][q] for q in range(d)] + ([bv[j]] if bias else [])) for j in range(m)]
         for i in range(n)]
    if events:
        mask = [[hy.par[i * m + j] for j in range(m)] for i in range(n)]
    else:
        mask = [[hy.relup(z[i][j]) for j in range(m)] for i in range(n)]
    s = [[mask[i][j] if leak == 0.0 else leak + (1.0 - leak) * mask[i][j] for j in range(m)] for i in range(n)]
    f = [hy.sum([av[j] * s[i][j] * z[i][j] for j in range(m)]) for i in range(n)]
    G = [c * _loss_derivative(hy, loss, f[i], float(y[i])) for i in range(n)]
    sys_ = []
    for j in range(m):
        Gs = [G[i] * s[i][j] for i in range(n)]
        sys_ += [(wv[j][q], -av[j] * hy.sum([float(X[i, q]) * Gs[i] for i in range(n)])) for q in range(d)]
        if bias:
            sys_.append((bv[j], -av[j] * hy.sum(Gs)))
        if train_outer:
            sys_.append((av[j], -hy.sum([Gs[i] * z[i][j] for i in range(n)])))
    x0 = _pack_initial(W, b, a, bias, train_outer)
    log = _budget_log(max_events, livelock_events, max_nfev, max_seconds)
    pars0 = (((X @ W.T + b) > 0.0).astype(float).ravel()) if events else np.zeros(0)
    ev = [hy.t_event(z[i][j], callback=_mask_flip(log, i * m + j)) for i in range(n) for j in range(m)] \
        if events else []
    return _finish(hy, sys_, x0, pars0, ev, log, t_end, _network_unpack(W, b, a, bias, train_outer),
                   compact=len(x0) > _COMPACT_ABOVE)


def _pack_initial(W, b, a, bias, train_outer) -> np.ndarray:
    """heyoka's state order: per neuron ``w_j`` (d values), then ``b_j`` and ``a_j`` when trained."""
    rows = [np.concatenate([W[j], [b[j]] if bias else [], [a[j]] if train_outer else []]) for j in range(len(a))]
    return np.concatenate(rows)


def _network_unpack(W, b, a, bias, train_outer):
    """Map heyoka's state back to ``concat(W.ravel(), b, a)`` (fixed blocks from the initial values)."""
    m, d = W.shape
    width = d + int(bias) + int(train_outer)

    def unpack(state):
        rows = state.reshape(m, width)
        Wf = rows[:, :d]
        bf = rows[:, d] if bias else b
        af = rows[:, d + int(bias)] if train_outer else a
        return np.concatenate([Wf.ravel(), bf, af])

    return unpack


def _mask_flip(log: _Log, k: int):
    """Terminal-event callback: mask ``k`` set by the crossing direction (the masks+events scheme; E1, E4)."""

    def callback(ta, d_sgn):
        ta.pars[k] = 1.0 if d_sgn > 0 else 0.0
        return log.record(ta.time, k, d_sgn)

    return callback


# ----------------------------------------------------------------------------
# switched affine systems
# ----------------------------------------------------------------------------


def build_switched(system, x0, t_end, *, events=False, max_events=10_000, livelock_events=100, max_nfev=None,
                   max_seconds=None) -> HeyokaRun:
    """Build the heyoka peer for a :class:`~benchmarks.peers.scipy_peer.SwitchedSystem`.

    Parameters
    ----------
    system : SwitchedSystem
    x0 : array_like, shape (N,)
    t_end : float
    events : bool
        ``False``: ``sign(g) = 2 relup(g) - 1`` in the RHS. ``True``: signs as ``par[k]`` and one terminal event per
        surface setting ``par[k] = +-1`` by ``d_sgn`` (E3).
    max_events, livelock_events, max_nfev, max_seconds
        Budgets.

    Returns
    -------
    HeyokaRun
    """
    hy = import_heyoka()
    N = len(system.c0)
    xv = [hy.make_vars(f"x_{r}") for r in range(N)]
    g = [_switching_expression(hy, system, k, xv) for k in range(len(system.offsets))]
    sigma = [hy.par[k] for k in range(len(g))] if events else [2.0 * hy.relup(gk) - 1.0 for gk in g]
    sys_ = [(xv[r], _affine_row(hy, system, r, xv, sigma)) for r in range(N)]
    x0 = np.asarray(x0, float)
    log = _budget_log(max_events, livelock_events, max_nfev, max_seconds)
    pars0 = np.where(system.switching(x0) > 0.0, 1.0, -1.0) if events else np.zeros(0)
    ev = [hy.t_event(gk, callback=_sign_flip(log, k)) for k, gk in enumerate(g)] if events else []
    return _finish(hy, sys_, x0, pars0, ev, log, t_end, lambda state: state, compact=False)


def _switching_expression(hy, system, k, xv):
    terms = [float(system.normals[k, r]) * xv[r] for r in range(len(xv)) if system.normals[k, r] != 0.0]
    if system.quadratic is not None:
        Q = system.quadratic[k]
        terms += [float(Q[p, q]) * xv[p] * xv[q] for p in range(len(xv)) for q in range(len(xv)) if Q[p, q] != 0.0]
    if system.offsets[k] != 0.0:
        terms.append(hy.expression(float(system.offsets[k])))
    return hy.sum(terms)


def _affine_row(hy, system, r, xv, sigma):
    """Row ``r`` of ``A0 x + c0 + sum_k sigma_k (A_k x + c_k)``."""
    N = len(xv)
    terms = [float(system.A0[r, q]) * xv[q] for q in range(N) if system.A0[r, q] != 0.0]
    if system.c0[r] != 0.0:
        terms.append(hy.expression(float(system.c0[r])))
    for k, sk in enumerate(sigma):
        part = [float(system.A[k, r, q]) * xv[q] for q in range(N) if system.A[k, r, q] != 0.0]
        if system.c[k, r] != 0.0:
            part.append(hy.expression(float(system.c[k, r])))
        if part:
            terms.append(sk * hy.sum(part))
    return hy.sum(terms) if terms else hy.expression(0.0)


def _sign_flip(log: _Log, k: int):
    """Terminal-event callback: sign ``k`` set by the crossing direction."""

    def callback(ta, d_sgn):
        ta.pars[k] = 1.0 if d_sgn > 0 else -1.0
        return log.record(ta.time, k, d_sgn)

    return callback
