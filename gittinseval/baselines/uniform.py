"""Round-robin uniform allocation: the sanity floor of the comparison."""

from __future__ import annotations

import numpy as np

from gittinseval.baselines._common import RunningMeans
from gittinseval.core.protocol import (
    EvaluationProblem,
    Policy,
    RandomExampleOrder,
    Request,
    optional_batch_size,
)

__all__ = ["UniformPolicy"]


class UniformPolicy(Policy):
    """Cycle through the arms in a per-run random order, ``B`` random examples each.

    Completed arms are skipped, so after ``t`` full rounds every unfinished arm
    has ``t B`` observed cells.  ``recommend`` returns the largest empirical mean
    (ties by the per-run random ranking).  Costs play no part in the allocation.

    Args:
        batch_size: ``B``, examples per pull; ``None`` takes the benchmark's default.
    """

    name = "uniform"
    label = "Uniform"
    uses_prior = False
    concurrent = True

    def __init__(self, batch_size: int | None = None) -> None:
        self.batch_size = optional_batch_size(batch_size)

    def reset(self, problem: EvaluationProblem, rng: np.random.Generator) -> None:
        self.batch_size_for(problem)
        self.order = RandomExampleOrder(problem.n_arms, problem.n_examples, rng)
        self.priority = rng.permutation(problem.n_arms)
        self.cycle = np.argsort(self.priority)
        self.position = 0
        self.stats = RunningMeans(problem.n_arms)
        self.all_arms = np.ones(problem.n_arms, dtype=bool)

    def select(self, busy: frozenset[int] = frozenset()) -> Request | None:
        n_arms = self.cycle.size
        for _ in range(n_arms):
            arm = int(self.cycle[self.position])
            self.position = (self.position + 1) % n_arms
            if self.order.remaining(arm) and arm not in busy:
                return Request(arm, self.order.take(arm, min(self.resolved_batch_size, self.order.remaining(arm))))
        return None

    def cancel(self, request: Request) -> None:
        super().cancel(request)
        self.position = int(np.flatnonzero(self.cycle == request.arm)[0])

    def observe(self, request: Request, scores: np.ndarray) -> None:
        self.stats.update(request.arm, scores)

    def recommend(self) -> int:
        return self.stats.best(self.all_arms, self.priority)
