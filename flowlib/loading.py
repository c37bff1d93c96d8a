"""``flowlib.load``: read a saved result back, checking everything before anything is built from it.

A saved file is an ``.npz`` archive whose ``meta`` member is a JSON text (:meth:`FlowResult.save`,
:meth:`DescentResult.save`, :meth:`EnsembleResult.save`); a folder is an ensemble's ``out`` (read by
:mod:`flowlib.ensemble_store`). Damaged, foreign or newer files are refused with a ``ValueError`` naming the file and
the field, never a traceback from zipfile, numpy or json.
"""

from __future__ import annotations

import json
import math
import re
import struct
import tokenize
import zipfile
import zlib
from pathlib import Path

import numpy as np

from flowlib import __version__
from flowlib.kinds import FLAG, TABLE, TEXT, Kind, choice, integer, real
from flowlib.problem import Problem
from flowlib.result import (EVENT_KINDS, SAVE_SCHEMA, DescentResult, EventLog, FlipLog, FlowResult, Status, _mp,
                            numbers_from_text)
from flowlib.running import MAX_DPS

#: What reading a damaged or foreign ``.npz`` file can raise (zipfile, zlib, numpy's format checks and its parser
#: of the array headers, the OS).
_READ_ERRORS = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, struct.error, NotImplementedError,
                RuntimeError, SyntaxError, tokenize.TokenError)


def _reason(exc: BaseException) -> str:
    """``exc`` in one short line, for an error message (never the file's data at length)."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= 100 else text[:97] + "..."


def read_arrays(path, label: str) -> dict:
    """Every array of the ``.npz`` archive ``path``, read eagerly and without pickle.

    Raises
    ------
    ValueError
        Starting with ``label``, when ``path`` cannot be read, is not an ``.npz`` archive (a ``.npy`` array, a
        truncated or foreign file) or one of its members is damaged.
    """
    try:
        data = np.load(Path(path), allow_pickle=False)
    except _READ_ERRORS as exc:
        raise ValueError(f"{label}: not a readable .npz file ({_reason(exc)})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"{label}: a single .npy array, not an .npz archive")
    try:
        with data:
            return {name: data[name] for name in data.files}
    except _READ_ERRORS as exc:
        raise ValueError(f"{label}: a member of the .npz archive is damaged ({_reason(exc)})") from None


def load(path):
    """Read a result written by :meth:`FlowResult.save`, :meth:`DescentResult.save` or
    :meth:`EnsembleResult.save`, or the ``out`` folder of :func:`flowlib.ensemble` (unfinished chunks pending).

    The ``kind`` field of the saved metadata says which. A file is checked before anything is built from it: its
    schema and flowlib version (not newer than this flowlib's), every metadata field's type and range, every
    array's presence, dtype and shape, and finiteness where a result needs it.

    Raises
    ------
    ValueError
        Naming ``path`` (and the field or array), if ``path`` is not a readable flowlib result file: damaged,
        foreign, written by a newer flowlib, or inconsistent.
    """
    if Path(path).is_dir():
        from flowlib.ensemble_result import load_store

        return load_store(path)
    saved = _Saved(f"path {path!s}", read_arrays(path, f"path {path!s}"))
    kind = saved.meta.get("kind")
    loaders = {"FlowResult": _load_flow, "DescentResult": _load_descent, "EnsembleResult": _load_ensemble}
    if not isinstance(kind, str) or kind not in loaders:
        raise saved.fail("kind", f"is {_short(kind)}, not one of {sorted(loaders)}")
    saved.check_version()
    return loaders[kind](saved)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _version(text: str) -> tuple | None:
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text) if isinstance(text, str) else None
    return None if match is None else tuple(int(part or 0) for part in match.groups())


class _Saved:
    """The arrays and the JSON metadata of a saved result, read with checks.

    Every check that fails raises ``ValueError`` starting with ``label`` (the file) and naming the field or array.
    """

    def __init__(self, label: str, arrays: dict):
        self.label, self.arrays = label, arrays
        if "meta" not in arrays:
            raise ValueError(f"{label} is not a flowlib result (no metadata)")
        meta = arrays["meta"]
        if meta.shape != () or meta.dtype.kind != "U":
            raise self.fail("metadata", f"must be one JSON text, got an array of dtype {meta.dtype}, shape "
                                        f"{meta.shape}")
        try:
            self.meta = json.loads(str(meta))
        except (ValueError, RecursionError) as exc:
            raise self.fail("metadata", f"is not valid JSON ({_reason(exc)})") from None
        if not isinstance(self.meta, dict):
            raise self.fail("metadata", f"must be a JSON object, got {type(self.meta).__name__}")

    def fail(self, field: str, what: str) -> ValueError:
        return ValueError(f"{self.label}: {field} {what}")

    def check_version(self) -> None:
        """Refuse a file of a newer schema, or written by a newer flowlib, than this one."""
        schema = self.field("schema", integer(1))
        if schema > SAVE_SCHEMA:
            raise self.fail("schema", f"is {schema}: written by a newer flowlib (this flowlib {__version__} reads "
                                      f"schema {SAVE_SCHEMA}); upgrade flowlib")
        if self.meta.get("kind") == "EnsembleResult":  # the versions of the run, if it recorded them
            inner = self.meta.get("meta")
            versions = inner.get("versions") if isinstance(inner, dict) else None
            written = versions.get("flowlib") if isinstance(versions, dict) else None
            if written is None:
                return
        else:
            written = self.meta.get("flowlib")
        if _version(written) is None:
            raise self.fail("flowlib (version)", f"must be a version string, got {_short(written)}")
        if _version(written) > _version(__version__):
            raise self.fail("flowlib (version)", f"is {written}: written by a newer flowlib than this one "
                                                 f"({__version__}); upgrade flowlib")

    def field(self, key: str, kind, default=KeyError):
        """Metadata field ``key``, checked against ``kind`` (a :class:`flowlib.config.Kind`, or ``None``: only
        ``None``); ``default`` when absent (an error if no default is given)."""
        if key not in self.meta:
            if default is KeyError:
                raise self.fail(key, "is missing from the metadata")
            return default
        value = self.meta[key]
        if kind is None or not kind.accepts(value):
            if kind is None and value is None:
                return None
            raise self.fail(key, f"must be {'null' if kind is None else kind.want}, got {_short(value)}")
        return value

    def optional(self, key: str, kind):
        """Like :meth:`field`, with ``null`` (or absence) allowed: ``None``."""
        return None if self.meta.get(key) is None else self.field(key, kind)

    def problem(self, spec, field: str = "problem") -> Problem:
        """A :class:`Problem` from its ``to_dict`` description."""
        known = ("X", "y", "loss", "reduction", "activation", "leak", "bias", "train_outer", "weight_decay")
        if not isinstance(spec, dict):
            raise self.fail(field, f"must be a JSON object, got {_short(spec)}")
        unknown = sorted(set(spec) - set(known))
        missing = sorted({"X", "y"} - set(spec))
        if unknown or missing:
            raise self.fail(field, f"has unknown keys {unknown}" if unknown else f"lacks {missing}")
        try:
            return Problem(**spec)
        except (ValueError, TypeError, OverflowError) as exc:
            raise self.fail(field, f"is not a valid problem ({_reason(exc)})") from None

    def array(self, name: str, shape: tuple, *, dps: int | None = None, integer: bool = False,
              finite: bool = False, nan: bool = True) -> np.ndarray:
        """Array ``name``: numbers of ``shape`` (``None`` matches any length): integers (``int64``), float64, or
        with ``dps`` decimal strings read as mpf; ``finite`` and ``nan=False`` refuse non-finite or NaN entries."""
        if name not in self.arrays:
            raise self.fail(f"array {name!r}", "is missing")
        value = self.arrays[name]
        if len(value.shape) != len(shape) or any(n is not None and n != k for n, k in zip(shape, value.shape)):
            wanted = tuple("any" if n is None else n for n in shape)
            raise self.fail(f"array {name!r}", f"has shape {value.shape}, expected {wanted}")
        kinds = "iu" if integer else ("U" if dps else "iuf")
        if value.dtype.kind not in kinds:
            raise self.fail(f"array {name!r}", f"has dtype {value.dtype}, expected "
                                               f"{'integers' if integer else 'text' if dps else 'real numbers'}")
        if integer:
            return value.astype(np.int64)
        if dps:
            try:
                value = numbers_from_text(value, dps)
            except ValueError:
                raise self.fail(f"array {name!r}", "holds text that is not a number") from None
            flags = np.array([(_mp().isnan(v), _mp().isinf(v)) for v in value.flat], dtype=bool).reshape(-1, 2)
        else:
            value = value.astype(np.float64)
            flags = np.stack([np.isnan(value).ravel(), np.isinf(value).ravel()], axis=1)
        if (finite and flags.any()) or (not nan and flags[:, 0].any()):
            raise self.fail(f"array {name!r}", "holds non-finite entries" if finite else "holds NaN")
        return value

    def indices(self, name: str, length: int, low: int, high: int) -> np.ndarray:
        """Integer array ``name`` of ``length`` entries in ``[low, high]``."""
        value = self.array(name, (length,), integer=True)
        if np.any(value < low) or np.any(value > high):
            raise self.fail(f"array {name!r}", f"has entries outside [{low}, {high}]")
        return value

    def states(self, name: str, length, problem: Problem, m=None, dps=None) -> np.ndarray:
        """Packed states ``(length, m, d + 2)`` (finite), with at least one neuron."""
        value = self.array(name, (length, m, problem.d + 2), dps=dps, finite=True)
        if value.shape[1] == 0:
            raise self.fail(f"array {name!r}", "has no neurons")
        return value

    def increasing(self, name: str, value: np.ndarray, strict: bool = False) -> None:
        """Refuse ``value`` unless it increases (``strict``) or does not decrease (no NaN either way)."""
        steps = (value[1:] > value[:-1]) if strict else (value[1:] >= value[:-1])
        if not np.all(steps):
            raise self.fail(f"array {name!r}", "is not " + ("increasing" if strict else "non-decreasing"))


def _common(saved: _Saved) -> tuple[Problem, int | None, str, str, float, dict]:
    """The fields a flow and a GD result share: problem, dps, status, message, wall_s, options."""
    problem = saved.problem(saved.field("problem", TABLE))
    dps = saved.optional("dps", integer(16, MAX_DPS))
    status = saved.field("status", choice(*(s.value for s in Status)))
    return (problem, dps, status, saved.field("message", TEXT), float(saved.field("wall_s", real(0))),
            saved.field("options", TABLE))


def _load_flow(saved: _Saved) -> FlowResult:
    problem, dps, status, message, wall_s, options = _common(saved)
    order, rtol = saved.field("order", integer(1)), float(saved.field("rtol", real(0)))
    dense, clock = saved.field("dense", FLAG), saved.field("clock", choice("t", "log"), "t")
    t = saved.array("t", (None,), dps=dps, nan=False)
    if len(t) == 0:
        raise saved.fail("array 't'", "is empty")
    saved.increasing("t", t)
    n, states = len(t), saved.states("states", len(t), problem, dps=dps)
    m = states.shape[1]
    numbers = {"t": t, "states": states, "loss": saved.array("loss", (n,), dps=dps, nan=False),
               "energy": saved.array("energy", (n - 1,), dps=dps, nan=False),
               "t_eval": saved.array("t_eval", (None,), dps=dps, nan=False),
               "coefficients": saved.array("coefficients", (n - 1, order + 1, m, problem.d + 2), dps=dps,
                                           finite=True) if dense else None}
    numbers["states_eval"] = saved.states("states_eval", len(numbers["t_eval"]), problem, m, dps)
    for name in ("s", "log_loss"):
        present = name in saved.arrays or (name == "s" and clock == "log")
        numbers[name] = saved.array(name, (n,), dps=dps, nan=False) if present else None
    kinds = saved.field("event_kinds", Kind(f"a list of event kinds from {sorted(EVENT_KINDS.values())}",
                                            lambda v: isinstance(v, list) and all(isinstance(k, str) for k in v)
                                            and set(v) <= set(EVENT_KINDS.values())))
    e = len(kinds)
    event_t = saved.array("event_t", (e,), dps=dps, nan=False)
    multiplier = saved.array("event_multiplier", (e,), dps=dps)
    events = EventLog(event_t, kinds, saved.indices("event_neuron", e, 0, m - 1),
                      saved.indices("event_sample", e, 0, problem.n - 1), saved.indices("event_side", e, -1, 1),
                      multiplier)
    inclusion = saved.optional("inclusion_residual", real(0))  # a residual of exactly 0 is a value, not absent
    return FlowResult(problem=problem, events=events, status=Status(status), message=message, order=order,
                      rtol=rtol, wall_s=wall_s, options=options, dps=dps, clock=clock,
                      inclusion_residual=math.nan if inclusion is None else float(inclusion), **numbers)




def _load_descent(saved: _Saved) -> DescentResult:
    problem, dps, status, message, wall_s, options = _common(saved)
    lr, steps = float(saved.field("lr", real(0, above=True))), saved.field("steps", integer(0))
    selection = float(saved.field("selection", real(problem.leak, 1)))
    iterations = saved.array("iterations", (None,), integer=True)
    if len(iterations) == 0 or iterations[0] != 0 or iterations[-1] != steps:
        raise saved.fail("array 'iterations'", f"must run from 0 to steps = {steps}")
    saved.increasing("iterations", iterations, strict=True)
    states = saved.states("states", len(iterations), problem, dps=dps)
    loss = saved.array("loss", (len(iterations),), dps=dps, nan=False)
    count = len(saved.array("flip_k", (None,), integer=True))
    flips = FlipLog(saved.indices("flip_k", count, 0, steps + 1),
                    saved.indices("flip_neuron", count, 0, states.shape[1] - 1),
                    saved.indices("flip_sample", count, 0, problem.n - 1), saved.indices("flip_side", count, -1, 1))
    return DescentResult(problem=problem, lr=lr, steps=steps, iterations=iterations, states=states, loss=loss,
                         flips=flips, status=Status(status), message=message, dps=dps, selection=selection,
                         wall_s=wall_s, options=options)


def _load_ensemble(saved: _Saved):
    from flowlib.ensemble_result import DIAGNOSTICS, EVENT_COLUMNS, MEMBER_ARRAYS, STATUS_NAMES, load_ensemble

    meta = {"method": saved.field("method", choice("flow", "gd")), "options": saved.field("options", TABLE),
            "wall_s": float(saved.field("wall_s", real(0))), "complete": saved.field("complete", FLAG),
            "meta": saved.field("meta", TABLE, {}),
            "problems": saved.field("problems", Kind("a non-empty list", lambda v: isinstance(v, list) and v))}
    problems = [saved.problem(spec, f"problems[{k}]") for k, spec in enumerate(meta["problems"])]
    if len({p.d for p in problems}) != 1:
        raise saved.fail("problems", "must share one input dimension d")
    inits = saved.states("inits", None, problems[0])
    count, shape = len(inits), inits.shape[1:]
    if count == 0:
        raise saved.fail("array 'inits'", "has no members")
    arrays = {"inits": inits, "problem_index": saved.indices("problem_index", count, 0, len(problems) - 1),
              "final": saved.array("final", (count,) + shape), "event_counts": saved.array(
                  "event_counts", (count, len(EVENT_COLUMNS)), integer=True),
              "status_code": saved.indices("status_code", count, min(STATUS_NAMES), max(STATUS_NAMES))}
    for name in ("loss", "t"):
        arrays[name] = saved.array(name, (count,))
    for name in ("steps", "events"):
        arrays[name] = saved.array(name, (count,), integer=True)
    for name in DIAGNOSTICS:  # absent in files written before the per-member diagnostics
        arrays[name] = saved.array(name, (count,)) if name in saved.arrays else np.full(count, np.nan)
    arrays = {name: value.astype(MEMBER_ARRAYS.get(name, value.dtype)) for name, value in arrays.items()}
    return load_ensemble(arrays, meta)
