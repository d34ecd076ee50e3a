"""UCB-E-LRF: UCB-E on a low-rank ensemble completion of the score matrix (BanditEval).

The policy (:class:`LRFPolicy`) observes cells of the ``[K, N]`` score matrix ``X``
(``K`` arms, ``N`` examples) and, after a random warm-up, at every step refits an
ensemble of ``E`` rank-``r`` factorisations ``X ~ U_e V_e^T`` (``U [E, K, r]``,
``V [E, N, r]``; :class:`LowRankEnsemble`) by ridge alternating least squares on
the observed cells, each member leaving out its own random share ``p`` of them.
The ensemble's mean and standard deviation ``[K, N]`` complete the matrix; the arm
whose completed row, with ``eta`` sds of optimism on its unseen cells, has the
largest mean is evaluated next on the unseen examples it is least sure of.

The modules, in reading order:

- :mod:`~gittinseval.baselines.lrf.policy`: the policy (warm-up, arm scores, batches, recommendation);
- :mod:`~gittinseval.baselines.lrf.observed`: the observed cells, in the sparse forms the ALS reads;
- :mod:`~gittinseval.baselines.lrf.ensemble`: the ensemble's fit, from scratch or warm-started, and its moments;
- :mod:`~gittinseval.baselines.lrf.dropout`: each fit's dropout, drawn for the observed cells only or as
  the reference's whole uniform stream (the next fit's drawn on a thread of its own);
- :mod:`~gittinseval.baselines.lrf.als`: one side of the ALS, every member's ridge solutions at once;
- :mod:`~gittinseval.baselines.lrf.compiled`: the compiled (numba) pass over the dropped cells.

The public names are those of ``__all__``; the modules' other names are internal
(documented, and used by the tests, but not a stable interface).
"""

from gittinseval.baselines.lrf.dropout import FitDraws
from gittinseval.baselines.lrf.ensemble import EnsembleFit, LowRankEnsemble
from gittinseval.baselines.lrf.observed import ObservedMatrix
from gittinseval.baselines.lrf.policy import LRFPolicy

__all__ = ["EnsembleFit", "FitDraws", "LowRankEnsemble", "LRFPolicy", "ObservedMatrix"]

# The public classes answer to their public path: `target_of` reads `__module__`, and the recorded
# hyperparameters name `gittinseval.baselines.lrf.LRFPolicy`, as the configs' `_target_`s do (a live store's
# identity, and a config digest, by the name from before the move: `baselines.lrf.LRFPolicy`).
for _public in (EnsembleFit, FitDraws, LowRankEnsemble, LRFPolicy, ObservedMatrix):
    _public.__module__ = __name__
del _public
