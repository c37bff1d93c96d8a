"""Sphinx configuration of flowlib's documentation.

Build (warnings are errors; the tutorials are executed, so the Numba kernels are compiled or loaded from the cache
set by ``NUMBA_CACHE_DIR``)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the checkout's flowlib, installed or not
sys.path.insert(0, os.path.join(HERE, "_ext"))

import flowlib  # noqa: E402

project = "flowlib"
author = "the flowlib authors"
copyright = "the flowlib authors"  # noqa: A001 (Sphinx's name)
version = release = flowlib.__version__

extensions = [
    "sphinx.ext.autodoc",
    "numpydoc",
    "myst_parser",
    "executed",  # docs/_ext/executed.py: the tutorials' code runs at build time
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# bench.json and bench.txt are not pages (bench.txt is included by benchmarks.rst)
exclude_patterns = ["_build", "_ext", "benchmarks/*.json"]
templates_path = []

# ----- API reference -----
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the numpydoc sections give the types; signatures stay readable
autodoc_default_options = {"members": True}
numpydoc_show_class_members = False  # members are documented by autodoc below each class
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True

# ----- Markdown (docs/design.md, docs/validation/report.md) -----
myst_heading_anchors = 3  # "#solution-concept"-style anchors for the headings, as GitHub makes them
myst_enable_extensions = []

# ----- HTML -----
html_theme = "alabaster"
html_title = f"flowlib {release}"
html_static_path = ["_static"]
html_css_files = ["executed.css"]
html_theme_options = {"page_width": "1200px", "sidebar_width": "260px"}
executed_dpi = 90


# ----- completeness of the API page -----
#: Names of flowlib.__all__ that api.rst documents in prose rather than with an autodoc directive of their own.
API_BY_HAND = {"compare", "__version__"}
API_MARKER = ".. names of flowlib.__all__ without a section above are appended here (conf.py)"


def complete_api(app, docname, source):
    """Append to the API page an autodoc directive for every name of ``flowlib.__all__`` it does not document yet
    (a name just added to the package is documented before anyone places it in a section)."""
    if docname != "api":
        return
    text = source[0]
    missing = [name for name in flowlib.__all__
               if name not in API_BY_HAND and f":: {name}\n" not in text and f":: flowlib.{name}\n" not in text]
    if missing:
        kind = {name: "class" if isinstance(getattr(flowlib, name), type) else "function" for name in missing}
        extra = "Other names\n-----------\n\n" + "".join(f".. auto{kind[name]}:: flowlib.{name}\n\n"
                                                          for name in missing)
        source[0] = text.replace(API_MARKER, extra)


def setup(app):
    """Connect :func:`complete_api`."""
    app.connect("source-read", complete_api)
