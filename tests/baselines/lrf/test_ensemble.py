"""The ensemble fit: against a per-member loop and banditeval's Factorization, in both dropout modes, warm."""

import math

import numpy as np
import pytest
import torch
from banditeval.factorization import Factorization

from gittinseval.baselines.lrf import FitDraws, LowRankEnsemble
from gittinseval.baselines.lrf.ensemble import _ensemble_moments
from tests.baselines.lrf.lrf_reference import (
    dropout_mask,
    fit_moments,
    looped_als,
    looped_als_from,
    numpy_moments,
    observed_matrix,
    random_matrix,
)


@pytest.mark.parametrize("rank", [1, 2])
def test_independent_members_match_a_per_member_loop(rank):
    scores, observed = random_matrix(0, 12, 9, share=0.5)
    ensemble = LowRankEnsemble(
        rank=rank,
        ensemble_size=4,
        ridge=0.1,
        drop_probability=0.2,
        iterations=5,
        pairing="independent",
        dropout_draws="stream",
    )
    mean, sd = fit_moments(ensemble, scores, observed, torch.Generator().manual_seed(1))
    want_mean, want_sd = looped_als(scores, observed, torch.Generator().manual_seed(1), 4, rank, 0.1, 0.2, 5)
    np.testing.assert_allclose(mean, want_mean, atol=2e-5)
    np.testing.assert_allclose(sd, want_sd, atol=2e-5)


@pytest.mark.parametrize("rank", [1, 2])
def test_reference_pairing_matches_banditeval_factorization(rank):
    scores, observed = random_matrix(1, 70, 45)
    matrix = torch.tensor(np.where(observed, scores, np.nan), dtype=torch.float32)
    torch.manual_seed(4)
    reference = Factorization(70, 45, rank, 64, regularizer_weight=0.1, drop_probability=0.05)
    reference.fit(matrix, iterations=10)
    products = reference().double()
    stream = LowRankEnsemble(rank=rank, dropout_draws="stream")
    mean, sd = fit_moments(stream, scores, observed, torch.Generator().manual_seed(4))
    np.testing.assert_allclose(mean, products.mean(0).numpy(), atol=1e-4)
    np.testing.assert_allclose(sd, products.std(0).numpy(), atol=1e-4)
    independent, _ = fit_moments(
        LowRankEnsemble(rank=rank, pairing="independent", dropout_draws="stream"),
        scores,
        observed,
        torch.Generator().manual_seed(4),
    )
    assert np.abs(independent - products.mean(0).numpy()).max() > 1e-3  # the pairing matters


def stream_draws_with(dropped, u, v):
    """Stream-mode draws whose uniforms are 0 on ``dropped [E, K, N]`` and 1 - 2^-24 elsewhere.

    Laid out as :class:`FitDraws` documents: 24-bit words, word ``2j`` in the high and
    ``2j + 1`` in the low half of int64 ``j``.
    """
    members, n_arms, n_examples = dropped.shape
    words = torch.where(dropped.reshape(-1), 0, 2**24 - 1).long()
    if words.numel() % 2:
        words = torch.cat([words, torch.zeros(1, dtype=torch.long)])
    words = words[0::2] << 32 | words[1::2]
    none = torch.zeros(0, dtype=torch.long)
    threshold = math.ceil(float(np.float32(0.05)) * 2**24)
    return FitDraws(u, v, words, threshold, n_arms * n_examples, none, torch.zeros(members, 0, dtype=torch.bool))


@pytest.mark.parametrize("rank", [1, 2])
def test_observed_dropout_fit_equals_the_parity_fit_given_the_same_dropout(rank, monkeypatch):
    """Ours in stream mode and banditeval's Factorization, each given the observed mode's dropout."""
    scores, observed = random_matrix(2, 70, 45)
    matrix = observed_matrix(scores, observed)
    fit = LowRankEnsemble(rank=rank, dropout_draws="observed").fit(matrix, torch.Generator().manual_seed(5))
    dropped = dropout_mask(fit, matrix)
    assert dropped.any() and not (dropped & ~torch.from_numpy(observed)).any()  # observed cells only
    mean, sd = numpy_moments(fit)

    stream = LowRankEnsemble(rank=rank, dropout_draws="stream")
    generator = torch.Generator().manual_seed(5)  # the factors come first, as in the stream
    u, v = torch.randn(64, 70, rank, generator=generator), torch.randn(64, 45, rank, generator=generator)
    parity = stream.fit_drawn(stream_draws_with(dropped, u, v), matrix)
    want_mean, want_sd = numpy_moments(parity)  # the same float32 operations in the same order: bit for bit
    np.testing.assert_array_equal(mean, want_mean)
    np.testing.assert_array_equal(sd, want_sd)

    torch.manual_seed(5)  # the reference draws U, V from the global generator, then the dropout uniforms
    reference = Factorization(70, 45, rank, 64, regularizer_weight=0.1, drop_probability=0.05)
    monkeypatch.setattr(torch, "rand_like", lambda x: torch.where(dropped, 0.0, 1.0))
    reference.fit(torch.tensor(np.where(observed, scores, np.nan), dtype=torch.float32), iterations=10)
    products = reference().double()
    np.testing.assert_allclose(mean, products.mean(0).numpy(), atol=1e-4)
    np.testing.assert_allclose(sd, products.std(0).numpy(), atol=1e-4)


@pytest.mark.parametrize("rank", [1, 2])
def test_warm_refit_matches_a_per_member_loop_from_the_previous_factors(rank):
    scores, everything = random_matrix(5, 12, 9, share=0.6)
    rng = np.random.default_rng(6)
    before = everything & (rng.uniform(size=everything.shape) < 0.7)
    before[:, 0] = True
    ensemble = LowRankEnsemble(rank=rank, ensemble_size=4, drop_probability=0.2, iterations=5, pairing="independent")
    matrix = observed_matrix(scores, before)
    previous = ensemble.fit(matrix, torch.Generator().manual_seed(1))
    new_cells = []
    for arm in range(12):
        examples = np.flatnonzero(everything[arm] & ~before[arm])
        matrix.add(arm, examples, scores[arm, examples])
        new_cells += [(arm, n) for n in examples]
    refit = ensemble.refit(previous, matrix, torch.Generator().manual_seed(3), iterations=3)
    # Each member's mask: its old dropout (read from the previous fit) plus a fresh
    # draw for the new cells, in the order they were added.
    masks = np.repeat(everything[None], 4, axis=0)
    previous_cells = matrix.cells[previous.dropped_positions]
    for member, cell in zip(previous.dropped_members.tolist(), previous_cells.tolist(), strict=True):
        masks[member, cell // 9, cell % 9] = False
    fresh = torch.rand(4, len(new_cells), generator=torch.Generator().manual_seed(3)).numpy() < 0.2
    for member, position in zip(*np.nonzero(fresh), strict=True):
        masks[member][new_cells[position]] = False
    assert fresh.any()
    want_mean, want_sd = looped_als_from(
        scores, masks, previous.u.double().numpy(), previous.v.double().numpy(), 0.1, 3
    )
    mean, sd = numpy_moments(refit)
    np.testing.assert_allclose(mean, want_mean, atol=2e-5)
    np.testing.assert_allclose(sd, want_sd, atol=2e-5)


def test_ensemble_moments_match_the_explicit_products():
    generator = torch.Generator().manual_seed(0)
    u, v = torch.randn(7, 5, 3, generator=generator).double(), torch.randn(7, 4, 3, generator=generator).double()
    products = torch.bmm(u, v.transpose(1, 2))
    mean, sd = _ensemble_moments(u, v)
    np.testing.assert_allclose(mean.numpy(), products.mean(0).numpy(), atol=1e-12)
    np.testing.assert_allclose(sd.numpy(), products.std(0).numpy(), atol=1e-10)


def test_moments_into_given_tables_equal_fresh_ones_and_are_overwritten_by_the_next_fit():
    scores, observed = random_matrix(11, 20, 15)
    matrix = observed_matrix(scores, observed)
    ensemble = LowRankEnsemble(ensemble_size=5)
    tables = tuple(torch.empty(20, 15, dtype=torch.float64) for _ in range(2))
    first = ensemble.fit(matrix, torch.Generator().manual_seed(1))
    mean, sd = first.moments(out=tables)
    assert mean.data_ptr() == tables[0].data_ptr() and sd.data_ptr() == tables[1].data_ptr()
    fresh_mean, fresh_sd = first.moments()
    torch.testing.assert_close(mean, fresh_mean, rtol=0, atol=1e-12)
    torch.testing.assert_close(sd, fresh_sd, rtol=0, atol=1e-12)
    second = ensemble.fit(matrix, torch.Generator().manual_seed(2)).moments(out=tables)
    torch.testing.assert_close(tables[0], second[0].clone(), rtol=0, atol=0)
    assert (tables[0] - fresh_mean).abs().max() > 1e-6  # the first fit's mean is gone from the tables


def test_bad_ensemble_hyperparameters_are_named():
    with pytest.raises(ValueError, match="pairing"):
        LowRankEnsemble(pairing="shuffled")
    with pytest.raises(ValueError, match=r"dropout_draws must be one of \('stream', 'observed'\), got 'all'"):
        LowRankEnsemble(dropout_draws="all")
    with pytest.raises(ValueError, match="ensemble_size"):
        LowRankEnsemble(ensemble_size=1)
