"""One interface to the certificate under each posterior model (gittinseval.core.certifiers): each certifier reads
the posterior its model needs, and states what that model's own functions state from the same cells."""

import numpy as np
import pytest

from gittinseval.core.certificate import CertificateSettings, certify, posterior_from_statistics
from gittinseval.core.certificate_models import EmpiricalBayesModel
from gittinseval.core.certifiers import EmpiricalBayesCertifier, GaussianCertifier, certifier_for
from gittinseval.core.confidence_stop import ConfidenceStop
from gittinseval.core.observations import ObservedCells

N_ARMS, N_EXAMPLES = 6, 60
SETTINGS = CertificateSettings(level=0.9, eps=0.02, samples=4000)


def a_run(seed=0):
    """``(posterior, observed cells)`` of a run that saw a different share of each arm's 0/1 scores."""
    rng = np.random.default_rng(seed)
    means = np.array([0.8, 0.75, 0.6, 0.55, 0.4, 0.3])
    matrix = (rng.random((N_ARMS, N_EXAMPLES)) < means[:, None]).astype(float)
    counts = np.array([40, 30, 20, 12, 8, 0])
    observed = ObservedCells(N_ARMS, N_EXAMPLES, binary=True)
    for arm, count in enumerate(counts):
        if count:
            examples = rng.permutation(N_EXAMPLES)[:count]
            observed.add(arm, examples, matrix[arm, examples])
    posterior = posterior_from_statistics(observed.score_sum, observed.n_seen, N_EXAMPLES, 0.5, 0.04)
    return posterior, observed


def test_the_settings_choose_the_model_and_a_model_can_be_named_apart():
    assert isinstance(certifier_for(SETTINGS), EmpiricalBayesCertifier)  # eb by default
    gaussian = certifier_for(SETTINGS, "gaussian")
    assert isinstance(gaussian, GaussianCertifier) and gaussian.model == "gaussian" and gaussian.settings is SETTINGS
    assert certifier_for(CertificateSettings(model="gaussian")).model == "gaussian"
    assert certifier_for(SETTINGS).model == "eb"
    with pytest.raises(ValueError, match="unknown certificate model 'beta'; the models are gaussian, eb"):
        certifier_for(SETTINGS, "beta")


def test_the_gaussian_certifier_reads_the_posterior_with_the_settings():
    posterior, observed = a_run()
    certifier = certifier_for(SETTINGS, "gaussian")
    stated = certifier.certify(posterior, observed, 1)
    direct = certify(posterior, 1, level=0.9, eps=0.02, n_samples=4000)
    assert stated.as_dict() == direct.as_dict() and stated.model == "gaussian"
    # The LCB rule by hand: the largest posterior mean less kappa posterior sds.
    mean, sd = np.asarray(posterior.mean), np.sqrt(posterior.variance)
    for kappa in (0.0, 1.0, 3.0):
        assert certifier.recommend(posterior, observed, kappa) == int(np.argmax(mean - kappa * sd))
    for threshold in (0.3, 0.6, 0.95):
        stop = ConfidenceStop(threshold, 0.02)
        assert certifier.stop_reached(stop, posterior, observed, 0) == stop.reached(posterior, 0)


def test_the_empirical_bayes_certifier_reads_the_cells_and_its_stop_agrees_with_the_exact_probability():
    posterior, observed = a_run(1)
    certifier = certifier_for(SETTINGS, "eb")
    stated = certifier.certify(posterior, observed, 0)
    direct = EmpiricalBayesModel().certify(observed, 0, level=0.9, eps=0.02)
    assert stated.model == "eb" and stated.as_dict() == direct.as_dict()
    assert certifier.recommend(posterior, observed, 1.0) == EmpiricalBayesModel().recommend(observed, 1.0)
    # Another posterior of the same cells changes nothing: the model reads the cells alone.
    other = posterior_from_statistics(observed.score_sum, observed.n_seen, N_EXAMPLES, 0.2, 0.001)
    assert certifier.certify(other, observed, 0).as_dict() == direct.as_dict()
    exact = EmpiricalBayesModel().prob_eps_best(observed, 0, 0.02)
    for threshold in (exact - 0.05, exact + 0.05):
        if 0 < threshold < 1:
            stop = ConfidenceStop(threshold, 0.02)
            assert certifier.stop_reached(stop, posterior, observed, 0) == (exact >= threshold)
