"""Cost modes (gittinseval/core/costs.py) and per-cell charging in the simulator."""

import numpy as np
import pytest

from gittinseval import Benchmark, CellCost, GaussianPrior, Policy, PriceCost, RandomExampleOrder, Request, UnitCost
from gittinseval.sim.simulator import simulate
from tests.conftest import cell_benchmark


class RecordingRandom(Policy):
    """Random arms and examples; keeps every request and the costs it was told."""

    name, label = "recording", "Recording"
    uses_prior = False

    def __init__(self, batch_size: int = 3):
        self.batch_size = batch_size

    def reset(self, problem, rng):
        self.rng, self.told_costs, self.requests = rng, problem.costs.copy(), []
        self.order = RandomExampleOrder(problem.n_arms, problem.n_examples, rng)

    def select(self):
        open_arms = np.flatnonzero(self.order.n_taken < self.order.order.shape[1])
        if open_arms.size == 0:
            return None
        arm = int(self.rng.choice(open_arms))
        request = Request(arm, self.order.take(arm, min(self.batch_size, self.order.remaining(arm))))
        self.requests.append(request)
        return request

    def observe(self, request, scores):
        pass

    def recommend(self):
        return 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_per_cell_spend_is_the_sum_of_the_evaluated_cells_own_costs(seed):
    bench = cell_benchmark(seed)
    policy = RecordingRandom()
    mode = CellCost()
    result = simulate(bench, policy, mode(bench), GaussianPrior(), budget_fraction=0.5, seed=seed,
                      cell_costs=mode.cell_costs(bench))
    # The policy plans with each arm's expected cost, the row mean of its cells.
    np.testing.assert_allclose(policy.told_costs, bench.cell_costs.mean(axis=1), rtol=1e-12)
    charged = [sum(bench.cell_costs[r.arm, n] for n in r.examples) for r in policy.requests]
    np.testing.assert_allclose(result.trace["cost"], np.cumsum(charged), rtol=1e-12)
    assert result.summary["total_cost"] == pytest.approx(sum(charged), rel=1e-12)
    assert result.summary["exhaustive_cost"] == pytest.approx(bench.cell_costs.sum(), rel=1e-12)
    # Charged per arm instead, the same requests would have cost their arms' means.
    per_arm = [len(r.examples) * bench.prices[r.arm] for r in policy.requests]
    assert not np.allclose(charged, per_arm)


def test_cost_modes_plan_with_expected_costs_and_only_per_cell_charges_cells():
    bench = cell_benchmark()
    np.testing.assert_array_equal(UnitCost()(bench), np.ones(4))
    np.testing.assert_allclose(PriceCost()(bench), bench.cell_costs.mean(axis=1))
    np.testing.assert_allclose(CellCost()(bench), bench.cell_costs.mean(axis=1))
    assert UnitCost().cell_costs(bench) is None and PriceCost().cell_costs(bench) is None
    assert CellCost().cell_costs(bench) is bench.cell_costs
    plain = Benchmark("plain", bench.scores, prices=np.ones(4))
    with pytest.raises(ValueError, match="'plain' has no per-cell costs; use cost=aware or cost=unit"):
        CellCost().cell_costs(plain)


def test_the_simulator_refuses_arm_costs_that_are_not_the_cells_row_means():
    bench = cell_benchmark()
    with pytest.raises(ValueError, match="the arms' costs must be the row means of the cell costs"):
        simulate(bench, RecordingRandom(), np.ones(4), GaussianPrior(), cell_costs=bench.cell_costs)
