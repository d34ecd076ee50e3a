"""Seed-clustered means and standard errors against closed forms and a Monte Carlo; shares of runs."""

import numpy as np
import pytest

from gittinseval.results.stats import Share, clustered_mean_se, wilson_interval


def test_one_value_per_seed_gives_the_plain_se():
    values = np.random.default_rng(5).normal(size=7)
    mean, se, n_clusters = clustered_mean_se(values, list(range(7)))
    assert (mean[0], se[0], n_clusters[0]) == pytest.approx((values.mean(), values.std(ddof=1) / np.sqrt(7), 7))


def test_equal_numbers_per_seed_give_the_se_of_the_seed_means():
    by_seed = np.random.default_rng(6).normal(size=(5, 3))  # 5 seeds x 3 subjects, listed subject by subject
    seeds = [seed for _ in range(3) for seed in range(5)]
    seed_means = by_seed.mean(axis=1)
    mean, se, _ = clustered_mean_se(by_seed.T.ravel(), seeds)
    assert (mean[0], se[0]) == pytest.approx((seed_means.mean(), seed_means.std(ddof=1) / np.sqrt(5)))


def test_each_column_uses_its_own_values_and_seeds():
    rng = np.random.default_rng(7)
    values = rng.normal(size=(12, 3))
    seeds = [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    values[[0, 4, 5], 1] = np.nan  # column 1: seed 1 has one value left
    values[3:, 2] = np.nan  # column 2: only seed 0
    mean, se, n_clusters = clustered_mean_se(values, seeds)
    present = ~np.isnan(values[:, 1])
    alone = clustered_mean_se(values[present, 1], np.asarray(seeds)[present])
    assert (mean[1], se[1], n_clusters[1]) == pytest.approx((alone[0][0], alone[1][0], 4))
    assert mean[2] == pytest.approx(values[:3, 2].mean()) and np.isnan(se[2]) and n_clusters[2] == 1
    assert np.isnan(clustered_mean_se(np.array([[np.nan], [np.nan]]), [0, 1])[0][0])


def test_the_clustered_se_is_the_spread_of_the_mean_when_a_seed_is_shared_across_subjects():
    """Monte Carlo: 20 seeds x 6 subjects, a seed effect of sd 1 and a run effect of sd 1.

    The mean's sd is sqrt(1/20 + 1/120) = 0.2415; the plain SE over the 120 runs, about
    sqrt(2/120) = 0.129, understates it; the clustered SE matches it on average.
    """
    rng = np.random.default_rng(11)
    seeds = [seed for _ in range(6) for seed in range(20)]
    draws = np.repeat(rng.normal(size=(4000, 1, 20)), 6, axis=1).reshape(4000, 120) + rng.normal(size=(4000, 120))
    means, clustered, _ = clustered_mean_se(draws.T, seeds)
    plain = draws.var(axis=1, ddof=1) / 120
    true_sd = np.sqrt(1 / 20 + 1 / 120)
    assert np.std(means) == pytest.approx(true_sd, rel=0.04)
    assert np.sqrt(np.mean(clustered**2)) == pytest.approx(true_sd, rel=0.04)
    assert np.sqrt(np.mean(plain)) < 0.6 * true_sd


def test_a_row_without_its_seed_is_an_error():
    with pytest.raises(ValueError, match="one cluster per row"):
        clustered_mean_se(np.zeros((3, 2)), [0, 1])


def test_a_share_counts_what_happened_and_has_its_wilson_interval():
    share = Share.of([True, False, True, True])
    assert share == Share(3, 4) and share.value == 0.75
    assert share.interval == wilson_interval(3, 4) and share.interval[0] < 0.75 < share.interval[1]
    assert Share.of([]) == Share(0, 0)
