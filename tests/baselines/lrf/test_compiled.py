"""The compiled pass over the dropped pairs, to the bit against the torch ops it replaced."""

import numpy as np
import pytest
import torch

from gittinseval.baselines.lrf.compiled import subtract_dropped_terms


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("rank", [1, 2])
def test_dropped_terms_are_subtracted_to_the_bit_as_a_gather_and_scatter_adds_would(rank, index_dtype):
    """The compiled pass against the torch ops it replaced.  Many pairs share each of
    few lines, with terms of mixed magnitudes, so that any other order of the float32
    additions gives other sums (checked, so that the test can tell)."""
    generator = torch.Generator().manual_seed(rank)
    n_fixed, n_lines, n_pairs = 40, 3, 600
    fixed = torch.randn(n_fixed * rank, generator=generator) * 10 ** torch.empty(n_fixed * rank).uniform_(
        -3, 3, generator=generator
    )
    fixed_rows = torch.randint(n_fixed, (n_pairs,), generator=generator)
    solved_lines = torch.randint(n_lines, (n_pairs,), generator=generator)
    negated_scores = -torch.rand(n_pairs, generator=generator)
    gram = torch.randn(n_lines * rank * rank, generator=generator)
    target = torch.randn(n_lines * rank, generator=generator)

    def by_scatter(order: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        dropped = fixed.view(-1, rank)[fixed_rows[order]]
        lines = solved_lines[order]
        gram_index = (lines[:, None] * rank * rank + torch.arange(rank * rank)).view(-1)
        target_index = (lines[:, None] * rank + torch.arange(rank)).view(-1)
        outer = (dropped[:, :, None] * dropped[:, None, :]).view(-1).neg_()
        return (
            gram.clone().scatter_add_(0, gram_index, outer),
            target.clone().scatter_add_(0, target_index, (dropped * negated_scores[order, None]).view(-1)),
        )

    expected = by_scatter(torch.arange(n_pairs))
    got = gram.clone(), target.clone()
    rows, lines = fixed_rows.numpy().astype(index_dtype), solved_lines.numpy().astype(index_dtype)
    subtract_dropped_terms(got[0].numpy(), got[1].numpy(), fixed.numpy(), rows, lines, negated_scores.numpy(), rank)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    reordered = by_scatter(torch.randperm(n_pairs, generator=generator))
    assert not torch.equal(reordered[0], expected[0]) and not torch.equal(reordered[1], expected[1])
