"""Learned costs (gittinseval/core/cost_learning.py): the estimate against its conjugate posterior; re-planning."""

import numpy as np
import pytest
from scipy import integrate, stats

from gittinseval import CostLearning
from gittinseval.utils.validation import ConfigError


def test_the_estimate_is_the_posterior_mean_of_the_cost_under_gamma_cells_and_an_inverse_gamma_prior():
    """Cells Gamma(alpha, mean c), prior c ~ InvGamma(n0 alpha + 1, scale n0 alpha g): E[c | cells] by quadrature
    over c equals (n0 g + S) / (n0 + n)."""
    rng = np.random.default_rng(3)
    alpha, guess, n0 = 4.0, 2.0, 1.5
    cells = rng.gamma(alpha, 0.7 / alpha, size=11)  # true mean 0.7: the guess is about 3x too high
    estimator = CostLearning(pseudo_count=n0).start(np.array([guess, 1.0]))
    for batch in np.split(cells, [4, 8]):  # charged in batches: only the sums enter
        estimator.charge(0, batch.size, float(batch.sum()))

    prior = stats.invgamma(n0 * alpha + 1, scale=n0 * alpha * guess)
    log_likelihood = lambda c: stats.gamma(alpha, scale=c / alpha).logpdf(cells).sum()  # noqa: E731
    peak = cells.mean()
    weight = lambda c: prior.pdf(c) * np.exp(log_likelihood(c) - log_likelihood(peak))  # noqa: E731
    bounds = dict(a=1e-3, b=10.0, points=[peak], limit=200)
    posterior_mean = integrate.quad(lambda c: c * weight(c), **bounds)[0] / integrate.quad(weight, **bounds)[0]
    assert estimator.estimate[0] == pytest.approx(posterior_mean, rel=1e-8)
    assert estimator.estimate[0] == pytest.approx((n0 * guess + cells.sum()) / (n0 + cells.size), rel=1e-14)
    assert prior.mean() == pytest.approx(guess) and estimator.estimate[1] == 1.0  # no charge: the guess


def test_the_policy_replans_an_arm_only_once_its_estimate_moves_by_more_than_the_share():
    estimator = CostLearning(pseudo_count=2.0, refresh_share=0.1).start(np.array([1.0, 1.0]))
    assert not estimator.charge(0, 2, 2.3)  # (2 + 2.3) / 4 = 1.075: within 10 % of 1
    assert estimator.planned.tolist() == [1.0, 1.0] and estimator.estimate[0] == pytest.approx(1.075)
    assert estimator.charge(0, 2, 2.6)  # (2 + 4.9) / 6 = 1.15
    assert estimator.planned[0] == pytest.approx(1.15) and estimator.n_refreshes == 1
    assert not estimator.charge(0, 4, 4.8)  # (2 + 9.7) / 10 = 1.17: within 10 % of 1.15
    assert estimator.charge(1, 8, 0.8)  # (2 + 0.8) / 10 = 0.28: down as well
    assert estimator.planned.tolist() == [pytest.approx(1.15), pytest.approx(0.28)]
    every = CostLearning(pseudo_count=2.0, refresh_share=0.0).start(np.array([1.0]))
    assert not every.charge(0, 2, 2.0) and every.charge(0, 1, 1.01)  # share 0: every move, and only a move


def test_settings_out_of_range_are_refused():
    with pytest.raises(ConfigError, match="pseudo_count must be positive"):
        CostLearning(pseudo_count=0.0)
    with pytest.raises(ConfigError, match="refresh_share must be non-negative"):
        CostLearning(refresh_share=-0.1)
    with pytest.raises(ValueError, match="guessed costs"):
        CostLearning().start(np.array([1.0, 0.0]))
