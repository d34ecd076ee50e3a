"""SySRs: similarity-exploiting successive rejects (Lyu et al. 2026)."""

from __future__ import annotations

import numpy as np

from gittinseval.baselines._common import RunningMeans, cell_budget
from gittinseval.core.protocol import (
    EvaluationProblem,
    Policy,
    Request,
    argmax_by_priority,
    optional_batch_size,
)

__all__ = ["SySRsPolicy", "successive_rejects_schedule"]


def successive_rejects_schedule(n_arms: int, n_examples: int, cells: int) -> np.ndarray:
    """Cumulative examples per surviving arm at the end of each of the ``K - 1`` phases.

    Successive rejects (Audibert et al. 2010) gives phase ``t`` (``1 <= t <= K - 1``,
    ``K + 1 - t`` survivors) the cumulative length ``n_t = alpha / (K + 1 - t)``.
    An arm dropped after phase ``t`` has ``n_t`` examples and the last two arms
    ``n_{K-1}``, so the schedule spends ``sum_t n_t + n_{K-1}`` cells; without
    caps ``alpha = n / logbar`` with ``logbar = 1/2 + sum_{i=2..K} 1/i`` spends the
    budget ``n`` exactly (the classic rule uses ``n - K``, slack for its rounding).
    Phases that would need more than ``N`` examples are capped at ``N`` and
    ``alpha`` grows until the capped schedule spends ``n``: the surplus of the
    late phases goes to the earlier ones.  Rounding: ``floor``, then single
    examples are added to the latest phases that stay non-decreasing, so the
    integer schedule spends ``n`` cells, or ``n + 1`` when only the final phase
    (two arms) can take the last one.

    Args:
        n_arms: ``K >= 2``.
        n_examples: ``N``.
        cells: the budget ``n`` in cells, at most ``K N``.

    Returns:
        ``[K - 1]`` non-decreasing integers in ``[0, N]``.
    """
    if n_arms < 2:
        raise ValueError(f"successive rejects needs at least 2 arms, got {n_arms}")
    if not (0 <= cells <= n_arms * n_examples):
        raise ValueError(f"budget of {cells} cells is outside [0, K N = {n_arms * n_examples}]")
    shape = 1.0 / (n_arms + 1 - np.arange(1, n_arms))

    def spend(lengths: np.ndarray) -> float:
        return float(lengths.sum() + lengths[-1])

    low, high = 0.0, float(n_examples * n_arms)
    for _ in range(200):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if spend(np.minimum(middle * shape, n_examples)) < cells else (low, middle)
    lengths = np.floor(np.minimum(high * shape, n_examples) + 1e-9).astype(np.int64)
    left = cells - int(spend(lengths))
    last = n_arms - 2
    # Each floor lost less than one example per phase: give one back to the latest
    # phases that can take it (the final phase, two arms, costs two cells).
    for phase in range(last, -1, -1):
        cost = 2 if phase == last else 1
        ceiling = n_examples if phase == last else lengths[phase + 1]
        if left >= cost and lengths[phase] < ceiling:
            lengths[phase] += 1
            left -= cost
    if left:
        lengths[last] += 1
    return lengths


class SySRsPolicy(Policy):
    """Successive rejects on one shared random order of the examples.

    Phase ``t`` evaluates every surviving arm on the same new block of the shared
    order, examples ``n_{t-1} .. n_t`` of :func:`successive_rejects_schedule` (in
    requests of at most ``B`` examples), then drops the survivor with the lowest
    empirical mean.  After ``K - 1`` phases one arm is left.  ``recommend``
    returns the best empirical mean among the survivors, so that the method has
    an anytime curve.  Ties are broken by a per-run random ranking of the arms:
    the arm ranked first is recommended first and dropped last.

    The budget in cells is the run's budget fraction of the ``K N`` cells: costs
    play no part in the allocation.  When the schedule is done (or, under real
    costs, spent before the budget), ``select`` returns ``None``.

    Args:
        batch_size: ``B``, examples per request; ``None`` takes the benchmark's default.
    """

    name = "sysrs"
    label = "SySRs"
    uses_prior = False

    def __init__(self, batch_size: int | None = None) -> None:
        self.batch_size = optional_batch_size(batch_size)

    def reset(self, problem: EvaluationProblem, rng: np.random.Generator) -> None:
        n_arms = problem.n_arms
        self.batch_size_for(problem)
        self.shared_order = rng.permutation(problem.n_examples)
        self.priority = rng.permutation(n_arms)
        # Elimination takes, among tied lowest means, the arm ranked last.
        self.elimination_priority = n_arms - 1 - self.priority
        self.stats = RunningMeans(n_arms)
        self.survivors = np.ones(n_arms, dtype=bool)
        lengths = successive_rejects_schedule(n_arms, problem.n_examples, cell_budget(problem)) if n_arms > 1 else []
        self.boundaries = np.concatenate([[0], lengths]).astype(np.int64)
        self.phase = 0
        self.pending: list[int] = []
        self.position = 0
        self._start_phase()

    def _start_phase(self) -> None:
        """Queue the survivors for the current phase's block; drop arms after empty phases."""
        while self.survivors.sum() > 1:
            start, end = self.boundaries[self.phase], self.boundaries[self.phase + 1]
            if end > start:
                arms = np.flatnonzero(self.survivors)
                self.pending = arms[np.argsort(-self.priority[arms])].tolist()
                self.position = int(start)
                return
            self._eliminate()

    def _eliminate(self) -> None:
        means = self.stats.sums / np.maximum(self.stats.counts, 1)
        worst = argmax_by_priority(np.where(self.survivors, -means, -np.inf), self.elimination_priority)
        self.survivors[worst] = False
        self.phase += 1

    def select(self) -> Request | None:
        if not self.pending:
            return None
        end = int(self.boundaries[self.phase + 1])
        size = min(self.resolved_batch_size, end - self.position)
        return Request(self.pending[-1], self.shared_order[self.position : self.position + size])

    def cancel(self, request: Request) -> None:
        """Nothing to undo: :meth:`select` changes no state."""

    def observe(self, request: Request, scores: np.ndarray) -> None:
        self.stats.update(request.arm, scores)
        self.position += request.size
        if self.position < self.boundaries[self.phase + 1]:
            return
        self.pending.pop()
        if self.pending:
            self.position = int(self.boundaries[self.phase])
        else:
            self._eliminate()
            self._start_phase()

    def recommend(self) -> int:
        return self.stats.best(self.survivors, self.priority)
