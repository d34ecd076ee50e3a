"""Pieces shared by the cost-unaware bandit baselines.

These methods allocate in cells (one arm on one example), not in cost: under
cost-aware runs their allocation ignores the arms' prices, exactly as in the
paper, and the simulator charges each request at the arm's real cost.
"""

from __future__ import annotations

import math

import numpy as np

from gittinseval.core.protocol import EvaluationProblem, argmax_by_priority

__all__ = ["RunningMeans", "cell_budget"]


def cell_budget(problem: EvaluationProblem) -> int:
    """Budget in cells: the run's budget fraction of the ``K N`` cells, rounded up.

    ``ceil(budget / exhaustive_cost * K * N)``; under unit cost this is the
    budget itself (rounded up so that spending it reaches the simulator's budget).
    """
    cells = problem.budget / problem.exhaustive_cost * problem.n_arms * problem.n_examples
    return min(math.ceil(cells - 1e-9), problem.n_arms * problem.n_examples)


class RunningMeans:
    """Per-arm sums and counts of observed scores; shapes ``[K]``.

    ``best(candidates, priority)`` is the arm of largest empirical mean among the
    boolean ``candidates`` that have at least one observation (ties by the per-run
    random ``priority``); if none has one, the candidate of lowest priority.
    """

    def __init__(self, n_arms: int) -> None:
        self.sums = np.zeros(n_arms)
        self.counts = np.zeros(n_arms, dtype=np.int64)
        # [K] empirical means, -inf for arms never observed: kept up to date arm by arm for
        # policies that recommend after every batch (a full division each time is slower).
        self.seen_means = np.full(n_arms, -np.inf)

    def update(self, arm: int, scores: np.ndarray) -> None:
        self.sums[arm] += scores.sum()
        self.counts[arm] += scores.size
        self.seen_means[arm] = self.sums[arm] / self.counts[arm]

    @property
    def means(self) -> np.ndarray:
        """``[K]`` empirical means, NaN for arms never observed."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.sums / self.counts

    def best(self, candidates: np.ndarray, priority: np.ndarray) -> int:
        seen = candidates & (self.counts > 0)
        if not seen.any():
            return argmax_by_priority(np.where(candidates, 0.0, -np.inf), priority)
        return argmax_by_priority(np.where(seen, self.means, -np.inf), priority)
