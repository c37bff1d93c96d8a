"""The inclusion residual: the distance of the integrator's velocity to the Filippov set, at every step start."""

import math

import numpy as np
import pytest

import flowlib as fl
from flowlib import examples
from flowlib.kernels.constants import DROP_NONE, MODE_FREE, MODE_HELD
from flowlib.kernels.inclusion import inclusion_residual


def _one_neuron_on_a_surface(slope):
    """One neuron held on sample 0's hyperplane (and active on sample 1): its velocity with slope ``slope`` on
    the held surface, the Filippov set being slopes in [leak, 1] = [0.1, 1]."""
    Xa = np.array([[1.0, -2.0, 1.0], [0.5, 1.0, 1.0]])
    G0 = np.array([0.3, -0.2])
    a = 1.5
    C = np.zeros((2, 1, 4))
    C[0, 0] = [2.0, 1.0, 0.0, a]  # z_00 = 2 - 2 + 0 = 0: on sample 0's surface
    S = np.array([[0.0], [1.0]])
    v = -a * (slope * G0[0] * Xa[0] + G0[1] * Xa[1])
    C[1, 0, :3] = v
    C[1, 0, 3] = 0.7  # a' is single-valued and not part of the check
    mode = np.array([[MODE_HELD], [MODE_FREE]], dtype=np.int8)
    drop = np.full((2, 1), DROP_NONE, dtype=np.int8)
    return Xa, G0, C, S, mode, drop, a


@pytest.mark.parametrize("slope", [0.1, 0.55, 1.0])
def test_a_velocity_in_the_filippov_set_has_zero_residual(slope):
    Xa, G0, C, S, mode, drop, _ = _one_neuron_on_a_surface(slope)
    assert inclusion_residual(Xa, G0, C, S, mode, drop, 0.1, True) <= 4 * np.finfo(np.float64).eps


@pytest.mark.parametrize("slope, nearest", [(2.0, 1.0), (-0.5, 0.1)])
def test_a_velocity_outside_the_set_is_measured(slope, nearest):
    Xa, G0, C, S, mode, drop, a = _one_neuron_on_a_surface(slope)
    distance = abs(slope - nearest) * abs(a * G0[0]) * np.linalg.norm(Xa[0])
    expected = distance / np.linalg.norm(C[1])
    assert inclusion_residual(Xa, G0, C, S, mode, drop, 0.1, True) == pytest.approx(expected, rel=1e-12)


def test_runs_that_cross_slide_and_stick_certify_themselves(tmp_path):
    cases = [examples.gd_rate_network(2.0, 3.0, -2.0, 3.1),  # sticks twice
             examples.sliding_two_points(),  # slides
             examples.os_logistic()]  # crosses 21 times
    for prob, p0 in cases:
        for t_end in (200.0, 1e8):  # the flow time and the log clock
            res = fl.gradient_flow(prob, p0, t_end, dense_output=False)
            assert res.status == "success" and res.n_events > 0
            assert 0.0 <= res.inclusion_residual <= 1e-14
            assert "inclusion residual" in res.summary()
    again = fl.load(res.save(tmp_path / "run.npz"))
    assert again.inclusion_residual == res.inclusion_residual


def test_the_mpmath_backend_does_not_claim_a_residual():
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    res = fl.gradient_flow(prob, p0, 5.0, dps=20)
    assert math.isnan(res.inclusion_residual) and "inclusion residual" not in res.summary()
