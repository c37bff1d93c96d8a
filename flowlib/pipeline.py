"""``flowlib run CONFIG``: execute a run configuration (:mod:`flowlib.config`), save the results, draw the plots.

A single initialisation runs :func:`flowlib.gradient_flow` and/or :func:`flowlib.gradient_descent` (saved as
``flow.npz`` / ``gd.npz``; with both, :func:`flowlib.compare` as well). Several run :func:`flowlib.ensemble` per
method, streaming to ``<out>/<method>-ensemble/`` so that an interrupted run resumes when the same command is given
again, and save ``<method>-ensemble.npz``. ``run.json`` records the configuration, the versions and what was
written.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from flowlib.config import RunConfig

#: Exit status of an interrupted run (as a shell reports Ctrl-C).
INTERRUPTED = 130


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
              "written": [str(w) for w in written], "status": status, "seconds": time.perf_counter() - tick}
    from flowlib.ensemble_result import versions

    record["versions"] = versions()
    (config.out / "run.json").write_text(json.dumps(record, indent=1))
    log(f"wrote {len(written)} files to {config.out}/ ({record['seconds']:.1f} s)")
    return status


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



def _single(config: RunConfig, progress: bool, log) -> tuple[list, int]:
    import flowlib as fl

    written, flow, gd, status = [], None, None, 0
    if config.flow is not None:
        flow = fl.gradient_flow(config.problem, config.params0, progress=progress, **config.flow)
        log("flow: " + flow.summary().replace("\n", "\n      "))
        written.append(flow.save(config.out / "flow.npz"))
        status = _status(flow.status, status)
    if config.gd is not None:
        options = dict(config.gd)
        lr, steps = options.pop("lr", None), options.pop("steps", None)
        gd = fl.gradient_descent(config.problem, config.params0, lr, steps, progress=progress, **options)
        log("gd:   " + gd.summary().replace("\n", "\n      "))
        written.append(gd.save(config.out / "gd.npz"))
        status = _status(gd.status, status)
    written += _single_plots(config, flow, gd, log)
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
            log(comparison.table())
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

