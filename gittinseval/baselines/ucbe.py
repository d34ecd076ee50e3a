"""UCB-E (Audibert et al. 2010) as run by BanditEval (Zhou et al. 2024)."""

from __future__ import annotations

import math

import numpy as np

from gittinseval.baselines._common import RunningMeans
from gittinseval.core.protocol import (
    EvaluationProblem,
    Policy,
    RandomExampleOrder,
    Request,
    argmax_in_priority_order,
    excluding,
    optional_batch_size,
)
from gittinseval.utils.validation import non_negative_float

__all__ = ["UCBEPolicy"]


class UCBEPolicy(Policy):
    """Upper confidence bound exploration with batches of ``B`` examples.

    Index of arm ``k`` with ``n_k`` observed cells and empirical mean ``mu_k``:

        U_k = mu_k + sqrt(a / n_k)    (0 < n_k < N),
        U_k = +inf                    (n_k = 0),
        U_k = -inf                    (n_k = N, the arm is completed).

    ``select`` evaluates ``argmax_k U_k`` on ``min(B, N - n_k)`` of its unseen
    examples, drawn at random.  ``recommend`` returns the largest empirical mean.
    Ties are broken by a per-run random ranking of the arms (the reference takes
    the first index).  Costs play no part in the allocation.

    Args:
        batch_size: ``B``, examples per pull; ``None`` takes the benchmark's default.
        a: exploration constant (1 in the paper).
    """

    name = "ucbe"
    label = "UCB-E"
    uses_prior = False
    concurrent = True

    def __init__(self, batch_size: int | None = None, a: float = 1.0) -> None:
        a = non_negative_float("a", a)
        self.batch_size = optional_batch_size(batch_size)
        self.a = float(a)

    def reset(self, problem: EvaluationProblem, rng: np.random.Generator) -> None:
        self.batch_size_for(problem)
        self.n_examples = problem.n_examples
        self.order = RandomExampleOrder(problem.n_arms, problem.n_examples, rng)
        self.priority = rng.permutation(problem.n_arms)
        self.tie_order = np.argsort(self.priority)
        self.stats = RunningMeans(problem.n_arms)
        self.index = np.full(problem.n_arms, np.inf)
        self.all_arms = np.ones(problem.n_arms, dtype=bool)

    def select(self, busy: frozenset[int] = frozenset()) -> Request | None:
        arm = argmax_in_priority_order(excluding(self.index, busy), self.tie_order)
        if arm < 0:
            return None
        return Request(arm, self.order.take(arm, min(self.resolved_batch_size, self.order.remaining(arm))))

    def observe(self, request: Request, scores: np.ndarray) -> None:
        arm = request.arm
        self.stats.update(arm, scores)
        count = self.stats.counts[arm]
        if count == self.n_examples:
            self.index[arm] = -np.inf
        else:
            self.index[arm] = self.stats.sums[arm] / count + math.sqrt(self.a / count)

    def recommend(self) -> int:
        arm = argmax_in_priority_order(self.stats.seen_means, self.tie_order)  # stats.best over all arms, faster
        return arm if arm >= 0 else self.stats.best(self.all_arms, self.priority)
