"""Event-dense flows on real data: the exact flow against GD over the same flow time, and the cost per event.

Two cases, each timed in one run against its peer (never against stored timings):

``B8-digits``
    scikit-learn's digits 0 against 1 (``n = 360``, ``d = 64``, pixels / 16, labels +-1), mean exp loss, no bias,
    outer layer trained, ``m = 50``, ``W ~ 1e-4 N(0, I)``, ``a_j = +-|w_j|``: the flow to ``t = 20`` against float64
    GD at ``lr = 2e-3`` over the same ``t`` (``10^4`` iterations).
``B9-wide``
    Gaussian teacher data (``n = 500``, ``d = 20``, labels of a random ReLU teacher of 5 neurons), logistic loss,
    ``m = 500``, balanced initialisation at scale ``1e-3``: the flow for as long as ``FLOW_SECONDS`` take it
    against GD at ``lr = 1e-3`` over the flow time reached.

The cost of an event is reported in *gradient evaluations*: the wall time per event over that of one numpy
evaluation of the network's gradient (two matrix products, timed in the same run), the unit of the peer it
replaces; beside it, in the same unit, the six matrix products of an exact order-3 restart timed alone
(:func:`restart_seconds`), what an event would cost if the rest of the step were free. Run ``python -m
benchmarks.event_dense`` (``--quick`` for short horizons, ``--sweep`` for the curve over ``m`` and ``n``, ``--pairs``
for B8 on other digit pairs and widths; ``--out DIR`` writes the rows to ``event_dense.json`` and, with ``--sweep``,
the plot ``event_dense.png``), or ``flowlib bench`` (``python -m benchmarks``), which runs both after its table
(``--cases B8,B9`` for these alone).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

import flowlib as fl
from flowlib.flow import kernel_network
from flowlib.kernels.constants import ADAPTIVE_MIN_ORDER

#: seconds of flow the wide case is given
FLOW_SECONDS = 60.0


def digits_case(m: int = 50, seed: int = 0, pair: tuple = (0, 1)):
    """``(problem, params)`` of B8-digits (needs scikit-learn); ``pair`` the two digits (the first labelled +1)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:  # pragma: no cover - the bench extra installs it
        raise ImportError("B8-digits needs scikit-learn: pip install 'flowlib[validate]'") from exc
    digits = load_digits()
    keep = (digits.target == pair[0]) | (digits.target == pair[1])
    X = digits.data[keep] / 16.0
    y = np.where(digits.target[keep] == pair[0], 1.0, -1.0)
    rng = np.random.default_rng(seed)
    W = 1e-4 * rng.standard_normal((m, X.shape[1]))
    a = np.where(np.arange(m) % 2 == 0, 1.0, -1.0) * np.linalg.norm(W, axis=1)
    prob = fl.Problem(X, y, loss="exp", reduction="mean", bias=False, train_outer=True)
    return prob, fl.Params(W=W, b=None, a=a)


def wide_case(m: int = 500, n: int = 500, d: int = 20, seed: int = 0):
    """``(problem, params)`` of B9-wide."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    teacher = rng.standard_normal((5, d))
    signs = np.array([1.0, 1.0, -1.0, 1.0, -1.0])
    y = np.sign(np.maximum(X @ teacher.T, 0.0) @ signs - 0.1)
    y[y == 0] = 1.0
    prob = fl.Problem(X, y, loss="logistic", reduction="mean", bias=False, train_outer=True)
    packed = fl.random_inits(prob, m, 1, scheme="balanced", scale=1e-3, seed=seed)[0]
    return prob, fl.Params.unpacked(packed, prob.bias)


def numpy_gradient_seconds(prob, params, repeats: int = 200) -> float:
    """Best time of one numpy evaluation of the gradient of the (exp or logistic, mean, no bias) loss at ``params``
    (the unit of event costs): two matrix products and the elementwise work between them."""
    X, y = np.asarray(prob.X), np.asarray(prob.y)
    W, a = np.asarray(params.W), np.asarray(params.a)
    n = len(y)

    def gradient():
        Z = X @ W.T
        f = np.maximum(Z, 0.0) @ a
        if prob.loss == "exp":
            G = -y * np.exp(-y * f) / n
        else:  # logistic
            G = -y / (1.0 + np.exp(y * f)) / n
        S = (Z > 0.0) * G[:, None]
        return (S * a).T @ X, np.maximum(Z, 0.0).T @ G

    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        gradient()
        best = min(best, time.perf_counter() - t0)
    return best


def restart_products(prob, m: int, order: int = ADAPTIVE_MIN_ORDER) -> list:
    """The matrix products an exact restart of the flow's Taylor series computes up to ``order``, as ``(kind,
    shape of the left operand, shape of the right one)`` (the kernels' ``series.taylor_coefficients`` and
    ``series.preactivations`` on the network's ``Xc``, which leaves out the columns that are 0 on every sample):

    * ``"Z"``: the pre-activations ``Z0 = Xc @ P^T`` and their derivatives ``Z1`` (the event screen reads both),
      ``(n, nc) @ (nc, m)``;
    * ``"R"``: one per order ``k < order``, ``R^[k] = S^T @ (G^[k] Xc)``, the velocity's sums, ``(m, n) @ (n, nc)``;
    * ``"T"``: one per order ``2 <= k < order``, ``S @ Q^[k]`` for the outputs' coefficients ``f^[k]``,
      ``(n, m) @ (m, nc)``.

    ``2 order`` products in all, whatever the rest of the step costs: ``order = ADAPTIVE_MIN_ORDER`` (3) is the
    lowest order a step after an event stops at, and on event-dense flows most steps stop there."""
    n = prob.n
    nc = kernel_network(prob).Xc.shape[1]
    z, r, t = ((n, nc), (nc, m)), ((m, n), (n, nc)), ((n, m), (m, nc))
    return [("Z", *z)] * 2 + [("R", *r)] * order + [("T", *t)] * max(0, order - 2)


def restart_seconds(prob, m: int, repeats: int = 200) -> float:
    """Best time of the products of :func:`restart_products` in numpy (operands C-contiguous, as the kernels
    lay them out; each kind timed alone, best of ``repeats``): the cost of an exact restart's BLAS alone, the floor
    of an event's cost while every event restarts the series."""
    rng = np.random.default_rng(0)
    total = 0.0
    for kind in ("Z", "R", "T"):
        shapes = [(left, right) for k, left, right in restart_products(prob, m) if k == kind]
        if not shapes:
            continue
        left, right = shapes[0]
        # R's left operand is the transposed view S.T of the C-contiguous slopes S (n, m), as in the kernel
        A = rng.standard_normal(left[::-1]).T if kind == "R" else rng.standard_normal(left)
        B = rng.standard_normal(right)
        out = np.empty((left[0], right[1]))
        best = np.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            np.dot(A, B, out)
            best = min(best, time.perf_counter() - t0)
        total += best * len(shapes)
    return total


def measure(name: str, prob, p0, t_end: float, lr: float, max_seconds: float | None = None) -> dict:
    """Run the flow (to ``t_end``, or for ``max_seconds``) and GD over the same flow time; return the figures."""
    options = {"dense_output": False}
    fl.gradient_flow(prob, p0, 1e-6, dense_output=False)  # compile or load the kernels outside the timing
    start = time.perf_counter()
    if max_seconds is not None:
        # a true return of the callback (called after every chunk) stops the run, status "interrupted"
        options["callback"] = lambda progress: time.perf_counter() - start > max_seconds
    res = fl.gradient_flow(prob, p0, t_end, **options)
    flow_s = time.perf_counter() - start
    reached = float(res.t_final)
    steps = max(1, int(round(reached / lr)))
    fl.gradient_descent(prob, p0, lr, 1)
    start = time.perf_counter()
    fl.gradient_descent(prob, p0, lr, steps)
    gd_s = time.perf_counter() - start
    unit = numpy_gradient_seconds(prob, p0)
    floor = restart_seconds(prob, p0.m)
    events = res.n_events
    return {"case": name, "status": str(res.status), "t": reached, "events": events, "steps": res.n_steps,
            "flow_s": flow_s, "gd_iterations": steps, "gd_s": gd_s, "ratio": flow_s / gd_s,
            "gradient_ms": unit * 1e3, "per_event_ms": flow_s / max(events, 1) * 1e3,
            "gradients_per_event": flow_s / max(events, 1) / unit,
            "restart_gradients": floor / unit,
            "gradients_per_step": flow_s / max(res.n_steps, 1) / unit}


#: the cases, as ``flowlib bench --cases`` names them
CASES = ("B8-digits", "B9-wide")


def select(wanted: list[str] | None) -> list[str]:
    """The cases whose id starts with one of ``wanted`` (case-insensitive; all when ``None``), as
    :func:`benchmarks.bench.select_cases` selects its own."""
    if not wanted:
        return list(CASES)
    return [case for case in CASES if any(case.lower().startswith(w.lower()) for w in wanted)]


def run(quick: bool = False, cases: list[str] | None = None, log=None) -> list:
    """The cases ``cases`` (both by default); ``quick`` shortens the horizons (digits to t = 2, the wide case to
    5 s). ``log`` receives each finished row's line of :func:`table`."""
    rows = []
    for case in CASES if cases is None else cases:
        if case == "B8-digits":
            digits, d0 = digits_case()
            rows.append(measure(case, digits, d0, 2.0 if quick else 20.0, 2e-3))
        else:
            wide, w0 = wide_case()
            rows.append(measure(case, wide, w0, 1e6, 1e-3, 5.0 if quick else FLOW_SECONDS))
        if log is not None:
            log(table(rows[-1:]).splitlines()[-1])
    return rows


def sweep() -> list:
    """The curve over m and n: digits at ``m = 20, 50, 100`` to ``t = 0.5``; the teacher at ``n = m = 125, 250,
    500`` for 10 s each."""
    rows = []
    for m in (20, 50, 100):
        prob, p0 = digits_case(m=m)
        rows.append(measure(f"digits m={m}", prob, p0, 0.5, 2e-3))
    for n in (125, 250, 500):
        prob, p0 = wide_case(m=n, n=n)
        rows.append(measure(f"teacher n=m={n}", prob, p0, 1e6, 1e-3, 10.0))
    return rows


#: the digit pairs and widths of :func:`pairs` (B8's set-up otherwise)
PAIRS = ((0, 1), (3, 8), (4, 9), (1, 7), (5, 6))
WIDTHS = (20, 100)


def pairs() -> list:
    """B8-digits on other digit pairs (``PAIRS``, ``m = 50``) and at other widths (``WIDTHS``, digits 0 and 1), each
    to ``t = 20`` against GD at ``lr = 2e-3``."""
    rows = []
    for pair in PAIRS:
        prob, p0 = digits_case(pair=pair)
        rows.append(measure(f"digits {pair[0]} vs {pair[1]}, m=50", prob, p0, 20.0, 2e-3))
    for m in WIDTHS:
        prob, p0 = digits_case(m=m)
        rows.append(measure(f"digits 0 vs 1, m={m}", prob, p0, 20.0, 2e-3))
    return rows


def table(rows: list) -> str:
    """The rows as a Markdown table."""
    head = ("| case | status | t reached | events | steps | flow s | GD it | GD s | flow / GD | gradient ms | "
            "per event ms | gradients / event | restart's products, in gradients | gradients / step |")
    lines = [head, "|" + "---|" * 14]
    for r in rows:
        lines.append(f"| {r['case']} | {r['status']} | {r['t']:.4g} | {r['events']} | {r['steps']} | "
                     f"{r['flow_s']:.1f} | {r['gd_iterations']} | {r['gd_s']:.2f} | {r['ratio']:.1f} | "
                     f"{r['gradient_ms']:.3f} | {r['per_event_ms']:.2f} | {r['gradients_per_event']:.1f} | "
                     f"{r['restart_gradients']:.1f} | {r['gradients_per_step']:.1f} |")
    return "\n".join(lines)


def plot(rows: list, path: Path) -> None:
    """The cost per event over the width (:func:`sweep`'s rows): one panel per problem (the digits over ``m``, the
    teacher over ``n = m``), the measured gradients per event beside the exact restart's products alone
    (:func:`restart_seconds`) and the issue's target of 2, all in units of one numpy gradient."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("digits", "width m (digits 0 vs 1, n = 360, d = 64)"), ("teacher", "n = m (teacher, d = 20)")]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, (prefix, label) in zip(axes, panels):
        sel = [r for r in rows if r["case"].startswith(prefix)]
        if not sel:
            ax.set_visible(False)
            continue
        x = np.array([int(r["case"].rsplit("=", 1)[1]) for r in sel], float)
        ax.plot(x, [r["gradients_per_event"] for r in sel], "o-", label="flow, per event (measured)")
        ax.plot(x, [r["restart_gradients"] for r in sel], "s--",
                label=f"an order-{ADAPTIVE_MIN_ORDER} restart's {2 * ADAPTIVE_MIN_ORDER} products alone")
        ax.set_xticks(x)
        ax.axhline(2.0, color="0.5", lw=0.8, label="target: 2 gradients")
        ax.set_xlabel(label)
        ax.set_ylabel("numpy gradient evaluations")
        ax.set_ylim(bottom=0.0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short horizons (a smoke run)")
    parser.add_argument("--sweep", action="store_true", help="the cost per event over m and n instead")
    parser.add_argument("--pairs", action="store_true", help="B8 on other digit pairs and widths instead")
    parser.add_argument("--out", default=None,
                        help="folder for event_dense.json (and, with --sweep, the plot event_dense.png)")
    args = parser.parse_args(argv)
    machine = (f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, "
               f"numpy {np.__version__}, flowlib {fl.__version__}")
    print(machine)
    rows = sweep() if args.sweep else pairs() if args.pairs else run(args.quick)
    print(table(rows))
    if args.out is not None:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "event_dense.json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=1))
        if args.sweep:
            plot(rows, out / "event_dense.png")
            print(f"wrote {out / 'event_dense.json'} and {out / 'event_dense.png'}")
        else:
            print(f"wrote {out / 'event_dense.json'}")


if __name__ == "__main__":
    main()
