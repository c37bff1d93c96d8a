"""Run configurations: a TOML file that names a problem, an initialisation, the flow and/or GD, and the outputs.

Schema (every key optional unless said; unknown keys are an error)::

    title = "..."                      # shown in the log
    reference = "paper, section"       # where the experiment comes from

    [problem]                          # exactly one of: example / X and y / file
    example = "gd_rate_network"        # a function of flowlib.examples returning (Problem, Params) ...
    args = { w1 = 1.0, b1 = 0.0, w2 = -1.0, b2 = 0.0 }   # ... and its keyword arguments
    X = [[1.0, 0.2], [-0.9, -0.1]]     # inline data (with y), or
    y = [1.0, -1.0]
    file = "data.csv"                  # a CSV (columns x_1..x_d, y; '#' comments) or .npz (arrays X, y),
                                       # relative to the config file
    bias = false                       # required with X or file (no silent default), as is
    train_outer = true
    loss = "logistic"                  # and reduction, activation, leak, weight_decay: flowlib.Problem's

    [init]                             # omitted: the example's parameters
    W = [[0.3, -0.2]]                  # explicit parameters (with b, a), or random ones:
    scheme = "he"                      # "he", "normal", "balanced" (flowlib.random_inits)
    norm = "gaussian"                  # balanced only: "gaussian" |w_j| random, E|w_j|^2 = scale^2 (default),
                                       # or "sphere" |(w_j, b_j)| = scale exactly (examples.balanced_init's law)
    m = 2
    count = 10000                      # more than 1: an ensemble (flowlib.ensemble)
    seed = 6
    scale = 1.0
    a = [1.0, -1.0]                    # fixed outer weights
    bias = 0.0                         # or "random"

    [flow]                             # the exact flow: t_end or log_t_end, and gradient_flow's options
    [gd]                               # gradient descent: lr, steps, and gradient_descent's options
    [until]                            # ensembles: flowlib.Until(loss_below, linear, offset, tol, deadline)
    [output]
    dir = "runs/name"                  # default flowlib-runs/<config name>; --out overrides
    plots = ["loss", "events"]         # default: every plot that applies; one name alone is a list of one
    table = "short"                    # "short" (default): a summary; a table (GD against the flow's events)
                                       # stops after 20 rows with "... N more"; an ensemble prints counts per
                                       # status and quantiles of the final loss. "full": every row, and one
                                       # line per ensemble member. --table overrides
    save = "compact"                   # "compact" (default): flow.npz / gd.npz without the dense output (Taylor
                                       # coefficients) and with at most `records` states (step boundaries or
                                       # recorded iterates, evenly spaced in index, first and last kept; the
                                       # events, flips and t_eval states in full; energy summed over the
                                       # merged steps). "full": everything the run kept. --save overrides.
                                       # Ensembles save one row per member either way
    records = 1000                     # compact single runs only, >= 2; default 1000, fewer for a large network
                                       # so that the states hold at most 2**17 numbers (1 MiB of float64)

    [quick]                            # overrides for ``flowlib run --quick``, e.g.
    init = { count = 400 }

Every value is type-checked (:data:`SCHEMA`), and every key is either used or refused: an ensemble runs in
float64 and keeps only each member's end state, so ``dps``, ``record_every``, ``gd.max_events`` and
``dense_output`` are refused there. A key that was renamed (:data:`RENAMED`) is refused with its new name. Every
error is a ``ValueError`` that names the file and the field.

The last line ``flowlib run`` prints says what it wrote and how large, e.g. ``wrote flow.npz (612 kB), gd.npz
(22 kB), 6 plots (360 kB) and run.json to runs/name/ in 4.1 s``; a compact save says first what it left out.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import os
import sys
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from flowlib import examples
from flowlib.problem import ACTIVATIONS, LOSSES, REDUCTIONS, Params, Problem
from flowlib.kinds import FLAG, PATH, TABLE, TEXT, Kind, array, choice, integer, is_real, real
from flowlib.loading import read_arrays
from flowlib.running import MAX_DPS

PLOTS = ("loss", "events", "directions", "boundary", "gd_vs_flow", "ensemble")
#: Values of ``output.table`` (the printed output) and ``output.save`` (the saved single-run results).
TABLES = ("short", "full")
SAVES = ("compact", "full")
#: Numbers an initialisation may hold at most (count x m x (d + 2); 8 GiB of float64).
MAX_INIT_NUMBERS = 2**30


_POSITIVE = real(0, above=True)
_SEED = integer(0)
_DPS = integer(16, MAX_DPS)
_SELECTION = real(0, 1)
_BUDGET = integer(1)
_SIZE = integer(1, 10**5)  # sizes of an example's data and network

#: Functions of :mod:`flowlib.examples` a config may name (each returns ``(Problem, Params)``), with the type of
#: each of their arguments (``problem.args``).
EXAMPLE_ARGS = {
    "gd_rate_network": {"w1": real(), "b1": real(), "w2": real(), "b2": real()},
    "three_points": {"m": _SIZE, "lam": _POSITIVE, "seed": _SEED},
    "sliding_two_points": {"scale": _POSITIVE},
    "linear_teachers_par": {"k": _SIZE, "leak": real(0, 1, above=True), "scale": _POSITIVE, "data_seed": _SEED,
                            "init_seed": _SEED, "n_per_class": _SIZE},
    "convex_geometry": {"case": choice(*examples.CONVEX_GEOMETRY_DATA), "m": _SIZE, "scale": _POSITIVE,
                        "seed": _SEED},
    "os_logistic": {"m": _SIZE, "n": integer(2, 10**5), "d": integer(2, 100), "scale": _POSITIVE, "seed": _SEED},
    "two_crossings": {},
}
EXAMPLE_FUNCTIONS = tuple(EXAMPLE_ARGS)
#: Type of every key of every section ("" is the top level); a key not listed is an error.
SCHEMA = {
    "": {"title": TEXT, "reference": TEXT, "problem": TABLE, "init": TABLE, "flow": TABLE, "gd": TABLE,
         "until": TABLE, "output": TABLE, "quick": TABLE},
    "problem": {"example": choice(*EXAMPLE_FUNCTIONS), "args": TABLE, "X": array(2), "y": array(1), "file": PATH,
                "loss": choice(*LOSSES), "reduction": choice(*REDUCTIONS), "activation": choice(*ACTIVATIONS),
                "leak": real(0, 1), "bias": FLAG, "train_outer": FLAG, "weight_decay": real(0)},
    "init": {"W": array(2), "b": array(1), "a": array(1), "scheme": choice("he", "normal", "balanced"),
             "norm": choice("gaussian", "sphere"), "m": integer(1), "count": integer(1), "seed": _SEED,
             "scale": _POSITIVE,
             "bias": Kind('a finite real number or "random"', lambda v: is_real(v) or v == "random")},
    "flow": {"t_end": real(0), "log_t_end": real(), "clock": choice("auto", "t", "log"),
             "rtol": Kind("a positive real number (or, with dps, a decimal string)",
                          lambda v: isinstance(v, str) or (is_real(v) and v > 0)),
             "dps": _DPS, "solution": choice("filippov", "caratheodory"), "selection": _SELECTION,
             "tie": choice("stay", "leave"), "max_steps": _BUDGET, "max_events": _BUDGET, "dense_output": FLAG},
    "gd": {"lr": _POSITIVE, "steps": integer(0), "dps": _DPS, "record_every": _BUDGET, "selection": _SELECTION,
           "max_events": _BUDGET},
    "until": {"loss_below": _POSITIVE, "linear": array(2), "offset": real(), "tol": real(0), "deadline": real(0)},
    "output": {"dir": PATH, "plots": Kind(f"a list of plot names from {list(PLOTS)} (or one name)",
                                          lambda v: isinstance(v, str) or (isinstance(v, list) and
                                                                            all(isinstance(p, str) for p in v))),
               "table": choice(*TABLES), "save": choice(*SAVES), "records": integer(2)},
}
#: Keys an ensemble (``init.count > 1``) cannot honour: it runs in float64 and keeps each member's end state only.
SINGLE_RUN_ONLY = {"flow": ("dps", "dense_output"), "gd": ("dps", "record_every", "max_events")}
#: Keys of earlier versions, ``(section, old name) -> new name``: a file that still uses one is refused with a
#: message that names the new key (the runners took the same rename: one name for event budgets).
RENAMED = {("gd", "max_flips"): "max_events"}


@dataclass
class RunConfig:
    """A checked configuration: the problem and initialisation built, the run options kept as dictionaries."""

    name: str
    title: str
    reference: str
    problem: Problem
    inits: np.ndarray  # (R, m, d + 2)
    flow: dict | None
    gd: dict | None
    until: dict | None
    out: Path
    plots: tuple
    table: str = "short"
    save: str = "compact"
    records: int | None = None  # compact saves: the most states kept (None: flowlib.pipeline's size-aware default)

    @property
    def is_ensemble(self) -> bool:
        return len(self.inits) > 1

    @property
    def params0(self) -> Params:
        return Params.unpacked(self.inits[0], self.problem.bias)


def shipped() -> dict:
    """Name -> path of the configurations shipped with flowlib (one or more per source paper)."""
    folder = resources.files("flowlib") / "configs"
    return {Path(str(p)).stem: Path(str(p)) for p in folder.iterdir() if str(p).endswith(".toml")}


def find(config) -> Path:
    """``config`` as a path: a TOML file, or the name of a shipped configuration."""
    path = Path(config)
    if path.is_file():
        return path
    known = shipped()
    if str(config) in known:
        return known[str(config)]
    raise ValueError(f"config {str(config)!r} is neither a file nor a shipped configuration "
                     f"({', '.join(sorted(known))})")


def load(config, *, quick: bool = False, out=None, table: str | None = None, save: str | None = None) -> RunConfig:
    """Read and check a configuration (a path or a shipped name); ``quick`` applies its ``[quick]`` overrides.

    Every key is checked against :data:`SCHEMA` (its type and range), then the problem and the initialisation are
    built and the run options checked against them; nothing is run and no folder is created.

    Parameters
    ----------
    config : str or path
        A TOML file, or the name of a shipped configuration (:func:`shipped`).
    quick : bool
        Apply the ``[quick]`` overrides (an error when the file has none).
    out : str or path, optional
        Output folder, instead of ``output.dir``.
    table, save : str, optional
        Instead of ``output.table`` (``"short"`` or ``"full"``) and ``output.save`` (``"compact"`` or ``"full"``).

    Raises
    ------
    ValueError
        Naming the file and the offending key, for an invalid configuration.
    """
    path = find(config)
    raw = _read_toml(path)
    check_document(raw, path)
    if "quick" in raw:
        check_document(raw["quick"], path, prefix="quick.")
    if quick:
        if "quick" not in raw:
            raise ValueError(f"config {path}: --quick given, but the file has no [quick] section")
        raw = _merge(raw, raw["quick"])
    if "flow" not in raw and "gd" not in raw:
        raise ValueError(f"config {path}: give a [flow] or a [gd] section (or both)")
    problem, example_params = _problem(raw.get("problem", {}), path)
    inits = _inits(raw.get("init"), problem, example_params, path)
    ensemble = len(inits) > 1
    output = raw.get("output", {})
    table, save, records = _output_options(output, table, save, ensemble, path)
    return RunConfig(name=path.stem, title=raw.get("title", path.stem), reference=raw.get("reference", ""),
                     problem=problem, inits=inits, flow=_flow(raw.get("flow"), problem, ensemble, path),
                     gd=_gd(raw.get("gd"), problem, ensemble, path), until=_until(raw.get("until"), inits, path),
                     out=_target(out, output, path), plots=_plots(output, path), table=table, save=save,
                     records=records)


def _read_text(path: Path, label: str) -> str:
    """The UTF-8 text of ``path``; ``ValueError`` starting with ``label`` when it cannot be read or decoded."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{label}: not a UTF-8 text file") from None
    except OSError as exc:
        raise ValueError(f"{label}: cannot be read ({exc.strerror})") from None


def _read_toml(path: Path) -> dict:
    text = _read_text(path, f"config {path}")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"config {path}: not valid TOML ({exc})") from None


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_value(value, kind: Kind, field: str, path: Path) -> None:
    if not kind.accepts(value):
        raise ValueError(f"config {path}: {field} must be {kind.want}, got {_show(value)}")


def check_document(raw: dict, path: Path, prefix: str = "") -> None:
    """Check every key and value of a parsed configuration (or, with ``prefix="quick."``, of its ``[quick]``
    overrides) against :data:`SCHEMA`.

    Raises
    ------
    ValueError
        Naming the file and the key: an unknown key, or a value of the wrong type or out of range.
    """
    top = {k: v for k, v in SCHEMA[""].items() if not (prefix and k == "quick")}
    for key, value in raw.items():
        if key not in top:
            raise ValueError(f"config {path}: unknown key {prefix + key!r} (known: {sorted(top)})")
        _check_value(value, top[key], prefix + key, path)
        fields = SCHEMA.get(key)
        if fields is None:
            continue
        for name, item in value.items():
            field = f"{prefix}{key}.{name}"
            if (key, name) in RENAMED:
                raise ValueError(f"config {path}: {field} was renamed {key}.{RENAMED[key, name]} (one name for "
                                 f"event budgets, as in gradient_flow and gradient_descent); rename the key")
            if name not in fields:
                raise ValueError(f"config {path}: unknown key {field!r} (known: {sorted(fields)})")
            _check_value(item, fields[name], field, path)


@contextlib.contextmanager
def _naming(path: Path, field: str):
    """Prefix the file and ``field`` to a ``ValueError`` raised by the library inside."""
    try:
        yield
    except ValueError as exc:
        raise ValueError(f"config {path}: {field}: {exc}") from None


def _merge(base: dict, overrides: dict) -> dict:
    merged = copy.deepcopy({k: v for k, v in base.items() if k != "quick"})
    for section, values in overrides.items():
        if isinstance(values, dict) and isinstance(merged.get(section), dict):
            merged[section].update(values)
        else:
            merged[section] = values
    return merged


def _problem(spec: dict, path: Path) -> tuple[Problem, Params | None]:
    sources = [key for key in ("example", "X", "file") if key in spec]
    if len(sources) != 1:
        raise ValueError(f"config {path}: problem needs exactly one of example, X (with y), file; got {sources}")
    options = {k: spec[k] for k in ("loss", "reduction", "activation", "leak", "bias", "train_outer", "weight_decay")
               if k in spec}
    if "example" in spec:
        if options:
            raise ValueError(f"config {path}: problem.{sorted(options)[0]} cannot be set with an example")
        if "y" in spec:
            raise ValueError(f"config {path}: problem.y goes with problem.X, not with an example")
        return _example(spec["example"], spec.get("args", {}), path)
    if "args" in spec:
        raise ValueError(f"config {path}: problem.args is for problem.example")
    if "X" in spec:
        if "y" not in spec:
            raise ValueError(f"config {path}: problem.X needs problem.y")
        X, y = spec["X"], spec["y"]
    else:
        if "y" in spec:
            raise ValueError(f"config {path}: problem.y goes with problem.X, not with problem.file")
        X, y = _read_data(spec["file"], path)
    with _naming(path, "problem"):
        return Problem(X=X, y=y, **options), None


def _example(name: str, args: dict, path: Path) -> tuple[Problem, Params]:
    kinds = EXAMPLE_ARGS[name]
    for key, value in args.items():
        if key not in kinds:
            raise ValueError(f"config {path}: unknown key 'problem.args.{key}' (examples.{name} takes "
                             f"{sorted(kinds)})")
        _check_value(value, kinds[key], f"problem.args.{key}", path)
    function = getattr(examples, name)
    missing = [p.name for p in inspect.signature(function).parameters.values()
               if p.default is p.empty and p.name not in args]
    if missing:
        raise ValueError(f"config {path}: problem.args needs {missing} for examples.{name}")
    with _naming(path, "problem.args"):
        return function(**args)


def _read_data(name: str, path: Path) -> tuple[np.ndarray, np.ndarray]:
    file = path.parent / name
    label = f"config {path}: problem.file {name!r}"
    try:
        is_dir, is_file = file.is_dir(), file.is_file()
    except OSError as exc:
        raise ValueError(f"{label} cannot be read ({exc.strerror})") from None
    if is_dir:
        raise ValueError(f"{label} is a directory, not a data file")
    if not is_file:
        raise ValueError(f"{label} does not exist")
    if file.suffix == ".npz":
        data = read_arrays(file, label)
        if "X" not in data or "y" not in data:
            raise ValueError(f"{label} must hold arrays X and y")
        return data["X"], data["y"]
    table = read_csv(file, label)
    if table.shape[1] < 2:
        raise ValueError(f"{label} needs columns x_1..x_d, y")
    return table[:, :-1], table[:, -1]


def read_csv(file: Path, label: str) -> np.ndarray:
    """The numbers of a comma-separated file (``#`` starts a comment; blank lines skipped) as a 2-D array.

    Raises
    ------
    ValueError
        Starting with ``label``: the file is not UTF-8 text, holds no rows, has rows of different lengths, or a
        cell that is not a finite number (named by line and column; the cell itself is not echoed).
    """
    text = _read_text(file, label)
    rows, width = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        cells = line.split("#", 1)[0].strip()
        if not cells:
            continue
        cells = cells.split(",")
        if width is None:
            width = len(cells)
        elif len(cells) != width:
            raise ValueError(f"{label}: line {number} has {len(cells)} columns, the first data line has {width}")
        rows.append([_cell(cell, label, number, column) for column, cell in enumerate(cells, start=1)])
    if not rows:
        raise ValueError(f"{label}: no data rows")
    return np.array(rows, dtype=np.float64)


def _cell(cell: str, label: str, line: int, column: int) -> float:
    try:
        value = float(cell)
    except ValueError:
        value = None
    if value is None or not np.isfinite(value):
        raise ValueError(f"{label}: line {line}, column {column} is not a finite number")
    return value


def _inits(spec, problem: Problem, example_params: Params | None, path: Path) -> np.ndarray:
    from flowlib.ensemble import random_inits

    if spec is None:
        if example_params is None:
            raise ValueError(f"config {path}: init is needed when the problem is not an example")
        return example_params.packed()[None]
    if "W" in spec:
        extra = sorted(set(spec) - {"W", "b", "a"})
        if extra:
            raise ValueError(f"config {path}: init.{extra[0]} cannot be combined with explicit init.W")
        if "a" not in spec:
            raise ValueError(f"config {path}: init.W needs init.a (the outer weights)")
        with _naming(path, "init"):
            params = Params(W=spec["W"], b=spec.get("b"), a=spec["a"])
            params.check_against(problem)
        return params.packed()[None]
    if "m" not in spec:
        raise ValueError(f"config {path}: init needs W (explicit parameters) or m (random ones)")
    if "b" in spec:
        raise ValueError(f"config {path}: init.b goes with explicit init.W (random biases: init.bias)")
    bias = spec.get("bias", 0.0)
    if not problem.bias and bias != 0.0:
        raise ValueError(f"config {path}: init.bias = {bias!r} needs a problem with a bias (problem.bias = true)")
    m, count = spec["m"], spec.get("count", 1)
    if count * m * (problem.d + 2) > MAX_INIT_NUMBERS:
        raise ValueError(f"config {path}: init.count x init.m x (d + 2) = {count * m * (problem.d + 2)} numbers; "
                         f"at most {MAX_INIT_NUMBERS}")
    with _naming(path, "init"):
        return random_inits(problem, m, count, scheme=spec.get("scheme", "he"), scale=spec.get("scale", 1.0),
                            a=spec.get("a"), bias=None if bias == "random" else bias, seed=spec.get("seed", 0),
                            norm=spec.get("norm"))


def _refuse_single_run_keys(spec: dict, section: str, ensemble: bool, path: Path) -> None:
    wrong = [key for key in SINGLE_RUN_ONLY[section] if key in spec] if ensemble else []
    if wrong:
        raise ValueError(f"config {path}: {section}.{wrong[0]} does not apply to an ensemble (init.count > 1): "
                         "ensembles run in float64 and keep only each member's end state; remove it")


def _flow(spec: dict | None, problem: Problem, ensemble: bool, path: Path) -> dict | None:
    from flowlib.flow import check_rtol, check_solution, resolve_horizon
    from flowlib.running import check_budget

    if spec is None:
        return None
    _refuse_single_run_keys(spec, "flow", ensemble, path)
    with _naming(path, "flow"):
        resolve_horizon(spec.get("t_end"), spec.get("log_t_end"), spec.get("clock", "auto"))
        check_solution(problem, spec.get("solution", "filippov"), spec.get("selection"), spec.get("tie", "stay"))
        if "dps" not in spec:
            check_rtol(spec.get("rtol"))
        for name in ("max_steps", "max_events"):
            check_budget(spec.get(name, 1), name)
    return dict(spec)


def _gd(spec: dict | None, problem: Problem, ensemble: bool, path: Path) -> dict | None:
    from flowlib.flow import check_solution

    if spec is None:
        return None
    _refuse_single_run_keys(spec, "gd", ensemble, path)
    missing = [key for key in ("lr", "steps") if key not in spec]
    if missing:
        raise ValueError(f"config {path}: gd needs lr and steps (missing gd.{missing[0]})")
    with _naming(path, "gd"):
        check_solution(problem, "filippov", spec.get("selection"), "stay")
    return dict(spec)


def _until(spec: dict | None, inits: np.ndarray, path: Path) -> dict | None:
    from flowlib.until import Until

    if spec is None:
        return None
    if len(inits) == 1:
        raise ValueError(f"config {path}: until is for ensembles (init.count > 1)")
    with _naming(path, "until"):
        Until(**spec).kernel_arguments(inits.shape[1:])
    return dict(spec)


def _plots(output: dict, path: Path) -> tuple:
    plots = output.get("plots", PLOTS)
    plots = (plots,) if isinstance(plots, str) else tuple(plots)
    unknown = sorted(set(plots) - set(PLOTS))
    if unknown:
        raise ValueError(f"config {path}: output.plots has unknown plots {unknown}; known: {list(PLOTS)}")
    return plots


def _output_options(output: dict, table, save, ensemble: bool, path: Path) -> tuple[str, str, int | None]:
    """``output.table``, ``output.save`` and ``output.records``, with the command line's ``--table`` / ``--save``
    (``table`` and ``save``, when not None) taking precedence."""
    for value, flag, choices in ((table, "--table", TABLES), (save, "--save", SAVES)):
        if value is not None and value not in choices:
            raise ValueError(f"config {path}: {flag} must be one of {list(choices)}, got {_show(value)}")
    records = output.get("records")
    if records is not None and ensemble:
        raise ValueError(f"config {path}: output.records applies to a single run; an ensemble (init.count > 1) "
                         "saves one row per member; remove it")
    if records is not None and output.get("save", "compact") != "compact":
        raise ValueError(f"config {path}: output.records applies to output.save = 'compact', not "
                         f"{_show(output['save'])}; remove one of them")
    table = output.get("table", "short") if table is None else table
    save = output.get("save", "compact") if save is None else save
    return table, save, records if save == "compact" else None


def _target(out, output: dict, path: Path) -> Path:
    if out is None:
        target, field = Path(output.get("dir", Path("flowlib-runs") / path.stem)), "output.dir"
    elif isinstance(out, (str, os.PathLike)) and str(out).strip() and "\0" not in str(out):
        target, field = Path(out), "--out"
    else:
        raise ValueError(f"config {path}: out must be a non-empty path, got {_show(out)}")
    with _naming(path, field):
        check_folder(target)
    return target


def check_folder(target: Path) -> None:
    """Check, without creating anything, that ``target`` is a writable folder or can be made one.

    Raises
    ------
    ValueError
        Naming ``target`` when it (or the nearest existing folder above it) is a file or not writable.
    """
    probe = Path(target)
    try:
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        is_dir = probe.is_dir()
    except OSError as exc:
        raise ValueError(f"{str(target)!r} cannot be used ({exc.strerror})") from None
    where = "" if probe == Path(target) else f" ({str(probe)!r} above it)"
    if not is_dir:
        raise ValueError(f"{str(target)!r}{where} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"{str(target)!r}{where} is not writable")
