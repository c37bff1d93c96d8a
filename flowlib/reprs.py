"""Concise text and HTML representations of flowlib's problems, parameters and results.

A result holds arrays of every step; printing one (or leaving it as the last expression of a notebook cell) shows
a line of what matters instead: status, time reached, steps, events, final loss and the shapes.
"""

from __future__ import annotations

import html
import math


def _text(value) -> str:
    """A field's value in a repr: strings quoted, real numbers to 6 significant digits (mpf rounded)."""
    if isinstance(value, str):  # a Status too: its value, quoted
        return repr(str(value))
    if isinstance(value, (bool, int)) or value is None:
        return str(value)
    number = float(value)
    return f"{number:.6g}" if math.isfinite(number) else str(number)


class Summarised:
    """Mixin of :meth:`__repr__` (one line, no arrays) and :meth:`_repr_html_` (a small table for notebooks), both
    built from :meth:`_summary_fields`.

    A dataclass that uses it is declared with ``repr=False`` (else the dataclass writes its own ``__repr__``)."""

    def _summary_fields(self) -> list[tuple[str, object]]:
        """``(name, value)`` pairs: strings, integers, booleans or real numbers (never arrays)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={_text(v)}' for k, v in self._summary_fields())})"

    def _repr_html_(self) -> str:
        cell = "<th style=\"text-align:left\">{}</th><td style=\"text-align:left\">{}</td>"
        rows = "".join("<tr>" + cell.format(html.escape(k), html.escape(str(v) if isinstance(v, str) else _text(v)))
                       + "</tr>" for k, v in self._summary_fields())
        return f"<table><caption>{html.escape(type(self).__name__)}</caption>{rows}</table>"
