"""The anytime confidence sequences of :mod:`gittinseval.core.confidence_sequences`: coverage by simulation on
adversarial finite populations sampled without replacement, and the capital process against a direct product.
The eps-best statement they make together (:mod:`gittinseval.core.anytime`) is tested in test_anytime.py."""

import math
import zlib

import numpy as np
import pytest

from gittinseval.core.confidence_sequences import BET_CLIP, ArmSequence, confidence_sequence

GRID = 201
"""A coarse grid keeps the simulations fast; coverage holds for every grid size (the grid rounds outward)."""


def binary(n, mean, rng):
    """``[n]`` 0/1 scores with exactly ``round(n * mean)`` ones."""
    ones = int(round(n * mean))
    return rng.permutation(np.r_[np.ones(ones), np.zeros(n - ones)])


def populations():
    """Benchmarks ``[K, N]`` that stress the sequences: equal arms, a far leader, a bunched top, means near 0,
    1/2 and 1, continuous scores, and a two-point population against a constant one of the same mean."""
    rng = np.random.default_rng(2024)
    return {
        "all_equal": np.stack([binary(100, 0.5, rng) for _ in range(3)]),
        "one_far_ahead": np.stack([binary(120, 0.95, rng), binary(120, 0.3, rng), binary(120, 0.3, rng)]),
        "bunched_top": np.stack([binary(257, mean, rng) for mean in (0.71, 0.70, 0.69, 0.2)]),
        "near_zero_and_one": np.stack([binary(50, 0.02, rng), binary(50, 0.98, rng), binary(50, 0.0, rng)]),
        "beta": np.stack([rng.beta(0.5, 0.5, 150), rng.beta(5.0, 2.0, 150), rng.beta(1.0, 9.0, 150)]),
        "two_point_vs_constant": np.stack([binary(80, 0.5, rng), np.full(80, 0.5)]),
        "large_n": np.stack([binary(800, 0.8, rng), rng.beta(2.0, 2.0, 800)]),
    }


REPLICATIONS = {"large_n": 120}
"""Fewer replications for the long populations; the others use 300."""


@pytest.mark.parametrize("name", list(populations()))
def test_per_arm_time_uniform_coverage(name):
    """Each arm's sequence excludes its mean at SOME sample count in at most alpha + 3 SE of the runs, and its
    bounds always lie in the sure range F_t, are ordered, end at the exact mean, and are nested unless they miss."""
    scores = populations()[name]
    n_arms, n = scores.shape
    alpha = 0.1
    reps = REPLICATIONS.get(name, 300)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    misses = np.zeros(n_arms, dtype=int)
    for _ in range(reps):
        for arm in range(n_arms):
            x = rng.permutation(scores[arm])
            zbar = scores[arm].sum() / n
            lower, upper = confidence_sequence(x, n, alpha, grid_size=GRID)
            sums = np.cumsum(x)
            counts = np.arange(1, n + 1)
            assert np.all(lower >= sums / n - 1e-12) and np.all(upper <= (sums + n - counts) / n + 1e-12)
            assert np.all(lower <= upper)
            assert lower[-1] == pytest.approx(zbar, abs=1e-12) and upper[-1] == pytest.approx(zbar, abs=1e-12)
            missed = bool(np.any(lower > zbar + 1e-12) or np.any(upper < zbar - 1e-12))
            # Nested while they cover (after a miss the sure range must pull them back to Zbar at n = N).
            assert missed or (np.all(np.diff(lower) >= -1e-12) and np.all(np.diff(upper) <= 1e-12))
            misses[arm] += missed
    bound = alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps)
    assert np.all(misses / reps <= bound), f"{name}: miss rates {misses / reps} above {bound:.3f}"


def brute_force(x, n_examples, alpha, m):
    """``[(K^+_t(m), K^-_t(m))]`` for ``t = 1..n`` by direct products, stopping when ``m`` leaves the sure range."""
    capital_plus = capital_minus = 1.0
    total, var_sum = 0.0, 0.25
    out = []
    for t, score in enumerate(x, start=1):
        bet = math.sqrt(2 * math.log(2 / alpha) / (var_sum / t * t * math.log(1 + t)))
        mu = (n_examples * m - total) / (n_examples - t + 1)
        if not -1e-12 <= mu <= 1 + 1e-12:
            break
        bet_plus = min(bet, BET_CLIP / mu) if mu > 0 else bet
        bet_minus = min(bet, BET_CLIP / (1 - mu)) if mu < 1 else bet
        capital_plus *= 1 + bet_plus * (score - mu)
        capital_minus *= 1 - bet_minus * (score - mu)
        out.append((capital_plus, capital_minus))
        total += score
        var_sum += (score - (0.5 + total) / (t + 1)) ** 2
    return out


@pytest.mark.parametrize(
    "x",
    [
        np.array([1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1], dtype=float),
        np.array([0.9, 0.05, 0.7, 0.33, 1.0, 0.0, 0.62, 0.81, 0.12, 0.5, 0.95, 0.27, 0.4, 0.73]),
    ],
)
def test_capital_and_bounds_match_a_direct_product(x):
    """On a tiny population the log-capitals on the live window equal the logs of the direct products, and the
    bounds are the extreme grid points rejected so far, clipped to the sure range."""
    n, alpha, grid_size = x.size, 0.3, 101
    grid = np.arange(grid_size) / (grid_size - 1)
    brute = [brute_force(x, n, alpha, m) for m in grid]
    threshold = 2 / alpha
    lower, upper = confidence_sequence(x, n, alpha, grid_size=grid_size)
    state = ArmSequence(grid_size)
    informative = False
    for t in range(1, n + 1):
        state.advance(x[t - 1 : t], n, alpha, grid)
        live = grid[state.start : state.stop]
        expected = np.array([brute[i][t - 1] for i in range(state.start, state.stop)]).reshape(-1, 2)
        np.testing.assert_allclose(state.log_plus, np.log(expected[:, 0]), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(state.log_minus, np.log(expected[:, 1]), rtol=1e-10, atol=1e-12)
        assert live.size == state.log_plus.size
        rejected_below = [g for g, path in zip(grid, brute, strict=True) if any(k[0] >= threshold for k in path[:t])]
        rejected_above = [g for g, path in zip(grid, brute, strict=True) if any(k[1] >= threshold for k in path[:t])]
        f_low, f_high = x[:t].sum() / n, (x[:t].sum() + n - t) / n
        want_lower = min(max([f_low, *rejected_below]), f_high)
        want_upper = max(min([f_high, *rejected_above]), f_low)
        assert lower[t - 1] == pytest.approx(want_lower, abs=1e-12)
        assert upper[t - 1] == pytest.approx(want_upper, abs=1e-12)
        assert state.interval(n, grid) == pytest.approx((lower[t - 1], upper[t - 1]), abs=1e-12)
        informative |= want_lower > f_low + 1e-9 or want_upper < f_high - 1e-9
    assert informative, "the betting processes never rejected a feasible value: the check would be vacuous"


def test_the_grid_rounds_outward():
    """A coarse grid's bounds contain a refined grid's (which shares its points), and are within one coarse step."""
    rng = np.random.default_rng(5)
    for x in (binary(400, 0.73, rng), rng.beta(3.0, 1.5, 300)):
        coarse = confidence_sequence(x, x.size, 0.01, grid_size=51)
        fine = confidence_sequence(x, x.size, 0.01, grid_size=2001)
        assert np.all(coarse[0] <= fine[0] + 1e-12) and np.all(coarse[1] >= fine[1] - 1e-12)
        assert np.all(fine[0] - coarse[0] <= 1 / 50 + 1e-12) and np.all(coarse[1] - fine[1] <= 1 / 50 + 1e-12)
        assert np.any(fine[0] > coarse[0] + 1e-6), "the refinement never helped: the check would be vacuous"


def test_more_scores_than_the_population_are_named():
    with pytest.raises(ValueError, match="3 scores for a population of N = 2"):
        confidence_sequence([0.0, 1.0, 0.5], 2, 0.1)
