"""Integer status codes returned by the kernels (kernels never raise).

:mod:`flowlib.result` maps them to the public :class:`flowlib.Status` names and messages.
"""

RUNNING = 0  #: the chunk's step budget was used up; the driver calls again
SUCCESS = 1  #: ``t_end`` reached
MAX_STEPS = 2  #: the run's step budget was used up
MAX_EVENTS = 3  #: the run's event budget was used up
EVENT_BUFFER_FULL = 4  #: the chunk's event buffer is full; the driver calls again
NONFINITE = 5  #: a Taylor coefficient or the state became inf/nan
NO_CARATHEODORY = 6  #: the Carathéodory selection pushes the state into a surface it cannot stay on
TOO_MANY_SURFACES = 7  #: one neuron sits on more hyperplanes at once than the classifier handles
NO_PROGRESS = 8  #: the step size underflowed (no progress in time)
NO_CONSISTENT = 9  #: no configuration of a neuron's simultaneous surfaces is consistent with its own field
REACHED = 20  #: an ensemble member met its stop rule (``flowlib.Until``)
DEADLINE = 21  #: an ensemble member's loss did not go below ``Until.loss_below`` by ``Until.deadline``

#: Message of a ``success`` whose square-loss flow converged to working precision before ``t_end`` (the kernels' and
#: the mpmath backend's ``_converged``): formatted with ``where`` (``t`` or ``ln(1+t)``) and ``at`` (the time).
CONVERGED_MESSAGE = ("converged to working precision at {where} = {at!r} (every residual |f(x_i) - y_i| within "
                     "rounding of the state); the state is constant from there to t_end")
