"""SciPy peers for the exact gradient flow of two-layer (leaky-)ReLU networks.

This module is deliberately independent of :mod:`flowlib`: it re-derives the
flow from the shared mathematical conventions using only :mod:`numpy` and
:mod:`scipy`, and integrates it the way a user would do today with
``scipy.integrate.solve_ivp(method="DOP853")``.

Two peers are provided:

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

from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import expit

__all__ = ["ScipyFlowResult", "scipy_flow", "scipy_flow_naive"]

_LOSSES = ("exp", "logistic", "square")
_REDUCTIONS = ("mean", "sum")


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
        ``"event_budget"``, ``"nfev_budget"`` or ``"solver_failed: <message>"``.
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


def _make_rhs(X, y, c, m, d, leak, bias, train_outer, dl, slopes=None, counter=None):
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
    counter : dict or None, optional
        When given, ``counter["nfev"]`` is incremented at each call,
        ``counter["last"]`` stores the last ``(t, state)`` and
        :class:`_NfevBudgetExceeded` is raised once ``counter["nfev"]`` exceeds
        ``counter["max"]``.

    Returns
    -------
    callable
        ``rhs(t, state) -> numpy.ndarray`` of shape ``(m*d + 2*m,)`` where
        ``state = concat(W.ravel(), b, a)``.
    """
    md = m * d

    def rhs(t, state):
        if counter is not None:
            counter["nfev"] += 1
            counter["last"] = (t, state)
            if counter["nfev"] > counter["max"]:
                raise _NfevBudgetExceeded
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


class _NfevBudgetExceeded(Exception):
    """Raised inside the naive RHS to abort ``solve_ivp`` on the nfev budget."""


def _make_event(x_i, j, d, md, direction, ref=0.0):
    """Closure factory for the event function of one (sample, neuron) pair.

    Parameters
    ----------
    x_i : numpy.ndarray
        Sample ``x_i``, shape ``(d,)``.
    j : int
        Neuron index.
    d : int
        Input dimension.
    md : int
        Offset of the bias block in the state vector (``m * d``).
    direction : {-1, +1}
        ``-1`` for a currently active pair (fires when ``z_ij`` decreases
        through 0), ``+1`` for an inactive one.
    ref : float, optional
        Crossing level.  ``0`` except for a pair whose mask was flipped at an
        event time ``t_e``: then ``ref`` is the pre-activation ``z_e`` at the
        event state clipped to the side the pair now belongs to
        (``max(z_e, 0)`` if it became inactive, ``min(z_e, 0)`` if it became
        active), i.e. a rounding-level offset that absorbs the root-location
        error of ``t_e``.

    Returns
    -------
    callable
        ``event(t, state) -> float`` returning ``z_ij - ref``, with an exact
        zero replaced by ``-direction * tiny``; it has attributes
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
    lo, hi, bj = j * d, (j + 1) * d, md + j
    at_level = -direction * np.finfo(np.float64).tiny

    def event(t, state):
        g = float(x_i @ state[lo:hi] + state[bj]) - ref
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


# ----------------------------------------------------------------------------
# peers
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
    finder (``brentq``
    with ``xtol = 4 eps``) may still place the re-fire within rounding of
    ``t_e``, so the run typically stalls at a fixed time until
    ``max_events`` is reached (each of those restarts rebuilds the ``n * m``
    event callables, which is part of the measured cost).
    """
    X, y, W, b, a, c = _validate(X, y, W, b, a, t_end, loss, reduction, leak, bias)
    n, d = X.shape
    m = W.shape[0]
    md = m * d
    if atol is None:
        atol = rtol * 1e-3
    dl = _loss_derivative(loss)

    state = np.concatenate([W.ravel(), b, a])
    active = (X @ W.T + b) > 0.0  # (n, m) mask, fixed between events
    t = 0.0
    ev_t, ev_j, ev_i, ev_dir = [], [], [], []
    ref = np.zeros((n, m))  # crossing levels (nonzero only after a flip)
    nfev = 0
    n_solves = 0
    status = "ok"

    while t < t_end:
        slopes = np.where(active, 1.0, leak)
        rhs = _make_rhs(X, y, c, m, d, leak, bias, train_outer, dl, slopes=slopes)
        events = []
        pairs = []
        for i in range(n):
            x_i = X[i]
            for j in range(m):
                direction = -1 if active[i, j] else 1
                events.append(_make_event(x_i, j, d, md, direction, ref[i, j]))
                pairs.append((i, j))
        sol = solve_ivp(
            rhs,
            (t, t_end),
            state,
            method="DOP853",
            rtol=rtol,
            atol=atol,
            events=events,
        )
        n_solves += 1
        nfev += int(sol.nfev)
        if sol.status == -1:
            status = f"solver_failed: {sol.message}"
            t = float(sol.t[-1])
            state = sol.y[:, -1]
            break
        if sol.status == 0:
            t = float(t_end)
            state = sol.y[:, -1]
            break
        # terminal event: solve_ivp reports exactly one root (the first one)
        k = next(idx for idx, te in enumerate(sol.t_events) if len(te) > 0)
        t_e = float(sol.t_events[k][0])
        s_e = np.array(sol.y_events[k][0], dtype=np.float64)
        flips = [pairs[k]]
        Z = X @ s_e[:md].reshape(m, d).T + s_e[md : md + m]
        crossed = (active & (Z < ref)) | (~active & (Z > ref))
        crossed[pairs[k]] = False
        flips.extend(zip(*(idx.tolist() for idx in np.nonzero(crossed))))
        if len(ev_t) + len(flips) > max_events:
            status = "event_budget"
            t, state = t_e, s_e
            break
        for i, j in flips:
            ev_t.append(t_e)
            ev_i.append(i)
            ev_j.append(j)
            ev_dir.append(-1 if active[i, j] else 1)
            active[i, j] = not active[i, j]
            ref[i, j] = min(Z[i, j], 0.0) if active[i, j] else max(Z[i, j], 0.0)
        t, state = t_e, s_e

    Wf, bf, af = _unpack(state, m, d)
    return ScipyFlowResult(
        W=Wf,
        b=bf,
        a=af,
        event_times=np.asarray(ev_t, dtype=np.float64),
        event_neurons=np.asarray(ev_j, dtype=np.intp),
        event_samples=np.asarray(ev_i, dtype=np.intp),
        event_directions=np.asarray(ev_dir, dtype=np.intp),
        nfev=nfev,
        n_restarts=max(n_solves - 1, 0),
        status=status,
        t_final=float(t),
    )


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
    max_nfev : int, optional
        RHS-evaluation budget.  The RHS raises an internal exception when the
        count exceeds it; the exception is caught and the run returns with
        status ``"nfev_budget"``.

    Returns
    -------
    ScipyFlowResult
        Final state with empty event arrays, ``n_restarts = 0`` and status
        ``"ok"``, ``"nfev_budget"`` or ``"solver_failed: <message>"``.  On
        ``"nfev_budget"`` the returned state is the last state the RHS was
        evaluated at (a Runge-Kutta stage point, hence only approximate) and
        ``t_final`` its time.
    """
    X, y, W, b, a, c = _validate(X, y, W, b, a, t_end, loss, reduction, leak, bias)
    n, d = X.shape
    m = W.shape[0]
    if atol is None:
        atol = rtol * 1e-3
    dl = _loss_derivative(loss)
    state0 = np.concatenate([W.ravel(), b, a])
    counter = {"nfev": 0, "max": int(max_nfev), "last": (0.0, state0)}
    rhs = _make_rhs(X, y, c, m, d, leak, bias, train_outer, dl, counter=counter)

    try:
        sol = solve_ivp(rhs, (0.0, t_end), state0, method="DOP853", rtol=rtol, atol=atol)
    except _NfevBudgetExceeded:
        t_f, state = counter["last"]
        status = "nfev_budget"
        nfev = int(max_nfev)
    else:
        nfev = int(sol.nfev)
        t_f, state = float(sol.t[-1]), sol.y[:, -1]
        status = "ok" if sol.status == 0 else f"solver_failed: {sol.message}"

    Wf, bf, af = _unpack(np.asarray(state, dtype=np.float64), m, d)
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
        t_final=float(t_f),
    )
