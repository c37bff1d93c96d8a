"""The one tolerance table (:mod:`flowlib.kernels.tolerances`) and its use by both backends.

Each tolerance is ``value * (eps / 2^-52) ** power``: the float64 kernels compile in ``value``, the mpmath backend
evaluates the rule at its working epsilon. Checked here: the rule itself against an independent 50-digit evaluation,
that float64 constants and 53-bit mpmath values coincide bit for bit, that no kernel or mpmath module keeps a
tolerance of its own (a scan of the source), and the exit-side decision that used a fixed ``1e-8`` at every
precision.
"""

import io
import math
import pathlib
import tokenize
from fractions import Fraction

import pytest
from mpmath import mp, mpf

from flowlib.kernels import driver as kdriver
from flowlib.kernels import events as kevents
from flowlib.kernels import pwa as kpwa
from flowlib.kernels import tolerances as ktol
from flowlib.mp import events as mpevents
from flowlib.mp import linalg as mplinalg
from flowlib.mp.tolerances import tolerance

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_float64_epsilon_is_two_to_minus_52():
    assert ktol.EPS64 == 2.220446049250313e-16 == math.ulp(1.0)


@pytest.mark.parametrize("name", sorted(ktol.TABLE))
def test_every_row_is_positive_and_a_rational_power(name):
    row = ktol.TABLE[name]
    assert 0.0 < row.value < 1e-5
    assert isinstance(row.power, Fraction) and 0 < row.power <= 1
    assert row.meaning


@pytest.mark.parametrize("name", sorted(ktol.TABLE))
def test_mpmath_at_53_bits_is_the_float64_value(name):
    with mp.workprec(53):
        assert float(tolerance(name)) == ktol.TABLE[name].value


@pytest.mark.parametrize("dps", [20, 30, 50])
@pytest.mark.parametrize("name", sorted(ktol.TABLE))
def test_mpmath_scales_by_the_power_of_its_epsilon(name, dps):
    row = ktol.TABLE[name]
    with mp.workdps(dps):
        got = tolerance(name)
        eps = +mp.eps  # mp.eps is evaluated at the precision where it is used: freeze it
    with mp.workdps(dps + 30):  # an independent evaluation of the rule, 30 digits more
        want = mpf(row.value) * mp.power(eps / mpf(2) ** -52, mpf(row.power.numerator) / row.power.denominator)
    assert abs(got - want) <= 4 * eps * want


def test_multiples_of_epsilon_stay_exact_multiples():
    with mp.workdps(30):
        assert tolerance("on_surface") == 64 * mp.eps
        assert tolerance("simultaneous") == 64 * mp.eps
        assert tolerance("zeno_time") == 32 * mp.eps


def test_float64_kernels_compile_in_the_table():
    assert kevents.STAY_TOL == ktol.TABLE["stay"].value == 1e-9
    assert kevents.RCOND == kdriver.RCOND == kpwa.RCOND == 1e-12
    assert kevents.HOLD_SLACK == 1.3e-6
    assert kdriver.EXIT_SIDE == 1e-8
    assert kpwa.ZENO_TIME_TOL == 32 * ktol.EPS64
    assert kdriver._RADIUS_FACTOR == 1.0 + 1e-12


def test_mpmath_helpers_read_the_table():
    with mp.workdps(30):
        assert mpevents.stay_tol() == tolerance("stay")
        assert mpevents.hold_slack() == tolerance("hold_slack")
        assert mplinalg.rcond() == tolerance("rcond")


def _small_literals(path: pathlib.Path):
    """Float literals in ``(1e-100, 1e-5)`` in the code of ``path`` (docstrings and comments are strings and
    comments to the tokenizer, not numbers)."""
    source = path.read_text()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NUMBER and 1e-100 < float(tok.string) < 1e-5:
            yield f"{path.relative_to(ROOT)}:{tok.start[0]}: {tok.string}"


def test_no_module_keeps_a_tolerance_of_its_own():
    sources = sorted((ROOT / "kernels").glob("*.py")) + sorted((ROOT / "flowlib" / "mp").glob("*.py"))
    assert len(sources) > 15
    found = [hit for path in sources if path.name != "tolerances.py" for hit in _small_literals(path)]
    assert found == []
    # mpmath code takes no root of the epsilon itself (the rule lives in flowlib/mp/tolerances.py)
    roots = [f"{path.relative_to(ROOT)}:{k + 1}" for path in sources if path.name != "tolerances.py"
             for k, line in enumerate(path.read_text().splitlines())
             if "mp.eps **" in line or "mpf(10) **" in line]
    assert roots == []


def test_exit_side_threshold_scales_with_the_working_precision():
    """A held surface whose ``a_j G_i`` polynomial is ``1e-12`` of its Taylor terms at the exit: rounding in
    float64 (below ``1e-8``: re-classify, side 0), a genuine exit at 30 digits (far above ``1e-8 eps^(1/2)``
    rescaled). The mpmath backend once used ``1e-8`` at every precision and called it 0/0."""
    import numpy as np

    from flowlib.mp.flow import _Integrator

    phi64 = np.zeros((3, 1))
    phi64[:, 0] = [1e-12, 1.0, -1.0]  # value at tau = 1: 1e-12, terms of size 1
    assert kdriver._exit_side(phi64, 0, 2, 1.0, 1.0) == 0
    with mp.workdps(30):
        phi = [mpf("1e-12"), mpf(1), mpf(-1)]
        assert _Integrator._exit_side(phi, mpf(1), 1) == 1
        assert _Integrator._exit_side(phi, mpf(1), 0) == -1
        phi = [mpf("1e-24"), mpf(1), mpf(-1)]  # below 1e-8 (eps / 2^-52)^(1/2), about 2e-16 at 30 digits
        assert _Integrator._exit_side(phi, mpf(1), 1) == 0
