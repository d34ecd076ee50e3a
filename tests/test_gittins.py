"""GittinsPolicy against a from-scratch replay of Algorithm 1."""

import numpy as np
import pytest

from gittinseval import EvaluationProblem, GittinsPolicy, Request, root_schedule
from gittinseval.gittins import argmax_by_priority


def make_problem(costs, n_examples, budget=None, prior_mean=0.5, prior_var=0.04):
    costs = np.asarray(costs, dtype=float)
    budget = n_examples * costs.sum() if budget is None else budget
    return EvaluationProblem(n_examples, costs, budget, prior_mean, prior_var, binary=False)


def reference_replay(scores, costs, policy, prior_mean, prior_var, batch, lam, kappa, cell_var=0.25):
    """Algorithm 1 recomputed from scratch after every batch (no incremental state).

    Uses the policy's own example order and tie-break priority, which are random
    draws of the run, and returns (arms, recommendations, first stop step).
    """
    n_arms, n_examples = scores.shape
    roots = {c: np.append(root_schedule(n_examples, batch, prior_var, lam * c, cell_var), 0.0) for c in set(costs)}
    n_seen = np.zeros(n_arms, dtype=int)
    arms, recommendations, stop = [], [], None
    order = policy.order.order
    priority = policy.priority
    while True:
        # Moments from the observed cells only (eq. finite-posterior-moments).
        means, variances, index = np.empty(n_arms), np.empty(n_arms), np.empty(n_arms)
        for k in range(n_arms):
            observed = scores[k, order[k, : n_seen[k]]]
            latent_var = 1 / (1 / prior_var + n_seen[k] / cell_var)
            latent_mean = latent_var * (prior_mean / prior_var + observed.sum() / cell_var)
            unseen = n_examples - n_seen[k]
            means[k] = (observed.sum() + unseen * latent_mean) / n_examples
            variances[k] = (unseen**2 * latent_var + unseen * cell_var) / n_examples**2
            stage = -(-n_seen[k] // batch)
            index[k] = means[k] - roots[costs[k]][stage]
        if arms:
            recommendations.append(argmax_by_priority(means - kappa * np.sqrt(variances), priority))
            done = n_seen == n_examples
            if stop is None and index[done].max(initial=-np.inf) >= index[~done].max(initial=-np.inf):
                stop = len(arms)
        if (n_seen == n_examples).all():
            break
        arm = argmax_by_priority(np.where(n_seen < n_examples, index, -np.inf), priority)
        arms.append(arm)
        n_seen[arm] += min(batch, n_examples - n_seen[arm])
    return arms, recommendations, stop


def run_policy(policy, scores, problem, seed):
    policy.reset(problem, np.random.default_rng(seed))
    arms, recommendations, stop = [], [], None
    while (request := policy.select()) is not None:
        policy.observe(request, scores[request.arm, request.examples])
        arms.append(request.arm)
        recommendations.append(policy.recommend())
        if stop is None and policy.stop_signal:
            stop = len(arms)
    return arms, recommendations, stop


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("kappa", [0.0, 1.0])
def test_policy_matches_from_scratch_replay(seed, kappa):
    rng = np.random.default_rng(100 + seed)
    n_arms, n_examples, batch = 7, 23, 5  # partial last batch of 3
    scores = rng.beta(0.6, 0.6, size=(n_arms, n_examples)) * rng.uniform(0.5, 1, size=(n_arms, 1))
    costs = np.array([1.0, 2.0, 1.0, 0.5, 2.0, 0.5, 1.0])
    problem = make_problem(costs, n_examples, prior_mean=0.45, prior_var=0.03)
    policy = GittinsPolicy(batch_size=batch, lam=3e-3, kappa=kappa)
    arms, recommendations, stop = run_policy(policy, scores, problem, seed)
    ref_arms, ref_recommendations, ref_stop = reference_replay(
        scores, costs, policy, 0.45, 0.03, batch, 3e-3, kappa
    )
    assert arms == ref_arms
    assert recommendations == ref_recommendations
    assert stop == ref_stop
    assert stop is not None and stop < len(arms)  # the signal fires before the end
    assert len(arms) == n_arms * 5  # every arm completed in H = 5 batches
    # A completed arm's index is its full-row mean.
    np.testing.assert_allclose(policy.index, scores.mean(axis=1), atol=1e-12)


def test_stop_signal_fires_when_a_completed_arm_leads():
    scores = np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.5, 0.5]])
    policy = GittinsPolicy(batch_size=4, lam=0.1)
    problem = make_problem([1.0, 1.0, 1.0], 4)
    policy.reset(problem, np.random.default_rng(0))
    # Unfinished index: M - r_0 with r_0 > 0 at this cost; a completed arm at 1.0 leads.
    assert policy.roots[0, 0] > 0
    fired_after = None
    while (request := policy.select()) is not None:
        policy.observe(request, scores[request.arm, request.examples])
        if policy.stop_signal and fired_after is None:
            fired_after = request.arm
    assert fired_after == 0


def test_kappa_changes_recommendation_not_trajectory():
    rng = np.random.default_rng(5)
    scores = rng.uniform(size=(20, 40))
    problem = make_problem(np.ones(20), 40, budget=200)
    lcb = run_policy(GittinsPolicy(batch_size=4, kappa=1.0), scores, problem, 3)
    mean = run_policy(GittinsPolicy(batch_size=4, kappa=0.0), scores, problem, 3)
    assert lcb[0] == mean[0] and lcb[2] == mean[2]


def test_ties_are_broken_by_a_per_run_random_priority():
    problem = make_problem(np.ones(50), 10)
    firsts = set()
    for seed in range(10):
        policy = GittinsPolicy(batch_size=2)
        policy.reset(problem, np.random.default_rng(seed))
        firsts.add(policy.select().arm)
        assert policy.recommend() == int(np.argmin(policy.priority))
    assert len(firsts) > 5


def test_examples_are_distinct_per_arm_and_orders_differ_between_arms():
    problem = make_problem(np.ones(3), 12)
    policy = GittinsPolicy(batch_size=5)
    policy.reset(problem, np.random.default_rng(0))
    seen = {k: [] for k in range(3)}
    while (request := policy.select()) is not None:
        seen[request.arm].extend(request.examples.tolist())
        policy.observe(request, np.full(request.size, 0.5))
    for examples in seen.values():
        assert sorted(examples) == list(range(12))
    assert len({tuple(v) for v in seen.values()}) == 3


@pytest.mark.parametrize(
    "scores, message",
    [
        ([0.5, 1.2], "finite and in \\[0, 1\\]"),
        ([0.5, np.nan], "finite and in \\[0, 1\\]"),
        ([0.5], "expected 2 scores"),
    ],
)
def test_observe_rejects_bad_scores(scores, message):
    policy = GittinsPolicy(batch_size=2)
    policy.reset(make_problem([1.0], 4), np.random.default_rng(0))
    request = policy.select()
    with pytest.raises(ValueError, match=message):
        policy.observe(request, scores)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 2.5}, "batch_size"),
        ({"lam": 0.0}, "lam must be positive"),
        ({"cell_var": -0.25}, "cell_var must be positive"),
        ({"kappa": float("inf")}, "kappa must be finite"),
        ({"kappa": -0.5}, "kappa must be finite and >= 0"),
    ],
)
def test_bad_hyperparameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GittinsPolicy(**kwargs)


def test_batch_larger_than_benchmark_is_rejected():
    with pytest.raises(ValueError, match="batch_size \\(16\\) is larger than the number of examples N = 10"):
        GittinsPolicy(batch_size=16).reset(make_problem([1.0], 10), np.random.default_rng(0))


def test_request_is_a_plain_value():
    request = Request(3, np.array([1, 2]))
    assert request.size == 2 and request.arm == 3


def test_kappa_flips_the_recommendation_on_a_built_case():
    # Arm 0: 40 of 100 examples seen, mean 0.6 (certain); arm 1: 2 seen, both 1 (uncertain).
    # Textbook moments (prior N(0.5, 0.04), tau^2 = 1/4) put arm 1 ahead in posterior mean
    # and arm 0 ahead in M - sqrt(V).
    n_examples, prior_mean, prior_var, cell_var = 100, 0.5, 0.04, 0.25
    observed = {0: np.array([1.0] * 24 + [0.0] * 16), 1: np.array([1.0, 1.0])}

    def moments(scores):
        n = scores.size
        latent_var = 1 / (1 / prior_var + n / cell_var)
        latent_mean = latent_var * (prior_mean / prior_var + scores.sum() / cell_var)
        mean = (scores.sum() + (n_examples - n) * latent_mean) / n_examples
        var = ((n_examples - n) ** 2 * latent_var + (n_examples - n) * cell_var) / n_examples**2
        return mean, var

    (m0, v0), (m1, v1) = moments(observed[0]), moments(observed[1])
    assert m1 > m0 and m0 - np.sqrt(v0) > m1 - np.sqrt(v1)
    for kappa, expected in ((0.0, 1), (1.0, 0)):
        policy = GittinsPolicy(batch_size=2, kappa=kappa)
        policy.reset(make_problem([1.0, 1.0], n_examples), np.random.default_rng(0))
        for arm, scores in observed.items():
            for start in range(0, scores.size, 2):
                policy.observe(Request(arm, np.arange(start, start + 2)), scores[start : start + 2])
        assert policy.recommend() == expected


@pytest.mark.parametrize("completed_below", [False, True])
def test_stopping_signal_fires_on_an_exact_tie_with_the_best_open_arm(completed_below):
    # N = B = 2: one batch completes an arm.  The open arm's index is mu0 - r_0; the
    # prior mean is chosen so that this equals 0.5 exactly, the completed arm's mean.
    root = root_schedule(2, 2, 0.04, 1e-4)[0]
    prior_mean = 0.5 + root
    while prior_mean - root > 0.5:
        prior_mean = np.nextafter(prior_mean, -np.inf)
    while prior_mean - root < 0.5:
        prior_mean = np.nextafter(prior_mean, np.inf)
    assert prior_mean - root == 0.5
    if completed_below:  # the smallest step above the tie: the open arm leads
        prior_mean = np.nextafter(prior_mean, np.inf)
    policy = GittinsPolicy(batch_size=2)
    policy.reset(make_problem([1.0, 1.0], 2, prior_mean=prior_mean), np.random.default_rng(0))
    policy.observe(Request(0, np.array([0, 1])), np.array([1.0, 0.0]))
    assert policy.stop_signal is (not completed_below)
