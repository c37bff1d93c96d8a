"""The network engine's Zeno detector (stage 6 of the driver and its mpmath twin), on exact geometric event sequences.

No gradient flow of these networks is known to accumulate events (the design document's Zeno section gives the
argument), so the detector is checked where the answer is known in closed form: a memory of event instants whose
times, states and energies are geometric sequences with a ratio ``r`` per cycle of two instants,

    t_k = t* - c r^(k/2),    P_k = P* + V r^(k/2),    E_k = E* - e r^(k/2),

on two surfaces of neuron 0 that meet at ``P*``. The detector must jump to ``(t*, P*)``, log one ``zeno`` event
with the ratio, record the tail as one linear step dissipating ``E* - E_6``, snap neuron 0 onto both surfaces, and
leave every sequence alone that is not an accumulation (a ratio of 0.99 or more, a broken cycle, states that do
not contract, a limit beyond ``t_end``). Both backends take the same decisions and agree to rounding; at 30 digits
the mpmath engine meets the closed form to its epsilon.
"""

import math

import numpy as np
import pytest
from mpmath import mp, mpf

import flowlib as fl
from flowlib import flow
from flowlib.kernels import bundles, driver, status, zeno as kzeno
from flowlib.kernels.constants import EVENT_CROSS, EVENT_ZENO
from flowlib.mp import flow as mpflow
from flowlib.mp.series import MPData
from flowlib.running import order_for

X = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
Y = np.array([0.5, -0.25, 1.0])
P_STAR = np.array([[1.0, 1.0, -1.0, 0.5], [0.3, -0.2, 0.1, -0.4]])  # neuron 0 on the surfaces of samples 0, 1
V = np.array([[0.2, -0.1, 0.05, 0.01], [0.3, 0.1, -0.2, 0.05]])
T_STAR, C_T, E_STAR, C_E = 2.0, 0.5, 1.0, 0.3
INSTANTS = 7  # 3 cycles of 2 instants and one more: the first moment a cycle of two can be accepted
RTOL = 1e-12


def problem():
    return fl.Problem(X, Y, loss="square", bias=True, train_outer=True)


def sequence(k, ratio, grow=False):
    """Instant ``k``: time, state and dissipated energy of the geometric sequence (``grow``: the states move
    away from ``P*`` instead)."""
    q = ratio ** (k / 2)
    return T_STAR - C_T * q, P_STAR + V * (1.0 / q if grow else q), E_STAR - C_E * q


def event(k, broken):
    """The first event of instant ``k``: neuron 0 crosses the surface of sample ``k % 2`` (sample 2 at instant 2
    of a ``broken`` cycle)."""
    sample = 2 if broken and k == 2 else k % 2
    return sample, 1 if k % 2 == 0 else -1


def reference_loss(P):
    """The mean square loss at ``P``, in numpy (independent of the kernels)."""
    Z = X @ P[:, :2].T + P[:, 2]
    f = np.maximum(Z, 0.0) @ P[:, 3]
    return 0.5 * np.mean((f - Y) ** 2)


def kernel_run(ratio=0.25, t_end=10.0, broken=False, grow=False):
    """Record instants 0..5 (:func:`driver._zeno_record`), then pass instant 6 to :func:`driver._zeno_jump`."""
    prob = problem()
    order = order_for(RTOL)
    net, method = flow.kernel_setup(prob, order, RTOL, "filippov", 0.0, "stay", False)
    m, w = P_STAR.shape
    P = sequence(0, ratio, grow)[1].copy()
    active, mode = flow.initial_surfaces(prob, P)
    state = bundles.state(P, active, mode, np.zeros((3, m), np.int8), np.zeros(3), kzeno.network_zeno(m, w))
    ws = driver._workspace(net, method, state)
    events = bundles.event_log(64)
    steps = bundles.step_log(2, order, m, w, True)
    for k in range(INSTANTS):
        t, P[:], energy = sequence(k, ratio, grow)
        sample, side = event(k, broken)
        driver._log(events, k, t, EVENT_CROSS, 0, sample, side, math.nan)
        state.zeno.dissipated[0] = energy
        if k < INSTANTS - 1:
            driver._zeno_record(state, t, k, events)
    code, t, n_ev, n_steps = driver._zeno_jump(net, method, state, ws, t, t_end, INSTANTS - 1, events, INSTANTS,
                                               steps, 0, True)
    return code, t, n_ev, n_steps, state, events, steps


def mp_run(ratio="0.25", t_end=10, broken=False, grow=False, dps=30):
    """The same on the mpmath engine (:meth:`_Integrator._zeno_record`, then :meth:`_Integrator._zeno_jump`);
    returns the accumulation found, the tail's record and the engine (mpf numbers, at ``dps`` digits)."""
    with mp.workdps(dps):
        ratio, t_end = mpf(ratio), mpf(t_end)
        engine = None
        for k in range(INSTANTS):
            q = ratio ** (mpf(k) / 2)
            P = [[mpf(p) + mpf(v) * (1 / q if grow else q) for p, v in zip(prow, vrow)]
                 for prow, vrow in zip(P_STAR, V)]
            if engine is None:
                engine = mpflow._Integrator(MPData.from_problem(problem()), P, order_for(RTOL), mpf(RTOL), False,
                                            None, False)
            engine.P, engine.t, engine.dissipated = P, T_STAR - mpf(C_T) * q, E_STAR - mpf(C_E) * q
            sample, side = event(k, broken)
            engine.events.append((engine.t, EVENT_CROSS, 0, sample, side, None))
            found = engine._zeno_record(k, t_end)
        if found is None:
            return None, None, engine
        engine.pending = found
        return found, engine._zeno_jump(), engine


def test_a_geometric_accumulation_is_passed_to_its_limit():
    code, t, n_ev, n_steps, state, events, steps = kernel_run()
    assert code == status.RUNNING and n_steps == 1
    assert t == pytest.approx(T_STAR, rel=1e-15)
    np.testing.assert_allclose(state.P, P_STAR, rtol=0, atol=4e-16)
    # one zeno event at the limit: the surface of the instant's first event, the time ratio per cycle
    zeno = [q for q in range(INSTANTS, n_ev) if events.kind[q] == EVENT_ZENO]
    assert zeno == [INSTANTS]
    assert (events.t[INSTANTS], events.neuron[INSTANTS], events.sample[INSTANTS]) == (t, 0, 0)
    assert events.mult[INSTANTS] == pytest.approx(0.25, rel=1e-15)
    # the surfaces met afterwards are neuron 0's two, classified at the limit; the memory starts afresh
    assert all(events.t[q] == t and events.neuron[q] == 0 and events.sample[q] in (0, 1)
               for q in range(INSTANTS + 1, n_ev))
    assert state.zeno.memory.count[0] == 0
    # neuron 0 sits on both surfaces
    z = X @ state.P[0, :2] + state.P[0, 2]
    assert abs(z[0]) <= 4e-16 and abs(z[1]) <= 4e-16 and z[2] == pytest.approx(3.0)
    # the tail is one linear step from the last instant, dissipating E* - E_6
    t6, P6, E6 = sequence(INSTANTS - 1, 0.25)
    assert (steps.t[0], steps.h[0]) == (t6, pytest.approx(T_STAR - t6, rel=1e-13))
    np.testing.assert_array_equal(steps.C[0, 0], P6)
    np.testing.assert_allclose(steps.C[0, 0] + steps.h[0] * steps.C[0, 1], state.P, rtol=0, atol=1e-15)
    assert not np.any(steps.C[0, 2:])
    assert steps.energy[0] == pytest.approx(E_STAR - E6, rel=1e-12)
    assert state.zeno.dissipated[0] == pytest.approx(E_STAR, rel=1e-15)
    assert steps.loss[0] == pytest.approx(reference_loss(P6), rel=1e-14)


def kernel_continue(state, t, t_end):
    """Integrate the kernel's ``state`` from the limit ``t`` to ``t_end``; returns the status and the step log."""
    order = order_for(RTOL)
    net, method = flow.kernel_setup(problem(), order, RTOL, "filippov", 0.0, "stay", False)
    m, w = P_STAR.shape
    state.clock[:] = (t, math.nan, 0.0)
    steps, events = bundles.step_log(500, order, m, w, False), bundles.event_log(500 + 3 * 3 * m)
    code, n_steps, _ = driver.integrate_chunk(bundles.plain(net), bundles.plain(method), bundles.plain(state), t_end,
                                              500, 500, bundles.plain(steps), bundles.plain(events))
    return code, steps.energy[:n_steps]


def test_the_integration_continues_from_the_limit():
    """After the jump the engine's state (modes, sides, the marks of surfaces just classified) is one it
    integrates from: to t = 3 with ``success``, its velocity in the Filippov set and the energy identity held."""
    _, t, _, _, state, _, _ = kernel_run()
    start = reference_loss(state.P)
    code, energies = kernel_continue(state, t, 3.0)
    assert code == status.SUCCESS and state.clock[0] == 3.0 and np.all(np.isfinite(state.P))
    assert state.clock[2] <= 1e-12  # the largest inclusion residual of the steps
    dissipated = energies.sum()
    assert abs(start - reference_loss(state.P) - dissipated) <= 1e-10 * max(start, dissipated)


@pytest.mark.parametrize("case", [dict(ratio=0.995), dict(broken=True), dict(grow=True), dict(t_end=1.999)])
def test_what_is_not_an_accumulation_is_left_alone(case):
    """A ratio of 0.99 or more, a cycle broken once, states moving away, a limit beyond ``t_end``: no jump."""
    ratio = case.get("ratio", 0.25)
    code, t, n_ev, n_steps, state, events, steps = kernel_run(**case)
    t6, P6, _ = sequence(INSTANTS - 1, ratio, case.get("grow", False))
    assert (code, t, n_ev, n_steps) == (status.RUNNING, t6, INSTANTS, 0)
    np.testing.assert_array_equal(state.P, P6)
    assert state.zeno.memory.count[0] == INSTANTS
    found, record, _ = mp_run(ratio=str(ratio), t_end=case.get("t_end", 10), broken=case.get("broken", False),
                              grow=case.get("grow", False))
    assert found is None and record is None


def test_the_mpmath_engine_takes_the_same_jump():
    code, t, n_ev, _, state, events, steps = kernel_run()
    found, record, engine = mp_run(dps=30)
    with mp.workdps(30):
        eps = mp.eps
        # the closed form, to the working precision
        assert found.cycle == 2 and found.ratio == mpf("0.25") and abs(found.rho - mpf("0.25")) <= 8 * eps
        assert abs(engine.t - T_STAR) <= 8 * eps
        t6, h, C, loss, energy = record
        assert abs(h - (T_STAR - t6)) <= 8 * eps
        assert abs(energy - C_E * mpf("0.25") ** 3) <= 8 * eps
        assert max(abs(p - mpf(q)) for prow, qrow in zip(engine.P, P_STAR) for p, q in zip(prow, qrow)) <= 8 * eps
        # the same decisions and numbers as the kernel, to float64's rounding
        assert float(engine.t) == t
        np.testing.assert_allclose(np.array(engine.P, dtype=float), state.P, rtol=0, atol=4e-16)
        assert float(energy) == pytest.approx(steps.energy[0], rel=1e-12)
        assert float(loss) == pytest.approx(steps.loss[0], rel=1e-14)
        kinds = [(e[1], e[2], e[3], e[4]) for e in engine.events[INSTANTS:]]
        assert kinds == [(events.kind[q], events.neuron[q], events.sample[q], events.side[q])
                         for q in range(INSTANTS, n_ev)]
        assert len(engine.zeno) == 0 and abs(engine.dissipated - E_STAR) <= 8 * eps
        # and both continue from the limit alike
        while engine.t < 3:
            engine.step(mpf(3), 10)
        kernel_continue(state, t, 3.0)
        np.testing.assert_allclose(np.array(engine.P, dtype=float), state.P, rtol=0, atol=1e-13)
        assert engine.mode == state.mode.tolist()


def test_the_ring_memory_keeps_the_latest_instants_past_its_length():
    """Instants recorded past the ring's length overwrite the oldest: the period is read from the latest."""
    memory = kzeno.zeno_memory(1)
    for k in range(kzeno.ZENO_MEMORY + 12):
        kzeno.zeno_record(memory, float(k), k % 3, np.array([float(k)]))
    count = memory.count[0]
    assert count == kzeno.ZENO_MEMORY + 12
    assert memory.times[kzeno.ring_index(count, 0, kzeno.ZENO_MEMORY)] == count - 1
    assert kzeno.periodic(memory.keys, count, 3) and not kzeno.periodic(memory.keys, count, 2)
    assert kzeno.periodic(memory.keys, count, 6)  # a multiple of the period repeats too
    # the oldest instant a period of 3 reads is 9 back; changing it breaks the period, changing the 10th does not
    memory.keys[kzeno.ring_index(count, 10, kzeno.ZENO_MEMORY)] = 7
    assert kzeno.periodic(memory.keys, count, 3)
    memory.keys[kzeno.ring_index(count, 9, kzeno.ZENO_MEMORY)] = 7
    assert not kzeno.periodic(memory.keys, count, 3)
