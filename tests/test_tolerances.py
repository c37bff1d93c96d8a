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
from flowlib.kernels import zeno as kzeno
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
    assert kzeno.ZENO_TIME_TOL == 32 * ktol.EPS64
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


def _held_one_slot(phi, den):
    """A kernel ``Held`` with one slot (sample 0 of neuron 0) whose ``phi`` and ``den`` series are given."""
    import numpy as np

    col = lambda c: np.array(c, dtype=float).reshape(-1, 1)  # noqa: E731
    z = np.zeros((len(phi), 1))
    return kdriver.Held(np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros((1, 2)), np.zeros(1, np.bool_),
                        np.zeros(1), np.zeros((1, 1)), z, col(phi), z, col(den), np.zeros((1, 2)),
                        np.zeros(1, np.int64), np.empty(0, np.int64), np.empty(0), np.empty(0))


def test_exit_side_threshold_scales_with_the_working_precision():
    """A held surface whose ``a_j G_i`` polynomial is ``1e-12`` of its Taylor terms at the exit (``a_j = 1``
    constant, ``G_i = 1e-12 + (tau - 1)^2``): rounding in float64 (below ``1e-8``: re-classify, side 0), a genuine
    exit at 30 digits (far above ``1e-8 eps^(1/2)`` rescaled). The mpmath backend once used ``1e-8`` at every
    precision and called it 0/0."""
    import numpy as np

    from flowlib.mp.flow import Held, _Integrator

    G = [1.0 + 1e-12, -2.0, 1.0]  # value at tau = 1: 1e-12, terms of size 2
    C = np.zeros((3, 1, 3))
    C[0, 0, 2] = 1.0
    assert kdriver._exit_side(_held_one_slot(G, G), C, 0, 2, 1.0, 1.0) == 0

    class Engine:
        K = 3

    engine = Engine()
    with mp.workdps(30):
        engine.data = type("Data", (), {"da": 2})()
        engine.C = [[[mpf(0), mpf(0), mpf(1)]], [[mpf(0)] * 3], [[mpf(0)] * 3]]
        for G, sides in (([1 + mpf("1e-12"), mpf(-2), mpf(1)], (1, -1)),
                         ([1 + mpf("1e-24"), mpf(-2), mpf(1)], (0, 0))):  # 1e-24: below 2e-16 at 30 digits
            held = Held([], [(0, 0)], [False], [mpf(0)], [], [G], [], [G], {}, {}, [])
            assert _Integrator._exit_side(engine, held, 0, mpf(1), 1) == sides[0]
            assert _Integrator._exit_side(engine, held, 0, mpf(1), 0) == sides[1]


def test_exit_side_where_the_outer_weight_vanishes_is_that_of_a_derivative():
    """A trained outer weight passing through 0 at the exit (``a_j = 1 - tau`` at ``tau = 1``, ``G_i = 2``):
    ``a_j G_i`` is 0 there, and the side is decided by the sign just after, that of ``a_j' G_i = -2`` (a sliding
    surface turned repelling: left downwards at ``s = 1``, upwards at ``s = leak``), in both backends. Where
    ``G_i`` vanishes instead (the residual at rounding, ``a_j = 1``), there is no genuine exit (0)."""
    import numpy as np

    from flowlib.mp.flow import Held, _Integrator

    C = np.zeros((2, 1, 3))
    C[:, 0, 2] = [1.0, -1.0]
    held = _held_one_slot([2.0, -2.0], [2.0, 0.0])
    assert kdriver._exit_side(held, C, 0, 1, 1.0, 1.0) == -1
    assert kdriver._exit_side(held, C, 0, 1, 1.0, 0.25) == 1
    assert kdriver._exit_side(held, C, 0, 1, 0.5, 1.0) == 1  # before the zero: the value's sign
    C[:, 0, 2] = [1.0, 0.0]
    assert kdriver._exit_side(_held_one_slot([1.0, -1.0], [1.0, -1.0]), C, 0, 1, 1.0, 1.0) == 0

    class Engine:
        K = 2

    engine = Engine()
    with mp.workdps(30):
        engine.data = type("Data", (), {"da": 2})()
        engine.C = [[[mpf(0), mpf(0), mpf(1)]], [[mpf(0), mpf(0), mpf(-1)]]]
        held = Held([], [(0, 0)], [False], [mpf(0)], [], [[mpf(2), mpf(-2)]], [], [[mpf(2), mpf(0)]], {}, {},
                    [])
        assert _Integrator._exit_side(engine, held, 0, mpf(1), 1) == -1
        assert _Integrator._exit_side(engine, held, 0, mpf(1), mpf("0.25")) == 1
