"""Where a small ``gradient_flow`` call spends its time: the kernel against the Python around it, per step.

For the toy transversal problems of ``flowlib bench`` (B0, B1), best of many repeats on a warm process:

* ``call``: one ``fl.gradient_flow(..., dense_output=False)``, everything included;
* ``kernel``: :func:`flowlib.kernels.driver.integrate_chunk` alone from the same state, with its buffers prepared
  outside the timed loop (the rest of ``call`` is argument checks, buffers and the ``FlowResult``);
* ``per step``: ``kernel`` over the number of Taylor steps;
* heyoka.py's masks + events peer (when installed), per trajectory and per step, its compilation excluded.

``python -m benchmarks.overhead`` prints the table (the README's split of a small call into kernel and Python and
the per-step comparison with heyoka come from it), then what a stage call costs when it uses its bundles past a
branch against reading their fields first (:func:`bundle_call_ns`; the rule of docs/design.md, *Algorithm*).
"""

from __future__ import annotations

import timeit

import numpy as np

import flowlib as fl
from benchmarks import bench
from benchmarks.peers import heyoka_peer
from flowlib import examples, flow
from flowlib.kernels import bundles, driver, zeno
from flowlib.kernels._jit import jit
from flowlib.running import order_for

RTOL = flow.DEFAULT_RTOL


def best_us(func, number: int) -> float:
    """Best time of ``func()`` in microseconds over five rounds of ``number`` calls."""
    return min(timeit.repeat(func, number=number, repeat=5)) / number * 1e6


def kernel_runner(prob: fl.Problem, p0: fl.Params, t_end: float):
    """``integrate_chunk`` from ``p0`` to ``t_end`` in one chunk, its buffers made once (what ``call`` adds).

    Returns
    -------
    run : callable
        ``run() -> (status, n_steps, n_events)``, the kernel's return.
    P : ndarray
        The packed state, which ``run`` resets to ``p0`` and advances to ``t_end``.
    """
    order = order_for(RTOL)
    setup = flow.kernel_setup(prob, order, RTOL, "filippov", prob.leak, "stay", False)
    start = p0.packed()
    n, (m, w) = prob.n, start.shape
    per_step, per_event = flow._chunk_buffers(64, 64 + 3 * n * m, order, m, w, False)
    P, now, drop = start.copy(), np.zeros(1), np.zeros((n, m), np.int8)
    active, mode = flow.initial_surfaces(prob, start)
    state = bundles.state(P, active, mode, drop, now, zeno.network_zeno(m, w))
    args = tuple(bundles.plain(bundle) for bundle in (*setup, state))
    logs = bundles.plain(per_step), bundles.plain(per_event)

    def run():
        P[:] = start
        now[0] = 0.0
        drop[:] = 0
        state.order[:] = 0
        state.zeno.memory.count[0] = 0
        state.zeno.dissipated[0] = 0.0
        driver.surface_sides(args[0], P, np.empty((n, m)), active, mode)
        return driver.integrate_chunk(*args, t_end, 64, 64, *logs)

    return run, P


@jit
def _fields_late(net, state, ws):
    """``driver._coasting`` as it was: the bundles named after a branch (the kernel's reads their fields first)."""
    if net.loss_kind != 2 or net.decay != 0.0:
        return False
    return driver._converged(net.Xa, net.y, state.P, ws.series.Z0, ws.S, net.bias, ws.neuron_scale)


@jit
def _calls(net, method, state, reps, late):
    """``reps`` calls of :func:`_fields_late` or of ``driver._coasting`` on a fresh
    :class:`~flowlib.kernels.driver.Workspace`."""
    ws = driver._workspace(net, method, state)
    count = 0
    for _ in range(reps):
        count += _fields_late(net, state, ws) if late else driver._coasting(net, state, ws)
    return count


def bundle_call_ns(reps: int = 200_000) -> tuple[float, float]:
    """Nanoseconds per call of a trivial stage taking the network, the state and the ``Workspace`` (~60 arrays in
    all) on B1-os, its bundles named after a branch (:func:`_fields_late`) against its fields read first (the
    kernel's ``_coasting``): ``(late, first)``, best of five.
    Numba holds a reference to each array of a named tuple while the tuple is used, so the first pays two atomic
    operations per array and call."""
    prob, p0 = bench.os_transversal()
    setup = flow.kernel_setup(prob, order_for(RTOL), RTOL, "filippov", prob.leak, "stay", False)
    P = p0.packed()
    active, mode = flow.initial_surfaces(prob, P)
    state = bundles.state(P, active, mode, np.zeros(active.shape, np.int8), np.zeros(1),
                          zeno.network_zeno(*P.shape))
    late, first = [], []
    for runs, flag in ((late, True), (first, False)):
        _calls(*setup, state, 1, flag)
        for _ in range(5):
            start = timeit.default_timer()
            _calls(*setup, state, reps, flag)
            runs.append((timeit.default_timer() - start) / reps * 1e9)
    return min(late), min(first)


def main() -> int:
    cases = {"B0-e1p1": (*bench.e1_problem(), 1.5), "B0-seed0": (*examples.gd_rate_network(2.0, 3.0, -2.0, 3.1), 100.0),
             "B1-one": (*bench.one_crossing_problem(), 5.0), "B1-two": (*examples.two_crossings(), 2.0),
             "B1-os": (*bench.os_transversal(), 10.0)}
    fl.warmup()
    print(f"{'case':<10}{'steps':>6}{'call us':>10}{'kernel us':>11}{'python us':>11}{'us/step':>9}"
          f"{'heyoka us':>11}{'hy steps':>9}{'hy us/step':>11}")
    for name, (prob, p0, t_end) in cases.items():
        number = 20 if name == "B1-os" else 2000
        res = fl.gradient_flow(prob, p0, t_end, dense_output=False)
        call = best_us(lambda: fl.gradient_flow(prob, p0, t_end, dense_output=False), number)
        run, _ = kernel_runner(prob, p0, t_end)
        code, steps, _ = run()
        assert steps == res.n_steps, (steps, res.n_steps)
        kernel = best_us(run, number)
        line = f"{name:<10}{steps:>6}{call:>10.1f}{kernel:>11.1f}{call - kernel:>11.1f}{kernel / steps:>9.2f}"
        if heyoka_peer.available():
            hy = heyoka_peer.build_flow(prob.X, prob.y, p0.W, p0.b, p0.a, t_end, events=True, loss=prob.loss,
                                        reduction=prob.reduction, leak=prob.leak, bias=prob.bias,
                                        train_outer=prob.train_outer)
            hy_steps = hy.run().n_steps
            hy_time = best_us(hy.run, number)
            line += f"{hy_time:>11.1f}{hy_steps:>9}{hy_time / hy_steps:>11.2f}"
        print(line)
    late, first = bundle_call_ns()
    print(f"a stage call with (net, state, workspace): bundles named after a branch {late:.0f} ns, "
          f"fields read first {first:.1f} ns")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
