"""The UCB-E-LRF policy: UCB-E on the low-rank ensemble's completion of the score matrix (BanditEval).

After a random warm-up of ``ceil(w K N)`` cells, each step refits the
:class:`~gittinseval.baselines.lrf.ensemble.LowRankEnsemble` on the observed cells, scores each
arm by the mean over its ``N`` cells of the observed score or, where unobserved, the
ensemble's ``mean + eta sd`` (``[K, N]`` tables), and evaluates the best arm's ``B``
unseen examples of largest ``sd``.  The recommendation is the arm of largest mean over
its observed scores and, elsewhere, the latest fit's ensemble mean.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from gittinseval.baselines._common import RunningMeans
from gittinseval.baselines.lrf.dropout import DrawsAhead
from gittinseval.baselines.lrf.ensemble import EnsembleFit, LowRankEnsemble
from gittinseval.baselines.lrf.observed import ObservedMatrix
from gittinseval.core.protocol import (
    EvaluationProblem,
    Policy,
    Request,
    argmax_by_priority,
    check_batch_size,
)
from gittinseval.utils.validation import non_negative_float, positive_int


class LRFPolicy(Policy):
    """UCB-E-LRF: optimism on a completed matrix, evaluating its most uncertain cells.

    Warm-up: ``T0 = ceil(w K N)`` cells drawn uniformly without replacement,
    counted in the budget and issued as one request per arm that received any
    (arms in a random order).  After the warm-up, each ``select`` refits a
    :class:`LowRankEnsemble` on the observed matrix and scores

        cell:  s[k, n] = X[k, n] if observed, else mean[k, n] + eta * sd[k, n],
        arm:   S_k = (1/N) sum_n s[k, n]   (+inf if unobserved, -inf if completed),

    then evaluates ``argmax_k S_k`` on its ``B`` unseen examples of largest ``sd``.
    ``recommend`` returns the arm of largest imputed mean: observed cells at their
    values, the others at the latest fit's ensemble mean (the fit made by the last
    ``select``, so recommending costs no refit).  Before the first fit (during the
    warm-up and after its last request) it returns the best empirical mean.
    Ties go to a per-run random ranking of the arms.  Costs play no part in the
    allocation.

    By default every step refits from scratch, as the reference does, drawing the
    dropout as the ensemble's ``dropout_draws`` says (:class:`LowRankEnsemble`).
    With ``"stream"`` (parity: the reference's random stream, same batches) the
    random draws of the next fit are made on a second thread while this one fits,
    into two buffers of ``4 E K N`` bytes (210 MB each at 1500 x 545, 590 MB at
    1500 x 1534); ``"observed"`` draws the dropout of the ``M`` observed
    cells in turn.  With ``warm_start`` each fit after the first starts from the previous
    fit's factors, keeps each member's dropout of the cells it already saw, and
    runs ``warm_start_iterations`` ALS rounds instead of the ensemble's
    ``iterations`` (see :meth:`LowRankEnsemble.refit`).

    Args:
        batch_size: ``B``, examples per pull after the warm-up (32 in the paper).
        eta: weight of the ensemble sd in the cell score.
        warmup_fraction: ``w``, the warm-up's share of the ``K N`` cells.
        ensemble: the :class:`LowRankEnsemble` refitted each step (default: the
            reference's rank 1, 64 members, ``dropout_draws="observed"``).
        warm_start: refit from the previous step's fit (not the reference's method).
        warm_start_iterations: ALS rounds of a warm-started refit.
    """

    name = "lrf"
    label = "UCB-E-LRF"
    uses_prior = False

    def __init__(
        self,
        batch_size: int = 32,
        eta: float = 5.0,
        warmup_fraction: float = 0.05,
        ensemble: LowRankEnsemble | None = None,
        warm_start: bool = False,
        warm_start_iterations: int = 2,
    ) -> None:
        eta = non_negative_float("eta", eta)
        if not (0 < warmup_fraction < 1):
            raise ValueError(f"warmup_fraction must be in (0, 1), got {warmup_fraction!r}")
        if not isinstance(warm_start, bool):
            raise ValueError(f"warm_start must be true or false, got {warm_start!r}")
        self.batch_size = check_batch_size(batch_size)
        self.eta = float(eta)
        self.warmup_fraction = float(warmup_fraction)
        self.ensemble = LowRankEnsemble() if ensemble is None else ensemble
        self.warm_start = warm_start
        self.warm_start_iterations = positive_int("warm_start_iterations", warm_start_iterations)

    def display_label(self, prior_name: str | None = None) -> str:
        # A warm-started run is not the reference's method: its curves must not pool with the parity runs'.
        return f"{self.label} warm start" if self.warm_start else self.label

    def reset(self, problem: EvaluationProblem, rng: np.random.Generator) -> None:
        n_arms, n_examples = problem.n_arms, problem.n_examples
        self.matrix = ObservedMatrix(n_arms, n_examples)  # first: it refuses a matrix too large to index
        warmup_cells = math.ceil(self.warmup_fraction * n_arms * n_examples - 1e-9)
        cells = np.sort(rng.choice(n_arms * n_examples, size=warmup_cells, replace=False))
        arms, first = np.unique(cells // n_examples, return_index=True)
        per_arm = np.split(cells % n_examples, first[1:])
        self.warmup = [Request(int(arms[i]), per_arm[i]) for i in rng.permutation(arms.size)]
        self.priority = rng.permutation(n_arms)
        self.generator = torch.Generator().manual_seed(int(rng.integers(2**63 - 1)))
        self.draws_ahead: DrawsAhead | None = None
        self.stats = RunningMeans(n_arms)
        self.all_arms = np.ones(n_arms, dtype=bool)
        self.fit: EnsembleFit | None = None
        self.fit_mean: np.ndarray | None = None
        self.moment_tables = tuple(torch.empty(n_arms, n_examples, dtype=torch.float64) for _ in range(2))
        self.imputed_sums = np.zeros(n_arms)

    def refit(self) -> EnsembleFit:
        """The fit for this step: from scratch, or warm-started from the last one."""
        if self.warm_start:
            if self.fit is None:
                return self.ensemble.fit(self.matrix, self.generator)
            return self.ensemble.refit(self.fit, self.matrix, self.generator, self.warm_start_iterations)
        if self.ensemble.dropout_draws == "observed":
            return self.ensemble.fit(self.matrix, self.generator)
        # A stream fit uses the generator for its draws only, so the next fit's draws
        # can be made on another thread while this one fits: the same stream, earlier.
        if self.draws_ahead is None:
            self.draws_ahead = DrawsAhead(self.ensemble.draw, self.ensemble.ensemble_size, self.matrix, self.generator)
        return self.ensemble.fit_drawn(self.draws_ahead.take(), self.matrix)

    def arm_scores(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Refit; return the arm scores ``S [K]``, the ensemble mean and sd ``[K, N]``.

        The mean and sd are views of :attr:`moment_tables`, which the next fit overwrites.

        Also sets the imputed sums ``sum_n s0[k, n]`` (``s0``: observed values, the
        mean elsewhere) that :meth:`recommend` reads.  Both row sums are taken over
        all cells and corrected at the ``M`` observed ones,
        ``sum_n (1 - O) A = sum_n A - sum_n O A``, instead of masking every cell.
        """
        self.fit = self.refit()
        mean, sd = self.fit.moments(out=self.moment_tables)
        observed_mean, observed_sd = self.matrix.observed_row_sums(mean, sd)
        self.imputed_sums = (mean.sum(1) - observed_mean).numpy() + self.stats.sums
        unobserved_sd = (sd.sum(1) - observed_sd).numpy()
        scores = (self.imputed_sums + self.eta * unobserved_sd) / self.matrix.shape[1]
        counts = self.stats.counts
        # A completed arm's two sums of the mean cancel only up to rounding; its exact sum keeps
        # equal arms tied, so that the per-run priority decides between them.
        completed = counts == self.matrix.shape[1]
        self.imputed_sums[completed] = self.stats.sums[completed]
        scores[counts == 0] = np.inf
        scores[completed] = -np.inf
        return scores, mean.numpy(), sd.numpy()

    def select(self) -> Request | None:
        if self.warmup:
            return self.warmup.pop()
        scores, mean, sd = self.arm_scores()
        self.fit_mean = mean
        arm = argmax_by_priority(scores, self.priority)
        if arm < 0:
            return None
        unseen = np.flatnonzero(~self.matrix.observed[arm])
        spread = sd[arm, unseen]
        size = min(self.batch_size, unseen.size)
        return Request(arm, unseen[np.argsort(-spread, kind="stable")[:size]])

    def observe(self, request: Request, scores: np.ndarray) -> None:
        arm, examples = request.arm, request.examples
        self.matrix.add(arm, examples, scores)
        self.stats.update(arm, scores)
        if self.fit_mean is not None:
            self.imputed_sums[arm] += (scores - self.fit_mean[arm, examples]).sum()
            if self.stats.counts[arm] == self.matrix.shape[1]:
                self.imputed_sums[arm] = self.stats.sums[arm]  # exact, as in arm_scores

    def recommend(self) -> int:
        if self.fit_mean is None:
            return self.stats.best(self.all_arms, self.priority)
        return argmax_by_priority(self.imputed_sums, self.priority)
