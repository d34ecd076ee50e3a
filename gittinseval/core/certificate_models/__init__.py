"""Certificate models: posteriors of the arms' full-benchmark means that are calibrated on real data.

:class:`EmpiricalBayesModel` replaces the Gaussian surrogate of
:mod:`gittinseval.core.certificate` (independent arms, prior ``N(0.5, 0.04)``, worst-case cell
variance 0.25) by

- the exact likelihood of what was observed: hypergeometric for 0/1 scores (the finite-population
  remainder is exact, no cell-variance assumption), Gaussian with each arm's observed spread for
  continuous scores (:mod:`.lattice`);
- a prior of the arms' means learned from the run itself, a smooth spline log-density fitted by
  penalised marginal likelihood and refitted as observations arrive (:mod:`.spline_prior`);
- ``P(best)`` and ``P(eps-best)`` as exact sums over the lattice of each arm's posterior, instead of
  Monte Carlo (:mod:`.model`).

Input: a :class:`~gittinseval.core.observations.ObservedCells`; output: a
:class:`PosteriorCertificate` with read-only ``[K]`` arrays.
"""

from gittinseval.core.certificate_models.lattice import Lattice, RowData, central_interval, win_probabilities
from gittinseval.core.certificate_models.model import ArmPosterior, EmpiricalBayesModel, PosteriorCertificate
from gittinseval.core.certificate_models.spline_prior import SplinePrior

__all__ = [
    "ArmPosterior",
    "EmpiricalBayesModel",
    "Lattice",
    "PosteriorCertificate",
    "RowData",
    "SplinePrior",
    "central_interval",
    "win_probabilities",
]
