"""EmpiricalPriorEstimator against closed forms, quadrature and simulation."""

import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from gittinseval import EmpiricalPriorEstimator

CELL_VAR = 0.25


def simulate_arms(rng, n_arms, counts, mean, var):
    """Score sums of arms with theta_k ~ N(mean, var) and N(theta_k, 1/4) scores."""
    theta = rng.normal(mean, math.sqrt(var), n_arms)
    sums = rng.normal(theta * counts, np.sqrt(CELL_VAR * counts))  # sum of `counts` scores
    return sums


@pytest.mark.parametrize(
    "n_arms, count, mean, var",
    [(40, 16, 0.3, 0.01), (300, 4, 0.6, 0.02), (1500, 8, 0.75, 0.005), (200, None, 0.45, 0.015)],
)
def test_recovers_mean_and_variance_of_the_normal_normal_model(n_arms, count, mean, var):
    """Average estimate over replications within 4 Monte Carlo standard errors of the truth."""
    rng = np.random.default_rng(n_arms)
    estimator = EmpiricalPriorEstimator(var_floor=1e-8, prior_arms=0)
    estimates = []
    for _ in range(150):
        # count None: unequal counts, 1 to 40 scores per arm.
        counts = np.full(n_arms, count) if count else rng.integers(1, 41, n_arms)
        sums = simulate_arms(rng, n_arms, counts, mean, var)
        estimates.append(estimator.estimate(sums, counts, 0.5, 0.04, CELL_VAR))
    estimates = np.array(estimates)
    average = estimates.mean(axis=0)
    standard_error = estimates.std(axis=0, ddof=1) / math.sqrt(len(estimates))
    assert abs(average[0] - mean) < 4 * standard_error[0]
    assert abs(average[1] - var) < 4 * standard_error[1]
    assert standard_error[1] < 0.3 * var  # the check has power


@pytest.mark.parametrize("seed", range(4))
def test_equal_counts_without_shrinkage_is_the_textbook_method_of_moments(seed):
    rng = np.random.default_rng(seed)
    n_arms, count = 25, 12
    counts = np.full(n_arms, count)
    sums = simulate_arms(rng, n_arms, counts, 0.4, 0.03)
    means = sums / count
    estimator = EmpiricalPriorEstimator(var_floor=1e-6, prior_arms=0)
    mean, var = estimator.estimate(sums, counts, 0.5, 0.04, CELL_VAR)
    closed_form = np.var(means, ddof=1) - CELL_VAR / count
    assert closed_form > 1e-6  # the untruncated case
    assert mean == pytest.approx(means.mean(), rel=1e-12)
    assert var == pytest.approx(closed_form, rel=1e-6)


def test_method_of_moments_below_the_floor_gives_the_floor():
    counts = np.full(30, 10)
    sums = np.full(30, 4.0)  # every arm alike: S^2 = 0 < tau^2 / n
    mean, var = EmpiricalPriorEstimator(var_floor=2e-4, prior_arms=0).estimate(sums, counts, 0.5, 0.04)
    assert (mean, var) == (pytest.approx(0.4), pytest.approx(2e-4, rel=1e-9))


def test_restricted_likelihood_matches_quadrature_over_the_mean():
    """l(v1) - l(v2) against log of the integral over mu_0 of the likelihood of data and pseudo-arms."""
    rng = np.random.default_rng(7)
    counts = rng.integers(1, 20, 9)
    means = rng.uniform(0.2, 0.7, 9)
    start_mean, start_var, kappa = 0.5, 0.04, 4
    # Four noise-free pseudo-arms with mean m_g and sample variance v_g.
    spread = np.array([-1.5, -0.5, 0.5, 1.5])
    pseudo = start_mean + math.sqrt(start_var) * spread / spread.std(ddof=1)
    estimator = EmpiricalPriorEstimator(prior_arms=kappa)

    def log_integrated_likelihood(var):
        def integrand(mu):
            return np.exp(
                norm.logpdf(means, mu, np.sqrt(var + CELL_VAR / counts)).sum()
                + norm.logpdf(pseudo, mu, math.sqrt(var)).sum()
                + 20.0  # keeps the integrand in floating-point range
            )

        return math.log(quad(integrand, -3, 4, points=[0.4], limit=200, epsabs=0)[0])

    variances = np.array([0.003, 0.02, 0.1])
    ours = estimator._restricted_loglik(variances, means, CELL_VAR / counts, start_mean, start_var)[0]
    reference = np.array([log_integrated_likelihood(v) for v in variances])
    np.testing.assert_allclose(np.diff(ours), np.diff(reference), rtol=1e-7, atol=1e-8)


def test_no_data_gives_the_starting_prior_and_shrinkage_fades_with_data():
    estimator = EmpiricalPriorEstimator(prior_arms=5)
    assert estimator.estimate(np.zeros(4), np.zeros(4, dtype=int), 0.5, 0.04) == (0.5, 0.04)
    # Pseudo-arms only (one arm seen once) stay near the starting prior.
    mean, var = estimator.estimate(np.array([0.0, 0, 0]), np.array([1, 0, 0]), 0.5, 0.04)
    assert 0.4 < mean < 0.5 and 0.02 < var < 0.06
    rng = np.random.default_rng(3)
    unshrunk = EmpiricalPriorEstimator(prior_arms=0)
    for n_arms in (20, 2000):
        counts = np.full(n_arms, 8)
        sums = simulate_arms(rng, n_arms, counts, 0.3, 0.01)
        shrunk_mean, _ = estimator.estimate(sums, counts, 0.5, 0.04)
        data_mean, _ = unshrunk.estimate(sums, counts, 0.5, 0.04)
        assert data_mean < shrunk_mean < 0.5
    assert shrunk_mean - data_mean < 0.002  # at K = 2000 the data dominate


def test_without_shrinkage_a_single_arm_gives_the_starting_prior():
    estimator = EmpiricalPriorEstimator(prior_arms=0)
    assert estimator.estimate(np.array([3.0, 0]), np.array([4, 0]), 0.5, 0.04) == (0.5, 0.04)


def test_table_grid_snaps_to_the_nearest_grid_point_above_the_floor():
    estimator = EmpiricalPriorEstimator(var_floor=1e-3, tolerance=0.25)
    grid = 0.04 * np.exp(0.25 * np.arange(-40, 40))
    allowed = grid[grid >= 1e-3]
    for var in np.geomspace(2e-4, 0.25, 57):
        nearest = allowed[np.argmin(np.abs(np.log(allowed / var)))]
        assert estimator.grid_var(estimator.grid_index(var, 0.04), 0.04) == pytest.approx(nearest, rel=1e-12)
    assert estimator.grid_index(0.04, 0.04) == 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"var_floor": 0.0}, "var_floor must be positive and finite, got 0.0"),
        ({"var_floor": -1e-3}, "var_floor must be positive and finite"),
        ({"var_floor": float("nan")}, "var_floor must be positive and finite"),
        ({"tolerance": 0}, "tolerance must be positive and finite, got 0"),
        ({"tolerance": float("inf")}, "tolerance must be positive and finite"),
        ({"prior_arms": 0.5}, "prior_arms must be 0 or a finite number > 1, got 0.5"),
        ({"refit_growth": -0.1}, "refit_growth must be non-negative and finite"),
    ],
)
def test_bad_settings_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EmpiricalPriorEstimator(**kwargs)
