"""The crossed-random-effects prior of arms with attributes (gittinseval.core.certificate_models.attribute_prior):
recovery of its variance components, and the calibration of the certificate it gives on matrices drawn from it."""

import numpy as np
import pytest

from gittinseval.core.certificate_models import EmpiricalBayesModel
from gittinseval.core.certificate_models.attribute_prior import AttributePrior, has_shared_attributes
from gittinseval.core.observations import ObservedCells


def _crossed(n_models, n_templates, spreads, interaction, rng, mu=0.6):
    """Arm means ``mu + a_model + b_template + e`` of a model x template grid, with the drawn effects."""
    models = np.repeat(np.arange(n_models), n_templates)
    templates = np.tile(np.arange(n_templates), n_models)
    a = rng.normal(0, np.sqrt(spreads[0]), n_models)
    b = rng.normal(0, np.sqrt(spreads[1]), n_templates)
    e = rng.normal(0, np.sqrt(interaction), models.size)
    means = np.clip(mu + a[models] + b[templates] + e, 0.02, 0.98)
    return means, np.stack([models, templates], axis=1), (a, b, e)


def _observe(means, features, big_n, counts, rng):
    """0/1 scores of each arm (a row of ``N`` with its mean's share of ones) and the first ``counts[k]`` of a
    random order of each row."""
    observed = ObservedCells(means.size, big_n, binary=True, features=features)
    rows = np.zeros((means.size, big_n))
    for k, mean in enumerate(means):
        ones = int(round(mean * big_n))
        row = np.zeros(big_n)
        row[rng.choice(big_n, ones, replace=False)] = 1.0
        rows[k] = row
        if counts[k]:
            examples = rng.permutation(big_n)[: counts[k]]
            observed.add(k, examples, row[examples])
    return observed, rows.mean(axis=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_variance_components_are_recovered_on_a_model_by_template_grid(seed):
    rng = np.random.default_rng(seed)
    means, features, (a, b, e) = _crossed(15, 60, (0.01, 0.0016), 0.0004, rng)
    observed, _ = _observe(means, features, 1000, np.full(means.size, 200), rng)
    prior = AttributePrior(features)
    prior.fit(observed.score_sum, observed.n_seen, 1000, np.ones(means.size))
    # Against the realised spread of the drawn effects (15 model effects vary a lot around 0.01).
    assert prior.effect_variances[0] == pytest.approx(a.var(), rel=0.35)
    assert prior.effect_variances[1] == pytest.approx(b.var(), rel=0.35)
    assert prior.interaction == pytest.approx(e.var(), rel=0.5)
    # The prior means are close to the arms' means: far closer than the arms' own sample means.
    own = observed.score_sum / observed.n_seen
    assert np.mean((prior.mean - means) ** 2) < 0.5 * np.mean((own - means) ** 2)


def test_unseen_arms_learn_from_their_siblings():
    rng = np.random.default_rng(4)
    means, features, _ = _crossed(10, 30, (0.02, 0.001), 0.0002, rng)
    counts = np.where(rng.random(means.size) < 0.5, 100, 0)
    observed, _ = _observe(means, features, 500, counts, rng)
    prior = AttributePrior(features)
    prior.fit(observed.score_sum, observed.n_seen, 500, np.ones(means.size))
    unseen = counts == 0
    # An unseen arm's prior mean is its model's and template's, not the population mean.
    assert np.sqrt(np.mean((prior.mean[unseen] - means[unseen]) ** 2)) < 0.3 * means.std()


def test_exchangeable_arms_have_no_shared_attributes():
    assert not has_shared_attributes(None)
    assert not has_shared_attributes(np.arange(6)[:, None])
    assert has_shared_attributes(np.array([[0, 0], [0, 1], [1, 2]]))


def test_the_certificate_is_calibrated_on_grids_drawn_from_its_own_model():
    # Simulation-based calibration: matrices drawn from the crossed model; each arm seen on a random share of its
    # examples.  The 90 % intervals of all arms cover their full-benchmark means about 90 % of the time, and the
    # stated P(best) of the arm with the largest posterior mean matches how often it is the best.
    rng = np.random.default_rng(11)
    covered, total, stated, happened = 0, 0, [], []
    for _ in range(30):
        means, features, _ = _crossed(8, 20, (0.004, 0.0009), 0.0004, rng)
        counts = rng.integers(0, 60, means.size)
        observed, full = _observe(means, features, 300, counts, rng)
        model = EmpiricalBayesModel()
        leader = int(np.argmax(model.moments(observed)[0]))
        certificate = model.certify(observed, leader, level=0.9)
        inside = (certificate.arm_lower <= full + 1e-12) & (full <= certificate.arm_upper + 1e-12)
        covered += int(inside.sum())
        total += full.size
        stated.append(certificate.prob_best)
        happened.append(full[leader] >= full.max() - 1e-12)
    assert covered / total == pytest.approx(0.9, abs=0.04)
    # 30 draws: the mean stated P(best) within 3 standard errors of the share that came true.
    share = np.mean(happened)
    assert abs(np.mean(stated) - share) < 3 * np.sqrt(0.25 / 30)
