"""Uniform round robin: equal shares, completed arms skipped, empirical-mean recommendation."""

import numpy as np

from gittinseval.baselines.uniform import UniformPolicy
from gittinseval.core.protocol import EvaluationProblem


def test_round_robin_gives_equal_shares_and_recommends_the_best_mean():
    rng = np.random.default_rng(0)
    n_arms, n_examples = 7, 9
    scores = rng.uniform(size=(n_arms, n_examples))
    policy = UniformPolicy(batch_size=2)
    policy.reset(EvaluationProblem(n_examples, np.ones(n_arms), 30.0, binary=False), np.random.default_rng(1))
    observed = np.zeros(scores.shape, dtype=bool)
    for round_ in range(4):
        arms = []
        for _ in range(n_arms):
            request = policy.select()
            assert not observed[request.arm, request.examples].any()
            observed[request.arm, request.examples] = True
            arms.append(request.arm)
            policy.observe(request, scores[request.arm, request.examples])
        assert sorted(arms) == list(range(n_arms))  # each arm once per round
        assert np.all(observed.sum(axis=1) == 2 * (round_ + 1))
        means = np.where(observed, scores, 0).sum(axis=1) / observed.sum(axis=1)
        assert policy.recommend() == int(np.argmax(means))
    # Round 5 takes the last example of each arm, then there is nothing left.
    for _ in range(n_arms):
        request = policy.select()
        assert request.size == 1
        policy.observe(request, scores[request.arm, request.examples])
    assert policy.select() is None
    assert policy.recommend() == int(np.argmax(scores.mean(axis=1)))


def test_batch_size_defaults_to_the_benchmark():
    policy = UniformPolicy()
    policy.reset(EvaluationProblem(20, np.ones(3), 6.0, default_batch_size=4, binary=False), np.random.default_rng(0))
    assert policy.select().size == 4 and policy.hyperparameters()["batch_size"] == 4
