"""The dropout: its law in observed mode, the stream's uniforms read from raw words, draws made ahead."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from gittinseval.baselines.lrf import LowRankEnsemble, LRFPolicy
from gittinseval.baselines.lrf.dropout import _bernoulli_positions
from gittinseval.data import Benchmark
from gittinseval.sim.simulator import simulate
from tests.baselines.lrf.lrf_reference import PRIOR, dropout_mask, observed_matrix, random_matrix


def test_observed_dropout_keeps_each_cell_independently_with_the_keep_probability():
    """At a fixed seed, with E M = 1.9 million (member, cell) pairs; every check at p-value 1e-6."""
    scores, observed = random_matrix(3, 400, 150, share=0.5)
    matrix = observed_matrix(scores, observed)
    ensemble = LowRankEnsemble(drop_probability=0.05, iterations=1)
    generator = torch.Generator().manual_seed(0)
    first, second = (dropout_mask(ensemble.fit(matrix, generator), matrix) for _ in range(2))
    assert not (first | second)[:, ~torch.from_numpy(observed)].any()
    first, second = (mask.view(64, -1)[:, matrix.cells].double() for mask in (first, second))
    drops = first  # [E, M], cells in observation order
    members, cells = drops.shape
    # Keep rate: the dropped pairs are Binomial(E M, p).
    low, high = stats.binom.interval(1 - 1e-6, members * cells, 0.05)
    assert low <= drops.sum() <= high
    # Each member's count, and each cell's count over the members, binomial with the same p:
    # chi-square sums of the standardised counts (a shared or cell-dependent dropout inflates them).
    for counts, trials in ((drops.sum(1), cells), (drops.sum(0), members)):
        chi2 = float((((counts - trials * 0.05) ** 2) / (trials * 0.05 * 0.95)).sum())
        assert stats.chi2.sf(chi2, counts.numel()) > 1e-6 and stats.chi2.cdf(chi2, counts.numel()) > 1e-6
    # Pairwise independence: correlations between members, between successive cells of a
    # member, and between one fit's dropout and the next's are N(0, 1/n) for n pairs.
    between_members = torch.corrcoef(drops)[np.triu_indices(members, 1)]
    successive = torch.corrcoef(torch.stack([drops[:, :-1].reshape(-1), drops[:, 1:].reshape(-1)]))[0, 1]
    next_fit = torch.corrcoef(torch.stack([first.reshape(-1), second.reshape(-1)]))[0, 1]
    bound = stats.norm.isf(1e-6 / 2 / between_members.numel())
    assert between_members.abs().max() * math.sqrt(cells) < bound
    assert abs(successive) * math.sqrt(members * cells) < stats.norm.isf(1e-6 / 2)
    assert abs(next_fit) * math.sqrt(members * cells) < stats.norm.isf(1e-6 / 2)


def test_dropout_positions_are_one_sequence_of_geometric_gaps_whatever_the_chunks():
    """The gaps come in chunks of the expected count plus one sd: some of these calls take several."""
    for seed in range(200):
        got = _bernoulli_positions(300, 0.1, torch.Generator().manual_seed(seed))
        gaps = torch.empty(3000, dtype=torch.float64).geometric_(0.1, generator=torch.Generator().manual_seed(seed))
        successes = gaps.cumsum(0) - 1  # trial positions from 0
        assert torch.equal(got, successes[successes < 300].long())
    assert _bernoulli_positions(0, 0.1, torch.Generator()).numel() == 0
    assert _bernoulli_positions(50, 0.0, torch.Generator()).numel() == 0


@pytest.mark.parametrize(("drop", "members", "shape"), [(0.05, 5, (30, 100)), (0.1, 3, (31, 97)), (0.5, 4, (7, 9))])
def test_dropout_reads_the_reference_uniforms_from_the_same_words(drop, members, shape):
    """Odd word counts included: the words are drawn two at a time."""
    n_cells = shape[0] * shape[1]
    cells = torch.from_numpy(np.random.default_rng(0).choice(n_cells, n_cells // 4, replace=False))  # observed order
    ours, reference = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    known = cells[: len(cells) // 2]  # read as the words are drawn; the rest read afterwards
    draws = LowRankEnsemble(ensemble_size=members, drop_probability=drop).draw(*shape, ours, known)
    got_members, got_at = draws.dropout_of(cells)
    assert torch.equal(draws.u, torch.randn(members, shape[0], 1, generator=reference))
    assert torch.equal(draws.v, torch.randn(members, shape[1], 1, generator=reference))
    uniforms = torch.rand(members, n_cells, generator=reference)
    want_members, want_at = (uniforms < drop)[:, cells].nonzero(as_tuple=True)  # by member, then observation
    assert torch.equal(got_members, want_members) and torch.equal(got_at, want_at) and want_at.numel()
    reordered = cells.flip(0)  # does not extend the known cells: every word is read afterwards
    want_members, want_at = (uniforms < drop)[:, reordered].nonzero(as_tuple=True)
    got_members, got_at = draws.dropout_of(reordered)
    assert torch.equal(got_members, want_members) and torch.equal(got_at, want_at)
    assert torch.equal(torch.rand(4, generator=ours), torch.rand(4, generator=reference))  # same words consumed


def test_draws_made_ahead_give_the_same_run_as_draws_made_in_turn(monkeypatch):
    """The parity policy draws the next fit's random numbers on another thread: same stream, same run."""
    scores, _ = random_matrix(8, 30, 40)
    bench = Benchmark("lrf-ahead", scores)

    class InTurn:
        def __init__(self, draw, members, matrix, generator):
            self.draw = lambda: draw(*matrix.shape, generator)

        def take(self):
            return self.draw()

    def stream_policy():
        return LRFPolicy(batch_size=4, ensemble=LowRankEnsemble(dropout_draws="stream"))

    ahead = simulate(bench, stream_policy(), np.ones(30), PRIOR, budget_fraction=0.3, seed=2)
    monkeypatch.setattr("gittinseval.baselines.lrf.policy.DrawsAhead", InTurn)
    in_turn = simulate(bench, stream_policy(), np.ones(30), PRIOR, budget_fraction=0.3, seed=2)
    for column in ("arm", "recommended"):
        np.testing.assert_array_equal(ahead.trace[column], in_turn.trace[column])
    assert len(ahead.trace["arm"]) > 30  # past the warm-up
