"""flowlib: the exact gradient flow of two-layer (leaky-)ReLU networks.

The flow ``theta' = -grad L(theta)`` is integrated cell by cell (fixed activation pattern) with an adaptive Taylor
method, and every activation event is located to machine precision; see ``docs/design.md`` and the README.

PyTorch models go in and out through :mod:`flowlib.torch` (the ``torch`` extra), which is not imported here:
``import flowlib.torch``.
"""

__version__ = "0.1.0"


def _check_layout():
    """The kernels and the validation claims live in the top-level ``kernels/`` and ``validation/`` folders of the
    repository and are installed as ``flowlib.kernels`` and ``flowlib.validation`` (a package-dir mapping: a
    top-level package named ``kernels`` would collide on PyPI). A regular install copies them into the package; an
    editable install (``pip install -e .``) maps them to the checkout's folders. Importing flowlib from a checkout
    that is not installed, or whose editable install points at another checkout, would run one tree's Python code
    with another's (or no) kernels: refuse that with an ``ImportError`` that says what to do."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from flowlib import kernels
    except ImportError:
        raise ImportError(f"flowlib was imported from {here}, a source checkout that is not installed: run "
                          f"`pip install -e .` in {os.path.dirname(here)}, or import flowlib from outside it") \
            from None
    found = os.path.dirname(os.path.abspath(kernels.__file__))
    if os.path.dirname(found) not in (here, os.path.dirname(here)):
        raise ImportError(f"flowlib was imported from {here} but its kernels from {found} (an editable install of "
                          f"another checkout): run `pip install -e .` in {os.path.dirname(here)}")


_check_layout()

from flowlib.problem import Params, Problem  # noqa: E402
from flowlib.result import DescentResult, Event, EventLog, Flip, FlipLog, FlowResult, Status  # noqa: E402
from flowlib.loading import load  # noqa: E402
from flowlib.flow import gradient_flow  # noqa: E402
from flowlib.descent import gradient_descent, stochastic_gradient_descent  # noqa: E402
from flowlib import compare  # noqa: E402  (the module, callable: fl.compare(flow, gd) is compare.compare)
from flowlib.compare import convergence_study  # noqa: E402
from flowlib.diagnostics import alignment_cosines  # noqa: E402
from flowlib.piecewise import PiecewiseAffine, PiecewiseResult  # noqa: E402
from flowlib.warmup import warmup  # noqa: E402
from flowlib.until import Until  # noqa: E402
from flowlib.ensemble import ensemble, random_inits  # noqa: E402
from flowlib.ensemble_result import EnsembleResult  # noqa: E402
from flowlib.predict import predict  # noqa: E402
from flowlib.progress import Progress  # noqa: E402
from flowlib.certify import Certificate, certify  # noqa: E402  (python-flint is imported on the first call)

__all__ = ["Certificate", "DescentResult", "EnsembleResult", "Event", "EventLog", "Flip", "FlipLog", "FlowResult",
           "Params", "PiecewiseAffine", "PiecewiseResult", "Problem", "Progress", "Status", "Until",
           "alignment_cosines", "certify", "compare", "convergence_study", "ensemble", "gradient_descent",
           "gradient_flow", "load", "predict", "random_inits", "stochastic_gradient_descent", "warmup", "__version__"]
