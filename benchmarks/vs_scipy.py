"""flowlib against SciPy ``solve_ivp(DOP853)`` with terminal events and restarts, on a transversal problem.

Both are measured against an independent mpmath reference at 40 digits (``tests/oracles/reference.py``): the final state
and every event time. Run ``python -m benchmarks.vs_scipy`` for the table quoted in the README; the
pytest-benchmark suite ``benchmarks/test_vs_scipy.py`` records the same numbers in its JSON.
"""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

import flowlib as fl
from benchmarks.peers.scipy_peer import scipy_flow
from flowlib import examples

T_END = 10.0


def transversal_case():
    """Orthogonally separable data (n = 8, d = 3), logistic loss (sum), m = 6, balanced init at scale 1e-2 (the
    stored reference's exact inputs, :func:`benchmarks.peers.stored.pinned`)."""
    from benchmarks.peers import stored

    return stored.pinned("b1-os", *examples.os_logistic(m=6, n=8, d=3, scale=1e-2, seed=11), T_END)


def _peer_kwargs(prob):
    return dict(loss=prob.loss, reduction=prob.reduction, leak=prob.leak, bias=prob.bias,
                train_outer=prob.train_outer)


@lru_cache(maxsize=None)
def reference():
    """mpmath (40 digits) final state and event times of :func:`transversal_case` at ``T_END``: the independent
    oracle's answer, stored as ``benchmarks/peers/data/b1-os.json`` (the same problem as :mod:`benchmarks.bench`'s
    B1-os; recomputed, about 9 s, if the inputs ever change)."""
    from benchmarks.peers import stored

    prob, p0 = transversal_case()
    ref = stored.get("b1-os", prob, p0, T_END, "oracle")
    final = np.delete(ref.final, prob.d, axis=1)  # drop the (zero) bias column: rows (w_j, a_j)
    times = np.array([e[0] for e in ref.events])
    pairs = [(j, i) for _, _, j, i in ref.events]
    return final, times, pairs


def run_flowlib(prob, p0, rtol=1e-13):
    return fl.gradient_flow(prob, p0, T_END, rtol=rtol, dense_output=False)


def run_scipy(prob, p0, rtol=1e-12):
    return scipy_flow(prob.X, prob.y, p0.W, p0.b, p0.a, T_END, rtol=rtol, **_peer_kwargs(prob))


@dataclass
class Accuracy:
    """Errors against the mpmath reference: final state (max relative to max |theta|) and event times."""

    state: float
    event_time: float
    n_events: int


def accuracy_flowlib(res) -> Accuracy:
    final, times, pairs = reference()
    got = np.column_stack([res.final.W, res.final.a])
    assert [(e.neuron, e.sample) for e in res.events] == pairs, "event sequence differs from the reference"
    return Accuracy(float(np.max(np.abs(got - final)) / np.max(np.abs(final))),
                    float(np.max(np.abs(np.array([e.t for e in res.events]) - times) / times)), res.n_events)


def accuracy_scipy(res) -> Accuracy:
    final, times, pairs = reference()
    got = np.column_stack([res.W, res.a])
    assert list(zip(res.event_neurons.tolist(), res.event_samples.tolist())) == pairs, \
        "SciPy's event sequence differs from the reference"
    return Accuracy(float(np.max(np.abs(got - final)) / np.max(np.abs(final))),
                    float(np.max(np.abs(res.event_times - times) / times)), len(res.event_times))


def best_of(fn, repeats):
    best = np.inf
    for _ in range(repeats):
        tick = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - tick)
    return best, out


def main() -> int:
    compile_s = fl.warmup()
    prob, p0 = transversal_case()
    t_flow, res = best_of(lambda: run_flowlib(prob, p0), 20)
    t_scipy, peer = best_of(lambda: run_scipy(prob, p0), 5)
    a_flow, a_scipy = accuracy_flowlib(res), accuracy_scipy(peer)
    print(f"machine: {platform.processor() or platform.machine()}, {platform.system()}, python "
          f"{platform.python_version()}; kernel warm-up (compile or cache load) {compile_s:.2f} s")
    print(f"problem: orthogonally separable n=8, d=3, m=6, logistic (sum), t_end={T_END:g}, "
          f"{a_flow.n_events} transversal crossings")
    print(f"{'method':<34}{'time/trajectory':>16}{'state error':>14}{'event-time error':>18}")
    print(f"{'flowlib (rtol 1e-13)':<34}{t_flow * 1e3:>13.3f} ms{a_flow.state:>14.1e}{a_flow.event_time:>18.1e}")
    print(f"{'SciPy DOP853 + restarts (rtol 1e-12)':<34}{t_scipy * 1e3:>13.3f} ms{a_scipy.state:>14.1e}"
          f"{a_scipy.event_time:>18.1e}")
    print(f"speed ratio SciPy/flowlib: {t_scipy / t_flow:.1f}x; event-time accuracy ratio: "
          f"{a_scipy.event_time / max(a_flow.event_time, 1e-17):.0f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
