"""PromptEval-BAI: Rasch completion, stratified sampling, halving, binary-only."""


import numpy as np
import pytest
from scipy.optimize import minimize

from gittinseval.baselines.prompteval import PromptEvalPolicy, rasch_completion
from gittinseval.core.protocol import EvaluationProblem


def binary_matrix(seed, n_arms, n_examples):
    rng = np.random.default_rng(seed)
    ability = rng.normal(size=(n_arms, 1))
    easiness = rng.normal(size=(1, n_examples))
    return (rng.uniform(size=(n_arms, n_examples)) < 1 / (1 + np.exp(-(ability + easiness)))).astype(float)


def test_rasch_completion_matches_a_direct_penalised_likelihood_fit():
    scores = binary_matrix(0, 8, 12)
    observed = np.random.default_rng(1).uniform(size=scores.shape) < 0.6
    completed = rasch_completion(scores, observed, inverse_regularization=2.0)
    rows, columns = np.nonzero(observed)
    labels = scores[rows, columns]

    def objective(weights):
        logits = weights[rows] + weights[8 + columns]
        loss = np.logaddexp(0, logits) - labels * logits
        probabilities = 1 / (1 + np.exp(-logits))
        gradient = np.zeros(20)
        np.add.at(gradient, rows, probabilities - labels)
        np.add.at(gradient, 8 + columns, probabilities - labels)
        return 0.5 * weights @ weights + 2.0 * loss.sum(), weights + 2.0 * gradient

    weights = minimize(objective, np.zeros(20), jac=True, method="L-BFGS-B", options={"gtol": 1e-10}).x
    expected = 1 / (1 + np.exp(-(weights[:8, None] + weights[None, 8:])))
    np.testing.assert_allclose(completed[~observed], expected[~observed], atol=2e-3)
    np.testing.assert_array_equal(completed[observed], scores[observed])


def test_rasch_completion_with_one_class_fills_that_class():
    observed = np.eye(3, 4, dtype=bool)
    completed = rasch_completion(np.ones((3, 4)), observed)
    np.testing.assert_array_equal(completed, np.ones((3, 4)))


def run_phases(policy, scores, fraction, seed=0):
    """Drive the policy by hand; return survivors and cells per phase."""
    n_arms, n_examples = scores.shape
    problem = EvaluationProblem(n_examples, np.ones(n_arms), fraction * n_arms * n_examples, binary=True)
    policy.reset(problem, np.random.default_rng(seed))
    survivors, cells = [int(policy.survivors.sum())], [0]
    while (request := policy.select()) is not None:
        phase = policy.phase
        cells[-1] += request.size
        policy.observe(request, scores[request.arm, request.examples])
        if policy.phase != phase:
            survivors.append(int(policy.survivors.sum()))
            cells.append(0)
    return survivors, cells[:-1]


def test_each_phase_halves_the_survivors_and_spends_its_share():
    scores = binary_matrix(2, 16, 50)
    survivors, cells = run_phases(PromptEvalPolicy(batch_size=3), scores, 0.1)
    assert survivors == [16, 8, 4, 2, 1]
    assert cells == [20, 20, 20, 20]  # 80 cells over 4 phases
    survivors, cells = run_phases(PromptEvalPolicy(batch_size=2, max_phases=2), binary_matrix(3, 13, 40), 0.2)
    assert survivors == [13, 7, 4] and cells == [52, 52]
    survivors, cells = run_phases(PromptEvalPolicy(), binary_matrix(4, 5, 30), 0.1)
    assert survivors == [5, 3, 2, 1] and cells == [5, 5, 5]
    survivors, cells = run_phases(PromptEvalPolicy(batch_size=2), binary_matrix(8, 4, 25), 0.11)
    assert survivors == [4, 2, 1] and cells == [5 + 1, 5]  # 11 cells: the remainder to phase 0


def test_halving_keeps_the_best_completed_row_means():
    scores = binary_matrix(5, 10, 40)
    policy = PromptEvalPolicy(batch_size=2, max_phases=1)
    policy.reset(EvaluationProblem(40, np.ones(10), 60.0, binary=True), np.random.default_rng(0))
    while (request := policy.select()) is not None:
        policy.observe(request, scores[request.arm, request.examples])
    assert policy.phase == 1 and policy.observed.sum() == 60
    completed = rasch_completion(policy.values, policy.observed).mean(axis=1)
    assert set(np.flatnonzero(policy.survivors)) == set(np.argsort(-completed)[:5])


def test_sampling_is_stratified_over_arms_and_examples():
    scores = binary_matrix(6, 12, 30)
    policy = PromptEvalPolicy(batch_size=1, max_phases=1)
    policy.reset(EvaluationProblem(30, np.ones(12), 72.0, binary=True), np.random.default_rng(0))
    for _ in range(71):  # stop before the phase ends and the survivors change
        request = policy.select()
        policy.observe(request, scores[request.arm, request.examples])
        assert policy.stats.counts.max() - policy.stats.counts.min() <= 1
        assert policy.coverage.max() - policy.coverage.min() <= 1 + policy.stats.counts.max() // 30


def test_recommendation_is_the_best_raw_mean_among_survivors():
    # A matrix and seed where the Rasch fit drops an arm whose raw mean is the best so far.
    scores = binary_matrix(2, 16, 40)
    policy = PromptEvalPolicy(batch_size=4)
    policy.reset(EvaluationProblem(40, np.ones(16), 0.1 * 16 * 40, binary=True), np.random.default_rng(0))
    sums, counts = np.zeros(16), np.zeros(16)
    checked_after_halving = False
    while (request := policy.select()) is not None:
        policy.observe(request, scores[request.arm, request.examples])
        # Raw means kept here from the scores handed over, not from the policy's state.
        sums[request.arm] += scores[request.arm, request.examples].sum()
        counts[request.arm] += request.size
        seen = policy.survivors & (counts > 0)
        raw = np.where(seen, sums / np.maximum(counts, 1), -np.inf)
        recommended = policy.recommend()
        assert policy.survivors[recommended] and raw[recommended] == raw.max()
        # Once arms are dropped, a dropped arm may have the best raw mean overall.
        checked_after_halving |= bool((sums / np.maximum(counts, 1))[~policy.survivors].max(initial=-1) > raw.max())
    assert policy.survivors.sum() < 16 and checked_after_halving


def test_continuous_scores_are_rejected_with_the_reason():
    problem = EvaluationProblem(10, np.ones(3), 3.0, binary=False)
    with pytest.raises(ValueError, match="needs binary scores"):
        PromptEvalPolicy().reset(problem, np.random.default_rng(0))


def test_bad_hyperparameters_are_named():
    with pytest.raises(ValueError, match="max_phases"):
        PromptEvalPolicy(max_phases=0)
    with pytest.raises(ValueError, match="inverse_regularization"):
        PromptEvalPolicy(inverse_regularization=0.0)
