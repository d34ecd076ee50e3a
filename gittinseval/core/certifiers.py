"""The certificate under each posterior model, behind one small interface (config ``certificate.model``).

A run's certificate and its posterior confidence stop read one of two posteriors of the arms'
full-benchmark means:

- ``gaussian``: the paper's surrogate (:mod:`gittinseval.core.certificate`), independent Gaussian
  posteriors under the run's prior and the policy's cell variance; read from the
  :class:`~gittinseval.core.posterior.FiniteBenchmarkPosterior` (Monte Carlo probabilities);
- ``eb``: the empirical-Bayes lattice posterior (:mod:`gittinseval.core.certificate_models`), exact
  likelihood and a prior learned from the run; read from the
  :class:`~gittinseval.core.observations.ObservedCells` (exact probabilities).

A :class:`Certifier` is handed both and reads the one its model needs, so a driver certifies the
same way whichever model the settings name, and a simulation can state several models side by side
from one run.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from gittinseval.core.certificate import Certificate, CertificateSettings, certify
from gittinseval.core.certificate_models import EmpiricalBayesModel
from gittinseval.core.confidence_stop import ConfidenceStop
from gittinseval.core.observations import ObservedCells
from gittinseval.core.posterior import FiniteBenchmarkPosterior

__all__ = ["Certifier", "EmpiricalBayesCertifier", "GaussianCertifier", "certifier_for"]


class Certifier(Protocol):
    """Certificates and posterior confidence-stop checks under one posterior model."""

    model: str

    def certify(self, posterior: FiniteBenchmarkPosterior, observed: ObservedCells, arm: int) -> Certificate:
        """The certificate of ``arm`` (the settings' level and eps)."""
        ...

    def stop_reached(
        self, stop: ConfidenceStop, posterior: FiniteBenchmarkPosterior, observed: ObservedCells, arm: int
    ) -> bool:
        """Whether ``P(arm is stop.eps-best) >= stop.prob_eps_best`` under this model."""
        ...

    def recommend(self, posterior: FiniteBenchmarkPosterior, observed: ObservedCells, kappa: float) -> int:
        """The arm this model's posterior recommends by the paper's LCB rule: the largest posterior mean minus
        ``kappa`` posterior standard deviations."""
        ...


class GaussianCertifier:
    """The paper's Gaussian surrogate: :func:`~gittinseval.core.certificate.certify` of the posterior."""

    model = "gaussian"

    def __init__(self, settings: CertificateSettings) -> None:
        self.settings = settings

    def certify(self, posterior: FiniteBenchmarkPosterior, observed: ObservedCells, arm: int) -> Certificate:
        settings = self.settings
        return certify(posterior, arm, level=settings.level, eps=settings.eps, n_samples=settings.samples)

    def stop_reached(
        self, stop: ConfidenceStop, posterior: FiniteBenchmarkPosterior, observed: ObservedCells, arm: int
    ) -> bool:
        return stop.reached(posterior, arm)

    def recommend(self, posterior: FiniteBenchmarkPosterior, observed: ObservedCells, kappa: float) -> int:
        return int(np.argmax(posterior.mean - kappa * np.sqrt(posterior.variance)))


class EmpiricalBayesCertifier:
    """The empirical-Bayes lattice posterior of the observed cells.

    A certificate is a function of the observed cells alone: each is computed by a fresh
    :class:`~gittinseval.core.certificate_models.EmpiricalBayesModel`, whose prior is fitted on exactly
    those cells.  The confidence stop, checked after every batch, keeps one model whose prior is refitted
    as the cells grow (its ``refit_growth``), so that most checks cost no fit; stating a certificate never
    changes what the stop decides.  The posterior is of the accuracy only: the ``value`` objective's
    shifted means have no lattice of their own.
    """

    model = "eb"

    def __init__(self, settings: CertificateSettings) -> None:
        self.settings = settings
        self.stop_model = EmpiricalBayesModel()

    def certify(self, posterior: FiniteBenchmarkPosterior, observed: ObservedCells, arm: int) -> Certificate:
        return EmpiricalBayesModel().certify(observed, arm, level=self.settings.level, eps=self.settings.eps)

    def stop_reached(
        self, stop: ConfidenceStop, posterior: FiniteBenchmarkPosterior, observed: ObservedCells, arm: int
    ) -> bool:
        return self.stop_model.eps_best_reached(observed, arm, stop.eps, stop.prob_eps_best)

    def recommend(self, posterior: FiniteBenchmarkPosterior, observed: ObservedCells, kappa: float) -> int:
        return EmpiricalBayesModel().recommend(observed, kappa)


def certifier_for(settings: CertificateSettings, model: str | None = None) -> Certifier:
    """A fresh certifier of ``model`` (default: ``settings.model``) with ``settings``' level, eps and samples."""
    model = settings.model if model is None else model
    if model == "gaussian":
        return GaussianCertifier(settings)
    if model == "eb":
        return EmpiricalBayesCertifier(settings)
    raise ValueError(f"unknown certificate model {model!r}; the models are gaussian, eb")
