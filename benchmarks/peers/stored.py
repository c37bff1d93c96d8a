"""Stored 40-digit references of flows too expensive to recompute in every benchmark run.

Two sources, both at 40 digits:

``"oracle"``
    The independent mpmath integrator :mod:`tests.oracles.reference` (no flowlib code; transversal crossings
    only): B1's orthogonally separable problem and B6's GD problems (9-30 s each to recompute).
``"mp-flow"``
    flowlib's own mpmath backend (``gradient_flow(..., dps=40)``: the same algorithm over 40-digit numbers,
    cross-checked against closed forms on E1, V10's single neuron and seed 000), for the problems that slide and
    stick, where the oracle does not apply and no closed form exists: V10 with ``m = 400`` and E4 with
    ``m = 200`` (benchmarks B2 and B4; minutes each).

:func:`make` computes one and stores it in ``benchmarks/peers/data/<name>.json`` together with its exact inputs (data,
options, initial state and ``t_end``, every float written so that it reads back bit for bit). The examples that
generate these inputs use random rotations and matrix products, whose last bits differ between CPUs and BLAS builds,
so a file is matched on its inputs within :data:`INPUT_RTOL`, not on a digest of them: :func:`load` refuses a file
whose inputs differ by more (a changed example is never compared with a stale answer) and returns the stored inputs
with the answer, so that the runs compared with it start from exactly the inputs it was computed from
(:func:`pinned`). :func:`get` falls back to computing it (without writing) when no valid file exists.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

__all__ = ["DATA", "INPUT_RTOL", "SOURCES", "StoredReference", "get", "inputs_record", "load", "make", "pinned"]

#: where the stored references live
DATA = Path(__file__).with_name("data")
#: digits of the stored references
DPS = 40
#: how a reference can be computed
SOURCES = ("oracle", "mp-flow")
#: largest difference between stored and generated inputs, relative to the largest entry of each array, for which a
#: stored reference is the same problem (generated data differ by a few units in the last place across machines)
INPUT_RTOL = 1e-12


class StoredReference:
    """A stored reference: packed final state and event log at ``dps`` digits (as strings and as float64).

    Attributes
    ----------
    name : str
    final : ndarray, shape (m, d + 2)
        Packed final state ``(w_j, b_j, a_j)`` rounded to float64.
    final_text : list of list of str
        The same at full precision.
    events : list of tuple
        ``(t, kind, neuron, sample)`` with ``t`` as float64.
    dps : int
    wall_s : float
        Seconds the mpmath run took when the file was made.
    source : str
        One of :data:`SOURCES`.
    status : str
        Status of the mpmath run (``"success"``).
    stored : bool
        Whether it came from a file (``False``: computed in this process).
    problem : Problem
        The exact problem the reference was computed for.
    params0 : Params
        The exact initial state.
    """

    def __init__(self, payload: dict):
        self.name = payload["name"]
        self.final_text = payload["final"]
        self.final = np.array([[float(v) for v in row] for row in self.final_text])
        self.events = [(float(t), kind, int(j), int(i)) for t, kind, j, i in payload["events"]]
        self.dps = int(payload["dps"])
        self.wall_s = float(payload["wall_s"])
        self.status = payload["status"]
        self.source = payload.get("source", "mp-flow")
        self.stored = bool(payload.get("stored", True))
        self.problem, self.params0 = _inputs_from_payload(payload["inputs"])


def inputs_record(problem, params0, t_end: float) -> dict:
    """The inputs of a reference as JSON: the problem's :meth:`~flowlib.Problem.to_dict`, the packed initial state
    and ``t_end`` (JSON writes floats by ``repr``, which reads back exactly)."""
    return {"problem": problem.to_dict(), "P0": params0.packed().tolist(), "t_end": float(t_end)}


def _inputs_from_payload(record) -> tuple:
    """``(Problem, Params)`` rebuilt from :func:`inputs_record`'s output."""
    from flowlib.problem import Params, Problem

    problem = Problem(**record["problem"])
    P0 = np.array(record["P0"], dtype=np.float64)
    d = problem.d
    params0 = Params(W=P0[:, :d], b=P0[:, d] if problem.bias else None, a=P0[:, d + 1])
    return problem, params0


def _close(stored: np.ndarray, given: np.ndarray) -> bool:
    """Same shape, and equal within :data:`INPUT_RTOL` relative to the largest entry."""
    if stored.shape != given.shape:
        return False
    scale = max(float(np.max(np.abs(stored), initial=0.0)), np.finfo(np.float64).tiny)
    return bool(np.max(np.abs(stored - given), initial=0.0) <= INPUT_RTOL * scale)


def _matches(record: dict, problem, params0, t_end: float) -> bool:
    """Whether stored inputs are ``(problem, params0, t_end)``: options and ``t_end`` exactly, arrays within
    :data:`INPUT_RTOL`. A record written before problems had ``weight_decay`` has none."""
    given = inputs_record(problem, params0, t_end)
    stored_problem = {"weight_decay": 0.0, **record["problem"]}
    given_problem = dict(given["problem"])
    arrays = [(np.asarray(stored_problem.pop(k), dtype=np.float64), np.asarray(given_problem.pop(k)))
              for k in ("X", "y")]
    arrays.append((np.asarray(record["P0"], dtype=np.float64), np.asarray(given["P0"])))
    return (stored_problem == given_problem and float(record["t_end"]) == given["t_end"]
            and all(_close(a, b) for a, b in arrays))


def load(name: str, problem, params0, t_end: float) -> StoredReference | None:
    """The stored reference ``name`` if it exists and was made from these inputs (within :data:`INPUT_RTOL`, see
    the module docstring), else ``None``. Its ``problem`` and ``params0`` are the exact stored inputs."""
    path = DATA / f"{name}.json"
    if not path.is_file():
        return None
    payload = json.loads(path.read_text())
    record = payload.get("inputs")
    if record is None or not _matches(record, problem, params0, t_end):
        return None
    return StoredReference(payload)


def pinned(name: str, problem, params0, t_end: float) -> tuple:
    """``(problem, params0)`` as stored with reference ``name`` when they match the given ones, else the given ones:
    the inputs a benchmark should run so that it is compared with the answer for exactly those inputs."""
    ref = load(name, problem, params0, t_end)
    if ref is None:
        return problem, params0
    return ref.problem, ref.params0


def _payload(name, problem, params0, t_end, source, dps) -> dict:
    """Run ``source`` at ``dps`` digits; the JSON-ready description of its final state and events."""
    from mpmath import mp, nstr

    started = time.perf_counter()
    if source == "mp-flow":
        import flowlib as fl

        res = fl.gradient_flow(problem, params0, t_end, dps=dps, dense_output=False)
        final, status = res.states[-1], str(res.status)
        events = [(e.t, e.kind, int(e.neuron), int(e.sample)) for e in res.events]
    elif source == "oracle":
        from tests.oracles.reference import reference_flow

        ref = reference_flow(problem.X, problem.y, params0.W, params0.b, params0.a, t_end, dps=dps,
                             loss=problem.loss, reduction=problem.reduction, leak=problem.leak, bias=problem.bias,
                             train_outer=problem.train_outer)
        final = [list(w) + [b, a] for w, b, a in zip(ref["W"], ref["b"], ref["a"])]
        events, status = [(t, "cross", int(j), int(i)) for t, j, i, _ in ref["events"]], "success"
    else:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    wall = time.perf_counter() - started
    with mp.workdps(dps):
        final = [[nstr(v, dps + 5, strip_zeros=False) for v in row] for row in final]
        events = [(nstr(t, dps + 5), kind, j, i) for t, kind, j, i in events]
    return {"name": name, "source": source, "dps": dps, "t_end": float(t_end), "status": status,
            "inputs": inputs_record(problem, params0, t_end), "final": final, "events": events, "wall_s": wall}


def make(name: str, problem, params0, t_end: float, source: str = "mp-flow", dps: int = DPS) -> StoredReference:
    """Compute the reference (seconds to minutes) and store it as ``data/<name>.json``."""
    payload = _payload(name, problem, params0, t_end, source, dps)
    DATA.mkdir(exist_ok=True)
    (DATA / f"{name}.json").write_text(json.dumps(payload, indent=0))
    return StoredReference(payload)


def get(name: str, problem, params0, t_end: float, source: str, dps: int = DPS) -> StoredReference:
    """The stored reference when valid, else computed now (not written)."""
    found = load(name, problem, params0, t_end)
    if found is not None:
        return found
    payload = _payload(name, problem, params0, t_end, source, dps)
    payload["stored"] = False
    return StoredReference(payload)
