"""The inclusion residual: the distance of the integrator's velocity to the Filippov set, at every step start."""

from types import SimpleNamespace

import numpy as np
import pytest
from mpmath import mp, mpf

import flowlib as fl
from flowlib import examples
from flowlib.kernels.constants import DROP_NONE, MODE_FREE, MODE_HELD
from flowlib.kernels.events import box_least_squares
from flowlib.kernels.inclusion import inclusion_residual
from flowlib.mp import linalg as mp_linalg
from flowlib.mp.inclusion import inclusion_residual as mp_inclusion_residual
from flowlib.mp.linalg import box_least_squares as mp_box_least_squares
from flowlib.mp.series import MPData


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


def _rows(Xa, G0, S):
    """The recurrence's residual rows ``R0_j = sum_i s_ij G_i (x_i, 1)`` and each sample's ``|(x_i, 1)|_1`` (every
    case here has a bias), as the driver hands them to :func:`inclusion_residual`."""
    return S.T @ (G0[:, None] * Xa), np.abs(Xa).sum(axis=1)


def _held(band_lo=0.0, band_hi=0.0):
    """The driver's held slots for :func:`_one_neuron_on_a_surface`: one independent slot (sample 0, neuron 0)
    with noise bands ``band_lo`` at ``leak`` and ``band_hi`` at 1."""
    return (np.array([0]), np.array([False]), np.array([[band_lo, band_hi]]), np.array([0, 1]))


@pytest.mark.parametrize("slope", [0.1, 0.55, 1.0])
def test_a_velocity_in_the_filippov_set_has_zero_residual(slope):
    Xa, G0, C, S, mode, drop, _ = _one_neuron_on_a_surface(slope)
    got = inclusion_residual(Xa, G0, *_rows(Xa, G0, S), C, S, mode, drop, 0.1, True, 0.0, _held())
    assert got <= 4 * np.finfo(np.float64).eps


@pytest.mark.parametrize("slope, nearest", [(2.0, 1.0), (-0.5, 0.1)])
def test_a_velocity_outside_the_set_is_measured(slope, nearest):
    Xa, G0, C, S, mode, drop, a = _one_neuron_on_a_surface(slope)
    distance = abs(slope - nearest) * abs(a * G0[0]) * np.linalg.norm(Xa[0])
    expected = distance / np.linalg.norm(C[1])
    got = inclusion_residual(Xa, G0, *_rows(Xa, G0, S), C, S, mode, drop, 0.1, True, 0.0, _held())
    assert got == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("slope, bound, side", [(1.3, 1.0, 1), (-0.2, 0.1, 0)])
def test_a_multiplier_kept_inside_its_noise_band_is_not_counted(slope, bound, side):
    """The engine holds a surface whose multiplier is beyond a bound by less than its noise band (a band in units
    of ``num - beta den``, that is of ``G_i`` times the slope): the residual widens that slope's box by the band
    over ``|G_i|``, and measures only what lies beyond it."""
    Xa, G0, C, S, mode, drop, a = _one_neuron_on_a_surface(slope)
    excess = abs(slope - bound)
    bands = [0.0, 0.0]
    bands[side] = 1.5 * excess * abs(G0[0])  # the band covers the excess
    assert inclusion_residual(Xa, G0, *_rows(Xa, G0, S), C, S, mode, drop, 0.1, True, 0.0, _held(*bands)) <= \
        4 * np.finfo(np.float64).eps
    bands[side] = 0.25 * excess * abs(G0[0])  # the band covers a quarter of it
    expected = 0.75 * excess * abs(a * G0[0]) * np.linalg.norm(Xa[0]) / np.linalg.norm(C[1])
    assert inclusion_residual(Xa, G0, *_rows(Xa, G0, S), C, S, mode, drop, 0.1, True, 0.0, _held(*bands)) == \
        pytest.approx(expected, rel=1e-12)
    # a dependent slot is widened alike (the engine releases its class by a gap whose band sums its members')
    held = _held(*bands)
    held[1][0] = True
    got = inclusion_residual(Xa, G0, *_rows(Xa, G0, S), C, S, mode, drop, 0.1, True, 0.0, held)
    assert got == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("cover, remaining", [(1.5, 0.0), (0.25, 1.5)])
def test_a_class_of_duplicate_samples_is_widened_by_its_members_bands(cover, remaining):
    """Two duplicate samples held together (a class: their normals are equal, so only the sum of their slopes
    acts), both slopes ``leak - delta``: the combined coefficient ``2 (leak - delta)`` lies ``2 delta`` below the
    class's range ``[2 leak, 2]``. Each member's band ``b`` widens its slope by ``b / |G|``, the class's range by
    ``2 b / |G|``: a band of ``1.5 delta |G|`` covers the excess, one of ``0.25 delta |G|`` leaves ``1.5 delta``
    (closed form ``1.5 delta |a G| |n|``). Found on a converged square-loss flow with binary features, where 43
    duplicates held a neuron with their combined slope ``3e-10`` below ``leak``: a residual of 1.6e-9."""
    leak, delta, a = 0.1, 1e-3, 1.5
    Xa = np.array([[1.0, -2.0, 1.0], [1.0, -2.0, 1.0], [0.5, 1.0, 1.0]])
    G0 = np.array([0.3, 0.3, -0.2])
    C = np.zeros((2, 1, 4))
    C[0, 0] = [2.0, 1.0, 0.0, a]
    C[1, 0, :3] = -a * (2 * (leak - delta) * G0[0] * Xa[0] + G0[2] * Xa[2])
    S = np.array([[0.0], [0.0], [1.0]])
    mode = np.array([[MODE_HELD], [MODE_HELD], [MODE_FREE]], dtype=np.int8)
    drop = np.full((3, 1), DROP_NONE, dtype=np.int8)
    band = cover * delta * abs(G0[0])
    held = (np.array([0, 1]), np.array([True, True]), np.array([[band, band], [band, band]]), np.array([0, 2]))
    expected = remaining * delta * abs(a * G0[0]) * np.linalg.norm(Xa[0]) / np.linalg.norm(C[1])
    got = inclusion_residual(Xa, G0, *_rows(Xa, G0, S), C, S, mode, drop, leak, True, 0.0, held)
    assert got <= 4 * np.finfo(np.float64).eps if remaining == 0.0 else got == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("eps", [1e-8, 1e-10])
def test_the_box_least_squares_minimum_is_exact_where_it_is_zero(eps):
    """``min |v0 + E s|`` over ``[0, 1]^2`` with ``E = [[1, 1], [0, eps]]`` and ``v0 = -E (1/2, 1/2)``: the minimum
    is 0 at ``s = (1/2, 1/2)`` (``E`` is invertible). From ``s = 0`` the active set frees ``s_0`` and stops at
    ``(1, 0)``, where the gradient of ``s_1`` is ``-eps^2 / 2``: below the release test's rounding threshold, it
    would leave a residual ``eps / 2``, which an inclusion residual reports for a velocity inside the set (found
    with 39 hyperplanes through a neuron near the origin, 1.1e-9). The refinement releases it anyway and keeps the
    smaller residual. Float64, and the mpmath twin at 30 digits with ``eps = 1e-14``."""
    E = np.array([[1.0, 1.0], [0.0, eps]])
    v0 = -E @ np.array([0.5, 0.5])
    s = np.empty(2)
    box_least_squares(E, v0, 0.0, 1.0, s)
    assert np.linalg.norm(v0 + E @ s) <= 4 * np.finfo(np.float64).eps
    assert s == pytest.approx([0.5, 0.5], abs=1e3 * np.finfo(np.float64).eps / eps)
    with mp.workdps(30):
        small = mpf("1e-14")
        columns = [[mpf(1), mpf(0)], [mpf(1), small]]
        target = [-(x + y) / 2 for x, y in zip(*columns)]
        got = mp_box_least_squares(columns, target, mpf(0), mpf(1))
        assert mp_linalg.norm(mp_linalg.combine(target, columns, got)) <= 4 * mp.eps
        assert max(abs(x - mpf(1) / 2) for x in got) <= 1e3 * mp.eps / small


def _fitted_sample_case(tau):
    """:func:`_one_neuron_on_a_surface` with sample 0 fitted exactly (``G_0 = 0``, as at a converged square loss):
    its slope does not enter the velocity, which is ``v0 + tau n_0`` (``v0`` sample 1's term)."""
    Xa, G0, C, S, mode, drop, a = _one_neuron_on_a_surface(0.5)
    G0 = np.array([0.0, -0.2])
    C[1, 0, :3] = -a * G0[1] * Xa[1] + tau * Xa[0]
    return Xa, G0, C, S, mode, drop, a


@pytest.mark.parametrize("side", [0, 1])
def test_a_fitted_sample_held_within_its_noise_band_is_not_counted(side):
    """At ``G_i = 0`` the widened box (the band over ``|G_i|``) has no finite form; its limit is the normal times
    ``[-band, band] |a_j|``, the velocity's uncertainty along it: a normal component within it is not counted, one
    four times larger counts beyond it (found on converged square-loss flows with integer data, residuals up to
    0.24 of a velocity at the rounding level)."""
    band = 1e-3
    bands = [0.0, 0.0]
    bands[side] = band
    a = _one_neuron_on_a_surface(0.5)[-1]
    Xa, G0, C, S, mode, drop, _ = _fitted_sample_case(0.5 * a * band)
    assert inclusion_residual(Xa, G0, *_rows(Xa, G0, S), C, S, mode, drop, 0.1, True, 0.0, _held(*bands)) <= \
        4 * np.finfo(np.float64).eps
    Xa, G0, C, S, mode, drop, _ = _fitted_sample_case(-4.0 * a * band)
    expected = 3.0 * a * band * np.linalg.norm(Xa[0]) / np.linalg.norm(C[1])
    assert inclusion_residual(Xa, G0, *_rows(Xa, G0, S), C, S, mode, drop, 0.1, True, 0.0, _held(*bands)) == \
        pytest.approx(expected, rel=1e-12)
    # without a band the whole normal component counts
    assert inclusion_residual(Xa, G0, *_rows(Xa, G0, S), C, S, mode, drop, 0.1, True, 0.0, _held()) == pytest.approx(
        expected * 4 / 3, rel=1e-12)
    with mp.workdps(40):
        data = MPData.from_problem(fl.Problem(Xa[:, :2], [-1.0, 1.0], loss="exp", activation="leaky_relu",
                                              leak=0.1, bias=True, train_outer=True))
        Cm = [[[mpf(float(x)) for x in C[0, 0]]], [[mpf(float(x)) for x in C[1, 0]]]]
        held = SimpleNamespace(slots=[(0, 0)], dependent=[False],
                               band={(0, data.leak): mpf(bands[0]), (0, mpf(1)): mpf(bands[1])})
        got = mp_inclusion_residual(data, [mpf(0), mpf(float(G0[1]))], Cm, [[mpf(0)], [mpf(1)]], mode.tolist(),
                                    drop.tolist(), held)
        assert abs(got - expected) <= 1e-12 * expected


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


def _mp_case(slope):
    """The one-neuron case above over mpmath numbers (40 digits), as :mod:`flowlib.mp.inclusion` takes it."""
    Xa, G0, C, S, mode, drop, a = _one_neuron_on_a_surface(slope)
    prob = fl.Problem(Xa[:, :2], [-1.0, 1.0], loss="exp", activation="leaky_relu", leak=0.1, bias=True,
                      train_outer=True)
    data = MPData.from_problem(prob)
    G = [mpf(float(g)) for g in G0]
    v = [-mpf(a) * (mpf(slope) * G[0] * x0 + G[1] * x1) for x0, x1 in zip(data.normals[0], data.normals[1])]
    Cm = [[[mpf(float(x)) for x in C[0, 0]]], [v + [mpf("0.7")]]]
    Sm = [[mpf(0)], [mpf(1)]]
    return data, G, Cm, Sm, mode.tolist(), drop.tolist(), a


@pytest.mark.parametrize("slope, nearest", [(0.55, 0.55), (2.0, 1.0), (-0.5, 0.1)])
def test_the_mpmath_residual_measures_the_distance_at_working_precision(slope, nearest):
    with mp.workdps(40):
        data, G, C, S, mode, drop, a = _mp_case(mpf(slope))
        normal = data.normals[0]
        distance = abs(mpf(slope) - mpf(nearest)) * abs(a * G[0]) * mp.sqrt(mp.fsum(x * x for x in normal))
        expected = distance / mp.sqrt(mp.fsum(x * x for row in C[1] for x in row))
        got = mp_inclusion_residual(data, G, C, S, mode, drop)
        assert abs(got - expected) <= mpf(10) ** -35


def test_the_mpmath_residual_widens_a_held_slot_by_its_band():
    """The mpmath mirror of the widened box: slope 1.3 on a surface held with a band of a quarter of the excess
    at 1 leaves three quarters of the distance."""
    with mp.workdps(40):
        data, G, C, S, mode, drop, a = _mp_case(mpf("1.3"))
        excess = mpf("0.3")
        band = {(0, data.leak): mpf(0), (0, mpf(1)): excess * abs(G[0]) / 4}
        held = SimpleNamespace(slots=[(0, 0)], dependent=[False], band=band)
        norm = mp.sqrt(mp.fsum(x * x for x in data.normals[0]))
        expected = 3 * excess / 4 * abs(a * G[0]) * norm / mp.sqrt(mp.fsum(x * x for row in C[1] for x in row))
        assert abs(mp_inclusion_residual(data, G, C, S, mode, drop, held) - expected) <= mpf(10) ** -35


@pytest.mark.parametrize("tie", ["stay", "leave"])
def test_the_mpmath_backend_certifies_its_runs(tie):
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)  # sticks twice
    res = fl.gradient_flow(prob, p0, 200.0, dps=30, tie=tie)
    assert res.status == "success" and res.n_events > 0
    assert 0.0 <= res.inclusion_residual <= 1e-28
    assert "inclusion residual" in res.summary()


def test_a_neuron_dead_at_the_origin_is_not_measured_against_its_rounding():
    """A neuron that slides into the origin (every hyperplane through it) and dies there: its velocity is the
    rounding of terms of size 1e-2, so relative to it any distance is noise; the residual counts only distances
    beyond the velocity's rounding (found by the degenerate-problem stress test)."""
    X = np.array([[0.34558419], [-0.10598867], [-0.12551737], [0.0], [0.12551737]])
    prob = fl.Problem(X, [-1.0, -1.0, -1.0, 1.0, 1.0], loss="exp", reduction="mean", bias=True, train_outer=False)
    p0 = fl.Params(W=np.array([[0.00029413]]), b=np.array([0.00852667]), a=np.array([0.54671299]))
    res = fl.gradient_flow(prob, p0, 5.0)
    assert res.status == "success"
    assert np.max(np.abs(res.states[-1, 0, :2])) <= 1e-16  # dead at the origin
    assert res.loss[-1] == pytest.approx(1.0, abs=1e-15)
    assert res.energy_residual <= 1e-14 and res.inclusion_residual <= 1e-10
