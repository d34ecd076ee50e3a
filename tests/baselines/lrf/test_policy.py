"""UCB-E-LRF: parity with banditeval's step, warm-up, recommendation, ties, budget, determinism."""

import math

import numpy as np
import pytest
import torch
from banditeval.bandits import upper_confidence_bound_exploration_low_rank_factorization as banditeval_step

from gittinseval.baselines.lrf import LowRankEnsemble, LRFPolicy
from gittinseval.core.protocol import EvaluationProblem, Request
from gittinseval.data import Benchmark
from gittinseval.sim.simulator import simulate
from tests.baselines.lrf.lrf_reference import PRIOR, fit_moments, random_matrix


def fed_policy(scores, observed, seed, **kwargs):
    n_arms, n_examples = scores.shape
    policy = LRFPolicy(**kwargs)
    problem = EvaluationProblem(n_examples, np.ones(n_arms), float(n_arms * n_examples), binary=False)
    policy.reset(problem, np.random.default_rng(0))
    policy.warmup.clear()
    for arm in range(n_arms):
        examples = np.flatnonzero(observed[arm])
        policy.observe(Request(arm, examples), scores[arm, examples])
    policy.generator = torch.Generator().manual_seed(seed)
    return policy


@pytest.mark.parametrize("seed", range(4))
def test_step_matches_banditeval_with_the_same_random_state(seed):
    scores, observed = random_matrix(10 + seed, 60, 40)
    policy = fed_policy(scores, observed, seed, batch_size=8, ensemble=LowRankEnsemble(dropout_draws="stream"))
    matrix = torch.tensor(np.where(observed, scores, np.nan), dtype=torch.float32)
    torch.manual_seed(seed)
    batch, mus = banditeval_step(matrix, batch_size=8, return_mus=True)
    request = policy.select()
    assert request.arm == int(batch[0, 0])
    assert sorted(request.examples.tolist()) == sorted(batch[1].tolist())
    np.testing.assert_allclose(policy.imputed_sums / 40, mus.numpy(), atol=1e-5)


def test_arm_scores_match_an_independent_ucb_computation():
    scores, observed = random_matrix(3, 50, 30)
    policy = fed_policy(scores, observed, 9, eta=2.0)
    arm_scores, mean, sd = policy.arm_scores()
    want, _ = fit_moments(LowRankEnsemble(), scores, observed, torch.Generator().manual_seed(9))
    np.testing.assert_allclose(mean, want)
    cell = [[scores[k, n] if observed[k, n] else mean[k, n] + 2.0 * sd[k, n] for n in range(30)] for k in range(50)]
    expected = np.mean(cell, axis=1)
    np.testing.assert_allclose(arm_scores, expected)


def test_warmup_is_five_percent_of_cells_one_request_per_arm_and_no_fit():
    n_arms, n_examples = 30, 40
    scores = np.random.default_rng(0).uniform(size=(n_arms, n_examples))
    policy = LRFPolicy(batch_size=4, ensemble=LowRankEnsemble(ensemble_size=4))
    problem = EvaluationProblem(n_examples, np.ones(n_arms), 0.1 * n_arms * n_examples, binary=False)
    policy.reset(problem, np.random.default_rng(2))
    warmup = list(policy.warmup)
    assert sum(r.size for r in warmup) == math.ceil(0.05 * n_arms * n_examples)
    assert len({r.arm for r in warmup}) == len(warmup)
    for _ in warmup:
        request = policy.select()
        policy.observe(request, scores[request.arm, request.examples])
        assert policy.fit_mean is None
        observed_means = np.where(policy.stats.counts > 0, policy.stats.means, -np.inf)
        assert policy.recommend() == int(np.argmax(observed_means))
    request = policy.select()
    assert policy.fit_mean is not None and request.size == 4
    imputed = np.where(policy.matrix.observed, policy.matrix.values, policy.fit_mean).mean(axis=1)
    policy.observe(request, scores[request.arm, request.examples])
    imputed[request.arm] = np.where(policy.matrix.observed, policy.matrix.values, policy.fit_mean)[request.arm].mean()
    assert policy.recommend() == int(np.argmax(imputed))


def test_a_matrix_of_two_to_the_31_cells_is_refused_before_any_allocation():
    problem = EvaluationProblem(2**15, np.ones(2**16), 1.0, binary=True)
    with pytest.raises(ValueError, match=r"K x N must be below 2\*\*31, got 65536 x 32768"):
        LRFPolicy().reset(problem, np.random.default_rng(0))


def test_bad_policy_hyperparameters_are_named():
    with pytest.raises(ValueError, match="warmup_fraction"):
        LRFPolicy(warmup_fraction=0.0)
    with pytest.raises(ValueError, match="warm_start_iterations"):
        LRFPolicy(warm_start=True, warm_start_iterations=0)
    with pytest.raises(ValueError, match="warm_start must be true or false"):
        LRFPolicy(warm_start="yes")


def small_benchmark():
    rng = np.random.default_rng(11)
    scores = (rng.uniform(size=(16, 60)) < rng.uniform(0.2, 0.8, size=(16, 1))).astype(float)
    return Benchmark("synthetic", scores, prices=np.ones(16), default_batch_size=4)


def small_lrf(warm_start):
    return LRFPolicy(batch_size=4, ensemble=LowRankEnsemble(ensemble_size=8), warm_start=warm_start)


def test_warm_start_is_deterministic_per_seed_and_keeps_the_protocol():
    bench = small_benchmark()
    costs = np.ones(16)
    first, again, other = (simulate(bench, small_lrf(True), costs, PRIOR, seed=s) for s in (3, 3, 4))
    for key in ("arm", "batch_size", "recommended", "cost"):
        np.testing.assert_array_equal(first.trace[key], again.trace[key])
    assert not np.array_equal(first.trace["arm"], other.trace["arm"])
    spend, budget = first.trace["cost"], first.summary["budget"]
    assert np.all(spend[:-1] < budget) and spend[-1] >= budget
    assert first.summary["hyperparameters"]["warm_start"] is True
    # The warm-up and the first (cold) fit are the parity run's; warm starts change what follows.
    parity = simulate(bench, small_lrf(False), costs, PRIOR, seed=3)
    first_fitted = int(np.searchsorted(np.cumsum(parity.trace["batch_size"]), math.ceil(0.05 * 16 * 60))) + 1
    np.testing.assert_array_equal(first.trace["arm"][: first_fitted + 1], parity.trace["arm"][: first_fitted + 1])
    assert not np.array_equal(first.trace["arm"], parity.trace["arm"])
    # Another method than the reference's: a report must not pool its runs with the parity runs.
    assert (first.summary["label"], parity.summary["label"]) == ("UCB-E-LRF warm start", "UCB-E-LRF")


def test_observed_dropout_runs_are_deterministic_per_seed():
    bench = small_benchmark()
    policies = [LRFPolicy(batch_size=4, ensemble=LowRankEnsemble(ensemble_size=8)) for _ in range(3)]
    first, again, other = (
        simulate(bench, policy, np.ones(16), PRIOR, budget_fraction=0.4, seed=s)
        for policy, s in zip(policies, (3, 3, 4), strict=True)
    )
    assert all(policy.draws_ahead is None for policy in policies)  # the default mode draws no stream
    for key in ("arm", "batch_size", "recommended", "cost"):
        np.testing.assert_array_equal(first.trace[key], again.trace[key])
    assert not np.array_equal(first.trace["arm"], other.trace["arm"])
    assert len(first.trace["arm"]) > 16 + 60  # at most one warm-up request per arm, then fitted steps


@pytest.mark.parametrize("warm_start", [False, True])
def test_recommendation_is_the_argmax_of_observed_cells_filled_by_the_latest_fit(warm_start):
    n_arms, n_examples = 20, 30
    scores = np.random.default_rng(5).uniform(size=(n_arms, n_examples))  # continuous: no exact ties
    policy = LRFPolicy(batch_size=3, ensemble=LowRankEnsemble(ensemble_size=6), warm_start=warm_start)
    problem = EvaluationProblem(n_examples, np.ones(n_arms), 0.5 * n_arms * n_examples, binary=False)
    policy.reset(problem, np.random.default_rng(1))
    seen = np.zeros((n_arms, n_examples), dtype=bool)
    fitted_steps = 0
    for _ in range(80):
        request = policy.select()
        policy.observe(request, scores[request.arm, request.examples])
        seen[request.arm, request.examples] = True
        if policy.fit is None:
            counts = seen.sum(axis=1)
            imputed = np.where(counts > 0, (scores * seen).sum(axis=1) / np.maximum(counts, 1), -np.inf)
        else:
            fitted_steps += 1
            u, v = policy.fit.u.double(), policy.fit.v.double()
            fill = torch.bmm(u, v.transpose(1, 2)).mean(0).numpy()
            imputed = np.where(seen, scores, fill).mean(axis=1)
        assert imputed[policy.recommend()] >= imputed.max() - 1e-9
    assert fitted_steps >= 50


def test_completed_arms_with_equal_sums_stay_tied_for_the_priority_to_decide():
    """Binary scores make exact ties among completed arms; rounding must not break them."""
    n_examples = 545
    rng = np.random.default_rng(2)
    scores = np.zeros((6, n_examples))
    for arm in (1, 4):  # completed, the same 309 right answers in different places
        scores[arm, rng.permutation(n_examples)[:309]] = 1.0
    observed = np.zeros_like(scores, dtype=bool)
    observed[[1, 4]] = True
    observed[[0, 2, 3, 5], :40] = True  # partial arms, all wrong
    policy = fed_policy(scores, observed, 3, batch_size=4)
    policy.select()
    completed = policy.stats.counts == n_examples
    np.testing.assert_array_equal(policy.imputed_sums[completed], policy.stats.sums[completed])
    assert policy.recommend() == min((1, 4), key=lambda arm: policy.priority[arm])
    arm = 1 + 4 - policy.recommend()
    policy.priority[[1, 4]] = policy.priority[[4, 1]]
    assert policy.recommend() == arm


# The thinnest matrices a run accepts: two arms (one arm is refused, there is nothing to compare), one example.
@pytest.mark.parametrize("shape", [(2, 12), (9, 1)])
def test_two_arms_or_a_single_example_run_to_the_budget(shape):
    scores = np.random.default_rng(3).uniform(size=shape)
    batch_size = min(2, shape[1])
    bench = Benchmark("lrf-thin", scores, prices=np.ones(shape[0]), default_batch_size=batch_size)
    policy = LRFPolicy(batch_size=batch_size, ensemble=LowRankEnsemble(ensemble_size=4))
    result = simulate(bench, policy, np.ones(shape[0]), PRIOR, budget_fraction=0.6, seed=0)
    assert policy.fit is not None  # past the warm-up: the fit ran on the thin matrix
    assert result.trace["cost"][-1] >= 0.6 * scores.size and np.all(np.asarray(result.trace["regret"]) >= 0)
