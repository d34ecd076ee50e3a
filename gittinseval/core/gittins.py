"""GittinsEval: the finite-benchmark Gittins index policy (paper Algorithm 1)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gittinseval.core.empirical_prior import EmpiricalPriorEstimator
from gittinseval.core.posterior import FiniteBenchmarkPosterior
from gittinseval.core.protocol import (
    EvaluationProblem,
    Policy,
    PosteriorReport,
    RandomExampleOrder,
    Request,
    argmax_in_priority_order,
    excluding,
    optional_batch_size,
)
from gittinseval.core.roots import EmpiricalTargetChain, completed_root_table, interpolated_root_schedule
from gittinseval.utils.validation import positive_finite_values, positive_float

__all__ = ["GittinsPolicy"]


class GittinsPolicy(Policy):
    """Empirical-target Gittins index allocation with an LCB-style recommendation.

    Index of arm ``k`` after ``n_k`` batches (paper eq. finite-gittins-index):

        G_k = M_k - r_{k, n_k}        (unfinished arm),
        G_k = Zbar_k                  (completed arm, its full-row mean),

    with roots ``r`` from :func:`gittinseval.core.roots.root_schedule` at the arm's cost
    ``lambda * c_k`` (one table per distinct cost).  ``select`` evaluates the
    unfinished arm of largest index on its next ``min(B, unseen)`` examples in a
    per-run random order.  ``stop_signal`` becomes true at the first post-batch
    time a completed arm attains the largest index.  ``recommend`` returns
    ``argmax_k M_k - kappa sqrt(V_k)`` over all arms (kappa = 1: the paper's LCB
    rule; kappa = 0: the posterior-mean rule).

    Known offsets (the ``value`` objective): with ``problem.offsets`` ``b``, every arm's
    index, completed mean and recommendation score gain ``b_k``,

        G_k = M_k + b_k - r_{k, n_k},   G_k = Zbar_k + b_k,   M_k + b_k - kappa sqrt(V_k),

    which are exactly the quantities of a run on the scores ``Z_kj + b_k`` under the prior
    ``N(mu_0 + b_k, v_0)``, with the same roots (proof in :mod:`gittinseval.core.objective`).
    The posterior, and GittinsEval-EB's prior fit, stay on the scores themselves.

    GittinsEval-EB (``prior_estimator`` given): the shared prior starts as the
    problem's ``N(prior_mean, prior_var)`` and is refitted from the arms' score
    sums and counts by the estimator (see
    :class:`~gittinseval.core.empirical_prior.EmpiricalPriorEstimator`) once the number
    of observed scores has grown by ``refit_growth`` since the last fit.  After a
    refit every arm's posterior, index and recommendation score is recomputed
    from its sufficient statistics under ``N(mu_0, v_0)``.  ``v_0`` changes only
    when the estimate has moved by more than ``tolerance`` in log from it; it is
    then the estimate snapped to the estimator's log grid, and the root tables are
    those of :func:`~gittinseval.core.roots.root_schedule` at that ``v_0`` (built the
    first time a grid point is used, then cached).  The stopping signal and the
    recommendation keep their meaning under the current prior.

    Learned costs (:meth:`update_costs`, from a driver's
    :class:`~gittinseval.core.cost_learning.CostEstimator`): an arm whose expected cost
    changes to ``c'_k`` gets the roots at ``lambda c'_k`` from
    :func:`~gittinseval.core.roots.interpolated_root_schedule` (cubic in log cost between
    tables cached on a log grid of costs, within the roots' own accuracy of the table at
    ``lambda c'_k``), and its index is recomputed from its posterior, which the costs do not
    enter.  The index of every arm is then the Gittins index of the problem in which the
    current estimates are the arms' known costs: a refresh changes the problem being solved
    from now on, not the data observed, and the stopping signal compares the indices of that
    problem.  Costs charged before the refresh stay spent; the index values only the
    evaluations still to come, at the new costs.

    Args:
        batch_size: ``B``, examples per pull; ``None`` takes the benchmark's
            default (MMLU: 2/4/8 by subject size), else 8.
        lam: ``lambda > 0``, the cost scale of the dynamic program.
        kappa: weight of the posterior sd in the recommendation.
        cell_var: working variance ``tau_cell^2`` of one score.
        grid_points: grid size ``P`` of the root computation.
        refine_roots: solve each root off the grid (accurate to ``1e-6`` or 1 % of
            the stage cost); ``False`` keeps the paper's plain-grid roots.
        prior_estimator: learn the shared prior online with this estimator
            (GittinsEval-EB); ``None`` keeps the problem's prior fixed.
    """

    name = "gittins"
    label = "GittinsEval"
    concurrent = True
    follows_offsets = True

    def __init__(
        self,
        batch_size: int | None = None,
        lam: float = 1e-4,
        kappa: float = 1.0,
        cell_var: float = 0.25,
        grid_points: int = 1025,
        refine_roots: bool = True,
        prior_estimator: EmpiricalPriorEstimator | None = None,
    ) -> None:
        lam, cell_var = positive_float("lam", lam), positive_float("cell_var", cell_var)
        if not (math.isfinite(kappa) and kappa >= 0):
            # kappa < 0 would reward uncertainty: an optimistic, not a lower-confidence, rule.
            raise ValueError(f"kappa must be finite and >= 0 (1: LCB rule, 0: posterior mean), got {kappa!r}")
        self.batch_size = optional_batch_size(batch_size)
        self.lam = float(lam)
        self.kappa = float(kappa)
        self.cell_var = float(cell_var)
        self.grid_points = int(grid_points)
        self.refine_roots = bool(refine_roots)
        self.prior_estimator = prior_estimator

    def posterior_report(self) -> PosteriorReport:
        """The recommendation's own working variance and LCB width (``cell_var``, ``kappa``)."""
        return PosteriorReport(self.cell_var, self.kappa)

    def display_label(self, prior_name: str | None = None) -> str:
        if self.prior_estimator is not None:
            label = f"{self.label}-EB"
        else:
            label = self.label if prior_name is None else f"{self.label}-{prior_name[:1].upper()}"
        return label if self.kappa == 1.0 else f"{label} (kappa={self.kappa:g})"

    def reset(self, problem: EvaluationProblem, rng: np.random.Generator) -> None:
        n_arms, n_examples = problem.n_arms, problem.n_examples
        chain = EmpiricalTargetChain(n_examples, self.batch_size_for(problem), problem.prior_var, self.cell_var)
        self.problem = problem
        self.posterior = FiniteBenchmarkPosterior(
            n_arms, n_examples, problem.prior_mean, problem.prior_var, self.cell_var
        )
        self.distinct_costs, self.arm_table = np.unique(problem.costs, return_inverse=True)
        self.arm_costs = problem.costs.copy()
        self.batch_sizes = chain.batch_sizes.astype(np.int64)
        self.offsets = np.zeros(n_arms) if problem.offsets is None else problem.offsets
        self.order = RandomExampleOrder(n_arms, n_examples, rng)
        self.priority = rng.permutation(n_arms)
        self.tie_order = np.argsort(self.priority)
        self._stopped = False
        self._tables: dict[int, np.ndarray] = {}
        self.n_table_refreshes = 0
        self.n_prior_fits = 0
        self.n_observed = 0
        self.next_fit = 1
        self.prior_mean, self.prior_var = problem.prior_mean, problem.prior_var
        self.prior_var_estimate = problem.prior_var
        self.table_index = 0
        self.roots = self._root_table(0, problem.prior_var)
        self._refresh_all_arms()

    def _root_table(self, grid_index: int, prior_var: float) -> np.ndarray:
        """``[C, H + 1]`` roots at ``prior_var`` (cached by ``grid_index``); stage ``H`` is 0.

        A completed arm has root 0, so its index is its full-row mean.
        """
        if grid_index not in self._tables:
            self._tables[grid_index] = completed_root_table(
                self.problem.n_examples,
                self.resolved_batch_size,
                float(prior_var),
                tuple(float(c) for c in self.lam * self.distinct_costs),
                float(self.cell_var),
                int(self.grid_points),
                bool(self.refine_roots),
            )
        return self._tables[grid_index]

    def _refresh_all_arms(self) -> None:
        """Every arm's index and recommendation score from the current posterior."""
        post = self.posterior
        target = post.mean + self.offsets
        self.index = target - self.roots[self.arm_table, post.n_batches]
        self.recommend_score = target - self.kappa * np.sqrt(post.variance)
        # Selection sees only unfinished arms; the stopping rule compares them with
        # the completed ones.
        self.open_index = np.where(post.completed, -np.inf, self.index)
        # The stopping rule needs only the best completed index; until an arm completes
        # it is -inf and the rule cannot fire, so observe compares only then.
        self.best_completed_index = float(np.where(post.completed, self.index, -np.inf).max())

    def _fit_prior(self) -> None:
        """Refit ``N(mu_0, v_0)``, switch root tables if ``v_0`` moved beyond the tolerance, refresh all arms."""
        estimator, post = self.prior_estimator, self.posterior
        start_var = self.problem.prior_var
        self.prior_mean, self.prior_var_estimate = estimator.estimate(
            post.score_sum, post.n_seen, self.problem.prior_mean, start_var, self.cell_var
        )
        self.n_prior_fits += 1
        self.next_fit = max(self.n_observed + 1, math.ceil(self.n_observed * (1.0 + estimator.refit_growth)))
        if abs(math.log(self.prior_var_estimate / self.prior_var)) > estimator.tolerance:
            self.table_index = estimator.grid_index(self.prior_var_estimate, start_var)
            self.prior_var = estimator.grid_var(self.table_index, start_var)
            self.roots = self._root_table(self.table_index, self.prior_var)
            learned = np.flatnonzero(self.arm_table >= self.distinct_costs.size)
            if learned.size:
                self._learn_roots(learned)
            self.n_table_refreshes += 1
        post.set_prior(self.prior_mean, self.prior_var)
        self._refresh_all_arms()

    def update_costs(self, costs: np.ndarray) -> None:
        """Plan with the ``[K]`` costs from now on: new roots for the arms whose cost changed, every index refreshed."""
        costs = positive_finite_values(np.array(costs, dtype=np.float64), "costs", item="arms")
        if costs.shape != self.arm_costs.shape:
            raise ValueError(f"{costs.size} costs for {self.arm_costs.size} arms")
        changed = np.flatnonzero(costs != self.arm_costs)
        if not changed.size:
            return
        self.arm_costs[changed] = costs[changed]
        self._learn_roots(changed)
        self._refresh_all_arms()

    def _learn_roots(self, arms: np.ndarray) -> None:
        """Point ``arms`` at rows ``C + arm`` of ``self.roots``, their roots at ``lambda * arm_costs`` under the
        current prior (rows ``0 .. C - 1`` are the exact tables of the problem's distinct costs)."""
        exact_rows = self.distinct_costs.size
        if self.roots.shape[0] == exact_rows:
            # A writable copy of the cached exact table, with a row per arm for the learned costs.
            self.roots = np.vstack([self.roots, np.zeros((self.problem.n_arms, self.roots.shape[1]))])
        self.arm_table[arms] = exact_rows + arms
        self.roots[exact_rows + arms, :-1] = interpolated_root_schedule(
            self.problem.n_examples,
            self.resolved_batch_size,
            float(self.prior_var),
            self.lam * self.arm_costs[arms],
            cell_var=float(self.cell_var),
            grid_points=int(self.grid_points),
            refine=bool(self.refine_roots),
        )

    def select(self, busy: frozenset[int] = frozenset()) -> Request | None:
        arm = argmax_in_priority_order(excluding(self.open_index, busy), self.tie_order)
        if arm < 0:
            return None
        size = int(self.batch_sizes[self.posterior.n_batches[arm]])
        return Request(arm, self.order.take(arm, size))

    def observe(self, request: Request, scores: np.ndarray) -> None:
        arm = request.arm
        post = self.posterior
        post.update(arm, scores)
        self.n_observed += len(scores)
        if self.prior_estimator is not None and self.n_observed >= self.next_fit:
            self._fit_prior()
        else:
            target = post.mean[arm] + self.offsets[arm]
            self.index[arm] = target - self.roots[self.arm_table[arm], post.n_batches[arm]]
            self.recommend_score[arm] = target - self.kappa * math.sqrt(post.variance[arm])
            if post.n_seen[arm] == post.n_examples:
                self.open_index[arm] = -np.inf
                self.best_completed_index = max(self.best_completed_index, float(self.index[arm]))
            else:
                self.open_index[arm] = self.index[arm]
        if not self._stopped and self.best_completed_index > -np.inf:
            self._stopped = bool(self.best_completed_index >= self.open_index.max())

    def recommend(self) -> int:
        return argmax_in_priority_order(self.recommend_score, self.tie_order)

    @property
    def stop_signal(self) -> bool:
        return self._stopped

    def diagnostics(self) -> dict[str, Any]:
        """GittinsEval-EB: the final prior, its unsnapped ``v_0`` estimate, fits and table counts."""
        if self.prior_estimator is None:
            return {}
        return {
            "final_prior_mean": float(self.prior_mean),
            "final_prior_var": float(self.prior_var),
            "final_prior_var_estimate": float(self.prior_var_estimate),
            "prior_fits": self.n_prior_fits,
            "table_refreshes": self.n_table_refreshes,
            "tables_computed": len(self._tables),
        }
