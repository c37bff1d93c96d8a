"""``Progress``: what every runner hands its ``callback``, and the one check of a callback argument."""

from __future__ import annotations

from dataclasses import dataclass

#: Values of :attr:`Progress.kind`.
KINDS = ("flow", "descent", "ensemble", "certify")


@dataclass(frozen=True)
class Progress:
    """Where a run stands: the one argument of every ``callback``.

    :func:`flowlib.gradient_flow`, :func:`flowlib.gradient_descent`, :func:`flowlib.stochastic_gradient_descent`
    and :func:`flowlib.ensemble` call ``callback(progress)`` after every chunk of work (about every 50 ms; after
    every Taylor step of an mpmath flow, after every chunk of members of an ensemble). A true return value stops
    the run as Ctrl-C does: status ``"interrupted"`` with everything computed so far (an ensemble returns with
    ``complete=False``, the members not computed ``"pending"``). An exception raised by the callback propagates.

    Attributes
    ----------
    kind : {"flow", "descent", "ensemble", "certify"}
        Which runner calls: the flow (float64 or ``dps=``), gradient descent or SGD, an ensemble (either method), or
        :func:`flowlib.certify` (after every certified step; ``done`` is the time proven so far).
    done : float or int
        How far the run has come: the flow time ``t`` reached (always ``t`` itself, also with the log clock;
        ``inf`` past float64's largest number), the index ``k`` of the current iterate, or the members computed.
    total : float or int
        Where the run ends at the latest: ``t_end`` (``inf`` for a ``log_t_end`` past float64), ``steps``, or the
        number of members.
    steps : int
        Taylor steps taken so far (flow), iterations (descent), or the Taylor steps or iterations of the members
        computed so far, summed (ensemble).
    events : int
        Events logged so far (flow), activation flips (descent), or the events or flips of the members computed
        so far, summed (ensemble).

    Examples
    --------
    >>> import flowlib as fl
    >>> prob = fl.Problem(X=[[1.0], [-1.0]], y=[1.0, -1.0], loss="logistic", bias=False, train_outer=True)
    >>> seen = []
    >>> res = fl.gradient_flow(prob, fl.Params(W=[[0.5]], b=None, a=[0.5]), t_end=2.0, callback=seen.append)
    >>> seen[-1].kind, seen[-1].done, seen[-1].total, seen[-1].steps == res.n_steps
    ('flow', 2.0, 2.0, True)
    >>> stopped = fl.gradient_descent(prob, fl.Params(W=[[0.5]], b=None, a=[0.5]), 0.1, 10**6,
    ...                               callback=lambda progress: progress.done >= 1000)
    >>> stopped.status, stopped.steps >= 1000
    (<Status.INTERRUPTED: 'interrupted'>, True)
    """

    kind: str
    done: float
    total: float
    steps: int
    events: int


def check_callback(callback):
    """``callback`` itself if it is ``None`` or callable; ``ValueError`` naming it otherwise."""
    if callback is not None and not callable(callback):
        raise ValueError(f"callback must be callable (it is called as callback(progress) with a flowlib.Progress), "
                         f"got {callback!r}")
    return callback


def report(callback, kind: str, done, total, steps: int, events: int) -> bool:
    """Call ``callback`` (if any) with a :class:`Progress`; True when it asks the run to stop."""
    if callback is None:
        return False
    return bool(callback(Progress(kind, done, total, int(steps), int(events))))
