"""PiecewiseAffine: Zeno points of converging ratio and of long cycles, ties on repelling surfaces, dense output.

Every reference is computed here with mpmath, independently of flowlib:

* twisting on a spring plant ``x'' = -k x - a sgn x - b sgn x'`` (``a > b > 0``): in each quadrant the solution is
  the harmonic oscillation ``x = x_c + (x_0 - x_c) cos(w t) + (v_0 / w) sin(w t)`` about ``x_c = -(a s_1 + b s_2) / k``;
  each gap to the next event (``x = 0`` or ``x' = 0``) is solved with ``findroot`` from its closed-form phase
  angle, the gaps are summed until they are below ``1e-16`` (the amplitude is then ``~1e-32``, so the spring's share
  of the field is negligible), and the geometric tail of pure twisting is added (time ratio
  ``sqrt((a - b) / (a + b))`` per half-turn). The ratio per cycle converges to that value without being constant;
* a spiral through the origin: ``L`` lines at angles ``j pi / L``, a constant field in each of the ``2 L`` sectors
  (``c_k = -alpha n_k - beta t_k``, plus an offset ``c0`` that makes the sectors differ): the field is homogeneous
  of degree 0, so each sector maps the radius ``r`` on its first ray to ``mu_j r`` on the next after a time
  ``tau_j r`` (a 2 x 2 linear solve) and the accumulation time is a geometric series in closed form;
* twisting ``x'' = -2 sgn x - sgn x'``: piecewise-quadratic closed form, for the dense output.
"""

import math

import mpmath as mp
import numpy as np
import pytest

import flowlib as fl
from flowlib import piecewise

# --------------------------------------------------------------------------------------------------------------
# independent references
# --------------------------------------------------------------------------------------------------------------


def spring_twisting(k, a, b):
    return fl.PiecewiseAffine(A0=[[0, 1], [-k, 0]], c0=[0, 0], A=np.zeros((2, 2, 2)), c=[[0, -a], [0, -b]],
                              normals=[[1, 0], [0, 1]])


def spring_twisting_reference(k, a, b, x0=1, v0=0, dps=60, stop="1e-16"):
    """Event times and accumulation time of ``x'' = -k x - a sgn x - b sgn x'`` from ``(x0, v0)`` (mpmath)."""
    with mp.workdps(dps):
        k, a, b, stop = mp.mpf(k), mp.mpf(a), mp.mpf(b), mp.mpf(stop)
        w = mp.sqrt(k)
        x, v, t = mp.mpf(x0), mp.mpf(v0), mp.mpf(0)
        s1 = mp.sign(x) if x != 0 else mp.sign(v)
        s2 = mp.sign(v) if v != 0 else mp.sign(-k * x - a * s1)
        last = "x" if x == 0 else ("v" if v == 0 else None)
        times, gaps = [], []
        while len(gaps) < 2 or gaps[-1] >= stop:
            xc = -(a * s1 + b * s2) / k
            radius = mp.sqrt((x - xc) ** 2 + (v / w) ** 2)
            # x - xc = radius cos(psi), v / w = -radius sin(psi), psi = w tau + psi0
            psi0 = -mp.atan2(v / w, x - xc)
            psi_v = (mp.floor(psi0 / mp.pi) + 1) * mp.pi  # next v = 0
            psi_x = mp.inf  # next x = 0: cos(psi) = -xc / radius
            if last == "x":  # psi0 is one root; the next is the other branch, -psi0 (mod 2 pi)
                psi_x = -psi0 + 2 * mp.pi * mp.ceil(psi0 / mp.pi)
                if psi_x <= psi0:
                    psi_x += 2 * mp.pi
            elif abs(xc / radius) <= 1:
                base = mp.acos(-xc / radius)
                for branch in (base, -base):
                    psi = branch + 2 * mp.pi * mp.ceil((psi0 - branch) / (2 * mp.pi))
                    psi_x = min(psi_x, psi if psi > psi0 else psi + 2 * mp.pi)
            last = "x" if psi_x < psi_v else "v"
            guess = (min(psi_x, psi_v) - psi0) / w

            def position(tau, x=x, v=v, xc=xc):
                return xc + (x - xc) * mp.cos(w * tau) + v / w * mp.sin(w * tau)

            def velocity(tau, x=x, v=v, xc=xc):
                return -(x - xc) * w * mp.sin(w * tau) + v * mp.cos(w * tau)

            f = position if last == "x" else velocity
            scale = abs(x) + abs(v) * guess + (a + b + k * abs(x)) * guess**2
            gap = guess * mp.findroot(lambda s: f(s * guess) / scale, mp.mpf(1))
            x, v = (mp.mpf(0), velocity(gap)) if last == "x" else (position(gap), mp.mpf(0))
            if last == "x":
                s1 = -s1
            else:
                s2 = -s2
            t += gap
            times.append(t)
            gaps.append(gap)
        q = mp.sqrt((a - b) / (a + b))  # pure twisting: both gaps of a half-turn shrink by q
        return times, t + (gaps[-1] + gaps[-2]) * q / (1 - q)


def spiral_args(lines, alpha, beta, c0):
    """``lines`` lines through the origin at angles ``j pi / lines``; ``2 lines`` constant-field sectors."""
    theta = [j * math.pi / lines for j in range(lines)]
    normals = [[-math.sin(th), math.cos(th)] for th in theta]
    tangents = [[math.cos(th), math.sin(th)] for th in theta]
    c = [[-alpha * n[0] - beta * e[0], -alpha * n[1] - beta * e[1]] for n, e in zip(normals, tangents)]
    return dict(A0=np.zeros((2, 2)), c0=list(c0), A=np.zeros((lines, 2, 2)), c=c, normals=normals)


def spiral_reference(args, dps=40):
    """Crossing times of the first turn from ``(1, 0)`` and the accumulation time, exact in the float64 data."""
    with mp.workdps(dps + 10):
        normals = [[mp.mpf(v) for v in row] for row in args["normals"]]
        c = [[mp.mpf(v) for v in row] for row in args["c"]]
        c0 = [mp.mpf(v) for v in args["c0"]]
        lines = len(normals)
        elapsed, radius, times = mp.mpf(0), mp.mpf(1), []
        for j in range(2 * lines):
            phi0, phi1 = j * mp.pi / lines, (j + 1) * mp.pi / lines
            e0, e1 = (mp.cos(phi0), mp.sin(phi0)), (mp.cos(phi1), mp.sin(phi1))
            mid = (phi0 + phi1) / 2
            sigma = [mp.sign(n[0] * mp.cos(mid) + n[1] * mp.sin(mid)) for n in normals]
            f = [c0[i] + sum(s * ck[i] for s, ck in zip(sigma, c)) for i in range(2)]
            # radius e0 + tau f = mu e1: Cramer's rule on [f, -e1] (tau, mu) = -radius e0
            det = -f[0] * e1[1] + e1[0] * f[1]
            tau = radius * (e0[0] * e1[1] - e1[0] * e0[1]) / det
            mu = (-f[0] * e0[1] * radius + e0[0] * radius * f[1]) / det
            assert tau > 0 and mu > 0
            elapsed += tau
            times.append(elapsed)
            radius = mu
        return times, elapsed / (1 - radius), radius


def twisting_reference(t_query):
    """``x'' = -2 sgn x - sgn x'`` from ``(1, 0)``: the state at the times ``t_query`` (mpmath, piecewise
    quadratic, before the Zeno time)."""
    with mp.workdps(40):
        x, v, t, s1, s2 = mp.mpf(1), mp.mpf(0), mp.mpf(0), 1, -1
        pieces = []
        while t < 4:
            g = -2 * s1 - s2
            roots = [tau for tau in (-v / g,) if tau > 0]  # v = 0
            disc = v * v - 2 * g * x
            if disc >= 0:
                roots += [tau for tau in ((-v + sgn * mp.sqrt(disc)) / g for sgn in (1, -1)) if tau > 0]
            gap = min(roots)
            pieces.append((t, gap, x, v, g))
            x, v = x + v * gap + g * gap**2 / 2, v + g * gap
            if abs(x) < abs(v) * 1e-30:
                x, s1 = mp.mpf(0), -s1
            else:
                v, s2 = mp.mpf(0), -s2
            t += gap
        out = []
        for tq in t_query:
            tq = mp.mpf(tq)
            start, gap, x, v, g = next(p for p in pieces if p[0] <= tq <= p[0] + p[1])
            tau = tq - start
            out.append([float(x + v * tau + g * tau**2 / 2), float(v + g * tau)])
        return np.array(out)


# --------------------------------------------------------------------------------------------------------------
# Zeno points with converging ratios: twisting on a spring plant
# --------------------------------------------------------------------------------------------------------------
GAINS = [(1.0, 2.0, 1.0), (1.0, 3.0, 1.0), (4.0, 3.0, 1.5)]


def test_spring_reference_is_converged():
    """The reference itself: a deeper sum at higher precision agrees to 35 digits."""
    for k, a, b in GAINS:
        _, shallow = spring_twisting_reference(k, a, b)
        _, deep = spring_twisting_reference(k, a, b, dps=90, stop="1e-26")
        assert abs(shallow - deep) < mp.mpf("1e-35")


@pytest.mark.parametrize("rtol", [1e-13, 1e-16])
@pytest.mark.parametrize("k, a, b", GAINS)
def test_spring_twisting_has_one_zeno_point_at_the_exact_time(k, a, b, rtol):
    """Measured: |t_zeno - T| = 1.4e-15, 2.2e-14, 2.2e-16 (rtol 1e-13); the error estimates 2e-14 .. 1.5e-13."""
    times, exact = spring_twisting_reference(k, a, b)
    res = spring_twisting(k, a, b).solve([1.0, 0.0], 10.0, rtol=rtol)
    assert res.status == "success"
    zeno = [e for e in res.events if e.kind == "zeno"]
    assert len(zeno) == 1
    assert abs(zeno[0].t - float(exact)) <= 1e-12
    assert zeno[0].cycle == 4 and 0.0 <= zeno[0].error <= 1e-12
    assert zeno[0].control == pytest.approx((a - b) / (a + b), rel=1e-6)  # time ratio per cycle: 2 half-turns
    crossings = [e.t for e in res.events if e.kind == "cross"]
    np.testing.assert_allclose(crossings[:6], [float(t) for t in times[:6]], rtol=1e-14)
    # after the Zeno point the state rests at the origin: nothing but the classification at the limit
    assert all(e.t == zeno[0].t for e in res.events[res.events.index(zeno[0]):])
    assert res.final.tolist() == [0.0, 0.0]
    np.testing.assert_array_equal(res.state_at([zeno[0].t, 7.5, 10.0]), np.zeros((3, 2)))


def test_spring_twisting_chunks_continue_the_same_trajectory(monkeypatch):
    """The Zeno detector's memory (keys, times, states) is carried across chunk boundaries."""
    whole = spring_twisting(1.0, 2.0, 1.0).solve([1.0, 0.0], 10.0)
    monkeypatch.setattr(piecewise, "_FIRST_CHUNK", 1)
    monkeypatch.setattr(piecewise, "_MAX_CHUNK", 1)
    monkeypatch.setattr(piecewise, "_CHUNK_EVENTS", 1)
    pieces = spring_twisting(1.0, 2.0, 1.0).solve([1.0, 0.0], 10.0)
    np.testing.assert_array_equal(pieces.t, whole.t)
    np.testing.assert_array_equal(pieces.x, whole.x)
    np.testing.assert_array_equal(pieces.h, whole.h)
    assert [repr(e) for e in pieces.events] == [repr(e) for e in whole.events]


def test_pure_twisting_keeps_its_results():
    """x'' = -2 sgn x - sgn x': the constant-ratio case is detected at the same event as before, with the same
    time (|t - (2 sqrt 2 + (2/3) sqrt 6)| measured 0 in float64)."""
    twist = spring_twisting(0.0, 2.0, 1.0)
    res = twist.solve([1.0, 0.0], 10.0)
    with mp.workdps(40):
        exact = float(2 * mp.sqrt(2) + mp.mpf(2) / 3 * mp.sqrt(6))
    zeno = [e for e in res.events if e.kind == "zeno"]
    assert len(zeno) == 1 and abs(zeno[0].t - exact) <= 1e-14
    assert zeno[0].cycle == 4 and zeno[0].error <= 1e-13
    assert len([e for e in res.events if e.kind == "cross"]) == 13
    assert res.final.tolist() == [0.0, 0.0]


def test_motion_continues_from_the_zeno_limit():
    """Twisting in (x1, x2) with a drift x3' = 1: after the Zeno point at 2 sqrt 2 + (2/3) sqrt 6 the state holds
    both surfaces and moves along their intersection, x3 = t."""
    A0 = np.zeros((3, 3))
    A0[0, 1] = 1.0
    system = fl.PiecewiseAffine(A0=A0, c0=[0, 0, 1], A=np.zeros((2, 3, 3)), c=[[0, -2, 0], [0, -1, 0]],
                                normals=[[1, 0, 0], [0, 1, 0]])
    res = system.solve([1.0, 0.0, 0.0], 10.0)
    with mp.workdps(40):
        exact = float(2 * mp.sqrt(2) + mp.mpf(2) / 3 * mp.sqrt(6))
    assert res.status == "success"
    assert len(res.zeno_times()) == 1 and abs(res.zeno_times()[0] - exact) <= 1e-14
    assert [(e.kind, e.surface) for e in res.events][-2:] == [("slide_start", 0), ("slide_start", 1)]
    np.testing.assert_allclose(res.state_at([7.0, 10.0]), [[0.0, 0.0, 7.0], [0.0, 0.0, 10.0]], rtol=1e-15, atol=0)


# --------------------------------------------------------------------------------------------------------------
# long cycles: spirals around 3, 5 and 8 lines through the origin (6, 10 and 16 events a turn)
# --------------------------------------------------------------------------------------------------------------
SPIRALS = [(3, 0.3, 4.0, (0.3, -0.2)), (5, 0.2, 3.0, (0.1, 0.05)), (8, 0.1, 3.0, (0.05, -0.1))]


@pytest.mark.parametrize("lines, alpha, beta, c0", SPIRALS)
def test_spiral_zeno_point_of_a_long_cycle(lines, alpha, beta, c0):
    """Measured: |t_zeno - T| = 1.1e-15, 1.6e-15, 2.2e-15 (T = 1.409, 1.479, 1.901; mu = 0.59, 0.65, 0.81)."""
    args = spiral_args(lines, alpha, beta, c0)
    times, exact, mu = spiral_reference(args)
    assert 0.5 < mu < 0.9  # several turns before the accumulation is recognised
    res = fl.PiecewiseAffine(**args).solve([1.0, 0.0], 3.0)
    assert res.status == "success"
    zeno = [e for e in res.events if e.kind == "zeno"]
    assert len(zeno) == 1 and zeno[0].cycle == 2 * lines
    assert abs(zeno[0].t - float(exact)) <= 1e-12
    assert zeno[0].control == pytest.approx(float(mu), rel=1e-9)
    before = res.events[:res.events.index(zeno[0])]
    assert {e.kind for e in before} == {"cross"} and len(before) < 8 * lines
    crossings = [e.t for e in before][1:]  # [0]: (1, 0) starts on line 0
    np.testing.assert_allclose(crossings[:2 * lines], [float(t) for t in times], rtol=1e-14)
    assert all(e.t == zeno[0].t for e in res.events[res.events.index(zeno[0]):])
    assert np.linalg.norm(res.final) <= 1e-15


# --------------------------------------------------------------------------------------------------------------
# repelling surfaces: tie="stay" / tie="leave"
# --------------------------------------------------------------------------------------------------------------
def repelling(drift):
    """``x1' = sgn(x1) + drift``, ``x2' = 1`` (``|drift| < 1``): both sides leave ``x1 = 0``."""
    return fl.PiecewiseAffine(A0=np.zeros((2, 2)), c0=[drift, 1.0], A=np.zeros((1, 2, 2)), c=[[1.0, 0.0]],
                              normals=[[1.0, 0.0]])


@pytest.mark.parametrize("drift", [0.5, -0.5])
def test_repelling_surface_stays_by_default(drift):
    res = repelling(drift).solve([0.0, 0.0], 2.0)
    assert res.status == "success"
    assert [(e.t, e.kind, e.surface, e.side) for e in res.events] == [(0.0, "tie", 0, 0)]
    assert res.events[0].control == -drift  # the equivalent control holding x1' = 0
    assert res.final.tolist() == [0.0, 2.0]
    np.testing.assert_allclose(res.state_at([0.5, 1.25]), [[0.0, 0.5], [0.0, 1.25]], rtol=0, atol=1e-15)


@pytest.mark.parametrize("drift", [0.5, -0.5])
def test_repelling_surface_left_to_the_faster_side(drift):
    """``tie="leave"``: speeds ``sqrt((1 + drift)^2 + 1)`` (side +1) and ``sqrt((1 - drift)^2 + 1)`` (side -1)."""
    side = 1 if drift > 0 else -1
    res = repelling(drift).solve([0.0, 0.0], 2.0, tie="leave")
    assert res.status == "success"
    assert [(e.t, e.kind, e.surface, e.side) for e in res.events] == [(0.0, "tie", 0, side)]
    speed = side * (1.0 + abs(drift))
    np.testing.assert_allclose(res.final, [2.0 * speed, 2.0], rtol=1e-15)
    np.testing.assert_allclose(res.state_at(0.75), [0.75 * speed, 0.75], rtol=1e-15)


def test_attracting_surface_is_not_a_tie():
    """Sliding (both sides push in) is still ``slide_start`` under either policy."""
    system = fl.PiecewiseAffine(A0=np.zeros((2, 2)), c0=[0, 1], A=np.zeros((1, 2, 2)), c=[[-1, 0]],
                                normals=[[1, 0]])
    for tie in ("stay", "leave"):
        res = system.solve([1.0, 0.0], 3.0, tie=tie)
        assert [(e.kind, e.surface) for e in res.events] == [("slide_start", 0)]
        np.testing.assert_allclose(res.final, [0.0, 3.0], atol=1e-14)


@pytest.mark.parametrize("tie", ["up", None, 1, "STAY"])
def test_tie_argument_is_checked(tie):
    with pytest.raises(ValueError, match="tie"):
        repelling(0.5).solve([0.0, 0.0], 1.0, tie=tie)


# --------------------------------------------------------------------------------------------------------------
# dense output
# --------------------------------------------------------------------------------------------------------------
def test_state_at_matches_the_twisting_closed_form():
    """Piecewise quadratic: relative error over the first three arcs (measured 1.7e-15), absolute error in units of
    the initial amplitude through 7 switches (measured 2.5e-15; the state is then 4e-2, and the few-ulp errors of the
    event times dominate)."""
    res = spring_twisting(0.0, 2.0, 1.0).solve([1.0, 0.0], 10.0)
    times = np.linspace(0.0, 2.7, 109)
    got, want = res.state_at(times), twisting_reference(times)
    rel = np.linalg.norm(got - want, axis=1) / np.linalg.norm(want, axis=1)
    assert rel.max() <= 1e-14
    times = np.linspace(0.0, 3.9, 157)
    assert np.abs(res.state_at(times) - twisting_reference(times)).max() <= 1e-14
    assert res.state_at(0.5).shape == (2,) and res.state_at([[0.5, 1.0]]).shape == (1, 2, 2)
    np.testing.assert_array_equal(res.state_at(0.0), [1.0, 0.0])
    np.testing.assert_array_equal(res.state_at(10.0), res.final)


def test_state_at_matches_the_spring_closed_form():
    """First arc of the spring plant (k = 1, a = 2, b = 1): x = -1 + 2 cos t, x' = -2 sin t up to t = pi / 3;
    measured max relative error 1.7e-16."""
    res = spring_twisting(1.0, 2.0, 1.0).solve([1.0, 0.0], 10.0)
    times = np.linspace(0.0, math.pi / 3, 101)
    with mp.workdps(30):
        want = np.array([[float(-1 + 2 * mp.cos(t)), float(-2 * mp.sin(t))] for t in times])
    rel = np.linalg.norm(res.state_at(times) - want, axis=1) / np.linalg.norm(want, axis=1)
    assert rel.max() <= 1e-14


def test_state_at_inside_a_zeno_tail_and_outside_the_run():
    res = spring_twisting(1.0, 2.0, 1.0).solve([1.0, 0.0], 10.0)
    gap = np.flatnonzero(res.t[:-1] + res.h < res.t[1:])
    assert len(gap) == 1  # the one Zeno point: the last step before it ends short of it
    q = gap[0]
    start, stop = res.t[q] + res.h[q], res.t[q + 1]
    inside = res.state_at(0.5 * (start + stop))
    amplitude = np.linalg.norm(res.state_at(start))
    assert np.linalg.norm(inside) <= amplitude  # between the last state integrated and the limit
    with pytest.raises(ValueError, match="t must lie"):
        res.state_at(10.5)
    with pytest.raises(ValueError, match="t must lie"):
        res.state_at([1.0, math.nan])
    for bad in ("1.0", True, [1.0, "2"], None):
        with pytest.raises(ValueError, match="t must be a real number"):
            res.state_at(bad)
    short = spring_twisting(1.0, 2.0, 1.0).solve([1.0, 0.0], 10.0, max_steps=3)
    with pytest.raises(ValueError, match="t must lie"):
        short.state_at(5.0)
