"""Stored 40-digit references of flows too expensive to recompute in every benchmark run.

Two sources, both at 40 digits:

``"oracle"``
    The independent mpmath integrator :mod:`flowlib.peers.reference` (no flowlib code; transversal crossings
    only): B1's orthogonally separable problem and B6's GD problems (9-30 s each to recompute).
``"mp-flow"``
    flowlib's own mpmath backend (``gradient_flow(..., dps=40)``: the same algorithm over 40-digit numbers,
    cross-checked against closed forms on E1, V10's single neuron and seed 000), for the problems that slide and
    stick, where the oracle does not apply and no closed form exists: V10 with ``m = 400`` and E4 with
    ``m = 200`` (``notes/integrators.md`` §5, B2 and B4; minutes each).

:func:`make` computes one and stores it in ``flowlib/peers/data/<name>.json`` with a SHA-256 of the inputs;
:func:`load` refuses a file whose inputs differ, so a changed example is never compared with a stale answer, and
:func:`get` falls back to computing it (without writing) when no valid file exists.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np

__all__ = ["DATA", "SOURCES", "StoredReference", "get", "inputs_digest", "load", "make"]

#: where the stored references live
DATA = Path(__file__).with_name("data")
#: digits of the stored references
DPS = 40
#: how a reference can be computed
SOURCES = ("oracle", "mp-flow")


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


def inputs_digest(problem, params0, t_end: float) -> str:
    """SHA-256 of everything the flow depends on: data, options, initial state and ``t_end``."""
    h = hashlib.sha256()
    for arr in (problem.X, problem.y, params0.packed()):
        h.update(np.ascontiguousarray(arr, dtype=np.float64).tobytes())
    h.update(repr((problem.loss, problem.reduction, float(problem.leak), bool(problem.bias),
                   bool(problem.train_outer), float(t_end))).encode())
    return h.hexdigest()


def load(name: str, problem, params0, t_end: float) -> StoredReference | None:
    """The stored reference ``name`` if it exists and was made from exactly these inputs, else ``None``."""
    path = DATA / f"{name}.json"
    if not path.is_file():
        return None
    payload = json.loads(path.read_text())
    if payload.get("inputs_sha256") != inputs_digest(problem, params0, t_end):
        return None
    return StoredReference(payload)


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
        from flowlib.peers.reference import reference_flow

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
            "inputs_sha256": inputs_digest(problem, params0, t_end), "final": final, "events": events,
            "wall_s": wall}


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
