"""``EnsembleResult``: the summary arrays of many trajectories.

The folder an ensemble streams its chunks to (``out=``) is :mod:`flowlib.ensemble_store`.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from flowlib.kernels import constants as kconst
from flowlib.kernels import status as kstatus
from flowlib.problem import Params, Problem
from flowlib.reprs import Summarised
from flowlib.statuses import KERNEL_STATUS, PENDING_CODE, Status, at_iteration, at_time, ended, status_of

#: Member not computed (yet): the ensemble was interrupted before its chunk ran.
PENDING = PENDING_CODE
REACHED = kstatus.REACHED
DEADLINE = kstatus.DEADLINE
#: Status name of each kernel code (from the one table :data:`flowlib.statuses.KERNEL_STATUS`).
STATUS_NAMES = {code: outcome.value for code, (outcome, _) in KERNEL_STATUS.items()}
#: Column names of :attr:`EnsembleResult.event_counts`.
EVENT_COLUMNS = ("cross", "slide_start", "slide_end", "stick", "tie", "zeno")
assert [kconst.EVENT_CROSS, kconst.EVENT_SLIDE_START, kconst.EVENT_SLIDE_END, kconst.EVENT_STICK, kconst.EVENT_TIE,
        kconst.EVENT_ZENO] == list(range(len(EVENT_COLUMNS)))

#: Per-member arrays of a chunk and of a result, with their dtypes.
MEMBER_ARRAYS = {"final": np.float64, "loss": np.float64, "t": np.float64, "steps": np.int64, "events": np.int64,
                 "event_counts": np.int64, "status_code": np.int16, "energy_residual": np.float64,
                 "inclusion_residual": np.float64}
#: The per-member diagnostics among them (NaN for gradient descent, and in files written before they existed).
DIAGNOSTICS = ("energy_residual", "inclusion_residual")


def versions() -> dict:
    """Versions of what produced the numbers."""
    import numba
    import scipy

    from flowlib import __version__

    return {"flowlib": __version__, "python": platform.python_version(), "numpy": np.__version__,
            "numba": numba.__version__, "scipy": scipy.__version__, "machine": platform.machine()}


def empty_members(count: int, shape: tuple[int, int]) -> dict:
    """Per-member arrays for ``count`` members not computed yet."""
    return {"final": np.full((count,) + shape, np.nan), "loss": np.full(count, np.nan),
            "t": np.full(count, np.nan), "steps": np.full(count, -1, np.int64), "events": np.full(count, -1, np.int64),
            "event_counts": np.full((count, len(EVENT_COLUMNS)), -1, np.int64),
            "status_code": np.full(count, PENDING, np.int16), "energy_residual": np.full(count, np.nan),
            "inclusion_residual": np.full(count, np.nan)}


@dataclass(repr=False)
class EnsembleResult(Summarised):
    """Summary of an ensemble run (:func:`flowlib.ensemble`): one row per member.

    Attributes
    ----------
    method : {"flow", "gd"}
    problems : tuple of Problem
        The distinct problems; member ``r`` trains ``problems[problem_index[r]]``.
    problem_index : ndarray of int64, shape (R,)
    inits : ndarray, shape (R, m, d + 2)
        Initial packed parameters (rows ``(w_j, b_j, a_j)``).
    final : ndarray, shape (R, m, d + 2)
        Parameters where each member stopped (``nan`` for pending members).
    loss : ndarray, shape (R,)
        Loss there.
    t : ndarray, shape (R,)
        Flow time there (``k lr`` for gradient descent).
    steps : ndarray of int64, shape (R,)
        Taylor steps (flow) or iterations (GD).
    events : ndarray of int64, shape (R,)
        Events (flow) or activation flips (GD).
    event_counts : ndarray of int64, shape (R, 6)
        Events per kind, columns :data:`EVENT_COLUMNS` (zeros for GD).
    status_code : ndarray of int16, shape (R,)
        Per-member status code; :attr:`status` gives the names.
    energy_residual, inclusion_residual : ndarray, shape (R,)
        Each flow member's diagnostics, as :attr:`FlowResult.energy_residual` and
        :attr:`FlowResult.inclusion_residual` of the same run (the energy identity over the member's run, and the
        largest distance of a step's velocity to the Filippov set): every member certifies itself. NaN for
        gradient descent and for pending members.
    options : dict
        The options of the run (method, budgets, stop rule, ...).
    wall_s : float
        Seconds spent computing (this call only; a resumed run does not add earlier calls).
    complete : bool
        ``False`` when the run was interrupted: some members are ``"pending"``; re-run with the same ``out`` to
        finish.
    meta : dict
        Versions and fingerprint.
    """

    method: str
    problems: tuple
    problem_index: np.ndarray
    inits: np.ndarray
    final: np.ndarray
    loss: np.ndarray
    t: np.ndarray
    steps: np.ndarray
    events: np.ndarray
    event_counts: np.ndarray
    status_code: np.ndarray
    options: dict
    energy_residual: np.ndarray = None
    inclusion_residual: np.ndarray = None
    wall_s: float = 0.0
    complete: bool = True
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        for name in DIAGNOSTICS:  # results built without them (older files): not computed
            if getattr(self, name) is None:
                setattr(self, name, np.full(len(self.status_code), np.nan))

    def __len__(self) -> int:
        return len(self.status_code)

    @property
    def problem(self) -> Problem:
        """The problem, when all members share one (``ValueError`` otherwise)."""
        if len(self.problems) != 1:
            raise ValueError(f"this ensemble has {len(self.problems)} problems; use problems[problem_index[r]]")
        return self.problems[0]

    @property
    def status(self) -> np.ndarray:
        """Status name of each member: ``"reached"``, ``"deadline"``, ``"success"`` (horizon or step count
        reached), ``"max_steps"``, ``"max_events"``, ``"failed"``, ``"no_caratheodory_solution"``, ``"pending"``."""
        return np.array([status_of(c)[0].value for c in self.status_code])

    @property
    def messages(self) -> list[str]:
        """Each member's message, as :func:`flowlib.gradient_flow` (or :func:`flowlib.gradient_descent`) would
        report it for that member alone: what ended it and where (``t`` of the member)."""
        out = []
        for code, t, steps in zip(self.status_code, self.t, self.steps):
            where = at_iteration(steps) if self.method == "gd" else at_time(float(t))
            outcome, message = ended(code, where)
            out.append(f"reached {where}" if outcome == Status.SUCCESS and self.method == "gd" else message)
        return out

    @property
    def done(self) -> np.ndarray:
        """Mask of computed members."""
        return self.status_code != PENDING

    def counts(self) -> dict:
        """How many members ended with each status."""
        names, numbers = np.unique(self.status, return_counts=True)
        return {str(k): int(v) for k, v in zip(names, numbers)}

    def params(self, r: int, which: str = "final") -> Params:
        """``Params`` of member ``r``: ``which="final"`` (where it stopped) or ``"init"``."""
        if which not in ("final", "init"):
            raise ValueError(f"which must be 'final' or 'init', got {which!r}")
        rows = (self.final if which == "final" else self.inits)[r]
        return Params.unpacked(rows, self.problems[int(self.problem_index[r])].bias)

    def summary(self) -> str:
        """A few lines: statuses, steps, events, times, losses."""
        done = self.done
        what = "gradient descent" if self.method == "gd" else "gradient flow"
        lines = [f"ensemble of {len(self)} {what} runs ({int(done.sum())} computed, {self.wall_s:.2f} s): "
                 + ", ".join(f"{k} {v}" for k, v in self.counts().items())]
        failed = [status_of(c)[1] for c in self.status_code if status_of(c)[0] == Status.FAILED]
        for message in sorted(set(failed)):
            lines.append(f"failed ({failed.count(message)}): {message}")
        if done.any():
            unit = "iterations" if self.method == "gd" else "Taylor steps"
            q = np.percentile(self.steps[done], [0, 50, 100])
            lines.append(f"{unit}: min {q[0]:.0f}, median {q[1]:.0f}, max {q[2]:.0f}; "
                         f"{'flips' if self.method == 'gd' else 'events'}: median {np.median(self.events[done]):.0f}")
            lines.append(f"time reached: median {np.median(self.t[done]):.6g}; final loss: median "
                         f"{np.median(self.loss[done]):.6g}")
            if self.method == "flow" and np.any(np.isfinite(self.energy_residual[done])):
                lines.append(f"largest energy-identity residual {np.nanmax(self.energy_residual[done]):.2e}, "
                             f"inclusion residual {np.nanmax(self.inclusion_residual[done]):.2e} (over the members)")
        return "\n".join(lines)

    def _summary_fields(self) -> list:
        """Method, members by status, medians and shapes (the ``repr`` and the notebook table)."""
        done = self.done
        fields = [("method", self.method), ("members", len(self)),
                  ("status", ", ".join(f"{k} {v}" for k, v in self.counts().items()))]
        if done.any():
            fields += [("median_t", float(np.median(self.t[done]))), ("median_loss", float(np.median(self.loss[done])))]
        fields += [("m", self.inits.shape[1]), ("d", self.inits.shape[2] - 2)]
        return fields + ([] if self.complete else [("complete", False)])

    # ----- persistence --------------------------------------------------------------------------------------
    def save(self, path) -> Path:
        """Write to ``path`` (``.npz``, metadata as JSON text; loadable with :func:`flowlib.load`, no pickle)."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_suffix(".npz")
        meta = {"schema": 1, "kind": "EnsembleResult", "method": self.method,
                "problems": [p.to_dict() for p in self.problems], "options": self.options, "wall_s": self.wall_s,
                "complete": self.complete, "meta": self.meta}
        arrays = {name: getattr(self, name) for name in MEMBER_ARRAYS}
        np.savez_compressed(path, inits=self.inits, problem_index=self.problem_index, meta=np.array(json.dumps(meta)),
                            **arrays)
        return path


def load_ensemble(data, meta) -> EnsembleResult:
    """The :class:`EnsembleResult` of an ``.npz`` written by :meth:`EnsembleResult.save` (``flowlib.load``)."""
    return EnsembleResult(method=meta["method"], problems=tuple(Problem(**p) for p in meta["problems"]),
                          problem_index=data["problem_index"], inits=data["inits"],
                          options=meta["options"], wall_s=meta["wall_s"], complete=meta["complete"], meta=meta["meta"],
                          **{name: data[name] for name in MEMBER_ARRAYS})


def load_store(folder) -> EnsembleResult:
    """The :class:`EnsembleResult` of an ensemble's ``out`` folder (see :func:`flowlib.ensemble_store.load_store`)."""
    from flowlib.ensemble_store import load_store as load

    return load(folder)
