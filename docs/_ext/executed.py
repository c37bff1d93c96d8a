"""Sphinx directive ``executed``: run a page's Python code at build time and show the code, its output and figures.

Every ``.. executed::`` block of a page runs, in order, in one namespace shared by the blocks of that page (a fresh
one each time the page is read). A block is rendered as its code, then what it printed (stdout and stderr, so
that Python warnings show too), then every matplotlib figure left open, saved as PNG into the HTML output's
``_images`` folder and inserted as images; the figures are then closed. An exception in the code stops the build
with an error naming the page and the line, and the traceback (lines numbered as in the page's source).
"""

from __future__ import annotations

import contextlib
import io
import os
import traceback

import matplotlib

matplotlib.use("Agg", force=True)

import matplotlib.pyplot as plt  # noqa: E402
from docutils import nodes  # noqa: E402
from sphinx.errors import SphinxError  # noqa: E402
from sphinx.util.docutils import SphinxDirective  # noqa: E402

#: Namespace of each page being read, by docname (module level: modules and figures do not belong in the pickled
#: environment).
_NAMESPACES: dict[str, dict] = {}
#: Folder the figures are saved in: the output's ``_images`` (set when the builder starts).
_IMAGES = {"folder": ""}


class ExecutedCodeError(SphinxError):
    """Code of an ``executed`` block raised: the build stops (``sphinx-build`` exits non-zero)."""

    category = "Executed code error"


class Executed(SphinxDirective):
    """Run the directive's content as Python code and insert the code, its output and its figures.

    The content is compiled with the page's source file as file name, padded so that line numbers in a traceback
    are those of the page. A page with executed code is read again on every build (its output depends on the
    library, not only on the page).
    """

    has_content = True

    def run(self) -> list[nodes.Node]:
        """Execute the block and return its nodes: code, output (when any), one image per open figure.

        Returns
        -------
        list of docutils.nodes.Node

        Raises
        ------
        ExecutedCodeError
            When the code raises: the page, the directive's line and the traceback.
        """
        docname = self.env.docname
        self.env.note_reread()
        code = "\n".join(self.content)
        source = self.env.doc2path(docname)
        namespace = _NAMESPACES.setdefault(docname, {"__name__": "__main__"})
        padded = "\n" * self.content_offset + code  # tracebacks then give the page's line numbers
        output = io.StringIO()
        plt.close("all")
        try:
            with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
                exec(compile(padded, str(source), "exec"), namespace)  # noqa: S102
        except Exception as exc:
            plt.close("all")
            # the traceback from the page's code on (the frame of this method left out)
            trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next))
            raise ExecutedCodeError(f"{docname} (line {self.lineno}): the executed code raised "
                                    f"{type(exc).__name__}\n{trace}") from exc
        result: list[nodes.Node] = [nodes.literal_block(code, code, language="python")]
        text = output.getvalue().rstrip()
        if text:
            result.append(nodes.literal_block(text, text, language="none", classes=["executed-output"]))
        result.extend(self._figures(docname))
        return result

    def _figures(self, docname: str) -> list[nodes.Node]:
        """Save every open figure as PNG in the output's ``_images`` folder, close it, return image nodes."""
        folder = _IMAGES["folder"]
        os.makedirs(folder, exist_ok=True)
        images = []
        for number in plt.get_fignums():
            count = self.env.new_serialno("executed-figure")
            path = os.path.join(folder, f"executed-{docname.replace('/', '-')}-{count}.png")
            plt.figure(number).savefig(path, dpi=self.config.executed_dpi, bbox_inches="tight")
            # a leading "/" makes the URI relative to the source folder; the builder copies nothing (same file)
            uri = "/" + os.path.relpath(path, self.env.srcdir).replace(os.sep, "/")
            images.append(nodes.image(uri=uri, alt=f"figure {count} of {docname}", classes=["executed-figure"]))
        plt.close("all")
        return images


def _start(app) -> None:
    """Note the output's image folder (``builder-inited`` event)."""
    _IMAGES["folder"] = os.path.join(app.outdir, "_images")


def _forget(app, docname: str, source: list[str]) -> None:
    """Start a page's namespace afresh each time the page is read (``source-read`` event)."""
    _NAMESPACES.pop(docname, None)


def setup(app) -> dict:
    """Register the directive, its configuration value ``executed_dpi`` and the namespace reset.

    Parameters
    ----------
    app : sphinx.application.Sphinx

    Returns
    -------
    dict
        Extension metadata.
    """
    app.add_config_value("executed_dpi", 90, "html")
    app.add_directive("executed", Executed)
    app.connect("builder-inited", _start)
    app.connect("source-read", _forget)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
