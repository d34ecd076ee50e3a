"""Cost modes (gittinseval/core/costs.py) and per-cell charging in the simulator."""

import numpy as np
import pytest

from gittinseval import (
    Benchmark,
    CellCost,
    CostLearning,
    GaussianPrior,
    GittinsPolicy,
    LearnedCellCost,
    Policy,
    PriceCost,
    RandomExampleOrder,
    Request,
    RunSettings,
    UnitCost,
)
from gittinseval.sim.simulator import simulate
from gittinseval.utils.validation import ConfigError
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


class RecordingCosts(RecordingRandom):
    """RecordingRandom that also keeps every update_costs call: (requests made so far, the costs)."""

    def reset(self, problem, rng):
        super().reset(problem, rng)
        self.updates = []

    def update_costs(self, costs):
        self.updates.append((len(self.requests), costs.copy()))


def test_the_misguess_is_a_seeded_share_of_the_arms_off_by_the_factor_either_way():
    bench = cell_benchmark(n_arms=10)
    mode = LearnedCellCost(misguess_factor=5.0, misguessed_share=0.3)
    guesses = [mode.guess(bench, seed) for seed in range(6)]
    for guess in guesses:
        ratio = guess / bench.prices
        off = ~np.isclose(ratio, 1.0)
        assert off.sum() == 3 and np.allclose(np.abs(np.log(ratio[off])), np.log(5.0))
    np.testing.assert_array_equal(guesses[0], mode.guess(bench, 0))
    assert len({tuple(np.round(np.log(g / bench.prices), 6)) for g in guesses}) > 1  # drawn per run seed
    np.testing.assert_array_equal(LearnedCellCost(misguess_factor=1.0).guess(bench, 0), bench.prices)
    assert mode.plan_name == "5x off for 30%" and LearnedCellCost().plan_name == "true"
    with pytest.raises(ConfigError, match="misguess_factor must be at least 1"):
        LearnedCellCost(misguess_factor=0.2)
    with pytest.raises(ConfigError, match="refresh_share must be non-negative"):
        RunSettings(learn_costs={"pseudo_count": 1.0, "refresh_share": -1.0})
    with pytest.raises(ConfigError, match=r"learn_costs has unknown keys \['learn'\]"):
        RunSettings(learn_costs={"learn": True})


def test_the_true_guess_not_learned_is_the_per_cell_run():
    bench = cell_benchmark(n_arms=6, n_examples=40)
    runs = []
    for mode in (CellCost(), LearnedCellCost(misguess_factor=1.0)):
        runs.append(simulate(bench, GittinsPolicy(4, lam=1e-2), mode(bench), GaussianPrior(), budget_fraction=0.5,
                             seed=2, cell_costs=mode.cell_costs(bench), cost_plan=mode.plan(bench, 2),
                             settings=RunSettings(learn_costs=None)))
    for column in ("arm", "cost", "recommended"):
        np.testing.assert_array_equal(runs[0].trace[column], runs[1].trace[column])
    assert "cost_plan" not in runs[0].summary and runs[1].summary["cost_plan"] == "true"


def test_the_simulator_hands_the_policy_the_estimate_from_the_charged_cells_when_it_moves():
    """The budget is a share of the true costs, the policy starts from the guess, and it gets the estimates
    (n0 g + S) / (n0 + n) of the cells charged so far whenever an arm's moves by more than the share."""
    bench = cell_benchmark(seed=1, n_arms=5, n_examples=40)
    mode = LearnedCellCost(misguess_factor=5.0, misguessed_share=0.4)
    plan = mode.plan(bench, 3)
    policy = RecordingCosts()
    result = simulate(bench, policy, mode(bench), GaussianPrior(), budget_fraction=0.6, seed=3,
                      cell_costs=mode.cell_costs(bench), cost_plan=plan,
                      settings=RunSettings(learn_costs=CostLearning(pseudo_count=2.0, refresh_share=0.1)))
    np.testing.assert_array_equal(policy.told_costs, plan.guess)
    assert not np.allclose(plan.guess, bench.prices)
    assert result.summary["budget"] == pytest.approx(0.6 * bench.cell_costs.sum(), rel=1e-12)
    planned, charged, counts, expected = plan.guess.copy(), np.zeros(5), np.zeros(5), []
    for step, request in enumerate(policy.requests, start=1):
        charged[request.arm] += bench.cell_costs[request.arm, request.examples].sum()
        counts[request.arm] += request.size
        estimate = (2.0 * plan.guess[request.arm] + charged[request.arm]) / (2.0 + counts[request.arm])
        if abs(estimate - planned[request.arm]) > 0.1 * planned[request.arm]:
            planned[request.arm] = estimate
            expected.append((step, planned.copy()))
    assert len(policy.updates) == len(expected) == result.summary["cost_refreshes"] >= 3
    for (step, costs), (expected_step, expected_costs) in zip(policy.updates, expected, strict=True):
        assert step == expected_step
        np.testing.assert_allclose(costs, expected_costs, rtol=1e-12)
    assert result.summary["cost_plan"] == "5x off for 40%, learned"
    assert result.summary["total_cost"] == pytest.approx(charged.sum(), rel=1e-12)
