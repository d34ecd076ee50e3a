"""The observed cells: the masked row sums, a cell observed twice, scores copied."""

import numpy as np
import pytest
import torch

from gittinseval.baselines.lrf import ObservedMatrix
from tests.baselines.lrf.lrf_reference import observed_matrix, random_matrix


def test_observed_row_sums_are_the_masked_row_sums():
    scores, observed = random_matrix(8, 30, 20)
    matrix = observed_matrix(scores, observed)
    tables = torch.randn(2, 30, 20, dtype=torch.float64)
    for table, got in zip(tables, matrix.observed_row_sums(*tables), strict=True):
        np.testing.assert_allclose(got.numpy(), (table.numpy() * observed).sum(axis=1), atol=1e-12)


def test_observed_row_sums_over_requests_added_out_of_order():
    """Several requests per arm, arms interleaved, examples unsorted: the merged cells sum as a mask would."""
    rng = np.random.default_rng(12)
    matrix = ObservedMatrix(7, 25)
    mask = np.zeros((7, 25), dtype=bool)
    for _ in range(30):
        arm = int(rng.integers(7))
        unseen = np.flatnonzero(~mask[arm])
        if unseen.size:
            examples = rng.permutation(unseen)[: int(rng.integers(1, 5))]
            matrix.add(arm, examples, rng.uniform(size=examples.size))
            mask[arm, examples] = True
    table = torch.randn(7, 25, dtype=torch.float64)
    (got,) = matrix.observed_row_sums(table)
    np.testing.assert_allclose(got.numpy(), (table.numpy() * mask).sum(axis=1), atol=1e-12)


def test_a_cell_observed_twice_is_an_error():
    matrix = ObservedMatrix(3, 5)
    matrix.add(1, np.array([0, 4]), np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match=r"arm 1: examples observed twice \(\[4\]\)"):
        matrix.add(1, np.array([2, 4]), np.array([1.0, 1.0]))
    with pytest.raises(ValueError, match="arm 2: examples observed twice"):
        matrix.add(2, np.array([3, 3]), np.array([1.0, 1.0]))


def test_scores_added_to_the_matrix_are_copied():
    matrix = ObservedMatrix(2, 5)
    scores = np.array([0.5, 1.0], dtype=np.float32)
    matrix.add(0, np.array([1, 3]), scores)
    scores[:] = 0.0
    np.testing.assert_array_equal(matrix.observations(torch.arange(2))[2].numpy(), [0.5, 1.0])
