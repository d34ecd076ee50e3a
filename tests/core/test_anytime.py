"""The anytime-valid eps-best statement (gittinseval.core.anytime): per-arm confidence sequences joined by a union
bound, under an adaptive policy, against the sequences themselves and the exact means of finished arms."""

import json
import math

import numpy as np
import pytest

from gittinseval.core.anytime import AnytimeCertifier
from gittinseval.core.confidence_sequences import confidence_sequence
from tests.core.test_confidence_sequences import GRID, binary


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


def test_offsets_shift_the_statements_but_not_the_bounds():
    """With known amounts b_k the statements are about Zbar_k + b_k: every interval moves by its arm's b_k."""
    offsets = np.array([0.0, 0.3, -0.2])
    shifted, plain = AnytimeCertifier(3, 40, 0.1, offsets=offsets), AnytimeCertifier(3, 40, 0.1)
    rng = np.random.default_rng(9)
    for arm, ones in ((0, 0.8), (1, 0.45), (2, 0.9)):
        scores = binary(24, ones, rng)
        shifted.update(arm, scores)
        plain.update(arm, scores)
    lower, upper = shifted.bounds()
    np.testing.assert_array_equal(lower, plain.bounds()[0])
    np.testing.assert_array_equal(upper, plain.bounds()[1])
    for arm in range(3):
        statement = shifted.statement(arm, eps=0.05)
        others = [j for j in range(3) if j != arm]
        rival = max(others, key=lambda j: upper[j] + offsets[j])
        assert statement.lower == pytest.approx(lower[arm] + offsets[arm], abs=1e-15)
        assert statement.upper == pytest.approx(upper[arm] + offsets[arm], abs=1e-15)
        assert (statement.rival, statement.rival_upper) == (rival, pytest.approx(upper[rival] + offsets[rival]))
        certified = max(0.0, upper[rival] + offsets[rival] - lower[arm] - offsets[arm])
        assert statement.certified_eps == pytest.approx(certified, abs=1e-12)
        assert shifted.certified_eps(arm) == pytest.approx(certified, abs=1e-12)
        assert statement.eps_best == (certified <= 0.05)
    with pytest.raises(ValueError, match="offsets must be 3 finite numbers"):
        AnytimeCertifier(3, 40, 0.1, offsets=[0.0, np.nan, 1.0])


def test_a_repeated_statement_is_reused_until_the_next_update():
    certifier = AnytimeCertifier(2, 50, 0.1)
    certifier.update(0, np.ones(10))
    first = certifier.statement(0, 0.01)
    assert certifier.statement(0, 0.01) is first
    # Another eps or arm is a new statement; an update of any arm makes the old one stale.
    assert certifier.statement(0, 0.02).eps == 0.02
    assert certifier.statement(1, 0.01).arm == 1
    certifier.update(1, np.zeros(10))
    after = certifier.statement(0, 0.01)
    assert after.rival_upper < first.rival_upper
    fresh = AnytimeCertifier(2, 50, 0.1)
    fresh.update(0, np.ones(10))
    fresh.update(1, np.zeros(10))
    assert fresh.statement(0, 0.01) == after
