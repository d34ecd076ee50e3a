"""Configuration-level Bayesian optimisation: the policy shared by PBGI, LogEI and LogEIPC.

Each candidate is a whole configuration (arm).  Querying configuration ``k``
requests all ``N`` of its examples, reveals its full-row mean ``Zbar_k`` and
costs ``N c_k`` in the units of ``problem.costs`` (``N`` under unit cost).

The run (paper, "Baseline initialization and warm-up"):

1. Initial design: ``n_0 = max(1, round(init_fraction K))`` configurations drawn
   uniformly at random without replacement (8 of 152 AlpacaEval arms, 75 of 1500
   per MMLU subject), counted in the budget.
2. Then, one configuration per step: the unevaluated configuration of largest
   acquisition value under a mixed-categorical GP refitted to every observation.
3. No query ever makes the spend exceed ``problem.budget``: a configuration whose
   cost does not fit in the remaining budget is never requested, and the policy
   stops (``select`` returns ``None``) when none fits.  The same rule holds under
   unit cost, where it evaluates ``floor(budget / N)`` configurations in all
   (15 of 152 on AlpacaEval, 150 of 1500 per MMLU subject at a 10% budget), i.e.
   the budget is used up to the granularity of one configuration.

Recommendation: the best observed configuration.  The stopping signal is the
subclass's rule (Xie et al. 2025); it is recorded and the run goes on.

Acquisition cost.  Cost-aware acquisitions and stopping rules see the cost
``c(x)`` of a configuration in the units the paper's ``lambda = 1e-4`` refers to:
its full-evaluation cost ``N c_k`` in raw price units when the per-example costs
are prices, and ``c(x) = 1`` for every configuration under unit cost (every
``c_k = 1``), i.e. one configuration evaluation is the unit, as in the uniform-cost
PBGI of Xie et al. (2024).
"""

from __future__ import annotations

import logging
import math
from abc import abstractmethod
from typing import Any

import numpy as np
import torch
from botorch.models import MixedSingleTaskGP
from torch import Tensor

from gittinseval.baselines.bo.surrogate import DTYPE, FIT_ERRORS, fit_mixed_gp, hyperparameters_of, mixed_gp
from gittinseval.core.protocol import EvaluationProblem, Policy, Request, argmax_by_priority
from gittinseval.utils.validation import positive_finite_values, positive_float

__all__ = ["ConfigurationBOPolicy", "initial_design_size"]

log = logging.getLogger(__name__)


def initial_design_size(n_arms: int, init_fraction: float) -> int:
    """``max(1, round(init_fraction * K))`` configurations, at most ``K`` (halves round up)."""
    return min(n_arms, max(1, math.floor(init_fraction * n_arms + 0.5)))


class ConfigurationBOPolicy(Policy):
    """Configuration-level BO on a mixed-categorical GP (see the module docstring).

    Subclasses define the acquisition in :meth:`acquisition_values` and the
    stopping rule in :meth:`stop_rule_fires`, both over the ``M`` unevaluated
    configurations.

    Surrogate: ``MixedSingleTaskGP`` over ``problem.features`` (``[K, D]`` integer
    codes, every dimension categorical; the arm id when there are none), outcome
    standardised, fixed noise ``noise_var`` on the row means, float64, refitted
    after every observation once the initial design is complete.  If a fit fails,
    it is retried once from randomly drawn hyperparameters; if that fails too,
    the previous step's hyperparameters are used unfitted, and without any, the
    step queries a uniformly random affordable configuration (and leaves the
    stopping signal as it was).  Each failure logs a warning and counts in
    ``fit_failures``.

    Attributes after :meth:`reset`: ``n_initial`` (initial design size),
    ``fit_failures`` (failed fit attempts), ``fallback_steps`` (steps whose
    surrogate was not freshly fitted).  All three are also reported by
    :meth:`hyperparameters`, so the run summary carries them (the BO curve
    aggregation reads ``n_initial``).

    Args:
        lam: ``lambda > 0``, the cost scale of the cost-aware acquisition and stopping rules.
        init_fraction: share of the configurations in the initial design, in (0, 1].
        noise_var: fixed observation variance of a row mean (near-noiseless).
    """

    name = "bo"
    label = "BO"
    uses_prior = False
    live_limitation = (
        "configuration-level BO evaluates whole configurations (every example of an arm in one request) "
        "over a GP on configuration features; a live run asks for batches of examples"
    )

    def __init__(self, lam: float = 1e-4, init_fraction: float = 0.05, noise_var: float = 1e-6) -> None:
        lam, noise_var = positive_float("lam", lam), positive_float("noise_var", noise_var)
        if not (0 < init_fraction <= 1):
            raise ValueError(f"init_fraction must be in (0, 1], got {init_fraction!r}")
        self.lam = float(lam)
        self.init_fraction = float(init_fraction)
        self.noise_var = float(noise_var)

    def hyperparameters(self) -> dict[str, Any]:
        # The initial design's size is recorded beside the parameters: the BO curves'
        # aggregation reads it.
        params = super().hyperparameters()
        if hasattr(self, "n_initial"):
            params.update(n_initial=self.n_initial, fit_failures=self.fit_failures, fallback_steps=self.fallback_steps)
        return params

    # --- the two things a BO baseline defines -------------------------------------------

    @abstractmethod
    def acquisition_values(self, model: MixedSingleTaskGP, candidates: Tensor, best_f: float, costs: Tensor) -> Tensor:
        """Acquisition value ``[M]`` of the candidates ``[M, 1, D]`` with acquisition costs ``[M]``."""

    @abstractmethod
    def stop_rule_fires(self, values: Tensor, best_f: float, costs: Tensor) -> bool:
        """Whether the stopping rule holds, given the ``[M]`` acquisition values of every candidate."""

    # --- the protocol ------------------------------------------------------------------

    def reset(self, problem: EvaluationProblem, rng: np.random.Generator) -> None:
        n_arms = problem.n_arms
        features = np.arange(n_arms)[:, None] if problem.features is None else np.asarray(problem.features)
        if features.ndim != 2:
            raise ValueError(f"features must be a [K, D] array of categorical codes, got shape {features.shape}")
        self.problem = problem
        self.rng = rng
        self.inputs = torch.tensor(features, dtype=DTYPE)  # a copy: benchmark arrays are read-only
        # Unit cost (every c_k = 1): one configuration evaluation is the unit of lambda.
        self.unit_cost = bool(np.all(problem.costs == 1.0))
        self._set_costs(problem.costs)
        self.n_initial = initial_design_size(n_arms, self.init_fraction)
        self.initial_order = rng.permutation(n_arms)
        self.priority = rng.permutation(n_arms)
        self.values = np.full(n_arms, np.nan)
        self.evaluated = np.zeros(n_arms, dtype=bool)
        self.spent = 0.0
        self.best_arm = -1
        self.hyperparameter_state: dict[str, Tensor] | None = None
        self.scores = np.full(n_arms, -np.inf)  # acquisition value of each unevaluated arm
        self.use_random_step = False
        self.fit_failures = 0
        self.fallback_steps = 0
        self._stopped = False

    def _set_costs(self, costs: np.ndarray) -> None:
        """Query costs ``N c_k`` and the acquisition's costs (ones under unit cost) from per-example ``costs``."""
        self.query_costs = self.problem.n_examples * costs
        self.acquisition_costs = torch.as_tensor(
            np.ones(costs.size) if self.unit_cost else self.query_costs, dtype=DTYPE
        )

    def update_costs(self, costs: np.ndarray) -> None:
        """Plan with the learned ``[K]`` costs: what a query costs against the budget, and (unless the problem
        has unit costs) the acquisition's costs, from the next refit on."""
        self._set_costs(positive_finite_values(np.array(costs, dtype=np.float64), "costs", item="arms"))

    def affordable(self) -> np.ndarray:
        """``[K]`` mask of the unevaluated configurations whose cost fits in the remaining budget."""
        # Relative slack so that a budget meant to buy exactly n configurations does.
        fits = self.spent + self.query_costs <= self.problem.budget * (1 + 1e-12)
        return ~self.evaluated & fits

    def select(self) -> Request | None:
        affordable = self.affordable()
        if not affordable.any():
            return None
        n_evaluated = int(self.evaluated.sum())
        if n_evaluated < self.n_initial:
            arm = int(next(a for a in self.initial_order if affordable[a]))
        elif self.use_random_step:
            arm = int(self.rng.choice(np.flatnonzero(affordable)))
        else:
            arm = argmax_by_priority(np.where(affordable, self.scores, -np.inf), self.priority)
            if arm < 0:  # every affordable score is -inf (e.g. EI underflow): break the tie at random
                arm = argmax_by_priority(np.where(affordable, 0.0, -np.inf), self.priority)
        return Request(arm, np.arange(self.problem.n_examples))

    def observe(self, request: Request, scores: np.ndarray) -> None:
        arm = request.arm
        if request.size != self.problem.n_examples or self.evaluated[arm]:
            raise ValueError(f"configuration {arm}: a BO query evaluates a new configuration on all examples")
        self.values[arm] = scores.mean()
        self.evaluated[arm] = True
        self.spent += self.query_costs[arm]
        self.best_arm = argmax_by_priority(np.where(self.evaluated, self.values, -np.inf), self.priority)
        if self.evaluated.sum() >= self.n_initial and self.affordable().any():
            self._refresh_acquisition()

    def recommend(self) -> int:
        return self.best_arm

    @property
    def stop_signal(self) -> bool:
        return self._stopped

    # --- surrogate and acquisition ------------------------------------------------------

    def _refresh_acquisition(self) -> None:
        """Refit the GP and score every unevaluated configuration; update the stopping signal."""
        model = self._fit_surrogate()
        self.use_random_step = model is None
        if model is None:
            return
        candidates = np.flatnonzero(~self.evaluated)
        best_f = float(self.values[self.best_arm])
        costs = self.acquisition_costs[candidates]
        with torch.no_grad():
            values = self.acquisition_values(model, self.inputs[candidates].unsqueeze(-2), best_f, costs)
        self.scores = np.full(self.problem.n_arms, -np.inf)
        # A NaN value (a numerical failure at one candidate) must not win the argmax.
        self.scores[candidates] = np.nan_to_num(values.numpy(), nan=-np.inf)
        if not self._stopped:
            self._stopped = bool(self.stop_rule_fires(values, best_f, costs))

    def _fit_surrogate(self) -> MixedSingleTaskGP | None:
        """Fitted GP, or after two failed fits the previous hyperparameters, or ``None``."""
        observed = np.flatnonzero(self.evaluated)
        train_X = self.inputs[observed]
        train_Y = torch.as_tensor(self.values[observed, None], dtype=DTYPE)
        for initial in (None, "random"):
            model = mixed_gp(train_X, train_Y, self.noise_var)
            if initial == "random":
                self._randomise_hyperparameters(model)
            try:
                fit_mixed_gp(model)
            except FIT_ERRORS as error:
                self.fit_failures += 1
                log.warning(
                    "%s: GP fit on %d configurations failed (%s start): %s",
                    self.name, observed.size, initial or "default", error,
                )
                continue
            self.hyperparameter_state = hyperparameters_of(model)
            return model
        self.fallback_steps += 1
        if self.hyperparameter_state is None:
            log.warning("%s: no fitted hyperparameters yet; querying a random configuration", self.name)
            return None
        log.warning("%s: reusing the previous step's GP hyperparameters", self.name)
        return mixed_gp(train_X, train_Y, self.noise_var, self.hyperparameter_state).eval()

    def _randomise_hyperparameters(self, model: MixedSingleTaskGP) -> None:
        """A restart point: lengthscales and output scale log-uniform on [0.1, 10]."""
        kernel = model.covar_module
        shape = kernel.base_kernel.lengthscale.shape
        log_draws = self.rng.uniform(math.log(0.1), math.log(10.0), size=1 + int(np.prod(shape)))
        kernel.outputscale = torch.tensor(math.exp(log_draws[0]), dtype=DTYPE)
        kernel.base_kernel.lengthscale = torch.as_tensor(np.exp(log_draws[1:]).reshape(shape), dtype=DTYPE)
