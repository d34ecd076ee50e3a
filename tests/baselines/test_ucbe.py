"""UCB-E: index formula, parity with banditeval's step, and matching regret curves."""

import numpy as np
import pytest
import torch
from banditeval.bandits import upper_confidence_bound_exploration

from gittinseval.baselines.ucbe import UCBEPolicy
from gittinseval.core.priors import GaussianPrior
from gittinseval.core.protocol import EvaluationProblem, Request
from gittinseval.data import Benchmark
from gittinseval.sim.simulator import simulate

PRIOR = GaussianPrior(0.5, 0.04)


def fed_policy(scores, observed, batch_size=4, a=1.0, seed=0):
    """A reset UCBEPolicy that has observed ``scores`` where ``observed``."""
    n_arms, n_examples = scores.shape
    policy = UCBEPolicy(batch_size=batch_size, a=a)
    problem = EvaluationProblem(n_examples, np.ones(n_arms), float(n_arms * n_examples), binary=False)
    policy.reset(problem, np.random.default_rng(seed))
    for arm in range(n_arms):
        examples = np.flatnonzero(observed[arm])
        if examples.size:
            policy.observe(Request(arm, examples), scores[arm, examples])
    return policy


def test_index_is_mean_plus_bonus_with_infinite_ends():
    scores = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    observed = np.array([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=bool)
    policy = fed_policy(scores, observed, a=2.0)
    np.testing.assert_allclose(policy.index, [2 / 3 + np.sqrt(2 / 3), np.sqrt(2), np.inf, -np.inf])
    assert policy.select().arm == 2
    assert policy.recommend() == 3  # completed arm, mean 1
    policy.observe(Request(2, np.array([0, 1])), scores[2, :2])
    np.testing.assert_allclose(policy.index[2], np.sqrt(2 / 2))
    assert policy.select().arm == 0
    assert policy.recommend() == 3


@pytest.mark.parametrize("trial", range(10))
def test_same_arm_as_banditeval_on_the_same_observed_matrix(trial):
    rng = np.random.default_rng(100 + trial)
    n_arms, n_examples = 30, 50
    scores = (rng.uniform(size=(n_arms, n_examples)) < rng.uniform(0.2, 0.8, size=(n_arms, 1))).astype(float)
    counts = rng.integers(1, n_examples, size=n_arms)
    counts[rng.integers(n_arms)] = n_examples  # one completed arm
    observed = np.argsort(rng.uniform(size=(n_arms, n_examples)), axis=1) < counts[:, None]
    policy = fed_policy(scores, observed)
    matrix = torch.tensor(np.where(observed, scores, np.nan), dtype=torch.float32)
    batch, mus = upper_confidence_bound_exploration(matrix, a=1, batch_size=4, return_mus=True)
    request = policy.select()
    assert request.arm == int(batch[0, 0])
    assert request.size == batch.shape[1]
    assert policy.recommend() == int(torch.argmax(mus))


def banditeval_run(scores, batch_size, budget_cells, seed):
    """banditeval's UCB-E loop: cells spent and regret after each step, final cells per arm."""
    torch.manual_seed(seed)
    truth = torch.tensor(scores, dtype=torch.float32)
    matrix = torch.full(truth.shape, torch.nan)
    row_means = scores.mean(axis=1)
    spent, regrets, cells = 0, [], []
    while spent < budget_cells:
        rows, columns = upper_confidence_bound_exploration(matrix, a=1, batch_size=batch_size)
        matrix[rows, columns] = truth[rows, columns]
        spent += rows.numel()
        recommended = int(np.nanargmax(matrix.nanmean(dim=1).numpy()))
        regrets.append(row_means.max() - row_means[recommended])
        cells.append(spent)
    return np.array(cells), np.array(regrets), (~matrix.isnan()).sum(dim=1).numpy()


def within_three_standard_errors(ours, theirs):
    ours, theirs = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    error = np.sqrt(ours.var(axis=0, ddof=1) / len(ours) + theirs.var(axis=0, ddof=1) / len(theirs))
    return np.all(np.abs(ours.mean(axis=0) - theirs.mean(axis=0)) <= 3 * error + 1e-12)


@pytest.mark.parametrize("a, agrees", [(1.0, True), (0.25, False), (4.0, False)])
def test_regret_and_allocation_agree_with_banditeval_over_20_seeds(a, agrees):
    # Regret curves at three budget points, and the share of cells spent on the
    # better half of the arms, a statistic that detects a wrong exploration
    # constant (a = 0.25 or 4 against the reference's a = 1).
    rng = np.random.default_rng(7)
    n_arms, n_examples, batch_size = 10, 300, 3
    scores = (rng.uniform(size=(n_arms, n_examples)) < np.linspace(0.35, 0.65, n_arms)[:, None]).astype(float)
    better_half = np.argsort(scores.mean(axis=1))[n_arms // 2 :]
    benchmark = Benchmark("ucbe-parity", scores)
    budget_cells = 0.1 * n_arms * n_examples
    checkpoints = np.array([0.4, 0.7, 1.0]) * budget_cells
    ours, theirs, our_share, their_share = [], [], [], []
    for seed in range(20):
        run = simulate(benchmark, UCBEPolicy(batch_size=batch_size, a=a), np.ones(n_arms), PRIOR, seed=seed)
        ours.append(run.trace["regret"][np.searchsorted(run.trace["cost"], checkpoints, side="right") - 1])
        counts = np.bincount(run.trace["arm"], weights=run.trace["batch_size"], minlength=n_arms)
        our_share.append(counts[better_half].sum() / counts.sum())
        cells, regret, counts = banditeval_run(scores, batch_size, budget_cells, seed)
        theirs.append(regret[np.searchsorted(cells, checkpoints, side="right") - 1])
        their_share.append(counts[better_half].sum() / counts.sum())
    assert np.mean(theirs) > 0  # the comparison is not between two zero curves
    if agrees:
        assert within_three_standard_errors(ours, theirs)
    assert within_three_standard_errors(our_share, their_share) == agrees


def test_bad_hyperparameters_are_named():
    with pytest.raises(ValueError, match="batch_size"):
        UCBEPolicy(batch_size=0)
    with pytest.raises(ValueError, match="a must be"):
        UCBEPolicy(a=-1.0)
