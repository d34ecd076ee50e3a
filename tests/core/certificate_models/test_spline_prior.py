"""The exchangeable prior learned from a run (gittinseval.core.certificate_models.spline_prior): the wide default,
the penalised maximum of the marginal likelihood, its mixture with the default, and what it learns."""

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import beta as beta_distribution

from gittinseval.core.certificate_models import Lattice
from gittinseval.core.certificate_models.spline_prior import SplinePrior, default_log_prior

LATTICE = Lattice(100, binary=True)


def spline_prior(**options) -> SplinePrior:
    return SplinePrior(LATTICE.logit_points, LATTICE.points, **options)


def exact_likelihoods(means: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``([U, X] likelihoods, [U] counts)`` of arms whose means are known: a point mass at each distinct one."""
    cells, counts = np.unique(np.rint(means * 100).astype(int), return_counts=True)
    likelihood = np.zeros((cells.size, LATTICE.size))
    likelihood[np.arange(cells.size), cells] = 1.0
    return likelihood, counts.astype(float)


def penalised_log_likelihood(prior: SplinePrior, alpha: np.ndarray, likelihood, counts) -> float:
    """``sum_u c_u log(sum_i L_ui g_i) - alpha^T P alpha`` with ``log g = B alpha`` normalised, written afresh."""
    eta = prior.basis @ alpha
    log_g = eta - logsumexp(eta)
    return float(counts @ np.log(likelihood @ np.exp(log_g)) - alpha @ prior.penalty_matrix @ alpha)


def test_the_default_is_the_beta_of_the_general_prior_on_the_lattice():
    # Beta(2.625, 2.625): mean 0.5, variance 1 / (4 (2 a + 1)) = 0.04, the general prior's.
    log_g = default_log_prior(LATTICE.points)
    assert logsumexp(log_g) == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(log_g, log_g[::-1], rtol=0, atol=1e-12)
    inside = slice(1, -1)  # the two end points are clipped to half a cell inside (0, 1)
    expected = beta_distribution.logpdf(LATTICE.points[inside], 2.625, 2.625)
    differences = log_g[inside] - expected
    np.testing.assert_allclose(differences, differences[0], rtol=0, atol=1e-10)
    assert np.exp(log_g) @ LATTICE.points == pytest.approx(0.5, abs=1e-12)


def test_without_observed_arms_the_prior_is_the_default():
    prior = spline_prior()
    np.testing.assert_array_equal(prior.log_prior, default_log_prior(LATTICE.points))
    log_g = prior.fit(np.zeros((0, LATTICE.size)), np.zeros(0))
    np.testing.assert_array_equal(log_g, default_log_prior(LATTICE.points))


def test_the_fit_maximises_the_penalised_marginal_likelihood():
    rng = np.random.default_rng(0)
    likelihood, counts = exact_likelihoods(rng.beta(8.0, 3.0, 300))
    prior = spline_prior(default_arms=0.0)
    log_g = prior.fit(likelihood, counts)
    best = penalised_log_likelihood(prior, prior.coefficients, likelihood, counts)
    # The prior is the normalised exponential of the spline at the fitted coefficients.
    eta = prior.basis @ prior.coefficients
    np.testing.assert_allclose(log_g, eta - logsumexp(eta), rtol=0, atol=1e-10)
    for _ in range(20):  # no nearby coefficients do better
        nudged = prior.coefficients + 1e-3 * rng.standard_normal(prior.coefficients.size)
        assert penalised_log_likelihood(prior, nudged, likelihood, counts) <= best + 1e-6


def test_the_fit_follows_the_arms_and_is_mixed_with_the_default_as_pseudo_arms():
    rng = np.random.default_rng(1)
    means = rng.beta(8.0, 3.0, 400)
    likelihood, counts = exact_likelihoods(means)
    alone = np.exp(spline_prior(default_arms=0.0).fit(likelihood, counts))
    # Learned: the mean and the spread of the arms' means, far from the default's 0.5 and 0.2.
    mean = alone @ LATTICE.points
    sd = np.sqrt(alone @ (LATTICE.points - mean) ** 2)
    assert mean == pytest.approx(np.mean(means), abs=0.01) and sd == pytest.approx(np.std(means), abs=0.015)
    # default_arms = kappa mixes in the default as kappa arms would: (C g + kappa g_0) / (C + kappa).
    mixed = np.exp(spline_prior(default_arms=50.0).fit(likelihood, counts))
    default = np.exp(default_log_prior(LATTICE.points))
    np.testing.assert_allclose(mixed, (400 * alone + 50 * default) / 450, rtol=1e-9, atol=1e-15)


def test_a_rougher_penalty_follows_the_arms_more_closely():
    rng = np.random.default_rng(2)
    # Two clusters of arms: a strong penalty pulls log g towards a straight line in logit, blurring them.
    means = np.concatenate([rng.normal(0.3, 0.02, 150), rng.normal(0.8, 0.02, 150)])
    likelihood, counts = exact_likelihoods(np.clip(means, 0.0, 1.0))
    gap = (LATTICE.points > 0.45) & (LATTICE.points < 0.65)
    between = {penalty: np.exp(spline_prior(penalty=penalty, default_arms=0.0).fit(likelihood, counts))[gap].sum()
               for penalty in (0.1, 1000.0)}
    assert between[0.1] < 0.02 < between[1000.0]
