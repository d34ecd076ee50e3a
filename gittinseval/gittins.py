"""GittinsEval: the finite-benchmark Gittins index policy (paper Algorithm 1)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gittinseval.posterior import FiniteBenchmarkPosterior
from gittinseval.protocol import (
    EvaluationProblem,
    Policy,
    RandomExampleOrder,
    Request,
    check_batch_size,
    excluding,
    resolve_batch_size,
    validate_scores,
)
from gittinseval.roots import EmpiricalTargetChain, root_schedule

__all__ = ["GittinsPolicy", "argmax_by_priority"]


def argmax_by_priority(values: np.ndarray, priority: np.ndarray) -> int:
    """Index of the largest value; among exact ties, the one with the lowest priority.

    ``priority`` is a per-run random ranking of the arms, so ties are broken at
    random but the same way whenever they recur.  Returns -1 if every value is
    ``-inf``.
    """
    best = values.max()
    if best == -np.inf:
        return -1
    return int(np.argmin(np.where(values == best, priority, priority.size)))


class GittinsPolicy(Policy):
    """Empirical-target Gittins index allocation with an LCB-style recommendation.

    Index of arm ``k`` after ``n_k`` batches (paper eq. finite-gittins-index):

        G_k = M_k - r_{k, n_k}        (unfinished arm),
        G_k = Zbar_k                  (completed arm, its full-row mean),

    with roots ``r`` from :func:`gittinseval.roots.root_schedule` at the arm's cost
    ``lambda * c_k`` (one table per distinct cost).  ``select`` evaluates the
    unfinished arm of largest index on its next ``min(B, unseen)`` examples in a
    per-run random order.  ``stop_signal`` becomes true at the first post-batch
    time a completed arm attains the largest index.  ``recommend`` returns
    ``argmax_k M_k - kappa sqrt(V_k)`` over all arms (kappa = 1: the paper's LCB
    rule; kappa = 0: the posterior-mean rule).

    Args:
        batch_size: ``B``, examples per pull; ``None`` takes the benchmark's
            default (MMLU: 2/4/8 by subject size), else 8.
        lam: ``lambda > 0``, the cost scale of the dynamic program.
        kappa: weight of the posterior sd in the recommendation.
        cell_var: working variance ``tau_cell^2`` of one score.
        grid_points: grid size ``P`` of the root computation.
    """

    name = "gittins"
    label = "GittinsEval"
    concurrent = True

    def __init__(
        self,
        batch_size: int | None = None,
        lam: float = 1e-4,
        kappa: float = 1.0,
        cell_var: float = 0.25,
        grid_points: int = 1025,
    ) -> None:
        for key, value in (("lam", lam), ("cell_var", cell_var)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{key} must be positive and finite, got {value!r}")
        if not math.isfinite(kappa):
            raise ValueError(f"kappa must be finite, got {kappa!r}")
        self.batch_size = None if batch_size is None else check_batch_size(batch_size)
        self.lam = float(lam)
        self.kappa = float(kappa)
        self.cell_var = float(cell_var)
        self.grid_points = int(grid_points)

    def hyperparameters(self) -> dict[str, Any]:
        return {
            "batch_size": getattr(self, "resolved_batch_size", self.batch_size),
            "lam": self.lam,
            "kappa": self.kappa,
            "cell_var": self.cell_var,
            "grid_points": self.grid_points,
        }

    def display_label(self, prior_name: str | None = None) -> str:
        label = self.label if prior_name is None else f"{self.label}-{prior_name[:1].upper()}"
        return label if self.kappa == 1.0 else f"{label} (kappa={self.kappa:g})"

    def reset(self, problem: EvaluationProblem, rng: np.random.Generator) -> None:
        n_arms, n_examples = problem.n_arms, problem.n_examples
        self.resolved_batch_size = resolve_batch_size(self.batch_size, problem)
        chain = EmpiricalTargetChain(n_examples, self.resolved_batch_size, problem.prior_var, self.cell_var)
        self.problem = problem
        self.posterior = FiniteBenchmarkPosterior(
            n_arms, n_examples, problem.prior_mean, problem.prior_var, self.cell_var
        )
        distinct_costs, self.arm_table = np.unique(problem.costs, return_inverse=True)
        roots = root_schedule(
            n_examples,
            self.resolved_batch_size,
            problem.prior_var,
            self.lam * distinct_costs,
            cell_var=self.cell_var,
            grid_points=self.grid_points,
        )
        # A completed arm (stage H) has root 0, so its index is its full-row mean.
        self.roots = np.concatenate([roots, np.zeros((len(distinct_costs), 1))], axis=1)
        self.batch_sizes = chain.batch_sizes.astype(np.int64)
        self.order = RandomExampleOrder(n_arms, n_examples, rng)
        self.priority = rng.permutation(n_arms)
        self.index = self.posterior.mean - self.roots[self.arm_table, 0]
        self.recommend_score = self.posterior.mean - self.kappa * np.sqrt(self.posterior.variance)
        # Selection sees only unfinished arms; the stopping rule compares them with
        # the completed ones.
        self.open_index = self.index.copy()
        self.completed_index = np.full(n_arms, -np.inf)
        self._stopped = False

    def select(self, busy: frozenset[int] = frozenset()) -> Request | None:
        arm = argmax_by_priority(excluding(self.open_index, busy), self.priority)
        if arm < 0:
            return None
        size = int(self.batch_sizes[self.posterior.n_batches[arm]])
        return Request(arm, self.order.take(arm, size))

    def observe(self, request: Request, scores: np.ndarray) -> None:
        scores = validate_scores(request, scores)
        arm = request.arm
        post = self.posterior
        post.update(arm, scores)
        self.index[arm] = post.mean[arm] - self.roots[self.arm_table[arm], post.n_batches[arm]]
        self.recommend_score[arm] = post.mean[arm] - self.kappa * math.sqrt(post.variance[arm])
        if post.completed[arm]:
            self.open_index[arm] = -np.inf
            self.completed_index[arm] = self.index[arm]
        else:
            self.open_index[arm] = self.index[arm]
        if not self._stopped:
            self._stopped = bool(self.completed_index.max() >= self.open_index.max())

    def recommend(self) -> int:
        return argmax_by_priority(self.recommend_score, self.priority)

    @property
    def stop_signal(self) -> bool:
        return self._stopped
