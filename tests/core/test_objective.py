"""The objectives: GittinsEval's offset allocation against a run on offset scores; cheapest_within by brute force."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from gittinseval.core.certificate import posterior_from_statistics
from gittinseval.core.gittins import GittinsPolicy
from gittinseval.core.objective import Objective, value_offsets
from gittinseval.core.protocol import EvaluationProblem
from gittinseval.utils.validation import ConfigError

PRIOR_MEAN, PRIOR_VAR = 0.5, 0.04


def _run(policy: GittinsPolicy, problem: EvaluationProblem, scores: np.ndarray, seed: int, shift=None):
    """Every (arm, recommended, stop signal) of a run to exhaustion; ``shift``: the run on offset scores."""
    policy.reset(problem, np.random.default_rng(seed))
    if shift is not None:
        # The reference run: scores + b_k under the prior N(mu_0 + b_k, v_0), per arm.
        policy.posterior.set_prior(PRIOR_MEAN + shift, PRIOR_VAR)
        policy._refresh_all_arms()
        scores = scores + shift[:, None]
    steps = []
    while (request := policy.select()) is not None:
        policy.observe(request, scores[request.arm, request.examples])
        steps.append((request.arm, policy.recommend(), policy.stop_signal))
    return steps


@pytest.mark.parametrize("seed", range(4))
def test_offset_allocation_equals_the_run_on_offset_scores(seed):
    rng = np.random.default_rng(100 + seed)
    n_arms, n_examples = 5, 40
    accuracy = rng.uniform(0.3, 0.8, n_arms)
    scores = (rng.random((n_arms, n_examples)) < accuracy[:, None]).astype(np.float64)
    costs = rng.choice([1.0, 3.0], n_arms)
    offsets = value_offsets(rng.uniform(0.1, 2.0, n_arms), mu=0.1)
    problem = dict(n_examples=n_examples, costs=costs, budget=1e9, prior_mean=PRIOR_MEAN, prior_var=PRIOR_VAR)
    policy = GittinsPolicy(batch_size=4, lam=1e-3)

    with_offsets = _run(policy, EvaluationProblem(**problem, offsets=offsets, binary=True), scores, seed)
    on_offset_scores = _run(policy, EvaluationProblem(**problem, binary=True), scores, seed, shift=offsets)
    accuracy_only = _run(policy, EvaluationProblem(**problem, binary=True), scores, seed)

    assert with_offsets == on_offset_scores
    assert any(step[2] for step in with_offsets)  # the stopping signal fired, and fired at the same step
    # The offsets matter: without them the run is another one.
    assert with_offsets != accuracy_only


def test_accuracy_objective_is_the_policy_choice_and_zero_offsets():
    objective = Objective()
    posterior = posterior_from_statistics([5.0, 9.0], [10, 10], 20, PRIOR_MEAN, PRIOR_VAR)
    assert objective.choose(posterior, None, accuracy_choice=0).arm == 0
    assert np.array_equal(objective.offsets(None, 2), np.zeros(2))
    assert not objective.needs_prices


def _prob_eps_best(mean, sd, eps):
    """``P(Zbar_k >= max_j Zbar_j - eps)`` of independent Gaussians by quadrature, ``[K]``."""
    probs = []
    for k in range(len(mean)):
        others = [j for j in range(len(mean)) if j != k]

        def density(z, k=k, others=others):
            return norm.pdf(z, mean[k], sd[k]) * np.prod([norm.cdf((z + eps - mean[j]) / sd[j]) for j in others])

        probs.append(integrate.quad(density, mean[k] - 12 * sd[k], mean[k] + 12 * sd[k], epsabs=1e-10)[0])
    return np.array(probs)


def _brute_force_cheapest(prob, prices, delta):
    qualifying = [k for k in range(len(prob)) if prob[k] >= 1 - delta]
    return min(qualifying, key=lambda k: (prices[k], -prob[k], k)) if qualifying else None


@pytest.mark.parametrize(
    ("sums", "prices", "expected_qualified"),
    [
        # A clear leader (arm 1, expensive), arm 0 a point behind it and cheap, arm 2 far behind and cheapest.
        ([3600.0, 3610.0, 3000.0], [0.6, 2.0, 0.1], True),
        # Three close arms on few scores: none is 0.01-best with probability 0.95.
        ([30.0, 31.0, 29.0], [0.6, 2.0, 0.1], False),
    ],
)
def test_cheapest_within_is_the_cheapest_qualifying_arm_by_brute_force(sums, prices, expected_qualified):
    n_examples = 5000
    n_seen = [4950, 4950, 4950] if expected_qualified else [50, 50, 50]
    posterior = posterior_from_statistics(sums, n_seen, n_examples, PRIOR_MEAN, PRIOR_VAR)
    objective = Objective("cheapest_within", eps=0.01, delta=0.05)
    exact = _prob_eps_best(posterior.mean, np.sqrt(posterior.variance), objective.eps)
    # The instance is decided away from the threshold, beyond the Monte Carlo error.
    assert np.all(np.abs(exact - (1 - objective.delta)) > 0.03)
    accuracy_choice = int(np.argmax(posterior.mean))

    choice = objective.choose(posterior, prices, accuracy_choice, n_samples=1 << 16)

    np.testing.assert_allclose(choice.prob_eps_best, exact, atol=4 * 0.5 / 2**8)
    expected = _brute_force_cheapest(exact, prices, objective.delta)
    assert choice.qualified is expected_qualified
    assert choice.arm == (accuracy_choice if expected is None else expected)
    if expected_qualified:
        # Neither the accuracy choice nor the cheapest arm: the rule, not a default, picked it.
        assert choice.arm not in (accuracy_choice, int(np.argmin(prices)))


def test_cheapest_within_prefers_the_cheap_qualifier_over_a_surer_dear_one():
    """A cheap arm that qualifies at P(eps-best) of about 0.97 is chosen over a dear one at P of about 1: the rule
    orders by price first, not by probability (a choice that sorted by probability would pick the dear arm)."""
    n_examples = 5000
    # Arm 0 dear, 4990 of 5000 scored at 0.805; arm 1 cheap, 4300 scored at 0.80.
    posterior = posterior_from_statistics([0.805 * 4990, 0.80 * 4300], [4990, 4300], n_examples,
                                          PRIOR_MEAN, PRIOR_VAR)
    prices = np.array([2.0, 0.1])
    objective = Objective("cheapest_within", eps=0.01, delta=0.05)
    exact = _prob_eps_best(posterior.mean, np.sqrt(posterior.variance), objective.eps)
    # The instance: both qualify, the dear arm surer than the cheap one, the cheap one clear of the threshold.
    assert exact[0] > 0.999 and 0.955 < exact[1] < 0.99

    choice = objective.choose(posterior, prices, accuracy_choice=0, n_samples=1 << 16)

    assert choice.qualified is True and choice.arm == 1 == _brute_force_cheapest(exact, prices, objective.delta)


def test_value_choice_and_certificate_are_those_of_the_offset_targets():
    n_examples = 400
    posterior = posterior_from_statistics([300.0, 280.0, 250.0], [350, 350, 350], n_examples, PRIOR_MEAN, PRIOR_VAR)
    prices = np.array([10.0, 1.0, 0.2])
    objective = Objective("value", mu=0.01)
    offsets = -0.01 * prices
    value_mean, sd = posterior.mean + offsets, np.sqrt(posterior.variance)
    lcb = value_mean - sd

    choice = objective.choose(posterior, prices, accuracy_choice=0, kappa=1.0)
    certificate = objective.certify(posterior, choice.arm, prices, eps=0.0, n_samples=1 << 16)

    assert choice.arm == int(np.argmax(lcb)) != 0
    np.testing.assert_allclose(certificate.arm_mean, value_mean)
    np.testing.assert_allclose(certificate.arm_prob_best, _prob_eps_best(value_mean, sd, 0.0), atol=4 * 0.5 / 2**8)
    # The interval is clipped to the value's range: the accuracy range shifted by b_k.
    lowest = (np.array([300.0, 280.0, 250.0]) / n_examples) + offsets
    assert np.all(certificate.arm_lower >= lowest - 1e-12)
    assert np.all(certificate.arm_upper <= lowest + 50 / n_examples + 1e-12)


@pytest.mark.parametrize(
    "settings",
    [{"name": "best"}, {"name": "value", "mu": -1.0}, {"name": "cheapest_within", "delta": 1.0}],
)
def test_bad_objectives_are_refused(settings):
    with pytest.raises(ConfigError, match="objective"):
        Objective.from_config(settings)


def test_value_needs_prices():
    posterior = posterior_from_statistics([5.0, 9.0], [10, 10], 20, PRIOR_MEAN, PRIOR_VAR)
    with pytest.raises(ConfigError, match="deployment price"):
        Objective("value", mu=1.0).choose(posterior, None, accuracy_choice=1)
