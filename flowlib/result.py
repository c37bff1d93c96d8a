"""Result containers: :class:`Status`, :class:`Event`, :class:`FlowResult`, and saving/loading them.

Arrays are time-major: ``res.W[k]`` is the weight matrix at ``res.t[k]`` (unlike SciPy's ``y[:, k]``).
"""

from __future__ import annotations

import functools
import json
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from flowlib import __version__
from flowlib.dense import DenseOutput, Numbers, check_interval
from flowlib.kernels import driver, events as kevents
from flowlib.problem import Params, Problem
from flowlib.reprs import Summarised
from flowlib.statuses import Status


def _check_limit(limit) -> None:
    """``ValueError`` naming ``limit`` unless it is ``None`` or an integer ``>= 0`` (a table's row limit)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 0):
        raise ValueError(f"limit must be None or an integer >= 0, got {limit!r}")


EVENT_KINDS = {kevents.EVENT_CROSS: "cross", kevents.EVENT_SLIDE_START: "slide_start",
               kevents.EVENT_SLIDE_END: "slide_end", kevents.EVENT_STICK: "stick", kevents.EVENT_TIE: "tie",
               kevents.EVENT_ZENO: "zeno"}
_EVENT_CODES = {name: code for code, name in EVENT_KINDS.items()}
#: ``_KNOWN_KIND[code]``: ``code`` (``0 <= code < len``) is a key of :data:`EVENT_KINDS`
_KNOWN_KIND = np.isin(np.arange(max(EVENT_KINDS) + 1), list(EVENT_KINDS))


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


#: the columns of every empty :class:`EventLog` (:meth:`EventLog.empty`), shared: read-only, and holding nothing
_EMPTY_EVENT_COLUMNS = tuple(_read_only(np.empty(0, dtype)) for dtype in (np.float64, np.int8, np.int64, np.int64,
                                                                           np.int64, np.float64))


def _known_codes(codes: np.ndarray) -> bool:
    """Every entry of the integer array ``codes`` is a kind code (a table lookup: a run's log is checked in
    microseconds, where ``np.isin`` takes ~80 us)."""
    if codes.dtype.kind not in "iub" or codes.min() < 0 or codes.max() >= len(_KNOWN_KIND):
        return False
    return bool(_KNOWN_KIND[codes].all())


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
        The switching surface ``<w_neuron, x_sample> + b_neuron = 0`` (for ``zeno``: that of the first event of
        the accumulating cycle's last instant).
    side : int
        The side entered: +1 the active side (``z > 0``), -1 the inactive one, 0 when the state stays on the
        surface (``slide_start``, ``stick``, and ``tie`` with the default policy) and for ``zeno``.
    multiplier : float
        The slope ``s`` in ``[leak, 1]`` the minimal-norm velocity uses on this surface (the Filippov multiplier)
        for ``slide_start``, ``slide_end``, ``stick`` and ``tie``; NaN for ``cross``; for ``zeno`` (an
        accumulation of events passed to its limit, docs/design.md, *Zeno points*) the time ratio per cycle.
    """

    t: float
    kind: str
    neuron: int
    sample: int
    side: int
    multiplier: float = float("nan")


def _same(mine, theirs) -> bool:
    """Equal values, NaN counted equal to NaN (a crossing's multiplier; float or mpf)."""
    return bool(mine == theirs) or (mine != mine and theirs != theirs)


def _same_column(mine: np.ndarray, theirs: np.ndarray) -> bool:
    """Equal columns of two logs, NaN counted equal to NaN (entry by entry where one holds mpf objects)."""
    if mine.shape != theirs.shape:
        return False
    if mine.dtype != object and theirs.dtype != object:
        return np.array_equal(mine, theirs, equal_nan=mine.dtype.kind == theirs.dtype.kind == "f")
    return all(_same(x, y) for x, y in zip(mine.tolist(), theirs.tolist()))


def _scalar(value):
    """An entry of a column as a Python number (an mpf object stays one)."""
    return value.item() if isinstance(value, np.generic) else value


def _number_column(values) -> np.ndarray:
    """Real numbers as a flat column: float64, or ``dtype=object`` where they are mpf objects."""
    column = np.asarray(values)
    return column.reshape(-1) if column.dtype == object else column.astype(np.float64).reshape(-1)


def _integer_column(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64).reshape(-1)


class _ColumnLog(Sequence):
    """A sequence of frozen dataclass records kept as columns, one array per field of the record (the shared
    machinery of :class:`EventLog` and :class:`FlipLog`).

    A record is made when an item is read (``log[k]``, iteration); a slice is a log of the same kind. A log compares
    equal to another of its kind with the same columns, or to a tuple or list of the same records; NaN entries (a
    crossing's multiplier) count as equal.

    Subclasses name their columns in ``__slots__`` (in the order of the record's fields) and make a record from
    one entry of each in :meth:`_record`.
    """

    __slots__ = ()

    def _set_columns(self, columns: list) -> None:
        """Keep ``columns`` (flat arrays, in the order of ``__slots__``), refusing different lengths."""
        lengths = [len(column) for column in columns]
        if len(set(lengths)) != 1:
            names = self.__slots__
            raise ValueError(f"{', '.join(names[:-1])} and {names[-1]} must have the same length, got {lengths}")
        for name, column in zip(self.__slots__, columns):
            setattr(self, name, column)

    def _columns(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def _record(self, *values):
        """The record of one entry of each column (Python numbers)."""
        raise NotImplementedError

    def __len__(self) -> int:
        return len(getattr(self, self.__slots__[0]))

    def __getitem__(self, index):
        if isinstance(index, slice):
            log = object.__new__(type(self))
            log._set_columns([column[index] for column in self._columns()])
            return log
        index = operator.index(index)
        return self._record(*(_scalar(column[index]) for column in self._columns()))

    def __iter__(self):
        return (self._record(*values) for values in zip(*(column.tolist() for column in self._columns())))

    def __eq__(self, other) -> bool:
        if isinstance(other, type(self)):
            return all(_same_column(mine, theirs) for mine, theirs in zip(self._columns(), other._columns()))
        if isinstance(other, (tuple, list)):
            return len(other) == len(self) and all(
                type(mine) is type(theirs) and all(_same(getattr(mine, name.name), getattr(theirs, name.name))
                                                   for name in fields(mine)) for mine, theirs in zip(self, other))
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} {self._noun})"


class EventLog(_ColumnLog):
    """The events of a flow, in time order: a sequence of :class:`Event` kept as six arrays.

    An :class:`Event` is made when an item is read (``log[k]``, iteration); a slice is an :class:`EventLog`. Runs
    with ``10^5`` events would take long to build as Python objects, and the columns serve counting and plotting
    directly. Compares equal to another log with the same events, or to a tuple or list of the same :class:`Event`
    objects (a NaN multiplier equals NaN).

    Parameters
    ----------
    t : array_like
        Flow times: float64, or mpf objects for an mpmath run (kept as ``dtype=object``).
    kind : array_like of int or str
        Kind codes (the keys of :data:`EVENT_KINDS`), or their names (``"cross"`` ...); kept as ``int8`` codes.
    neuron, sample, side : array_like of int
        The switching surface and the side entered (see :class:`Event`).
    multiplier : array_like, optional
        The Filippov multiplier, NaN for a crossing (float64, or objects for an mpmath run); all NaN when not
        given.

    Attributes
    ----------
    t, multiplier : ndarray
        float64, or ``dtype=object`` holding mpf numbers (an mpmath run).
    kind : ndarray of int8
        Kind codes; ``EVENT_KINDS[code]`` is the name.
    neuron, sample, side : ndarray of int64

    Raises
    ------
    ValueError
        When the columns have different lengths, or a kind is not one of :data:`EVENT_KINDS`.

    Examples
    --------
    >>> from flowlib.result import EventLog
    >>> log = EventLog([0.5, 2.0], ["cross", "stick"], [0, 1], [3, 3], [-1, 0], [float("nan"), 0.25])
    >>> log[1]
    Event(t=2.0, kind='stick', neuron=1, sample=3, side=0, multiplier=0.25)
    >>> len(log[:1]), log.kind.tolist()
    (1, [0, 3])
    """

    __slots__ = ("t", "kind", "neuron", "sample", "side", "multiplier")
    _noun = "events"

    def __init__(self, t=(), kind=(), neuron=(), sample=(), side=(), multiplier=None):
        t = _number_column(t)
        codes = np.asarray(kind).reshape(-1)
        if codes.dtype.kind in "US":
            unknown = sorted(set(codes.tolist()) - set(_EVENT_CODES))
            if unknown:
                raise ValueError(f"kind must hold names from {list(_EVENT_CODES)}, got {unknown}")
            codes = np.array([_EVENT_CODES[name] for name in codes.tolist()], dtype=np.int8)
        elif len(codes) and not _known_codes(codes):
            raise ValueError(f"kind must hold codes from {sorted(EVENT_KINDS)}, got "
                             f"{sorted(set(codes.tolist()) - set(EVENT_KINDS))}")
        multiplier = np.full(len(t), np.nan) if multiplier is None else _number_column(multiplier)
        self._set_columns([t, codes.astype(np.int8), _integer_column(neuron), _integer_column(sample),
                           _integer_column(side), multiplier])

    @classmethod
    def empty(cls) -> EventLog:
        """An empty log, its columns of the types :meth:`__init__` gives them (shared, read-only empty arrays),
        without checking arguments: a few microseconds of a small run without events."""
        return cls._of_columns(_EMPTY_EVENT_COLUMNS)

    @classmethod
    def _of_columns(cls, columns) -> EventLog:
        """The log of ``columns``, flat arrays already of the types :meth:`__init__` gives them (float64 times,
        int8 kind codes, int64 neurons, samples and sides, float64 multipliers) and of one length, kept as they are
        without a check: how a run wraps what its kernel logged (the checks cost ~40 us, a fifth of a small
        flow's call)."""
        log = cls.__new__(cls)
        for name, column in zip(cls.__slots__, columns):
            setattr(log, name, column)
        return log

    def _record(self, t, kind, neuron, sample, side, multiplier) -> Event:
        return Event(t, EVENT_KINDS[kind], neuron, sample, side, multiplier)

    def counts(self) -> np.ndarray:
        """Number of events of each kind code, ``counts()[code]`` (``len(EVENT_KINDS)`` entries)."""
        return np.bincount(self.kind, minlength=len(EVENT_KINDS))


class _PackedViews:
    """``W``, ``b``, ``a`` views of the packed ``states`` (rows ``(w_j, b_j, a_j)``; time-major) of a result."""

    @property
    def W(self) -> np.ndarray:
        """Inner weights, shape ``(len(states), m, d)``."""
        return self.states[:, :, : self.problem.d]

    @property
    def b(self) -> np.ndarray | None:
        """Biases, shape ``(len(states), m)``, or ``None`` without bias."""
        return self.states[:, :, self.problem.d] if self.problem.bias else None

    @property
    def a(self) -> np.ndarray:
        """Outer weights, shape ``(len(states), m)``."""
        return self.states[:, :, self.problem.d + 1]


@dataclass(frozen=True, repr=False)
class FlowResult(_PackedViews, Summarised):
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
    events : EventLog
        Time-ordered: a sequence of :class:`Event` (made on access) kept as columns (``events.t``,
        ``events.kind`` ...).
    status : Status
    message : str
    coefficients : ndarray, shape (n_steps, order + 1, m, d + 2), or None
        Taylor coefficients of each step (the dense output, evaluated by :attr:`dense`); ``None`` when the run
        kept no dense output.
    t_eval, states_eval : ndarray
        Times requested with ``t_eval`` and the packed states there.
    order, rtol : int, float
        Taylor order and tolerance used.
    wall_s : float
        Wall time of the integration (compilation excluded, see :func:`flowlib.warmup`).
    dps : int or None
        Decimal digits of an mpmath run (``gradient_flow(..., dps=N)``): ``t``, ``states``, ``loss``, ``energy``,
        ``coefficients``, the ``t_eval`` arrays and the events' ``t`` and ``multiplier`` then hold mpf numbers
        (``dtype=object``), and the methods below compute at ``dps`` digits. ``None`` for float64.
    clock : {"t", "log"}
        The integration variable: flow time, or ``s = ln(1 + t)`` (the long-horizon and log-time modes); the
        Taylor coefficients are polynomials in it.
    s : ndarray or None
        ``ln(1 + t)`` at the step boundaries in the log clock (``t`` overflows to ``inf`` past ``1.8e308``;
        :attr:`log_t` is ``ln t``).
    log_loss : ndarray or None
        ``ln L`` at the step boundaries, computed in the log domain in the log clock (``loss`` underflows to 0
        past ``L = 1e-308``).
    inclusion_residual : float
        The largest distance, over the step starts (every event starts a step), of the velocity the integrator
        followed to the Filippov set of the state (the image of the slope box on the surfaces each neuron sits
        on), relative to ``|theta'|``: rounding for a solution of the inclusion (docs/design.md, Statuses and
        diagnostics). NaN when not computed (the mpmath backend).
    """

    problem: Problem
    t: np.ndarray
    states: np.ndarray
    loss: np.ndarray
    energy: np.ndarray
    events: EventLog
    status: Status
    message: str
    coefficients: np.ndarray | None
    t_eval: np.ndarray
    states_eval: np.ndarray
    order: int
    rtol: float
    wall_s: float = 0.0
    options: dict = field(default_factory=dict)
    dps: int | None = None
    clock: str = "t"
    s: np.ndarray | None = None
    log_loss: np.ndarray | None = None
    inclusion_residual: float = float("nan")

    @functools.cached_property
    def _numbers(self) -> Numbers:
        """The number type of the run (float64, or mpf at ``dps`` digits): its precision context, conversions and
        elementary functions."""
        return Numbers.at(self.dps)

    def _precision(self):
        """``mp.workdps(dps)`` for an mpmath run (arithmetic on mpf outside it would round to 15 digits)."""
        return self._numbers.context()

    # ----- views --------------------------------------------------------------------------------------------
    @property
    def success(self) -> bool:
        """True when ``status == "success"``."""
        return self.status == Status.SUCCESS

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

    def float64(self, name: str) -> np.ndarray:
        """Attribute ``name`` (``"t"``, ``"states"``, ``"loss"`` ...) as float64 (rounded for an mpmath run)."""
        return np.asarray(getattr(self, name), dtype=np.float64)

    @property
    def final(self) -> Params:
        """Parameters at the time reached, as float64 (rounded to nearest for an mpmath run, whose full precision
        is ``states[-1]``)."""
        return Params.unpacked(np.asarray(self.states[-1], dtype=np.float64), self.problem.bias)

    # ----- dense output -------------------------------------------------------------------------------------
    @property
    def _grid(self) -> np.ndarray:
        """The integration variable at the step boundaries: ``t``, or ``s = ln(1 + t)`` in the log clock."""
        return self.s if self.clock == "log" else self.t

    @functools.cached_property
    def dense(self) -> DenseOutput | None:
        """The dense output: the step polynomials as a callable :class:`~flowlib.dense.DenseOutput` (the role of
        SciPy's ``OdeSolution``), evaluated at values of the integration variable (``t``, or ``s = ln(1 + t)``
        in the log clock; :meth:`states_at` takes times). ``None`` when the run kept no dense output
        (``dense_output=False``) or took no step."""
        if self.coefficients is None or self.n_steps == 0:
            return None
        return DenseOutput(self._grid, self.coefficients, self.order, self._numbers, clock=self.clock,
                           t_span=(self.t[0], self.t[-1]))

    @property
    def log_t(self) -> np.ndarray:
        """``ln t`` at the step boundaries (``-inf`` at ``t = 0``); exact also where ``t`` overflows."""
        numbers = self._numbers
        with numbers.context(), np.errstate(divide="ignore"):
            if self.clock != "log":
                return numbers.log(self.t)
            return self.s + numbers.log(-numbers.expm1(-self.s))

    def _variable(self, t=None, log_t=None) -> np.ndarray:
        """Times (``t`` or ``ln t``, exactly one given) as values of the integration variable (an array)."""
        if (t is None) == (log_t is None):
            raise ValueError("give exactly one of t and log_t")
        numbers = self._numbers
        if log_t is not None:
            given = numbers.convert(log_t)
            return numbers.softplus(given) if self.clock == "log" else numbers.exp(given)
        given = numbers.convert(self._ends_by_float(t))
        return numbers.log1p(given) if self.clock == "log" else given

    def _ends_by_float(self, t):
        """``t`` with each float64 equal to ``float(t[0])`` or ``float(t[-1])`` (:attr:`t_final`) replaced by that end
        of an mpmath run, exactly: the end of a 30-digit run in the log clock, ``expm1(s_end)``, may round up to a
        float64 beyond it, and the time reached must still name the time reached."""
        if self.dps is None or isinstance(t, str):
            return t
        ends = {float(self.t[0]): self.t[0], float(self.t[-1]): self.t[-1]}
        if isinstance(t, (float, np.floating)):
            return ends.get(float(t), t)
        values = np.asarray(t)
        if values.dtype.kind != "f":
            return t
        out = values.astype(object)
        for index, value in np.ndenumerate(values):
            out[index] = ends.get(float(value), value)
        return out

    def _packed_at(self, u: np.ndarray) -> np.ndarray:
        """The packed states at the values ``u`` of the integration variable: from the dense output, or without
        one, from the states kept at the step boundaries and the ``t_eval`` times."""
        if self.dense is not None:
            return self.dense(u)
        grid = self._grid
        with self._precision():
            check_interval(u, grid, (self.t[0], self.t[-1]))
            u_eval = self._numbers.log1p(self.t_eval) if self.clock == "log" else self.t_eval
            out = np.empty(u.shape + self.states.shape[1:], dtype=self.states.dtype)
            for k, uk in enumerate(u.ravel()):
                hits = np.flatnonzero(grid == uk)
                hits_eval = np.flatnonzero(u_eval == uk)
                if len(hits):
                    out.reshape(-1, *self.states.shape[1:])[k] = self.states[hits[0]]
                elif len(hits_eval):
                    out.reshape(-1, *self.states.shape[1:])[k] = self.states_eval[hits_eval[0]]
                else:
                    raise ValueError("t is not a step boundary or a t_eval time, and the run kept no dense "
                                     "output: rerun with dense_output=True or t_eval")
            return out

    def params_at(self, t: float | None = None, *, log_t: float | None = None) -> Params:
        """Parameters at time ``t`` (or at ``ln t = log_t``) from the Taylor polynomials (dense output), as float64.

        For the full precision of an mpmath run use :meth:`states_at` (``t`` may then be an mpf or a string); there
        the float64 :attr:`t_final` names the time reached exactly, even where it rounds beyond it.

        Raises
        ------
        ValueError
            If the time lies outside the interval the run covered.
        """
        if self.n_steps == 0:
            return self.final
        u = self._variable(t, log_t)
        return Params.unpacked(np.asarray(self._packed_at(u), dtype=np.float64), self.problem.bias)

    def states_at(self, times=None, *, log_t=None) -> np.ndarray:
        """Packed states ``(w_j, b_j, a_j)`` at an array of times ``t`` (or of ``ln t``), shape
        ``(len(times), m, d + 2)``."""
        u = np.atleast_1d(self._variable(times, log_t))
        if self.n_steps == 0:
            return np.repeat(self.states[:1], len(u), axis=0)
        return self._packed_at(u)

    def log_loss_at(self, t=None, *, log_t=None):
        """``ln L`` at time(s) ``t`` (or ``ln t``), computed in the log domain: finite where ``L`` underflows
        (``t = 1e300``, ``ln t = 1e5``). Scalar in, scalar out."""
        return self._loss_at(t, log_t, log=True)

    def loss_at(self, t=None, *, log_t=None):
        """Loss at time(s) ``t`` (or ``ln t``); scalar in, scalar out."""
        return self._loss_at(t, log_t, log=False)

    def _loss_at(self, t, log_t, log: bool):
        scalar = np.ndim(t if log_t is None else log_t) == 0
        states = self.states_at(t, log_t=log_t)
        if self.dps is not None:
            from flowlib.mp import series as mpseries

            with self._precision():
                data = mpseries.MPData.from_problem(self.problem)
                values = np.array([mpseries.loss_at_state(data, [list(row) for row in state], log=log)
                                   for state in states], dtype=object)
            return values[0] if scalar else values
        p = self.problem
        values = driver.loss_along(p.augmented_inputs, p.y, p.loss_code, p.scale, p.leak, p.bias, p.train_outer,
                                   p.weight_decay, np.ascontiguousarray(states), log)
        return float(values[0]) if scalar else values

    # ----- asymptotics (flowlib.asymptotics) -----------------------------------------------------------------
    def _states_or_grid(self, t, log_t) -> np.ndarray:
        return self.states if t is None and log_t is None else self.states_at(t, log_t=log_t)

    def normalized_margin(self, t=None, *, log_t=None) -> np.ndarray:
        """``min_i y_i f(x_i) / |theta|^h`` at the step boundaries, or at times ``t`` / ``ln t``
        (:func:`flowlib.asymptotics.normalized_margin`)."""
        from flowlib import asymptotics

        with self._precision():
            return asymptotics.normalized_margin(self.problem, self._states_or_grid(t, log_t))

    def direction(self, t=None, *, log_t=None) -> np.ndarray:
        """``theta / |theta|`` over the trained parameters (:func:`flowlib.asymptotics.direction`)."""
        from flowlib import asymptotics

        with self._precision():
            return asymptotics.direction(self.problem, self._states_or_grid(t, log_t))

    def decision_boundary(self, t=None, *, log_t=None) -> np.ndarray:
        """For 1-D inputs, where ``f`` changes sign (:func:`flowlib.asymptotics.decision_boundary`)."""
        from flowlib import asymptotics

        with self._precision():
            return asymptotics.decision_boundary(self.problem, self._states_or_grid(t, log_t))

    # ----- diagnostics --------------------------------------------------------------------------------------
    @property
    def balancedness(self) -> np.ndarray:
        """``a_j^2 - |w_j|^2 - b_j^2`` at the step boundaries, shape ``(n_steps + 1, m)``."""
        s = self.states
        return s[:, :, -1] ** 2 - np.sum(s[:, :, :-1] ** 2, axis=2)

    @property
    def balancedness_drift(self) -> float:
        """``max_t max_j |Delta_j(t) - Delta_j(0) e^(-2 lambda t)| / max_t max_j (a_j^2 + |w_j|^2 + b_j^2)``.

        Exactly 0 along the flow when ``a`` is trained (docs/design.md, Statuses and diagnostics), whatever
        ``sigma'(0)``: ``Delta_j`` is conserved, and with weight decay ``lambda`` it decays exactly like
        ``e^(-2 lambda t)``. NaN when ``a`` is fixed (the quantity is not conserved then) or a state is not finite.
        """
        if not self.problem.train_outer:
            return float("nan")
        with self._precision():
            bal = self.balancedness
            norm = np.max(np.sum(self.states**2, axis=2))
            if not _finite(norm):
                return float("nan")
            expected = bal[0]
            decay = self.problem.weight_decay
            if decay:  # the t clock (the log clock has no weight decay)
                exp = self._numbers.functions.exp
                expected = np.array([exp(-2 * decay * t) for t in self.t], dtype=bal.dtype)[:, None] * bal[0]
            return float(np.max(np.abs(bal - expected)) / norm) if norm > 0 else 0.0

    @property
    def energy_residual(self) -> float:
        """``|L(t0) - L(t1) - int |theta'|^2 dt| / max(L(t0), int |theta'|^2 dt)`` over the run.

        The energy identity ``dL/dt = -|theta'|^2`` holds exactly along the flow (docs/design.md, Statuses and
        diagnostics).
        """
        if self.n_steps == 0:
            return 0.0
        with self._precision():
            dissipated = np.sum(self.energy)
            if not all(_finite(v) for v in (dissipated, self.loss[0], self.loss[-1])):
                return float("nan")  # not a residual of 0 hidden by a NaN comparison
            scale = max(self.loss[0], dissipated)
            return float(abs(self.loss[0] - self.loss[-1] - dissipated) / scale) if scale > 0 else 0.0

    def event_table(self, limit: int | None = None) -> str:
        """The events as a fixed-width text table (``limit`` rows at most; ``ValueError`` naming ``limit`` unless it
        is ``None`` or an integer ``>= 0``)."""
        _check_limit(limit)
        lines = [f"{'t':>22}  {'kind':<11} {'neuron':>6} {'sample':>6} {'side':>5} {'multiplier':>12}"]
        for ev in self.events[:limit]:
            side = f"{ev.side:+d}" if ev.side else "0"
            mult = "" if np.isnan(float(ev.multiplier)) else f"{float(ev.multiplier):.6g}"
            lines.append(f"{float(ev.t):22.16g}  {ev.kind:<11} {ev.neuron:6d} {ev.sample:6d} {side:>5} {mult:>12}")
        if limit is not None and len(self.events) > limit:
            lines.append(f"... {len(self.events) - limit} more")
        return "\n".join(lines)

    @property
    def event_counts(self) -> dict:
        """Number of events of each kind, in the order of :data:`EVENT_KINDS` (every kind present, zeros included)."""
        by_code = self.events.counts()
        return {name: int(by_code[code]) for code, name in EVENT_KINDS.items()}

    def summary(self) -> str:
        """A few lines: status, time reached, steps, events (by kind), loss, diagnostics."""
        precision = self._numbers.name
        kinds = ", ".join(f"{kind} {count}" for kind, count in self.event_counts.items() if count)
        lines = [f"status {self.status}: {self.message}",
                 f"t = {float(self.t[0]):g} -> {self.t_final:.16g} in {self.n_steps} Taylor steps (order {self.order}, "
                 f"rtol {self.rtol:g}, {precision}), {self.n_events} events{f' ({kinds})' if kinds else ''}, "
                 f"{self.wall_s * 1e3:.2f} ms",
                 f"loss {float(self.loss[0]):.16g} -> {float(self.loss[-1]):.16g}",
                 f"energy-identity residual {_diagnostic(self.energy_residual, 'a loss or energy')}"]
        if not math.isnan(self.inclusion_residual):
            lines.append(f"inclusion residual {self.inclusion_residual:.2e} (velocity to the Filippov set)")
        if self.problem.train_outer:
            lines.append(f"balancedness drift {_diagnostic(self.balancedness_drift, 'a state')}")
        return "\n".join(lines)

    def _summary_fields(self) -> list:
        """Status, time reached, steps, events, final loss and shapes (the ``repr`` and the notebook table)."""
        fields = [("status", self.status)]
        if math.isfinite(self.t_final):
            fields.append(("t_final", self.t_final))
        else:
            fields.append(("ln_t_final", float(self.log_t[-1])))
        fields += [("n_steps", self.n_steps), ("n_events", self.n_events), ("loss", float(self.loss[-1])),
                   ("m", self.states.shape[1]), ("n", self.problem.n), ("d", self.problem.d)]
        if self.clock != "t":
            fields.append(("clock", self.clock))
        if self.dps is not None:
            fields.append(("dps", self.dps))
        return fields

    # ----- persistence --------------------------------------------------------------------------------------
    def save(self, path) -> Path:
        """Write the result to ``path`` (``.npz``; metadata as a JSON string, loadable without pickle).

        The numbers of an mpmath run are stored as decimal strings that :func:`flowlib.load` reads back into the
        very same mpf numbers.
        """
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_suffix(".npz")
        ev = self.events
        meta = {"schema": SAVE_SCHEMA, "flowlib": __version__, "kind": "FlowResult", "problem": self.problem.to_dict(),
                "status": self.status.value, "message": self.message, "order": self.order, "rtol": self.rtol,
                "wall_s": self.wall_s, "options": self.options,
                "event_kinds": [EVENT_KINDS[code] for code in ev.kind.tolist()],
                "dense": self.coefficients is not None, "dps": self.dps, "clock": self.clock,
                "inclusion_residual": None if math.isnan(self.inclusion_residual) else self.inclusion_residual}
        numbers = {"t": self.t, "states": self.states, "loss": self.loss, "energy": self.energy,
                   "t_eval": self.t_eval, "states_eval": self.states_eval,
                   "event_t": ev.t, "event_multiplier": ev.multiplier}
        if self.coefficients is not None:
            numbers["coefficients"] = self.coefficients
        if self.s is not None:
            numbers["s"] = self.s
        if self.log_loss is not None:
            numbers["log_loss"] = self.log_loss
        arrays = {name: numbers_to_text(values, self.dps) if self.dps else np.asarray(values, dtype=np.float64)
                  for name, values in numbers.items()}
        arrays.update(event_neuron=ev.neuron, event_sample=ev.sample, event_side=ev.side,
                      meta=np.array(json.dumps(meta)))
        np.savez_compressed(path, **arrays)
        return path


def _finite(value) -> bool:
    """``value`` (float64 or mpf: beyond float64's range is still finite) is finite."""
    if type(value).__name__ == "mpf":
        return bool(_mp().isfinite(value))
    return bool(np.isfinite(value))


def _diagnostic(value: float, what: str) -> str:
    """A diagnostic for :meth:`FlowResult.summary`: its value, or why there is none (never a number computed
    from a NaN)."""
    return f"{value:.2e}" if np.isfinite(value) else f"not available ({what} is not finite)"


def _mp():
    from mpmath import mp

    return mp


#: Layout of the saved files this flowlib writes (the ``schema`` field of their metadata); newer ones are refused.
SAVE_SCHEMA = 1


def numbers_to_text(values, dps: int) -> np.ndarray:
    """mpf numbers (any shape, ``dtype=object``; NaN floats allowed) as decimal strings that round-trip at ``dps``."""
    from mpmath import mp, mpf
    from mpmath.libmp import repr_dps

    with mp.workdps(dps):
        digits = repr_dps(mp.prec)
        flat = [mp.nstr(mpf(v), digits, strip_zeros=False, min_fixed=1, max_fixed=0) for v in
                np.asarray(values, dtype=object).ravel()]
    return np.array(flat, dtype=str).reshape(np.shape(values))


def numbers_from_text(values, dps: int) -> np.ndarray:
    """Inverse of :func:`numbers_to_text`: an object array of mpf at ``dps`` digits."""
    from mpmath import mp, mpf

    with mp.workdps(dps):
        flat = [mpf(str(v)) for v in np.asarray(values).ravel()]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(np.shape(values))


@dataclass(frozen=True)
class Flip:
    """One activation flip of gradient descent.

    Attributes
    ----------
    k : int
        The iterate at which ``z_ij = <w_j, x_i> + b_j`` is first on its new side (iterate ``k - 1`` was on the
        other one); compare with the flow at ``t = k * lr``.
    neuron, sample : int
        The switching surface ``<w_neuron, x_sample> + b_neuron = 0``.
    side : int
        The side entered: +1 ``z > 0``, -1 ``z <= 0``.
    """

    k: int
    neuron: int
    sample: int
    side: int


class FlipLog(_ColumnLog):
    """The flips of a gradient-descent run, in order: a sequence of :class:`Flip` kept as four integer arrays.

    A :class:`Flip` is made when an item is read: a run that chatters logs up to a million flips, whose Python
    objects would take ~1.7 s and ~100 MB to build. Compares equal to another log with the same flips, or to a
    tuple or list of the same :class:`Flip` objects.

    Parameters
    ----------
    k, neuron, sample, side : array_like of int
        One entry per flip (see :class:`Flip`); all four of one length.

    Raises
    ------
    ValueError
        When the four have different lengths.
    """

    __slots__ = ("k", "neuron", "sample", "side")
    _noun = "flips"

    def __init__(self, k=(), neuron=(), sample=(), side=()):
        self._set_columns([_integer_column(values) for values in (k, neuron, sample, side)])

    def _record(self, k, neuron, sample, side) -> Flip:
        return Flip(k, neuron, sample, side)


@dataclass(frozen=True, repr=False)
class DescentResult(_PackedViews, Summarised):
    """Gradient descent ``theta_{k+1} = theta_k - lr (g_k + lambda theta_k)`` from one initialisation: full batch
    (``g_k = grad L(theta_k)``, :func:`flowlib.gradient_descent`) or mini-batch (:attr:`method` ``"sgd"``,
    :func:`flowlib.stochastic_gradient_descent`); ``lambda = problem.weight_decay`` on the trained parameters.

    Attributes
    ----------
    problem : Problem
    lr : float
        Step size.
    steps : int
        Iterations done (the index of the last iterate).
    iterations : ndarray of int64, shape (n_rec,)
        Recorded iteration indices, increasing, from 0 to ``steps`` (the last iterate is always recorded).
    states : ndarray, shape (n_rec, m, d + 2)
        Packed parameters ``(w_j, b_j, a_j)`` at the recorded iterates: float64, or ``dtype=object`` holding
        mpmath ``mpf`` at ``dps`` digits for an arbitrary-precision run.
    loss : ndarray, shape (n_rec,)
        Objective ``L + lambda/2 |theta_trained|^2`` at the recorded iterates (float64, or ``mpf`` objects).
    flips : FlipLog
        Every activation flip, in iteration order (not only at recorded iterates): a sequence of :class:`Flip`,
        with the columns as arrays (``flips.k``, ``flips.neuron``, ``flips.sample``, ``flips.side``).
    status : Status
        ``success``, ``reached`` or ``deadline`` (the stop rule ``until``), ``interrupted``, ``max_events`` (the
        flip budget ``max_events`` used up) or ``failed`` (non-finite state).
    message : str
    dps : int or None
        Decimal digits of an mpmath run, ``None`` for float64.
    selection : float
        ``sigma'(0)``, the slope used where a pre-activation is exactly 0.
    wall_s : float
        Wall time of the iterations (compilation excluded, see :func:`flowlib.warmup`).
    options : dict
        The other arguments of the run (``record_every``, ``max_events``, ``until`` when given; for SGD also
        ``method``, ``batch_size``, ``replacement`` and ``seed``, read by the properties of these names).
    """

    problem: Problem
    lr: float
    steps: int
    iterations: np.ndarray
    states: np.ndarray
    loss: np.ndarray
    flips: FlipLog
    status: Status
    message: str
    dps: int | None = None
    selection: float = 0.0
    wall_s: float = 0.0
    options: dict = field(default_factory=dict)

    # ----- views --------------------------------------------------------------------------------------------
    @property
    def success(self) -> bool:
        """True when ``status == "success"``."""
        return self.status == Status.SUCCESS

    @property
    def method(self) -> str:
        """``"gd"`` (full batch) or ``"sgd"`` (mini-batch); kept in :attr:`options`, so saved with the result."""
        return self.options.get("method", "gd")

    @property
    def batch_size(self) -> int:
        """Samples per mini-batch (``n`` for full-batch gradient descent)."""
        return int(self.options.get("batch_size", self.problem.n))

    @property
    def replacement(self) -> bool | None:
        """Whether SGD drew its batches with replacement (``None`` for full-batch gradient descent)."""
        return self.options.get("replacement")

    @property
    def seed(self) -> int | None:
        """Seed of SGD's ``numpy.random.default_rng`` (``None`` for full-batch gradient descent)."""
        return self.options.get("seed")

    @property
    def times(self) -> np.ndarray:
        """Flow times ``k * lr`` at which the recorded iterates are compared with the flow (float64)."""
        return self.iterations * self.lr

    @property
    def n_flips(self) -> int:
        """Number of activation flips."""
        return len(self.flips)

    def _row(self, k) -> int:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise ValueError(f"k must be an integer iteration index, got {k!r}")
        row = int(np.searchsorted(self.iterations, k))
        if row == len(self.iterations) or self.iterations[row] != k:
            raise ValueError(f"k = {k} is not a recorded iteration (recorded every "
                             f"{self.options.get('record_every', '?')} from 0 to {self.steps}, and the last)")
        return row

    def state_at(self, k) -> np.ndarray:
        """Packed state ``(w_j, b_j, a_j)`` of the recorded iterate ``k``, at the run's precision (a copy).

        Raises
        ------
        ValueError
            If ``k`` is not a recorded iteration.
        """
        return self.states[self._row(k)].copy()

    def params_at(self, k) -> Params:
        """Parameters at the recorded iterate ``k`` (rounded to float64 for an mpmath run; see :meth:`state_at`).

        Raises
        ------
        ValueError
            If ``k`` is not a recorded iteration.
        """
        return Params.unpacked(np.asarray(self.state_at(k), dtype=np.float64), self.problem.bias)

    @property
    def final(self) -> Params:
        """Parameters at the last iterate (rounded to float64 for an mpmath run)."""
        return self.params_at(int(self.iterations[-1]))

    def states_float(self) -> np.ndarray:
        """:attr:`states` as float64 (rounded to nearest for an mpmath run)."""
        return np.asarray(self.states, dtype=np.float64)

    # ----- text ---------------------------------------------------------------------------------------------
    def flip_table(self, limit: int | None = None) -> str:
        """The flips as a fixed-width text table (``limit`` rows at most): iteration, flow time, surface, side.
        ``ValueError`` naming ``limit`` unless it is ``None`` or an integer ``>= 0``."""
        _check_limit(limit)
        lines = [f"{'k':>12} {'t = k lr':>22}  {'neuron':>6} {'sample':>6} {'side':>5}"]
        for fl in self.flips[:limit]:
            lines.append(f"{fl.k:12d} {fl.k * self.lr:22.16g}  {fl.neuron:6d} {fl.sample:6d} {fl.side:+5d}")
        if limit is not None and len(self.flips) > limit:
            lines.append(f"... {len(self.flips) - limit} more")
        return "\n".join(lines)

    def summary(self) -> str:
        """A few lines: status, iterations, flips, loss."""
        precision = "float64" if self.dps is None else f"mpmath at {self.dps} digits"
        rate = f", {self.steps / self.wall_s:.3g} it/s" if self.wall_s > 0 and self.steps else ""
        name = "gradient descent"
        if self.method == "sgd":
            drawn = "with" if self.replacement else "without"
            name = (f"stochastic gradient descent (batch {self.batch_size} of n = {self.problem.n}, {drawn} "
                    f"replacement, seed {self.seed})")
        decay = f", weight decay {self.problem.weight_decay:g}" if self.problem.weight_decay else ""
        return "\n".join([
            f"status {self.status}: {self.message}",
            f"{name} ({precision}), lr = {self.lr!r}, sigma'(0) = {self.selection:g}{decay}: {self.steps} "
            f"iterations (t = {self.steps * self.lr:.6g}), {self.n_flips} flips, {self.wall_s * 1e3:.2f} ms{rate}",
            f"loss {float(self.loss[0]):.16g} -> {float(self.loss[-1]):.16g}"])

    def _summary_fields(self) -> list:
        """Status, step size, iterations, flips, final loss and shapes (the ``repr`` and the notebook table)."""
        fields = [("status", self.status), ("lr", self.lr), ("steps", self.steps), ("t_final", self.steps * self.lr),
                  ("n_flips", self.n_flips), ("loss", float(self.loss[-1])), ("m", self.states.shape[1]),
                  ("n", self.problem.n), ("d", self.problem.d)]
        if self.method == "sgd":
            fields += [("method", "sgd"), ("batch_size", self.batch_size), ("replacement", self.replacement),
                       ("seed", self.seed)]
        if self.problem.weight_decay:
            fields.append(("weight_decay", self.problem.weight_decay))
        return fields + ([("dps", self.dps)] if self.dps is not None else [])

    # ----- persistence --------------------------------------------------------------------------------------
    def save(self, path) -> Path:
        """Write the result to ``path`` (``.npz``; metadata as a JSON string, loadable without pickle).

        The numbers of an mpmath run are stored as decimal strings that :func:`flowlib.load` reads back at ``dps``
        digits into the very same mpf (:func:`numbers_to_text`).
        """
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_suffix(".npz")
        meta = {"schema": SAVE_SCHEMA, "flowlib": __version__, "numpy": np.__version__, "kind": "DescentResult",
                "problem": self.problem.to_dict(), "lr": self.lr, "steps": self.steps, "status": self.status.value,
                "message": self.message, "dps": self.dps, "selection": self.selection, "wall_s": self.wall_s,
                "options": self.options}
        if self.dps is None:
            states, loss = np.asarray(self.states, np.float64), np.asarray(self.loss, np.float64)
        else:
            import mpmath

            meta["mpmath"] = mpmath.__version__
            states, loss = numbers_to_text(self.states, self.dps), numbers_to_text(self.loss, self.dps)
        fl = self.flips
        np.savez_compressed(path, iterations=self.iterations, states=states, loss=loss, flip_k=fl.k,
                            flip_neuron=fl.neuron, flip_sample=fl.sample, flip_side=fl.side,
                            meta=np.array(json.dumps(meta)))
        return path
