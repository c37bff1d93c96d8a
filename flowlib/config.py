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
    loss = "logistic"                  # and reduction, activation, leak, bias, train_outer: flowlib.Problem's

    [init]                             # omitted: the example's parameters
    W = [[0.3, -0.2]]                  # explicit parameters (with b, a), or random ones:
    scheme = "he"                      # "he", "normal", "balanced" (flowlib.random_inits)
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
    plots = ["loss", "events"]         # default: every plot that applies

    [quick]                            # overrides for ``flowlib run --quick``, e.g.
    init = { count = 400 }
"""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from flowlib import examples
from flowlib.problem import Params, Problem

#: Functions of :mod:`flowlib.examples` a config may name (each returns ``(Problem, Params)``).
EXAMPLE_FUNCTIONS = ("gd_rate_network", "three_points", "sliding_two_points", "linear_teachers_par",
                     "convex_geometry", "os_logistic", "two_crossings")
PLOTS = ("loss", "events", "directions", "boundary", "gd_vs_flow", "ensemble")
_KEYS = {
    "": {"title", "reference", "problem", "init", "flow", "gd", "until", "output", "quick"},
    "problem": {"example", "args", "X", "y", "file", "loss", "reduction", "activation", "leak", "bias",
                "train_outer"},
    "init": {"W", "b", "a", "scheme", "m", "count", "seed", "scale", "bias"},
    "flow": {"t_end", "log_t_end", "clock", "rtol", "dps", "solution", "selection", "tie", "max_steps",
             "max_events", "dense_output"},
    "gd": {"lr", "steps", "dps", "record_every", "selection", "max_flips"},
    "until": {"loss_below", "linear", "offset", "tol", "deadline"},
    "output": {"dir", "plots"},
}


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


def load(config, *, quick: bool = False, out=None) -> RunConfig:
    """Read and check a configuration (a path or a shipped name); ``quick`` applies its ``[quick]`` overrides.

    Raises
    ------
    ValueError
        Naming the offending key, for an invalid configuration.
    """
    path = find(config)
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"config {path}: not valid TOML ({exc})") from None
    _check_keys(raw, path)
    if quick and "quick" in raw:
        raw = _merge(raw, raw["quick"])
        _check_keys(raw, path)
    problem, example_params = _problem(raw.get("problem", {}), path)
    inits = _inits(raw.get("init"), problem, example_params, path)
    if "flow" not in raw and "gd" not in raw:
        raise ValueError(f"config {path}: give a [flow] or a [gd] section (or both)")
    output = raw.get("output", {})
    plots = tuple(output.get("plots", PLOTS))
    unknown = sorted(set(plots) - set(PLOTS))
    if unknown:
        raise ValueError(f"config {path}: output.plots has unknown plots {unknown}; known: {list(PLOTS)}")
    if "until" in raw and len(inits) == 1:
        raise ValueError(f"config {path}: until is for ensembles (init.count > 1)")
    target = Path(out) if out is not None else Path(output.get("dir", Path("flowlib-runs") / path.stem))
    return RunConfig(name=path.stem, title=str(raw.get("title", path.stem)), reference=str(raw.get("reference", "")),
                     problem=problem, inits=inits, flow=raw.get("flow"), gd=raw.get("gd"), until=raw.get("until"),
                     out=target, plots=plots)


def _check_keys(raw: dict, path: Path) -> None:
    for key in raw:
        if key not in _KEYS[""]:
            raise ValueError(f"config {path}: unknown key {key!r} (known: {sorted(_KEYS[''])})")
    for section, allowed in _KEYS.items():
        if not section or section not in raw:
            continue
        if not isinstance(raw[section], dict):
            raise ValueError(f"config {path}: {section} must be a table ([{section}])")
        for key in raw[section]:
            if key not in allowed:
                raise ValueError(f"config {path}: unknown key {section}.{key} (known: {sorted(allowed)})")


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
    options = {k: spec[k] for k in ("loss", "reduction", "activation", "leak", "bias", "train_outer") if k in spec}
    if "example" in spec:
        name = spec["example"]
        if name not in EXAMPLE_FUNCTIONS:
            raise ValueError(f"config {path}: problem.example must be one of {list(EXAMPLE_FUNCTIONS)}, got {name!r}")
        if options:
            raise ValueError(f"config {path}: problem.{sorted(options)[0]} cannot be set with an example")
        args = spec.get("args", {})
        if not isinstance(args, dict):
            raise ValueError(f"config {path}: problem.args must be a table")
        try:
            return getattr(examples, name)(**args)
        except TypeError as exc:
            raise ValueError(f"config {path}: problem.args do not fit examples.{name} ({exc})") from None
    if "args" in spec:
        raise ValueError(f"config {path}: problem.args is for problem.example")
    if "X" in spec:
        if "y" not in spec:
            raise ValueError(f"config {path}: problem.X needs problem.y")
        X, y = spec["X"], spec["y"]
    else:
        X, y = _read_data(path.parent / spec["file"], path)
    return Problem(X=X, y=y, **options), None


def _read_data(file: Path, path: Path) -> tuple[np.ndarray, np.ndarray]:
    if not file.is_file():
        raise ValueError(f"config {path}: problem.file {str(file)!r} does not exist")
    if file.suffix == ".npz":
        with np.load(file, allow_pickle=False) as data:
            if "X" not in data or "y" not in data:
                raise ValueError(f"config {path}: problem.file {file.name} must hold arrays X and y")
            return data["X"], data["y"]
    table = np.loadtxt(file, delimiter=",", comments="#", ndmin=2)
    if table.shape[1] < 2:
        raise ValueError(f"config {path}: problem.file {file.name} needs columns x_1..x_d, y")
    return table[:, :-1], table[:, -1]


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
        params = Params(W=spec["W"], b=spec.get("b"), a=spec["a"] if "a" in spec else None)
        params.check_against(problem)
        return params.packed()[None]
    if "m" not in spec:
        raise ValueError(f"config {path}: init needs W (explicit parameters) or m (random ones)")
    bias = spec.get("bias", 0.0)
    if bias == "random":
        bias = None
    return random_inits(problem, spec["m"], spec.get("count", 1), scheme=spec.get("scheme", "he"),
                        scale=spec.get("scale", 1.0), a=spec.get("a"), bias=bias, seed=spec.get("seed", 0))
