"""The anytime confidence sequences of :mod:`gittinseval.core.confidence_sequences`: coverage by simulation on
adversarial finite populations sampled without replacement, the eps-best statement under an adaptive policy,
and the capital process against a direct product."""

import json
import math
import zlib

import numpy as np
import pytest

from gittinseval.core.anytime import AnytimeCertifier
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


def ucb_run(scores, certifier, batch, eps, rng):
    """One adaptive run: UCB on running means, random per-arm orders; returns (error, reached) where error is
    'some arm certified eps-best, or some arm's certified eps, that is false' at any batch."""
    n_arms, n = scores.shape
    orders = rng.permuted(np.broadcast_to(np.arange(n), scores.shape), axis=1)
    zbar = scores.mean(axis=1)
    best = zbar.max()
    seen = np.zeros(n_arms, dtype=int)
    sums = np.zeros(n_arms)
    error = reached = False
    while seen.sum() < scores.size:
        open_arms = np.flatnonzero(seen < n)
        if np.any(seen[open_arms] == 0):
            arm = open_arms[np.argmin(seen[open_arms])]
        else:
            index = sums[open_arms] / seen[open_arms] + np.sqrt(2 * np.log(seen.sum()) / seen[open_arms])
            arm = open_arms[np.argmax(index)]
        take = orders[arm, seen[arm] : seen[arm] + batch]
        certifier.update(arm, scores[arm, take])
        seen[arm] += take.size
        sums[arm] += scores[arm, take].sum()
        means = np.where(seen > 0, sums / np.maximum(seen, 1), -1.0)
        recommended = int(np.argmax(means))
        statement = certifier.statement(recommended, eps)
        reached |= statement.eps_best
        error |= statement.eps_best and zbar[recommended] < best - eps - 1e-12
        error |= zbar[recommended] < best - certifier.certified_eps(recommended) - 1e-12
        lower, upper = certifier.bounds()  # every arm's certified eps: max_{j != a} U_j - L_a
        top_two = np.sort(upper)[-2:]
        rival_upper = np.where(upper == top_two[1], top_two[0], top_two[1])
        error |= bool(np.any(zbar < best - np.maximum(rival_upper - lower, 0.0) - 1e-12))
    return error, reached


@pytest.mark.parametrize("name", ["bunched", "continuous"])
def test_eps_best_error_under_an_adaptive_policy(name):
    """Certified-but-not-eps-best at any batch of a UCB run, for the recommended or any arm: at most delta + 3 SE."""
    rng = np.random.default_rng(11 if name == "bunched" else 12)
    n = 96
    if name == "bunched":
        scores = np.stack([binary(n, mean, rng) for mean in (0.62, 0.6, 0.58, 0.3)])
    else:
        scores = np.stack([rng.beta(a, 2.0, n) for a in (6.0, 5.5, 5.0, 1.0)])
    delta, eps, reps = 0.2, 0.01, 200
    errors = reached = 0
    for _ in range(reps):
        certifier = AnytimeCertifier(scores.shape[0], n, delta, grid_size=GRID)
        error, hit = ucb_run(scores, certifier, batch=8, eps=eps, rng=rng)
        errors += error
        reached += hit
    assert errors / reps <= delta + 3 * math.sqrt(delta * (1 - delta) / reps)
    assert reached == reps, "every run reads all examples, so it must end certified"


def test_shrinks_to_the_exact_mean_and_certifies_the_true_best():
    rng = np.random.default_rng(3)
    scores = np.stack([rng.beta(4.0, 2.0, 60), binary(60, 0.5, rng), rng.uniform(size=60)])
    certifier = AnytimeCertifier(4, 60, 0.05)
    lower, upper = certifier.bounds()
    assert np.all(lower == 0) and np.all(upper == 1)
    widths = []
    for start in range(0, 60, 7):
        for arm in range(3):
            certifier.update(arm, scores[arm, start : start + 7])
        lower, upper = certifier.bounds()
        widths.append(upper[:3] - lower[:3])
        assert lower[3] == 0 and upper[3] == 1, "an unseen arm keeps [0, 1]"
    assert np.all(np.diff(np.array(widths), axis=0) <= 1e-12)
    zbar = scores.sum(axis=1) / 60
    np.testing.assert_allclose(lower[:3], zbar, atol=1e-12)
    np.testing.assert_allclose(upper[:3], zbar, atol=1e-12)
    assert list(certifier.n_seen) == [60, 60, 60, 0]
    certifier.update(3, np.zeros(60))
    best = int(np.argmax(zbar))
    assert certifier.statement(best).eps_best and certifier.certified_eps(best) == 0
    other = (best + 1) % 3
    assert certifier.certified_eps(other) == pytest.approx(zbar[best] - zbar[other], abs=1e-12)
    assert not certifier.reached(other, eps=0.5 * (zbar[best] - zbar[other]))
    assert certifier.reached(other, eps=zbar[best] - zbar[other] + 1e-9)


def test_running_intersection_never_widens_and_batches_do_not_matter():
    """Bounds after random batches never widen and equal the one-score-at-a-time sequence at the batch ends."""
    rng = np.random.default_rng(8)
    for x in (binary(500, 0.35, rng), rng.beta(0.7, 0.7, 500)):
        delta, n_arms = 0.05, 3
        lower_path, upper_path = confidence_sequence(x, x.size, delta / n_arms)
        certifier = AnytimeCertifier(n_arms, x.size, delta)
        done, last = 0, (0.0, 1.0)
        while done < x.size:
            size = int(rng.choice([1, 3, 8, 70, 150]))
            certifier.update(1, x[done : done + size])
            done = min(done + size, x.size)
            lower, upper = certifier.bounds()
            assert lower[1] >= last[0] - 1e-12 and upper[1] <= last[1] + 1e-12
            assert (lower[1], upper[1]) == pytest.approx((lower_path[done - 1], upper_path[done - 1]), abs=1e-12)
            last = (lower[1], upper[1])
        assert np.all(np.diff(lower_path) >= -1e-12) and np.all(np.diff(upper_path) <= 1e-12)


def test_statement_is_json_and_reads_the_rival():
    certifier = AnytimeCertifier(3, 40, 0.1)
    certifier.update(0, np.ones(30))
    certifier.update(1, np.zeros(30))
    statement = certifier.statement(0, eps=0.05)
    record = json.loads(json.dumps(statement.as_dict()))
    lower, upper = certifier.bounds()
    assert record["rival"] == 2 and record["rival_upper"] == 1.0, "the unseen arm 2 has U = 1"
    assert record["lower"] == lower[0] and record["upper"] == upper[0] == 1.0
    assert record["certified_eps"] == pytest.approx(1.0 - lower[0]) and record["eps_best"] is False
    assert {"eps", "delta", "n_seen", "arm"} <= set(record)
    certifier.update(2, np.zeros(30))
    assert certifier.reached(0, eps=0.0), "30 ones against 30 zeros out of 40 are decisive at delta = 0.1"
    single = AnytimeCertifier(1, 10, 0.1).statement(0, eps=0.0)
    assert single.rival is None and single.rival_upper is None and single.certified_eps == 0 and single.eps_best
    with pytest.raises(ValueError):
        lower[0] = 0.5


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.update(0, [0.5, 1.2]), r"outside \[0, 1\]"),
        (lambda c: c.update(0, [0.5, float("nan")]), "NaN"),
        (lambda c: c.update(0, [-0.1]), r"outside \[0, 1\]"),
        (lambda c: c.update(0, np.zeros((2, 2))), "1-D"),
        (lambda c: c.update(0, np.zeros(11)), "exceed its N = 10"),
        (lambda c: c.update(2, [0.5]), r"arm must be an integer in \[0, 2\)"),
        (lambda c: c.statement(0, eps=-0.1), "eps must be non-negative"),
        (lambda c: c.reached(0, eps=float("nan")), "eps must be non-negative"),
    ],
)
def test_bad_inputs_are_named(call, message):
    certifier = AnytimeCertifier(2, 10, 0.1)
    with pytest.raises(ValueError, match=message):
        call(certifier)
    certifier.update(1, np.zeros(10))
    with pytest.raises(ValueError, match="exceed"):
        certifier.update(1, [0.0])


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.5, 2.0, float("nan"), "x"])
def test_delta_must_be_in_the_open_unit_interval(delta):
    with pytest.raises(ValueError, match=r"delta must be a number in \(0, 1\)"):
        AnytimeCertifier(2, 10, delta)


def test_bad_sizes_are_named():
    with pytest.raises(ValueError, match="n_arms"):
        AnytimeCertifier(0, 10, 0.1)
    with pytest.raises(ValueError, match="n_examples"):
        AnytimeCertifier(2, 0, 0.1)
    with pytest.raises(ValueError, match="grid_size"):
        AnytimeCertifier(2, 10, 0.1, grid_size=1)
    with pytest.raises(ValueError, match="3 scores for a population of N = 2"):
        confidence_sequence([0.0, 1.0, 0.5], 2, 0.1)
