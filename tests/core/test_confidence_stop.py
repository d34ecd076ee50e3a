"""The confidence stop (gittinseval.core.confidence_stop): its cheap bounds and ceilings decide as the full
certificate does, and a run it stops rarely ends on an arm that is not eps-best."""

import numpy as np
import pytest
from scipy.stats import norm

from gittinseval.core.certificate import DEFAULT_SAMPLES, certify, posterior_from_statistics
from gittinseval.core.confidence_stop import ConfidenceStop, StopReason, _eps_best_ceiling, eps_best_bounds
from gittinseval.core.posterior import FiniteBenchmarkPosterior
from gittinseval.utils.validation import ConfigError
from tests.core.test_certificate import GENERAL, MC_BOUND, POLICIES, beta_benchmark, drive, exact_probabilities


def test_the_confidence_stop_rarely_stops_on_an_arm_that_is_not_eps_best():
    # Measured at this seed (150 runs of each policy, 5 arms, N = 100, up to half the cells):
    # 394 stops (GittinsEval 145, UCB-E 141, uniform 108) after 23 % of the cells on average,
    # 21 of them (5.3 %; 11, 6, 4) on an arm that is not 0.01-best, against delta = 10 %.
    stop = ConfidenceStop(prob_eps_best=0.9, eps=0.01)
    delta = 1 - stop.prob_eps_best
    rng = np.random.default_rng(1)
    n_runs, n_arms, n_examples = 150, 5, 100
    n_stops = n_wrong = 0
    for make in POLICIES.values():
        for run in range(n_runs):
            scores = beta_benchmark(rng, GENERAL, n_arms, n_examples)
            truth = scores.mean(axis=1)
            _, recommended, stopped, _ = drive(make(), scores, GENERAL, 0.5 * scores.size, run, stop)
            n_stops += stopped
            n_wrong += stopped and truth[recommended] < truth.max() - stop.eps
    assert n_stops >= n_runs
    assert n_wrong / n_stops <= delta + 3 * np.sqrt(delta * (1 - delta) / n_stops) + MC_BOUND


def test_the_stop_decides_by_the_bounds_and_else_by_the_certificate(monkeypatch):
    post = posterior_from_statistics([30, 28, 26, 10], [50, 50, 50, 40], 100, *GENERAL)
    lower, upper = eps_best_bounds(post.mean, post.variance, 0, 0.01)
    estimate = certify(post, 0).prob_eps_best
    assert 0 < lower < estimate < upper < 1
    with monkeypatch.context() as patch:
        patch.setattr("gittinseval.core.certificate.certify", None)  # outside the bounds, no Monte Carlo
        assert ConfidenceStop(lower - 0.01).reached(post, 0)
        assert not ConfidenceStop(min(upper + 0.01, 0.999)).reached(post, 0)
    assert ConfidenceStop(estimate).reached(post, 0)
    assert not ConfidenceStop(estimate + 1 / DEFAULT_SAMPLES).reached(post, 0)
    # One arm: it is the best, before any data.
    assert ConfidenceStop(0.999).reached(FiniteBenchmarkPosterior(1, 10, *GENERAL), 0)


def _many_arm_posterior(seed, n_arms=300, n_examples=100):
    """A posterior of many arms at mixed stages: unseen, partly seen and complete arms."""
    rng = np.random.default_rng(seed)
    means = rng.beta(6, 4, n_arms)
    counts = rng.choice([0, 4, 12, 40, n_examples], n_arms, p=[0.2, 0.3, 0.3, 0.15, 0.05])
    sums = rng.binomial(counts, means)
    return posterior_from_statistics(sums, counts, n_examples, *GENERAL)


@pytest.mark.parametrize("seed", range(6))
def test_the_stop_ceiling_is_never_below_the_full_estimate_with_the_same_draws(seed):
    post = _many_arm_posterior(seed)
    mean, sd = np.asarray(post.mean), np.sqrt(post.variance)
    full = certify(post, 0).arm_prob_eps_best
    arms = np.argsort(-mean)[:40]  # the arms a run might recommend, complete ones among them
    for arm in arms:
        for rivals in (1, 8, 32):
            ceiling = _eps_best_ceiling(mean, sd, int(arm), 0.01, DEFAULT_SAMPLES, rivals)
            assert ceiling >= full[arm]
        # With every drawn arm as a rival, the ceiling is the estimate itself.
        assert _eps_best_ceiling(mean, sd, int(arm), 0.01, DEFAULT_SAMPLES, len(mean)) == full[arm]


@pytest.mark.parametrize("seed", range(4))
def test_the_stop_with_its_ceiling_decides_as_the_full_certificate(seed):
    post = _many_arm_posterior(seed, n_arms=200)
    full = certify(post, 0).arm_prob_eps_best
    for arm in np.argsort(-np.asarray(post.mean))[:30]:
        for threshold in (0.05, 0.3, 0.6, 0.9, 0.95):
            assert ConfidenceStop(threshold).reached(post, int(arm)) == (full[arm] >= threshold)


@pytest.mark.parametrize("eps", [0.0, 0.02])
def test_the_bounds_of_two_arms_are_the_exact_gaussian_tail(eps):
    # One rival: P(D >= -eps) with D ~ N(M_a - M_j, V_a + V_j) is both the union bound and the minimum.
    mean, variance = np.array([0.61, 0.58]), np.array([0.002, 0.0035])
    lower, upper = eps_best_bounds(mean, variance, 1, eps)
    exact = norm.cdf((0.58 + eps - 0.61) / np.sqrt(0.0055))
    assert lower == pytest.approx(exact, abs=1e-14) and upper == pytest.approx(exact, abs=1e-14)


def test_the_bounds_of_many_arms_hold_the_exact_probability_and_known_arms_are_steps():
    mean, sd = np.array([0.7, 0.66, 0.6, 0.5]), np.array([0.03, 0.04, 0.05, 0.0])
    for eps in (0.0, 0.01, 0.05):
        exact = exact_probabilities(mean, sd, eps)[1]
        for arm in range(4):
            lower, upper = eps_best_bounds(mean, sd**2, arm, eps)
            assert lower - 1e-9 <= exact[arm] <= upper + 1e-9, (arm, eps, lower, exact[arm], upper)
    # Two known arms: 0.5 is never within 0.05 of 0.6, and always within 0.15.
    known = np.array([0.6, 0.5])
    assert eps_best_bounds(known, np.zeros(2), 1, 0.05) == (0.0, 0.0)
    assert eps_best_bounds(known, np.zeros(2), 1, 0.15) == (1.0, 1.0)


def test_a_stop_is_built_from_a_config_mapping_and_refuses_bad_settings():
    assert ConfidenceStop.of(None) is None
    stop = ConfidenceStop(0.9, 0.02)
    assert ConfidenceStop.of(stop) == stop
    assert ConfidenceStop.of({"prob_eps_best": 0.8, "eps": 0.05, "mode": "anytime"}) == ConfidenceStop(
        0.8, 0.05, DEFAULT_SAMPLES, "anytime"
    )
    for settings, message in (
        ({"mode": "bayes"}, "stop_when.mode must be one of posterior, anytime, got 'bayes'"),
        ({"eps": -0.1}, "eps must be non-negative"),
        ({"prob_eps_best": 0.0}, "prob_eps_best must be a number in"),
        ({"n_samples": 0}, "n_samples must be a positive integer"),
    ):
        with pytest.raises(ConfigError, match=message):
            ConfidenceStop(**settings)
    assert [reason.value for reason in StopReason] == ["budget", "policy", "confidence", "exhausted"]
