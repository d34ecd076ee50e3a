"""Configuration-level BO baselines: PBGI's index equation, LogEIPC, budget, stopping, fit fallback."""

import logging
import math

import mpmath
import numpy as np
import pytest
import torch
from botorch.acquisition.analytic import LogExpectedImprovement
from botorch.exceptions.errors import ModelFittingError
from botorch.fit import fit_gpytorch_mll
from botorch.models import MixedSingleTaskGP
from botorch.models.kernels.categorical import CategoricalKernel
from botorch.models.transforms.outcome import Standardize
from botorch.optim.closures import get_loss_closure_with_grads
from botorch.optim.utils import get_parameters_and_bounds
from botorch.utils.testing import MockModel, MockPosterior
from gpytorch.mlls import ExactMarginalLogLikelihood
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from scipy.optimize import brentq
from scipy.stats import chisquare, norm

import gittinseval.baselines.bo as bo
import gittinseval.baselines.bo.policy as bo_policy
from gittinseval.baselines.bo import (
    CategoricalLossClosure,
    ConfigurationBOPolicy,
    categorical_correlation,
    fit_mixed_gp,
    initial_design_size,
    mismatch_of,
    mixed_gp,
)
from gittinseval.baselines.logei import LogEIPolicy
from gittinseval.baselines.logeipc import LogEIPCPolicy, LogExpectedImprovementPerCost
from gittinseval.baselines.pbgi import PandoraBoxGittinsIndex, PBGIPolicy, solve_log_ei_equation
from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.core.priors import GaussianPrior
from gittinseval.core.protocol import EvaluationProblem
from gittinseval.data import Benchmark
from gittinseval.sim.simulator import simulate

POLICIES = [PBGIPolicy, LogEIPolicy, LogEIPCPolicy]
mpmath.mp.dps = 50


def expected_improvement_mp(mean, sigma, threshold):
    """``E[max(f - threshold, 0)]``, ``f ~ N(mean, sigma^2)``, in 50-digit arithmetic."""
    mean, sigma, threshold = (mpmath.mpf(float(v)) for v in (mean, sigma, threshold))
    z = (mean - threshold) / sigma
    return sigma * (z * mpmath.ncdf(z) + mpmath.npdf(z))


def mock_model(mean, sigma):
    """A model whose posterior at any ``[M, 1, D]`` input is ``N(mean, sigma^2)`` elementwise."""
    mean = torch.as_tensor(mean, dtype=torch.float64).reshape(-1, 1, 1)
    variance = torch.as_tensor(sigma, dtype=torch.float64).reshape(-1, 1, 1) ** 2
    return MockModel(MockPosterior(mean=mean, variance=variance))


@pytest.fixture(scope="module")
def fitted_gp():
    """A GP fitted on 12 of 30 configurations with two categorical features."""
    rng = np.random.default_rng(0)
    codes = np.stack(np.meshgrid(np.arange(6), np.arange(5)), -1).reshape(-1, 2)
    truth = 0.5 + 0.1 * rng.normal(size=6)[codes[:, 0]] + 0.05 * rng.normal(size=5)[codes[:, 1]]
    observed = rng.choice(len(codes), size=12, replace=False)
    X = torch.as_tensor(codes, dtype=torch.float64)
    Y = torch.as_tensor(truth[observed, None], dtype=torch.float64)
    model = fit_mixed_gp(mixed_gp(X[observed], Y, 1e-6))
    candidates = X[np.setdiff1d(np.arange(len(codes)), observed)].unsqueeze(-2)
    return model, candidates, float(Y.max())


def posterior_moments(model, candidates):
    posterior = model.posterior(candidates)
    return posterior.mean.reshape(-1).detach(), posterior.variance.reshape(-1).detach().sqrt()


# --- the categorical GP's closed forms against BoTorch -----------------------------------


def categorical_data(n_dims, n_train=40, seed=0):
    """All ``[K, D]`` codes of a small grid (``K = 4^D``, 5 x 4 x 3 for ``D = 3``), ``n_train`` of them observed."""
    rng = np.random.default_rng(seed)
    sizes = (5, 4, 3)[:n_dims] if n_dims > 1 else (20,)
    codes = np.stack(np.meshgrid(*(np.arange(size) for size in sizes), indexing="ij"), -1).reshape(-1, n_dims)
    observed = rng.choice(len(codes), size=min(n_train, len(codes) - 5), replace=False)
    X = torch.as_tensor(codes, dtype=torch.float64)
    Y = torch.as_tensor(0.5 + 0.1 * rng.normal(size=(len(observed), 1)))
    unobserved = np.setdiff1d(np.arange(len(codes)), observed)
    return X[observed], Y, X[unobserved]


def stock_gp(train_X, train_Y, noise_var=1e-6):
    """BoTorch's own ``MixedSingleTaskGP`` as :func:`mixed_gp` configures it."""
    return MixedSingleTaskGP(train_X, train_Y, cat_dims=list(range(train_X.shape[-1])),
                             train_Yvar=torch.full_like(train_Y, noise_var), outcome_transform=Standardize(m=1))


@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_categorical_correlation_is_botorchs_kernel(n_dims):
    train_X, _, candidates = categorical_data(n_dims)
    lengthscale = torch.as_tensor(np.random.default_rng(n_dims).uniform(0.05, 5.0, n_dims))
    kernel = CategoricalKernel(ard_num_dims=n_dims).double()
    kernel.lengthscale = lengthscale
    expected = kernel(train_X, candidates).to_dense().detach()
    ours = categorical_correlation(mismatch_of(train_X, candidates), lengthscale)
    torch.testing.assert_close(ours, expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_loss_closure_is_botorchs_loss_and_gradient(n_dims):
    train_X, train_Y, _ = categorical_data(n_dims, seed=n_dims)
    mll = ExactMarginalLogLikelihood((model := mixed_gp(train_X, train_Y, 1e-6)).likelihood, model).train()
    parameters = get_parameters_and_bounds(mll, requires_grad=True)[0]
    reference, ours = get_loss_closure_with_grads(mll, parameters=parameters), CategoricalLossClosure(mll)
    rng = np.random.default_rng(0)
    for _ in range(5):
        with torch.no_grad():
            for parameter in parameters.values():
                parameter.copy_(torch.as_tensor(rng.normal(0.0, 2.0, size=parameter.shape)))
        (loss, grads), (expected_loss, expected_grads) = ours(), reference()
        torch.testing.assert_close(loss, expected_loss.detach(), rtol=0, atol=1e-10)
        for grad, expected in zip(grads, expected_grads, strict=True):
            torch.testing.assert_close(grad, expected, rtol=0, atol=1e-10)


def test_loss_closure_hands_a_failed_cholesky_to_botorch(monkeypatch):
    train_X, train_Y, _ = categorical_data(2)
    mll = ExactMarginalLogLikelihood((model := mixed_gp(train_X, train_Y, 1e-6)).likelihood, model).train()
    closure = CategoricalLossClosure(mll)
    calls = []
    monkeypatch.setattr(closure, "botorch_closure", lambda: calls.append(1) or "botorch")
    monkeypatch.setattr(torch.linalg, "cholesky_ex", lambda a: (a, torch.tensor(1)))
    assert closure() == "botorch" and calls == [1]


@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_fit_reaches_botorchs_optimum_and_posterior_is_botorchs(n_dims):
    train_X, train_Y, candidates = categorical_data(n_dims, seed=10 + n_dims)
    ours = fit_mixed_gp(mixed_gp(train_X, train_Y, 1e-6))
    stock = stock_gp(train_X, train_Y)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(stock.likelihood, stock), max_attempts=1)
    # The same optimum: the same marginal likelihood (the optimiser stops within its tolerance of it).
    losses = []
    for model in (ours, stock):
        mll = ExactMarginalLogLikelihood(model.likelihood, model).train()
        losses.append(get_loss_closure_with_grads(mll, get_parameters_and_bounds(mll, requires_grad=True)[0])()[0])
        model.eval()
    torch.testing.assert_close(losses[0], losses[1], rtol=1e-8, atol=0)
    # The closed-form posterior of the fitted model against BoTorch's on the same model.
    with torch.no_grad():
        fast = ours.posterior(candidates.unsqueeze(-2))
        reference = MixedSingleTaskGP.posterior(ours, candidates.unsqueeze(-2))
    torch.testing.assert_close(fast.mean, reference.mean, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(fast.variance, reference.variance, rtol=1e-10, atol=1e-14)


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


# --- PBGI's index ---------------------------------------------------------------------------


def test_index_equation_root_is_exact_over_a_wide_range_of_targets():
    targets = torch.linspace(-60.0, 25.0, 301, dtype=torch.float64)
    roots = solve_log_ei_equation(targets)
    for u, t in zip(roots.tolist(), targets.tolist(), strict=True):
        u = mpmath.mpf(u)
        log_h = mpmath.log(u * mpmath.ncdf(u) + mpmath.npdf(u))
        assert abs(float(log_h) - t) <= 1e-10, (t, float(log_h))


def test_pbgi_index_solves_ei_equals_lambda_cost_on_a_fitted_gp(fitted_gp):
    model, candidates, _ = fitted_gp
    lam = 1e-4
    costs = torch.as_tensor(np.random.default_rng(1).uniform(1.0, 2000.0, len(candidates)), dtype=torch.float64)
    with torch.no_grad():
        index = PandoraBoxGittinsIndex(model, lam, costs)(candidates)
    mean, sigma = posterior_moments(model, candidates)
    assert index.shape == (len(candidates),)
    for m, s, g, c in zip(mean, sigma, index, costs, strict=True):
        ei = expected_improvement_mp(m, s, g)
        assert abs(float(ei / (lam * float(c))) - 1) < 1e-8


def test_pbgi_index_decreases_in_cost(fitted_gp):
    model, candidates, _ = fitted_gp
    costs = torch.logspace(-2, 5, 40, dtype=torch.float64)
    point = candidates[:1].expand(len(costs), 1, -1)
    index = PandoraBoxGittinsIndex(model, 1e-4, costs)(point)
    assert (index.diff() < 0).all()


def test_pbgi_index_matches_a_scalar_root_finder_on_random_posteriors():
    rng = np.random.default_rng(2)
    mean, sigma = rng.uniform(0, 1, 200), np.exp(rng.uniform(np.log(1e-3), np.log(0.5), 200))
    costs = np.exp(rng.uniform(0, np.log(1e4), 200))
    lam = 1e-4
    X = torch.zeros(200, 1, 1, dtype=torch.float64)
    index = PandoraBoxGittinsIndex(mock_model(mean, sigma), lam, torch.as_tensor(costs))(X)
    for m, s, c, g in zip(mean, sigma, costs, index.tolist(), strict=True):

        def excess(threshold, m=m, s=s, c=c):
            z = (m - threshold) / s
            return s * (z * norm.cdf(z) + norm.pdf(z)) - lam * c

        reference = brentq(excess, m - 50 * s - lam * c, m + 50 * s, xtol=1e-14, rtol=1e-14)
        assert g == pytest.approx(reference, rel=1e-9, abs=1e-9 * s)


def test_pbgi_with_unit_cost_is_a_constant_cost(fitted_gp):
    model, candidates, _ = fitted_gp
    scalar = PandoraBoxGittinsIndex(model, 1e-4)(candidates)
    vector = PandoraBoxGittinsIndex(model, 1e-4, torch.ones(len(candidates), dtype=torch.float64))(candidates)
    torch.testing.assert_close(scalar, vector, rtol=0, atol=0)


def test_index_solver_and_acquisition_reject_bad_input(fitted_gp):
    with pytest.raises(ValueError, match="float64"):
        solve_log_ei_equation(torch.zeros(3, dtype=torch.float32))
    with pytest.raises(ValueError, match="finite"):
        solve_log_ei_equation(torch.tensor([0.0, math.nan], dtype=torch.float64))
    with pytest.raises(ValueError, match="lam must be positive"):
        PandoraBoxGittinsIndex(fitted_gp[0], 0.0)
    with pytest.raises(ValueError, match="costs must be positive"):
        PandoraBoxGittinsIndex(fitted_gp[0], 1e-4, torch.tensor([1.0, -1.0]))


# --- LogEIPC --------------------------------------------------------------------------------


def test_logeipc_is_logei_minus_log_cost(fitted_gp):
    model, candidates, best_f = fitted_gp
    costs = torch.as_tensor(np.random.default_rng(3).uniform(0.1, 500.0, len(candidates)), dtype=torch.float64)
    logeipc = LogExpectedImprovementPerCost(model, best_f, costs)(candidates)
    logei = LogExpectedImprovement(model, best_f=torch.tensor(best_f, dtype=torch.float64))(candidates)
    torch.testing.assert_close(logeipc, logei - costs.log(), rtol=0, atol=1e-12)


def test_logeipc_is_the_log_of_ei_per_cost_on_known_posteriors():
    rng = np.random.default_rng(4)
    best_f = 0.6
    mean, sigma = rng.uniform(0.3, 0.9, 100), np.exp(rng.uniform(np.log(1e-3), np.log(0.3), 100))
    costs = np.exp(rng.uniform(-2, 8, 100))
    X = torch.zeros(100, 1, 1, dtype=torch.float64)
    values = LogExpectedImprovementPerCost(mock_model(mean, sigma), best_f, torch.as_tensor(costs))(X)
    for value, m, s, c in zip(values.tolist(), mean, sigma, costs, strict=True):
        reference = float(mpmath.log(expected_improvement_mp(m, s, best_f) / c))
        assert value == pytest.approx(reference, rel=1e-10, abs=1e-10)


# --- the configuration-level protocol -------------------------------------------------------


def random_benchmark(n_arms=40, n_examples=30, seed=0):
    """Binary scores; each arm a distinct (model, template) pair of a 10 x 10 grid."""
    rng = np.random.default_rng(seed)
    means = rng.uniform(0.2, 0.8, n_arms)
    scores = (rng.uniform(size=(n_arms, n_examples)) < means[:, None]).astype(float)
    cells = rng.choice(100, size=n_arms, replace=False)
    features = np.stack([cells // 10, cells % 10], axis=1)
    return Benchmark(name="toy", scores=scores, prices=rng.choice([0.5, 1.0, 7.0], n_arms), features=features)


def run(policy, benchmark, costs, seed=0, budget_fraction=0.1):
    return simulate(benchmark, policy, costs, GaussianPrior(0.5, 0.04, "g"), budget_fraction=budget_fraction, seed=seed)


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
