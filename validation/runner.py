"""Run the registered claims (in parallel worker processes), and write ``report.md`` and ``report.json``.

``flowlib validate [--quick] [--only ID ...] [--out DIR] [--jobs N]`` is :func:`main`.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .core import CLAIMS, Context, Outcome, versions

#: the per-paper modules (each registers its claims on import)
MODULES = ("seed000_gd_rate", "seed001_linear_teachers", "seed002_early_alignment", "seed003_early_alignment",
           "seed004_convex_geometry")

STATUSES = ("pass", "fail", "error", "skipped")


@dataclass
class Record:
    """One claim's row of the report."""

    id: str
    paper: str
    reference: str
    statement: str
    expect: str
    status: str
    measured: object = None
    bound: object = None
    detail: str = ""
    plots: list = field(default_factory=list)
    data: dict = field(default_factory=dict)
    runtime_s: float = 0.0
    versions: dict = field(default_factory=dict)
    certified: str = ""


def load_claims() -> dict:
    """Import every per-paper module (a missing module is skipped) and return the registry."""
    for name in MODULES:
        try:
            importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{name}":
                raise
    return CLAIMS


def _missing(needs) -> list:
    missing = []
    for module in needs:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    return missing


def run_claim(claim_id: str, quick: bool, out: str, seed: int = 0) -> Record:
    """Run one claim and turn its outcome (or its exception) into a :class:`Record`."""
    claims = load_claims()
    c = claims[claim_id]
    record = Record(id=c.id, paper=c.paper, reference=c.reference, statement=c.statement, expect=c.expect,
                    status="error", versions=versions())
    missing = _missing(c.needs)
    if missing:
        record.status = "skipped"
        record.detail = f"needs {', '.join(missing)}: pip install 'flowlib[validate]'"
        return record
    tick = time.perf_counter()
    try:
        outcome = c.function(Context(quick=quick, out=Path(out), seed=seed))
        if not isinstance(outcome, Outcome):
            raise TypeError(f"claim {claim_id} returned {type(outcome).__name__}, not an Outcome")
        record.status = "pass" if outcome.passed else "fail"
        record.measured, record.bound = _plain(outcome.measured), _plain(outcome.bound)
        record.detail, record.plots, record.data = outcome.detail, list(outcome.plots), _plain(outcome.data)
        record.certified = outcome.certified
    except Exception as exc:  # a claim that crashes is reported, never hides the others
        record.detail = f"{type(exc).__name__}: {exc}\n" + "".join(traceback.format_tb(exc.__traceback__)[-3:])
    record.runtime_s = time.perf_counter() - tick
    return record


def _plain(value):
    """JSON-friendly copy: numpy scalars and arrays become Python numbers and lists, mpf becomes float."""
    import numpy as np

    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def run(ids=None, *, quick: bool = True, out="validation-out", jobs: int = 2, seed: int = 0,
        progress: bool = True) -> list:
    """Run the claims ``ids`` (all by default) and return their records in registry order.

    Claims run in ``jobs`` worker processes (``jobs = 1``: in this process). Progress is printed one line per
    finished claim (or a tqdm bar when tqdm is installed and ``progress`` is on).
    """
    claims = load_claims()
    ids = list(claims) if not ids else list(ids)
    unknown = [i for i in ids if i not in claims]
    if unknown:
        raise ValueError(f"only: unknown claim id(s) {unknown}; known: {sorted(claims)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    records = {}

    def report_progress(record, done):
        mark = {"pass": "ok", "fail": "FAIL", "error": "ERROR", "skipped": "skipped"}[record.status]
        print(f"[{done}/{len(ids)}] {record.id:<28} {mark:<8} {record.runtime_s:7.1f} s", flush=True)

    if jobs <= 1:
        for done, claim_id in enumerate(ids, 1):
            records[claim_id] = run_claim(claim_id, quick, str(out), seed)
            if progress:
                report_progress(records[claim_id], done)
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(run_claim, claim_id, quick, str(out), seed): claim_id for claim_id in ids}
            for done, future in enumerate(as_completed(futures), 1):
                record = future.result()
                records[record.id] = record
                if progress:
                    report_progress(record, done)
    return [records[i] for i in ids]


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def write_report(records, out, *, quick: bool, wall_s: float) -> tuple:
    """Write ``report.md`` (a table of every claim, then each claim's detail and plots) and ``report.json``."""
    out = Path(out)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    info = versions()
    counts = {s: sum(r.status == s for r in records) for s in STATUSES}
    lines = [f"# flowlib validation report ({'quick' if quick else 'full'} mode)", "",
             f"{stamp}; {info['machine']}, {info['cpus']} CPUs, {info['system']}; flowlib {info['flowlib']}, "
             f"python {info['python']}, numpy {info['numpy']}, numba {info['numba']}, scipy {info['scipy']}, "
             f"mpmath {info['mpmath']}; {wall_s:.0f} s in all.", "",
             f"**{counts['pass']} passed, {counts['fail']} failed, {counts['error']} errors, "
             f"{counts['skipped']} skipped.** Claims marked *paper-wrong* are stated wrongly in the paper (see "
             "docs/design.md, Validation rationale); their row tests the corrected statement.", "",
             "The *certified* column says what `flowlib.certify` proved in ball arithmetic for the claim's instance "
             "(docs/design.md, Certified trajectories), where the claim has a certified variant.", "",
             "| claim | reference | statement | measured | bound | status | certified | time |",
             "|---|---|---|---|---|---|---|---|"]
    for r in records:
        status = r.status if r.expect == "holds" else f"{r.status} (paper-wrong)"
        lines.append(f"| `{r.id}` | {_cell(r.reference)} | {_cell(r.statement)} | {_cell(r.measured)} | "
                     f"{_cell(r.bound)} | {status} | {_cell(r.certified) or '-'} | {r.runtime_s:.1f} s |")
    for r in records:
        lines += ["", f"## `{r.id}`: {r.reference}", "", r.statement, ""]
        if r.detail:
            lines += [r.detail.strip(), ""]
        lines += [f"![{r.id}]({plot})" for plot in r.plots]
    md = out / "report.md"
    md.write_text("\n".join(lines) + "\n")
    js = out / "report.json"
    js.write_text(json.dumps({"date": stamp, "mode": "quick" if quick else "full", "versions": info,
                              "wall_s": wall_s, "counts": counts, "claims": [asdict(r) for r in records]},
                             indent=1))
    return md, js


def main(argv=None) -> int:
    """``flowlib validate``: exit status 1 when a claim fails or errors, 0 otherwise."""
    parser = argparse.ArgumentParser(prog="flowlib validate", description="Check the source papers' claims on the "
                                     "exact flow and write report.md / report.json with the plots.")
    parser.add_argument("--quick", action="store_true", help="small sizes: a few minutes on 2 cores")
    parser.add_argument("--only", nargs="+", metavar="ID", help="run only these claim ids (see --list)")
    parser.add_argument("--out", default="validation-out", help="folder for the report and plots")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--list", action="store_true", help="list the claims and exit")
    args = parser.parse_args(argv)
    if args.list:
        for c in load_claims().values():
            print(f"{c.id:<28} {c.reference:<24} {c.statement}")
        return 0
    if args.jobs < 1:
        parser.error("--jobs must be >= 1")
    tick = time.perf_counter()
    try:
        records = run(args.only, quick=args.quick, out=args.out, jobs=args.jobs)
    except ValueError as exc:
        parser.error(str(exc))
    md, _ = write_report(records, args.out, quick=args.quick, wall_s=time.perf_counter() - tick)
    bad = [r.id for r in records if r.status in ("fail", "error")]
    print(f"\nreport: {md}  ({len(records) - len(bad)} of {len(records)} claims pass or are skipped)")
    if bad:
        print(f"failed: {' '.join(bad)}", file=sys.stderr)
    return 1 if bad else 0
