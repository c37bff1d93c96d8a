"""How a run ended: the public :class:`Status` and the one table from the kernels' integer codes to it.

The Numba kernels return integer codes (:mod:`flowlib.kernels.status`); :data:`KERNEL_STATUS` says, for each, the
:class:`Status` a run reports and the message it starts with. Every runner reads this one table: the float64 and
the mpmath flow (:func:`flowlib.gradient_flow`), gradient descent and SGD, :meth:`flowlib.PiecewiseAffine.solve`
and :class:`flowlib.EnsembleResult`, so that a member of an ensemble and the same run alone end with the same
status, and both flow backends with the same message. The messages of runs that stop before their end are
composed here too: :func:`ended` (a code of the table), :func:`interrupted` and :func:`used_up` (a budget), each
followed by the place the run stopped (:func:`at_time`, :func:`at_iteration`), and :func:`flow_stop`, the rule of
both flow drivers.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable

from flowlib.kernels import status as kstatus


class Status(str, enum.Enum):
    """How a run ended (docs/design.md, Statuses and diagnostics). Compares equal to its string value:
    ``res.status == "success"``."""

    SUCCESS = "success"
    INTERRUPTED = "interrupted"
    MAX_EVENTS = "max_events"
    MAX_STEPS = "max_steps"
    ZENO = "zeno"
    NO_CARATHEODORY_SOLUTION = "no_caratheodory_solution"
    FAILED = "failed"
    #: a run (or an ensemble member) met its stop rule (:class:`flowlib.Until`)
    REACHED = "reached"
    #: a run's (or an ensemble member's) loss did not go below ``Until.loss_below`` by ``Until.deadline``
    DEADLINE = "deadline"
    #: an ensemble member not computed (yet): the ensemble was interrupted before it ran
    PENDING = "pending"

    def __str__(self) -> str:
        return self.value


#: Code of an ensemble member that was not computed (yet).
PENDING_CODE = -1

#: Kernel code -> (status, message). Messages of budgets and failures get the time appended by the driver.
KERNEL_STATUS = {
    PENDING_CODE: (Status.PENDING, "not computed (the ensemble was interrupted before this member ran)"),
    kstatus.SUCCESS: (Status.SUCCESS, "reached t_end"),
    kstatus.MAX_STEPS: (Status.MAX_STEPS, "max_steps used up"),
    kstatus.MAX_EVENTS: (Status.MAX_EVENTS, "max_events used up"),
    kstatus.NONFINITE: (Status.FAILED, "the next step's Taylor coefficients, energy or state became non-finite "
                                       "(overflow); the result ends at the last finite state"),
    kstatus.NO_CARATHEODORY: (Status.NO_CARATHEODORY_SOLUTION,
                              "the selection pushes the state back into a surface it cannot stay on (sliding): no "
                              "Caratheodory solution continues; the Filippov solution slides"),
    kstatus.TOO_MANY_SURFACES: (Status.FAILED, "more surfaces met at once than the classifier handles"),
    kstatus.NO_PROGRESS: (Status.FAILED, "the step size underflowed: no progress in time"),
    kstatus.NO_CONSISTENT: (Status.FAILED, "a neuron on several hyperplanes at once has no configuration (leave up, "
                                           "leave down, or hold each) consistent with its own field"),
    kstatus.REACHED: (Status.REACHED, "met the stop rule (until)"),
    kstatus.DEADLINE: (Status.DEADLINE, "the loss did not go below until.loss_below by until.deadline"),
}


def status_of(code: int) -> tuple[Status, str]:
    """``(Status, message)`` of a kernel code (an unknown code is a failure that names it)."""
    return KERNEL_STATUS.get(int(code), (Status.FAILED, f"unknown kernel status code {int(code)}"))


def shown(value) -> str:
    """A number as a message shows it: ``repr`` of a float (every digit that float64 holds), ``str`` of an mpf
    (every digit of the working precision: call inside ``mp.workdps``)."""
    return repr(float(value)) if isinstance(value, (float, int)) else str(value)


def at_time(t, s=None) -> str:
    """Where a flow stopped: ``"t = ..."``, with the log clock (``s = ln(1 + t)`` given) ``"t = ..., ln(1+t) =
    ..."``. ``t`` is always the flow time, in both backends."""
    return f"t = {shown(t)}" if s is None else f"t = {shown(t)}, ln(1+t) = {shown(s)}"


def at_iteration(k: int) -> str:
    """Where gradient descent stopped: ``"iteration k"``."""
    return f"iteration {int(k)}"


def ended(code: int, where: str) -> tuple[Status, str]:
    """Status and message of a run that ended with the kernel code ``code`` at ``where``: the table's message,
    followed by ``(where)`` unless the run succeeded."""
    outcome, message = status_of(code)
    return outcome, message if outcome in (Status.SUCCESS, Status.PENDING) else f"{message} ({where})"


def interrupted(where: str) -> tuple[Status, str]:
    """A run stopped by Ctrl-C or by its callback at ``where``."""
    return Status.INTERRUPTED, f"interrupted at {where}"


def used_up(budget: str, value: int, where: str) -> tuple[Status, str]:
    """A run stopped at ``where`` because its budget ``budget`` (``"max_steps"`` or ``"max_events"``) of ``value``
    is used up."""
    outcome = {"max_steps": Status.MAX_STEPS, "max_events": Status.MAX_EVENTS}[budget]
    return outcome, f"{budget} = {value} used up at {where}"


#: A loss above which a float64 overflow of the Taylor coefficients is put down to the loss's own size (an exp or
#: logistic loss far on the wrong side of its margins, as from a large initialisation on heavy-tailed data).
HUGE_LOSS = 1e8


def flow_stop(code: int, *, where: Callable[[], str], interrupted_now: bool, steps: int, events: int, max_steps: int,
              max_events: int, loss=0.0, log_clock: bool = False, converged: str | None = None,
              memory: tuple[int, int] | None = None) -> tuple[Status, str] | None:
    """Why a flow stops, in either backend, after a chunk (float64) or a step (mpmath) that returned ``code``
    (``RUNNING`` or ``EVENT_BUFFER_FULL``: the chunk's own budget ended it), at the place that ``where()`` names
    (an :func:`at_time` text, made only for a message that shows it: formatting the time costs a few microseconds
    of every chunk of a small run) with ``loss`` (``ln L`` with ``log_clock``) at the state reached; ``None``: it
    goes on.

    In this order: a non-finite loss (a failure that shows it), the end reached (a square-loss flow found
    converged to working precision at ``converged``, an :func:`at_time` text, says so), any other code of
    :data:`KERNEL_STATUS`, Ctrl-C or the callback (``interrupted_now``), the float64 ``memory`` budget
    (``(memory_budget, steps it allows)``), then ``max_steps`` and ``max_events`` against ``steps`` and ``events``
    taken so far.
    """
    if code == kstatus.NONFINITE and not loss < math.inf:
        return Status.FAILED, (f"the loss became non-finite ({'ln L' if log_clock else 'L'} = {shown(loss)}) at "
                               f"{where()}; the result ends at the last finite state")
    if code == kstatus.NONFINITE and (loss > math.log(HUGE_LOSS) if log_clock else loss > HUGE_LOSS):
        status, words = ended(code, where())
        return status, (f"{words}: the loss there is {'e^' + shown(loss) if log_clock else shown(loss)}, and its "
                        "field's Taylor coefficients grow like the field's rate to the power of the order; start "
                        "from a smaller initialisation or scale the data down")
    if code == kstatus.SUCCESS and converged is not None:
        head, tail = kstatus.CONVERGED_MESSAGE.split("{where} = {at!r}")
        return Status.SUCCESS, head + converged + tail
    if code == kstatus.SUCCESS:
        return status_of(code)
    if code not in (kstatus.RUNNING, kstatus.EVENT_BUFFER_FULL):
        return ended(code, where())
    if interrupted_now:
        return interrupted(where())
    if memory is not None and steps >= memory[1]:
        return Status.MAX_STEPS, (f"memory_budget = {memory[0]} bytes of stored output ({memory[1]} steps) used up "
                                  f"at {where()}; raise memory_budget, or turn dense_output off")
    if steps >= max_steps:
        return used_up("max_steps", max_steps, where())
    if events >= max_events:
        return used_up("max_events", max_events, where())
    return None
