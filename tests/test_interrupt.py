"""A real Ctrl-C (SIGINT from another process) ends every kind of run within 2 s, with status ``interrupted`` and
the partial result: float64 flow and GD (between chunks of ~50 ms) and the mpmath flow and GD (inside a step,
which is discarded)."""

import signal
import subprocess
import sys
import textwrap
import time

import pytest

_CHILD = textwrap.dedent("""
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import numpy as np
    import flowlib as fl
    from flowlib import examples

    def ready(progress):
        if not ready.done:
            ready.done = True
            print("ready", flush=True)

    ready.done = False
    {setup}
    res = {call}
    steps = getattr(res, "n_steps", getattr(res, "steps", None))
    print("status", res.status, steps, flush=True)
""")

_CASES = {
    "float64-flow": ("X, y = examples.orthogonally_separable(n=100, d=10, seed=0)\n"
                     "prob = fl.Problem(X, y, loss='square', reduction='mean', bias=True, train_outer=True)\n"
                     "p0 = examples.balanced_init(m=200, d=10, scale=1.0, seed=1, bias=True)",
                     "fl.gradient_flow(prob, p0, 1e9, clock='t', dense_output=False, max_steps=10**9, "
                     "callback=ready)"),
    "float64-gd": ("prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)",
                   "fl.gradient_descent(prob, p0, 1e-9, 10**11, record_every=10**7, callback=ready)"),
    "mpmath-flow": ("import warnings; warnings.simplefilter('ignore')\n"
                    "prob = fl.Problem(np.array([[1.0]]), np.array([1.0]), loss='logistic', bias=False, "
                    "train_outer=True)\n"
                    "p0 = fl.Params(W=[[0.5]], b=None, a=[0.5])",
                    "fl.gradient_flow(prob, p0, 1e3, clock='t', dps=200, callback=ready)"),  # ~4 s a step
    "mpmath-gd": ("prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)",
                  "fl.gradient_descent(prob, p0, 1e-9, 10**9, dps=2000, record_every=10**6, callback=ready)"),
}


def _interrupt(case: str, startup_s: float) -> tuple[str, float]:
    """Run the case in a child, SIGINT it 0.5 s after its run started; return its last line and the seconds from
    the signal to that line."""
    setup, call = _CASES[case]
    code = _CHILD.format(setup=setup, call=call)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + startup_s
        line = proc.stdout.readline()
        assert line.strip() == "ready", (line, proc.stderr.read() if proc.poll() is not None else "")
        assert time.monotonic() < deadline
        time.sleep(0.5)  # well inside the run (a chunk, or the mpmath step after the first, whose end said ready)
        assert proc.poll() is None, "the run ended before the signal"
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        line = proc.stdout.readline()
        latency = time.monotonic() - sent
        proc.wait(timeout=30)
        return line.strip(), latency
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow  # compiles the kernels on a cold cache
@pytest.mark.parametrize("case", ["float64-flow", "float64-gd"])
def test_ctrl_c_float64(case):
    line, latency = _interrupt(case, startup_s=600.0)
    assert line.startswith("status interrupted"), line
    assert int(line.split()[2]) > 0  # the partial result holds what was done
    assert latency < 2.0


@pytest.mark.parametrize("case", ["mpmath-flow", "mpmath-gd"])
def test_ctrl_c_mpmath(case):
    line, latency = _interrupt(case, startup_s=120.0)
    assert line.startswith("status interrupted"), line
    assert latency < 2.0


def test_mp_flow_interrupt_discards_the_step_under_way():
    """The handler raises inside the step; the engine goes back to the state before it and the handler that was
    installed before the run is installed again."""
    import numpy as np

    import flowlib as fl
    from flowlib.mp import flow as mpflow

    prob = fl.Problem(np.array([[1.0]]), np.array([1.0]), loss="logistic", bias=False, train_outer=True)
    p0 = fl.Params(W=[[0.5]], b=None, a=[0.5])
    original = mpflow._one_instant
    calls = []

    def interrupted_second_step(engine, t_end, max_releases):
        calls.append(engine.t)
        if len(calls) == 2:
            engine.P = [[None] * 3]  # a step half done ...
            signal.raise_signal(signal.SIGINT)  # ... when Ctrl-C arrives
        return original(engine, t_end, max_releases)

    before = signal.getsignal(signal.SIGINT)
    try:
        mpflow._one_instant = interrupted_second_step
        res = fl.gradient_flow(prob, p0, 10.0, dps=30)
    finally:
        mpflow._one_instant = original
    assert signal.getsignal(signal.SIGINT) is before
    assert res.status == "interrupted" and res.n_steps == 1
    whole = fl.gradient_flow(prob, p0, 10.0, dps=30)
    assert res.states[-1].tolist() == whole.states[1].tolist()  # the state after the first step, untouched
