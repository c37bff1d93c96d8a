"""``flowlib run CONFIG``: execute a run configuration (:mod:`flowlib.config`), save the results, draw the plots.

A single initialisation runs :func:`flowlib.gradient_flow` and/or :func:`flowlib.gradient_descent` (saved as
``flow.npz`` / ``gd.npz``; with both, :func:`flowlib.compare` as well). Several run :func:`flowlib.ensemble` per
method, streaming to ``<out>/<method>-ensemble/`` so that an interrupted run resumes when the same command is given
again, and save ``<method>-ensemble.npz``. ``run.json`` records the configuration, the versions and what was
written (with each file's size in bytes).

The output is size-aware by default (``[output]`` in :mod:`flowlib.config`): a single run is saved compact
(:func:`compact_flow`, :func:`compact_descent`: no dense output, at most :func:`default_records` states), printed
tables stop after :data:`TABLE_ROWS` rows, an ensemble prints counts and quantiles instead of one line per member,
and the last line says what was written and how large.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

import numpy as np

from flowlib.config import RunConfig

#: Exit status of an interrupted run (as a shell reports Ctrl-C).
INTERRUPTED = 130
#: Rows a printed table shows with ``output.table = "short"`` (then ``... N more``).
TABLE_ROWS = 20
#: Most states a compact save keeps ...
MAX_RECORDS = 1000
#: ... and most numbers they hold (1 MiB of float64): fewer records for a large network.
MAX_STATE_NUMBERS = 2**17
#: Quantiles of the final loss an ensemble's short output prints.
LOSS_QUANTILES = (0.0, 0.1, 0.5, 0.9, 1.0)


def execute(config: RunConfig, *, progress: bool = False, log=print) -> int:
    """Run ``config``; return the exit status (0 done, 1 a run failed, :data:`INTERRUPTED`).

    Raises
    ------
    ValueError
        Naming the output folder when it cannot be created or written.
    """
    make_folder(config.out, "output folder")
    log(f"{config.title}" + (f" ({config.reference})" if config.reference else ""))
    p = config.problem
    log(f"problem: n = {p.n}, d = {p.d}, m = {config.inits.shape[1]}, loss {p.loss} ({p.reduction}), "
        f"{p.activation}, bias {p.bias}, train_outer {p.train_outer}; {len(config.inits)} initialisation(s)")
    tick = time.perf_counter()
    if config.is_ensemble:
        written, status = _ensembles(config, progress, log)
    else:
        written, status = _single(config, progress, log)
    record = {"config": config.name, "title": config.title, "reference": config.reference,
              "written": [str(w) for w in written], "bytes": {str(w): _size(w) for w in written},
              "output": {"table": config.table, "save": config.save,
                         "records": _records(config) if config.save == "compact" and not config.is_ensemble else None},
              "status": status, "seconds": time.perf_counter() - tick}
    from flowlib.ensemble_result import versions

    record["versions"] = versions()
    (config.out / "run.json").write_text(json.dumps(record, indent=1))
    chunks = [config.out / f"{method}-ensemble" for method in ("flow", "gd")] if config.is_ensemble else []
    log(written_line(written, config.out, record["seconds"], [c for c in chunks if c.is_dir()]))
    return status


def _size(path) -> int:
    """Bytes of a file, or of every file under a folder."""
    path = Path(path)
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size if path.is_file() else 0


def human_size(size: int) -> str:
    """``size`` bytes as ``"512 B"``, ``"22 kB"`` or ``"1.2 MB"`` (decimal units).

    Examples
    --------
    >>> human_size(512), human_size(22_400), human_size(1_234_567)
    ('512 B', '22 kB', '1.2 MB')
    """
    if size < 1000:
        return f"{size} B"
    if size < 999_500:
        return f"{size / 1e3:.0f} kB"
    return f"{size / 1e6:.1f} MB" if size < 999_950_000 else f"{size / 1e9:.1f} GB"


def written_line(written: list, out: Path, seconds: float, chunk_folders=()) -> str:
    """One line: each result file with its size, the plots counted with their total size, ``run.json``, the
    resumable chunk folders of ensembles, the folder and the time."""
    results = [Path(w) for w in written if Path(w).suffix != ".png"]
    plots = [Path(w) for w in written if Path(w).suffix == ".png"]
    parts = [f"{p.name} ({human_size(_size(p))})" for p in results]
    if plots:
        parts.append(f"{len(plots)} plot{'s' if len(plots) != 1 else ''} ({human_size(sum(map(_size, plots)))})")
    if chunk_folders:
        parts.append(f"{len(chunk_folders)} chunk folder{'s' if len(chunk_folders) != 1 else ''} for resuming "
                     f"({human_size(sum(map(_size, chunk_folders)))})")
    listed = ", ".join(parts) + " and run.json" if parts else "run.json"
    return f"wrote {listed} to {out}{os.sep} in {seconds:.1f} s"


def capped(text: str, rows: int | None, header: int = 0) -> str:
    """``text`` with at most ``rows`` lines after its first ``header`` ones, then ``... N more`` (all for None).

    Examples
    --------
    >>> print(capped("head\\n1\\n2\\n3", 2, header=1))
    head
    1
    2
    ... 1 more (output.table = "full" or --table full prints every row)
    """
    lines = text.splitlines()
    if rows is None or len(lines) <= header + rows:
        return text
    return "\n".join(lines[: header + rows] + [f"... {len(lines) - header - rows} more (output.table = \"full\" "
                                                f"or --table full prints every row)"])


def default_records(m: int, d: int) -> int:
    """States a compact save keeps by default: :data:`MAX_RECORDS`, fewer when ``m (d + 2)`` numbers per state
    would exceed :data:`MAX_STATE_NUMBERS` in all (at least 2: the first and the last).

    Examples
    --------
    >>> default_records(m=20, d=2), default_records(m=1000, d=30), default_records(m=10**5, d=100)
    (1000, 4, 2)
    """
    return max(2, min(MAX_RECORDS, MAX_STATE_NUMBERS // (m * (d + 2))))


def _records(config: RunConfig) -> int:
    """``output.records``, or :func:`default_records` for the configuration's network."""
    return config.records or default_records(config.inits.shape[1], config.problem.d)


def _kept(n: int, records: int) -> np.ndarray:
    """At most ``records`` indices into ``range(n)``, evenly spaced, the first and the last included."""
    if n <= records:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, records)).astype(np.int64))


def compact_flow(res, records: int):
    """``res`` without its dense output and with at most ``records`` step boundaries (evenly spaced in index, the
    first and last kept); ``energy`` is summed over the merged steps, so the energy identity still holds. Events,
    ``t_eval`` states, the status and the diagnostics are kept; ``options["compact"]`` records what was dropped.
    Returns ``(result, note)``, the note ``""`` when nothing was dropped."""
    n = len(res.t)
    keep = _kept(n, records)
    if len(keep) == n and res.coefficients is None:
        return res, ""
    energy = np.add.reduceat(res.energy, keep[:-1]) if len(keep) > 1 else res.energy[:0]
    pick = {name: getattr(res, name)[keep] for name in ("t", "states", "loss") + (
        ("s",) if res.s is not None else ()) + (("log_loss",) if res.log_loss is not None else ())}
    dropped = {"states_kept": int(len(keep)), "states_of": int(n), "dense_output_dropped": res.coefficients is not None}
    options = dict(res.options, compact=dropped)
    kept = f"{len(keep)} of {n} states" if len(keep) < n else f"all {n} states"
    note = ("no dense output, " if res.coefficients is not None else "") + kept
    return dataclasses.replace(res, coefficients=None, energy=energy, options=options, **pick), note


def compact_descent(res, records: int):
    """``res`` with at most ``records`` recorded iterates (evenly spaced in index, the first and last kept); the
    flips are kept. Returns ``(result, note)``, the note ``""`` when nothing was dropped."""
    n = len(res.iterations)
    keep = _kept(n, records)
    if len(keep) == n:
        return res, ""
    options = dict(res.options, compact={"states_kept": int(len(keep)), "states_of": int(n)})
    return (dataclasses.replace(res, iterations=res.iterations[keep], states=res.states[keep], loss=res.loss[keep],
                                options=options), f"{len(keep)} of {n} recorded iterates")


def _ensembles(config: RunConfig, progress: bool, log) -> tuple[list, int]:
    import flowlib as fl
    from flowlib import plots

    until = fl.Until(**config.until) if config.until else None
    written, results = [], {}
    for method, options in (("flow", config.flow), ("gd", config.gd)):
        if options is None:
            continue
        ens = fl.ensemble(config.problem, config.inits, method, until=until, out=config.out / f"{method}-ensemble",
                          progress=progress, **options)
        log(ens.summary())
        log(loss_quantiles(ens))
        if config.table == "full":
            log(member_table(ens))
        if not ens.complete:
            log(f"interrupted: {int(ens.done.sum())} of {len(ens)} members done and kept in "
                f"{config.out / (method + '-ensemble')}/; give the same command again to resume")
            return written, INTERRUPTED
        written.append(ens.save(config.out / f"{method}-ensemble.npz"))
        results[method] = ens
        if "ensemble" in config.plots:
            written.append(_save(plots.ensemble_summary(ens), config.out / f"{method}-ensemble.png"))
    if len(results) == 2 and "ensemble" in config.plots:
        written.append(_save(plots.ensemble_times(results["gd"], results["flow"]),
                             config.out / "ensemble-times.png"))
    return written, 0


def loss_quantiles(ens) -> str:
    """One line: the quantiles :data:`LOSS_QUANTILES` of the computed members' final loss."""
    done = ens.done & np.isfinite(ens.loss)
    if not done.any():
        return "final loss: no computed member with a finite loss"
    values = np.quantile(ens.loss[done], LOSS_QUANTILES)
    names = {0.0: "min", 1.0: "max"}
    shown = ", ".join(f"{names.get(q, f'{q:.0%}')} {v:.6g}" for q, v in zip(LOSS_QUANTILES, values))
    return f"final loss over {int(done.sum())} members: {shown}"


def member_table(ens) -> str:
    """One line per member: index, status, time reached, final loss, steps (iterations) and events (flips)."""
    gd = ens.method == "gd"
    lines = [f"{'member':>8} {'status':<26} {'t':>14} {'loss':>14} {'iterations' if gd else 'steps':>10} "
             f"{'flips' if gd else 'events':>8}"]
    for r, (status, t, loss, steps, events) in enumerate(zip(ens.status, ens.t, ens.loss, ens.steps, ens.events)):
        lines.append(f"{r:8d} {status:<26} {t:14.6g} {loss:14.6g} {steps:10d} {events:8d}")
    return "\n".join(lines)



def _single(config: RunConfig, progress: bool, log) -> tuple[list, int]:
    import flowlib as fl

    written, flow, gd, status, notes = [], None, None, 0, []
    records = _records(config)
    if config.flow is not None:
        flow = fl.gradient_flow(config.problem, config.params0, progress=progress, **config.flow)
        log("flow: " + flow.summary().replace("\n", "\n      "))
        saved, note = compact_flow(flow, records) if config.save == "compact" else (flow, "")
        written.append(saved.save(config.out / "flow.npz"))
        notes += [f"flow.npz {note}"] if note else []
        status = _status(flow.status, status)
    if config.gd is not None:
        options = dict(config.gd)
        lr, steps = options.pop("lr", None), options.pop("steps", None)
        gd = fl.gradient_descent(config.problem, config.params0, lr, steps, progress=progress, **options)
        log("gd:   " + gd.summary().replace("\n", "\n      "))
        saved, note = compact_descent(gd, records) if config.save == "compact" else (gd, "")
        written.append(saved.save(config.out / "gd.npz"))
        notes += [f"gd.npz {note}"] if note else []
        status = _status(gd.status, status)
    written += _single_plots(config, flow, gd, log)
    if notes:
        log(f"saved compact: {'; '.join(notes)} (output.save = \"full\" or --save full keeps everything)")
    return written, status


def _status(run_status, current: int) -> int:
    if run_status == "interrupted":
        return INTERRUPTED
    return current if run_status == "success" else max(current, 1)


def _single_plots(config: RunConfig, flow, gd, log) -> list:
    import flowlib as fl
    from flowlib import plots

    out, wanted, d = config.out, config.plots, config.problem.d
    written = []
    if "loss" in wanted:
        fig = None
        for result in (flow, gd):
            if result is not None:
                fig = plots.loss(result, ax=None if fig is None else fig.axes[0])
        written.append(_save(fig, out / "loss.png"))
    if flow is not None and "events" in wanted:
        written.append(_save(plots.event_raster(flow), out / "events.png"))
    main = flow if flow is not None else gd
    if "directions" in wanted and (d == 2 or (d == 1 and config.problem.bias)):
        written.append(_save(plots.neuron_directions(main), out / "directions.png"))
    if "boundary" in wanted and d in (1, 2):
        written.append(_save(plots.decision_boundary(main), out / "boundary.png"))
    if "gd_vs_flow" in wanted and flow is not None and gd is not None:
        if flow.coefficients is None:
            log("gd_vs_flow: needs the flow's dense output (flow.dense_output = true); skipped")
        else:
            comparison = fl.compare(flow, gd)
            log(capped(comparison.table(), TABLE_ROWS if config.table == "short" else None, header=3))
            written.append(_save(plots.gd_vs_flow(comparison), out / "gd_vs_flow.png"))
    return written


def make_folder(target, name: str) -> Path:
    """Create the folder ``target`` (with its parents) and return it as a path.

    Raises
    ------
    ValueError
        Naming ``name`` (e.g. ``--out``) and ``target`` when it is a file, lies below one, or cannot be created or
        written.
    """
    from flowlib.config import check_folder

    target = Path(target)
    try:
        check_folder(target)
        target.mkdir(parents=True, exist_ok=True)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    except OSError as exc:
        raise ValueError(f"{name}: cannot create the folder {str(target)!r} ({exc.strerror})") from None
    return target


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def describe(names: dict) -> str:
    """The configurations ``names`` (name -> path of its TOML file): each name with its title, and under it the
    file's absolute path (to read it, or to copy it as the start of your own)."""
    import tomllib

    lines = ["configurations (flowlib run NAME runs one; copy its file to start your own):"]
    for name, path in sorted(names.items()):
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        lines += [f"{name:<28} {raw.get('title', '')}", f"{'':<28} {Path(path).resolve()}"]
    return "\n".join(lines)

