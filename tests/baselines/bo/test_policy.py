"""The configuration-level BO policy (gittinseval.baselines.bo.policy), as PBGI, LogEI and LogEIPC run it: whole
configurations within the budget, the initial design, the stop rules, fit failures and their fallbacks, Hydra."""

import logging

import numpy as np
import pytest
import torch
from botorch.exceptions.errors import ModelFittingError
from botorch.fit import fit_gpytorch_mll
from gpytorch.mlls import ExactMarginalLogLikelihood
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from scipy.stats import chisquare

import gittinseval.baselines.bo as bo
import gittinseval.baselines.bo.policy as bo_policy
from gittinseval.baselines.bo import ConfigurationBOPolicy, fit_mixed_gp, initial_design_size
from gittinseval.baselines.logei import LogEIPolicy
from gittinseval.baselines.logeipc import LogEIPCPolicy
from gittinseval.baselines.pbgi import PBGIPolicy
from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.core.protocol import EvaluationProblem
from tests.baselines.bo_reference import (
    POLICIES,
    expected_improvement_mp,
    mock_model,
    random_benchmark,
    run,
    stock_gp,
)


@pytest.mark.parametrize("policy_class", POLICIES)
@pytest.mark.parametrize("costs", ["unit", "priced"])
def test_runs_make_the_decisions_of_botorchs_own_fit_and_posterior(policy_class, costs, monkeypatch):
    benchmark = random_benchmark(n_arms=60, seed=11)
    # About ten queries, three of them the initial design.
    prices, budget = (np.ones(60), 0.15) if costs == "unit" else (benchmark.prices, 0.08)
    fast = run(policy_class(), benchmark, prices, seed=2, budget_fraction=budget)

    def stock_fit(model):
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model), max_attempts=1)
        return model

    monkeypatch.setattr(bo_policy, "mixed_gp", lambda X, Y, noise, state=None: stock_gp(X, Y, noise))
    monkeypatch.setattr(bo_policy, "fit_mixed_gp", stock_fit)
    stock = run(policy_class(), benchmark, prices, seed=2, budget_fraction=budget)
    assert fast.summary["n_steps"] > 2 * fast.summary["hyperparameters"]["n_initial"]
    for name in ("arm", "recommended", "cost"):
        np.testing.assert_array_equal(fast.trace[name], stock.trace[name])
    assert fast.summary["stop_step"] == stock.summary["stop_step"]


# --- the configuration-level protocol -------------------------------------------------------


@pytest.mark.parametrize(("n_arms", "expected"), [(152, 8), (1500, 75), (122, 6), (103, 5), (57, 3), (10, 1), (4, 1)])
def test_initial_design_size_is_five_percent_rounded_and_at_least_one(n_arms, expected):
    assert initial_design_size(n_arms, 0.05) == expected


@pytest.mark.parametrize("policy_class", POLICIES)
def test_unit_cost_run_evaluates_whole_configurations_within_the_budget(policy_class):
    benchmark = random_benchmark(n_arms=45)
    result = run(policy_class(), benchmark, np.ones(45))
    trace, summary = result.trace, result.summary
    # 10% of 45 configurations: 4.5, so 4 whole configurations without overshoot.
    assert summary["n_steps"] == 4 and summary["total_cost"] == 4 * 30 <= summary["budget"]
    assert (trace["batch_size"] == 30).all() and len(set(trace["arm"])) == 4
    assert summary["hyperparameters"]["n_initial"] == 2
    # Recommendation: the best observed configuration after every query.
    row_means = benchmark.row_means
    for step, recommended in enumerate(trace["recommended"]):
        seen = trace["arm"][: step + 1]
        assert row_means[recommended] == row_means[seen].max()


@pytest.mark.parametrize("policy_class", POLICIES)
def test_cost_aware_run_never_overshoots_and_stops_when_nothing_fits(policy_class):
    benchmark = random_benchmark(n_arms=30, seed=1)
    costs = benchmark.prices
    result = run(policy_class(), benchmark, costs, seed=3)
    summary = result.summary
    spent = result.trace["cost"]
    assert spent[-1] <= summary["budget"] and np.isclose(spent[-1], 30 * costs[result.trace["arm"]].sum())
    unevaluated = np.setdiff1d(np.arange(30), result.trace["arm"])
    assert spent[-1] + 30 * costs[unevaluated].min() > summary["budget"]


def test_initial_design_is_uniform_and_skips_configurations_that_do_not_fit():
    n_arms = 20
    costs = np.ones(n_arms)
    costs[7] = 100.0  # one configuration alone costs more than the budget
    budget = 0.1 * 5 * costs.sum()
    features = np.arange(n_arms)[:, None]
    problem = EvaluationProblem(n_examples=5, costs=costs, budget=budget, features=features, binary=False)
    counts = np.zeros(n_arms)
    for seed in range(400):
        policy = LogEIPolicy(init_fraction=0.1)
        policy.reset(problem, np.random.default_rng(seed))
        first = policy.select().arm
        counts[first] += 1
        assert policy.initial_order[0] in (first, 7)
    assert counts[7] == 0
    # The other 19 are equally likely: 400/19 each; a chi-square test at 1e-3.
    assert chisquare(counts[np.arange(n_arms) != 7]).pvalue > 1e-3


@pytest.mark.parametrize("policy_class", POLICIES)
def test_same_seed_same_trace(policy_class):
    benchmark = random_benchmark(n_arms=24, seed=4)
    first, second = (run(policy_class(), benchmark, benchmark.prices, seed=9) for _ in range(2))
    for name in ("arm", "recommended", "cost"):
        np.testing.assert_array_equal(first.trace[name], second.trace[name])
    assert first.summary["stop_step"] == second.summary["stop_step"]


def test_cost_aware_acquisition_uses_the_configuration_cost_and_unit_cost_uses_one():
    problem = EvaluationProblem(n_examples=30, costs=np.array([0.5, 2.0, 7.0]), budget=10.0, binary=False)
    policy = PBGIPolicy()
    policy.reset(problem, np.random.default_rng(0))
    np.testing.assert_array_equal(policy.acquisition_costs.numpy(), [15.0, 60.0, 210.0])
    unit = EvaluationProblem(n_examples=30, costs=np.ones(3), budget=10.0, binary=False)
    policy.reset(unit, np.random.default_rng(0))
    np.testing.assert_array_equal(policy.acquisition_costs.numpy(), [1.0, 1.0, 1.0])


def test_a_bo_query_must_be_a_new_whole_configuration():
    benchmark = random_benchmark()
    policy = LogEIPolicy()
    problem = EvaluationProblem(30, np.ones(40), 120.0, features=benchmark.features, binary=False)
    policy.reset(problem, np.random.default_rng(0))
    request = policy.select()
    assert request.examples.tolist() == list(range(30))
    partial = type(request)(request.arm, request.examples[:5])
    with pytest.raises(ValueError, match="all examples"):
        policy.observe(partial, benchmark.scores[request.arm, :5])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"lam": 0.0}, "lam must be positive"),
    ({"noise_var": -1.0}, "noise_var must be positive"),
    ({"init_fraction": 0.0}, "init_fraction must be in"),
    ({"init_fraction": 1.5}, "init_fraction must be in"),
])
def test_bad_hyperparameters_are_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PBGIPolicy(**kwargs)


# --- stopping signals -----------------------------------------------------------------------


@pytest.mark.parametrize("policy_class", POLICIES)
def test_stop_rules_fire_on_constructed_posteriors(policy_class):
    policy = policy_class(lam=1e-4)
    best_f = 0.7
    costs = torch.tensor([1.0, 10.0, 100.0], dtype=torch.float64)
    candidates = torch.zeros(3, 1, 1, dtype=torch.float64)
    # Far below the best, tiny sd: EI is far below lambda c everywhere.
    hopeless = mock_model([0.4, 0.5, 0.3], [1e-3, 1e-3, 1e-3])
    values = policy.acquisition_values(hopeless, candidates, best_f, costs)
    assert policy.stop_rule_fires(values, best_f, costs)
    # One candidate near the best with a wide posterior: EI >> lambda c for it.
    promising = mock_model([0.4, 0.69, 0.3], [1e-3, 0.1, 1e-3])
    values = policy.acquisition_values(promising, candidates, best_f, costs)
    assert not policy.stop_rule_fires(values, best_f, costs)


@pytest.mark.parametrize("policy_class", POLICIES)
def test_stop_rules_agree_with_the_threshold_ei_equals_lambda_c(policy_class):
    # Xie et al.: all three rules fire iff max_x EI(x) / c(x) <= lambda (PBGI: g(x) <= best_f).
    best_f, lam = 0.6, 1e-3
    sigma = 0.05
    costs = torch.tensor([2.0, 3.0], dtype=torch.float64)
    for gap in np.linspace(-0.2, 0.05, 26):
        mean = [best_f + gap, best_f - 0.3]
        per_cost = [expected_improvement_mp(m, sigma, best_f) / c for m, c in zip(mean, costs.tolist(), strict=True)]
        ratio = float(max(per_cost))
        if abs(ratio / lam - 1) < 1e-6:
            continue
        policy = policy_class(lam=lam)
        model = mock_model(mean, [sigma, sigma])
        values = policy.acquisition_values(model, torch.zeros(2, 1, 1, dtype=torch.float64), best_f, costs)
        assert policy.stop_rule_fires(values, best_f, costs) == (ratio <= lam)


@pytest.mark.parametrize("policy_class", POLICIES)
def test_stop_signal_is_recorded_and_the_run_goes_on(policy_class):
    # lambda = 1 under unit cost: no EI of a row mean can reach 1, so the rule fires
    # as soon as the initial design is complete; the run still uses its budget.
    benchmark = random_benchmark(n_arms=80, seed=5)
    result = run(policy_class(lam=1.0), benchmark, np.ones(80))
    assert result.summary["stop_step"] == result.summary["hyperparameters"]["n_initial"] == 4
    assert result.summary["n_steps"] == 8


# --- fit failures ---------------------------------------------------------------------------


def failing_fit(fail_when):
    calls = {"n": 0}

    def fit(model):
        calls["n"] += 1
        if fail_when(calls["n"], model):
            raise ModelFittingError("All attempts to fit the model have failed.")
        return fit_mixed_gp(model)

    return fit


def test_every_fit_failing_falls_back_to_random_configurations(monkeypatch, caplog):
    monkeypatch.setattr(bo_policy, "fit_mixed_gp", failing_fit(lambda n, model: True))
    benchmark = random_benchmark(n_arms=60, seed=6)
    with caplog.at_level(logging.WARNING, logger="gittinseval.baselines.bo"):
        result = run(PBGIPolicy(), benchmark, np.ones(60))
    params = result.summary["hyperparameters"]
    assert result.summary["n_steps"] == 6 and len(set(result.trace["arm"])) == 6
    # Refits after observations 3, 4 and 5 (none after the last: nothing fits any more).
    assert params["fit_failures"] == 6 and params["fallback_steps"] == 3
    assert "random configuration" in caplog.text and "GP fit on 3 configurations failed" in caplog.text


def test_a_failed_fit_is_retried_from_random_hyperparameters(monkeypatch, caplog):
    starts = []

    def fail_on_default_start(n, model):
        starts.append(model.covar_module.outputscale.item())
        return n % 2 == 1  # every first attempt fails

    monkeypatch.setattr(bo_policy, "fit_mixed_gp", failing_fit(fail_on_default_start))
    benchmark = random_benchmark(n_arms=60, seed=6)
    with caplog.at_level(logging.WARNING, logger="gittinseval.baselines.bo"):
        result = run(LogEIPolicy(), benchmark, np.ones(60))
    params = result.summary["hyperparameters"]
    assert params["fit_failures"] == 3 and params["fallback_steps"] == 0
    assert len(set(starts[1::2])) == 3 and starts[0] not in starts[1::2]  # restarts are random
    assert "default start" in caplog.text


def test_later_failures_reuse_the_previous_hyperparameters(monkeypatch, caplog):
    monkeypatch.setattr(bo_policy, "fit_mixed_gp", failing_fit(lambda n, model: n > 1))
    seen = []
    original = ConfigurationBOPolicy._fit_surrogate

    def spy(self):
        model = original(self)
        seen.append(None if model is None else bo.hyperparameters_of(model))
        return model

    monkeypatch.setattr(ConfigurationBOPolicy, "_fit_surrogate", spy)
    benchmark = random_benchmark(n_arms=60, seed=6)
    with caplog.at_level(logging.WARNING, logger="gittinseval.baselines.bo"):
        result = run(LogEIPCPolicy(), benchmark, np.ones(60))
    assert result.summary["hyperparameters"]["fallback_steps"] == len(seen) - 1 == 2
    for state in seen[1:]:
        assert all(torch.equal(state[key], seen[0][key]) for key in state)
    assert "reusing the previous step's GP hyperparameters" in caplog.text


# --- Hydra ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "policy_class"), [("pbgi", PBGIPolicy), ("logei", LogEIPolicy), ("logeipc", LogEIPCPolicy)]
)
def test_hydra_composes_each_bo_policy(name, policy_class):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"policy={name}", "policy.lam=1e-3"])
    policy = instantiate(cfg.policy)
    assert type(policy) is policy_class and policy.name == name
    assert policy.hyperparameters() == {"lam": 1e-3, "init_fraction": 0.05, "noise_var": 1e-6}


@pytest.mark.parametrize("policy_class", POLICIES)
def test_learned_costs_reach_the_budget_check_and_the_acquisition(policy_class):
    """update_costs: a query costs N c_k at the new costs, and so does the acquisition's cost (ones under unit cost)."""
    priced = EvaluationProblem(10, np.array([1.0, 2.0, 4.0]), budget=35.0, binary=True)
    policy = policy_class()
    policy.reset(priced, np.random.default_rng(0))
    assert policy.affordable().tolist() == [True, True, False]  # 10, 20, 40 against 35
    policy.update_costs(np.array([1.0, 2.0, 3.0]))
    assert policy.affordable().tolist() == [True, True, True]
    np.testing.assert_array_equal(policy.acquisition_costs.numpy(), [10.0, 20.0, 30.0])
    unit = EvaluationProblem(10, np.ones(3), budget=35.0, binary=True)
    policy.reset(unit, np.random.default_rng(0))
    policy.update_costs(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(policy.query_costs, [10.0, 20.0, 30.0])
    np.testing.assert_array_equal(policy.acquisition_costs.numpy(), [1.0, 1.0, 1.0])
