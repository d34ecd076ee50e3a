"""The certificate of a recommendation: against exact integrals, for any policy's data, and calibrated on
benchmarks drawn from the prior.  The confidence stop that reads it is tested in test_confidence_stop.py."""

import json

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from gittinseval.baselines.ucbe import UCBEPolicy
from gittinseval.baselines.uniform import UniformPolicy
from gittinseval.core.certificate import DEFAULT_SAMPLES, certify, posterior_from_statistics
from gittinseval.core.confidence_stop import ConfidenceStop, StopReason, eps_best_bounds
from gittinseval.core.gittins import GittinsPolicy
from gittinseval.core.posterior import FiniteBenchmarkPosterior
from gittinseval.core.protocol import EvaluationProblem, Policy, Request
from gittinseval.utils.validation import ConfigError

GENERAL = (0.5, 0.04)
MC_BOUND = 0.5 / np.sqrt(DEFAULT_SAMPLES)
"""Largest Monte Carlo standard error of a probability at the default sample count."""
POLICIES = {
    "gittins": lambda: GittinsPolicy(batch_size=4),
    "ucbe": lambda: UCBEPolicy(batch_size=4),
    "uniform": lambda: UniformPolicy(batch_size=4),
}


def exact_probabilities(mean, sd, eps):
    """``[K]`` P(best) and P(eps-best) of independent Gaussians by quadrature (``sd = 0``: a known arm).

    ``P(Zbar_k >= max_{j != k} Zbar_j - e) = int phi_k(x) prod_{j != k} Phi((x + e - M_j) / s_j) dx``,
    a product of steps for the known arms.
    """

    def below(x, j, shift):  # P(Zbar_j <= x + shift)
        return norm.cdf((x + shift - mean[j]) / sd[j]) if sd[j] > 0 else float(x + shift >= mean[j])

    result = []
    for shift in (0.0, eps):
        probs = []
        for k in range(len(mean)):
            others = [j for j in range(len(mean)) if j != k]
            if sd[k] == 0:
                probs.append(np.prod([below(mean[k], j, shift) for j in others]))
                continue
            steps = [mean[j] - shift for j in others if sd[j] == 0]
            value, _ = integrate.quad(
                lambda x, k=k, others=others, shift=shift: (
                    norm.pdf(x, mean[k], sd[k]) * np.prod([below(x, j, shift) for j in others])
                ),
                mean[k] - 12 * sd[k],
                mean[k] + 12 * sd[k],
                points=[s for s in steps if abs(s - mean[k]) < 12 * sd[k]] or None,
                epsabs=1e-11,
                limit=200,
            )
            probs.append(value)
        result.append(np.array(probs))
    return result


def assert_within_mc_error(estimate, exact, n_samples=DEFAULT_SAMPLES):
    error = np.sqrt(exact * (1 - exact) / n_samples)
    np.testing.assert_array_less(np.abs(estimate - exact), 4 * error + 1e-9)


@pytest.mark.parametrize("eps", [0.0, 0.01, 0.05])
def test_two_arms_match_the_closed_form(eps):
    post = posterior_from_statistics([30, 22], [50, 40], 120, *GENERAL)
    cert = certify(post, 0, eps=eps)
    spread = np.sqrt(post.variance.sum())
    gap = post.mean[0] - post.mean[1]
    exact_best = norm.cdf(np.array([gap, -gap]) / spread)
    exact_near = norm.cdf((np.array([gap, -gap]) + eps) / spread)
    assert_within_mc_error(cert.arm_prob_best, exact_best)
    assert_within_mc_error(cert.arm_prob_eps_best, exact_near)
    assert cert.prob_best == cert.arm_prob_best[0] and cert.prob_eps_best == cert.arm_prob_eps_best[0]
    # K = 2: the union bound and the pairwise bound of the stop rule are both exact.
    np.testing.assert_allclose(eps_best_bounds(post.mean, post.variance, 0, eps), exact_near[0], rtol=1e-12)


@pytest.mark.parametrize(
    "sums, counts",
    [
        ([30, 27, 20], [50, 45, 40]),  # three open arms, close together
        ([60, 27, 80], [100, 45, 100]),  # a completed arm (0.6) between two open ones, another at 0.8
    ],
)
def test_three_arms_match_quadrature(sums, counts):
    post = posterior_from_statistics(sums, counts, 100, *GENERAL)
    sd = np.sqrt(post.variance)
    exact_best, exact_near = exact_probabilities(post.mean, sd, 0.01)
    cert = certify(post, 0)
    assert_within_mc_error(cert.arm_prob_best, exact_best)
    assert_within_mc_error(cert.arm_prob_eps_best, exact_near)
    for arm in range(3):
        lower, upper = eps_best_bounds(post.mean, post.variance, arm, 0.01)
        assert lower - 1e-12 <= exact_near[arm] <= upper + 1e-12


def test_fresh_draws_agree_with_the_fixed_normals_within_their_error():
    post = posterior_from_statistics([30, 27, 20], [50, 45, 40], 100, *GENERAL)
    exact_best, _ = exact_probabilities(post.mean, np.sqrt(post.variance), 0.01)
    fresh = certify(post, 1, n_samples=40_000, rng=np.random.default_rng(5))
    assert_within_mc_error(fresh.arm_prob_best, exact_best, 40_000)
    assert fresh.prob_best_se == pytest.approx(np.sqrt(fresh.prob_best * (1 - fresh.prob_best) / 40_000))


@pytest.mark.parametrize("level", [0.95, 0.8])
def test_interval_is_the_normal_quantile_clipped_to_the_attainable_range(level):
    # Arm 0 is interior; arm 1 answered 98 of 98 with 2 unseen, so its mean is at most 1;
    # arm 2 answered 0 of 97 with 3 unseen, so its mean is at least 0.
    post = posterior_from_statistics([30, 98, 0], [60, 98, 97], 100, *GENERAL)
    cert = certify(post, 0, level=level)
    half = norm.ppf(0.5 + level / 2) * np.sqrt(post.variance)
    assert cert.lower == pytest.approx(post.mean[0] - half[0], rel=1e-12)
    assert cert.upper == pytest.approx(post.mean[0] + half[0], rel=1e-12)
    assert post.mean[1] + half[1] > 1 and cert.arm_upper[1] == 1.0
    assert cert.arm_lower[1] == pytest.approx(post.mean[1] - half[1], rel=1e-12)
    assert post.mean[2] - half[2] < 0 and cert.arm_lower[2] == 0.0
    assert cert.level == level and cert.mean == post.mean[0]


def test_a_completed_arm_is_known_exactly():
    post = posterior_from_statistics([70, 40, 30], [100, 60, 100], 100, *GENERAL)
    cert = certify(post, 0)
    assert cert.mean == cert.lower == cert.upper == 0.7
    # Arm 2 is completed at 0.3: it is never best, and arm 0 is best exactly when arm 1 falls below 0.7.
    open_sd = np.sqrt(post.variance[1])
    assert_within_mc_error(cert.prob_best, norm.cdf((0.7 - post.mean[1]) / open_sd))
    assert cert.arm_prob_best[2] == 0.0
    assert cert.arm_prob_best.sum() == pytest.approx(1.0)

    # A completed arm far ahead is best with certainty, and two completed arms that tie are both best.
    post = posterior_from_statistics([90, 90, 10], [100, 100, 20], 100, *GENERAL)
    cert = certify(post, 0)
    assert cert.prob_best == cert.arm_prob_best[1] == 1.0 and cert.prob_best_se == 0.0
    assert cert.arm_prob_best[2] == 0.0


def test_hopeless_arms_are_left_out_and_change_nothing():
    contenders = posterior_from_statistics([30, 27, 20], [50, 45, 40], 100, *GENERAL)
    base = certify(contenders, 0)
    # 1000 nearly completed arms around 0.05 come first: drawn, they would take the fixed
    # normals' first rows and change every estimate; left out, the contenders keep them.
    n_hopeless = 1000
    post = posterior_from_statistics(
        np.concatenate([np.full(n_hopeless, 5.0), [30, 27, 20]]),
        np.concatenate([np.full(n_hopeless, 99), [50, 45, 40]]),
        100,
        *GENERAL,
    )
    cert = certify(post, n_hopeless)
    np.testing.assert_array_equal(cert.arm_prob_best[n_hopeless:], base.arm_prob_best)
    np.testing.assert_array_equal(cert.arm_prob_eps_best[n_hopeless:], base.arm_prob_eps_best)
    assert not cert.arm_prob_eps_best[:n_hopeless].any()


def test_the_fixed_normals_make_it_a_function_of_the_data(monkeypatch):
    post = posterior_from_statistics([30, 27, 20], [50, 45, 40], 100, *GENERAL)
    first = certify(post, 0)
    assert certify(post, 0).as_dict() == first.as_dict()
    # The fixed normals grow with the arms drawn; their first rows stay the same, so the bank
    # cached before does not matter.
    banks = {}
    monkeypatch.setattr("gittinseval.core.certificate._NORMALS", banks)
    small = certify(post, 0, n_samples=256)
    many = posterior_from_statistics(np.full(500, 30), np.full(500, 50), 100, *GENERAL)
    certify(many, 0, n_samples=256)
    assert len(banks[256]) == 512
    assert certify(post, 0, n_samples=256).as_dict() == small.as_dict()
    fresh = certify(post, 0, rng=np.random.default_rng(1))
    assert fresh.prob_best != first.prob_best
    with pytest.raises(ValueError, match="read-only"):
        first.arm_prob_best[0] = 1.0


class Replay(Policy):
    """Requests a fixed list of cells, in its order."""

    name = "replay"
    uses_prior = False

    def __init__(self, requests):
        self.requests = requests

    def reset(self, problem, rng):
        self.queue = list(self.requests)

    def select(self, busy=frozenset()):
        return self.queue.pop(0) if self.queue else None

    def observe(self, request, scores):
        pass

    def recommend(self):
        return 0


def drive(policy, scores, prior, budget, seed, stop=None):
    """Run ``policy`` on the ``[K, N]`` scores until ``budget`` cells are observed, the policy has
    nothing left, or ``stop`` is reached; the run's own posterior (updated as a live driver does),
    the recommendation, whether ``stop`` ended it, and the requests made."""
    n_arms, n_examples = scores.shape
    problem = EvaluationProblem(n_examples, np.ones(n_arms), n_arms * n_examples, *prior, binary=True)
    policy.reset(problem, np.random.default_rng(seed))
    post = FiniteBenchmarkPosterior(n_arms, n_examples, *prior)
    requests = []
    while post.n_seen.sum() < budget:
        request = policy.select()
        if request is None:
            break
        requests.append(request)
        policy.observe(request, scores[request.arm, request.examples])
        post.update(request.arm, scores[request.arm, request.examples])
        if stop is not None and stop.reached(post, policy.recommend()):
            return post, policy.recommend(), True, requests
    return post, policy.recommend(), False, requests


def test_the_same_cells_in_two_orders_give_the_same_certificate():
    rng = np.random.default_rng(3)
    scores = (rng.random((6, 40)) < rng.uniform(0.3, 0.7, (6, 1))).astype(float)
    post, recommended, _, requests = drive(GittinsPolicy(batch_size=4), scores, GENERAL, 70, seed=0)
    # The same cells, arm by arm from the last arm, each arm's cells in reverse and in one request.
    by_arm = [np.concatenate([r.examples for r in requests if r.arm == arm])[::-1] for arm in range(6)]
    replay = [Request(arm, examples) for arm, examples in reversed(list(enumerate(by_arm))) if examples.size]
    replayed, _, _, _ = drive(Replay(replay), scores, GENERAL, 6 * 40, seed=1)
    assert replayed.n_seen.tolist() == post.n_seen.tolist() and replayed.n_batches.tolist() != post.n_batches.tolist()

    # From the statistics, the numbers are the same bit for bit ...
    gathered = [posterior_from_statistics(p.score_sum, p.n_seen, 40, *GENERAL) for p in (post, replayed)]
    first, second = (certify(p, recommended) for p in gathered)
    assert first.as_dict() == second.as_dict()
    for name in ("arm_mean", "arm_lower", "arm_upper", "arm_prob_best", "arm_prob_eps_best"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))
    # ... and the drivers' own posteriors, updated batch by batch, agree to rounding.
    incremental = [certify(p, recommended) for p in (post, replayed)]
    for cert in incremental:
        np.testing.assert_allclose(cert.arm_mean, first.arm_mean, rtol=0, atol=1e-14)
        np.testing.assert_allclose(cert.arm_prob_eps_best, first.arm_prob_eps_best, rtol=0, atol=1.5 / DEFAULT_SAMPLES)


def beta_benchmark(rng, prior, n_arms, n_examples):
    """0/1 scores of arms whose means are drawn from the Beta with the prior's mean and variance."""
    mean, var = prior
    common = mean * (1 - mean) / var - 1
    theta = rng.beta(mean * common, (1 - mean) * common, n_arms)
    return (rng.random((n_arms, n_examples)) < theta[:, None]).astype(float)


def best_shares(row_means):
    """``[K]`` share of "being the best" of each arm: 1 for the best arm, split evenly among ties."""
    best = row_means == row_means.max()
    return best / best.sum()


def binned_calibration(stated, realised, edges=(0, 0.05, 0.2, 0.4, 0.6, 0.8, 0.95, 1.0)):
    """Per bin of the stated probability: (its mean, the realised share, the share's standard error)."""
    rows = []
    bins = np.clip(np.searchsorted(edges, stated, side="right") - 1, 0, len(edges) - 2)
    for b in range(len(edges) - 1):
        inside = bins == b
        if inside.sum() >= 50:
            p = stated[inside]
            rows.append((p.mean(), realised[inside].mean(), np.sqrt((p * (1 - p)).sum()) / inside.sum()))
    return rows


# Measured at this seed (300 runs of each policy, 10 arms, N = 200, 10 % of the cells, batch 4).
# Coverage of the recommended arm's 95 % interval, GittinsEval / UCB-E / uniform:
# general prior N(0.5, 0.04): 0.997 / 0.983 / 0.980; prior N(0.75, 0.01): 0.977 / 0.990 / 0.997.
# P(best) pooled over arms and policies, realised share minus stated probability per bin:
# general prior: -0.003 to +0.02 except +0.11 (3.4 SE) in the bin 0.6-0.8; prior 0.75 / 0.01:
# -0.02 below 0.2 and +0.06, +0.18, +0.18 in the bins 0.2-0.4, 0.4-0.6, 0.6-0.8.  The surrogate's
# cell variance 0.25 exceeds a 0/1 score's theta (1 - theta), so P(best) is conservative (pulled
# toward 1 / K), the more so away from 0.5.
SURROGATE_ALLOWANCE = 0.25
"""How far the realised share may lie from P(best), either way, beyond 3 standard errors."""
OVERCONFIDENCE_ALLOWANCE = 0.03
"""How far it may lie on the overconfident side: from the realised share away from 1 / K."""


@pytest.mark.parametrize("prior", [GENERAL, (0.75, 0.01)])
def test_calibration_on_benchmarks_drawn_from_the_prior(prior):
    rng = np.random.default_rng(0)
    n_runs, n_arms, n_examples = 300, 10, 200
    stated, realised = [], []
    for name, make in POLICIES.items():
        covered = 0
        for run in range(n_runs):
            scores = beta_benchmark(rng, prior, n_arms, n_examples)
            truth = scores.mean(axis=1)
            post, recommended, _, _ = drive(make(), scores, prior, 0.1 * scores.size, seed=run)
            cert = certify(post, recommended)
            covered += cert.lower <= truth[recommended] <= cert.upper
            stated.append(cert.arm_prob_best)
            realised.append(best_shares(truth))
        assert covered / n_runs >= 0.92, f"{name}: coverage {covered / n_runs:.3f}"
    for mean, share, error in binned_calibration(np.concatenate(stated), np.concatenate(realised)):
        slack = 3 * error + MC_BOUND
        assert abs(share - mean) <= slack + SURROGATE_ALLOWANCE, (mean, share)
        # Overconfident: further from the prior's P(best) = 1 / K than the realised share.
        overconfidence = mean - share if mean >= 1 / n_arms else share - mean
        assert overconfidence <= slack + OVERCONFIDENCE_ALLOWANCE, (mean, share)


def test_p_best_is_calibrated_when_the_surrogate_is_the_model():
    # Gaussian scores with the model's prior and cell variance: the probabilities are exact
    # posterior probabilities, so they are calibrated within the errors alone, for adaptive
    # policies too (measured: every bin within 1.7 standard errors at 1000 runs).
    rng = np.random.default_rng(2)
    n_runs, n_arms, n_examples = 200, 10, 200
    stated, realised = [], []
    for make in POLICIES.values():
        for run in range(n_runs):
            theta = rng.normal(GENERAL[0], np.sqrt(GENERAL[1]), n_arms)
            scores = theta[:, None] + rng.normal(0, 0.5, (n_arms, n_examples))
            post, recommended, _, _ = drive(make(), scores, GENERAL, 0.1 * scores.size, seed=run)
            stated.append(certify(post, recommended).arm_prob_best)
            realised.append(best_shares(scores.mean(axis=1)))
    for mean, share, error in binned_calibration(np.concatenate(stated), np.concatenate(realised)):
        assert abs(share - mean) <= 3.5 * error + MC_BOUND, (mean, share)


def test_summary_values():
    cert = certify(posterior_from_statistics([30, 22], [50, 40], 120, *GENERAL), 1, level=0.9, eps=0.02)
    values = json.loads(json.dumps(cert.as_dict()))
    assert values == cert.as_dict()
    assert set(values) == {
        "arm", "mean", "lower", "upper", "level", "prob_best", "prob_best_se",
        "prob_eps_best", "prob_eps_best_se", "eps", "n_samples", "model",
    }  # fmt: skip
    assert values["model"] == "gaussian"
    assert values["arm"] == 1 and values["eps"] == 0.02 and values["n_samples"] == DEFAULT_SAMPLES
    assert cert.format().startswith(f"{cert.mean:.3f} [{cert.lower:.3f}, {cert.upper:.3f}] 90%, P(best) ")
    assert json.dumps({"stopped_by": StopReason.CONFIDENCE}) == '{"stopped_by": "confidence"}'


def test_bad_arguments_are_refused():
    post = posterior_from_statistics([3, 2], [5, 4], 10, *GENERAL)
    with pytest.raises(ConfigError, match="level must be a number in"):
        certify(post, 0, level=1.0)
    with pytest.raises(ConfigError, match="eps must be non-negative"):
        certify(post, 0, eps=-0.01)
    with pytest.raises(ConfigError, match="n_samples must be a positive integer"):
        certify(post, 0, n_samples=0)
    for arm in (2, -1, True, 0.0):
        with pytest.raises(ValueError, match=r"the arm must be an integer in \[0, 2\)"):
            certify(post, arm)
    with pytest.raises(ConfigError, match="prob_eps_best must be a number in"):
        ConfidenceStop(prob_eps_best=1.0)
    with pytest.raises(ValueError, match="one length"):
        posterior_from_statistics([1, 2], [3], 10, *GENERAL)
    with pytest.raises(ValueError, match=r"n_seen must be integers in \[0, 10\]"):
        posterior_from_statistics([1, 2], [3, 11], 10, *GENERAL)
    with pytest.raises(ValueError, match="score_sum must lie in"):
        posterior_from_statistics([4, 2], [3, 3], 10, *GENERAL)
