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
    assert labels[:5] == [f"f = 0 at t = {t:.3g}" for t in times] and labels[5:] == ["x_i, y > 0", "x_i, y < 0"]
    contours = [c for c in ax.collections if isinstance(c, matplotlib.contour.ContourSet)]
    assert len(contours) == 5
    for t, contour in zip(times, contours):
        state = os_flow.states_at([t])[0]
        points = np.concatenate(contour.allsegs[0])
        f = np.maximum(points @ state[:, :2].T, 0.0) @ state[:, 3]
        scale = np.abs(state[:, 3]) @ np.linalg.norm(state[:, :2], axis=1)  # Lipschitz constant of f
        assert len(points) > 10 and np.max(np.abs(f)) <= 0.02 * scale  # on the zero set up to the grid spacing
    darkness = [np.sum(c.get_edgecolor()[0][:3]) for c in contours]
    assert np.all(np.diff(darkness) < 0)  # later times darker


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
