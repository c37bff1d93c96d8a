"""PiecewiseAffine: classical Filippov and Zeno benchmarks.

Twisting oscillator ``x1' = x2, x2' = -2 sgn x1 - sgn x2``, ``x(0) = (1, 0)``: switching times accumulate at
``T = 2 sqrt 2 + (2/3) sqrt 6`` (recomputed exactly); each half-turn shrinks the amplitude by 1/3 and the time by
1/sqrt 3; the Filippov solution stays at the origin afterwards.
"""

import math

import mpmath as mp
import numpy as np
import pytest

import flowlib as fl


def twisting():
    return fl.PiecewiseAffine(A0=[[0, 1], [0, 0]], c0=[0, 0], A=np.zeros((2, 2, 2)), c=[[0, -2], [0, -1]],
                              normals=[[1, 0], [0, 1]])


def test_twisting_zeno_time_and_rest():
    res = twisting().solve([1.0, 0.0], 10.0)
    assert res.status == "success"
    with mp.workdps(40):
        t_acc = 2 * mp.sqrt(2) + mp.mpf(2) / 3 * mp.sqrt(6)
        assert abs(t_acc - mp.mpf("4.461420286601642163068233498")) < 1e-27
    zeno = res.zeno_times()
    assert len(zeno) == 1
    assert abs(zeno[0] - float(t_acc)) <= 1e-8
    assert np.linalg.norm(res.final) <= 1e-10
    # the switches before it are the exact ones: 1.4142136, 1.8856181, 2.7021147, 2.9742802 (exact, event by event)
    crossings = [e.t for e in res.events if e.kind == "cross"]
    np.testing.assert_allclose(crossings[:4], [math.sqrt(2), 1.8856180831641267, 2.7021146640918524,
                                               2.9742801910677606], rtol=1e-14)
    assert len(crossings) < 40  # detected after a few cycles, not by exhausting a budget


def test_single_surface_sliding_closed_form():
    """x' = -sgn(x1) (1, 0) + (0, 1): reaches x1 = 0 at t = 1 and slides with x2' = 1 (control 0)."""
    system = fl.PiecewiseAffine(A0=np.zeros((2, 2)), c0=[0, 1], A=np.zeros((1, 2, 2)), c=[[-1, 0]],
                                normals=[[1, 0]])
    res = system.solve([1.0, 0.0], 3.0)
    assert res.status == "success"
    assert [(e.kind, e.surface) for e in res.events] == [("slide_start", 0)]
    assert res.events[0].t == pytest.approx(1.0, rel=1e-15)
    np.testing.assert_allclose(res.final, [0.0, 3.0], atol=1e-14)


@pytest.mark.parametrize("s", [1.0, 1e10, 1e100])
def test_surface_decisions_do_not_depend_on_the_size_of_other_components(s):
    """x1' = x2 + s, x2' = -2 sgn x1 - sgn x2 from (s, 0): x2 = 0 is left downwards at once (x2' in [-3, -1] on
    it), then x2 = -t and x1 = s + s t - t^2 / 2. Each surface's normal velocity is measured against its own
    terms: with the whole field as yardstick (|x'| = s) the velocity -2 of x2 counted as rounding from s = 1e10 on,
    and no configuration was consistent at t = 0."""
    system = fl.PiecewiseAffine(A0=[[0, 1], [0, 0]], c0=[s, 0], A=np.zeros((2, 2, 2)), c=[[0, -2], [0, -1]],
                                normals=[[1, 0], [0, 1]])
    res = system.solve([s, 0.0], 1.0)
    assert res.status == "success", res.message
    np.testing.assert_allclose(res.state_at([0.5, 1.0]), [[s + s / 2 - 1 / 8, -0.5], [2 * s - 0.5, -1.0]],
                               rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("f1, f2", [(1e-12, 1.0), (1.0, 1e12), (1e-150, 1e150)])
def test_scaled_normals_give_the_same_zeno_point(f1, f2):
    """Twisting with its normals scaled (the same surfaces): the same accumulation time, to rounding."""
    system = fl.PiecewiseAffine(A0=[[0, 1], [0, 0]], c0=[0, 0], A=np.zeros((2, 2, 2)), c=[[0, -2], [0, -1]],
                                normals=[[f1, 0], [0, f2]])
    res = system.solve([1.0, 0.0], 10.0)
    with mp.workdps(40):
        exact = float(2 * mp.sqrt(2) + mp.mpf(2) / 3 * mp.sqrt(6))
    assert res.status == "success" and len(res.zeno_times()) == 1
    assert abs(res.zeno_times()[0] - exact) <= 1e-14


def test_bad_input():
    with pytest.raises(ValueError, match="normals"):
        fl.PiecewiseAffine(A0=np.zeros((2, 2)), c0=[0, 0], A=np.zeros((1, 2, 2)), c=[[0, 1]], normals=[[1, 0, 0]])
    with pytest.raises(ValueError, match="normals row 1 is zero"):
        fl.PiecewiseAffine(A0=np.zeros((2, 2)), c0=[0, 0], A=np.zeros((2, 2, 2)), c=[[0, 1], [1, 0]],
                           normals=[[1, 0], [0, 0]])
    with pytest.raises(ValueError, match="x0"):
        twisting().solve([1.0, 0.0, 0.0], 1.0)
    with pytest.raises(ValueError, match="t_end"):
        twisting().solve([1.0, 0.0], -1.0)
