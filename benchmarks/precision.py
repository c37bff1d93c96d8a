"""Cost of precision: float64 GD iterations per second, and mpmath GD and flow at 30 and 50 digits.

Two problems from the papers: Smorodinsky et al.'s 2-neuron net (``examples.gd_rate_network(2, 3, -2, 3.1)``: exp loss,
bias, fixed outer layer, n = 2, m = 2, d = 1) and Boursier-Flammarion's 3 points (``examples.three_points(50)``: square
loss, bias, trained outer layer, n = 3, m = 50, d = 1). The mpmath flow runs seed 000 to t = 1000 (through both
kinks) and seed 003 to t = 0.5 (its first crossings). Run ``python -m benchmarks.precision`` for the table; the
pytest-benchmark suite ``benchmarks/test_precision.py`` records the same runs in its JSON.
"""

from __future__ import annotations

import platform
import time

import flowlib as fl
from flowlib import examples

LR = 1e-2
FLOAT64_STEPS = 1_000_000
MP_STEPS = 200
MP_DPS = (30, 50)

CASES = {"seed 000 gd-rate (n=2, m=2)": lambda: examples.gd_rate_network(2.0, 3.0, -2.0, 3.1),
         "seed 003 three points (n=3, m=50)": lambda: examples.three_points(50)}
#: flow time of the mpmath flow runs, per case
FLOW_T_END = {"seed 000 gd-rate (n=2, m=2)": 1000.0, "seed 003 three points (n=3, m=50)": 0.5}


def warm() -> float:
    """Compile (or load) the descent kernel; return the seconds spent."""
    tick = time.perf_counter()
    prob, p0 = examples.gd_rate_network(2.0, 3.0, -2.0, 3.1)
    fl.gradient_descent(prob, p0, LR, 10)
    return time.perf_counter() - tick


def run_float64(prob, p0, steps: int = FLOAT64_STEPS):
    """``steps`` float64 iterations, recording only the first and last iterate."""
    return fl.gradient_descent(prob, p0, LR, steps, record_every=steps)


def run_mpmath(prob, p0, dps: int, steps: int = MP_STEPS):
    """``steps`` mpmath iterations at ``dps`` digits, recording only the first and last iterate."""
    return fl.gradient_descent(prob, p0, LR, steps, dps=dps, record_every=steps)


def run_mp_flow(prob, p0, dps: int, t_end: float):
    """The flow at ``dps`` digits over ``[0, t_end]``."""
    return fl.gradient_flow(prob, p0, t_end, dps=dps)


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        tick = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - tick)
    return best


def main() -> int:
    compile_s = warm()
    print(f"machine: {platform.processor() or platform.machine()}, {platform.system()}, python "
          f"{platform.python_version()}; kernel warm-up (compile or cache load) {compile_s:.2f} s")
    import mpmath

    print(f"mpmath backend: {mpmath.libmp.BACKEND} (install the 'mp' extra for gmpy2)")
    print(f"gradient descent, lr = {LR:g}; float64: {FLOAT64_STEPS:,} iterations, best of 5; mpmath: {MP_STEPS} "
          "iterations, best of 3")
    header = f"{'problem':<36}{'float64 it/s':>14}" + "".join(f"{f'mpmath {d} digits ms/it':>24}" for d in MP_DPS)
    print(header)
    for name, make in CASES.items():
        prob, p0 = make()
        rate = FLOAT64_STEPS / _best(lambda prob=prob, p0=p0: run_float64(prob, p0), 5)
        cells = [_best(lambda prob=prob, p0=p0, d=d: run_mpmath(prob, p0, d), 3) / MP_STEPS * 1e3 for d in MP_DPS]
        print(f"{name:<36}{rate:>14.3g}" + "".join(f"{c:>24.3f}" for c in cells))
    print("\ngradient flow at dps digits (one run each): Taylor order, steps, events, wall time, ms per step")
    for name, make in CASES.items():
        prob, p0 = make()
        t_end = FLOW_T_END[name]
        for d in MP_DPS:
            res = run_mp_flow(prob, p0, d, t_end)
            print(f"{name:<36} t = {t_end:<7g} {d} digits: order {res.order}, {res.n_steps} steps, "
                  f"{res.n_events} events, {res.wall_s:.2f} s, {res.wall_s / max(res.n_steps, 1) * 1e3:.1f} ms/step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
