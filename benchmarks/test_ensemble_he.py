"""pytest-benchmark: the 10,000-initialisation He experiment of Smorodinsky et al. (seed 000) through
``flowlib.ensemble``, GD and the flow. Timings are recorded, never asserted; the numbers are checked against the
validation claim ``000-he-init`` (docs/validation/report.json: 2552 of 10,000 succeed, exactly the draws with
w2 < 0 < w1, Figure 3 numerator KS p = 0.5720 against F_B)."""

import pytest

from benchmarks import ensemble_he

#: The smoke run (``--benchmark-disable``, as CI runs it) keeps the flow's 10,000 draws and GD's first 2,000.
SMOKE_GD_COUNT = 2_000


@pytest.mark.benchmark(group="ensemble-he")
def test_flow_ensemble(benchmark):
    ens = benchmark.pedantic(ensemble_he.run, args=("flow",), rounds=3, iterations=1, warmup_rounds=1)
    numbers = ensemble_he.figure3_numbers(ens)
    assert numbers["successes"] == 2552 and numbers["quadrant_mismatch"] == 0
    assert ens.counts() == {"deadline": 7448, "reached": 2552}
    benchmark.extra_info.update(numbers)


@pytest.mark.benchmark(group="ensemble-he")
def test_gd_ensemble(benchmark):
    count = SMOKE_GD_COUNT if benchmark.disabled else 10_000
    ens = benchmark.pedantic(ensemble_he.run, args=("gd", count), rounds=1, iterations=1, warmup_rounds=0)
    numbers = ensemble_he.figure3_numbers(ens)
    assert numbers["quadrant_mismatch"] == 0
    if count == 10_000:  # the claim's numbers, bit for bit the same trajectories
        assert numbers["successes"] == 2552
        assert numbers["ks_pvalue"] == pytest.approx(0.5719522549933803, rel=1e-12)
    benchmark.extra_info.update(numbers)
