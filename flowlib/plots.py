"""Plots of flow and descent results.

Every plot takes the result first and ``ax=None``: it draws on ``ax`` when one is given, on a new figure otherwise,
and returns the figure (``ax.figure`` when ``ax`` was given). matplotlib is imported lazily, with the
non-interactive Agg backend when no display is configured. mpmath results are rounded to float64 for drawing.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from flowlib.result import DescentResult, FlowResult

KIND_COLOURS = {"cross": "tab:blue", "slide_start": "tab:orange", "slide_end": "tab:green", "stick": "tab:red",
                "tie": "tab:purple", "zeno": "black"}
#: Sign of a label ``y_i`` or of an outer weight ``a_j``.
SIGN_COLOURS = {1: "tab:red", -1: "tab:blue"}
#: Side entered at a gradient-descent flip: ``z > 0`` or ``z <= 0``.
FLIP_COLOURS = {1: "tab:orange", -1: "tab:cyan"}
#: Marker and legend text of the side entered at an event (+1 active, -1 inactive, 0 stays on the surface).
SIDE_MARKERS = {1: ("^", "enters active side"), -1: ("v", "leaves active side"), 0: ("o", "stays on surface")}
#: The event raster draws a mark entering the active (inactive) side this much above (below) its surface's row.
SIDE_OFFSET = 0.15
#: The event raster labels each surface on the y axis when it has at most this many.
MAX_LABELLED_SURFACES = 16
#: Neuron-direction plots draw the hyperplanes ``<w, x_i> = 0`` when there are at most this many samples.
MAX_HYPERPLANES = 12
_GRID = 201  # points per axis of the grid on which the 2-D decision boundary is contoured


# ----- figure and number helpers -------------------------------------------------------------------------------
def _axes(ax):
    import matplotlib

    if ax is not None:
        return ax.figure, ax
    if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg", "cairo") and not _has_display():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    return fig, ax


def _has_display() -> bool:
    import os

    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or os.name == "nt")


def _floats(values) -> np.ndarray:
    """``values`` as float64 (mpf numbers are rounded to nearest)."""
    return np.asarray(values, dtype=np.float64)


def _ln(values) -> np.ndarray:
    """``ln`` of non-negative numbers as float64; taken in mpmath for mpf (finite below float64's 1e-308)."""
    values = np.asarray(values)
    if values.dtype != object:
        with np.errstate(divide="ignore"):
            return np.log(values)
    from mpmath import mp

    return np.array([float(mp.log(v)) if v > 0 else -math.inf for v in values])


def _precision(result):
    """``mp.workdps(result.dps)`` for an mpmath result, a null context for float64."""
    if result.dps is None:
        return contextlib.nullcontext()
    from mpmath import mp

    return mp.workdps(result.dps)


def _check_result(result, name: str):
    if not isinstance(result, (FlowResult, DescentResult)):
        raise ValueError(f"result must be a FlowResult or a DescentResult for {name}, got {type(result).__name__}")


def _check_dimension(result, allowed, name: str):
    d = result.problem.d
    if d not in allowed:
        raise ValueError(f"result: {name} needs inputs of dimension {' or '.join(map(str, allowed))}, got d = {d}")


def _record_times(result) -> np.ndarray:
    """Flow times of the recorded states: step boundaries of a flow, ``k lr`` of a descent (float64)."""
    return result.times if isinstance(result, DescentResult) else _floats(result.t)


def _log1p_times(result) -> np.ndarray:
    """``ln(1 + t)`` at the recorded states (the log clock's ``s``, finite where ``t`` overflows)."""
    if isinstance(result, FlowResult) and result.s is not None:
        return _floats(result.s)
    return np.log1p(_record_times(result))


def _states_at(result, times) -> tuple[np.ndarray, np.ndarray]:
    """Times and the packed states there, at the run's precision: the dense output of a flow that kept it, else
    the nearest recorded states (step boundaries or recorded iterates, nearest in ``ln(1 + t)``), whose times
    replace ``times``."""
    times = np.atleast_1d(_floats(times))
    if isinstance(result, FlowResult) and result.coefficients is not None:
        return times, result.states_at(times)
    recorded, target = _log1p_times(result), np.log1p(times)
    rows = np.clip(np.searchsorted(recorded, target), 0, len(recorded) - 1)
    earlier = np.maximum(rows - 1, 0)
    rows = np.where(target - recorded[earlier] < recorded[rows] - target, earlier, rows)
    return _record_times(result)[rows], result.states[rows]


def _set_time_scale(ax, t: np.ndarray):
    """Log x scale (symlog when ``t = 0`` occurs) when the positive times span more than two decades."""
    positive = t[t > 0]
    if not len(positive) or positive.max() / positive.min() <= 100:
        return
    if np.all(t > 0):
        ax.set_xscale("log")
    else:
        ax.set_xscale("symlog", linthresh=positive.min())


def _event_lines(ax, events, position=float, alpha: float = 0.25):
    """A vertical line at ``position(event.t)`` per event (skipped when not finite): one Line2D per kind (its
    segments separated by NaN, x data ``[x_1, x_1, nan, x_2, ...]``), coloured by and labelled with the kind."""
    by_kind = {}
    for ev in events:
        x = position(ev.t)
        if math.isfinite(x):
            by_kind.setdefault(ev.kind, []).append(x)
    for kind, xs in by_kind.items():
        x = np.repeat(xs, 3)
        x[2::3] = np.nan
        y = np.tile([0.0, 1.0, np.nan], len(xs))
        ax.plot(x, y, transform=ax.get_xaxis_transform(), color=KIND_COLOURS.get(kind, "grey"), alpha=alpha, lw=0.8,
                label=kind)


def _final_time(result) -> str:
    """``t = T``, or ``ln t = ...`` where ``T`` overflows float64."""
    t = _record_times(result)[-1]
    return f"t = {t:.3g}" if math.isfinite(t) else f"ln t = {float(result.log_t[-1]):.4g}"


def _log_time(t) -> float:
    t = float(t)
    return math.log(t) if t > 0 else -math.inf


# ----- loss ----------------------------------------------------------------------------------------------------
def _recorded_loss(result, log: bool) -> np.ndarray:
    if not log:
        return _floats(result.loss)
    if getattr(result, "log_loss", None) is not None:
        return _floats(result.log_loss)
    return _ln(result.loss)


def _dense_loss(result: FlowResult, log: bool, log_axis: bool, samples: int) -> tuple[np.ndarray, np.ndarray]:
    """``samples`` points of the dense output strictly inside the run: uniform in ``ln t`` on a log axis, else
    geometric from ``1e-3`` of the run (the symlog threshold) to its end."""
    if result.coefficients is None or samples < 1 or result.n_steps == 0:
        return np.empty(0), np.empty(0)
    if log_axis:
        ln_t = _floats(result.log_t)
        ln_t = ln_t[np.isfinite(ln_t)]
        x = np.linspace(ln_t[0], ln_t[-1], samples + 2)[1:-1]
        at = {"log_t": x}
    else:
        t = _floats(result.t)
        x = np.geomspace(_symlog_threshold(t), t[-1], samples + 2)[1:-1]
        x = x[(x > t[0]) & (x < t[-1])]
        at = {"t": x}
    values = result.log_loss_at(**at) if log else result.loss_at(**at)
    return x, _floats(values)


def _symlog_threshold(t: np.ndarray) -> float:
    return max(t[0], 1e-3 * (t[-1] - t[0]))


def _loss_curve(result, log: bool, samples: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(x, y, log_axis)``: the recorded losses and dense samples merged in time order; ``x`` is ``ln t`` for a
    log-clock flow (``log_axis``), else ``t``; non-finite ``x`` (``ln 0``) left out."""
    log_axis = isinstance(result, FlowResult) and result.clock == "log"
    x = _floats(result.log_t) if log_axis else _record_times(result)
    y = _recorded_loss(result, log)
    if isinstance(result, FlowResult):
        x_dense, y_dense = _dense_loss(result, log, log_axis, samples)
        x, y = np.concatenate([x, x_dense]), np.concatenate([y, y_dense])
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    keep = np.isfinite(x)
    return x[keep], y[keep], log_axis


def loss(result, ax=None, *, log: bool = False, samples: int = 400):
    """Loss against flow time, with the events as faint vertical lines coloured by kind.

    Parameters
    ----------
    result : FlowResult or DescentResult
        A flow (float64 or mpmath, any clock, with or without dense output) or a gradient descent, drawn at
        flow time ``t = k lr``.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when ``None``.
    log : bool
        Plot ``ln L`` on a linear axis (finite where ``L`` underflows: the log clock's :attr:`FlowResult.log_loss`)
        instead of ``L`` on a log axis.
    samples : int
        Points of the dense output added between the step boundaries (none without dense output).

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    The step boundaries (recorded iterates) are always on the curve, with exactly the recorded losses. Time is
    on a symlog axis, or ``ln t`` on a linear axis for a log-clock flow (``t`` overflows past ``1.8e308``).
    """
    _check_result(result, "loss")
    fig, ax = _axes(ax)
    x, y, log_axis = _loss_curve(result, log, samples)
    style = {"marker": "o", "ms": 3} if len(x) < 3 else {}
    ax.plot(x, y, color="tab:blue", lw=1.5, label="ln L" if log else "L", **style)
    if log_axis:
        ax.set_xlabel("ln t  (t: flow time)")
    else:
        t = _record_times(result)
        if t[-1] > t[0]:
            ax.set_xscale("symlog", linthresh=_symlog_threshold(t))
        ax.set_xlabel("flow time t = k lr" if isinstance(result, DescentResult) else "flow time t")
    if not log:
        ax.set_yscale("log")
    ax.set_ylabel("ln L" if log else "L")
    if isinstance(result, DescentResult):
        ax.set_title(f"gradient descent, lr = {result.lr:g} ({result.n_flips} flips, status {result.status})")
    else:
        _event_lines(ax, result.events, _log_time if log_axis else float)
        ax.set_title(f"loss ({result.n_events} events, status {result.status})")
    ax.legend(loc="best", fontsize="small")
    return fig


# ----- event raster --------------------------------------------------------------------------------------------
def _raster_marks(result):
    """``(t, neuron, sample, side, colours, handles, title)`` of a flow's events (colour: kind) or of a descent's
    flips (colour: side entered), with the legend handles of the colours present."""
    from matplotlib.lines import Line2D

    if isinstance(result, DescentResult):
        marks = result.flips
        t = np.array([f.k * result.lr for f in marks], dtype=np.float64)
        colours = [FLIP_COLOURS[f.side] for f in marks]
        handles = [Line2D([], [], ls="", marker=SIDE_MARKERS[s][0], color=FLIP_COLOURS[s], label=label)
                   for s, label in ((1, "enters z > 0"), (-1, "enters z <= 0")) if any(f.side == s for f in marks)]
        return (t, *_surfaces(marks), colours, handles,
                f"gradient descent flips (lr = {result.lr:g}, {len(marks)} flips)")
    marks = result.events
    t = np.array([float(e.t) for e in marks], dtype=np.float64)
    kinds = {e.kind for e in marks}
    colours = [KIND_COLOURS.get(e.kind, "grey") for e in marks]
    handles = [Line2D([], [], ls="", marker="s", color=KIND_COLOURS[k], label=k) for k in KIND_COLOURS if k in kinds]
    handles += [Line2D([], [], ls="", marker=m, color="grey", label=label) for s, (m, label) in SIDE_MARKERS.items()
                if any(e.side == s for e in marks)]
    return (t, *_surfaces(marks), colours, handles, f"activation events ({len(marks)})")


def _surfaces(marks) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.array([e.neuron for e in marks], dtype=np.int64), np.array([e.sample for e in marks], dtype=np.int64),
            np.array([e.side for e in marks], dtype=np.int64))


def _label_surfaces(ax, neuron: np.ndarray, sample: np.ndarray, n: int):
    """Y ticks ``j=.., i=..`` at the surfaces present when there are few of them."""
    rows, first = np.unique(neuron * n + sample, return_index=True)
    if len(rows) > MAX_LABELLED_SURFACES:
        ax.set_ylabel("surface  neuron j * n + sample i")
        return
    ax.set_yticks(rows, [f"j={neuron[q]}, i={sample[q]}" for q in first])
    ax.set_ylim(rows.min() - 0.6, rows.max() + 0.6)
    ax.set_ylabel("surface  <w_j, x_i> + b_j = 0")


def event_raster(result, ax=None):
    """One marker per event: flow time against the surface ``(neuron j, sample i)``.

    Parameters
    ----------
    result : FlowResult or DescentResult
        A flow's events, coloured by kind (cross, slide_start, slide_end, stick, tie, zeno) with the marker
        giving the side entered (up-triangle the active side, down-triangle the inactive one, circle when the
        state stays on the surface); or a descent's flips at ``t = k lr``, coloured and marked by the side
        entered.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when ``None``.

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    The y coordinate is ``j * n + i`` (plus or minus :data:`SIDE_OFFSET` for the side entered); with at most
    :data:`MAX_LABELLED_SURFACES` surfaces each is labelled ``j=.., i=..``. Event times past float64's range
    (log clock beyond ``1.8e308``) are left out.
    """
    _check_result(result, "event_raster")
    fig, ax = _axes(ax)
    t, neuron, sample, side, colours, handles, title = _raster_marks(result)
    ax.set_title(title)
    ax.set_xlabel("flow time t = k lr" if isinstance(result, DescentResult) else "flow time t")
    if not len(t):
        ax.text(0.5, 0.5, "no events", ha="center", va="center", transform=ax.transAxes)
        return fig
    row = neuron * result.problem.n + sample
    colours = np.array(colours, dtype=object)
    finite = np.isfinite(t)
    for s, (marker, _) in SIDE_MARKERS.items():
        sel = (side == s) & finite
        if np.any(sel):
            ax.scatter(t[sel], row[sel] + SIDE_OFFSET * s, c=list(colours[sel]), marker=marker, s=24)
    _label_surfaces(ax, neuron, sample, result.problem.n)
    _set_time_scale(ax, t[finite])
    ax.legend(handles=handles, loc="best", fontsize="small")
    return fig


# ----- neuron directions ---------------------------------------------------------------------------------------
def _warped_times(result) -> tuple[np.ndarray, float]:
    """``u = ln(1 + t / t_1)`` at the recorded states, with ``t_1`` the first positive recorded time (the first
    step): linear before it, ``ln t`` after it (finite where ``t`` overflows). Returns ``u`` and ``ln t_1``."""
    with np.errstate(divide="ignore"):
        ln_t = _floats(result.log_t) if isinstance(result, FlowResult) else np.log(result.times)
    finite = np.flatnonzero(np.isfinite(ln_t))
    if not len(finite):
        return np.zeros(len(ln_t)), 0.0
    ln_t1 = ln_t[finite[0]]
    return np.logaddexp(0.0, ln_t - ln_t1), ln_t1


def _direction_samples(result, n_times: int) -> tuple[np.ndarray, np.ndarray]:
    """``u`` (:func:`_warped_times`) and float64 packed states, in time order: at most ``n_times`` recorded
    states evenly by index (the steps are short where the state moves fast), the first and the last included,
    and with dense output ``n_times - 2`` more points uniform in ``u`` between them."""
    u, ln_t1 = _warped_times(result)
    rows = np.unique(np.linspace(0, len(u) - 1, min(max(n_times, 2), len(u))).round().astype(np.int64))
    u_parts, state_parts = [u[rows]], [result.states[rows]]
    if isinstance(result, FlowResult) and result.coefficients is not None and u[-1] > u[0]:
        inside = np.linspace(u[0], u[-1], max(n_times, 2))[1:-1]
        u_parts.append(inside)
        state_parts.append(result.states_at(log_t=ln_t1 + inside + np.log(-np.expm1(-inside))))  # t_1 (e^u - 1)
    u = np.concatenate(u_parts)
    order = np.argsort(u, kind="stable")
    return u[order], _floats(np.concatenate(state_parts))[order]


def _unit_rows(V: np.ndarray) -> np.ndarray:
    """``v / |v|`` along the last axis (NaN for a zero vector)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return V / np.linalg.norm(V, axis=-1, keepdims=True)


def _direction_inputs(problem) -> np.ndarray:
    """The 2-D vectors neuron directions are compared with: ``x_i`` for ``d = 2``, ``(x_i, 1)`` for ``d = 1`` with a
    bias (then the neuron's direction is that of ``(w_j, b_j)``, Boursier & Flammarion's Figure 2)."""
    return problem.X if problem.d == 2 else problem.augmented_inputs


def _draw_data_directions(ax, problem, outer: float):
    """Unit circle, ``x_i / |x_i|`` coloured by the sign of ``y_i``, and the hyperplanes ``<w, x_i> = 0`` (dotted
    lines through the origin up to radius ``outer``)."""
    angle = np.linspace(0.0, 2.0 * np.pi, 361)
    ax.plot(np.cos(angle), np.sin(angle), color="0.6", lw=0.8, zorder=1)
    U = _unit_rows(_direction_inputs(problem))
    for ux, uy in U if len(U) <= MAX_HYPERPLANES else ():
        ax.plot([-outer * uy, outer * uy], [outer * ux, -outer * ux], ":", color="tab:green", lw=0.7, alpha=0.6,
                zorder=1)
    sign = np.where(problem.y > 0, 1, -1)
    what = "x_i / |x_i|" if problem.d == 2 else "x_i: (x_i, 1) / |(x_i, 1)|"
    for s, text in ((1, "y > 0"), (-1, "y < 0")):
        if np.any(sign == s):
            ax.scatter(U[sign == s, 0], U[sign == s, 1], marker="*", s=140, color=SIGN_COLOURS[s], edgecolor="k",
                       linewidth=0.5, zorder=4, label=f"{what}, {text}")


def neuron_directions(result, ax=None, *, n_times: int = 200, spread: float = 0.5):
    """Trajectories of the neuron directions ``w_j(t) / |w_j(t)|`` among the data directions, for 2-D inputs.

    The radius grows with log-time: ``1 + spread * u(t) / u(T)`` with ``u(t) = ln(1 + t / t_1)`` and ``t_1`` the
    first step (linear in ``t`` before it, ``ln t`` after it), so each trajectory spirals out from the unit
    circle (``spread=0`` draws on the circle itself). Trajectories are coloured by the sign of ``a_j(0)``
    (tab:red positive, tab:blue negative), with an open circle at ``t = 0`` and a filled one at the end; the data
    directions ``x_i / |x_i|`` are stars on the unit circle coloured by the sign of ``y_i``, and the hyperplanes
    ``<w, x_i> = 0`` dotted green lines (the activation cones of Boursier & Flammarion, Figure 2; drawn for at
    most :data:`MAX_HYPERPLANES` samples).

    Parameters
    ----------
    result : FlowResult or DescentResult
        Of a problem with ``d = 2`` inputs (with a bias the first two weight coordinates are drawn), or with
        ``d = 1`` and a bias: then the directions of ``(w_j, b_j)`` among those of ``(x_i, 1)`` (seed 003's
        Figure 2).
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when ``None``.
    n_times : int
        Points per trajectory: at most ``n_times`` recorded states (step boundaries or recorded iterates, evenly
        by index, the first and the last included) and, for a flow with dense output, ``n_times - 2`` more
        spread uniformly in ``u(t)``. Without dense output long steps show as chords.
    spread : float
        Radius added by the end of the run.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        Naming ``result``, when its problem has neither ``d = 2`` nor ``d = 1`` with a bias.
    """
    from matplotlib.lines import Line2D

    _check_result(result, "neuron_directions")
    if not (result.problem.d == 1 and result.problem.bias):
        _check_dimension(result, (2,), "neuron_directions")
    fig, ax = _axes(ax)
    problem = result.problem
    u, states = _direction_samples(result, n_times)
    fraction = (u - u[0]) / (u[-1] - u[0]) if u[-1] > u[0] else np.zeros(len(u))
    P = (1.0 + spread * fraction)[:, None, None] * _unit_rows(states[:, :, :2])  # (len(u), m, 2)
    colours = [SIGN_COLOURS[1 if a >= 0 else -1] for a in _floats(result.states[0, :, problem.d + 1])]
    _draw_data_directions(ax, problem, 1.0 + spread)
    for j, colour in enumerate(colours):
        ax.plot(P[:, j, 0], P[:, j, 1], color=colour, lw=1.0, alpha=0.7, zorder=2, gid=f"neuron {j}")
    ax.scatter(P[0, :, 0], P[0, :, 1], s=30, facecolors="none", edgecolors=colours, zorder=3, label="start")
    ax.scatter(P[-1, :, 0], P[-1, :, 1], s=30, c=colours, edgecolors="k", linewidths=0.5, zorder=3, label="end")
    handles, _ = ax.get_legend_handles_labels()
    handles = [h for h in handles if h.get_label().startswith("x_i")]
    handles += [Line2D([], [], color=SIGN_COLOURS[s], label=f"w_j / |w_j|, a_j {text} 0")
                for s, text in ((1, ">"), (-1, "<")) if SIGN_COLOURS[s] in colours]
    handles += [Line2D([], [], ls="", marker="o", mfc="none", mec="k", label="t = 0"),
                Line2D([], [], ls="", marker="o", color="k", label=_final_time(result))]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small", borderaxespad=0)
    ax.set_aspect("equal")
    ax.set_xlabel("w_1 / |w|" if problem.d == 2 else "w / |(w, b)|")
    ax.set_ylabel("w_2 / |w|" if problem.d == 2 else "b / |(w, b)|")
    ax.set_title(f"neuron directions (radius 1 + {spread:g} ln(1 + t/t_1) / ln(1 + T/t_1))" if spread else
                 "neuron directions")
    return fig


# ----- decision boundary ---------------------------------------------------------------------------------------
def _default_boundary_times(result, count: int) -> np.ndarray:
    """``count`` times geometric from the first positive recorded time (at most ``1e-3`` of the last) to the last
    finite one, included."""
    t = _record_times(result)
    positive = t[(t > 0) & np.isfinite(t)]
    if not len(positive):
        return t[:1]
    return np.unique(np.geomspace(min(positive[0], 1e-3 * positive[-1]), positive[-1], count))


def _boundary_1d(result, times) -> tuple[np.ndarray, np.ndarray]:
    """Times and ``x*(t)`` there (:func:`flowlib.asymptotics.decision_boundary`, at the run's precision: ``x*``
    cancels). Default: the recorded states, and 200 geometric times of the dense output
    (:func:`_default_boundary_times`)."""
    from flowlib import asymptotics

    if times is not None:
        parts = [_states_at(result, times)]
    else:
        parts = [(_record_times(result), result.states)]
        if isinstance(result, FlowResult) and result.coefficients is not None:
            extra = np.setdiff1d(_default_boundary_times(result, 200), parts[0][0])
            parts += [(extra, result.states_at(extra))] if len(extra) else []
    with _precision(result):
        values = [_floats(asymptotics.decision_boundary(result.problem, states)) for _, states in parts]
    t = np.concatenate([part[0] for part in parts])
    order = np.argsort(t, kind="stable")
    return t[order], np.concatenate(values)[order]


def _plot_boundary_1d(ax, result, times):
    t, x_star = _boundary_1d(result, times)
    keep = (t > 0) & np.isfinite(t)
    ax.plot(t[keep], x_star[keep], color="k", lw=1.5, label="x*(t): f(x*) = 0")
    labelled = set()
    for xi, yi in zip(result.problem.X[:, 0], result.problem.y):
        s = 1 if yi > 0 else -1
        ax.axhline(xi, color=SIGN_COLOURS[s], lw=0.8, ls="--", alpha=0.6,
                   label=None if s in labelled else f"x_i, y {'>' if s > 0 else '<'} 0")
        labelled.add(s)
    _set_time_scale(ax, t[keep])
    ax.set_xlabel("flow time t = k lr" if isinstance(result, DescentResult) else "flow time t")
    ax.set_ylabel("x*")
    ax.set_title("decision boundary")
    ax.legend(loc="best", fontsize="small")


def _output_on(points: np.ndarray, state: np.ndarray, leak: float) -> np.ndarray:
    """``f(x) = sum_j a_j sigma(<w_j, x> + b_j)`` at ``points`` (shape ``(p, 2)``) for one packed state."""
    z = points @ state[:, :2].T + state[:, 2]
    return np.where(z > 0, z, leak * z) @ state[:, 3]


def _data_grid(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A ``_GRID x _GRID`` mesh over a square holding the data with a 15% margin."""
    lo, hi = X.min(axis=0), X.max(axis=0)
    centre = (lo + hi) / 2
    half = 0.65 * max(np.max(hi - lo), 1e-3 * max(np.max(np.abs(X)), 1.0))
    return np.meshgrid(*(np.linspace(c - half, c + half, _GRID) for c in centre))


def _plot_boundary_2d(ax, result, times):
    import matplotlib
    from matplotlib.lines import Line2D

    problem = result.problem
    times, states = _states_at(result, _default_boundary_times(result, 5) if times is None else times)
    states = _floats(states)
    xx, yy = _data_grid(problem.X)
    points = np.column_stack([xx.ravel(), yy.ravel()])
    shades = matplotlib.colormaps["Purples"](np.linspace(0.35, 1.0, len(times)))
    handles = []
    for t, state, shade in zip(times, states, shades):
        f = _output_on(points, state, problem.leak).reshape(xx.shape)
        changes_sign = f.min() < 0 < f.max()
        if changes_sign:
            ax.contour(xx, yy, f, levels=[0.0], colors=[shade], linewidths=1.5)
        handles.append(Line2D([], [], color=shade, lw=1.5,
                              label=f"f = 0 at t = {t:.3g}" + ("" if changes_sign else " (f has one sign)")))
    sign = np.where(problem.y > 0, 1, -1)
    for s, text in ((1, "y > 0"), (-1, "y < 0")):
        if np.any(sign == s):
            handles.append(ax.scatter(*problem.X[sign == s].T, s=25, color=SIGN_COLOURS[s], edgecolor="k",
                                      linewidth=0.5, zorder=3, label=f"x_i, {text}"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small", borderaxespad=0)
    ax.set_aspect("equal")
    ax.set_xlabel("x_1")
    ax.set_ylabel("x_2")
    ax.set_title("decision boundary f(x) = 0")


def decision_boundary(result, ax=None, *, times=None):
    """Where the network output ``f(x) = sum_j a_j sigma(<w_j, x> + b_j)`` changes sign, over time.

    Parameters
    ----------
    result : FlowResult or DescentResult
        Of a problem with ``d = 1`` or ``d = 2`` inputs.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when ``None``.
    times : array_like, optional
        Flow times. ``d = 1``: the point ``x*(t)`` with ``f(x*) = 0``
        (:func:`flowlib.asymptotics.decision_boundary`, computed at the run's precision) is drawn against ``t``
        (on a log axis when ``t`` spans more than two decades); default the step boundaries and, with dense
        output, 200 geometric times from the first step (or ``1e-3`` of the run, if earlier) to the end.
        ``d = 2``: the zero level set of ``f`` on a grid covering the data, one contour per time (lighter
        earlier); default 5 such geometric times. Without dense output (and for a descent) the nearest recorded
        states are used, and labelled with their own times.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        Naming ``result``, when its problem has neither ``d = 1`` nor ``d = 2``.
    """
    _check_result(result, "decision_boundary")
    _check_dimension(result, (1, 2), "decision_boundary")
    fig, ax = _axes(ax)
    if result.problem.d == 1:
        _plot_boundary_1d(ax, result, times)
    else:
        _plot_boundary_2d(ax, result, times)
    return fig


# ----- gradient descent against the flow -----------------------------------------------------------------------
def gd_vs_flow(comparison, ax=None):
    """Distance ``max |theta_k - theta(k lr)|`` between gradient descent and the flow against ``t = k lr``.

    Log-log axes (the iterate ``k = 0``, at distance 0, is left out), with the flow's events as vertical lines
    coloured by kind.

    Parameters
    ----------
    comparison : flowlib.compare.Comparison
        From :func:`flowlib.compare`.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when ``None``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, ax = _axes(ax)
    keep = (comparison.times > 0) & (comparison.distance > 0)
    ax.loglog(comparison.times[keep], comparison.distance[keep], color="tab:blue", lw=1.2,
              label=f"GD lr = {comparison.lr:g} vs flow")
    _event_lines(ax, [ev for ev in comparison.events if ev.t > 0], alpha=0.5)
    ax.set_xlabel("flow time t = k lr")
    ax.set_ylabel("max |theta_k - theta(k lr)|")
    ax.set_title(f"gradient descent vs flow (max {comparison.max_distance:.2e})")
    ax.legend(loc="best", fontsize="small")
    return fig


def convergence(study, ax=None):
    """Distance between gradient descent and the flow against the step size, with the fitted power law.

    Parameters
    ----------
    study : flowlib.compare.ConvergenceStudy
        From :func:`flowlib.convergence_study`.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when ``None``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, ax = _axes(ax)
    ax.loglog(study.lrs, study.errors, "o-", color="tab:blue", label="GD vs flow")
    if math.isfinite(study.order):
        grid = np.geomspace(study.lrs.min(), study.lrs.max(), 50)
        ax.loglog(grid, study.constant * grid**study.order, "--", color="grey", label=f"fit: order {study.order:.3f}")
    ax.set_xlabel("step size lr")
    ax.set_ylabel(f"{study.metric} distance at t = {study.t_end:g}")
    ax.set_title("gradient descent -> gradient flow")
    ax.legend(loc="best", fontsize="small")
    return fig


# ----- ensembles ------------------------------------------------------------------------------------------------
#: Colour of each member status of an ensemble.
STATUS_COLOURS = {"reached": "tab:green", "success": "tab:blue", "deadline": "tab:red", "max_steps": "tab:orange",
                  "max_events": "tab:orange", "failed": "black", "no_caratheodory_solution": "tab:purple",
                  "pending": "lightgrey"}


def ensemble_summary(ensemble, ax=None, *, bins: int = 40):
    """Histogram of where the members of an ensemble stopped (flow time, log scale), stacked by status.

    Parameters
    ----------
    ensemble : EnsembleResult
        From :func:`flowlib.ensemble`; pending members are left out.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when ``None``.
    bins : int
        Logarithmic bins between the smallest and the largest positive time.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from flowlib.ensemble_result import EnsembleResult

    if not isinstance(ensemble, EnsembleResult):
        raise ValueError(f"ensemble must be an EnsembleResult, got {type(ensemble).__name__}")
    fig, ax = _axes(ax)
    status, t = ensemble.status, ensemble.t
    keep = ensemble.done & np.isfinite(t) & (t > 0)
    if not keep.any():
        ax.text(0.5, 0.5, "no computed member with t > 0", ha="center", va="center", transform=ax.transAxes)
        return fig
    edges = np.geomspace(t[keep].min(), t[keep].max() * (1 + 1e-12), bins + 1) if t[keep].max() > t[keep].min() \
        else np.array([t[keep].min() * 0.9, t[keep].min() * 1.1])
    names = [name for name in STATUS_COLOURS if np.any(keep & (status == name))]
    ax.hist([t[keep & (status == name)] for name in names], bins=edges, stacked=True,
            color=[STATUS_COLOURS[name] for name in names],
            label=[f"{name} ({int(np.sum(keep & (status == name)))})" for name in names])
    ax.set_xscale("log")
    ax.set_xlabel("flow time where the member stopped" + (" (k lr)" if ensemble.method == "gd" else ""))
    ax.set_ylabel("members")
    what = "gradient descent" if ensemble.method == "gd" else "gradient flow"
    ax.set_title(f"ensemble of {len(ensemble)} {what} runs")
    ax.legend(loc="best", fontsize="small")
    return fig


def ensemble_times(first, second, ax=None):
    """Stop times of the same members in two ensembles (e.g. GD against the flow), members both reached.

    Parameters
    ----------
    first, second : EnsembleResult
        Over the same initialisations; x is ``first``'s time, y ``second``'s.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    if len(first) != len(second) or not np.array_equal(first.inits, second.inits):
        raise ValueError("first and second must be ensembles over the same initialisations")
    fig, ax = _axes(ax)
    both = (first.status == "reached") & (second.status == "reached")
    if not both.any():
        ax.text(0.5, 0.5, "no member reached its stop rule in both", ha="center", va="center",
                transform=ax.transAxes)
        return fig
    x, y = first.t[both], second.t[both]
    ax.loglog(x, y, ".", ms=3, color="tab:blue", label=f"{int(both.sum())} members")
    lim = np.array([min(x.min(), y.min()), max(x.max(), y.max())])
    ax.loglog(lim, lim, "k--", lw=0.8, label="equal times")
    ax.set_xlabel(f"{first.method}: stop time")
    ax.set_ylabel(f"{second.method}: stop time")
    ratio = y / x
    ax.set_title(f"{second.method} / {first.method} stop time: median {np.median(ratio):.4f}, "
                 f"range [{ratio.min():.3g}, {ratio.max():.3g}]", fontsize="medium")
    ax.legend(loc="best", fontsize="small")
    return fig


# ----- overview ------------------------------------------------------------------------------------------------
def overview(result, path=None):
    """Loss and event raster side by side; saved to ``path`` when given. Returns the figure."""
    import matplotlib

    if not _has_display():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    loss(result, ax=left)
    event_raster(result, ax=right)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=130, bbox_inches="tight")
    return fig
