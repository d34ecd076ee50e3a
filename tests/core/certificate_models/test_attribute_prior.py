"""The crossed-random-effects prior of arms with attributes (gittinseval.core.certificate_models.attribute_prior):
recovery of its variance components, and the calibration of the certificate it gives on matrices drawn from it."""

import numpy as np
import pytest

from gittinseval.core.certificate_models import EmpiricalBayesModel
from gittinseval.core.certificate_models.attribute_prior import AttributePrior, _CrossedEffectsEM, has_shared_attributes
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


def _small_problem(rng, n_models=4, n_templates=6):
    means, features, _ = _crossed(n_models, n_templates, (0.01, 0.002), 0.001, rng)
    counts = rng.integers(0, 40, means.size)
    counts[:3] = np.maximum(counts[:3], 1)
    observed, _ = _observe(means, features, 200, counts, rng)
    return observed, features


def _em_of(prior, observed):
    """The EM map of ``prior``'s fit on the observed arms of ``observed`` (``N = 200``), and their counts."""
    seen = observed.n_seen > 0
    counts = observed.n_seen[seen].astype(float)
    factor = (200 - counts) / (199 * counts)
    em = _CrossedEffectsEM(
        prior.columns[seen], observed.score_sum[seen] / counts, factor, prior.n_levels, prior.column_order
    )
    return em, seen, counts


def test_the_mixed_model_equations_match_a_dense_generalised_least_squares_solve():
    rng = np.random.default_rng(5)
    observed, features = _small_problem(rng)
    prior = AttributePrior(features)
    em, seen, counts = _em_of(prior, observed)
    factor = (200 - counts) / (199 * counts)
    state = np.concatenate([np.log([0.02, 0.003, 0.001]), rng.uniform(0.3, 0.8, counts.size)])
    theta, covariance = em.solution(state)
    # The design written out: an intercept column, then one indicator column per model and per template.
    design = np.zeros((counts.size, em.size))
    design[:, 0] = 1.0
    design[np.arange(counts.size), 1 + features[seen, 0]] = 1.0
    design[np.arange(counts.size), 1 + 4 + features[seen, 1]] = 1.0
    fitted = np.clip(state[3:], 0.02, 0.98)
    weights = 1.0 / (fitted * (1 - fitted) * factor + 0.001)
    precision = np.diag(np.r_[0.0, np.full(4, 1 / 0.02), np.full(6, 1 / 0.003)])
    normal = design.T @ (weights[:, None] * design) + precision
    expected = np.linalg.solve(normal, design.T @ (weights * observed.score_sum[seen] / counts))
    np.testing.assert_allclose(theta, expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(covariance, np.linalg.inv(normal), rtol=1e-9, atol=1e-12)


def test_the_accelerated_fit_ends_at_the_fixed_point_of_plain_em():
    rng = np.random.default_rng(6)
    observed, features = _small_problem(rng, 6, 12)
    prior = AttributePrior(features, tolerance=1e-9, max_iterations=1000)
    prior.fit(observed.score_sum, observed.n_seen, 200, np.ones(features.shape[0]))
    assert prior.converged
    em, _, counts = _em_of(prior, observed)
    state = em.initial_state(float(observed.score_sum[observed.n_seen > 0].sum() / counts.sum()))
    for _ in range(20000):
        state = em.step(state)
    np.testing.assert_allclose(prior.effect_variances, em.spreads(state), rtol=1e-4)
    assert prior.interaction == pytest.approx(em.interaction(state), rel=1e-4)
    theta, covariance = em.solution(state)
    np.testing.assert_allclose(prior.mean, theta[prior.columns].sum(axis=1), atol=1e-7)
    # An arm's prior variance: the interaction plus z' C z, written out over its intercept and levels.
    arm = 0
    z = np.zeros(em.size)
    z[prior.columns[arm]] = 1.0
    assert prior.variance[arm] == pytest.approx(em.interaction(state) + z @ covariance @ z, rel=1e-4)


def test_the_variance_update_maximises_the_penalised_complete_data_likelihood():
    # The M-step of s_d^2 given E[sum_l a_l^2] = S over L levels, with the Gamma(2, ->0) prior on s_d: the maximiser
    # of -(L / 2) log s^2 - S / (2 s^2) + log s_d, found numerically, is S / (L - 1).
    from scipy.optimize import minimize_scalar

    total, n_levels = 0.37, 15
    found = minimize_scalar(
        lambda log_v: (n_levels / 2) * log_v + total / (2 * np.exp(log_v)) - 0.5 * log_v,
        bounds=(-12, 2),
        method="bounded",
        options={"xatol": 1e-10},
    )
    assert np.exp(found.x) == pytest.approx(total / (n_levels - 1), rel=1e-6)
    rng = np.random.default_rng(7)
    observed, features = _small_problem(rng)
    em, _, _ = _em_of(AttributePrior(features), observed)
    state = em.initial_state(0.6)
    theta, covariance = em.solution(state)
    models = slice(1, 5)
    expected = np.sum(theta[models] ** 2 + np.diag(covariance)[models]) / 3
    assert em.spreads(em.step(state))[0] == pytest.approx(expected, rel=1e-12)


def test_a_fit_on_two_arms_converges_to_a_wide_prior_within_the_unit_interval():
    # Two arms of a 5 x 5 grid cannot identify three variance components: the fit stays finite and its
    # components at most 1/4, the largest variance of a mean in [0, 1].
    features = np.stack([np.repeat(np.arange(5), 5), np.tile(np.arange(5), 5)], axis=1)
    n_seen = np.zeros(25, dtype=np.int64)
    n_seen[[0, 7]] = 10
    score_sum = np.zeros(25)
    score_sum[[0, 7]] = [9.0, 2.0]
    prior = AttributePrior(features)
    prior.fit(score_sum, n_seen, 100, np.ones(25))
    assert prior.converged
    assert np.all(prior.effect_variances <= 0.25) and prior.interaction <= 0.25
    assert np.all(np.isfinite(prior.mean)) and np.all(prior.variance > 0)
    # Its unseen arms sit between the two seen ones, by the levels they share with them.
    assert 0.2 < prior.mean[12] < 0.9


def test_the_order_of_the_attributes_does_not_matter():
    rng = np.random.default_rng(8)
    observed, features = _small_problem(rng, 7, 5)
    fits = []
    for order in ([0, 1], [1, 0]):
        prior = AttributePrior(features[:, order])
        prior.fit(observed.score_sum, observed.n_seen, 200, np.ones(features.shape[0]))
        fits.append(prior)
    np.testing.assert_allclose(fits[0].mean, fits[1].mean, atol=1e-10)
    np.testing.assert_allclose(fits[0].variance, fits[1].variance, rtol=1e-8)
    np.testing.assert_allclose(fits[0].effect_variances, fits[1].effect_variances[::-1], rtol=1e-8)
