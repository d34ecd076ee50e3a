"""Every bandit baseline: Hydra config, budget rule, determinism, cost-unaware allocation."""

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from gittinseval.baselines._common import RunningMeans, cell_budget
from gittinseval.baselines.lrf import LowRankEnsemble, LRFPolicy
from gittinseval.baselines.prompteval import PromptEvalPolicy
from gittinseval.baselines.sysrs import SySRsPolicy
from gittinseval.baselines.ucbe import UCBEPolicy
from gittinseval.baselines.uniform import UniformPolicy
from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.core.priors import GaussianPrior
from gittinseval.core.protocol import EvaluationProblem
from gittinseval.data import Benchmark
from gittinseval.sim.simulator import simulate

CLASSES = {
    "ucbe": UCBEPolicy,
    "lrf": LRFPolicy,
    "sysrs": SySRsPolicy,
    "prompteval": PromptEvalPolicy,
    "uniform": UniformPolicy,
}
PRIOR = GaussianPrior(0.5, 0.04, "general")


def small_policy(name):
    """Each policy with a batch size that gives many requests on the small matrix."""
    return {
        "ucbe": lambda: UCBEPolicy(batch_size=3),
        "lrf": lambda: LRFPolicy(batch_size=4, ensemble=LowRankEnsemble(ensemble_size=8)),
        "sysrs": lambda: SySRsPolicy(batch_size=3),
        "prompteval": lambda: PromptEvalPolicy(batch_size=2),
        "uniform": lambda: UniformPolicy(batch_size=3),
    }[name]()


@pytest.fixture(scope="module")
def benchmark():
    rng = np.random.default_rng(11)
    scores = (rng.uniform(size=(16, 60)) < rng.uniform(0.2, 0.8, size=(16, 1))).astype(float)
    return Benchmark("synthetic", scores, prices=rng.choice([0.3, 1.0, 5.0], size=16), default_batch_size=4)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_hydra_composes_each_policy(name):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"policy={name}", "policy.batch_size=5"])
    policy = instantiate(cfg.policy)
    assert type(policy) is CLASSES[name] and policy.name == name
    assert policy.hyperparameters()["batch_size"] == 5


def test_lrf_ensemble_is_configurable():
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["policy=lrf", "policy.ensemble.rank=2"])
    policy = instantiate(cfg.policy)
    assert isinstance(policy.ensemble, LowRankEnsemble)
    ensemble = {"_target_": "gittinseval.baselines.lrf.LowRankEnsemble", "rank": 2, "ensemble_size": 64, "ridge": 0.1,
                "drop_probability": 0.05, "iterations": 10, "pairing": "reference", "dropout_draws": "observed"}
    params = policy.get_params()
    assert params["ensemble"] == ensemble
    assert params == policy.hyperparameters()  # the summary records what rebuilds the policy


@pytest.mark.parametrize("name", sorted(CLASSES))
@pytest.mark.parametrize("priced", [False, True])
def test_budget_rule_and_determinism(benchmark, name, priced):
    costs = benchmark.prices if priced else np.ones(benchmark.n_arms)
    runs = [simulate(benchmark, small_policy(name), costs, PRIOR, seed=seed) for seed in (3, 3, 4)]
    first, again, other = runs
    for key in ("arm", "batch_size", "recommended", "cost"):
        np.testing.assert_array_equal(first.trace[key], again.trace[key])
    assert not all(np.array_equal(first.trace[k], other.trace[k]) for k in ("arm", "recommended", "batch_size"))
    budget = first.summary["budget"]
    spend = first.trace["cost"]
    # Only the last request may cross the budget; stopping short means the
    # policy had nothing left to request (a finished schedule under real costs).
    assert np.all(spend[:-1] < budget)
    if spend[-1] < budget:
        assert priced and name in ("sysrs", "prompteval")


@pytest.mark.parametrize("name", ["ucbe", "uniform", "sysrs", "lrf"])
def test_allocation_ignores_costs(benchmark, name):
    # Same budget fraction, unit versus real prices: the requests agree until
    # the priced run stops, because only the simulator looks at the costs.
    unit = simulate(benchmark, small_policy(name), np.ones(benchmark.n_arms), PRIOR, seed=5)
    priced = simulate(benchmark, small_policy(name), benchmark.prices, PRIOR, seed=5)
    steps = min(unit.summary["n_steps"], priced.summary["n_steps"])
    np.testing.assert_array_equal(unit.trace["arm"][:steps], priced.trace["arm"][:steps])
    np.testing.assert_array_equal(unit.trace["batch_size"][:steps], priced.trace["batch_size"][:steps])


def test_cell_budget_is_the_budget_fraction_of_all_cells():
    unit = EvaluationProblem(n_examples=805, costs=np.ones(57), budget=0.1 * 57 * 805, binary=False)
    assert cell_budget(unit) == 4589  # ceil(4588.5)
    priced = EvaluationProblem(n_examples=10, costs=np.array([1.0, 3.0]), budget=0.5 * 40, binary=False)
    assert cell_budget(priced) == 10


def test_running_means_best_skips_unobserved_and_breaks_ties_by_priority():
    stats = RunningMeans(4)
    priority = np.array([3, 0, 2, 1])
    everyone = np.ones(4, dtype=bool)
    assert stats.best(everyone, priority) == 1
    stats.update(2, np.array([1.0, 0.0]))
    stats.update(3, np.array([0.5]))
    assert stats.best(everyone, priority) == 3  # means 0.5 and 0.5: arm 3 ranks first
    stats.update(0, np.array([1.0]))
    assert stats.best(everyone, priority) == 0
    assert stats.best(np.array([False, True, True, False]), priority) == 2
    np.testing.assert_allclose(stats.means, [1.0, np.nan, 0.5, 0.5])
    np.testing.assert_array_equal(stats.seen_means, np.where(stats.counts > 0, stats.means, -np.inf))


def test_evaluation_problem_requires_binary_by_keyword():
    with pytest.raises(TypeError, match="binary"):
        EvaluationProblem(n_examples=10, costs=np.ones(2), budget=4.0)
    assert not EvaluationProblem(10, np.ones(2), 4.0, binary=False).binary
