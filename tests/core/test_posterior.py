"""Finite-benchmark moments M, V and the step sd of M against Monte Carlo of the Gaussian model."""

import numpy as np
import pytest

from gittinseval.core.posterior import FiniteBenchmarkPosterior
from gittinseval.core.roots import EmpiricalTargetChain

PRIOR_MEAN, PRIOR_VAR, CELL_VAR = 0.4, 0.03, 0.25


def sample_model(rng, n_samples, n_examples):
    """Draws of the working model: theta ~ N(mu0, v0), Z_j | theta ~ N(theta, tau^2)."""
    theta = rng.normal(PRIOR_MEAN, np.sqrt(PRIOR_VAR), size=n_samples)
    return theta[:, None] + rng.normal(0, np.sqrt(CELL_VAR), size=(n_samples, n_examples))


def test_prior_moments_and_completion():
    post = FiniteBenchmarkPosterior(2, 5, PRIOR_MEAN, PRIOR_VAR, CELL_VAR)
    np.testing.assert_allclose(post.mean, PRIOR_MEAN)
    np.testing.assert_allclose(post.variance, PRIOR_VAR + CELL_VAR / 5)
    scores = np.array([1.0, 0.0, 1.0, 1.0, 0.25])
    post.update(0, scores[:3])
    post.update(0, scores[3:])
    assert post.completed.tolist() == [True, False]
    assert post.mean[0] == pytest.approx(scores.mean(), abs=1e-15)
    assert post.variance[0] == 0.0


@pytest.mark.parametrize("batches", [[7], [3, 3, 1], [10, 10]])
def test_moments_match_monte_carlo(batches):
    # For a Gaussian model, M = E[Zbar | data] and V = Var(Zbar | data) iff the
    # residual Zbar - M has mean 0, variance V and is uncorrelated with the data.
    rng = np.random.default_rng(1)
    n_examples, n_samples = 30, 40_000
    scores = sample_model(rng, n_samples, n_examples)
    post = FiniteBenchmarkPosterior(n_samples, n_examples, PRIOR_MEAN, PRIOR_VAR, CELL_VAR)
    start = 0
    for size in batches:
        for arm in range(n_samples):
            post.update(arm, scores[arm, start : start + size])
        start += size
    residual = scores.mean(axis=1) - post.mean
    observed_sum = scores[:, :start].sum(axis=1)
    variance = post.variance[0]
    np.testing.assert_allclose(post.variance, variance)  # deterministic given counts
    standard_error = np.sqrt(variance / n_samples)
    assert abs(residual.mean()) < 4 * standard_error
    assert residual.var() == pytest.approx(variance, rel=0.03)
    assert abs(np.corrcoef(residual, observed_sum)[0, 1]) < 0.02


def test_target_mean_is_affine_in_latent_mean():
    post = FiniteBenchmarkPosterior(1, 50, PRIOR_MEAN, PRIOR_VAR, CELL_VAR)
    post.update(0, np.full(12, 0.9))
    a = EmpiricalTargetChain(50, 4, PRIOR_VAR, CELL_VAR).target_scale
    assert post.mean[0] == pytest.approx(a * post.latent_mean[0] + (1 - a) * PRIOR_MEAN, abs=1e-14)


def test_step_sd_of_target_mean_matches_monte_carlo():
    # sigma_n = a v_n / sqrt(v_n + tau^2 / b_n), including the partial last batch.
    rng = np.random.default_rng(2)
    n_examples, batch, n_samples = 19, 4, 30_000
    chain = EmpiricalTargetChain(n_examples, batch, PRIOR_VAR, CELL_VAR)
    scores = sample_model(rng, n_samples, n_examples)
    post = FiniteBenchmarkPosterior(n_samples, n_examples, PRIOR_MEAN, PRIOR_VAR, CELL_VAR)
    previous = post.mean.copy()
    for stage, size in enumerate(chain.batch_sizes.astype(int)):
        start = stage * batch
        for arm in range(n_samples):
            post.update(arm, scores[arm, start : start + size])
        step = post.mean - previous
        assert abs(step.mean()) < 4 * chain.step_sds[stage] / np.sqrt(n_samples)
        assert step.std() == pytest.approx(chain.step_sds[stage], rel=0.03)
        previous = post.mean.copy()


def test_rejects_bad_variances_and_overflow():
    with pytest.raises(ValueError, match="prior_var must be positive"):
        FiniteBenchmarkPosterior(2, 5, 0.5, 0.0)
    with pytest.raises(ValueError, match="cell_var must be positive"):
        FiniteBenchmarkPosterior(2, 5, 0.5, 0.04, cell_var=-1)
    post = FiniteBenchmarkPosterior(1, 3, 0.5, 0.04)
    with pytest.raises(ValueError, match="exceed its 3 examples"):
        post.update(0, np.ones(4))


def test_set_prior_equals_conditioning_from_scratch_under_the_new_prior():
    rng = np.random.default_rng(2)
    batches = [(k % 4, rng.uniform(size=rng.integers(1, 4))) for k in range(11)]
    post = FiniteBenchmarkPosterior(5, 12, 0.5, 0.04)
    fresh = FiniteBenchmarkPosterior(5, 12, 0.31, 0.007)
    for arm, scores in batches:
        post.update(arm, scores)
        fresh.update(arm, scores)
    post.set_prior(0.31, 0.007)
    for name in ("latent_mean", "latent_var", "mean", "variance"):
        np.testing.assert_allclose(getattr(post, name), getattr(fresh, name), rtol=1e-13, atol=1e-15)
    assert post.mean[4] == 0.31  # an arm never observed keeps the prior mean
    with pytest.raises(ValueError, match="prior_var must be positive"):
        post.set_prior(0.3, float("nan"))
