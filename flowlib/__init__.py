"""flowlib: the exact gradient flow of two-layer (leaky-)ReLU networks.

The flow ``theta' = -grad L(theta)`` is integrated cell by cell (fixed activation pattern) with an adaptive Taylor
method, and every activation event is located to machine precision; see ``docs/design.md`` and the README.

PyTorch models go in and out through :mod:`flowlib.torch` (the ``torch`` extra), which is not imported here:
``import flowlib.torch``.
"""

__version__ = "0.1.0"


def _mount_source(name: str, folder: str):
    """In a source checkout the kernels and the validation claims live in the top-level ``kernels/`` and
    ``validation/`` folders, which an installed flowlib has as ``flowlib/kernels`` and ``flowlib/validation``
    (docs/design.md, Code layout; a top-level package named ``kernels`` would collide on PyPI). Mount such a
    folder as ``flowlib.<name>`` when flowlib is imported from the checkout itself."""
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    source = os.path.join(os.path.dirname(here), folder, "__init__.py")
    if f"flowlib.{name}" in sys.modules or os.path.isdir(os.path.join(here, name)) or not os.path.isfile(source):
        return
    spec = importlib.util.spec_from_file_location(f"flowlib.{name}", source,
                                                  submodule_search_locations=[os.path.dirname(source)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"flowlib.{name}"] = module
    spec.loader.exec_module(module)


_mount_source("kernels", "kernels")
_mount_source("validation", "validation")

from flowlib.problem import Params, Problem  # noqa: E402
from flowlib.result import DescentResult, Event, Flip, FlipLog, FlowResult, Status  # noqa: E402
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

__all__ = ["DescentResult", "EnsembleResult", "Event", "Flip", "FlipLog", "FlowResult", "Params", "PiecewiseAffine",
           "PiecewiseResult", "Problem", "Progress", "Status", "Until", "alignment_cosines", "compare",
           "convergence_study", "ensemble", "gradient_descent", "gradient_flow", "load", "predict", "random_inits",
           "stochastic_gradient_descent", "warmup", "__version__"]
