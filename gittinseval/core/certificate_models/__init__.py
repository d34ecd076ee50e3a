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
:class:`~gittinseval.core.certificate.Certificate` (``model="eb"``) with read-only ``[K]`` arrays.

Measured on real response matrices (simulated runs: a uniformly random example order per arm,
batches of 8, uniform and UCB-E allocation, checkpoints at 1, 2, 5 and 10 % of the cells, 20
seeds; the recommended arm maximises posterior mean minus one SD).  The 95 % interval of the
recommended arm covered its full-benchmark mean in 0.93 to 0.975 of the statements on GSM8K,
MATH level 5, AlpacaEval and five MMLU subjects (the surrogate: 0.59 to 1.0).  The expected
calibration error (5 bins) of ``P(within 0.01)`` was 0.03 to 0.09 on AlpacaEval, MATH and three
MMLU subjects but 0.14 on GSM8K (understated: its top arms bunch under a sharp ceiling that the
smooth prior runs past) and 0.24 to 0.28 on the two MMLU subjects where 100 prompt templates of
the best model sit within 0.01 of each other (independent arms cannot know that siblings share a
model; a prior over the arms' features would); ``P(best)`` had 0.03 to 0.10, except GSM8K with
0.19 (overstated; the same happens with the true distribution of its arm means as the prior, so it
comes from the particular matrix, whose best three arms are within 4 of 1319 examples).
"""

from gittinseval.core.certificate_models.lattice import Lattice, RowData, central_interval, win_probabilities
from gittinseval.core.certificate_models.model import ArmPosterior, EmpiricalBayesModel
from gittinseval.core.certificate_models.spline_prior import SplinePrior

__all__ = [
    "ArmPosterior",
    "EmpiricalBayesModel",
    "Lattice",
    "RowData",
    "SplinePrior",
    "central_interval",
    "win_probabilities",
]
