"""How a run ended: the public :class:`Status` and the one table from the kernels' integer codes to it.

The Numba kernels return integer codes (:mod:`flowlib.kernels.status`); :data:`KERNEL_STATUS` says, for each, the
:class:`Status` a run reports and the message it starts with. :func:`flowlib.gradient_flow` and
:class:`flowlib.EnsembleResult` read the same table, so a member of an ensemble and the same run alone end with
the same status and message.
"""

from __future__ import annotations

import enum

from flowlib.kernels import constants as kconstants
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
    #: an ensemble member met its stop rule (:class:`flowlib.Until`)
    REACHED = "reached"
    #: an ensemble member's loss did not go below ``Until.loss_below`` by ``Until.deadline``
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
    kstatus.TOO_MANY_SURFACES: (Status.FAILED, f"a neuron sits on more than {kconstants.MAX_SURFACES} hyperplanes "
                                               "at once"),
    kstatus.NO_PROGRESS: (Status.FAILED, "the step size underflowed: no progress in time"),
    kstatus.NO_CONSISTENT: (Status.FAILED, "a neuron on several hyperplanes at once has no configuration (leave up, "
                                           "leave down, or hold each) consistent with its own field"),
    kstatus.REACHED: (Status.REACHED, "met the stop rule (until)"),
    kstatus.DEADLINE: (Status.DEADLINE, "the loss did not go below until.loss_below by until.deadline"),
}


def status_of(code: int) -> tuple[Status, str]:
    """``(Status, message)`` of a kernel code (an unknown code is a failure that names it)."""
    return KERNEL_STATUS.get(int(code), (Status.FAILED, f"unknown kernel status code {int(code)}"))
