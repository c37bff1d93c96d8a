"""The chunked driver: budgets, interruption with a partial result, dense output, t_eval, save/load."""

import os
import signal

import numpy as np
import pytest

import flowlib as fl
from flowlib import examples, flow


@pytest.fixture(scope="module")
def os_case():
    X, y = examples.orthogonally_separable(20, 4, 7)
    prob = fl.Problem(X, y, loss="logistic", reduction="sum", bias=False, train_outer=True)
    return prob, examples.balanced_init(10, 4, 1e-2, 8)


def assert_consistent(res):
    assert np.all(np.diff(res.t) > 0)
    assert len(res.states) == len(res.t) == len(res.loss) == len(res.energy) + 1
    assert [e.t for e in res.events] == sorted(e.t for e in res.events)
    np.testing.assert_array_equal(res.final.W, res.states[-1][:, : res.problem.d])


@pytest.fixture
def python_sigint_handler():
    """Python's own Ctrl-C handler (a background job may start with SIGINT ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_returns_partial_result(os_case, python_sigint_handler):
    prob, p0 = os_case
    calls = []

    def press_ctrl_c(progress):
        calls.append(progress.done)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)

    res = fl.gradient_flow(prob, p0, 1e4, callback=press_ctrl_c)
    assert res.status == "interrupted"
    assert 0 < res.t_final < 1e4
    assert res.t_final == calls[-1]
    assert_consistent(res)
    # the partial trajectory is, step for step, the beginning of the uninterrupted one
    full = fl.gradient_flow(prob, p0, 1e4)
    assert full.status == "success"
    np.testing.assert_array_equal(full.t[: len(res.t)], res.t)
    np.testing.assert_array_equal(full.states[: len(res.t)], res.states)
    # and the handler is restored: a real Ctrl-C now raises again
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_in_the_first_chunk_and_handler_restored_on_error(os_case, python_sigint_handler):
    prob, p0 = os_case

    def press_ctrl_c(progress):
        os.kill(os.getpid(), signal.SIGINT)

    res = fl.gradient_flow(prob, p0, 1e4, callback=press_ctrl_c)
    assert res.status == "interrupted" and res.n_steps == flow._FIRST_CHUNK_STEPS  # the first chunk is covered too
    assert_consistent(res)

    def fail(progress):
        raise RuntimeError("callback failed")

    with pytest.raises(RuntimeError, match="callback failed"):
        fl.gradient_flow(prob, p0, 1e4, callback=fail)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_first_chunk_is_short_on_wide_networks():
    """A callback (and Ctrl-C, and the progress bar) is served after about one step on a wide network, not after
    32 of them; chunking leaves the trajectory bit for bit unchanged."""
    assert flow.first_chunk_steps(8, 6, 5, 16) == flow._FIRST_CHUNK_STEPS
    assert flow.first_chunk_steps(1000, 2000, 102, 16) == 1  # 32 steps would take ~10 s
    rng = np.random.default_rng(3)
    n, m, d = 200, 300, 40
    prob = fl.Problem(X=rng.standard_normal((n, d)), y=np.sign(rng.standard_normal(n)), loss="logistic",
                      bias=True, train_outer=True)
    p0 = fl.Params(W=1e-2 * rng.standard_normal((m, d)), b=1e-2 * rng.standard_normal(m),
                   a=1e-2 * rng.standard_normal(m))
    first = flow.first_chunk_steps(n, m, d + 2, 16)
    assert 1 <= first < flow._FIRST_CHUNK_STEPS
    seen = []
    res = fl.gradient_flow(prob, p0, 1e3, max_steps=2 * first + 3, callback=lambda p: seen.append(p.steps))
    assert seen[0] == first
    longer = fl.gradient_flow(prob, p0, 1e3, max_steps=2 * first + 9)  # other chunk boundaries, same steps
    np.testing.assert_array_equal(longer.t[: len(res.t)], res.t)
    np.testing.assert_array_equal(longer.states[: len(res.t)], res.states)


def test_callback_can_stop(os_case):
    prob, p0 = os_case
    res = fl.gradient_flow(prob, p0, 1e4, callback=lambda progress: True)
    assert res.status == "interrupted" and res.n_steps > 0
    assert_consistent(res)


def test_step_and_event_budgets(os_case):
    prob, p0 = os_case
    res = fl.gradient_flow(prob, p0, 1e4, max_steps=7)
    assert res.status == "max_steps" and res.n_steps == 7
    assert_consistent(res)
    res = fl.gradient_flow(prob, p0, 1e4, max_events=5)
    assert res.status == "max_events" and 5 <= res.n_events
    assert_consistent(res)


def test_dense_output_matches_t_eval_and_boundaries(os_case):
    prob, p0 = os_case
    t_eval = np.linspace(0.0, 30.0, 61)
    res = fl.gradient_flow(prob, p0, 30.0, t_eval=t_eval)
    lean = fl.gradient_flow(prob, p0, 30.0, t_eval=t_eval, dense_output=False)
    assert lean.coefficients is None
    np.testing.assert_array_equal(lean.states_eval, res.states_eval)
    np.testing.assert_allclose(res.states_at(t_eval), res.states_eval, rtol=0, atol=1e-15)
    # each step's polynomial ends where the next one starts
    ends = [res.params_at(t).W for t in res.t[1:-1]]
    np.testing.assert_allclose(np.array(ends), res.W[1:-1], rtol=0, atol=1e-15)
    assert res.loss_at(30.0) == pytest.approx(res.loss[-1], rel=1e-15)
    assert lean.params_at(res.t[3]).W == pytest.approx(res.W[3])
    with pytest.raises(ValueError, match="dense"):
        lean.params_at(0.5 * (res.t[3] + res.t[4]))


def test_zero_horizon(os_case):
    prob, p0 = os_case
    res = fl.gradient_flow(prob, p0, 0.0)
    assert res.status == "success" and res.n_steps == 0
    np.testing.assert_array_equal(res.final.W, p0.W)


def test_save_load_roundtrip(os_case, tmp_path):
    prob, p0 = os_case
    res = fl.gradient_flow(prob, p0, 20.0, t_eval=[1.0, 2.0])
    back = fl.load(res.save(tmp_path / "run"))
    np.testing.assert_array_equal(back.states, res.states)
    np.testing.assert_array_equal(back.coefficients, res.coefficients)
    def rows(r):
        return [(e.t, e.kind, e.neuron, e.sample, e.side) for e in r.events]

    assert rows(back) == rows(res) and back.n_events > 0
    assert back.status == res.status and back.message == res.message
    np.testing.assert_array_equal(back.problem.X, prob.X)
    assert back.problem.loss == prob.loss and back.problem.train_outer == prob.train_outer
    assert back.params_at(7.3).W == pytest.approx(res.params_at(7.3).W, rel=0, abs=0)


def test_load_rejects_other_files(tmp_path):
    path = tmp_path / "x.npz"
    np.savez(path, a=np.zeros(3))
    with pytest.raises(ValueError, match="path"):
        fl.load(path)


def test_one_decorator_for_all_kernels():
    """Every kernel uses the project decorator (cache=True, no fastmath): no other numba.njit in the tree."""
    import pathlib

    root = pathlib.Path(fl.__file__).resolve().parent.parent
    offenders = [p for p in list((root / "kernels").glob("*.py")) + list((root / "flowlib").rglob("*.py"))
                 if p.name != "_jit.py" and ("numba.njit" in p.read_text() or "@njit" in p.read_text())]
    assert offenders == []


def test_progress_bar_or_clear_message(os_case, capsys):
    prob, p0 = os_case
    try:
        import tqdm  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="progress"):
            fl.gradient_flow(prob, p0, 5.0, progress=True)
        return
    res = fl.gradient_flow(prob, p0, 5.0, progress=True)
    assert res.status == "success"
    assert "gradient flow" in capsys.readouterr().err


def test_both_backends_are_the_same_named_stages():
    """Every stage of the kernel's loop is a jitted function of the driver and a method of the mpmath engine with
    the same name, and the design document's table of stages names it; the kernel's loop calls each."""
    import inspect
    from pathlib import Path

    from flowlib.kernels import driver
    from flowlib.mp.flow import _Integrator

    design = (Path(__file__).resolve().parents[1] / "docs" / "design.md").read_text()
    loop = inspect.getsource(driver.integrate_chunk.py_func) + inspect.getsource(driver._held_series.py_func)
    engine = inspect.getsource(_Integrator.step) + inspect.getsource(_Integrator._held_series)
    for name in driver.STAGES:
        assert hasattr(getattr(driver, name), "py_func"), name  # a jitted kernel function
        assert callable(getattr(_Integrator, name, None)), name
        assert f"`{name}`" in design, name
        assert f"{name}(" in loop, name
        assert f"self.{name}(" in engine, name
