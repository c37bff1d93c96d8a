"""The validation framework: claims, what they return, and the context they run in.

A *claim* is one checkable statement of a source paper (a theorem's bound, an equation's limit, an experiment's
number), registered with :func:`claim`. Its function runs the flow and/or GD, measures, compares with the paper's
bound or number, and returns an :class:`Outcome`; the runner (:mod:`.runner`) times it, records versions, and
writes ``report.md`` / ``report.json``. Claim ids read ``PAPER-NAME`` (``000-thm5.2``); the paper's theorem or
equation number goes in ``reference``.

Statements that are wrong as printed in the paper (a typo, a loose or vacuous constant) are registered with
``expect="paper-wrong"``: the outcome then tests the *corrected* statement, and its ``detail`` says what the paper
printed and what holds instead.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

EXPECTATIONS = ("holds", "paper-wrong")


@dataclass(frozen=True)
class Context:
    """What a claim function gets: the mode, where to write plots, and the seed.

    Attributes
    ----------
    quick : bool
        Quick mode (a few seconds per claim: fewer runs, shorter horizons); full mode reproduces the paper's sizes.
    out : Path
        Folder for the claim's plots (PNG).
    seed : int
        Base seed; claims derive every random draw from it, so runs are reproducible.
    """

    quick: bool
    out: Path
    seed: int = 0

    def plot_path(self, name: str) -> Path:
        """``out / name`` (``.png`` appended when missing), with the folder created."""
        path = self.out / (name if name.endswith(".png") else f"{name}.png")
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def figure(self, ncols: int = 1, nrows: int = 1, size=(6.4, 4.2)):
        """A new matplotlib figure on the Agg backend: ``(fig, axes)`` (``axes`` an array when several)."""
        import matplotlib

        if matplotlib.get_backend().lower() != "agg":
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows))

    def save(self, fig, name: str) -> str:
        """Save ``fig`` as ``name``.png in :attr:`out`, close it, return the file name (for :attr:`Outcome.plots`)."""
        import matplotlib.pyplot as plt

        path = self.plot_path(name)
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        return path.name


@dataclass
class Outcome:
    """What a claim function returns.

    Attributes
    ----------
    measured, bound : float or str
        The measured value and the paper's bound or number it is compared with (a string for a range or a
        verbal bound, e.g. ``">= 1"``, ``"0.10069 +- 0.006"``).
    passed : bool
        Whether the measured value satisfies the (corrected, for ``paper-wrong``) statement.
    detail : str
        One or two sentences: how it was measured, and for ``paper-wrong`` claims what the paper printed.
    plots : list of str
        File names (in :attr:`Context.out`) of the figures written, from :meth:`Context.save`.
    data : dict
        Further numbers for ``report.json`` (JSON-serialisable).
    certified : str
        What :func:`flowlib.certify` proved for this claim's instance, in a few words (the report's "certified"
        column); empty where the claim has no certified variant.
    """

    measured: float | str
    bound: float | str
    passed: bool
    detail: str = ""
    plots: list = field(default_factory=list)
    data: dict = field(default_factory=dict)
    certified: str = ""


@dataclass(frozen=True)
class Claim:
    """A registered claim (see :func:`claim`)."""

    id: str
    paper: str
    reference: str
    statement: str
    function: Callable[[Context], Outcome]
    expect: str = "holds"
    needs: tuple = ()


#: every registered claim, by id, in registration order
CLAIMS: dict[str, Claim] = {}


def claim(id: str, reference: str, statement: str, *, expect: str = "holds", needs=()):
    """Register the decorated function ``f(ctx: Context) -> Outcome`` as a claim.

    Parameters
    ----------
    id : str
        ``PAPER-NAME``, e.g. ``"000-thm5.2"``; the paper is the part before the first ``-``.
    reference : str
        Theorem / lemma / equation / section of the paper, e.g. ``"Theorem 5.2"``.
    statement : str
        The claim in one sentence, with its constants.
    expect : {"holds", "paper-wrong"}
        ``"paper-wrong"``: the paper's statement is wrong as printed; the function tests the corrected one.
    needs : tuple of str
        Optional modules (``"cvxpy"``, ``"sklearn"``): the claim is reported as skipped when one is missing.
    """
    if expect not in EXPECTATIONS:
        raise ValueError(f"expect must be one of {EXPECTATIONS}, got {expect!r}")
    if "-" not in id:
        raise ValueError(f"id must read PAPER-NAME, got {id!r}")

    def register(function):
        if id in CLAIMS and CLAIMS[id].function.__qualname__ != function.__qualname__:
            raise ValueError(f"id {id!r} is registered twice")
        CLAIMS[id] = Claim(id=id, paper=id.split("-", 1)[0], reference=reference, statement=statement,
                           function=function, expect=expect, needs=tuple(needs))
        return function

    return register


def versions() -> dict:
    """Versions of the numerical stack and the machine, for the report."""
    import os

    import mpmath
    import numba
    import numpy
    import scipy

    from flowlib import __version__

    return {"flowlib": __version__, "python": platform.python_version(), "numpy": numpy.__version__,
            "numba": numba.__version__, "scipy": scipy.__version__, "mpmath": mpmath.__version__,
            "machine": f"{platform.machine()} {platform.processor() or ''}".strip(), "cpus": os.cpu_count(),
            "system": platform.system()}
