"""SySRs: the phase schedule, budget reallocation, shared blocks and eliminations."""

import numpy as np
import pytest

from gittinseval.baselines.sysrs import SySRsPolicy, successive_rejects_schedule
from gittinseval.core.protocol import EvaluationProblem


def spend(lengths):
    """Cells of a schedule: an arm dropped after phase t has n_t examples, the last two n_{K-1}."""
    return int(lengths.sum() + lengths[-1])


@pytest.mark.parametrize(
    "n_arms, n_examples, cells",
    [(10, 200, 150), (10, 20, 100), (1500, 100, 15000), (57, 805, 4589), (5, 10, 3), (2, 10, 8), (3, 4, 12), (7, 9, 0)],
)
def test_schedule_spends_the_budget_within_its_limits(n_arms, n_examples, cells):
    lengths = successive_rejects_schedule(n_arms, n_examples, cells)
    assert lengths.shape == (n_arms - 1,)
    assert np.all(np.diff(lengths) >= 0) and lengths.min() >= 0 and lengths.max() <= n_examples
    assert spend(lengths) == cells


def test_schedule_overshoots_by_one_only_when_the_final_phase_must_grow():
    # Two arms share every phase, so an odd budget cannot be spent exactly.
    assert spend(successive_rejects_schedule(2, 10, 7)) == 8
    for cells in range(0, 3 * 8 + 1):
        assert spend(successive_rejects_schedule(3, 8, cells)) in (cells, cells + 1)


def test_uncapped_schedule_follows_successive_rejects():
    n_arms, cells = 10, 150
    logbar = 0.5 + sum(1 / i for i in range(2, n_arms + 1))
    real = cells / (logbar * (n_arms + 1 - np.arange(1, n_arms)))
    lengths = successive_rejects_schedule(n_arms, 10_000, cells)
    assert np.all((lengths >= np.floor(real)) & (lengths <= np.floor(real) + 1))


def test_capped_phases_give_their_surplus_to_earlier_phases():
    n_arms, n_examples, cells = 10, 20, 150
    logbar = 0.5 + sum(1 / i for i in range(2, n_arms + 1))
    classic = np.ceil((cells - n_arms) / (logbar * (n_arms + 1 - np.arange(1, n_arms))))
    assert classic.max() > n_examples  # the classic schedule runs out of examples
    lengths = successive_rejects_schedule(n_arms, n_examples, cells)
    assert lengths[-1] == n_examples and spend(lengths) == cells
    assert np.all(lengths[classic <= n_examples] >= classic[classic <= n_examples])
    assert lengths[0] > classic[0]


def test_schedule_rejects_impossible_budgets():
    with pytest.raises(ValueError, match="at least 2 arms"):
        successive_rejects_schedule(1, 10, 5)
    with pytest.raises(ValueError, match="outside"):
        successive_rejects_schedule(3, 10, 31)


def test_phases_share_blocks_and_drop_the_lowest_mean():
    rng = np.random.default_rng(0)
    n_arms, n_examples = 8, 30
    scores = rng.uniform(size=(n_arms, n_examples))
    policy = SySRsPolicy(batch_size=4)
    problem = EvaluationProblem(n_examples, np.ones(n_arms), 0.4 * n_arms * n_examples, binary=False)
    policy.reset(problem, np.random.default_rng(1))
    lengths = successive_rejects_schedule(n_arms, n_examples, 96)
    observed = np.zeros(scores.shape, dtype=bool)
    survivors = set(range(n_arms))
    spent = 0
    for phase in range(n_arms - 1):
        block = policy.shared_order[(lengths[phase - 1] if phase else 0) : lengths[phase]]
        seen_this_phase = {}
        while sum(map(len, seen_this_phase.values())) < len(survivors) * block.size:
            request = policy.select()
            assert request.size <= 4
            seen_this_phase.setdefault(request.arm, []).extend(request.examples.tolist())
            observed[request.arm, request.examples] = True
            spent += request.size
            policy.observe(request, scores[request.arm, request.examples])
            if sorted(seen_this_phase[request.arm]) != sorted(block.tolist()):
                assert policy.survivors.sum() == len(survivors)
        assert set(seen_this_phase) == (survivors if block.size else set())
        means = {k: scores[k, observed[k]].mean() for k in survivors}
        worst = min(means, key=means.get)
        survivors.remove(worst)
        assert set(np.flatnonzero(policy.survivors)) == survivors
        best = max(survivors, key=means.get)
        assert policy.recommend() == best
    assert policy.select() is None and spent == 96 and len(survivors) == 1


def test_recommendation_after_every_request_is_the_best_survivor_mean():
    rng = np.random.default_rng(3)
    scores = rng.uniform(size=(6, 20))
    policy = SySRsPolicy(batch_size=3)
    policy.reset(EvaluationProblem(20, np.ones(6), 60.0, binary=False), np.random.default_rng(0))
    sums, counts = np.zeros(6), np.zeros(6)
    while (request := policy.select()) is not None:
        policy.observe(request, scores[request.arm, request.examples])
        sums[request.arm] += scores[request.arm, request.examples].sum()
        counts[request.arm] += request.size
        candidates = policy.survivors & (counts > 0)
        means = np.where(candidates, sums / np.maximum(counts, 1), -np.inf)
        assert policy.recommend() == int(np.argmax(means))
    assert counts.sum() == 60 and policy.survivors.sum() == 1
