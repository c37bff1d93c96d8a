"""``flowlib.diagnostics``: the alignment cosines, class directions and neuron vectors, checked against direct numpy
computations on the recorded states and on the dense output."""

import numpy as np
import pytest

import flowlib as fl
from flowlib import diagnostics, examples


def _unit(V):
    return V / np.linalg.norm(V, axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def os_flow():
    """Six small neurons (no bias), eight 2-D points, logistic loss: the neurons turn towards the data early."""
    prob, p0 = examples.os_logistic()
    return fl.gradient_flow(prob, p0, 30.0)


def test_alignment_cosines_are_the_cosines_to_the_class_means(os_flow):
    X, y = os_flow.problem.X, os_flow.problem.y
    means = _unit(np.array([X[y > 0].mean(axis=0), X[y < 0].mean(axis=0)]))
    times, cosines = fl.alignment_cosines(os_flow)
    np.testing.assert_array_equal(times, os_flow.t)
    assert cosines.shape == (os_flow.n_steps + 1, 6, 2)
    np.testing.assert_allclose(cosines, _unit(os_flow.W) @ means.T, rtol=0, atol=1e-15)
    # early alignment: by the end every neuron is closer to a class direction than at t = 0 on average
    assert cosines[-1].max(axis=1).mean() > cosines[0].max(axis=1).mean()


def test_with_a_bias_the_neuron_is_w_b_and_the_directions_live_with_x_1():
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    flow = fl.gradient_flow(prob, p0, 5.0)
    Xa = prob.augmented_inputs  # (x_i, 1): x = -1 has y = -1, x = +1 has y = +1
    np.testing.assert_allclose(diagnostics.class_directions(prob), _unit(np.array([Xa[1], Xa[0]])))
    times, cosines = fl.alignment_cosines(flow)
    V = flow.states[:, :, :2]  # (w_j, b_j)
    np.testing.assert_allclose(cosines, _unit(V) @ _unit(np.array([Xa[1], Xa[0]])).T, rtol=0, atol=1e-15)


def test_given_times_use_the_dense_output_and_given_directions_are_normalised(os_flow):
    directions = np.array([[3.0, 0.0], [1.0, 1.0], [0.0, -2.0]])
    times, cosines = fl.alignment_cosines(os_flow, times=[0.5, 2.0, 7.25], directions=directions)
    np.testing.assert_array_equal(times, [0.5, 2.0, 7.25])
    W = os_flow.states_at([0.5, 2.0, 7.25])[:, :, :2]
    np.testing.assert_allclose(cosines, _unit(W) @ _unit(directions).T, rtol=0, atol=1e-15)
    _, single = fl.alignment_cosines(os_flow, times=[2.0], directions=[0.0, 5.0])  # one direction as a 1-D array
    np.testing.assert_allclose(single[0, :, 0], _unit(W[1])[:, 1], atol=1e-15)


def test_gradient_descent_at_given_times_takes_the_nearest_recorded_iterates(os_flow):
    prob, p0 = os_flow.problem, fl.Params.unpacked(os_flow.states[0], False)
    gd = fl.gradient_descent(prob, p0, 0.1, 50, record_every=10)
    times, cosines = fl.alignment_cosines(gd, times=[0.0, 1.4, 4.9])
    np.testing.assert_array_equal(times, [0.0, 1.0, 5.0])  # iterates 0, 10, 50
    np.testing.assert_allclose(cosines, fl.alignment_cosines(gd)[1][[0, 1, 5]], rtol=0, atol=0)


def test_class_directions_weight_the_samples_by_their_labels():
    prob, _ = examples.three_points(4)  # square loss, targets 1.1, 0.1, 0.8: one class
    (direction,) = diagnostics.class_directions(prob)
    np.testing.assert_allclose(direction, _unit(prob.y @ prob.augmented_inputs), rtol=1e-15)
    zero = fl.Problem(X=[[1.0, 0.0], [0.0, 1.0]], y=[0.0, 0.0], loss="square", bias=False, train_outer=False)
    with pytest.raises(ValueError, match="directions"):
        diagnostics.class_directions(zero)


def test_a_zero_neuron_has_no_cosine():
    prob = fl.Problem(X=[[1.0, 0.0], [0.0, 1.0]], y=[1.0, -1.0], bias=False, train_outer=False)
    states = np.array([[[0.0, 0.0, 0.0, 1.0], [2.0, 0.0, 0.0, 1.0]]])
    cosines = diagnostics.cosines(prob, states)
    assert np.all(np.isnan(cosines[0, 0])) and cosines[0, 1].tolist() == [1.0, 0.0]


@pytest.mark.parametrize("directions", [[[1.0, 0.0, 0.0]], [[0.0, 0.0]], [[np.nan, 1.0]], np.zeros((0, 2)),
                                        np.ones((1, 1, 2)), [["a", "b"]]])
def test_bad_directions_name_the_argument(os_flow, directions):
    with pytest.raises(ValueError, match="directions"):
        fl.alignment_cosines(os_flow, directions=directions)


def test_bad_result_and_times_name_the_argument(os_flow):
    with pytest.raises(ValueError, match="result"):
        fl.alignment_cosines(os_flow.problem)
    with pytest.raises(ValueError, match="times"):
        fl.alignment_cosines(os_flow, times=["a"])
    with pytest.raises(ValueError, match="directions"):  # with a bias the directions have d + 1 columns
        prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
        fl.alignment_cosines(fl.gradient_flow(prob, p0, 1.0), directions=[[1.0]])
