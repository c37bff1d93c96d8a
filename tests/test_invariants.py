"""Invariants exact along every solution: balancedness, the energy identity, L non-increasing (docs/design.md,
Statuses and diagnostics).

Acceptance criterion: balancedness drift <= 1e-12 relative over t in [0, 1000] on ten random
orthogonally separable problems (m <= 50, n <= 50, d <= 10), where every crossing is transversal
(Wang & Pilanci's setting, small balanced initialisation).
"""

import numpy as np
import pytest

import flowlib as fl
from flowlib import examples


def os_problem(seed):
    rng = np.random.default_rng(seed)
    m, n, d = int(rng.integers(5, 51)), int(rng.integers(4, 51)), int(rng.integers(2, 11))
    X, y = examples.orthogonally_separable(n, d, rng)
    loss = ("logistic", "exp")[seed % 2]
    prob = fl.Problem(X, y, loss=loss, reduction=("sum", "mean")[seed % 3 == 0], bias=False, train_outer=True)
    return prob, examples.balanced_init(m, d, 10.0 ** -rng.uniform(1, 3), rng)


@pytest.mark.parametrize("seed", range(10))
def test_balancedness_and_energy_on_os_problems(seed):
    prob, p0 = os_problem(seed)
    res = fl.gradient_flow(prob, p0, 1000.0, dense_output=False)
    assert res.status == "success", res.message
    assert res.n_events > 0
    assert res.balancedness_drift <= 1e-12
    assert res.energy_residual <= 1e-12
    assert np.all(np.diff(res.loss) <= 1e-15 * res.loss[:-1])
    # at most one crossing per (neuron, sample) on orthogonally separable data (each hyperplane is crossed at most once)
    pairs = [(e.neuron, e.sample) for e in res.events]
    assert len(pairs) == len(set(pairs))


@pytest.mark.parametrize("loss", ["exp", "logistic", "square"])
@pytest.mark.parametrize("leak", [0.0, 0.3])
def test_invariants_random_problems_with_bias(loss, leak, rng):
    n, d, m = 12, 3, 7
    X = rng.standard_normal((n, d))
    y = np.sign(rng.standard_normal(n)) if loss != "square" else rng.standard_normal(n)
    prob = fl.Problem(X, y, loss=loss, activation="leaky_relu" if leak else "relu", leak=leak, bias=True,
                      train_outer=True)
    p0 = examples.random_init(m, d, rng, bias=True)
    res = fl.gradient_flow(prob, p0, 5.0)
    assert res.status == "success", res.message
    assert res.balancedness_drift <= 1e-12
    assert res.energy_residual <= 1e-12
    assert np.all(np.diff(res.loss) <= 1e-15 * res.loss[:-1])
