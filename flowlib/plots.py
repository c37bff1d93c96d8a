"""Plots of flow results. Each function takes ``ax=None`` (a new figure) and returns the figure.

matplotlib is imported lazily, with the non-interactive Agg backend when no display is configured.
"""

from __future__ import annotations

import numpy as np

KIND_COLOURS = {"cross": "tab:blue", "slide_start": "tab:orange", "slide_end": "tab:green", "stick": "tab:red",
                "tie": "tab:purple", "zeno": "black"}


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


def loss(result, ax=None, *, samples: int = 400):
    """Loss against time on log-log axes (linear time when the run starts at 0), events as ticks on top."""
    fig, ax = _axes(ax)
    t0, t1 = result.t[0], result.t_final
    if t1 <= t0:
        ax.plot([t0], [result.loss[0]], "o")
        return fig
    lo = max(t0, 1e-3 * (t1 - t0))
    times = np.unique(np.concatenate([[t0], np.geomspace(lo, t1, samples), result.t]))
    if result.coefficients is None:
        times, values = result.t, result.loss
    else:
        values = result.loss_at(times)
    ax.plot(times, values, color="tab:blue", lw=1.5, label="loss")
    ax.set_xscale("symlog", linthresh=lo)
    ax.set_yscale("log")
    for ev in result.events:
        ax.axvline(ev.t, color=KIND_COLOURS.get(ev.kind, "grey"), alpha=0.25, lw=0.8)
    ax.set_xlabel("flow time t")
    ax.set_ylabel("L(t)")
    ax.set_title(f"loss ({result.n_events} events, status {result.status})")
    return fig


def event_raster(result, ax=None):
    """Events as points: time against surface index ``neuron * n + sample``.

    Colour by kind (cross, slide_start, slide_end, stick, tie, zeno); marker by the side entered: up-triangle the
    active side, down-triangle the inactive side, circle when the state stays on the surface.
    """
    from matplotlib.lines import Line2D

    fig, ax = _axes(ax)
    n = result.problem.n
    if not result.events:
        ax.text(0.5, 0.5, "no events", ha="center", va="center", transform=ax.transAxes)
        return fig
    t = np.array([e.t for e in result.events])
    row = np.array([e.neuron * n + e.sample for e in result.events])
    side = np.array([e.side for e in result.events])
    kinds = np.array([e.kind for e in result.events])
    for s, marker in ((1, "^"), (-1, "v"), (0, "o")):
        sel = side == s
        if np.any(sel):
            ax.scatter(t[sel], row[sel], c=[KIND_COLOURS.get(k, "grey") for k in kinds[sel]], marker=marker, s=24)
    handles = [Line2D([], [], ls="", marker="s", color=KIND_COLOURS[k], label=k) for k in KIND_COLOURS
               if k in set(kinds)]
    handles += [Line2D([], [], ls="", marker=m, color="grey", label=label)
                for m, label in (("^", "enters active side"), ("v", "leaves active side"), ("o", "stays on surface"))]
    positive = t[t > 0]
    if len(positive) and positive.max() / max(positive.min(), 1e-300) > 100:
        ax.set_xscale("log")
    ax.set_xlabel("flow time t")
    ax.set_ylabel("surface  neuron * n + sample")
    ax.set_title("activation events")
    ax.legend(handles=handles, loc="best", fontsize="small")
    return fig


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
