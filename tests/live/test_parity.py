"""One meaning for lambda: a live replay of an MMLU subject at concurrency 1 is the simulator's run."""

import numpy as np
import pytest

from gittinseval import EmpiricalPriorEstimator, GaussianPrior, GittinsPolicy, simulate
from gittinseval.baselines.ucbe import UCBEPolicy
from gittinseval.core.roots import root_schedule
from gittinseval.data import load_mmlu
from gittinseval.live import Evaluator, LiveConfig, LiveTask, evaluate, matrix_task

# 2% would end UCB-E exactly on the budget after its first round (2 examples of each
# arm), where rounding decides; 2.5% ends between batches.
SUBJECT, SEED, BUDGET_FRACTION = "abstract_algebra", 4, 0.025
PRIOR = GaussianPrior(0.5, 0.04)


@pytest.fixture(scope="module")
def bench():
    return load_mmlu(SUBJECT)


def test_live_costs_become_the_papers_raw_prices_and_lambda_per_dollar(bench):
    """c_k = dollars_k * 1e6 / T, so lam * c_k = lam_$ * dollars_k with lam_$ = lam * 1e6 / T."""
    tokens = 250.0
    dollars = bench.prices * tokens / 1e6
    task = LiveTask(bench.arm_names, range(bench.n_examples), costs=dollars, tokens_per_example=tokens)
    with Evaluator(task, LiveConfig(policy=GittinsPolicy(2))) as ev:
        policy = ev.policy
    np.testing.assert_allclose(policy.problem.costs, bench.prices, rtol=1e-14)
    lam_per_dollar = 1e-4 * 1e6 / tokens
    np.testing.assert_allclose(policy.lam * policy.problem.costs, lam_per_dollar * dollars, rtol=1e-14)
    # The roots are those of the paper's cost lambda * b * c_k with raw prices.
    distinct = np.unique(bench.prices)
    expected = root_schedule(bench.n_examples, 2, PRIOR.var, 1e-4 * distinct, cell_var=0.25, grid_points=1025)
    np.testing.assert_allclose(policy.roots[:, :-1], expected, rtol=1e-10, atol=1e-15)


def test_unit_costs_are_the_papers_unit_cost_setting(bench):
    task = LiveTask(bench.arm_names, range(bench.n_examples), costs="unit")
    with Evaluator(task, LiveConfig(budget_usd=50, policy=GittinsPolicy(2))) as evaluator:
        np.testing.assert_array_equal(evaluator.policy.problem.costs, np.ones(bench.n_arms))
        assert evaluator.policy.problem.budget == 50
        request = evaluator.ask()
        assert evaluator.tell(request, bench.scores[request.arm, request.examples]) == request.size


@pytest.mark.parametrize(
    ("make_policy", "fires"),
    [
        (lambda: GittinsPolicy(2), False),
        # A lambda at which the stopping signal fires inside the budget.
        (lambda: GittinsPolicy(2, lam=1e-2), True),
        (lambda: UCBEPolicy(2), False),
        # GittinsEval-EB refits its prior from the told scores; told in the same order, it refits the same.
        (lambda: GittinsPolicy(2, prior_estimator=EmpiricalPriorEstimator()), True),
    ],
    ids=["gittins", "gittins-lam1e-2", "ucbe", "gittins-eb"],
)
def test_live_replay_of_an_mmlu_subject_is_the_simulated_run(bench, make_policy, fires):
    task = matrix_task(bench, tokens_per_example=1000)
    simulated = simulate(
        bench, make_policy(), bench.prices, PRIOR, budget_fraction=BUDGET_FRACTION, seed=SEED, cost_mode="aware"
    )
    live = evaluate(
        task.arms,
        task.examples,
        task.score_fn,
        BUDGET_FRACTION * bench.n_examples * float(np.sum(task.costs)),
        costs=task.costs,
        tokens_per_example=task.tokens_per_example,
        policy=make_policy(),
        prior=PRIOR,
        seed=SEED,
        concurrency=1,
        progress=False,
    )
    assert live.stop_reason == "budget" and len(live.trace["arm"]) > 100
    for column in ("arm", "batch_size", "recommended"):
        np.testing.assert_array_equal(live.trace[column], simulated.trace[column])
    np.testing.assert_allclose(live.trace["cost"] * 1e6 / 1000, simulated.trace["cost"], rtol=1e-12)
    fired = np.flatnonzero(live.trace["stop_signal"])
    assert bool(fired.size) == fires
    assert (int(fired[0]) + 1 if fired.size else None) == simulated.summary["stop_step"]
    assert live.recommendation.arm == simulated.summary["final_recommended"]
    assert live.summary()["diagnostics"] == simulated.summary["diagnostics"]
