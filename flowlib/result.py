"""Result containers: :class:`Status`, :class:`Event`, :class:`FlowResult`, and saving/loading them.

Arrays are time-major: ``res.W[k]`` is the weight matrix at ``res.t[k]`` (unlike SciPy's ``y[:, k]``).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from flowlib import __version__
from flowlib.kernels import driver, events as kevents
from flowlib.problem import Params, Problem


class Status(str, enum.Enum):
    """How a run ended (DESIGN.md §3). Compares equal to its string value: ``res.status == "success"``."""

    SUCCESS = "success"
    INTERRUPTED = "interrupted"
    MAX_EVENTS = "max_events"
    MAX_STEPS = "max_steps"
    ZENO = "zeno"
    NO_CARATHEODORY_SOLUTION = "no_caratheodory_solution"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


EVENT_KINDS = {kevents.EVENT_CROSS: "cross", kevents.EVENT_SLIDE_START: "slide_start",
               kevents.EVENT_SLIDE_END: "slide_end", kevents.EVENT_STICK: "stick", kevents.EVENT_TIE: "tie",
               kevents.EVENT_ZENO: "zeno"}


@dataclass(frozen=True)
class Event:
    """One event of the flow.

    Attributes
    ----------
    t : float
        Flow time.
    kind : str
        ``"cross"``, ``"slide_start"``, ``"slide_end"``, ``"stick"``, ``"tie"`` or ``"zeno"``.
    neuron, sample : int
        The switching surface ``<w_neuron, x_sample> + b_neuron = 0``.
    side : int
        The side entered: +1 the active side (``z > 0``), -1 the inactive one, 0 when the state stays on the
        surface (``slide_start``, ``stick``, and ``tie`` with the default policy).
    multiplier : float
        The slope ``s`` in ``[leak, 1]`` the minimal-norm velocity uses on this surface (the Filippov multiplier)
        for ``slide_start``, ``slide_end``, ``stick`` and ``tie``; NaN for ``cross``.
    """

    t: float
    kind: str
    neuron: int
    sample: int
    side: int
    multiplier: float = float("nan")


@dataclass(frozen=True)
class FlowResult:
    """The gradient flow of a :class:`~flowlib.Problem` from one initialisation.

    Attributes
    ----------
    problem : Problem
    t : ndarray, shape (n_steps + 1,)
        Step boundaries, from the start time to the time reached.
    states : ndarray, shape (n_steps + 1, m, d + 2)
        Packed parameters ``(w_j, b_j, a_j)`` at the step boundaries (see :attr:`W`, :attr:`b`, :attr:`a`).
    loss : ndarray, shape (n_steps + 1,)
        Loss at the step boundaries.
    energy : ndarray, shape (n_steps,)
        ``int |theta'|^2 dt`` over each step (for the energy identity).
    events : tuple of Event
        Time-ordered.
    status : Status
    message : str
    coefficients : ndarray, shape (n_steps, order + 1, m, d + 2), or None
        Taylor coefficients of each step (the dense output); ``None`` when the run kept no dense output.
    t_eval, states_eval : ndarray
        Times requested with ``t_eval`` and the packed states there.
    order, rtol : int, float
        Taylor order and tolerance used.
    wall_s : float
        Wall time of the integration (compilation excluded, see :func:`flowlib.warmup`).
    """

    problem: Problem
    t: np.ndarray
    states: np.ndarray
    loss: np.ndarray
    energy: np.ndarray
    events: tuple
    status: Status
    message: str
    coefficients: np.ndarray | None
    t_eval: np.ndarray
    states_eval: np.ndarray
    order: int
    rtol: float
    wall_s: float = 0.0
    options: dict = field(default_factory=dict)

    # ----- views --------------------------------------------------------------------------------------------
    @property
    def success(self) -> bool:
        """True when ``status == "success"``."""
        return self.status == Status.SUCCESS

    @property
    def W(self) -> np.ndarray:
        """Inner weights at the step boundaries, shape ``(n_steps + 1, m, d)``."""
        return self.states[:, :, : self.problem.d]

    @property
    def b(self) -> np.ndarray | None:
        """Biases at the step boundaries, shape ``(n_steps + 1, m)``, or ``None`` without bias."""
        return self.states[:, :, self.problem.d] if self.problem.bias else None

    @property
    def a(self) -> np.ndarray:
        """Outer weights at the step boundaries, shape ``(n_steps + 1, m)``."""
        return self.states[:, :, self.problem.d + 1]

    @property
    def n_steps(self) -> int:
        """Number of Taylor steps."""
        return len(self.t) - 1

    @property
    def n_events(self) -> int:
        """Number of events."""
        return len(self.events)

    @property
    def t_final(self) -> float:
        """The time reached (``t_end`` on success)."""
        return float(self.t[-1])

    @property
    def final(self) -> Params:
        """Parameters at the time reached."""
        return Params.unpacked(self.states[-1], self.problem.bias)

    # ----- dense output -------------------------------------------------------------------------------------
    def _packed_at(self, times: np.ndarray) -> np.ndarray:
        times = np.asarray(times, dtype=np.float64)
        if np.any(~np.isfinite(times)) or np.any(times < self.t[0]) or np.any(times > self.t[-1]):
            raise ValueError(f"t must lie in [{self.t[0]}, {self.t[-1]}], the interval the run covered")
        if self.coefficients is None:
            out = np.empty(times.shape + self.states.shape[1:])
            for k, tk in enumerate(times.ravel()):
                hits = np.flatnonzero(self.t == tk)
                hits_eval = np.flatnonzero(self.t_eval == tk)
                if len(hits):
                    out.reshape(-1, *self.states.shape[1:])[k] = self.states[hits[0]]
                elif len(hits_eval):
                    out.reshape(-1, *self.states.shape[1:])[k] = self.states_eval[hits_eval[0]]
                else:
                    raise ValueError("t is not a step boundary or a t_eval time, and the run kept no dense "
                                     "output: rerun with dense_output=True or t_eval")
            return out
        step = np.clip(np.searchsorted(self.t, times, side="right") - 1, 0, self.n_steps - 1)
        tau = times - self.t[step]
        C = self.coefficients[step]  # (..., K+1, m, w)
        acc = C[..., self.order, :, :]
        for k in range(self.order - 1, -1, -1):
            acc = acc * tau[..., None, None] + C[..., k, :, :]
        return acc

    def params_at(self, t: float) -> Params:
        """Parameters at time ``t`` from the Taylor polynomials (dense output).

        Raises
        ------
        ValueError
            If ``t`` lies outside the interval the run covered.
        """
        if self.n_steps == 0:
            return self.final
        return Params.unpacked(self._packed_at(np.float64(t)), self.problem.bias)

    def states_at(self, times) -> np.ndarray:
        """Packed states ``(w_j, b_j, a_j)`` at an array of times, shape ``(len(times), m, d + 2)``."""
        times = np.atleast_1d(np.asarray(times, dtype=np.float64))
        if self.n_steps == 0:
            return np.repeat(self.states[:1], len(times), axis=0)
        return self._packed_at(times)

    def loss_at(self, t):
        """Loss at time(s) ``t`` (scalar in, scalar out)."""
        times = np.atleast_1d(np.asarray(t, dtype=np.float64))
        p = self.problem
        values = driver.loss_along(p.augmented_inputs, p.y, p.loss_code, p.scale, p.leak,
                                   np.ascontiguousarray(self.states_at(times)))
        return float(values[0]) if np.ndim(t) == 0 else values

    # ----- diagnostics --------------------------------------------------------------------------------------
    @property
    def balancedness(self) -> np.ndarray:
        """``a_j^2 - |w_j|^2 - b_j^2`` at the step boundaries, shape ``(n_steps + 1, m)``."""
        s = self.states
        return s[:, :, -1] ** 2 - np.sum(s[:, :, :-1] ** 2, axis=2)

    @property
    def balancedness_drift(self) -> float:
        """``max_t max_j |Delta_j(t) - Delta_j(0)| / max_t max_j (a_j^2 + |w_j|^2 + b_j^2)``.

        Exactly 0 along the flow when ``a`` is trained (DESIGN.md §1), whatever ``sigma'(0)``; NaN when ``a``
        is fixed (the quantity is not conserved then).
        """
        if not self.problem.train_outer:
            return float("nan")
        bal = self.balancedness
        norm = np.max(np.sum(self.states**2, axis=2))
        return float(np.max(np.abs(bal - bal[0])) / norm) if norm > 0 else 0.0

    @property
    def energy_residual(self) -> float:
        """``|L(t0) - L(t1) - int |theta'|^2 dt| / max(L(t0), int |theta'|^2 dt)`` over the run.

        The energy identity ``dL/dt = -|theta'|^2`` holds exactly along the flow (DESIGN.md §1).
        """
        if self.n_steps == 0:
            return 0.0
        dissipated = float(np.sum(self.energy))
        scale = max(float(self.loss[0]), dissipated)
        return abs(float(self.loss[0] - self.loss[-1]) - dissipated) / scale if scale > 0 else 0.0

    def event_table(self, limit: int | None = None) -> str:
        """The events as a fixed-width text table (``limit`` rows at most)."""
        lines = [f"{'t':>22}  {'kind':<11} {'neuron':>6} {'sample':>6} {'side':>5} {'multiplier':>12}"]
        for ev in self.events[:limit]:
            side = f"{ev.side:+d}" if ev.side else "0"
            mult = "" if np.isnan(ev.multiplier) else f"{ev.multiplier:.6g}"
            lines.append(f"{ev.t:22.16g}  {ev.kind:<11} {ev.neuron:6d} {ev.sample:6d} {side:>5} {mult:>12}")
        if limit is not None and len(self.events) > limit:
            lines.append(f"... {len(self.events) - limit} more")
        return "\n".join(lines)

    def summary(self) -> str:
        """A few lines: status, time reached, steps, events, loss, diagnostics."""
        lines = [f"status {self.status}: {self.message}",
                 f"t = {self.t[0]:g} -> {self.t_final:.16g} in {self.n_steps} Taylor steps (order {self.order}, "
                 f"rtol {self.rtol:g}), {self.n_events} events, {self.wall_s * 1e3:.2f} ms",
                 f"loss {self.loss[0]:.16g} -> {self.loss[-1]:.16g}",
                 f"energy-identity residual {self.energy_residual:.2e}"]
        if self.problem.train_outer:
            lines.append(f"balancedness drift {self.balancedness_drift:.2e}")
        return "\n".join(lines)

    # ----- persistence --------------------------------------------------------------------------------------
    def save(self, path) -> Path:
        """Write the result to ``path`` (``.npz``; metadata as a JSON string, loadable without pickle)."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_suffix(".npz")
        ev = self.events
        meta = {"schema": 1, "flowlib": __version__, "kind": "FlowResult", "problem": self.problem.to_dict(),
                "status": self.status.value, "message": self.message, "order": self.order, "rtol": self.rtol,
                "wall_s": self.wall_s, "options": self.options, "event_kinds": [e.kind for e in ev],
                "dense": self.coefficients is not None}
        arrays = dict(t=self.t, states=self.states, loss=self.loss, energy=self.energy, t_eval=self.t_eval,
                      states_eval=self.states_eval, event_t=np.array([e.t for e in ev], dtype=float),
                      event_neuron=np.array([e.neuron for e in ev], dtype=np.int64),
                      event_sample=np.array([e.sample for e in ev], dtype=np.int64),
                      event_side=np.array([e.side for e in ev], dtype=np.int64),
                      event_multiplier=np.array([e.multiplier for e in ev], dtype=float),
                      meta=np.array(json.dumps(meta)))
        if self.coefficients is not None:
            arrays["coefficients"] = self.coefficients
        np.savez_compressed(path, **arrays)
        return path


def load(path) -> FlowResult:
    """Read a result written by :meth:`FlowResult.save`.

    Raises
    ------
    ValueError
        If ``path`` is not a flowlib result file.
    """
    with np.load(Path(path), allow_pickle=False) as data:
        if "meta" not in data:
            raise ValueError(f"path {path!s} is not a flowlib result (no metadata)")
        meta = json.loads(str(data["meta"]))
        if meta.get("kind") != "FlowResult":
            raise ValueError(f"path {path!s} holds a {meta.get('kind')!r}, not a FlowResult")
        events = tuple(Event(float(t), kind, int(j), int(i), int(s), float(mu)) for t, kind, j, i, s, mu in
                       zip(data["event_t"], meta["event_kinds"], data["event_neuron"], data["event_sample"],
                           data["event_side"], data["event_multiplier"]))
        return FlowResult(problem=Problem(**meta["problem"]), t=data["t"], states=data["states"],
                          loss=data["loss"], energy=data["energy"], events=events, status=Status(meta["status"]),
                          message=meta["message"], coefficients=data["coefficients"] if meta["dense"] else None,
                          t_eval=data["t_eval"], states_eval=data["states_eval"], order=meta["order"],
                          rtol=meta["rtol"], wall_s=meta["wall_s"], options=meta["options"])
