"""The dense output as its own object (:class:`flowlib.dense.DenseOutput`, ``FlowResult.dense``) and the events kept
as columns (:class:`flowlib.EventLog`), at float64 and at ``dps`` digits."""

import math

import mpmath as mp
import numpy as np
import pytest

import flowlib as fl
from flowlib import examples
from flowlib.dense import FLOAT64, DenseOutput, Numbers

LEAK = 0.1
T_CROSS = math.log(1.5)


def one_crossing(t_end=5.0, **options):
    """1-D square loss towards y = -1 from w = 0.5 (fixed a = 1): w = -1 + 1.5 e^(-t) until it crosses 0 at
    ln 1.5, then w = -(1 - e^(-leak^2 (t - ln 1.5))) / leak."""
    prob = fl.Problem(X=[[1.0]], y=[-1.0], loss="square", reduction="sum", activation="leaky_relu", leak=LEAK,
                      bias=False, train_outer=False)
    return fl.gradient_flow(prob, fl.Params(W=[[0.5]], b=None, a=[1.0]), t_end, **options)


def exact_w(t):
    """The closed form of :func:`one_crossing` at mpf ``t`` (at the current mpmath precision)."""
    if t <= mp.log(mp.mpf(1.5)):
        return -1 + mp.mpf(1.5) * mp.exp(-t)
    leak = mp.mpf(LEAK)
    return -(1 - mp.exp(-leak**2 * (t - mp.log(mp.mpf(1.5))))) / leak


def test_dense_output_reproduces_the_step_boundaries_float64():
    res = one_crossing()
    dense = res.dense
    assert isinstance(dense, DenseOutput) and dense is res.dense  # made once
    assert dense.n_steps == res.n_steps >= 2 and dense.order == res.order and dense.clock == "t"
    at = dense(res.t)
    assert at.shape == res.states.shape and at.dtype == np.float64
    assert np.array_equal(at[:-1], res.states[:-1])  # a step's polynomial at its start is its first coefficient
    assert np.max(np.abs(at[-1] - res.states[-1])) <= 1e-14
    assert np.array_equal(res.states_at(res.t[:-1]), res.states[:-1])


def test_dense_output_matches_the_closed_form_inside_steps():
    res = one_crossing()
    times = np.array([0.01, 0.2, T_CROSS - 1e-3, T_CROSS + 1e-3, 1.0, 2.5, 4.99])
    assert not np.isin(times, res.t).any()
    got = res.dense(times)[:, 0, 0]
    with mp.workdps(40):
        want = np.array([float(exact_w(mp.mpf(t))) for t in times])
    np.testing.assert_allclose(got, want, rtol=2e-14, atol=1e-15)
    assert np.array_equal(res.states_at(times), res.dense(times))  # states_at is the dense output in the t clock


def test_dense_output_at_dps_digits():
    res = one_crossing(dps=30)
    dense = res.dense
    assert dense.numbers.dps == 30 and dense.coefficients.dtype == object
    at = dense(res.t)
    assert all(a == b for a, b in zip(at[:-1].ravel(), res.states[:-1].ravel()))
    assert all(isinstance(v, mp.mpf) for v in at.ravel())
    with mp.workdps(30):
        for t in ("0.3", "1.7", "4.25"):
            got = dense([t])[0, 0, 0]
            assert abs(got - exact_w(mp.mpf(t))) <= mp.mpf("1e-27"), t
    assert mp.mp.dps == 15  # evaluated in a workdps context, the global precision untouched


def test_dense_output_in_the_log_clock_takes_s():
    res = one_crossing(1e7)
    assert res.clock == "log" and res.dense.clock == "log"
    assert np.array_equal(res.dense(res.s[:-1]), res.states[:-1])
    s = np.log1p(np.array([0.5, 30.0]))
    assert np.array_equal(res.dense(s), res.states_at(np.array([0.5, 30.0])))


def test_out_of_range_names_t():
    res = one_crossing()
    for bad in ([5.5], [-0.1], [np.nan]):
        with pytest.raises(ValueError, match=r"t must lie in \[0\.0, 5\.0\]"):
            res.dense(bad)
        with pytest.raises(ValueError, match=r"t must lie in \[0\.0, 5\.0\]"):
            res.states_at(bad)
    with pytest.raises(ValueError, match="t must lie in"):
        one_crossing(dps=20).dense(["5.0000001"])


def test_no_dense_output():
    res = one_crossing(dense_output=False, t_eval=[0.75, 2.0])
    assert res.dense is None and res.coefficients is None
    assert np.array_equal(res.states_at(res.t[[0, 2, -1]]), res.states[[0, 2, -1]])
    assert np.array_equal(res.states_at([2.0]), res.states_eval[1:])
    with pytest.raises(ValueError, match="not a step boundary or a t_eval time"):
        res.states_at([1.234])
    with pytest.raises(ValueError, match=r"t must lie in \[0\.0, 5\.0\]"):
        res.states_at([6.0])
    assert one_crossing(0.0).dense is None  # no step: nothing to evaluate


def test_no_dense_output_log_clock_at_dps_finds_t_eval():
    """The t_eval times of an mpmath run in the log clock are found (in s = ln(1 + t), as the run took them)."""
    res = one_crossing(None, log_t_end=2.0, dps=20, dense_output=False, t_eval=[1.0, 3.0])
    assert res.dense is None and res.clock == "log" and len(res.t_eval) == 2
    at = res.states_at(res.t_eval)
    assert all(a == b for a, b in zip(at.ravel(), res.states_eval.ravel()))


def test_dense_output_checks_its_arguments():
    C = np.zeros((2, 3, 1, 3))
    with pytest.raises(ValueError, match="n_steps"):
        DenseOutput(np.array([0.0, 1.0]), C, 2)
    with pytest.raises(ValueError, match="order"):
        DenseOutput(np.array([0.0, 1.0, 2.0]), C, 4)
    C[1, 0], C[1, 2] = 1.0, -2.0  # step 2: 1 - 2 (u - 1)^2
    dense = DenseOutput(np.array([0.0, 1.0, 2.0]), C, 2)
    assert dense([1.5])[0, 0, 0] == 0.5 and dense([2.0])[0, 0, 0] == -1.0 and dense([0.5])[0, 0, 0] == 0.0


def test_numbers():
    assert Numbers.at(None) is FLOAT64 and FLOAT64.name == "float64"
    assert np.array_equal(FLOAT64.softplus(np.array([0.0, 800.0])), [math.log(2.0), 800.0])
    at30 = Numbers.at(30)
    assert at30.name == "mpmath, 30 digits"
    x = at30.convert(["0.1", 0.1])
    with mp.workdps(30):
        assert x[0] == mp.mpf("0.1") and x[1] == mp.mpf(0.1) and x[0] != x[1]
        assert abs(at30.expm1(at30.log1p(x))[0] - mp.mpf("0.1")) <= mp.mpf("1e-30")
        assert abs(at30.softplus(np.array([mp.mpf(2)], dtype=object))[0] - mp.log(1 + mp.e**2)) <= mp.mpf("1e-29")
    assert mp.mp.dps == 15


# ----- events as columns --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mixed():
    """Four crossings and a sticking surface."""
    return fl.gradient_flow(*examples.three_points(6), 20.0)


def test_event_log_is_a_sequence_of_events(mixed):
    log = mixed.events
    events = tuple(log)
    assert isinstance(log, fl.EventLog) and len(log) == mixed.n_events == 5
    assert [e.kind for e in events] == [fl.result.EVENT_KINDS[k] for k in log.kind.tolist()]
    assert {e.kind for e in events} == {"cross", "stick"}
    assert log.t.dtype == np.float64 and log.kind.dtype == np.int8 and log.neuron.dtype == np.int64
    first = log[0]
    assert isinstance(first, fl.Event) and type(first.t) is float and type(first.neuron) is int
    assert first == fl.Event(float(log.t[0]), "cross", int(log.neuron[0]), int(log.sample[0]), int(log.side[0]),
                             first.multiplier)
    assert math.isnan(first.multiplier)
    stick = next(e for e in events if e.kind == "stick")
    assert stick.side == 0 and 0.0 <= stick.multiplier <= 1.0
    assert log[-1].t == log.t[-1] and np.all(np.diff(log.t) >= 0)
    assert isinstance(log[1:3], fl.EventLog) and len(log[1:3]) == 2 and log[1:3] == events[1:3]
    assert log == events and log == list(events) and log != events[:-1] and log != events[::-1]
    assert log == log[:] and log[:2] != log[:3]
    assert log == fl.EventLog(log.t.copy(), log.kind, log.neuron, log.sample, log.side, log.multiplier.copy())
    with pytest.raises(IndexError):
        log[len(log)]
    assert repr(log) == "EventLog(5 events)"


def test_empty_event_log_is_the_checked_constructors():
    """``EventLog.empty()`` (a run without events) skips the argument checks but gives what ``EventLog()`` gives:
    equal logs with the same column types."""
    fast, checked = fl.EventLog.empty(), fl.EventLog()
    assert fast == checked and len(fast) == 0 and list(fast) == []
    for name in fl.EventLog.__slots__:
        assert getattr(fast, name).dtype == getattr(checked, name).dtype, name
    assert repr(fast) == "EventLog(0 events)"


def test_a_runs_event_log_is_the_checked_constructors(mixed):
    """A run wraps its kernel's event columns without the argument checks (``EventLog._of_columns``): the log, its
    column types and its records are those of ``EventLog(...)`` given the same columns, for one chunk's events
    (``mixed``) and for two chunks' joined (the kernel's buffers as :func:`flowlib.kernels.bundles.event_log` makes
    them, given to the run's store as a chunk gives them)."""
    from flowlib.flow import _Trajectory
    from flowlib.kernels import bundles

    run = _Trajectory(np.zeros((1, 3)), np.empty(0), 4, False, False)
    for chunk in range(2):
        buffers = bundles.event_log(4)
        for column, values in zip(buffers, ([0.5 + chunk, 0.75 + chunk, 9.0], [0, 3, 0], [1, 0, 0], [2, chunk, 0],
                                            [-1, 0, 1], [np.nan, 0.25, 0.0])):
            column[:3] = values
        run.add_events(2, *buffers)
    joined = run.event_log()
    assert joined.t.tolist() == [0.5, 0.75, 1.5, 1.75] and joined.sample.tolist() == [2, 0, 2, 1]
    for log in (mixed.events, joined):
        checked = fl.EventLog(log.t, log.kind, log.neuron, log.sample, log.side, log.multiplier)
        assert log == checked and [repr(e) for e in log] == [repr(e) for e in checked]  # NaN multipliers
        for name in fl.EventLog.__slots__:
            assert getattr(log, name).dtype == getattr(checked, name).dtype, name


def test_event_counts_from_the_columns(mixed):
    by_hand = {}
    for e in mixed.events:
        by_hand[e.kind] = by_hand.get(e.kind, 0) + 1
    counts = mixed.event_counts
    assert list(counts) == list(fl.result.EVENT_KINDS.values())
    assert {k: v for k, v in counts.items() if v} == by_hand == {"cross": 4, "stick": 1}
    assert all(type(v) is int for v in counts.values())


def test_event_log_round_trips_through_save(tmp_path, mixed):
    back = fl.load(mixed.save(tmp_path / "mixed"))
    assert isinstance(back.events, fl.EventLog) and back.events == mixed.events
    assert back.events == tuple(mixed.events) and back.event_table() == mixed.event_table()
    assert np.array_equal(back.events.t, mixed.events.t)


def test_event_log_of_a_dps_run_holds_mpf(tmp_path):
    res = fl.gradient_flow(*examples.sliding_two_points(), 5.0, dps=25)
    log = res.events
    assert [e.kind for e in log] == ["slide_start"]
    assert log.t.dtype == object and isinstance(log.t[0], mp.mpf) and isinstance(log[0].t, mp.mpf)
    assert isinstance(log[0].multiplier, mp.mpf) and 0 < log[0].multiplier < 1
    back = fl.load(res.save(tmp_path / "slide"))
    assert back.events == log and str(back.events[0].t) == str(log[0].t)
    crossing = fl.gradient_flow(*examples.two_crossings(), 5.0, dps=25).events
    assert len(crossing) == 2 and all(isinstance(t, mp.mpf) for t in crossing.t)
    assert all(math.isnan(m) for m in crossing.multiplier)


def test_event_log_checks_its_columns():
    with pytest.raises(ValueError, match="same length"):
        fl.EventLog([1.0, 2.0], [0], [0], [0], [1])
    with pytest.raises(ValueError, match="kind must hold names"):
        fl.EventLog([1.0], ["jump"], [0], [0], [1])
    with pytest.raises(ValueError, match="kind must hold codes"):
        fl.EventLog([1.0], [9], [0], [0], [1])
    empty = fl.EventLog()
    assert len(empty) == 0 and empty == () and list(empty) == [] and empty.counts().tolist() == [0] * 6
