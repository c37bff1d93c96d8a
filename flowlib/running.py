"""What every long-running driver shares: argument checks, Ctrl-C as a flag, the optional progress bar.

Plain Python (no numba), so that the mpmath backend uses it too.
"""

from __future__ import annotations

import math
import signal
import threading

import numpy as np

from flowlib.kernels.constants import MIN_ORDER
from flowlib.problem import Params, Problem


#: Largest ``dps`` of an mpmath run (``gradient_flow``, ``gradient_descent``, run configurations, saved results): a
#: step costs about 80 s at 1000 digits on one core and grows like ``dps^2``.
MAX_DPS = 2000


def check_dps(dps) -> int:
    """``dps`` as an int in ``[16, MAX_DPS]`` (16 digits hold every float64 exactly), or ``ValueError`` naming it."""
    if isinstance(dps, bool) or not isinstance(dps, (int, np.integer)) or not 16 <= dps <= MAX_DPS:
        raise ValueError(f"dps must be None (float64) or an integer in [16, {MAX_DPS}], got {dps!r} (the cost of "
                         "a step grows like dps^2: about 80 s at 1000 digits on one neuron)")
    return int(dps)


def order_for(rtol) -> int:
    """Taylor order for a tolerance: ``ceil(-ln(rtol) / 2) + 1`` (Jorba & Zou 2005), at least ``MIN_ORDER`` (4)."""
    return max(MIN_ORDER, math.ceil(-0.5 * math.log(rtol)) + 1)


# signal.signal wraps this C function to convert handlers to and from IntEnum, by way of exceptions when the
# handler is a Python function: ~3 us a call, twice per run (most of a small problem's gradient_flow overhead).
try:
    from _signal import signal as _set_handler
except ImportError:  # pragma: no cover - not CPython
    from signal import signal as _set_handler


class StepInterrupted(KeyboardInterrupt):
    """Raised by the handler of :func:`sigint_flag` on Ctrl-C while the flag's ``"raise"`` entry is True: the mpmath
    drivers arm it around one step (which may take minutes at high precision), catch it and discard the unfinished
    step. A subclass of :class:`KeyboardInterrupt`, so that no ``except Exception`` swallows it."""


class _SigintFlag:
    """The context manager of :func:`sigint_flag`: a plain class rather than a generator, as it is entered once
    per call of :func:`flowlib.gradient_flow` (a few tens of microseconds on a small problem)."""

    def __init__(self):
        self.flag = {"set": False, "raise": False}
        self._installed = False
        self._previous = None

    def _handler(self, signum, frame):
        self.flag["set"] = True
        if self.flag["raise"]:
            self.flag["raise"] = False
            raise StepInterrupted

    def __enter__(self) -> dict:
        if threading.current_thread() is threading.main_thread():
            self._previous = _set_handler(signal.SIGINT, self._handler)
            self._installed = True
        return self.flag

    def __exit__(self, *exc_info) -> None:
        if self._installed:
            _set_handler(signal.SIGINT, self._previous)
            self._installed = False


def sigint_flag() -> _SigintFlag:
    """Turn Ctrl-C into a flag the driver checks between chunks (a chunk is never torn in half).

    Use as ``with sigint_flag() as interrupted:``, which yields a dict whose ``"set"`` entry becomes True on SIGINT;
    the previous handler is restored on leaving, whatever the exit (the very object that was installed before).
    While its ``"raise"`` entry is True, SIGINT also raises :class:`StepInterrupted` (once; the entry is reset):
    the mpmath drivers arm it around a step and catch it, so that Ctrl-C is served within a fraction of a second
    even when a step takes minutes. Outside the main thread (where signal handlers cannot be installed) the flag
    never sets.
    """
    return _SigintFlag()


def progress_bar(enabled: bool, total: float, desc: str, unit: str = "t"):
    """A tqdm bar over ``[0, total]`` (``None`` when disabled); tqdm is imported only when asked for.

    ``enabled`` must be a bool (``ValueError`` naming ``progress`` otherwise: ``progress="no"`` is not False).
    """
    if not isinstance(enabled, (bool, np.bool_)):
        raise ValueError(f"progress must be True or False, got {enabled!r}")
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("progress=True needs tqdm: pip install 'flowlib[progress]'") from exc
    return tqdm(total=total, unit=unit, desc=desc, bar_format="{l_bar}{bar}| " + unit + "={n:.4g}/{total:.4g}")


def check_time(t_end) -> float:
    """``t_end`` as a finite float ``>= 0``, or ``ValueError`` naming it."""
    if isinstance(t_end, bool) or not isinstance(t_end, (int, float, np.integer, np.floating)):
        raise ValueError(f"t_end must be a real number, got {t_end!r}")
    t_end = float(t_end)
    if not math.isfinite(t_end) or t_end < 0.0:
        raise ValueError(f"t_end must be finite and >= 0, got {t_end}")
    return t_end


def check_budget(value, name: str) -> int:
    """A positive integer budget, or ``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_problem_params(problem, params0) -> None:
    """``problem`` a :class:`~flowlib.Problem`, ``params0`` :class:`~flowlib.Params` that fit it; else
    ``ValueError`` naming the argument."""
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a flowlib.Problem, got {type(problem).__name__}")
    if not isinstance(params0, Params):
        raise ValueError(f"params0 must be a flowlib.Params, got {type(params0).__name__}")
    params0.check_against(problem)
