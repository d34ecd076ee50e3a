"""The lattice posterior of an arm's full-benchmark mean (gittinseval.core.certificate_models.lattice): the
finite-population remainder and the win probabilities against enumeration of every completion and Monte Carlo,
and its calibration on matrices drawn from its prior."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import beta as beta_distribution

from gittinseval.core.certificate_models import Lattice, RowData, central_interval, win_probabilities
from gittinseval.core.certificate_models.lattice import eps_steps


def _lattice_prior(size: int, a: float, b: float) -> np.ndarray:
    """``[size]`` probabilities of a Beta(a, b) binned on the lattice ``i / (size - 1)``."""
    edges = np.r_[0.0, (np.arange(size - 1) + 0.5) / (size - 1), 1.0]
    return np.diff(beta_distribution.cdf(edges, a, b))


def _rows(score_sum, n_seen, dispersion=None) -> RowData:
    score_sum = np.asarray(score_sum, dtype=np.float64)
    dispersion = np.ones(score_sum.size) if dispersion is None else np.asarray(dispersion, dtype=np.float64)
    return RowData(score_sum, np.asarray(n_seen, dtype=np.int64), dispersion)


def test_hypergeometric_posterior_matches_enumeration_of_all_completions():
    """The lattice posterior of ``Y = N Zbar`` equals brute force over every completion of the unseen cells."""
    big_n = 6
    prior = np.array([0.05, 0.1, 0.3, 0.2, 0.15, 0.12, 0.08])  # g(Y), Y = 0..6
    seen = {1: 1.0, 4: 0.0, 5: 1.0}  # example -> score
    brute = np.zeros(big_n + 1)
    for cells in itertools.product((0, 1), repeat=big_n):
        if all(cells[j] == value for j, value in seen.items()):
            total = sum(cells)
            # Exchangeable: every arrangement of Y ones is equally likely under the prior.
            brute[total] += prior[total] / math.comb(big_n, total)
    brute /= brute.sum()
    lattice = Lattice(big_n, binary=True)
    log_lik = lattice.log_likelihood(_rows([2.0], [3]))
    post = lattice.posterior(log_lik, np.log(prior))[0]
    np.testing.assert_allclose(post, brute, rtol=0, atol=1e-12)
    assert post[:2].sum() == 0 and post[-1] == 0  # Y >= R = 2 and Y <= R + m = 5


def test_win_probabilities_match_enumeration_of_joint_completions():
    """P(best) and P(eps-best) of three arms on a tiny benchmark, by enumerating every joint completion."""
    big_n = 5
    prior = np.array([0.1, 0.15, 0.2, 0.25, 0.2, 0.1])
    observed = [{0: 1.0, 2: 1.0}, {1: 0.0}, {0: 1.0, 3: 0.0, 4: 1.0}]  # one dict of seen cells per arm
    eps = 0.2  # one lattice step

    def completions(seen):
        out = []
        for cells in itertools.product((0, 1), repeat=big_n):
            if all(cells[j] == value for j, value in seen.items()):
                total = sum(cells)
                out.append((total, prior[total] / math.comb(big_n, total)))
        return out

    per_arm = [completions(seen) for seen in observed]
    best = np.zeros(3)
    near = np.zeros(3)
    mass = 0.0
    for combo in itertools.product(*per_arm):
        weight = np.prod([w for _, w in combo])
        totals = np.array([t for t, _ in combo])
        mass += weight
        best += weight * (totals >= totals.max())
        near += weight * (totals >= totals.max() - eps * big_n - 1e-9)
    best /= mass
    near /= mass
    lattice = Lattice(big_n, binary=True)
    data = _rows([2.0, 0.0, 2.0], [2, 1, 3])
    post = lattice.posterior(lattice.log_likelihood(data), np.log(prior))
    prob_best, prob_near = win_probabilities(post, np.ones(3), eps_steps(lattice, eps), binary=True)
    np.testing.assert_allclose(prob_best, best, atol=1e-12)
    np.testing.assert_allclose(prob_near, near, atol=1e-12)


def test_shared_rows_equal_separate_rows():
    """Arms with the same data may share a row (count c): the products are unchanged."""
    rng = np.random.default_rng(3)
    lattice = Lattice(30, binary=True)
    data = _rows([10.0, 20.0, 20.0, 5.0, 20.0], [15, 25, 25, 8, 25])
    post = lattice.posterior(lattice.log_likelihood(data), np.log(rng.dirichlet(np.ones(31))))
    separate = win_probabilities(post, np.ones(5), 1.0, binary=True)
    shared = win_probabilities(post[[0, 1, 3]], np.array([1.0, 3.0, 1.0]), 1.0, binary=True)
    np.testing.assert_allclose(shared[0], separate[0][[0, 1, 3]], atol=1e-12)
    np.testing.assert_allclose(shared[1], separate[1][[0, 1, 3]], atol=1e-12)


@pytest.mark.parametrize("binary", [True, False])
def test_win_probabilities_agree_with_monte_carlo_of_the_same_posterior(binary):
    rng = np.random.default_rng(11 if binary else 12)
    n_arms, n_draws, eps = 25, 200_000, 0.01
    lattice = Lattice(200, binary=binary, continuous_points=401)
    means = rng.uniform(0.55, 0.8, n_arms)
    counts = rng.integers(5, 120, n_arms)
    scores = rng.binomial(counts, means).astype(np.float64)
    data = _rows(scores, counts, np.full(n_arms, 0.6))
    post = lattice.posterior(lattice.log_likelihood(data), np.zeros(lattice.size))
    prob_best, prob_near = win_probabilities(post, np.ones(n_arms), eps_steps(lattice, eps), binary)
    cdf = np.cumsum(post, axis=1)
    cdf[:, -1] = 1.0
    draws = np.empty((n_arms, n_draws))
    for arm in range(n_arms):
        cells = np.searchsorted(cdf[arm], rng.random(n_draws), side="right")
        draws[arm] = lattice.points[cells]
    if not binary:  # the mass of a cell is spread uniformly over it
        draws += (rng.random(draws.shape) - 0.5) * lattice.step
    top = draws.max(axis=0)
    step_eps = eps_steps(lattice, eps) * lattice.step
    mc_best = np.mean(draws >= top - 1e-12, axis=1)
    mc_near = np.mean(draws >= top - step_eps - 1e-12, axis=1)
    assert prob_best.max() > 0.05 and 0.2 < prob_near.max() < 0.999  # a contest, not a foregone conclusion
    for exact, mc in ((prob_best, mc_best), (prob_near, mc_near)):
        se = np.sqrt(np.maximum(mc * (1 - mc), 1e-4) / n_draws)
        bias = 0.0 if binary else 0.003  # continuous: the mid-cell CDF and its linear interpolation
        assert np.all(np.abs(exact - mc) <= 4.5 * se + bias), np.max(np.abs(exact - mc) / se)


def test_lattice_posterior_is_calibrated_on_matrices_drawn_from_its_prior():
    """With the true prior, interval coverage and P(best) match their frequencies within Monte Carlo error."""
    rng = np.random.default_rng(2024)
    big_n, n_arms, reps = 60, 12, 400
    prior = _lattice_prior(big_n + 1, 6.0, 2.0)
    lattice = Lattice(big_n, binary=True)
    covered, stated_cover, best_gap, best_pairs = [], [], [], []
    for _ in range(reps):
        totals = rng.choice(big_n + 1, size=n_arms, p=prior)
        counts = rng.integers(0, big_n + 1, n_arms)
        ones = rng.hypergeometric(totals, big_n - totals, np.maximum(counts, 0)) * (counts > 0)
        post = lattice.posterior(lattice.log_likelihood(_rows(ones, counts)), np.log(prior))
        lower, upper = central_interval(post, lattice.points, 0.95)
        truth = totals / big_n
        covered.append((truth >= lower - 1e-12) & (truth <= upper + 1e-12))
        inside = (lattice.points[None, :] >= lower[:, None] - 1e-12) & (
            lattice.points[None, :] <= upper[:, None] + 1e-12
        )
        stated_cover.append(np.sum(post * inside, axis=1))
        prob_best, _ = win_probabilities(post, np.ones(n_arms), 0.0, binary=True)
        is_best = truth >= truth.max()
        best_gap.append(np.sum(is_best - prob_best))
        best_pairs.append(np.c_[prob_best, is_best])
    covered, stated_cover = np.concatenate(covered), np.concatenate(stated_cover)
    # Bayesian calibration: P(truth in interval) = E[posterior mass of the interval] (>= 0.95 on a lattice).
    se = math.sqrt(0.05 * 0.95 / covered.size)
    assert abs(covered.mean() - stated_cover.mean()) <= 4 * se
    assert stated_cover.mean() >= 0.95
    # P(best) of every arm: the per-replication sums of (indicator - stated) have mean 0.
    best_gap = np.asarray(best_gap)
    assert abs(best_gap.mean()) <= 4 * best_gap.std(ddof=1) / math.sqrt(reps)
    # Reliability by bins of the stated P(best).
    pairs = np.concatenate(best_pairs)
    for low, high in ((0.0, 0.1), (0.1, 0.4), (0.4, 0.7), (0.7, 1.01)):
        chosen = pairs[(pairs[:, 0] >= low) & (pairs[:, 0] < high)]
        assert chosen.shape[0] >= 30
        stated, happened = chosen[:, 0].mean(), chosen[:, 1].mean()
        assert abs(stated - happened) <= 4 * math.sqrt(max(stated * (1 - stated), 0.01) / chosen.shape[0]) + 0.01
