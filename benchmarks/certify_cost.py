"""What a certificate costs: ``fl.certify`` against the float64 and the 50-digit flows of the same problem.

Each case is run once in one process: the float64 flow, the mpmath flow at 50 digits, and the certification of
the float64 result at 128 bits (the certifier's default), timed one after another. The table gives the times, the
ratio of certification to the 50-digit flow, the certified steps beside the float64 flow's, and the widest
relative enclosure of an event time and of a state. Run ``python -m benchmarks.certify_cost`` (``--quick`` for
the three cheapest cases).

Cases: seed 000's two-kink network from ``(2, 3, -2, 3.1)`` to ``t = 1e4`` (two sticks), E1 to ``t = 10``
(a slide), Wang & Pilanci's V12 to ``t = 6`` (a slide), B1-os to ``t = 10`` (nine crossings), a slide that ends at
its multiplier's bound (three Gaussian points, ReLU, square loss, to ``t = 9``), and seed 003's three points with
``m = 5`` to ``t = 200`` (three crossings and a stick, then the plateau at the spurious loss).
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

import flowlib as fl
from flowlib import examples
from tests.oracles import exact


def _e1():
    prob = fl.Problem(X=exact.E1_X, y=exact.E1_Y, loss="square", reduction="mean", bias=False, train_outer=False)
    return prob, fl.Params(W=[exact.E1_W0], b=None, a=[1.0])


def _slide_end():
    rng = np.random.default_rng(97)
    X, y = rng.standard_normal((3, 2)), rng.standard_normal(3)
    prob = fl.Problem(X, y, loss="square", reduction="mean", bias=False, train_outer=True)
    return prob, fl.Params(W=rng.standard_normal((2, 2)), b=None, a=rng.standard_normal(2))


#: name -> (problem and parameters, t_end, in the quick set)
CASES = {
    "seed000-two-kinks": (lambda: examples.gd_rate_network(2.0, 3.0, -2.0, 3.1), 1e4, True),
    "E1": (_e1, 10.0, True),
    "V12": (examples.sliding_two_points, 6.0, True),
    "B1-os": (lambda: examples.os_logistic(m=6, n=8, d=3, scale=1e-2, seed=11), 10.0, False),
    "slide-end": (_slide_end, 9.0, False),
    "seed003-three-points": (lambda: examples.three_points(5, 1e-3, seed=0), 200.0, False),
}


def measure(name: str, prec: int = 128, dps: int = 50) -> dict:
    """Time the float64 flow, the ``dps``-digit flow and the certification of case ``name``."""
    build, t_end, _ = CASES[name]
    prob, p0 = build()
    start = time.perf_counter()
    res = fl.gradient_flow(prob, p0, t_end=t_end)
    float_s = time.perf_counter() - start
    start = time.perf_counter()
    ref = fl.gradient_flow(prob, p0, t_end=t_end, dps=dps)
    mp_s = time.perf_counter() - start
    cert = fl.certify(res, prec=prec)
    return {"case": name, "t_end": t_end, "events": len(cert.events), "status": cert.status,
            "float_s": float_s, "mp_s": mp_s, "certify_s": cert.wall_s, "ratio_mp": cert.wall_s / mp_s,
            "float_steps": res.n_steps, "mp_steps": ref.n_steps, "certified_steps": cert.n_steps,
            "event_width": cert.widths["events"], "state_width": cert.widths["states"]}


def table(rows: list) -> str:
    """The rows as a markdown table."""
    lines = ["| case | t | events | status | float64 s | 50 digits s | certify s (128 bits) | certify / 50 digits "
             "| steps float64 / 50 digits / certified | widest event, state (relative) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['t_end']:g} | {r['events']} | {r['status']} | {r['float_s']:.4f} | "
                     f"{r['mp_s']:.2f} | {r['certify_s']:.2f} | {r['ratio_mp']:.1f} | {r['float_steps']} / "
                     f"{r['mp_steps']} / {r['certified_steps']} | {r['event_width']:.0e}, {r['state_width']:.0e} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the three cheapest cases")
    args = parser.parse_args(argv)
    fl.warmup()
    names = [name for name, (_, _, quick) in CASES.items() if quick or not args.quick]
    rows = [measure(name) for name in names]
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    print(table(rows))


if __name__ == "__main__":
    main()
