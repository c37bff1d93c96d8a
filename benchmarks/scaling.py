"""Scaling in width ``m`` and samples ``n`` (benchmark B5): the cost of one Taylor step of the exact flow
against the physical floor, one numpy gradient evaluation.

Problem: Gaussian data ``X`` (n x d), labels ``sign(<teacher, x>)``, logistic loss (mean), bias, outer layer
trained, ReLU, small random initialisation (every entry ``N(0, (1e-2 / sqrt(d))^2)``).

For each size it measures, best of a few repeats, with the BLAS threads numpy and Numba share (OpenBLAS, as many
threads as it starts with):

* ``grad``: one numpy evaluation of ``grad L``: ``Z = Xa @ P[:, :d+1].T``, ``f = (S * Z) @ a``,
  ``G = c l'(f)``, ``grad_W = a[:, None] * ((G[:, None] * S).T @ Xa)``, ``grad_a = (G[:, None] * S * Z).sum(0)``:
  two matrix products of ``n m (d + 1)``;
* ``2 prod``: the gradient's two matrix products alone;
* ``step``: one step of ``fl.gradient_flow`` (``dense_output=False``, ``--steps`` steps, divided by the steps, best
  of a few runs after one warm-up run), everything included: event screen and root isolation, classification of
  the events found, loss and energy diagnostics, the copy of the step's coefficients into the chunk's output;
* its parts, called directly on the kernels at the initial state: ``taylor``, the Taylor coefficients of orders
  ``0..K`` (:func:`flowlib.kernels.series.taylor_coefficients`); ``screen``, the earliest root of all ``n m``
  switching polynomials (:func:`flowlib.kernels.driver.earliest_switching`, with its per-step set-up: the
  norms of the coefficients and the product ``z'(0) = Xa @ (w, b)'^T``); ``rest =
  step - taylor - screen``: everything else (surface check and classification at events, diagnostics, output);
* ``ratio = step / (K + 1) / grad``: the cost of one step per Taylor order against one gradient (the
  target: <= 2 at m = 2000, n = 1000, d = 100).

``python -m benchmarks.scaling [--quick] [--out DIR]`` prints the table and writes ``scaling.json`` and
``scaling.png`` (log-log cost against m and against n) into ``DIR`` (default ``bench-out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

import flowlib as fl
from flowlib.running import order_for

D = 100
N_FIXED = 1000
M_FIXED = 2000
M_GRID = (10, 100, 500, 1000, 2000)
N_GRID = (10, 100, 1000)
QUICK_D = 20
QUICK_M_GRID = (10, 100, 400)
QUICK_N_GRID = (10, 100, 400)
QUICK_N_FIXED = 400
QUICK_M_FIXED = 400
RTOL = 1e-13
T_END = 1e6 - 1.0  # the plain clock (t), far beyond the few steps measured
_PAUSE_S = 0.3


def case(m: int, n: int, d: int, seed: int = 0):
    """The scaling problem and its initialisation (see the module doc)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    teacher = rng.standard_normal(d)
    y = np.where(X @ teacher >= 0.0, 1.0, -1.0)
    prob = fl.Problem(X, y, loss="logistic", reduction="mean", activation="relu", bias=True, train_outer=True)
    scale = 1e-2 / np.sqrt(d)
    p0 = fl.Params(W=scale * rng.standard_normal((m, d)), b=scale * rng.standard_normal(m),
                   a=scale * rng.standard_normal(m))
    return prob, p0


def numpy_gradient(Xa, y, c, P):
    """``(grad_W_b, grad_a)`` of the mean logistic loss at packed parameters ``P`` (ReLU): two matrix products."""
    da = Xa.shape[1]
    Z = Xa @ P[:, :da].T
    S = (Z > 0.0).astype(np.float64)
    SZ = S * Z
    f = SZ @ P[:, da]
    G = -c * y / (1.0 + np.exp(y * f))
    grad_wb = P[:, da][:, None] * ((G[:, None] * S).T @ Xa)
    grad_a = (G[:, None] * SZ).sum(0)
    return grad_wb, grad_a


def best_of(fn, repeats: int, budget_s: float = np.inf):
    """Best wall time of ``fn()`` over ``repeats`` calls (fewer when ``budget_s`` is used up), and its last value."""
    best = np.inf
    spent = 0.0
    out = None
    for _ in range(repeats):
        tick = time.perf_counter()
        out = fn()
        took = time.perf_counter() - tick
        best = min(best, took)
        spent += took
        if spent > budget_s:
            break
    return best, out


def _products(Xa, P):
    """The two matrix products of one gradient evaluation alone (the floor of the floor)."""
    da = Xa.shape[1]
    Z = Xa @ P[:, :da].T
    return Z.T @ Xa


class StepParts:
    """The parts of one Taylor step at ``p0``, called directly on the kernels: the Taylor coefficients
    (:func:`flowlib.kernels.series.taylor_coefficients`, orders ``0..K``) and the event screen (norms, then the
    earliest root of every switching polynomial, :func:`flowlib.kernels.driver.earliest_switching`)."""

    def __init__(self, prob, p0, order):
        from flowlib.kernels import driver, series
        from flowlib.kernels.stepping import taylor_step

        self.series, self.driver = series, driver
        self.prob = prob
        P = p0.packed()
        Xa = np.ascontiguousarray(prob.augmented_inputs)
        n, da = Xa.shape
        m = P.shape[0]
        K = self.K = order
        self.Xa, self.P = Xa, P
        self.Z0 = np.ascontiguousarray(Xa @ P[:, :da].T)
        self.S = np.ascontiguousarray((self.Z0 > 0.0).astype(np.float64))
        self.recurrence = series.series_work(K, n, m, da, self.network().Xc.shape[1])
        self.C, self.G = self.recurrence.C, self.recurrence.G
        self.C[0] = P
        self.recurrence.Z0[:] = self.Z0  # the recurrence reads the pre-activations of C[0]
        self.cons = (np.zeros(m + 1, np.int64), np.zeros(0, np.int64), np.zeros((0, da)))
        self.Cm = np.zeros((K + 1, 0))
        self.taylor()
        C = self.C
        self.h = taylor_step(np.abs(C[0]).max(), np.abs(C[K - 1]).max(), np.abs(C[K]).max(), K)
        self.Ct, self.ready = np.empty((m, da, K)), np.zeros(m, np.bool_)
        self.pn, self.rad, self.Z1 = np.empty((K, m)), np.empty(m), np.empty((n, m))
        self.xn = np.linalg.norm(Xa, axis=1) * (1.0 + 1e-12)
        self.mode, self.drop = np.zeros((n, m), np.int8), np.zeros((n, m), np.int8)
        self.active = self.Z0 > 0.0
        self.work, self.g = np.empty((6, max(K + 1, 128))), np.empty(K + 1)
        self.cand, self.flags, self.n_cand = np.empty(n * m, np.int64), np.zeros(m, np.bool_), 0

    def taylor(self):
        self.series.taylor_coefficients(self.network(), self.K, False, 0.0, self.S, *self.cons, self.Cm,
                                        self.recurrence)

    def network(self):
        """The kernels' :class:`~flowlib.kernels.bundles.Network` of ``self.prob``."""
        from flowlib.kernels import bundles

        p = self.prob
        return bundles.network(self.Xa, p.y, p.loss_code, p.scale, p.leak, p.bias, p.train_outer, p.weight_decay)

    def screen(self):
        """``(bound, found)`` of the screen over ``(0, h]``; the pairs it left are ``cand[:n_cand]``."""
        d = self.driver
        d.switching_setup(self.Xa, self.C, self.K, self.pn, self.ready)
        self.series.preactivations(self.Xa, self.C[1], self.Z1)
        bound, found, self.n_cand = d.earliest_switching(self.Xa, self.C, self.Ct, self.ready, self.pn, self.xn,
                                                         self.K, self.Z0, self.Z1, self.mode, self.drop, self.active,
                                                         self.h, self.rad, self.work, self.g, self.cand, self.flags)
        return bound, found


def measure(m: int, n: int, d: int, steps: int, repeats: int, budget_s: float) -> dict:
    prob, p0 = case(m, n, d)
    order = order_for(RTOL)
    Xa = np.ascontiguousarray(prob.augmented_inputs)
    P = p0.packed()
    # numpy's and the kernels' BLAS are two OpenBLAS builds with a thread pool each: a pause between the phases
    # lets the idle pool's threads stop spinning before the other one runs
    time.sleep(_PAUSE_S)
    grad_s, _ = best_of(lambda: numpy_gradient(Xa, prob.y, prob.scale, P), max(5, repeats * 4), budget_s)
    products_s, _ = best_of(lambda: _products(Xa, P), max(5, repeats * 4), budget_s)
    time.sleep(_PAUSE_S)
    from flowlib.kernels import driver

    if hasattr(driver, "earliest_switching"):
        parts = StepParts(prob, p0, order)
        taylor_s, _ = best_of(parts.taylor, repeats, budget_s)
        screen_s, _ = best_of(parts.screen, repeats, budget_s)
    else:  # kernels older than the parts' interface (the "before" column of a comparison)
        taylor_s = screen_s = float("nan")

    def flow():
        return fl.gradient_flow(prob, p0, T_END, rtol=RTOL, dense_output=False, max_steps=steps)

    flow()  # the first run pays for fresh memory pages; later ones reuse them
    run_s, res = best_of(flow, repeats, budget_s)
    # a second round of the floor, after the kernels' run: on a shared machine the best of both is the floor
    time.sleep(_PAUSE_S)
    grad_s = min(grad_s, best_of(lambda: numpy_gradient(Xa, prob.y, prob.scale, P), max(5, repeats * 4),
                                 budget_s)[0])
    products_s = min(products_s, best_of(lambda: _products(Xa, P), max(5, repeats * 4), budget_s)[0])
    n_steps = max(res.n_steps, 1)
    step_s = run_s / n_steps
    return {"m": m, "n": n, "d": d, "order": order, "grad_s": grad_s, "products_s": products_s, "step_s": step_s,
            "taylor_s": taylor_s, "screen_s": screen_s, "rest_s": step_s - taylor_s - screen_s,
            "per_order_s": step_s / (order + 1), "ratio": step_s / (order + 1) / grad_s,
            "steps": res.n_steps, "events": res.n_events, "status": str(res.status.value),
            "t_reached": float(res.t[-1])}


def _blas_threads() -> list:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - optional
        return []
    return [{"lib": os.path.basename(i.get("filepath", "")), "threads": i.get("num_threads")}
            for i in threadpool_info() if i.get("user_api") == "blas"]


def plot(rows: list, path: Path, d: int, n_fixed: int, m_fixed: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, fixed_key, fixed, label in ((axes[0], "m", "n", n_fixed, "width m"),
                                             (axes[1], "n", "m", m_fixed, "samples n")):
        sel = sorted((r for r in rows if r[fixed_key] == fixed), key=lambda r: r[key])
        if not sel:
            continue
        x = np.array([r[key] for r in sel], float)
        for field, style, name in (("per_order_s", "o-", "Taylor step / (K+1)"),
                                   ("grad_s", "s--", "numpy gradient (floor)"),
                                   ("taylor_s", "^:", "Taylor coefficients / (K+1)")):
            yv = np.array([r[field] for r in sel]) / ((sel[0]["order"] + 1) if field == "taylor_s" else 1.0)
            ax.loglog(x, yv, style, label=name)
        ax.loglog(x, 2.0 * np.array([r["grad_s"] for r in sel]), color="0.6", lw=0.8, label="2 x gradient")
        ax.set_xlabel(label)
        ax.set_ylabel("seconds")
        ax.set_title(f"{fixed_key} = {fixed}, d = {d}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def growth(rows: list, key: str, fixed_key: str, fixed: int, field: str) -> float:
    """Log-log slope of ``field`` against ``key`` over the two largest sizes (how cost grows)."""
    sel = sorted((r for r in rows if r[fixed_key] == fixed), key=lambda r: r[key])
    if len(sel) < 2:
        return float("nan")
    a, b = sel[-2], sel[-1]
    return float(np.log(b[field] / a[field]) / np.log(b[key] / a[key]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small grid (d = 20), under a minute")
    parser.add_argument("--out", default="bench-out", help="output folder for scaling.json and scaling.png")
    parser.add_argument("--steps", type=int, default=None, help="flow steps per measurement")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None,
                        help="BLAS threads of numpy and of the kernels (default: as many as OpenBLAS starts)")
    args = parser.parse_args(argv)
    if args.quick:
        d, n_fixed, m_fixed, m_grid, n_grid = QUICK_D, QUICK_N_FIXED, QUICK_M_FIXED, QUICK_M_GRID, QUICK_N_GRID
    else:
        d, n_fixed, m_fixed, m_grid, n_grid = D, N_FIXED, M_FIXED, M_GRID, N_GRID
    steps = args.steps or 8
    repeats = args.repeats or 3
    if args.threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=args.threads, user_api="blas")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    compile_s = fl.warmup()
    sizes = [(m, n_fixed) for m in m_grid] + [(m_fixed, n) for n in n_grid if n != n_fixed]
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, {platform.system()}, python "
          f"{platform.python_version()}, numpy {np.__version__}; BLAS threads {_blas_threads()}; "
          f"kernel warm-up {compile_s:.2f} s")
    print(f"problem: Gaussian X, sign-teacher labels, logistic (mean), bias, a trained, ReLU, init 1e-2/sqrt(d); "
          f"d = {d}, rtol = {RTOL:g} (order K = {order_for(RTOL)})")
    head = (f"{'m':>6}{'n':>6}{'grad ms':>10}{'2 prod ms':>11}{'step ms':>10}{'taylor ms':>11}{'screen ms':>11}"
            f"{'rest ms':>10}{'step/(K+1)':>12}{'ratio':>8}{'steps':>7}{'events':>8}")
    print(head)
    rows = []
    for m, n in sizes:
        big = m * n * d >= 5e7
        row = measure(m, n, d, steps=steps, repeats=2 if big else repeats, budget_s=30.0)
        rows.append(row)
        print(f"{m:>6}{n:>6}{row['grad_s'] * 1e3:>10.3f}{row['products_s'] * 1e3:>11.3f}{row['step_s'] * 1e3:>10.2f}"
              f"{row['taylor_s'] * 1e3:>11.2f}{row['screen_s'] * 1e3:>11.3f}{row['rest_s'] * 1e3:>10.2f}"
              f"{row['per_order_s'] * 1e3:>12.3f}{row['ratio']:>8.2f}{row['steps']:>7}{row['events']:>8}", flush=True)
    slopes = {"step_vs_m": growth(rows, "m", "n", n_fixed, "step_s"),
              "grad_vs_m": growth(rows, "m", "n", n_fixed, "grad_s"),
              "step_vs_n": growth(rows, "n", "m", m_fixed, "step_s"),
              "grad_vs_n": growth(rows, "n", "m", m_fixed, "grad_s")}
    print("growth (log-log slope over the two largest sizes): "
          + ", ".join(f"{k} {v:.2f}" for k, v in slopes.items()))
    target = [r for r in rows if (r["m"], r["n"]) == (m_fixed, n_fixed)]
    if target:
        print(f"ratio at m = {m_fixed}, n = {n_fixed}, d = {d}: {target[0]['ratio']:.2f} (target <= 2)")
    report = {"machine": {"arch": platform.machine(), "cores": os.cpu_count(), "system": platform.system(),
                          "python": platform.python_version(), "numpy": np.__version__,
                          "blas": _blas_threads()},
              "quick": bool(args.quick), "d": d, "rtol": RTOL, "order": order_for(RTOL), "compile_s": compile_s,
              "rows": rows, "growth": slopes}
    (out / "scaling.json").write_text(json.dumps(report, indent=1))
    plot(rows, out / "scaling.png", d, n_fixed, m_fixed)
    print(f"wrote {out / 'scaling.json'} and {out / 'scaling.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
