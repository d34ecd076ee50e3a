"""The empirical-Bayes certificate model (gittinseval.core.certificate_models.model): calibrated on matrices drawn
from a smooth prior, its certificate's arrays, the cheap paths of its stop check against the exact sum, and its
input checks.  Its pieces: test_lattice.py, test_spline_prior.py, test_attribute_prior.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gittinseval.core.certificate import Certificate
from gittinseval.core.certificate_models import (
    EmpiricalBayesModel,
)
from gittinseval.core.observations import ObservedCells


def _observed_from_matrix(matrix: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> ObservedCells:
    """The first ``counts[k]`` examples of a uniformly random order of each arm of ``matrix``."""
    n_arms, n_examples = matrix.shape
    observed = ObservedCells(n_arms, n_examples, binary=bool(np.all((matrix == 0) | (matrix == 1))))
    for arm in range(n_arms):
        if counts[arm]:
            examples = rng.permutation(n_examples)[: counts[arm]]
            observed.add(arm, examples, matrix[arm, examples])
    return observed


# ----------------------------------------------------------------------------- simulation-based calibration


def test_empirical_bayes_model_is_calibrated_on_matrices_drawn_from_a_smooth_prior():
    """The full model (prior learned from each run) on 0/1 matrices whose arm means come from a smooth prior."""
    rng = np.random.default_rng(7)
    big_n, n_arms, reps = 100, 40, 60
    covered, stated_best, is_best = [], [], []
    for _ in range(reps):
        means = rng.beta(8.0, 3.0, n_arms)
        matrix = (rng.random((n_arms, big_n)) < means[:, None]).astype(np.float64)
        observed = _observed_from_matrix(matrix, rng.choice([8, 16, 32, 64], n_arms), rng)
        model = EmpiricalBayesModel()
        arm = model.recommend(observed)
        certificate = model.certify(observed, arm)
        truth = matrix.mean(axis=1)
        covered.append((truth >= certificate.arm_lower - 1e-12) & (truth <= certificate.arm_upper + 1e-12))
        stated_best.append(certificate.prob_best)
        is_best.append(truth[arm] >= truth.max())
    coverage = np.concatenate(covered).mean()
    assert 0.93 <= coverage <= 0.985, coverage
    stated, happened = np.mean(stated_best), np.mean(is_best)
    assert abs(stated - happened) <= 4 * math.sqrt(0.25 / reps), (stated, happened)


# ----------------------------------------------------------------------------- the model's API


def _small_run(binary: bool, seed: int = 0) -> tuple[ObservedCells, np.ndarray]:
    rng = np.random.default_rng(seed)
    n_arms, big_n = 15, 80
    means = rng.uniform(0.3, 0.9, n_arms)
    if binary:
        matrix = (rng.random((n_arms, big_n)) < means[:, None]).astype(np.float64)
    else:
        matrix = np.clip(means[:, None] + 0.2 * rng.standard_normal((n_arms, big_n)), 0.0, 1.0)
    counts = rng.integers(0, 40, n_arms)
    counts[3] = big_n  # a completed arm
    counts[4] = 0  # an unseen arm
    return _observed_from_matrix(matrix, counts, rng), matrix


@pytest.mark.parametrize("binary", [True, False])
def test_certificate_arrays_are_consistent(binary):
    observed, matrix = _small_run(binary)
    model = EmpiricalBayesModel()
    arm = model.recommend(observed)
    certificate = model.certify(observed, arm, level=0.9, eps=0.02)
    assert isinstance(certificate, Certificate) and certificate.model == "eb"
    # Exact lattice sums: no Monte Carlo error.
    assert certificate.n_samples is None and certificate.prob_best_se == 0.0
    assert certificate.as_dict()["model"] == "eb"
    assert certificate.arm == arm and certificate.level == 0.9 and certificate.eps == 0.02
    for name in ("arm_mean", "arm_lower", "arm_upper", "arm_prob_best", "arm_prob_eps_best"):
        values = getattr(certificate, name)
        assert values.shape == (observed.n_arms,) and not values.flags.writeable
    assert np.all(certificate.arm_lower <= certificate.arm_mean + 1e-12)
    assert np.all(certificate.arm_mean <= certificate.arm_upper + 1e-12)
    assert np.all(certificate.arm_prob_best <= certificate.arm_prob_eps_best + 1e-12)
    # The completed arm is known exactly.
    known = matrix[3].mean()
    assert certificate.arm_lower[3] == pytest.approx(known) and certificate.arm_upper[3] == pytest.approx(known)
    assert certificate.arm_mean[3] == pytest.approx(known)
    # Every interval lies in the range the arm's mean can take.
    big_n = observed.n_examples
    assert np.all(certificate.arm_lower >= observed.score_sum / big_n - 1e-12)
    assert np.all(certificate.arm_upper <= (observed.score_sum + big_n - observed.n_seen) / big_n + 1e-12)
    # prob_eps_best is the certificate's number; recommend is the argmax of mean - kappa sd.
    for other in (arm, 0, 4):
        assert model.prob_eps_best(observed, other, 0.02) == pytest.approx(certificate.arm_prob_eps_best[other])
    mean, sd = model.moments(observed)
    assert model.recommend(observed, kappa=2.0) == int(np.argmax(mean - 2.0 * sd))
    assert model.recommend(observed, kappa=0.0) == int(np.argmax(mean))
    assert certificate.as_dict()["prob_eps_best"] == certificate.prob_eps_best


def test_prob_eps_best_bounds_settle_decided_checks():
    observed = ObservedCells(3, 10, binary=True)
    for arm, ones in ((0, 10), (1, 2), (2, 1)):
        observed.add(arm, np.arange(10), (np.arange(10) < ones).astype(float))
    model = EmpiricalBayesModel()
    assert model.prob_eps_best(observed, 0, 0.0) == 1.0
    assert model.prob_eps_best(observed, 2, 0.05) == 0.0
    assert model.prob_eps_best(observed, 1, 0.85) == 1.0  # 1.0 - 0.2 <= eps
    assert model.prob_eps_best(observed, 1, 0.1) == 0.0


def test_refit_schedule_holds_the_prior_between_refits():
    rng = np.random.default_rng(5)
    matrix = (rng.random((15, 80)) < rng.uniform(0.3, 0.9, 15)[:, None]).astype(np.float64)
    observed = _observed_from_matrix(matrix, np.full(15, 16), rng)
    model = EmpiricalBayesModel(refit_growth=0.5)
    assert model.log_prior is None
    first = model.fit(observed)
    assert np.isclose(np.exp(first).sum(), 1.0)
    observed.add(0, np.flatnonzero(~observed.seen[0])[:8], np.ones(8))  # 3 % more cells: held
    model.certify(observed, 0)
    np.testing.assert_array_equal(model.log_prior, first)
    for arm in range(15):  # 50 % more cells: refitted
        observed.add(arm, np.flatnonzero(~observed.seen[arm])[:8], np.ones(8))
    model.certify(observed, 0)
    assert not np.array_equal(model.log_prior, first)


# ----------------------------------------------------------------------------- input validation


def test_input_validation():
    observed, _ = _small_run(True)
    model = EmpiricalBayesModel()
    with pytest.raises(TypeError, match="ObservedCells"):
        model.certify({"score_sum": [1.0]}, 0)
    for arm in (-1, observed.n_arms, 1.5, True):
        with pytest.raises(ValueError, match="arm"):
            model.certify(observed, arm)
        with pytest.raises(ValueError, match="arm"):
            model.prob_eps_best(observed, arm)
    for level in (0.0, 1.0, float("nan"), "high"):
        with pytest.raises(ValueError, match="level"):
            model.certify(observed, 0, level=level)
    with pytest.raises(ValueError, match="eps"):
        model.certify(observed, 0, eps=-0.01)
    with pytest.raises(ValueError, match="kappa"):
        model.recommend(observed, kappa=-1.0)
    with pytest.raises(ValueError, match="knots"):
        EmpiricalBayesModel(knots=1)
    with pytest.raises(ValueError, match="penalty"):
        EmpiricalBayesModel(penalty=-1.0)
    with pytest.raises(ValueError, match="continuous_points"):
        EmpiricalBayesModel(continuous_points=2)


@pytest.mark.parametrize("binary", [True, False])
def test_the_ceiling_against_every_rival_is_the_exact_probability(binary):
    # With fewer arms than CEILING_RIVALS + 1 the ceiling's rivals are all the other arms: it is then P itself.
    observed, _ = _small_run(binary, seed=3)
    model = EmpiricalBayesModel()
    model.fit(observed)
    for arm in range(observed.n_arms):
        for eps in (0.0, 0.01, 0.05):
            exact = model.prob_eps_best(observed, arm, eps)
            assert model._ceiling(observed, arm, eps) == pytest.approx(exact, abs=1e-9)


def _growing_run(n_arms: int, big_n: int, batches: int, seed: int) -> tuple[np.ndarray, list[tuple[int, np.ndarray]]]:
    """A 0/1 matrix and a sequence of batches of 4 cells that favours the arms with the best running means."""
    rng = np.random.default_rng(seed)
    # One clear leader, two near it, the rest well behind: the check's answer changes during the run.
    means = np.concatenate([[0.95, 0.9, 0.85], rng.uniform(0.3, 0.7, n_arms - 3)])
    matrix = (rng.random((n_arms, big_n)) < means[:, None]).astype(np.float64)
    orders = [list(rng.permutation(big_n)) for _ in range(n_arms)]
    plan = []
    for step in range(batches):
        arm = int(rng.integers(0, 3)) if step % 3 else int(rng.integers(0, n_arms))
        if len(orders[arm]) < 4:
            continue
        examples = np.array([orders[arm].pop() for _ in range(4)])
        plan.append((arm, examples))
    return matrix, plan


def test_the_stop_check_decides_as_the_exact_probability_batch_by_batch():
    # The cheap paths (range bounds, cached ceiling against 32 rivals) must give the decision of the exact sum
    # at every batch of a run, two models following the same run (same refit schedule).
    n_arms, big_n = 80, 60
    matrix, plan = _growing_run(n_arms, big_n, 600, seed=5)
    observed = ObservedCells(n_arms, big_n, binary=True)
    fast, exact = EmpiricalBayesModel(), EmpiricalBayesModel()
    decisions = []
    for arm, examples in plan:
        observed.add(arm, examples, matrix[arm, examples])
        means = observed.score_sum / np.maximum(observed.n_seen, 1)
        recommended = int(np.argmax(np.where(observed.n_seen > 0, means - 1 / np.sqrt(observed.n_seen + 1), -1)))
        for threshold in (0.5, 0.95):
            probability = exact.prob_eps_best(observed, recommended, 0.01)
            reached = fast.eps_best_reached(observed, recommended, 0.01, threshold)
            assert reached == (probability >= threshold), (len(decisions), threshold, probability)
            decisions.append(reached)
    # Both answers occur, so the check is not trivially one-sided.
    assert any(decisions) and not all(decisions)
