"""When float64 stops being enough: seed 000's decision boundary x*(t) at long times (README).

Smorodinsky, Gimpleson & Safran's network (seed 000) from theta_0 = (2, 3, -2, 3.1) reaches both kinks and then
``b2 - b1`` vanishes like ``K / t`` while ``b1, b2 ~ ln(t) / 2``: the boundary ``x* = (b2 - b1) / (w1 - w2)`` is a
difference of two nearly equal numbers, and float64 loses it around ``t = 1e14`` whatever the integrator. The
same flow at 40 digits keeps it. Both are measured against the closed form (the u/v solution of docs/design.md,
Reference values, used by ``tests/test_nonsmooth.py``). Run ``python -m benchmarks.float64_limit``.
"""

from __future__ import annotations

import mpmath as mp

import flowlib as fl
from flowlib import examples

THETA0 = (2.0, 3.0, -2.0, 3.1)
TIMES = [1e4, 1e8, 1e12, 1e14, 1e16, 1e20]
DPS = 40


def exact_state(t):
    """(w1, b1, w2, b2)(t) after both kinks (t > 198.23 for THETA0): u2 = v1 = 0 stick (the decoupled closed form)."""
    w1, b1, w2, b2 = (mp.mpf(v) for v in THETA0)
    u1, u2, v1, v2 = w1 + b1, w2 + b2, w1 - b1, w2 - b2
    t = mp.mpf(t)
    t_v, t_u = -mp.exp(-v2) * mp.sinh(v1), mp.exp(u1) * mp.sinh(u2)
    v2t = -mp.log(mp.exp(-(v1 + v2)) + (t - t_v))
    u1t = mp.log(mp.exp(u1 + u2) + (t - t_u))
    return [u1t / 2, u1t / 2, v2t / 2, -v2t / 2]


def boundary(w1, b1, w2, b2):
    """Where ``relu(w1 x + b1) = relu(w2 x + b2)`` with both active: ``x* = (b2 - b1) / (w1 - w2)``."""
    return (b2 - b1) / (w1 - w2)


def main() -> int:
    prob, p0 = examples.gd_rate_network(*THETA0)
    r64 = fl.gradient_flow(prob, p0, TIMES[-1], t_eval=TIMES)
    rmp = fl.gradient_flow(prob, p0, TIMES[-1], dps=DPS, t_eval=TIMES)
    print(f"seed 000, theta_0 = {THETA0}: float64 {r64.n_steps} steps in {r64.wall_s:.2f} s; {DPS} digits "
          f"{rmp.n_steps} steps in {rmp.wall_s:.2f} s")
    print(f"{'t':>8} {'x*(t) exact':>16} {'float64 rel. error':>20} {f'{DPS} digits rel. error':>20}")
    with mp.workdps(DPS + 20):
        for t, s64, smp in zip(TIMES, r64.states_eval, rmp.states_eval):
            exact = boundary(*exact_state(t))
            e64 = abs(boundary(*(mp.mpf(float(v)) for v in (s64[0, 0], s64[0, 1], s64[1, 0], s64[1, 1])))
                      - exact) / exact
            emp = abs(boundary(smp[0, 0], smp[0, 1], smp[1, 0], smp[1, 1]) - exact) / exact
            print(f"{t:8.0e} {mp.nstr(exact, 8):>16} {mp.nstr(e64, 3):>20} {mp.nstr(emp, 3):>20}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
