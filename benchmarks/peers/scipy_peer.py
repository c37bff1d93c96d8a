"""SciPy peers for the exact gradient flow of two-layer (leaky-)ReLU networks and for switched affine systems.

This module is deliberately independent of :mod:`flowlib`: it re-derives the
flow from the shared mathematical conventions using only :mod:`numpy` and
:mod:`scipy`, and integrates it the way a user would do today with
``scipy.integrate.solve_ivp(method="DOP853")`` (BENCHMARKS.md: the "event-restart
with mask flip" and the "naive RHS" baselines).

Every peer runs under a budget (:class:`Budget`: right-hand-side evaluations and
wall-clock seconds) so that nothing hangs; the event-restart peers also stop on
an event budget and when ``livelock_events`` events pile up at one instant.

Two network peers are provided:

``scipy_flow``
    The standard *event restart with mask flip* scheme.  The activation
    pattern is a fixed parameter of the right-hand side (so the RHS is smooth
    inside a cell); one terminal event function per (sample, neuron) pair
    detects the crossing of ``z_ij = 0``; on each event the mask of the pair is
    flipped, the event is recorded and the integration is restarted from the
    event state.

``scipy_flow_naive``
    The pattern is recomputed from the state inside the right-hand side and the
    (non-smooth) flow is integrated in one go, without events.

and their counterparts for switched affine systems
``x' = A0 x + c0 + sum_k sigma_k (A_k x + c_k)``, ``sigma_k = sign(g_k(x))``
(:class:`SwitchedSystem`; the twisting oscillator, the relay feedback system and
nosnoc's oscillator of benchmarks B3 and B7):
``scipy_switched`` (event restart, sign flip) and ``scipy_switched_naive``.

Mathematics (shared conventions)
--------------------------------
Network ``f(x) = sum_j a_j sigma(<w_j, x> + b_j)`` with
``sigma(z) = z if z > 0 else leak * z``.  Pre-activations
``z_ij = <w_j, x_i> + b_j``; pair ``(i, j)`` is *active* iff ``z_ij > 0`` and
its slope is ``s_ij = 1`` if active else ``leak``.  Loss
``L = c sum_i l(f(x_i), y_i)`` with ``c = 1/n`` (``"mean"``) or ``1``
(``"sum"``); residual weights ``G_i = c l'(f_i)``.  Inside a cell::

    dL/dw_j = sum_i G_i a_j s_ij x_i
    dL/db_j = sum_i G_i a_j s_ij        (bias=True only)
    dL/da_j = sum_i G_i s_ij z_ij       (train_outer=True only)

and the flow is ``theta' = -grad L``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import expit

__all__ = ["Budget", "BudgetExceeded", "ScipyFlowResult", "ScipySwitchedResult", "SwitchedSystem", "scipy_flow",
           "scipy_flow_naive", "scipy_switched", "scipy_switched_naive"]

_LOSSES = ("exp", "logistic", "square")
_REDUCTIONS = ("mean", "sum")
#: events closer than this (relative to max(1, |t|)) count as "at one instant" for the livelock guard
_SAME_INSTANT = 1e-9


# ----------------------------------------------------------------------------
# budgets
# ----------------------------------------------------------------------------


class BudgetExceeded(Exception):
    """Raised inside a right-hand side when a :class:`Budget` is used up.

    Parameters
    ----------
    kind : str
        ``"nfev_budget"`` or ``"time_budget"``.
    """

    def __init__(self, kind: str):
        super().__init__(kind)
        self.kind = kind


class Budget:
    """Right-hand-side evaluations and wall-clock seconds one peer run may use.

    The common protocol of BENCHMARKS.md: 3e5 RHS evaluations or 60 s per run, whichever comes first.

    Parameters
    ----------
    max_nfev : int or None
        Largest number of RHS evaluations (``None``: unlimited).
    max_seconds : float or None
        Wall-clock limit from :meth:`start` (``None``: unlimited).

    Attributes
    ----------
    nfev : int
        RHS evaluations charged since :meth:`start`.
    last : tuple
        ``(t, state)`` of the last charged evaluation (where a run stopped by the budget is reported).
    """

    def __init__(self, max_nfev: int | None = None, max_seconds: float | None = None):
        self.max_nfev = None if max_nfev is None else int(max_nfev)
        self.max_seconds = max_seconds
        self.start()

    def start(self) -> None:
        """Reset the count and start the clock."""
        self.nfev = 0
        self.last = None
        self.deadline = None if self.max_seconds is None else time.perf_counter() + float(self.max_seconds)

    def charge(self, t, state) -> None:
        """Count one RHS evaluation at ``(t, state)``; raise :class:`BudgetExceeded` past a limit."""
        self.nfev += 1
        self.last = (float(t), state)
        if self.max_nfev is not None and self.nfev > self.max_nfev:
            self.nfev = self.max_nfev
            raise BudgetExceeded("nfev_budget")
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise BudgetExceeded("time_budget")

    def counted(self, rhs):
        """``rhs`` wrapped so that every call is charged."""

        def wrapped(t, state):
            self.charge(t, state)
            return rhs(t, state)

        return wrapped


@dataclass
class ScipyFlowResult:
    """Outcome of a SciPy peer integration.

    Attributes
    ----------
    W : numpy.ndarray
        Final inner weights, shape ``(m, d)``, at ``t_end`` when ``status`` is
        ``"ok"`` (otherwise at ``t_final``, see below).
    b : numpy.ndarray
        Final biases, shape ``(m,)``.
    a : numpy.ndarray
        Final outer weights, shape ``(m,)``.
    event_times : numpy.ndarray
        Times of the recorded activation events, shape ``(k,)``, non-decreasing.
    event_neurons : numpy.ndarray
        Neuron index ``j`` of each event, shape ``(k,)``, integer.
    event_samples : numpy.ndarray
        Sample index ``i`` of each event, shape ``(k,)``, integer.
    event_directions : numpy.ndarray
        ``+1`` when the pair becomes active, ``-1`` when it becomes inactive,
        shape ``(k,)``, integer.
    nfev : int
        Total number of right-hand-side evaluations over all ``solve_ivp``
        calls (event-function evaluations are not included).
    n_restarts : int
        Number of times the integration was restarted after a terminal event
        (number of ``solve_ivp`` calls minus one).
    status : str
        ``"ok"`` when ``t_end`` was reached; otherwise the reason for stopping:
        ``"event_budget"``, ``"livelock"`` (``livelock_events`` events at one
        instant), ``"nfev_budget"``, ``"time_budget"`` or
        ``"solver_failed: <message>"``.
    t_final : float
        Time at which the returned state is given (``t_end`` when ``status`` is
        ``"ok"``).  Extra field with a default so that the dataclass can also be
        built positionally with the nine documented fields.
    """

    W: np.ndarray
    b: np.ndarray
    a: np.ndarray
    event_times: np.ndarray
    event_neurons: np.ndarray
    event_samples: np.ndarray
    event_directions: np.ndarray
    nfev: int
    n_restarts: int
    status: str
    t_final: float = float("nan")


# ----------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------


def _validate(X, y, W, b, a, t_end, loss, reduction, leak, bias):
    """Check and convert the problem data.

    Parameters
    ----------
    X, y, W, b, a : array_like
        Problem data with shapes ``(n, d)``, ``(n,)``, ``(m, d)``, ``(m,)`` (or
        ``None`` for zeros) and ``(m,)``.
    t_end : float
        Final time, must be ``>= 0``.
    loss : str
        ``"exp"``, ``"logistic"`` or ``"square"``.
    reduction : str
        ``"mean"`` or ``"sum"``.
    leak : float
        Negative-side slope in ``[0, 1)``.
    bias : bool
        Whether the bias is trained; when ``False`` the bias must be zero.

    Returns
    -------
    X, y, W, b, a : numpy.ndarray
        Float64 copies of the inputs.
    c : float
        Loss scaling (``1/n`` or ``1``).

    Raises
    ------
    ValueError
        On inconsistent shapes or invalid options.
    """
    X = np.array(X, dtype=np.float64, ndmin=2)
    y = np.array(y, dtype=np.float64).reshape(-1)
    W = np.array(W, dtype=np.float64, ndmin=2)
    n, d = X.shape
    m = W.shape[0]
    b = np.zeros(m) if b is None else np.array(b, dtype=np.float64).reshape(-1)
    a = np.array(a, dtype=np.float64).reshape(-1)
    if y.shape != (n,):
        raise ValueError(f"y must have shape ({n},), got {y.shape}")
    if W.shape != (m, d):
        raise ValueError(f"W must have shape (m, {d}), got {W.shape}")
    if b.shape != (m,) or a.shape != (m,):
        raise ValueError(f"b and a must have shape ({m},), got {b.shape}, {a.shape}")
    if loss not in _LOSSES:
        raise ValueError(f"loss must be one of {_LOSSES}, got {loss!r}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    if not 0.0 <= leak < 1.0:
        raise ValueError(f"leak must lie in [0, 1), got {leak}")
    if not bias and np.any(b != 0.0):
        raise ValueError("bias=False requires b to be zero (or None)")
    if not np.isfinite(t_end) or t_end < 0:
        raise ValueError(f"t_end must be finite and >= 0, got {t_end}")
    c = 1.0 / n if reduction == "mean" else 1.0
    return X, y, W, b, a, c


def _loss_derivative(loss):
    """Return the vectorised derivative ``l'(f; y)`` of a loss.

    Parameters
    ----------
    loss : str
        ``"exp"``, ``"logistic"`` or ``"square"``.

    Returns
    -------
    callable
        ``dl(f, y) -> numpy.ndarray``, elementwise derivative with respect to
        ``f``.  The logistic one uses ``expit`` for numerical stability:
        ``-y / (1 + exp(y f)) = -y * expit(-y f)``.
    """
    if loss == "exp":
        return lambda f, y: -y * np.exp(-y * f)
    if loss == "logistic":
        return lambda f, y: -y * expit(-y * f)
    return lambda f, y: f - y


def _make_rhs(X, y, c, m, d, leak, bias, train_outer, dl, slopes=None):
    """Build the gradient-flow right-hand side ``theta' = -grad L``.

    Parameters
    ----------
    X, y : numpy.ndarray
        Samples ``(n, d)`` and labels ``(n,)``.
    c : float
        Loss scaling.
    m, d : int
        Number of neurons and input dimension.
    leak : float
        Negative-side slope.
    bias, train_outer : bool
        Which parameter blocks are trained (the others get zero velocity).
    dl : callable
        Loss derivative from :func:`_loss_derivative`.
    slopes : numpy.ndarray or None, optional
        Fixed slope matrix ``S`` of shape ``(n, m)`` (the activation pattern as
        a parameter of the RHS).  ``None`` recomputes ``S`` from the state at
        every call (naive, non-smooth RHS).

    Returns
    -------
    callable
        ``rhs(t, state) -> numpy.ndarray`` of shape ``(m*d + 2*m,)`` where
        ``state = concat(W.ravel(), b, a)``.
    """
    md = m * d

    def rhs(t, state):
        W = state[:md].reshape(m, d)
        bb = state[md : md + m]
        aa = state[md + m :]
        Z = X @ W.T + bb  # (n, m)
        S = np.where(Z > 0.0, 1.0, leak) if slopes is None else slopes
        SZ = S * Z
        f = SZ @ aa  # (n,)
        G = c * dl(f, y)  # (n,)
        SG = S.T @ G  # (m,): sum_i G_i s_ij
        out = np.zeros_like(state)
        # dL/dw_j = a_j sum_i G_i s_ij x_i
        out[:md] = -(aa[:, None] * ((S * G[:, None]).T @ X)).ravel()
        if bias:
            out[md : md + m] = -aa * SG
        if train_outer:
            out[md + m :] = -(SZ.T @ G)
        return out

    return rhs


def _make_event(value, direction, ref=0.0):
    """Terminal event function ``value(state) - ref`` of one switching surface.

    Parameters
    ----------
    value : callable
        ``value(state) -> float``, the switching function (e.g. ``z_ij``).
    direction : {-1, +1}
        ``-1`` for a surface whose function is currently positive (fires when
        it decreases through the level), ``+1`` otherwise.
    ref : float, optional
        Crossing level.  ``0`` except for a surface flipped at an event time
        ``t_e``: then ``ref`` is the function's value at the event state
        clipped to the side the surface now belongs to (``max(g_e, 0)`` if it
        became negative, ``min(g_e, 0)`` if it became positive), i.e. a
        rounding-level offset that absorbs the root-location error of ``t_e``.

    Returns
    -------
    callable
        ``event(t, state) -> float`` returning ``value(state) - ref``, with an
        exact zero replaced by ``-direction * tiny``; it has attributes
        ``terminal = True`` and ``direction``.

    Notes
    -----
    The zero replacement matters because ``solve_ivp`` reports an event for a
    step from ``g = 0`` to ``g = 0``: without it a frozen pre-activation that
    sits exactly on the level (e.g. a ReLU neuron that died at the crossing)
    would fire at every step.  Together with ``ref`` it guarantees that the
    value at a restart point is strictly on the pre-crossing side, so the
    surface just crossed cannot fire at the restart point itself.
    """
    at_level = -direction * np.finfo(np.float64).tiny

    def event(t, state):
        g = float(value(state)) - ref
        return g if g != 0.0 else at_level

    event.terminal = True
    event.direction = direction
    return event


def _unpack(state, m, d):
    """Split a state vector into copies of ``(W, b, a)``.

    Parameters
    ----------
    state : numpy.ndarray
        ``concat(W.ravel(), b, a)``.
    m, d : int
        Number of neurons and input dimension.

    Returns
    -------
    W, b, a : numpy.ndarray
        Shapes ``(m, d)``, ``(m,)``, ``(m,)``.
    """
    md = m * d
    return (
        state[:md].reshape(m, d).copy(),
        state[md : md + m].copy(),
        state[md + m :].copy(),
    )


@dataclass
class _Restarts:
    """What :func:`_restart_loop` produced."""

    state: np.ndarray
    t: float
    event_times: list
    event_surfaces: list
    event_directions: list
    nfev: int
    n_solves: int
    status: str


def _livelocked(event_times, count: int) -> bool:
    """True when the last ``count`` events lie within ``_SAME_INSTANT`` of one another (BENCHMARKS.md: LIVELOCK)."""
    if count is None or len(event_times) < count:
        return False
    first, last = event_times[-count], event_times[-1]
    return last - first <= _SAME_INSTANT * max(1.0, abs(last))


def _restart_loop(state, t_end, surfaces, rhs_for, event_value, *, rtol, atol, max_events, livelock_events,
                  budget):
    """Event restart with sign flip: the engine of :func:`scipy_flow` and :func:`scipy_switched`.

    Parameters
    ----------
    state : numpy.ndarray
        Initial state.
    t_end : float
        Final time.
    surfaces : callable
        ``surfaces(state) -> ndarray (K,)``: every switching function at once.
    rhs_for : callable
        ``rhs_for(positive) -> rhs(t, state)``: the smooth field of the cell where the surfaces with
        ``positive[k]`` are on their positive side.
    event_value : callable
        ``event_value(k) -> value(state)``: switching function ``k`` alone (cheap).
    rtol, atol : float
        ``solve_ivp`` tolerances.
    max_events : int
        Event budget (``"event_budget"`` when one more would be needed).
    livelock_events : int or None
        Stop with ``"livelock"`` once this many consecutive events lie at one instant.
    budget : Budget
        RHS evaluations and seconds; charged across every restart.

    Returns
    -------
    _Restarts
    """
    positive = surfaces(state) > 0.0
    ref = np.zeros(positive.shape)
    t = 0.0
    ev_t, ev_k, ev_dir = [], [], []
    n_solves = 0
    status = "ok"
    budget.start()
    while t < t_end:
        events = [_make_event(event_value(k), -1 if positive[k] else 1, ref[k]) for k in range(len(positive))]
        try:
            sol = solve_ivp(budget.counted(rhs_for(positive.copy())), (t, t_end), state, method="DOP853",
                            rtol=rtol, atol=atol, events=events)
        except BudgetExceeded as stop:
            t, state = budget.last[0], np.array(budget.last[1], dtype=np.float64)
            status = stop.kind
            break
        n_solves += 1
        if sol.status == -1:
            status = f"solver_failed: {sol.message}"
            t, state = float(sol.t[-1]), sol.y[:, -1]
            break
        if sol.status == 0:
            t, state = float(t_end), sol.y[:, -1]
            break
        # terminal event: solve_ivp reports exactly one root (the first one)
        k = next(idx for idx, te in enumerate(sol.t_events) if len(te) > 0)
        t_e = float(sol.t_events[k][0])
        s_e = np.array(sol.y_events[k][0], dtype=np.float64)
        g_e = surfaces(s_e)
        crossed = (positive & (g_e < ref)) | (~positive & (g_e > ref))
        crossed[k] = False
        flips = [k] + np.nonzero(crossed)[0].tolist()
        if len(ev_t) + len(flips) > max_events:
            status = "event_budget"
            t, state = t_e, s_e
            break
        for q in flips:
            ev_t.append(t_e)
            ev_k.append(q)
            ev_dir.append(-1 if positive[q] else 1)
            positive[q] = not positive[q]
            ref[q] = min(g_e[q], 0.0) if positive[q] else max(g_e[q], 0.0)
        t, state = t_e, s_e
        if _livelocked(ev_t, livelock_events):
            status = "livelock"
            break
    return _Restarts(np.asarray(state, dtype=np.float64), float(t), ev_t, ev_k, ev_dir, budget.nfev, n_solves,
                     status)


# ----------------------------------------------------------------------------
# network peers
# ----------------------------------------------------------------------------


def scipy_flow(
    X,
    y,
    W,
    b,
    a,
    t_end,
    *,
    loss,
    reduction="mean",
    leak=0.0,
    bias=True,
    train_outer=False,
    rtol=1e-12,
    atol=None,
    max_events=10_000,
    livelock_events=100,
    max_nfev=None,
    max_seconds=None,
):
    """Integrate the gradient flow with DOP853, terminal events and restarts.

    The activation pattern (mask) is a fixed parameter of the right-hand side,
    so the RHS is smooth (polynomial/exponential) inside a cell.  One terminal
    event function per pair ``(i, j)`` returns ``z_ij``; its ``direction`` is
    ``-1`` for an active pair and ``+1`` for an inactive one.  When an event
    fires at ``t_e``, the mask of the pair is flipped, the event is recorded
    and ``solve_ivp`` is restarted from the event state ``theta(t_e)`` with a
    fresh set of ``n * m`` event callables.  Any other pair whose
    pre-activation at ``theta(t_e)`` already lies strictly on the other side of
    zero (a simultaneous crossing, which ``solve_ivp`` does not report because
    it stops at the first terminal root) is flipped and recorded at ``t_e``
    too.  A flipped pair gets the new direction and a rounding-level crossing
    level ``ref`` (its pre-activation at the event state, clipped to its new
    side; see :func:`_make_event`), kept until its next flip, so that it cannot
    fire at the restart point and a frozen pre-activation left at a
    rounding-level value does not generate spurious events.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Samples (rows ``x_i``).
    y : array_like, shape (n,)
        Labels / targets.
    W : array_like, shape (m, d)
        Initial inner weights (rows ``w_j``).
    b : array_like, shape (m,), or None
        Initial biases (must be zero, or ``None``, when ``bias=False``).
    a : array_like, shape (m,)
        Initial outer weights (frozen when ``train_outer=False``).
    t_end : float
        Final flow time (integration runs on ``[0, t_end]``).
    loss : {"exp", "logistic", "square"}
        Per-sample loss.
    reduction : {"mean", "sum"}, optional
        Loss scaling ``c = 1/n`` or ``1``.
    leak : float, optional
        Negative-side slope in ``[0, 1)``; 0 is ReLU.
    bias : bool, optional
        Train the biases.
    train_outer : bool, optional
        Train the outer weights.
    rtol : float, optional
        Relative tolerance passed to ``solve_ivp``.
    atol : float or None, optional
        Absolute tolerance; ``None`` means ``rtol * 1e-3``.
    max_events : int, optional
        Event budget.  Up to ``max_events`` events are recorded; if one more
        would be needed the run stops at its time with status
        ``"event_budget"`` (that event is not recorded).
    livelock_events : int or None, optional
        Stop with status ``"livelock"`` once this many consecutive events lie
        at one instant (within ``1e-9 max(1, |t|)``); ``None`` disables the
        guard.
    max_nfev, max_seconds : int, float or None, optional
        RHS-evaluation and wall-clock budgets over all restarts (statuses
        ``"nfev_budget"`` / ``"time_budget"``; the state returned is then the
        last stage point the RHS was evaluated at).

    Returns
    -------
    ScipyFlowResult
        Final state, recorded events, RHS-evaluation count, number of restarts
        and status.

    Notes
    -----
    Inherent limitations of the scheme (which this peer exists to exhibit):
    a pair that crosses zero and back within one DOP853 step is missed, event
    times are as accurate as the dense output and the root finder, and a
    non-transversal (sliding) crossing makes the scheme chatter until the event
    budget is spent.  In the sliding case the crossing level of the
    just-flipped pair only removes the root *at* the restart point: the root
    finder (``brentq`` with ``xtol = 4 eps``) may still place the re-fire
    within rounding of ``t_e``, so the run typically stalls at a fixed time
    (``"livelock"``) or goes on in the wrong mode (E1 of
    BENCHMARKS.md: silently wrong).  Each restart rebuilds the
    ``n * m`` event callables, which is part of the measured cost.
    """
    X, y, W, b, a, c = _validate(X, y, W, b, a, t_end, loss, reduction, leak, bias)
    n, d = X.shape
    m = W.shape[0]
    md = m * d
    dl = _loss_derivative(loss)

    def surfaces(state):
        return (X @ state[:md].reshape(m, d).T + state[md : md + m]).ravel()

    def rhs_for(positive):
        slopes = np.where(positive.reshape(n, m), 1.0, leak)
        return _make_rhs(X, y, c, m, d, leak, bias, train_outer, dl, slopes=slopes)

    def event_value(k):
        i, j = divmod(k, m)
        x_i, lo, hi, bj = X[i], j * d, (j + 1) * d, md + j
        return lambda state: x_i @ state[lo:hi] + state[bj]

    run = _restart_loop(np.concatenate([W.ravel(), b, a]), float(t_end), surfaces, rhs_for, event_value,
                        rtol=rtol, atol=rtol * 1e-3 if atol is None else atol, max_events=max_events,
                        livelock_events=livelock_events, budget=Budget(max_nfev, max_seconds))
    Wf, bf, af = _unpack(run.state, m, d)
    pairs = np.array([divmod(k, m) for k in run.event_surfaces], dtype=np.intp).reshape(-1, 2)
    return ScipyFlowResult(
        W=Wf,
        b=bf,
        a=af,
        event_times=np.asarray(run.event_times, dtype=np.float64),
        event_neurons=pairs[:, 1].copy(),
        event_samples=pairs[:, 0].copy(),
        event_directions=np.asarray(run.event_directions, dtype=np.intp),
        nfev=run.nfev,
        n_restarts=max(run.n_solves - 1, 0),
        status=run.status,
        t_final=run.t,
    )


def _solve_naive(rhs, state0, t_end, rtol, atol, budget):
    """One ``solve_ivp(DOP853)`` call under ``budget``; returns ``(t, state, status, nfev)``."""
    budget.start()
    try:
        sol = solve_ivp(budget.counted(rhs), (0.0, t_end), state0, method="DOP853", rtol=rtol, atol=atol)
    except BudgetExceeded as stop:
        t_f, state = budget.last
        return float(t_f), np.array(state, dtype=np.float64), stop.kind, budget.nfev
    status = "ok" if sol.status == 0 else f"solver_failed: {sol.message}"
    return float(sol.t[-1]), sol.y[:, -1].copy(), status, budget.nfev


def scipy_flow_naive(
    X,
    y,
    W,
    b,
    a,
    t_end,
    *,
    loss,
    reduction="mean",
    leak=0.0,
    bias=True,
    train_outer=False,
    rtol=1e-12,
    atol=None,
    max_nfev=300_000,
    max_seconds=None,
):
    """Integrate the gradient flow with DOP853 and the pattern in the RHS.

    The activation pattern is recomputed from the state at every RHS call
    (``s_ij = 1 if z_ij > 0 else leak``), i.e. the non-smooth vector field is
    handed to ``solve_ivp`` as is, without events; the adaptive step control
    has to resolve every kink by itself.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Samples (rows ``x_i``).
    y : array_like, shape (n,)
        Labels / targets.
    W : array_like, shape (m, d)
        Initial inner weights.
    b : array_like, shape (m,), or None
        Initial biases (must be zero, or ``None``, when ``bias=False``).
    a : array_like, shape (m,)
        Initial outer weights.
    t_end : float
        Final flow time.
    loss : {"exp", "logistic", "square"}
        Per-sample loss.
    reduction : {"mean", "sum"}, optional
        Loss scaling ``c = 1/n`` or ``1``.
    leak : float, optional
        Negative-side slope in ``[0, 1)``.
    bias : bool, optional
        Train the biases.
    train_outer : bool, optional
        Train the outer weights.
    rtol : float, optional
        Relative tolerance passed to ``solve_ivp``.
    atol : float or None, optional
        Absolute tolerance; ``None`` means ``rtol * 1e-3``.
    max_nfev : int or None, optional
        RHS-evaluation budget.  The RHS raises an internal exception when the
        count exceeds it; the exception is caught and the run returns with
        status ``"nfev_budget"``.
    max_seconds : float or None, optional
        Wall-clock budget (status ``"time_budget"``).

    Returns
    -------
    ScipyFlowResult
        Final state with empty event arrays, ``n_restarts = 0`` and status
        ``"ok"``, ``"nfev_budget"``, ``"time_budget"`` or
        ``"solver_failed: <message>"``.  When a budget stops the run the
        returned state is the last state the RHS was evaluated at (a
        Runge-Kutta stage point, hence only approximate) and ``t_final`` its
        time.
    """
    X, y, W, b, a, c = _validate(X, y, W, b, a, t_end, loss, reduction, leak, bias)
    n, d = X.shape
    m = W.shape[0]
    rhs = _make_rhs(X, y, c, m, d, leak, bias, train_outer, _loss_derivative(loss))
    t_f, state, status, nfev = _solve_naive(rhs, np.concatenate([W.ravel(), b, a]), float(t_end), rtol,
                                            rtol * 1e-3 if atol is None else atol, Budget(max_nfev, max_seconds))
    Wf, bf, af = _unpack(state, m, d)
    empty_f = np.zeros(0, dtype=np.float64)
    empty_i = np.zeros(0, dtype=np.intp)
    return ScipyFlowResult(
        W=Wf,
        b=bf,
        a=af,
        event_times=empty_f,
        event_neurons=empty_i,
        event_samples=empty_i.copy(),
        event_directions=empty_i.copy(),
        nfev=nfev,
        n_restarts=0,
        status=status,
        t_final=t_f,
    )


# ----------------------------------------------------------------------------
# switched affine systems (B3 twisting, B7 relay and oscillator)
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SwitchedSystem:
    """``x' = A0 x + c0 + sum_k sigma_k (A_k x + c_k)`` with ``sigma_k = sign(g_k(x))`` (``-1`` at ``g_k = 0``).

    ``g_k(x) = x^T Q_k x + <n_k, x> + beta_k``: linear surfaces (``quadratic=None``) for the twisting oscillator
    and the relay feedback system, a circle for nosnoc's oscillator (benchmarks B3, B7).

    Parameters
    ----------
    A0 : array_like, shape (N, N)
    c0 : array_like, shape (N,)
    A : array_like, shape (K, N, N)
    c : array_like, shape (K, N)
    normals : array_like, shape (K, N)
    offsets : array_like, shape (K,), optional
    quadratic : array_like, shape (K, N, N), optional
    """

    A0: np.ndarray
    c0: np.ndarray
    A: np.ndarray
    c: np.ndarray
    normals: np.ndarray
    offsets: np.ndarray | None = None
    quadratic: np.ndarray | None = None

    def __post_init__(self):
        for name in ("A0", "c0", "A", "c", "normals"):
            object.__setattr__(self, name, np.array(getattr(self, name), dtype=np.float64))
        K = self.normals.shape[0]
        offsets = np.zeros(K) if self.offsets is None else np.array(self.offsets, dtype=np.float64)
        object.__setattr__(self, "offsets", offsets)
        if self.quadratic is not None:
            object.__setattr__(self, "quadratic", np.array(self.quadratic, dtype=np.float64))

    def field(self, x, sigma) -> np.ndarray:
        """``A0 x + c0 + sum_k sigma_k (A_k x + c_k)``."""
        return self.A0 @ x + self.c0 + np.einsum("k,kij,j->i", sigma, self.A, x) + sigma @ self.c

    def switching(self, x) -> np.ndarray:
        """Every ``g_k(x)``, shape ``(K,)``."""
        g = self.normals @ x + self.offsets
        if self.quadratic is not None:
            g = g + np.einsum("kij,i,j->k", self.quadratic, x, x)
        return g

    def switching_one(self, k: int):
        """``g_k`` alone, as a callable of the state."""
        n_k, beta = self.normals[k], self.offsets[k]
        if self.quadratic is None:
            return lambda x: n_k @ x + beta
        Q = self.quadratic[k]
        return lambda x: x @ Q @ x + n_k @ x + beta


@dataclass
class ScipySwitchedResult:
    """Outcome of :func:`scipy_switched` / :func:`scipy_switched_naive`.

    Attributes
    ----------
    x : numpy.ndarray, shape (N,)
        State at ``t_final``.
    t_final : float
    event_times, event_surfaces, event_directions : numpy.ndarray
        Recorded sign flips (time, surface ``k``, ``+1`` to the positive side); empty for the naive peer.
    nfev, n_restarts : int
    status : str
        As for :class:`ScipyFlowResult`.
    """

    x: np.ndarray
    t_final: float
    event_times: np.ndarray
    event_surfaces: np.ndarray
    event_directions: np.ndarray
    nfev: int
    n_restarts: int
    status: str


def scipy_switched(system: SwitchedSystem, x0, t_end, *, rtol=1e-12, atol=None, max_events=10_000,
                   livelock_events=100, max_nfev=None, max_seconds=None) -> ScipySwitchedResult:
    """Event restart with sign flip for a :class:`SwitchedSystem` (the scheme of :func:`scipy_flow`).

    The signs are parameters of a smooth (affine) field; one terminal event per surface flips its sign and
    restarts DOP853. On the twisting oscillator this is the "scipy restart loop" of
    benchmark B3 (E3); at a sliding surface it chatters.

    Parameters
    ----------
    system : SwitchedSystem
    x0 : array_like, shape (N,)
    t_end : float
    rtol, atol, max_events, livelock_events, max_nfev, max_seconds
        As for :func:`scipy_flow`.

    Returns
    -------
    ScipySwitchedResult
    """
    run = _restart_loop(np.array(x0, dtype=np.float64), float(t_end), system.switching,
                        lambda positive: _switched_rhs(system, np.where(positive, 1.0, -1.0)),
                        system.switching_one, rtol=rtol, atol=rtol * 1e-3 if atol is None else atol,
                        max_events=max_events, livelock_events=livelock_events,
                        budget=Budget(max_nfev, max_seconds))
    return ScipySwitchedResult(run.state, run.t, np.asarray(run.event_times, dtype=np.float64),
                               np.asarray(run.event_surfaces, dtype=np.intp),
                               np.asarray(run.event_directions, dtype=np.intp), run.nfev,
                               max(run.n_solves - 1, 0), run.status)


def _switched_rhs(system: SwitchedSystem, sigma):
    """The field of :class:`SwitchedSystem` with fixed signs ``sigma`` (``None``: ``sign(g(x))`` per call)."""
    if sigma is not None:
        A = system.A0 + np.einsum("k,kij->ij", sigma, system.A)
        c = system.c0 + sigma @ system.c
        return lambda t, x: A @ x + c
    return lambda t, x: system.field(x, np.where(system.switching(x) > 0.0, 1.0, -1.0))


def scipy_switched_naive(system: SwitchedSystem, x0, t_end, *, rtol=1e-12, atol=None, max_nfev=300_000,
                         max_seconds=None) -> ScipySwitchedResult:
    """DOP853 on the discontinuous field of a :class:`SwitchedSystem`, signs recomputed at every RHS call.

    Parameters
    ----------
    system : SwitchedSystem
    x0 : array_like, shape (N,)
    t_end : float
    rtol, atol, max_nfev, max_seconds
        As for :func:`scipy_flow_naive`.

    Returns
    -------
    ScipySwitchedResult
        With empty event arrays.
    """
    t_f, x, status, nfev = _solve_naive(_switched_rhs(system, None), np.array(x0, dtype=np.float64), float(t_end),
                                        rtol, rtol * 1e-3 if atol is None else atol, Budget(max_nfev, max_seconds))
    empty_i = np.zeros(0, dtype=np.intp)
    return ScipySwitchedResult(x, t_f, np.zeros(0), empty_i, empty_i.copy(), nfev, 0, status)
