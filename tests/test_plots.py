"""The plots draw the numbers of the result: loss curves, event times, neuron directions, decision boundaries and
GD-vs-flow distances are read back from the artists and compared with the result's own values."""

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import flowlib as fl  # noqa: E402
from flowlib import asymptotics, examples, plots  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def rate_flow():
    """Seed 000's 1-D network (bias, outer weights fixed), to t = 5."""
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    return fl.gradient_flow(prob, p0, 5.0)


@pytest.fixture(scope="module")
def sliding():
    """One neuron sliding from t = 2.18: the flow to t = 10 and GD at lr = 1e-2 (chattering on the surface)."""
    prob, p0 = examples.sliding_two_points(1e-3)
    flow = fl.gradient_flow(prob, p0, 10.0)
    assert [(e.kind, e.neuron, e.sample) for e in flow.events] == [("slide_start", 0, 1)]
    return flow, fl.gradient_descent(prob, p0, 1e-2, 1000)


@pytest.fixture(scope="module")
def os_flow():
    """Six neurons, eight 2-D points, 21 crossings."""
    prob, p0 = examples.os_logistic()
    flow = fl.gradient_flow(prob, p0, 30.0)
    assert flow.success and flow.n_events == 21
    return flow


def _value_at(line, x):
    """The y value of ``line`` at the data point whose x is exactly ``x``."""
    hits = np.flatnonzero(line.get_xdata() == x)
    assert len(hits), f"no point at x = {x!r}"
    return line.get_ydata()[hits[0]]


def _offsets(ax, label):
    (collection,) = [c for c in ax.collections if c.get_label() == label]
    return np.asarray(collection.get_offsets())


def _trajectories(ax):
    return [line for line in ax.lines if (line.get_gid() or "").startswith("neuron")]


def _unit(V):
    return V / np.linalg.norm(V, axis=-1, keepdims=True)


# ----- loss ----------------------------------------------------------------------------------------------------
def test_loss_passes_through_the_recorded_losses_and_the_dense_output(rate_flow):
    fig = plots.loss(rate_flow)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    line = ax.lines[0]
    for t, value in zip(rate_flow.t, rate_flow.loss):
        assert _value_at(line, t) == value
    x, y = line.get_xdata(), line.get_ydata()
    inside = (x > 0) & (x < rate_flow.t_final)
    assert np.count_nonzero(inside) >= 300
    np.testing.assert_allclose(y[inside], rate_flow.loss_at(x[inside]), rtol=1e-15)
    assert np.all(np.diff(x) >= 0) and np.all(np.diff(y) <= 1e-15)
    assert ax.get_yscale() == "log" and ax.get_xscale() == "symlog"


def test_loss_draws_on_the_given_axis_with_one_line_per_event(sliding):
    flow, _ = sliding
    fig, ax = plt.subplots()
    assert plots.loss(flow, ax=ax) is fig
    (event_line,) = ax.lines[1:]
    assert event_line.get_xdata()[0] == flow.events[0].t
    assert event_line.get_color() == plots.KIND_COLOURS["slide_start"]
    assert "slide_start" in [text.get_text() for text in ax.get_legend().get_texts()]


def test_loss_without_dense_output_is_the_recorded_losses():
    prob, p0 = examples.sliding_two_points(1e-3)
    flow = fl.gradient_flow(prob, p0, 10.0, dense_output=False)
    line = plots.loss(flow, samples=400).axes[0].lines[0]
    np.testing.assert_array_equal(line.get_xdata(), flow.t)
    np.testing.assert_array_equal(line.get_ydata(), flow.loss)


def test_loss_of_a_log_clock_run_is_drawn_against_ln_t():
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    flow = fl.gradient_flow(prob, p0, 1e8)
    assert flow.clock == "log" and flow.n_events > 0
    ax = plots.loss(flow, log=True).axes[0]
    line = ax.lines[0]
    log_t = flow.log_t
    for x, value in zip(log_t[1:], flow.log_loss[1:]):  # ln 0 = -inf is left out
        assert _value_at(line, x) == value
    assert np.all(np.isfinite(line.get_xdata()))
    x, y = line.get_xdata(), line.get_ydata()
    inside = ~np.isin(x, log_t)
    np.testing.assert_allclose(y[inside], flow.log_loss_at(log_t=x[inside]), rtol=1e-14)
    assert ax.get_xlabel().startswith("ln t") and ax.get_yscale() == "linear" and ax.get_ylabel() == "ln L"
    assert ax.get_xlim()[1] == pytest.approx(math.log(1e8), rel=0.1)
    (stick,) = ax.lines[1:]  # one line per kind, segments separated by NaN
    assert [ev.kind for ev in flow.events] == ["stick", "stick"] and stick.get_label() == "stick"
    np.testing.assert_allclose(stick.get_xdata()[::3], [math.log(ev.t) for ev in flow.events], rtol=1e-15)


def test_loss_of_an_mpmath_run():
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    flow = fl.gradient_flow(prob, p0, 0.5, dps=20)
    assert flow.dps == 20 and flow.loss.dtype == object
    line = plots.loss(flow, samples=50).axes[0].lines[0]
    for t, value in zip(flow.t, flow.loss):
        assert _value_at(line, float(t)) == float(value)
    x, y = line.get_xdata(), line.get_ydata()
    inside = (x > 0) & (x < 0.5)
    assert np.count_nonzero(inside) == 50
    np.testing.assert_allclose(y[inside], np.asarray(flow.loss_at(x[inside]), dtype=float), rtol=1e-15)
    log_line = plots.loss(flow, log=True, samples=0).axes[0].lines[0]
    np.testing.assert_allclose(log_line.get_ydata(), np.log(np.asarray(flow.loss, dtype=float)), rtol=1e-15)


def test_loss_of_gradient_descent_is_against_k_lr(sliding):
    _, gd = sliding
    ax = plots.loss(gd).axes[0]
    line = ax.lines[0]
    np.testing.assert_array_equal(line.get_xdata(), gd.iterations * gd.lr)
    np.testing.assert_array_equal(line.get_ydata(), gd.loss)
    assert "lr = 0.01" in ax.get_title() and ax.get_xlabel() == "flow time t = k lr"
    log_line = plots.loss(gd, log=True).axes[0].lines[0]
    np.testing.assert_allclose(log_line.get_ydata(), np.log(gd.loss), rtol=1e-15)


# ----- event raster --------------------------------------------------------------------------------------------
def _raster_points(ax):
    points = np.concatenate([c.get_offsets() for c in ax.collections])
    return points[np.argsort(points[:, 0], kind="stable")]


def test_event_raster_marks_every_event_at_its_time_and_surface(os_flow):
    fig, ax = plt.subplots()
    assert plots.event_raster(os_flow, ax=ax) is fig
    points = _raster_points(ax)
    events = sorted(os_flow.events, key=lambda e: e.t)
    np.testing.assert_array_equal(points[:, 0], [e.t for e in events])
    n = os_flow.problem.n
    np.testing.assert_allclose(points[:, 1], [e.neuron * n + e.sample + plots.SIDE_OFFSET * e.side for e in events])
    colours = np.concatenate([c.get_facecolors() for c in ax.collections])
    assert np.allclose(colours[:, :3], matplotlib.colors.to_rgb(plots.KIND_COLOURS["cross"]))
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert labels[0] == "cross" and "slide_start" not in labels
    assert ax.get_xscale() == "log"


def test_event_raster_labels_few_surfaces(sliding):
    flow, _ = sliding
    ax = plots.event_raster(flow).axes[0]
    assert _raster_points(ax).tolist() == [[flow.events[0].t, 1.0]]  # neuron 0, sample 1, stays on the surface
    assert [tick.get_text() for tick in ax.get_yticklabels()] == ["j=0, i=1"]


def test_event_raster_of_gradient_descent_shows_its_flips(sliding):
    _, gd = sliding
    ax = plots.event_raster(gd).axes[0]
    points = _raster_points(ax)
    np.testing.assert_array_equal(np.sort(points[:, 0]), np.sort([f.k * gd.lr for f in gd.flips]))
    for collection in ax.collections:  # one scatter per side entered, coloured by it
        side = 1 if collection.get_offsets()[0, 1] > 1 else -1
        assert np.allclose(collection.get_facecolors()[:, :3], matplotlib.colors.to_rgb(plots.FLIP_COLOURS[side]))
        assert len(collection.get_offsets()) == sum(f.side == side for f in gd.flips)
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["enters z > 0", "enters z <= 0"]


def test_event_raster_without_events(rate_flow):
    assert rate_flow.n_events == 0
    ax = plots.event_raster(rate_flow).axes[0]
    assert not ax.collections and ax.texts[0].get_text() == "no events"


# ----- neuron directions ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("spread", [0.0, 0.5])
def test_neuron_directions_start_and_end_at_the_flows_directions(os_flow, spread):
    ax = plots.neuron_directions(os_flow, spread=spread).axes[0]
    end = _offsets(ax, "end")
    np.testing.assert_allclose(end, (1 + spread) * _unit(os_flow.W[-1]), rtol=0, atol=1e-15)
    np.testing.assert_allclose(_offsets(ax, "start"), _unit(os_flow.W[0]), rtol=0, atol=1e-15)
    trajectories = _trajectories(ax)
    assert len(trajectories) == os_flow.states.shape[1]
    for j, line in enumerate(trajectories):
        xy = np.column_stack([line.get_xdata(), line.get_ydata()])
        assert np.all(np.diff(np.linalg.norm(xy, axis=1)) >= -1e-12)  # the radius grows with time
        np.testing.assert_array_equal(xy[-1], end[j])
        colour = plots.SIGN_COLOURS[1 if os_flow.a[0, j] > 0 else -1]
        assert line.get_color() == colour
        if spread == 0:
            np.testing.assert_allclose(np.linalg.norm(xy, axis=1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.concatenate([_offsets(ax, "x_i / |x_i|, y > 0"), _offsets(ax, "x_i / |x_i|, y < 0")]),
                               np.concatenate([_unit(os_flow.problem.X[os_flow.problem.y > 0]),
                                               _unit(os_flow.problem.X[os_flow.problem.y < 0])]))


def test_neuron_directions_sample_the_steps_and_the_dense_output_uniformly_in_log_time(os_flow):
    ax = plots.neuron_directions(os_flow, n_times=50, spread=0.0).axes[0]
    xy = np.column_stack([_trajectories(ax)[0].get_xdata(), _trajectories(ax)[0].get_ydata()])
    rows = np.unique(np.linspace(0, os_flow.n_steps, 50).round().astype(int))
    t1 = os_flow.t[1]
    u = np.linspace(0.0, math.log1p(os_flow.t_final / t1), 50)[1:-1]
    expected = np.concatenate([_unit(os_flow.W[rows, 0]), _unit(os_flow.states_at(t1 * np.expm1(u))[:, 0, :2])])
    times = np.concatenate([os_flow.t[rows], t1 * np.expm1(u)])
    np.testing.assert_allclose(xy, expected[np.argsort(times, kind="stable")], rtol=0, atol=1e-12)


def test_neuron_directions_without_dense_output_use_the_step_boundaries():
    prob, p0 = examples.os_logistic()
    flow = fl.gradient_flow(prob, p0, 30.0, dense_output=False)
    ax = plots.neuron_directions(flow, n_times=10 ** 6, spread=0.0).axes[0]
    lines = _trajectories(ax)
    assert len(lines) == p0.m
    np.testing.assert_allclose(np.column_stack([lines[0].get_xdata(), lines[0].get_ydata()]),
                               _unit(flow.W[:, 0]), atol=1e-15)


def test_neuron_directions_of_one_dimensional_inputs_with_bias_are_those_of_w_b(rate_flow):
    """Seed 003's Figure 2: for d = 1 with a bias the direction of (w_j, b_j) among those of (x_i, 1)."""
    ax = plots.neuron_directions(rate_flow, spread=0.0).axes[0]
    ends = np.array([[line.get_xdata()[-1], line.get_ydata()[-1]] for line in _trajectories(ax)])
    np.testing.assert_allclose(ends, _unit(rate_flow.states[-1][:, :2]), atol=1e-15)
    stars = np.concatenate([c.get_offsets() for c in ax.collections if c.get_label().startswith("x_i")])
    np.testing.assert_allclose(np.sort(stars[:, 0]), np.sort(_unit(rate_flow.problem.augmented_inputs)[:, 0]))


def test_neuron_directions_need_two_dimensional_inputs():
    prob1 = fl.Problem(X=[[1.0], [-2.0]], y=[1.0, -1.0], loss="logistic", bias=False, train_outer=True)
    flow = fl.gradient_flow(prob1, fl.Params(W=[[0.3]], b=None, a=[0.2]), 1.0)
    with pytest.raises(ValueError, match="result"):
        plots.neuron_directions(flow)


# ----- decision boundary ---------------------------------------------------------------------------------------
def test_decision_boundary_1d_is_x_star_of_the_flow(rate_flow):
    fig, ax = plt.subplots()
    assert plots.decision_boundary(rate_flow, ax=ax) is fig
    line = ax.lines[0]
    t, x_star = line.get_xdata(), line.get_ydata()
    assert len(t) >= 200 and np.all(t > 0) and np.all(np.diff(t) >= 0)
    np.testing.assert_allclose(x_star, rate_flow.decision_boundary(t), rtol=1e-14, atol=1e-15)
    for t_k, value in zip(rate_flow.t[1:], rate_flow.decision_boundary()[1:]):
        assert _value_at(line, t_k) == value
    assert t[0] == pytest.approx(5e-3) and ax.get_xscale() == "log"
    assert sorted(line.get_ydata()[0] for line in ax.lines[1:]) == [-1.0, 1.0]  # the data


def test_decision_boundary_1d_at_given_times(rate_flow):
    times = [0.5, 1.0, 2.0, 4.0]
    line = plots.decision_boundary(rate_flow, times=times).axes[0].lines[0]
    np.testing.assert_array_equal(line.get_xdata(), times)
    np.testing.assert_array_equal(line.get_ydata(), rate_flow.decision_boundary(times))


def test_decision_boundary_1d_of_gradient_descent(rate_flow):
    gd = fl.gradient_descent(rate_flow.problem, fl.Params.unpacked(rate_flow.states[0], True), 0.01, 500)
    line = plots.decision_boundary(gd).axes[0].lines[0]
    np.testing.assert_array_equal(line.get_xdata(), gd.times[1:])
    np.testing.assert_array_equal(line.get_ydata(), asymptotics.decision_boundary(gd.problem, gd.states)[1:])


def test_decision_boundary_2d_contours_the_zero_set(os_flow):
    ax = plots.decision_boundary(os_flow).axes[0]
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    times = np.unique(np.geomspace(min(os_flow.t[1], 1e-3 * os_flow.t_final), os_flow.t_final, 5))
    assert labels[:5] == [f"f = 0 at t = {t:.3g}" for t in times] and labels[5:7] == ["x_i, y > 0", "x_i, y < 0"]
    assert labels[7:] == ["f > 0 at t = 30", "f < 0 at t = 30"]  # the shaded regions, at the last time
    contours = [c for c in ax.collections if isinstance(c, matplotlib.contour.ContourSet) and not c.filled]
    assert len(contours) == 5
    for t, contour in zip(times, contours):
        state = os_flow.states_at([t])[0]
        points = np.concatenate(contour.allsegs[0])
        f = np.maximum(points @ state[:, :2].T, 0.0) @ state[:, 3]
        scale = np.abs(state[:, 3]) @ np.linalg.norm(state[:, :2], axis=1)  # Lipschitz constant of f
        assert len(points) > 10 and np.max(np.abs(f)) <= 0.02 * scale  # on the zero set up to the grid spacing
    darkness = [np.sum(c.get_edgecolor()[0][:3]) for c in contours]
    assert np.all(np.diff(darkness) < 0)  # later times darker
    assert darkness[0] < 2.0 and darkness[-1] < 0.5  # even the earliest is no pale line, the last near-black


def test_decision_boundary_2d_at_given_times(os_flow):
    ax = plots.decision_boundary(os_flow, times=[1.0, 30.0]).axes[0]
    assert [text.get_text() for text in ax.get_legend().get_texts()][:2] == ["f = 0 at t = 1", "f = 0 at t = 30"]


def test_decision_boundary_needs_one_or_two_dimensional_inputs():
    prob, p0 = examples.os_logistic(m=2, n=4, d=3)
    flow = fl.gradient_flow(prob, p0, 1.0)
    with pytest.raises(ValueError, match="result"):
        plots.decision_boundary(flow)


# ----- gradient descent against the flow -----------------------------------------------------------------------
def test_gd_vs_flow_draws_the_comparisons_distances(sliding):
    flow, gd = sliding
    cmp = fl.compare(flow, gd)
    fig, ax = plt.subplots()
    assert plots.gd_vs_flow(cmp, ax=ax) is fig
    keep = cmp.times > 0
    np.testing.assert_array_equal(ax.lines[0].get_xdata(), cmp.times[keep])
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), cmp.distance[keep])
    assert ax.lines[1].get_xdata()[0] == flow.events[0].t
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    same = cmp.plot().axes[0]  # Comparison.plot is this plot
    np.testing.assert_array_equal(same.lines[0].get_ydata(), cmp.distance[keep])


def test_convergence_draws_the_study(sliding):
    flow, _ = sliding
    prob, p0 = flow.problem, fl.Params.unpacked(flow.states[0], flow.problem.bias)
    study = fl.convergence_study(prob, p0, 5.0, [1e-1, 1e-2], flow_result=flow)
    fig, ax = plt.subplots()
    assert plots.convergence(study, ax=ax) is fig and study.plot(ax=ax) is fig
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), study.errors)


# ----- several results on one axes, labels and colours ---------------------------------------------------------
def _legend_texts(ax):
    return [text.get_text() for text in ax.get_legend().get_texts()]


def test_two_losses_on_one_axes_get_two_colours_and_two_legend_entries(sliding):
    flow, gd = sliding
    fig = plots.loss(flow, label="flow")
    ax = fig.axes[0]
    title = ax.get_title()
    assert plots.loss(gd, ax=ax, label="GD", color="C1") is fig
    (flow_line,) = [line for line in ax.lines if line.get_label() == "flow"]
    (gd_line,) = [line for line in ax.lines if line.get_label() == "GD"]
    assert matplotlib.colors.to_rgb(gd_line.get_color()) == matplotlib.colors.to_rgb("C1")
    assert matplotlib.colors.to_rgb(flow_line.get_color()) != matplotlib.colors.to_rgb("C1")
    np.testing.assert_array_equal(gd_line.get_ydata(), gd.loss)
    assert sorted(_legend_texts(ax)) == ["GD", "flow", "slide_start"]
    assert ax.get_title() == title == "loss (1 events, status success)"  # the second call keeps the first title


def test_a_second_result_without_colour_takes_the_next_one_and_its_default_label(sliding):
    flow, gd = sliding
    ax = plots.loss(flow).axes[0]
    plots.loss(flow, ax=ax)  # the same flow twice: one legend entry per distinct text
    plots.loss(gd, ax=ax)
    curves = [line for line in ax.lines if line.get_gid() is None]
    assert [line.get_label() for line in curves] == ["gradient flow", "gradient flow", "GD, lr = 0.01"]
    assert len({matplotlib.colors.to_hex(line.get_color()) for line in curves}) == 3
    assert _legend_texts(ax) == ["gradient flow", "slide_start", "GD, lr = 0.01"]


def test_loss_without_event_lines(sliding):
    flow, _ = sliding
    ax = plots.loss(flow, events=False).axes[0]
    assert len(ax.lines) == 1 and _legend_texts(ax) == ["gradient flow"]


def test_dense_events_are_drawn_as_a_rug(os_flow, monkeypatch):
    ax = plots.loss(os_flow).axes[0]
    (lines,) = ax.lines[1:]  # 21 crossings: full-height lines
    assert np.nanmax(lines.get_ydata()) == 1.0 and lines.get_gid() == "events"
    monkeypatch.setattr(plots, "MAX_EVENT_LINES", 20)
    ax = plots.loss(os_flow).axes[0]
    (rug,) = ax.lines[1:]
    assert rug.get_gid() == "rug" and np.nanmax(rug.get_ydata()) == plots.RUG_HEIGHT
    np.testing.assert_array_equal(rug.get_xdata()[::3], [ev.t for ev in os_flow.events])  # every event kept


@pytest.mark.parametrize("kwargs, name", [({"events": "no"}, "events"), ({"label": 3}, "label"),
                                          ({"color": "not-a-colour"}, "color"), ({"log": "yes"}, "log")])
def test_loss_bad_style_arguments(sliding, kwargs, name):
    with pytest.raises(ValueError, match=name):
        plots.loss(sliding[0], **kwargs)


@pytest.mark.parametrize("kwargs, name", [({"n_times": 1}, "n_times"), ({"n_times": 2.5}, "n_times"),
                                          ({"spread": -0.5}, "spread"), ({"spread": float("nan")}, "spread"),
                                          ({"color": [1, 2]}, "color")])
def test_neuron_directions_bad_arguments(os_flow, kwargs, name):
    with pytest.raises(ValueError, match=name):
        plots.neuron_directions(os_flow, **kwargs)


def test_decision_boundary_bad_times(os_flow):
    with pytest.raises(ValueError, match="times"):
        plots.decision_boundary(os_flow, times=["soon"])


def test_gd_vs_flow_relative_distance_without_events_and_two_step_sizes(sliding):
    flow, gd = sliding
    cmp = fl.compare(flow, gd)
    ax = plots.gd_vs_flow(cmp, relative=True, events=False, label="lr = 1e-2").axes[0]
    keep = cmp.times > 0
    (line,) = ax.lines
    np.testing.assert_array_equal(line.get_ydata(), cmp.relative_distance[keep])
    prob, p0 = flow.problem, fl.Params.unpacked(flow.states[0], flow.problem.bias)
    coarse = fl.compare(flow, fl.gradient_descent(prob, p0, 0.1, 100))
    plots.gd_vs_flow(coarse, ax=ax, relative=True, events=False, color="k", label="lr = 1e-1")
    assert _legend_texts(ax) == ["lr = 1e-2", "lr = 1e-1"] and "relative" in ax.get_title()
    with pytest.raises(ValueError, match="comparison"):
        plots.gd_vs_flow(flow)


def test_convergence_label_and_colour(sliding):
    flow, _ = sliding
    prob, p0 = flow.problem, fl.Params.unpacked(flow.states[0], flow.problem.bias)
    study = fl.convergence_study(prob, p0, 5.0, [1e-1, 1e-2], flow_result=flow)
    ax = plots.convergence(study, label="E1", color="tab:green").axes[0]
    points, fit = ax.lines
    assert points.get_label() == "E1" and points.get_color() == fit.get_color() == "tab:green"
    assert _legend_texts(ax) == ["E1", f"fit: order {study.order:.3f}"]


def test_convergence_leaves_out_step_sizes_whose_descent_stopped(sliding):
    import dataclasses

    flow, _ = sliding
    prob, p0 = flow.problem, fl.Params.unpacked(flow.states[0], flow.problem.bias)
    study = fl.convergence_study(prob, p0, 5.0, [1e-1, 1e-2, 1e-3], flow_result=flow)
    stopped = dataclasses.replace(study, errors=np.array([*study.errors[:2], np.nan]),
                                  status=(*study.status[:2], fl.Status.MAX_EVENTS))
    ax = plots.convergence(stopped).axes[0]
    np.testing.assert_array_equal(ax.lines[0].get_xdata(), [1e-1, 1e-2])
    assert ax.lines[0].get_label() == "GD vs flow (1 stopped early, left out)"


# ----- overview --------------------------------------------------------------------------------------------------
def test_overview_panels_share_one_time_axis(os_flow):
    left, right = plots.overview(os_flow).axes
    assert left.get_shared_x_axes().joined(left, right)
    assert left.get_xscale() == right.get_xscale() == "symlog" and left.get_xlim() == right.get_xlim()
    assert left.get_xlabel() == right.get_xlabel() == "flow time t"
    np.testing.assert_array_equal(np.sort(_raster_points(right)[:, 0]), sorted(ev.t for ev in os_flow.events))


def test_overview_of_a_log_clock_flow_draws_both_panels_against_ln_t():
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    flow = fl.gradient_flow(prob, p0, 1e8)
    assert flow.clock == "log"
    left, right = plots.overview(flow).axes
    assert left.get_xlabel().startswith("ln t") and right.get_xlabel() == left.get_xlabel()
    np.testing.assert_allclose(_raster_points(right)[:, 0], [math.log(ev.t) for ev in flow.events], rtol=1e-15)
    np.testing.assert_allclose(left.lines[1].get_xdata()[::3], _raster_points(right)[:, 0], rtol=1e-15)
    assert left.get_xlim() == right.get_xlim()


# ----- gradient descent's directions, overlays -----------------------------------------------------------------
def test_gradient_descents_directions_sample_its_iterates_uniformly_in_log_time(os_flow):
    prob, p0 = os_flow.problem, fl.Params.unpacked(os_flow.states[0], False)
    gd = fl.gradient_descent(prob, p0, 0.01, 3000)
    ax = plots.neuron_directions(gd, n_times=50, spread=0.0).axes[0]
    xy = np.column_stack([_trajectories(ax)[0].get_xdata(), _trajectories(ax)[0].get_ydata()])
    u = np.log1p(gd.times / gd.lr)  # t_1 = lr, the first recorded time
    target = np.linspace(0.0, u[-1], 50)
    rows = np.unique([int(np.argmin(np.abs(u - x))) for x in target])
    np.testing.assert_allclose(xy, _unit(gd.W[rows, 0]), rtol=0, atol=1e-15)
    assert rows[0] == 0 and rows[-1] == 3000 and np.count_nonzero(rows <= 300) >= 20  # (by index: 5 rows)


def test_neuron_directions_of_flow_and_gd_on_one_axes(os_flow):
    prob, p0 = os_flow.problem, fl.Params.unpacked(os_flow.states[0], False)
    gd = fl.gradient_descent(prob, p0, 0.1, 300)
    ax = plots.neuron_directions(os_flow, label="flow").axes[0]
    plots.neuron_directions(gd, ax=ax, color="k", label="GD")
    assert len(_trajectories(ax)) == 2 * p0.m
    assert all(line.get_color() == "k" for line in _trajectories(ax)[p0.m:])
    texts = _legend_texts(ax)
    assert texts.count("GD") == 1 and "flow: w_j / |w_j|, a_j > 0" in texts
    assert sum(text.startswith("x_i / |x_i|") for text in texts) == 2  # the data drawn once
    assert len([c for c in ax.collections if c.get_label().startswith("x_i")]) == 2


def test_decision_regions_are_shaded_by_the_sign_of_f(os_flow):
    ax = plots.decision_boundary(os_flow, times=[2.0, 30.0]).axes[0]
    (filled,) = [c for c in ax.collections if isinstance(c, matplotlib.contour.ContourSet) and c.filled]
    colours = [matplotlib.colors.to_hex(c) for c in filled.get_facecolor()]
    assert colours == [plots.REGION_COLOURS[-1], plots.REGION_COLOURS[1]]
    state = os_flow.states[-1]
    f = np.maximum(os_flow.problem.X @ state[:, :2].T, 0.0) @ state[:, 3]
    inside = filled.get_paths()[1].contains_points(os_flow.problem.X)  # the region between levels 0 and 1.5
    np.testing.assert_array_equal(inside, f > 0)
    plain = plots.decision_boundary(os_flow, regions=False).axes[0]
    assert not any(isinstance(c, matplotlib.contour.ContourSet) and c.filled for c in plain.collections)
    with pytest.raises(ValueError, match="regions"):
        plots.decision_boundary(os_flow, regions="yes")


# ----- alignment and norms -------------------------------------------------------------------------------------
def test_alignment_draws_the_best_cosine_of_each_neuron_against_log_time(os_flow):
    ax = plots.alignment(os_flow, n_times=40).axes[0]
    assert len(ax.lines) == os_flow.states.shape[1]
    x = ax.lines[0].get_xdata()
    assert x[0] == 0.0 and x[-1] == pytest.approx(math.log1p(os_flow.t_final), rel=1e-14)
    _, expected = fl.alignment_cosines(os_flow, times=np.minimum(np.expm1(x), os_flow.t_final))
    for j, line in enumerate(ax.lines):
        np.testing.assert_array_equal(line.get_xdata(), x)
        np.testing.assert_allclose(line.get_ydata(), expected[:, j].max(axis=1), rtol=0, atol=1e-12)
    assert len({line.get_color() for line in ax.lines}) == 1 and _legend_texts(ax) == ["gradient flow"]
    assert ax.get_xlabel().startswith("ln(1 + t)")


def test_alignment_of_gradient_descent_on_the_flows_axes_with_given_directions(os_flow):
    prob, p0 = os_flow.problem, fl.Params.unpacked(os_flow.states[0], False)
    gd = fl.gradient_descent(prob, p0, 0.1, 300)
    directions = [[1.0, 0.0], [0.0, -3.0]]
    ax = plots.alignment(os_flow, directions=directions, label="flow").axes[0]
    plots.alignment(gd, ax=ax, directions=directions, label="GD", color="C3")
    gd_lines = ax.lines[p0.m:]
    times = np.expm1(gd_lines[0].get_xdata())
    k = np.round(times / gd.lr).astype(int)
    np.testing.assert_allclose(times, k * gd.lr, rtol=1e-12, atol=1e-15)  # the recorded iterates themselves
    best = np.max(_unit(gd.W[k]) @ _unit(np.array(directions)).T, axis=-1)
    np.testing.assert_allclose(np.column_stack([line.get_ydata() for line in gd_lines]), best, atol=1e-12)
    assert all(line.get_color() == "C3" for line in gd_lines)
    assert _legend_texts(ax) == ["flow", "GD"]


@pytest.mark.parametrize("kwargs, name", [({"directions": [[1.0, 0.0, 0.0]]}, "directions"),
                                          ({"directions": [[0.0, 0.0]]}, "directions"),
                                          ({"n_times": 1}, "n_times"), ({"color": "nope"}, "color")])
def test_alignment_bad_arguments(os_flow, kwargs, name):
    with pytest.raises(ValueError, match=name):
        plots.alignment(os_flow, **kwargs)


def test_norms_draw_each_neurons_w_and_a(os_flow):
    ax = plots.norms(os_flow, n_times=30).axes[0]
    m = os_flow.states.shape[1]
    solid = [line for line in ax.lines if line.get_linestyle() == "-"]
    dashed = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert len(solid) == len(dashed) == m
    t = solid[0].get_xdata()
    assert t[0] == 0.0 and t[-1] == pytest.approx(os_flow.t_final, rel=1e-13)
    states = os_flow.states_at(np.minimum(t, os_flow.t_final))
    for j in range(m):
        np.testing.assert_allclose(solid[j].get_ydata(), np.linalg.norm(states[:, j, :2], axis=1), rtol=1e-10)
        np.testing.assert_allclose(dashed[j].get_ydata(), np.abs(states[:, j, 3]), rtol=1e-10)
    assert _legend_texts(ax) == ["gradient flow: |w_j|", "gradient flow: |a_j|"]
    assert ax.get_xscale() == "symlog"
    values = np.concatenate([line.get_ydata() for line in ax.lines])
    assert ax.get_yscale() == ("log" if values.max() > 100 * values[values > 0].min() else "linear")


def test_norms_with_a_bias_and_fixed_outer_weights(rate_flow):
    ax = plots.norms(rate_flow, color="k", label="seed 000").axes[0]
    assert all(line.get_linestyle() == "-" and line.get_color() == "k" for line in ax.lines)  # a_j fixed: not drawn
    assert _legend_texts(ax) == ["seed 000: |(w_j, b_j)|"]
    t = ax.lines[0].get_xdata()
    states = rate_flow.states_at(np.minimum(t, rate_flow.t_final))
    np.testing.assert_allclose(ax.lines[1].get_ydata(), np.linalg.norm(states[:, 1, :2], axis=1), rtol=1e-10)
    with pytest.raises(ValueError, match="outer"):
        plots.norms(rate_flow, outer=1)


# ----- ensembles -------------------------------------------------------------------------------------------------
def _ensemble(method="flow", statuses=("reached", "reached", "reached", "deadline", "pending"), seed=0):
    """An EnsembleResult built by hand: members with the given statuses, stop times and losses from ``seed``."""
    from flowlib import ensemble_result as er

    codes = {name: code for code, name in er.STATUS_NAMES.items()}
    count = len(statuses)
    members = er.empty_members(count, (2, 3))
    rng = np.random.default_rng(seed)
    done = np.array([s != "pending" for s in statuses])
    members["t"][done] = 10.0 ** rng.uniform(-1, 3, done.sum())
    members["loss"][done] = 10.0 ** rng.uniform(-6, 0, done.sum())
    members["status_code"][:] = [codes[s] for s in statuses]
    inits = rng.normal(size=(count, 2, 3))
    prob = fl.Problem(X=[[1.0], [-1.0]], y=[1.0, -1.0], bias=True, train_outer=False)
    return fl.EnsembleResult(method=method, problems=(prob,), problem_index=np.zeros(count, np.int64), inits=inits,
                             options={}, **members)


def test_ensemble_distribution_ecdf_and_histogram():
    values = np.array([4.0, 1.0, np.nan, 3.0, 2.0])
    ax = plots.ensemble_distribution(values, label="losses").axes[0]
    (line,) = ax.lines
    np.testing.assert_array_equal(line.get_xdata(), [1.0, 1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(line.get_ydata(), [0.0, 0.25, 0.5, 0.75, 1.0])
    assert line.get_drawstyle() == "steps-post" and _legend_texts(ax) == ["losses"]
    plots.ensemble_distribution([0.5, 5.0], ax=ax, color="C3")  # a second ensemble on the same axes
    assert _legend_texts(ax) == ["losses", "2 values"]
    wide = 10.0 ** np.linspace(-8, 0, 50)
    hist = plots.ensemble_distribution(wide, kind="hist", bins=8).axes[0]
    (patch,) = hist.patches
    assert hist.get_xscale() == "log" and _legend_texts(hist) == ["50 values"]
    counts = np.histogram(wide, bins=np.geomspace(wide[0], wide[-1] * (1 + 1e-12), 9))[0]
    assert set(patch.get_path().vertices[:, 1]) - {0.0} == set(counts.tolist()) - {0}


@pytest.mark.parametrize("args, kwargs, name", [
    (([1.0, 2.0],), {"kind": "box"}, "kind"), (([[1.0, 2.0]],), {}, "values"), ((["a", "b"],), {}, "values"),
    (([np.nan],), {}, "values"), (([-1.0, 2.0],), {"log": True}, "log"), (([1.0, 2.0],), {"bins": 0}, "bins"),
    (([1.0, 2.0],), {"label": 1}, "label")])
def test_ensemble_distribution_bad_arguments(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        plots.ensemble_distribution(*args, **kwargs)


def test_ensemble_summary_has_status_counts_stop_times_and_final_losses():
    ens = _ensemble()
    fig = plots.ensemble_summary(ens)
    counts, times, losses = fig.axes
    assert [t.get_text() for t in counts.get_yticklabels()] == ["reached", "deadline", "pending"]
    assert [patch.get_width() for patch in counts.patches] == [3, 1, 1]
    assert [matplotlib.colors.to_hex(p.get_facecolor()) for p in counts.patches] == [
        matplotlib.colors.to_hex(plots.STATUS_COLOURS[s]) for s in ("reached", "deadline", "pending")]
    assert _legend_texts(times) == ["reached (3)", "deadline (1)"] and times.get_xscale() == "log"
    (ecdf,) = losses.lines
    np.testing.assert_array_equal(ecdf.get_xdata()[1:], np.sort(ens.loss[ens.done]))
    assert losses.get_xlabel() == "final loss"
    # a second ensemble overlaid on the same three panels, in one colour
    other = _ensemble("gd", ("reached", "success", "success", "success", "failed"), seed=1)
    assert plots.ensemble_summary(other, ax=fig.axes, color="k", label="GD") is fig
    assert "GD" in _legend_texts(counts) and "GD" in _legend_texts(times) and _legend_texts(losses)[-1] == "GD"
    assert [t.get_text() for t in counts.get_yticklabels()][-2:] == ["success", "failed"]


def test_ensemble_summary_on_one_axes_is_the_stop_time_histogram():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    assert plots.ensemble_summary(_ensemble(), ax=ax) is fig and len(fig.axes) == 1
    assert sum(patch.get_height() for patch in ax.patches) == 4  # the computed members
    with pytest.raises(ValueError, match="ax"):
        plots.ensemble_summary(_ensemble(), ax=[ax, ax])
    with pytest.raises(ValueError, match="ensemble"):
        plots.ensemble_summary(np.zeros(3))


def test_ensemble_times_label_and_colour():
    first = _ensemble(statuses=("reached",) * 4)
    second = _ensemble("gd", statuses=("reached",) * 4)
    second.inits[:] = first.inits
    ax = plots.ensemble_times(first, second, label="seed 0", color="C2").axes[0]
    points = ax.lines[0]
    assert points.get_label() == "seed 0" and points.get_color() == "C2"
    np.testing.assert_array_equal(points.get_xdata(), first.t)
    with pytest.raises(ValueError, match="second"):
        plots.ensemble_times(first, None)


def test_alignment_and_norms_of_an_mpmath_flow_and_of_gradient_descent(rate_flow):
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    mp_flow = fl.gradient_flow(prob, p0, 0.5, dps=20)
    ax = plots.alignment(mp_flow, n_times=20).axes[0]
    x = ax.lines[0].get_xdata()
    _, expected = fl.alignment_cosines(rate_flow, times=np.expm1(x))  # the float64 flow, same problem
    np.testing.assert_allclose(ax.lines[1].get_ydata(), expected[:, 1].max(axis=1), atol=1e-12)
    ax = plots.norms(mp_flow, n_times=20).axes[0]
    t = ax.lines[0].get_xdata()
    np.testing.assert_allclose(ax.lines[0].get_ydata(), np.linalg.norm(rate_flow.states_at(t)[:, 0, :2], axis=1),
                               rtol=1e-12)
    gd = fl.gradient_descent(prob, p0, 0.01, 500, record_every=5)
    ax = plots.norms(gd, n_times=30).axes[0]
    t = ax.lines[0].get_xdata()
    k = np.round(t / 0.01).astype(int)
    np.testing.assert_allclose(t, k * 0.01, rtol=1e-12, atol=1e-15)  # recorded iterates, early ones kept
    assert k[0] == 0 and k[-1] == 500 and np.all(k % 5 == 0) and np.count_nonzero(k <= 50) >= 8
    np.testing.assert_allclose(ax.lines[0].get_ydata(), np.linalg.norm(gd.states[k // 5, 0, :2], axis=1),
                               rtol=1e-15)
