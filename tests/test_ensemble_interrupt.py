"""Ctrl-C stops an ensemble within a second, even inside a chunk whose members would run for hours: on threads
(a real SIGINT to a child process), on a Dask cluster, and in process, where the resumed run is bit-identical."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import flowlib as fl
from flowlib import examples
from flowlib.ensemble_result import MEMBER_ARRAYS

#: Seed 000's stop rule without a deadline: members outside the quadrant w2 < 0 < w1 never stop early.
CHILD = textwrap.dedent("""
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import numpy as np
    import flowlib as fl
    from flowlib import examples

    prob, _ = examples.gd_rate_network(1.0, 0.0, -1.0, 0.0)
    inits = fl.random_inits(prob, m=2, count=40, scheme="he", a=[1.0, -1.0], bias=0.0, seed=6)
    reaching = (inits[:, 1, 0] < 0) & (inits[:, 0, 0] > 0)
    inits = np.concatenate([inits[reaching][:2], inits[~reaching][:4]])  # chunk 0 stops early; 1 and 2 never
    rule = fl.Until(loss_below=0.5, linear=[[1, 1, 0], [1, -1, 0]], tol=1e-3)
    fl.ensemble(prob, inits[:2], "gd", lr=0.05, steps=10, until=rule)  # load the compiled kernels first

    def ready(progress):
        print("ready", flush=True)

    kwargs = dict(workers=2)
    if sys.argv[2] == "dask":
        from dask.distributed import Client, LocalCluster
        cluster = LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None)
        kwargs = dict(client=Client(cluster))
    ens = fl.ensemble(prob, inits, "gd", lr=0.05, steps=10**11, until=rule, chunk_size=2, out=sys.argv[1],
                      callback=ready, **kwargs)
    print(f"complete={ens.complete} pending={ens.counts().get('pending', 0)}", flush=True)
    sys.stdout.flush()
    import os
    os._exit(0)  # Dask tasks still running in the background would otherwise keep the process alive
""")


def _lines(proc):
    """Lines of the child's stdout, as (arrival time, text), through a reader thread."""
    lines, arrived = [], threading.Event()

    def read():
        for line in proc.stdout:
            lines.append((time.monotonic(), line.strip()))
            arrived.set()

    threading.Thread(target=read, daemon=True).start()
    return lines, arrived


def _wait_for(lines, arrived, prefix, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = [(t, text) for t, text in lines if text.startswith(prefix)]
        if found:
            return found[0]
        arrived.wait(0.01)
        arrived.clear()
    return None


def _sigint_child(tmp_path, backend):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(out), backend], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        lines, arrived = _lines(proc)
        assert _wait_for(lines, arrived, "ready", 240) is not None, proc.stderr.read() if proc.poll() else ""
        time.sleep(0.5)  # the members of chunks 1 and 2 run (for hours if nobody stops them)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        answer = _wait_for(lines, arrived, "complete=", 30)
        assert answer is not None, "no answer to SIGINT within 30 s"
        took = answer[0] - sent
        assert took < 2.0, f"the ensemble answered SIGINT after {took:.2f} s"
        assert answer[1] == "complete=False pending=4"
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    loaded = fl.load(out)  # the finished chunk was kept; the interrupted ones are pending
    assert not loaded.complete and list(loaded.status) == ["reached"] * 2 + ["pending"] * 4
    assert sorted(p.name for p in out.glob("chunk_*.npz")) == ["chunk_000000.npz"]


@pytest.mark.slow
def test_sigint_stops_a_gd_ensemble_on_threads_within_2_s(tmp_path):
    _sigint_child(tmp_path, "threads")


@pytest.mark.slow
def test_sigint_stops_a_gd_ensemble_on_dask_within_2_s(tmp_path):
    pytest.importorskip("dask.distributed", reason="the dask extra is not installed")
    _sigint_child(tmp_path, "dask")


@pytest.fixture
def python_sigint():
    """Python's own Ctrl-C handler (a background job may start with SIGINT ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.slow
def test_interrupted_chunk_is_pending_and_resumes_bit_identically(tmp_path, python_sigint):
    """SIGINT inside chunk 1 (members running to a far deadline): chunk 0 is kept, chunk 1 pending; the same call
    again computes chunk 1, equal bit for bit to an uninterrupted run."""
    prob, _ = examples.gd_rate_network(1.0, 0.0, -1.0, 0.0)
    inits = fl.random_inits(prob, m=2, count=40, scheme="he", a=[1.0, -1.0], bias=0.0, seed=6)
    reaching = (inits[:, 1, 0] < 0) & (inits[:, 0, 0] > 0)
    inits = np.concatenate([inits[reaching][:2], inits[~reaching][:2]])
    rule = fl.Until(loss_below=0.5, linear=[[1, 1, 0], [1, -1, 0]], tol=1e-3, deadline=3e6 * 0.05)
    run = dict(lr=0.05, steps=10**9, until=rule, chunk_size=2, workers=2)

    def interrupt_soon(progress):
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()

    started = time.monotonic()
    part = fl.ensemble(prob, inits, "gd", out=tmp_path / "run", callback=interrupt_soon, **run)
    assert not part.complete and list(part.status) == ["reached"] * 2 + ["pending"] * 2
    assert time.monotonic() - started < 0.2 + 2.0
    assert np.all(np.isnan(part.final[2:])) and np.all(part.steps[2:] == -1)
    whole = fl.ensemble(prob, inits, "gd", **run)
    assert list(whole.status) == ["reached"] * 2 + ["deadline"] * 2 and np.all(whole.steps[2:] == 3 * 10**6)
    rest = fl.ensemble(prob, inits, "gd", out=tmp_path / "run", **run)
    assert rest.complete
    for name in MEMBER_ARRAYS:
        assert np.array_equal(getattr(rest, name), getattr(whole, name), equal_nan=True), name
