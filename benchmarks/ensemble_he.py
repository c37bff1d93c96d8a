"""Seed 000's He experiment (Smorodinsky, Gimpleson & Safran, Section 6 / Figure 3) through ``flowlib.ensemble``.

10,000 initialisations ``w1, w2 ~ N(0, 2)``, ``b = 0``, ``a = (1, -1)``; gradient descent at ``eta = 0.05`` until
``|w1 + w2 + b1 - b2| <= 1e-3`` once ``L < 0.5``, failure when ``L < 0.5`` is not reached within ``10^4`` steps;
then the same stop rule for the exact flow (the deadline at ``t = 10^4 eta = 500``). The draws are those of the
validation claim ``000-he-init`` (seed 6), so the GD numbers must equal the claim's: 2552 successes, exactly the
draws with ``w2 < 0 < w1``, and the Figure 3 numerator's KS p-value against ``F_B`` (Eq. 15).

Run ``python -m benchmarks.ensemble_he`` (compile time reported separately); ``benchmarks/test_ensemble_he.py``
is the pytest-benchmark suite.
"""

from __future__ import annotations

import os
import platform
import time

import numpy as np

import flowlib as fl
from flowlib import examples

ETA = 0.05
RULE = fl.Until(loss_below=0.5, linear=[[1, 1, 0], [1, -1, 0]], tol=1e-3, deadline=1e4 * ETA)
#: The validation claim's seed for these draws (``ctx.seed + 6`` with the default seed 0).
SEED = 6


def he_problem(count: int = 10_000):
    """The seed 000 network and ``count`` He initialisations (the claim's draws)."""
    prob, _ = examples.gd_rate_network(1.0, 0.0, -1.0, 0.0)
    return prob, fl.random_inits(prob, m=2, count=count, scheme="he", a=[1.0, -1.0], bias=0.0, seed=SEED)


def run(method: str, count: int = 10_000, workers: int | None = None) -> fl.EnsembleResult:
    """The ensemble of ``method`` ("gd" or "flow") over the first ``count`` draws."""
    prob, inits = he_problem(count)
    if method == "gd":
        return fl.ensemble(prob, inits, "gd", lr=ETA, steps=10**9, until=RULE, workers=workers)
    return fl.ensemble(prob, inits, "flow", t_end=1e7, until=RULE, workers=workers)


def figure3_numbers(ens: fl.EnsembleResult) -> dict:
    """Success count, quadrant agreement and the Figure 3 numerator ``min(|b2 - b1|, |w1(0) + w2(0)|/2)`` against
    ``F_B`` (KS test), as the validation claim computes them."""
    from scipy import stats

    from flowlib.validation.seed000_gd_rate import f_b_cdf

    ok = ens.status == "reached"
    quadrant = (ens.inits[:, 1, 0] < 0) & (ens.inits[:, 0, 0] > 0)
    b_star = np.abs(ens.inits[ok, 0, 0] + ens.inits[ok, 1, 0]) / 2
    numerator = np.minimum(np.abs(ens.final[ok, 1, 1] - ens.final[ok, 0, 1]), b_star)
    ks = stats.kstest(numerator, f_b_cdf)
    return {"successes": int(ok.sum()), "quadrant_mismatch": int(np.sum(ok != quadrant)),
            "ks_pvalue": float(ks.pvalue), "p_numerator_gt_1": float(np.mean(numerator > 1.0)),
            "total_steps": int(ens.steps.sum())}


def main() -> int:
    compile_s = fl.warmup()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; kernel "
          f"warm-up (compile or cache load) {compile_s:.2f} s")
    for method in ("gd", "flow"):
        tick = time.perf_counter()
        ens = run(method)
        seconds = time.perf_counter() - tick
        numbers = figure3_numbers(ens)
        unit = "GD iterations" if method == "gd" else "Taylor steps"
        print(f"{method:>4}: {seconds:6.2f} s for {len(ens)} runs ({numbers['total_steps']:.3g} {unit}); "
              f"successes {numbers['successes']} (quadrant mismatches {numbers['quadrant_mismatch']}), KS p = "
              f"{numbers['ks_pvalue']:.4f}, P(numerator > 1) = {numbers['p_numerator_gt_1']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
