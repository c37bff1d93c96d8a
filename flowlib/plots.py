"""Plots of flow and descent results, fit for a paper.

Every plot takes the result first and ``ax=None``: it draws on ``ax`` when one is given, on a new figure otherwise,
and returns the figure (``ax.figure`` when ``ax`` was given). matplotlib is imported lazily, with the
non-interactive Agg backend when no display is configured. mpmath results are rounded to float64 for drawing.

The plots that draw curves take ``label=`` and ``color=``, so that several results share one axes::

    fig = plots.loss(flow, label="flow")
    plots.loss(gd, ax=fig.axes[0], label="GD", color="C1")

gives two curves (the second colour by default is the axes' next one) and a legend with one entry each (legend
entries with the same text, such as the event kinds, are shown once). A plot sets the title only when the axes has
none, so the first call's title stays.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from flowlib import diagnostics
from flowlib.diagnostics import record_times, sampled_states
from flowlib.result import DescentResult, FlowResult

KIND_COLOURS = {"cross": "tab:blue", "slide_start": "tab:orange", "slide_end": "tab:green", "stick": "tab:red",
                "tie": "tab:purple", "zeno": "black"}
#: Sign of a label ``y_i`` or of an outer weight ``a_j``.
SIGN_COLOURS = {1: "tab:red", -1: "tab:blue"}
#: Light fills of the decision regions ``f > 0`` and ``f < 0`` (the hues of :data:`SIGN_COLOURS`).
REGION_COLOURS = {1: "#fbe0e0", -1: "#dde8f6"}
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
#: Event lines span the whole height of the axes for at most this many events; more are drawn as a rug of short
#: ticks at the bottom (:data:`RUG_HEIGHT`), so that dense early events do not wash the curve out.
MAX_EVENT_LINES = 50
#: Height of a rug tick, as a fraction of the axes' height.
RUG_HEIGHT = 0.04
#: Kinds of :func:`ensemble_distribution`.
DISTRIBUTION_KINDS = ("ecdf", "hist")
_GRID = 201  # points per axis of the grid on which the 2-D decision boundary is contoured


# ----- figure and number helpers -------------------------------------------------------------------------------
def _axes(ax):
    import matplotlib

    if ax is not None:
        return ax.figure, ax
    _backend(matplotlib)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    return fig, ax


def _backend(matplotlib):
    """Switch to Agg when the backend is interactive and there is no display."""
    if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg", "cairo") and not _has_display():
        matplotlib.use("Agg")


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
    diagnostics.check_result(result, f" for {name}")


def _check_dimension(result, allowed, name: str):
    d = result.problem.d
    if d not in allowed:
        raise ValueError(f"result: {name} needs inputs of dimension {' or '.join(map(str, allowed))}, got d = {d}")


def _check_flag(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _check_count(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _style(label, color, default_label: str) -> dict:
    """``label`` and ``color`` checked, as keyword arguments of a matplotlib call: ``default_label`` when
    ``label`` is ``None``, and no colour when ``color`` is ``None`` (the axes' next colour)."""
    if label is not None and not isinstance(label, str):
        raise ValueError(f"label must be a string or None, got {label!r}")
    if color is not None:
        from matplotlib.colors import is_color_like

        if not is_color_like(color):
            raise ValueError(f"color must be a matplotlib colour (a name, 'C1', '#rrggbb', an RGB tuple) or None, "
                             f"got {color!r}")
    return {"label": default_label if label is None else label, "color": color}


def _default_label(result) -> str:
    """How a result is called in a legend: ``gradient flow`` or ``GD, lr = ...``."""
    return f"GD, lr = {result.lr:g}" if isinstance(result, DescentResult) else "gradient flow"


def _set_title(ax, text: str, **kwargs):
    """Title ``text`` unless the axes has one (a second result drawn on the same axes keeps the first title)."""
    if not ax.get_title():
        ax.set_title(text, **kwargs)


def _legend(ax, handles=None, **kwargs):
    """A legend with one entry per distinct text (the axes' labelled artists when ``handles`` is ``None``)."""
    if handles is None:
        handles = ax.get_legend_handles_labels()[0]
    unique = {}
    for handle in handles:
        text = handle.get_label()
        if text and not text.startswith("_"):
            unique.setdefault(text, handle)
    ax.legend(handles=list(unique.values()), **{"loc": "best", "fontsize": "small", **kwargs})


def _lines(ax, x, Y, style: dict, **kwargs) -> list:
    """One line per column of ``Y`` (shape ``(len(x), k)``), all in one colour (``style``'s, else the axes' next),
    only the first labelled."""
    first, = ax.plot(x, Y[:, 0], label=style["label"], color=style["color"], **kwargs)
    rest = ax.plot(x, Y[:, 1:], label="_nolegend_", color=first.get_color(), **kwargs) if Y.shape[1] > 1 else []
    return [first, *rest]


def _time_label(result) -> str:
    return "flow time t = k lr" if isinstance(result, DescentResult) else "flow time t"


def _log_clock(result) -> bool:
    """Whether time is drawn as ``ln t`` (a log-clock flow, whose ``t`` may overflow float64)."""
    return isinstance(result, FlowResult) and result.clock == "log"


def _time_axis(ax, result):
    """The x axis of flow time shared by the time plots: ``ln t`` on a linear axis for a log-clock flow, else
    ``t`` on a symlog axis linear below 1e-3 of the run (set once: a second result keeps the first's scale)."""
    if _log_clock(result):
        ax.set_xlabel("ln t  (t: flow time)")
        return
    t = record_times(result)
    if t[-1] > t[0] and ax.get_xscale() == "linear":
        ax.set_xscale("symlog", linthresh=_symlog_threshold(t))
    if not ax.get_xlabel():
        ax.set_xlabel(_time_label(result))


def _symlog_threshold(t: np.ndarray) -> float:
    return max(t[0], 1e-3 * (t[-1] - t[0]))


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
    segments separated by NaN, x data ``[x_1, x_1, nan, x_2, ...]``), coloured by and labelled with the kind.

    Up to :data:`MAX_EVENT_LINES` events the lines span the axes' height; beyond, each is a short tick at the
    bottom (a rug of height :data:`RUG_HEIGHT`, drawn more opaque), so that many early events do not cover the
    curves."""
    by_kind = {}
    for ev in events:
        x = position(ev.t)
        if math.isfinite(x):
            by_kind.setdefault(ev.kind, []).append(x)
    rug = sum(map(len, by_kind.values())) > MAX_EVENT_LINES
    top, alpha = (RUG_HEIGHT, max(alpha, 0.6)) if rug else (1.0, alpha)
    for kind, xs in by_kind.items():
        x = np.repeat(xs, 3)
        x[2::3] = np.nan
        y = np.tile([0.0, top, np.nan], len(xs))
        ax.plot(x, y, transform=ax.get_xaxis_transform(), color=KIND_COLOURS.get(kind, "grey"), alpha=alpha, lw=0.8,
                label=kind, gid="rug" if rug else "events")


def _final_time(result) -> str:
    """``t = T``, or ``ln t = ...`` where ``T`` overflows float64."""
    t = record_times(result)[-1]
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


def _loss_curve(result, log: bool, samples: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(x, y, log_axis)``: the recorded losses and dense samples merged in time order; ``x`` is ``ln t`` for a
    log-clock flow (``log_axis``), else ``t``; non-finite ``x`` (``ln 0``) left out."""
    log_axis = _log_clock(result)
    x = _floats(result.log_t) if log_axis else record_times(result)
    y = _recorded_loss(result, log)
    if isinstance(result, FlowResult):
        x_dense, y_dense = _dense_loss(result, log, log_axis, samples)
        x, y = np.concatenate([x, x_dense]), np.concatenate([y, y_dense])
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    keep = np.isfinite(x)
    return x[keep], y[keep], log_axis


def loss(result, ax=None, *, log: bool = False, samples: int = 400, events: bool = True, label: str | None = None,
         color=None):
    """Loss against flow time, with the events as faint vertical lines coloured by kind.

    Parameters
    ----------
    result : FlowResult or DescentResult
        A flow (float64 or mpmath, any clock, with or without dense output) or a gradient descent, drawn at
        flow time ``t = k lr``.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when ``None``. Draw a second result on the same axes to compare them.
    log : bool
        Plot ``ln L`` on a linear axis (finite where ``L`` underflows: the log clock's :attr:`FlowResult.log_loss`)
        instead of ``L`` on a log axis.
    samples : int
        Points of the dense output added between the step boundaries (none without dense output).
    events : bool
        Draw a flow's events as vertical lines coloured by kind (a rug of short ticks beyond
        :data:`MAX_EVENT_LINES` events).
    label : str, optional
        Legend entry of the curve; default ``"gradient flow"`` or ``"GD, lr = ..."``.
    color : matplotlib colour, optional
        Colour of the curve; default the axes' next colour.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        Naming ``result``, ``log``, ``events``, ``label`` or ``color`` when one is not what is described here.

    Notes
    -----
    The step boundaries (recorded iterates) are always on the curve, with exactly the recorded losses. Time is
    on a symlog axis, or ``ln t`` on a linear axis for a log-clock flow (``t`` overflows past ``1.8e308``). The
    title (run status and events, or the step size) is set by the first result drawn on the axes.

    Examples
    --------
    >>> import flowlib as fl
    >>> from flowlib import plots
    >>> prob = fl.Problem(X=[[1.0], [-1.0]], y=[1.0, -1.0], loss="logistic", bias=False, train_outer=True)
    >>> p0 = fl.Params(W=[[0.5]], b=None, a=[0.5])
    >>> fig = plots.loss(fl.gradient_flow(prob, p0, 1.0), label="flow")
    >>> fig = plots.loss(fl.gradient_descent(prob, p0, 0.1, 10), ax=fig.axes[0], label="GD", color="C1")
    >>> [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    ['flow', 'GD']
    """
    _check_result(result, "loss")
    log, events = _check_flag(log, "log"), _check_flag(events, "events")
    style = _style(label, color, _default_label(result))
    fig, ax = _axes(ax)
    x, y, log_axis = _loss_curve(result, log, samples)
    marker = {"marker": "o", "ms": 3} if len(x) < 3 else {}
    ax.plot(x, y, lw=1.5, **style, **marker)
    _time_axis(ax, result)
    if not log:
        ax.set_yscale("log")
    ax.set_ylabel("ln L" if log else "L")
    if isinstance(result, DescentResult):
        _set_title(ax, f"gradient descent, lr = {result.lr:g} ({result.n_flips} flips, status {result.status})")
    else:
        if events:
            _event_lines(ax, result.events, _log_time if log_axis else float)
        _set_title(ax, f"loss ({result.n_events} events, status {result.status})")
    _legend(ax)
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
    _draw_raster(ax, result, float, own_scale=True)
    return fig


def _draw_raster(ax, result, position, own_scale: bool):
    """The raster at x = ``position(t)``; ``own_scale``: a log x axis when the times span two decades (else the
    caller sets the axis, as :func:`overview` does to share the loss panel's)."""
    t, neuron, sample, side, colours, handles, title = _raster_marks(result)
    t = np.array([position(v) for v in t], dtype=np.float64)
    _set_title(ax, title)
    ax.set_xlabel(_time_label(result))
    if not len(t):
        ax.text(0.5, 0.5, "no events", ha="center", va="center", transform=ax.transAxes)
        return
    row = neuron * result.problem.n + sample
    colours = np.array(colours, dtype=object)
    finite = np.isfinite(t)
    for s, (marker, _) in SIDE_MARKERS.items():
        sel = (side == s) & finite
        if np.any(sel):
            ax.scatter(t[sel], row[sel] + SIDE_OFFSET * s, c=list(colours[sel]), marker=marker, s=24)
    _label_surfaces(ax, neuron, sample, result.problem.n)
    if own_scale:
        _set_time_scale(ax, t[finite])
    ax.legend(handles=handles, loc="best", fontsize="small")


# ----- neuron directions, alignment and norms ------------------------------------------------------------------
def _warped_times(result, ln_tau: float | None = None) -> tuple[np.ndarray, float]:
    """``u = ln(1 + t / tau)`` at the recorded states: linear in ``t`` before ``tau``, ``ln t`` after it (finite
    where ``t`` overflows). ``tau = e^ln_tau``, default the first positive recorded time ``t_1`` (the first step).
    Returns ``u`` and ``ln tau``."""
    with np.errstate(divide="ignore"):
        ln_t = _floats(result.log_t) if isinstance(result, FlowResult) else np.log(result.times)
    if ln_tau is None:
        finite = np.flatnonzero(np.isfinite(ln_t))
        if not len(finite):
            return np.zeros(len(ln_t)), 0.0
        ln_tau = ln_t[finite[0]]
    return np.logaddexp(0.0, ln_t - ln_tau), float(ln_tau)


def _log_time_samples(result, n_times: int, ln_tau: float | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """``(u, states, ln tau)``: ``u`` (:func:`_warped_times`) and float64 packed states, in time order, spread
    over log time. A flow: at most ``n_times`` recorded states evenly by index (its adaptive steps are short where
    the state moves fast), the first and the last included, and with dense output ``n_times - 2`` more points
    uniform in ``u`` between them. A descent (iterates evenly spaced in ``t``): the recorded iterates nearest to
    ``n_times`` points uniform in ``u``, each once, so that the early iterates are not thinned away."""
    u, ln_tau = _warped_times(result, ln_tau)
    count = min(max(n_times, 2), len(u))
    if isinstance(result, DescentResult):
        rows = np.unique(diagnostics.nearest_rows(u, np.linspace(u[0], u[-1], count)))
    else:
        rows = np.unique(np.linspace(0, len(u) - 1, count).round().astype(np.int64))
    u_parts, state_parts = [u[rows]], [result.states[rows]]
    if isinstance(result, FlowResult) and result.coefficients is not None and u[-1] > u[0]:
        inside = np.linspace(u[0], u[-1], max(n_times, 2))[1:-1]
        u_parts.append(inside)
        state_parts.append(result.states_at(log_t=ln_tau + inside + np.log(-np.expm1(-inside))))  # tau (e^u - 1)
    u = np.concatenate(u_parts)
    order = np.argsort(u, kind="stable")
    return u[order], _floats(np.concatenate(state_parts))[order], ln_tau


def _unit_rows(V: np.ndarray) -> np.ndarray:
    """``v / |v|`` along the last axis (NaN for a zero vector)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return V / np.linalg.norm(V, axis=-1, keepdims=True)


def _direction_inputs(problem) -> np.ndarray:
    """The 2-D vectors neuron directions are compared with: ``x_i`` for ``d = 2``, ``(x_i, 1)`` for ``d = 1`` with a
    bias (then the neuron's direction is that of ``(w_j, b_j)``, Boursier & Flammarion's Figure 2)."""
    return problem.X if problem.d == 2 else problem.augmented_inputs


#: gid of the data directions drawn by :func:`neuron_directions` (drawn once per axes).
_DATA_GID = "data directions"


def _draw_data_directions(ax, problem, outer: float):
    """Unit circle, ``x_i / |x_i|`` coloured by the sign of ``y_i``, and the hyperplanes ``<w, x_i> = 0`` (dotted
    lines through the origin up to radius ``outer``); nothing when the axes has them already."""
    if any(artist.get_gid() == _DATA_GID for artist in ax.get_children()):
        return
    angle = np.linspace(0.0, 2.0 * np.pi, 361)
    ax.plot(np.cos(angle), np.sin(angle), color="0.6", lw=0.8, zorder=1, gid=_DATA_GID)
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


def neuron_directions(result, ax=None, *, n_times: int = 200, spread: float = 0.5, label: str | None = None,
                      color=None):
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
        Where to draw; a new figure when ``None``. A second result on the same axes (e.g. GD with ``color=``)
        adds its trajectories; the data directions are drawn once.
    n_times : int
        Points per trajectory, spread over log time. A flow: at most ``n_times`` step boundaries (evenly by
        index: its steps are short where the state moves fast; the first and the last included) and, with dense
        output, ``n_times - 2`` more uniform in ``u(t)``; without dense output long steps show as chords. A
        descent: the recorded iterates nearest to ``n_times`` times uniform in ``u(t)``.
    spread : float
        Radius added by the end of the run.
    label : str, optional
        Legend entry of the trajectories when ``color`` is given (default ``"gradient flow"`` or
        ``"GD, lr = ..."``); with the sign colours it prefixes their two entries.
    color : matplotlib colour, optional
        One colour for every trajectory instead of the sign of ``a_j(0)``.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        Naming ``result``, when its problem has neither ``d = 2`` nor ``d = 1`` with a bias; naming ``n_times``,
        ``spread``, ``label`` or ``color`` when one is not what is described here.
    """
    from matplotlib.lines import Line2D

    _check_result(result, "neuron_directions")
    if not (result.problem.d == 1 and result.problem.bias):
        _check_dimension(result, (2,), "neuron_directions")
    _check_count(n_times, "n_times", 2)
    if isinstance(spread, bool) or not isinstance(spread, (int, float, np.integer, np.floating)) \
            or not 0 <= spread < math.inf:
        raise ValueError(f"spread must be a finite number >= 0, got {spread!r}")
    style = _style(label, color, _default_label(result))
    fig, ax = _axes(ax)
    problem = result.problem
    u, states, _ = _log_time_samples(result, n_times)
    fraction = (u - u[0]) / (u[-1] - u[0]) if u[-1] > u[0] else np.zeros(len(u))
    P = (1.0 + spread * fraction)[:, None, None] * _unit_rows(states[:, :, :2])  # (len(u), m, 2)
    signs = [1 if a >= 0 else -1 for a in _floats(result.states[0, :, problem.d + 1])]
    colours = [SIGN_COLOURS[s] if color is None else color for s in signs]
    if color is None:
        prefix = "" if label is None else f"{label}: "
        texts = {s: f"{prefix}w_j / |w_j|, a_j {'>' if s > 0 else '<'} 0" for s in (1, -1)}
    else:
        texts = {1: style["label"], -1: style["label"]}
    _draw_data_directions(ax, problem, 1.0 + spread)
    labelled = set()
    for j, (colour, s) in enumerate(zip(colours, signs)):
        text = "_nolegend_" if texts[s] in labelled else texts[s]
        labelled.add(texts[s])
        ax.plot(P[:, j, 0], P[:, j, 1], color=colour, lw=1.0, alpha=0.7, zorder=2, gid=f"neuron {j}", label=text)
    ax.scatter(P[0, :, 0], P[0, :, 1], s=30, facecolors="none", edgecolors=colours, zorder=3, label="start")
    ax.scatter(P[-1, :, 0], P[-1, :, 1], s=30, c=colours, edgecolors="k", linewidths=0.5, zorder=3, label="end")
    handles = [h for h in ax.get_legend_handles_labels()[0]
               if h.get_label().startswith("x_i") or (h.get_gid() or "").startswith("neuron")]
    handles += [Line2D([], [], ls="", marker="o", mfc="none", mec="k", label="t = 0"),
                Line2D([], [], ls="", marker="o", color="k", label=_final_time(result))]
    _legend(ax, handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    ax.set_aspect("equal")
    ax.set_xlabel("w_1 / |w|" if problem.d == 2 else "w / |(w, b)|")
    ax.set_ylabel("w_2 / |w|" if problem.d == 2 else "b / |(w, b)|")
    _set_title(ax, f"neuron directions (radius 1 + {spread:g} ln(1 + t/t_1) / ln(1 + T/t_1))" if spread else
               "neuron directions")
    return fig


def alignment(result, ax=None, *, directions=None, n_times: int = 200, label: str | None = None, color=None):
    """Early alignment: the cosine of each neuron to the nearest of a few directions, against ``ln(1 + t)``.

    From a small initialisation the neurons barely grow at first but turn towards a few directions fixed by the
    data, then grow along them (Maennel, Bousquet & Gelly, "Gradient descent quantizes ReLU network features";
    Boursier, Pillaud-Vivien & Flammarion, "Gradient flow dynamics of shallow ReLU networks for square loss and
    orthogonal inputs"). Each neuron's curve is ``max_k cos(v_j(t), u_k)``, with ``v_j = w_j``, or ``(w_j, b_j)``
    when the problem has a bias (the space of ``(x_i, 1)``, as :func:`neuron_directions` draws ``d = 1``); the
    numbers are :func:`flowlib.alignment_cosines`'.

    Parameters
    ----------
    result : FlowResult or DescentResult
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when ``None``.
    directions : array_like, shape (k, d) or (k, d + 1), optional
        The directions ``u_k`` (normalised here; ``d + 1`` columns with a bias). Default the class directions
        (:func:`flowlib.diagnostics.class_directions`): the label-weighted sums of the positive and of the negative
        samples, i.e. the directions of the two class means for labels in ``{-1, +1}``.
    n_times : int
        Points per neuron, spread uniformly in ``ln(1 + t)`` (see :func:`neuron_directions`).
    label : str, optional
        Legend entry of the curves (one for all neurons); default ``"gradient flow"`` or ``"GD, lr = ..."``.
    color : matplotlib colour, optional
        Colour of every neuron's curve; default the axes' next colour.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        Naming ``result``, ``directions`` (wrong shape, a zero row), ``n_times``, ``label`` or ``color``.
    """
    _check_result(result, "alignment")
    _check_count(n_times, "n_times", 2)
    style = _style(label, color, _default_label(result))
    units = diagnostics.unit_directions(result.problem, directions)
    fig, ax = _axes(ax)
    u, states, _ = _log_time_samples(result, n_times, ln_tau=0.0)  # u = ln(1 + t)
    best = np.max(diagnostics.cosines(result.problem, states, units), axis=-1)  # (len(u), m)
    _lines(ax, u, best, style, lw=1.0, alpha=0.8)
    ax.set_xlabel("ln(1 + t)  (t: flow time" + (" k lr)" if isinstance(result, DescentResult) else ")"))
    v = "(w_j, b_j)" if result.problem.bias else "w_j"
    ax.set_ylabel(f"max_k cos({v}, u_k)")
    ax.set_ylim(min(ax.get_ylim()[0], -0.05), 1.05)
    _set_title(ax, f"alignment of the neurons with {'the class directions' if directions is None else 'u_k'}")
    _legend(ax)
    return fig


def norms(result, ax=None, *, outer: bool | None = None, n_times: int = 200, label: str | None = None, color=None):
    """Neuron norms ``|w_j|`` (``|(w_j, b_j)|`` with a bias) and ``|a_j|`` against flow time.

    Parameters
    ----------
    result : FlowResult or DescentResult
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when ``None``.
    outer : bool, optional
        Also draw ``|a_j|`` (dashed); default when the outer layer is trained.
    n_times : int
        Points per neuron, spread over log time (see :func:`neuron_directions`).
    label : str, optional
        Prefix of the legend entries; default ``"gradient flow"`` or ``"GD, lr = ..."``.
    color : matplotlib colour, optional
        Colour of every neuron's curves; default the axes' next colour.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        Naming ``result``, ``outer``, ``n_times``, ``label`` or ``color``.

    Notes
    -----
    Time is on the axis :func:`loss` uses (symlog in ``t``, or ``ln t`` for a log-clock flow); the norms are on a
    log axis when their positive values span more than two decades (a small initialisation).
    """
    _check_result(result, "norms")
    _check_count(n_times, "n_times", 2)
    outer = result.problem.train_outer if outer is None else _check_flag(outer, "outer")
    style = _style(label, color, _default_label(result))
    fig, ax = _axes(ax)
    u, states, ln_tau = _log_time_samples(result, n_times)
    with np.errstate(divide="ignore"):
        if _log_clock(result):
            x = ln_tau + u + np.log(-np.expm1(-u))  # ln t = ln(tau (e^u - 1)); -inf at t = 0, left out
        else:
            x = math.exp(ln_tau) * np.expm1(u)
    keep = np.isfinite(x)
    v = "|(w_j, b_j)|" if result.problem.bias else "|w_j|"
    curves = [(np.linalg.norm(diagnostics.neuron_vectors(result.problem, states), axis=-1), v, "-")]
    if outer:
        curves.append((np.abs(states[:, :, result.problem.d + 1]), "|a_j|", "--"))
    for values, name, ls in curves:
        lines = _lines(ax, x[keep], values[keep], {**style, "label": f"{style['label']}: {name}"}, lw=1.0, ls=ls)
        style["color"] = lines[0].get_color()
    _time_axis(ax, result)
    positive = np.concatenate([values[keep][values[keep] > 0] for values, _, _ in curves])
    if len(positive) and positive.max() > 100 * positive.min():
        ax.set_yscale("log")
    ax.set_ylabel(f"{v}, |a_j|" if outer else v)
    _set_title(ax, "neuron norms")
    _legend(ax)
    return fig


# ----- decision boundary ---------------------------------------------------------------------------------------
def _default_boundary_times(result, count: int) -> np.ndarray:
    """``count`` times geometric from the first positive recorded time (at most ``1e-3`` of the last) to the last
    finite one, included."""
    t = record_times(result)
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
        parts = [sampled_states(result, times)]
    else:
        parts = [(record_times(result), result.states)]
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
    ax.set_xlabel(_time_label(result))
    ax.set_ylabel("x*")
    _set_title(ax, "decision boundary")
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


def _plot_boundary_2d(ax, result, times, regions: bool):
    import matplotlib
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    problem = result.problem
    times, states = sampled_states(result, _default_boundary_times(result, 5) if times is None else times)
    states = _floats(states)
    xx, yy = _data_grid(problem.X)
    points = np.column_stack([xx.ravel(), yy.ravel()])
    # from a medium purple to the darkest: every zero set stands out, the last one in near-black
    shades = matplotlib.colormaps["Purples"](np.linspace(0.55, 1.0, len(times)))
    shades[-1, :3] = (0.1, 0.0, 0.2)
    handles, region_handles = [], []
    for q, (t, state, shade) in enumerate(zip(times, states, shades)):
        f = _output_on(points, state, problem.leak).reshape(xx.shape)
        last = q == len(times) - 1
        if regions and last:
            ax.contourf(xx, yy, np.sign(f), levels=[-1.5, 0.0, 1.5], colors=[REGION_COLOURS[-1], REGION_COLOURS[1]],
                        zorder=0)
            region_handles = [Patch(color=REGION_COLOURS[s], label=f"f {'>' if s > 0 else '<'} 0 at t = {t:.3g}")
                              for s in (1, -1) if np.any(np.sign(f) == s)]
        changes_sign = f.min() < 0 < f.max()
        width = 2.2 if last else 1.5
        if changes_sign:
            ax.contour(xx, yy, f, levels=[0.0], colors=[shade], linewidths=width, zorder=2)
        handles.append(Line2D([], [], color=shade, lw=width,
                              label=f"f = 0 at t = {t:.3g}" + ("" if changes_sign else " (f has one sign)")))
    sign = np.where(problem.y > 0, 1, -1)
    for s, text in ((1, "y > 0"), (-1, "y < 0")):
        if np.any(sign == s):
            handles.append(ax.scatter(*problem.X[sign == s].T, s=25, color=SIGN_COLOURS[s], edgecolor="k",
                                      linewidth=0.5, zorder=3, label=f"x_i, {text}"))
    ax.legend(handles=handles + region_handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small",
              borderaxespad=0)
    ax.set_aspect("equal")
    ax.set_xlabel("x_1")
    ax.set_ylabel("x_2")
    _set_title(ax, "decision boundary f(x) = 0")


def decision_boundary(result, ax=None, *, times=None, regions: bool = True):
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
        ``d = 2``: the zero level set of ``f`` on a grid covering the data, one contour per time (medium purple
        for the earliest, darker later, near-black for the last); default 5 such geometric times. Without dense
        output (and for a descent) the nearest recorded states are used, and labelled with their own times.
    regions : bool
        ``d = 2``: shade the decision regions ``f > 0`` and ``f < 0`` at the last time in two light colours (the
        hues of the labels ``y > 0`` and ``y < 0``).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        Naming ``result``, when its problem has neither ``d = 1`` nor ``d = 2``; naming ``regions`` unless it is
        a bool.
    """
    _check_result(result, "decision_boundary")
    _check_dimension(result, (1, 2), "decision_boundary")
    regions = _check_flag(regions, "regions")
    fig, ax = _axes(ax)
    if result.problem.d == 1:
        _plot_boundary_1d(ax, result, times)
    else:
        _plot_boundary_2d(ax, result, times, regions)
    return fig


# ----- gradient descent against the flow -----------------------------------------------------------------------
def gd_vs_flow(comparison, ax=None, *, relative: bool = False, events: bool = True, label: str | None = None,
               color=None):
    """Distance ``max |theta_k - theta(k lr)|`` between gradient descent and the flow against ``t = k lr``.

    Log-log axes (the iterate ``k = 0``, at distance 0, is left out), with the flow's events as vertical lines
    coloured by kind.

    Parameters
    ----------
    comparison : flowlib.compare.Comparison
        From :func:`flowlib.compare`.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when ``None``. Comparisons at several step sizes can share one axes.
    relative : bool
        Draw the relative distance (:attr:`~flowlib.compare.Comparison.relative_distance`: divided by
        ``max |theta(k lr)|``) instead of the absolute one.
    events : bool
        Draw the flow's events (a rug beyond :data:`MAX_EVENT_LINES` of them).
    label : str, optional
        Legend entry; default ``"GD lr = ... vs flow"``.
    color : matplotlib colour, optional
        Default the axes' next colour.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        Naming ``comparison``, ``relative``, ``events``, ``label`` or ``color``.
    """
    from flowlib.compare import Comparison

    if not isinstance(comparison, Comparison):
        raise ValueError(f"comparison must be a Comparison (from flowlib.compare), got {type(comparison).__name__}")
    relative, events = _check_flag(relative, "relative"), _check_flag(events, "events")
    style = _style(label, color, f"GD lr = {comparison.lr:g} vs flow")
    fig, ax = _axes(ax)
    distance = comparison.relative_distance if relative else comparison.distance
    keep = (comparison.times > 0) & (distance > 0)
    ax.loglog(comparison.times[keep], distance[keep], lw=1.2, **style)
    if events:
        _event_lines(ax, [ev for ev in comparison.events if ev.t > 0], alpha=0.5)
    ax.set_xlabel("flow time t = k lr")
    ax.set_ylabel("max |theta_k - theta(k lr)| / max |theta(k lr)|" if relative else "max |theta_k - theta(k lr)|")
    biggest = comparison.max_relative_distance if relative else comparison.max_distance
    _set_title(ax, f"gradient descent vs flow (max {biggest:.2e}{' relative' if relative else ''})")
    _legend(ax)
    return fig


def convergence(study, ax=None, *, label: str | None = None, color=None):
    """Distance between gradient descent and the flow against the step size, with the fitted power law.

    Parameters
    ----------
    study : flowlib.compare.ConvergenceStudy
        From :func:`flowlib.convergence_study`; step sizes whose descent stopped early (no distance) are left
        out and counted in the legend.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when ``None``.
    label : str, optional
        Legend entry of the distances; default ``"GD vs flow"``. The fit is drawn dashed in the same colour.
    color : matplotlib colour, optional
        Default the axes' next colour.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        Naming ``study``, ``label`` or ``color``.
    """
    from flowlib.compare import ConvergenceStudy

    if not isinstance(study, ConvergenceStudy):
        raise ValueError(f"study must be a ConvergenceStudy (from flowlib.convergence_study), got "
                         f"{type(study).__name__}")
    style = _style(label, color, "GD vs flow")
    fig, ax = _axes(ax)
    done = np.isfinite(study.errors)
    stopped = int(np.count_nonzero(~done))
    if stopped:
        style["label"] += f" ({stopped} stopped early, left out)"
    points, = ax.loglog(study.lrs[done], study.errors[done], "o-", **style)
    if math.isfinite(study.order):
        grid = np.geomspace(study.lrs[done].min(), study.lrs[done].max(), 50)
        ax.loglog(grid, study.constant * grid**study.order, "--", color=points.get_color(),
                  label=f"fit: order {study.order:.3f}")
    ax.set_xlabel("step size lr")
    ax.set_ylabel(f"{study.metric} distance at t = {study.t_end:g}")
    _set_title(ax, "gradient descent -> gradient flow")
    _legend(ax)
    return fig


# ----- ensembles ------------------------------------------------------------------------------------------------
#: Colour of each member status of an ensemble.
STATUS_COLOURS = {"reached": "tab:green", "success": "tab:blue", "deadline": "tab:red", "max_steps": "tab:orange",
                  "max_events": "tab:orange", "failed": "black", "no_caratheodory_solution": "tab:purple",
                  "pending": "lightgrey"}


def _check_ensemble(ensemble, name: str = "ensemble"):
    from flowlib.ensemble_result import EnsembleResult

    if not isinstance(ensemble, EnsembleResult):
        raise ValueError(f"{name} must be an EnsembleResult, got {type(ensemble).__name__}")


def _log_edges(values: np.ndarray, bins: int) -> np.ndarray:
    """``bins + 1`` geometric edges over positive ``values`` (a bin of +-10% around a single value)."""
    lo, hi = values.min(), values.max()
    if hi > lo:
        return np.geomspace(lo, hi * (1 + 1e-12), bins + 1)
    return np.array([lo * 0.9, lo * 1.1])


def ensemble_summary(ensemble, ax=None, *, bins: int = 40, label: str | None = None, color=None):
    """How the members of an ensemble ended: members per status, where they stopped, and their final losses.

    Parameters
    ----------
    ensemble : EnsembleResult
        From :func:`flowlib.ensemble`; pending members are left out.
    ax : matplotlib.axes.Axes or sequence of three Axes, optional
        ``None``: a new figure with three panels, (1) members per status (bars), (2) a histogram of the flow time
        where the members stopped (log bins, stacked by status) and (3) the distribution of their final losses
        (:func:`ensemble_distribution`, an ECDF). One Axes: panel (2) only. Three Axes: the three panels there,
        e.g. those of a previous call, to overlay a second ensemble (give it ``color`` and ``label``).
    bins : int
        Logarithmic bins between the smallest and the largest positive time.
    label : str, optional
        Legend entry of this ensemble in the overlays below; default the method (``flow`` or ``gd``).
    color : matplotlib colour, optional
        One colour for the whole ensemble: panel (1) draws outlined bars, panel (2) an unstacked step histogram
        and panel (3) the ECDF in it. Default: the status colours of :data:`STATUS_COLOURS` (and the axes' next
        colour for the ECDF).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        Naming ``ensemble``, ``ax``, ``bins``, ``label`` or ``color``.
    """
    _check_ensemble(ensemble)
    bins = _check_count(bins, "bins")
    style = _style(label, color, ensemble.method)
    if ax is None:
        import matplotlib

        _backend(matplotlib)
        import matplotlib.pyplot as plt

        fig, panels = plt.subplots(1, 3, figsize=(15, 4.0))
    else:
        panels = list(ax) if isinstance(ax, (list, tuple, np.ndarray)) else [ax]
        if len(panels) not in (1, 3) or not all(hasattr(p, "plot") for p in panels):
            raise ValueError(f"ax must be None, one matplotlib Axes or a sequence of three, got {ax!r}")
        fig = panels[0].figure
    if len(panels) == 1:
        _stop_times(panels[0], ensemble, bins, style)
        return fig
    _status_counts(panels[0], ensemble, style)
    _stop_times(panels[1], ensemble, bins, style)
    done = ensemble.done & np.isfinite(ensemble.loss)
    if done.any():
        ensemble_distribution(ensemble.loss[done], panels[2], label=style["label"], color=style["color"],
                              xlabel="final loss")
    else:
        panels[2].text(0.5, 0.5, "no computed member", ha="center", va="center", transform=panels[2].transAxes)
    _set_title(panels[2], "final losses")
    if ax is None:
        fig.tight_layout()
    return fig


def _status_counts(ax, ensemble, style: dict):
    """Panel (1) of :func:`ensemble_summary`: horizontal bars, members per status."""
    counts = ensemble.counts()
    names = [name for name in STATUS_COLOURS if name in counts] + sorted(set(counts) - set(STATUS_COLOURS))
    values = [counts[name] for name in names]
    if style["color"] is None:
        bars = ax.barh(names, values, color=[STATUS_COLOURS.get(name, "grey") for name in names])
    else:
        bars = ax.barh(names, values, fill=False, edgecolor=style["color"], lw=2, label=style["label"])
        _legend(ax)
    ax.bar_label(bars, padding=2, fontsize="small")
    if not ax.yaxis_inverted():  # the first status on top
        ax.invert_yaxis()
    ax.set_xlabel("members")
    what = "gradient descent" if ensemble.method == "gd" else "gradient flow"
    _set_title(ax, f"{len(ensemble)} {what} runs by status")


def _stop_times(ax, ensemble, bins: int, style: dict):
    """Panel (2) of :func:`ensemble_summary`: where the members stopped, stacked by status (or one outline)."""
    status, t = ensemble.status, ensemble.t
    keep = ensemble.done & np.isfinite(t) & (t > 0)
    if not keep.any():
        ax.text(0.5, 0.5, "no computed member with t > 0", ha="center", va="center", transform=ax.transAxes)
        return
    edges = _log_edges(t[keep], bins)
    if style["color"] is None:
        names = [name for name in STATUS_COLOURS if np.any(keep & (status == name))]
        ax.hist([t[keep & (status == name)] for name in names], bins=edges, stacked=True,
                color=[STATUS_COLOURS[name] for name in names],
                label=[f"{name} ({int(np.sum(keep & (status == name)))})" for name in names])
    else:
        ax.hist(t[keep], bins=edges, histtype="step", lw=1.5, **style)
    if t[keep].max() > t[keep].min():
        ax.set_xscale("log")
    if not ax.get_xlabel():
        ax.set_xlabel("flow time where the member stopped" + (" (k lr)" if ensemble.method == "gd" else ""))
    ax.set_ylabel("members")
    what = "gradient descent" if ensemble.method == "gd" else "gradient flow"
    _set_title(ax, f"ensemble of {len(ensemble)} {what} runs")
    _legend(ax)


def ensemble_distribution(values, ax=None, *, kind: str = "ecdf", label: str | None = None, color=None,
                          bins: int = 40, log: bool | None = None, xlabel: str | None = None):
    """Distribution of one number over the members of an ensemble: an ECDF or a histogram.

    Parameters
    ----------
    values : array_like, shape (R,)
        E.g. ``ens.loss[ens.done]`` (final losses) or ``ens.t[ens.done]`` (where the members stopped, such as the
        time of the last event under a stop rule). Non-finite entries (pending members) are left out and counted
        in the default label.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when ``None``. Several ensembles can share one axes.
    kind : {"ecdf", "hist"}
        ``"ecdf"``: the fraction of members with a value ``<= x``, a step function rising by ``1 / R`` at each
        value; ``"hist"``: a step-outline histogram of counts.
    label : str, optional
        Legend entry; default ``"R values"``.
    color : matplotlib colour, optional
        Default the axes' next colour.
    bins : int
        Bins of the histogram (geometric on a log axis).
    log : bool, optional
        Log x axis; default when every value is positive and they span more than two decades.
    xlabel : str, optional
        Label of the x axis (kept when the axes has one).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        Naming ``values`` (not a 1-D array of real numbers, or no finite entry), ``kind``, ``bins``, ``log`` (also
        when ``log=True`` meets a value ``<= 0``), ``label``, ``color`` or ``xlabel``.

    Examples
    --------
    >>> import numpy as np
    >>> from flowlib import plots
    >>> fig = plots.ensemble_distribution(np.array([3.0, 1.0, 2.0, np.nan]))
    >>> line = fig.axes[0].lines[0]
    >>> line.get_xdata().tolist(), line.get_ydata().tolist()
    ([1.0, 1.0, 2.0, 3.0], [0.0, 0.3333333333333333, 0.6666666666666666, 1.0])
    """
    if not isinstance(kind, str) or kind not in DISTRIBUTION_KINDS:
        raise ValueError(f"kind must be one of {DISTRIBUTION_KINDS}, got {kind!r}")
    arr = np.asarray(values)
    if arr.dtype.kind not in "iuf" or arr.ndim != 1:
        raise ValueError(f"values must be a 1-D array of real numbers, got dtype {arr.dtype} and shape {arr.shape}")
    arr = arr.astype(np.float64)
    finite = np.sort(arr[np.isfinite(arr)])
    if not len(finite):
        raise ValueError(f"values has no finite entry ({len(arr)} given)")
    bins = _check_count(bins, "bins")
    if log is None:
        log = bool(finite[0] > 0 and finite[-1] > 100 * finite[0])
    elif _check_flag(log, "log") and finite[0] <= 0:
        raise ValueError(f"log=True needs positive values, got a minimum of {finite[0]!r}")
    if xlabel is not None and not isinstance(xlabel, str):
        raise ValueError(f"xlabel must be a string or None, got {xlabel!r}")
    left_out = len(arr) - len(finite)
    style = _style(label, color, f"{len(finite)} values" + (f" ({left_out} non-finite left out)" if left_out else ""))
    fig, ax = _axes(ax)
    if kind == "ecdf":
        ax.step(np.concatenate([finite[:1], finite]), np.arange(len(finite) + 1) / len(finite), where="post",
                lw=1.5, **style)
        ax.set_ylabel("fraction of members <= x")
        ax.set_ylim(-0.02, 1.02)
    else:
        if log:
            edges = _log_edges(finite, bins)
        else:
            edges = bins if finite[-1] > finite[0] else np.array([finite[0] - 0.5, finite[0] + 0.5])
        ax.hist(finite, bins=edges, histtype="step", lw=1.5, **style)
        ax.set_ylabel("members")
    if log:
        ax.set_xscale("log")
    if xlabel is not None and not ax.get_xlabel():
        ax.set_xlabel(xlabel)
    _legend(ax)
    return fig


def ensemble_times(first, second, ax=None, *, label: str | None = None, color=None):
    """Stop times of the same members in two ensembles (e.g. GD against the flow), members both reached.

    Parameters
    ----------
    first, second : EnsembleResult
        Over the same initialisations; x is ``first``'s time, y ``second``'s.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when ``None``.
    label : str, optional
        Legend entry of the points; default ``"N members"``.
    color : matplotlib colour, optional
        Default the axes' next colour.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        Naming ``first`` or ``second`` (not ensembles, or over other initialisations), ``label`` or ``color``.
    """
    _check_ensemble(first, "first")
    _check_ensemble(second, "second")
    if len(first) != len(second) or not np.array_equal(first.inits, second.inits):
        raise ValueError("first and second must be ensembles over the same initialisations")
    both = (first.status == "reached") & (second.status == "reached")
    style = _style(label, color, f"{int(both.sum())} members")
    fig, ax = _axes(ax)
    if not both.any():
        ax.text(0.5, 0.5, "no member reached its stop rule in both", ha="center", va="center",
                transform=ax.transAxes)
        return fig
    x, y = first.t[both], second.t[both]
    ax.loglog(x, y, ".", ms=3, **style)
    lim = np.array([min(x.min(), y.min()), max(x.max(), y.max())])
    ax.loglog(lim, lim, "k--", lw=0.8, label="equal times")
    ax.set_xlabel(f"{first.method}: stop time")
    ax.set_ylabel(f"{second.method}: stop time")
    ratio = y / x
    _set_title(ax, f"{second.method} / {first.method} stop time: median {np.median(ratio):.4f}, "
                   f"range [{ratio.min():.3g}, {ratio.max():.3g}]", fontsize="medium")
    _legend(ax)
    return fig


# ----- overview ------------------------------------------------------------------------------------------------
def overview(result, path=None):
    """Loss and event raster side by side, on one shared time axis; saved to ``path`` when given.

    Parameters
    ----------
    result : FlowResult or DescentResult
    path : str or path, optional
        Where to save the figure (PNG at 130 dpi, or any format matplotlib knows from the suffix).

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    Both panels have the x axis of :func:`loss` (symlog in ``t``, or ``ln t`` for a log-clock flow) with the same
    limits, so that an event in the raster lies straight across from its line in the loss panel.
    """
    import matplotlib

    _check_result(result, "overview")
    _backend(matplotlib)
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2), sharex=True)
    loss(result, ax=left)
    _draw_raster(right, result, _log_time if _log_clock(result) else float, own_scale=False)
    right.set_xlabel(left.get_xlabel())
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=130, bbox_inches="tight")
    return fig
