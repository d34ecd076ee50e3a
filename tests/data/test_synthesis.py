"""Synthesized matrices: exact row totals and shared item structure."""

import numpy as np
import pytest

from gittinseval.data.synthesis import binary_with_row_sums, continuous_with_row_means


def test_binary_rows_have_exact_sums_and_follow_item_easiness():
    rng = np.random.default_rng(0)
    easiness = rng.normal(0, 1.5, size=200)
    sums = rng.integers(0, 201, size=300)
    matrix = binary_with_row_sums(sums, easiness, rng.gumbel(size=(300, 200)))
    np.testing.assert_array_equal(matrix.sum(axis=1), sums)
    assert np.corrcoef(matrix.mean(axis=0), easiness)[0, 1] > 0.8


def test_gumbel_top_k_is_weighted_sampling_without_replacement():
    # Monte Carlo: with one pick, item j is chosen with probability exp(e_j) / sum exp(e).
    rng = np.random.default_rng(1)
    easiness = np.array([0.0, 1.0, -1.0, 2.0])
    picks = binary_with_row_sums(np.ones(40_000, int), easiness, rng.gumbel(size=(40_000, 4)))
    expected = np.exp(easiness) / np.exp(easiness).sum()
    np.testing.assert_allclose(picks.mean(axis=0), expected, atol=0.01)


def test_continuous_rows_have_exact_means():
    rng = np.random.default_rng(2)
    targets = np.array([0.01, 0.2, 0.5, 0.93])
    scores = continuous_with_row_means(targets, rng.normal(-2, 3, size=300), 3.0, rng)
    np.testing.assert_allclose(scores.mean(axis=1), targets, atol=1e-12)
    assert scores.min() >= 0 and scores.max() <= 1


def test_bad_targets_are_rejected():
    with pytest.raises(ValueError, match="row sums must lie in \\[0, 3\\]"):
        binary_with_row_sums(np.array([4]), np.zeros(3), np.zeros((1, 3)))
    with pytest.raises(ValueError, match="strictly inside \\(0, 1\\)"):
        continuous_with_row_means(np.array([1.0]), np.zeros(3), 1.0, np.random.default_rng(0))
