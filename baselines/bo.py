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
from botorch.exceptions.errors import ModelFittingError
from botorch.fit import fit_gpytorch_mll
from botorch.models import MixedSingleTaskGP
from botorch.models.transforms.outcome import Standardize
from botorch.optim.closures import get_loss_closure_with_grads
from botorch.optim.utils import get_parameters_and_bounds
from botorch.posteriors.gpytorch import GPyTorchPosterior
from gpytorch.distributions import MultivariateNormal
from gpytorch.mlls import ExactMarginalLogLikelihood
from linear_operator.utils.errors import NotPSDError
from torch import Tensor

from gittinseval.core.protocol import EvaluationProblem, Policy, Request, argmax_by_priority
from gittinseval.utils.validation import positive_finite_values, positive_float

__all__ = [
    "CategoricalGP",
    "CategoricalLossClosure",
    "ConfigurationBOPolicy",
    "fit_mixed_gp",
    "hyperparameters_of",
    "initial_design_size",
    "mixed_gp",
]

log = logging.getLogger(__name__)

DTYPE = torch.float64

# Errors a GP fit may raise on degenerate data; anything else is a bug and propagates.
FIT_ERRORS = (ModelFittingError, NotPSDError, RuntimeError, ValueError)


def initial_design_size(n_arms: int, init_fraction: float) -> int:
    """``max(1, round(init_fraction * K))`` configurations, at most ``K`` (halves round up)."""
    return min(n_arms, max(1, math.floor(init_fraction * n_arms + 0.5)))


def mixed_gp(
    train_X: Tensor, train_Y: Tensor, noise_var: float, hyperparameters: dict[str, Tensor] | None = None
) -> CategoricalGP:
    """An unfitted :class:`CategoricalGP` (a ``MixedSingleTaskGP`` with every input dimension categorical).

    Args:
        train_X: ``[n, D]`` categorical codes (float64).
        train_Y: ``[n, 1]`` observed row means; the model standardises them.
        noise_var: fixed observation variance in the units of ``train_Y``.
        hyperparameters: kernel and mean state to start from (as returned by
            :func:`hyperparameters_of`); ``None`` for BoTorch's defaults.
    """
    model = CategoricalGP(
        train_X,
        train_Y,
        cat_dims=list(range(train_X.shape[-1])),
        train_Yvar=torch.full_like(train_Y, noise_var),
        outcome_transform=Standardize(m=1),
    )
    if hyperparameters is not None:
        model.load_state_dict(hyperparameters, strict=False)
    return model


def categorical_correlation(mismatch: Tensor, lengthscale: Tensor) -> Tensor:
    r"""``exp(-(1/D) sum_d mismatch[d] / l_d)``: BoTorch's ``CategoricalKernel`` from its mismatch indicators.

    Args:
        mismatch: ``[D, ...]`` indicators ``[x_d != x'_d]`` (0. or 1.) of each pair of inputs.
        lengthscale: ``[D]`` lengthscales ``l``.

    Returns:
        ``[...]`` correlations, summed over ``d`` in order as the kernel's mean does.
    """
    distance = mismatch[0] / lengthscale[0]
    for d in range(1, mismatch.shape[0]):
        distance = distance + mismatch[d] / lengthscale[d]
    return torch.exp(-(distance / mismatch.shape[0]))


def mismatch_of(x1: Tensor, x2: Tensor) -> Tensor:
    """``[D, n1, n2]`` indicators ``[x1[i, d] != x2[j, d]]`` (in ``x1``'s dtype) of ``x1 [n1, D]``, ``x2 [n2, D]``."""
    return (x1.T.unsqueeze(-1) != x2.T.unsqueeze(-2)).to(x1.dtype)


class CategoricalGP(MixedSingleTaskGP):
    r"""``MixedSingleTaskGP`` with every dimension categorical, whose posterior at single points is in closed form.

    The model, its fit and its state are BoTorch's.  :meth:`posterior` at a batch of
    single points ``X [M, 1, D]`` (eval mode; no output indices, observation noise or
    posterior transform) computes, in the standardised units of the training targets,

        mean = c + k^T A^{-1} (y - c 1),      variance = s - k^T A^{-1} k,

    ``A = s C + diag(noise)`` over the ``n`` training inputs (:class:`CategoricalLossClosure`)
    and ``k [n] = s C(x, train)`` for each point ``x``, from the Cholesky factor of
    ``A``, then un-standardises them with the model's outcome transform.  That is
    GPyTorch's exact prediction for these points, to rounding, without its batched
    lazy kernel over ``M`` copies of the training set.  Any other call is BoTorch's.
    """

    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | Tensor = False,
        posterior_transform: Any = None,
    ) -> GPyTorchPosterior:
        simple = output_indices is None and observation_noise is False and posterior_transform is None
        if not simple or X.dim() != 3 or X.shape[-2] != 1:
            return super().posterior(X, output_indices, observation_noise, posterior_transform)
        self.eval()
        (train_X,) = self.train_inputs
        kernel = self.covar_module
        scale = kernel.outputscale.detach()
        lengths = kernel.base_kernel.lengthscale.detach().view(-1)
        constant = self.mean_module.constant.detach()
        with torch.no_grad():
            covariance = categorical_correlation(mismatch_of(train_X, train_X), lengths) * scale
            factor, info = torch.linalg.cholesky_ex(covariance + torch.diag(self.likelihood.noise))
            if info.item() != 0:  # GPyTorch retries with jitter
                return super().posterior(X)
            cross = categorical_correlation(mismatch_of(train_X, X[:, 0, :]), lengths) * scale  # [n, M]
            alpha = torch.cholesky_solve((self.train_targets - constant).unsqueeze(-1), factor)  # [n, 1]
            mean = constant + (cross * alpha).sum(0)
            whitened = torch.linalg.solve_triangular(factor, cross, upper=False)
            variance = scale - whitened.square().sum(0)
        standardised = MultivariateNormal(mean.unsqueeze(-1), variance.view(-1, 1, 1))
        return self.outcome_transform.untransform_posterior(GPyTorchPosterior(standardised), X=X)


def fit_mixed_gp(model: MixedSingleTaskGP) -> MixedSingleTaskGP:
    """Maximise the marginal likelihood of ``model`` from its current hyperparameters (one attempt).

    BoTorch's fit (L-BFGS-B through ``fit_gpytorch_mll``) with the objective evaluated
    by :class:`CategoricalLossClosure`.  Raises whatever ``fit_gpytorch_mll`` raises
    when that attempt fails.
    """
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    fit_gpytorch_mll(mll, closure=CategoricalLossClosure(mll), max_attempts=1)
    return model


class CategoricalLossClosure:
    r"""BoTorch's fit objective for the all-categorical GP of :func:`mixed_gp`, in closed form.

    Called with no arguments, returns ``(loss, grads)`` as BoTorch's closure for an
    ``ExactMarginalLogLikelihood`` does: the negative marginal log likelihood per
    observation and its gradient in the trainable parameters (in the order of
    ``get_parameters_and_bounds``), at their current values:

        loss = (r^T A^{-1} r + log|A| + n log(2 pi)) / (2 n),      r = y - c 1,
        A = s C + diag(noise),     C[i, j] = exp(-(1/D) sum_d M_d[i, j] / l_d),

    ``y [n]`` the standardised targets, ``c`` the constant mean, ``s`` the output
    scale, ``l [D]`` the lengthscales, ``noise [n]`` the fixed standardised noise and
    ``M_d[i, j] = [x_id != x_jd]`` the mismatch of the training inputs in dimension
    ``d``.  With ``alpha = A^{-1} r`` and ``W = A^{-1} - alpha alpha^T`` (from the
    Cholesky factor of ``A``), the gradient is

        d loss / dc = -sum(alpha) / n,      d loss / ds = sum(W * C) / (2 n),
        d loss / dl_d = s sum(W * C * M_d) / (2 n D l_d^2),

    carried to the raw parameters through their constraints' transforms by autograd.
    GPyTorch rebuilds the mismatch at every evaluation and differentiates through its
    lazy tensors, whose dispatch costs more than the arithmetic at these sizes; the
    ``[D, n, n]`` mismatch is computed here once per fit.  Value and gradient equal
    BoTorch's to rounding.  An evaluation whose Cholesky fails is handed to BoTorch's
    own closure, which retries with jitter.

    Args:
        mll: ``ExactMarginalLogLikelihood`` of a :func:`mixed_gp` model.
    """

    def __init__(self, mll: ExactMarginalLogLikelihood) -> None:
        model = mll.model
        (train_X,) = model.train_inputs
        self.model = model
        self.mismatch = mismatch_of(train_X, train_X)  # [D, n, n]
        self.parameters = get_parameters_and_bounds(mll, requires_grad=True)[0]
        self.botorch_closure = get_loss_closure_with_grads(mll, parameters=self.parameters)

    def __call__(self) -> tuple[Tensor, tuple[Tensor | None, ...]]:
        model = self.model
        kernel = model.covar_module
        n_dims = self.mismatch.shape[0]
        with torch.enable_grad():
            outputscale = kernel.outputscale
            lengthscale = kernel.base_kernel.lengthscale.view(-1)  # [D]
            constant = model.mean_module.constant
        with torch.no_grad():
            scale, lengths = outputscale.detach(), lengthscale.detach()
            correlation = categorical_correlation(self.mismatch, lengths)
            covariance = correlation * scale + torch.diag(model.likelihood.noise)
            factor, info = torch.linalg.cholesky_ex(covariance)
            if info.item() != 0:
                return self.botorch_closure()
            residual = (model.train_targets - constant.detach()).unsqueeze(-1)  # [n, 1]
            n = residual.shape[0]
            whitened = torch.linalg.solve_triangular(factor, residual, upper=False)
            loss = (n * math.log(2 * math.pi) + whitened.square().sum()) / (2 * n) + factor.diagonal().log().sum() / n
            alpha = torch.cholesky_solve(residual, factor)
            weighted = (torch.cholesky_inverse(factor) - alpha * alpha.T).mul_(correlation)  # W * C
            grad_scale = weighted.sum() / (2 * n)
            grad_lengths = scale * torch.einsum("ij,dij->d", weighted, self.mismatch) / (2 * n * n_dims * lengths**2)
            grad_constant = -alpha.sum() / n
        with torch.enable_grad():
            # The chain rule to the raw parameters: the gradient of <d loss / d value, value>.
            linear = (outputscale * grad_scale + (lengthscale * grad_lengths).sum() + constant * grad_constant).sum()
            grads = torch.autograd.grad(linear, list(self.parameters.values()), allow_unused=True)
        return loss, grads


def hyperparameters_of(model: MixedSingleTaskGP) -> dict[str, Tensor]:
    """The kernel and mean state of ``model``, free of its training-data buffers."""
    return {
        f"{name}.{key}": value.detach().clone()
        for name in ("covar_module", "mean_module")
        for key, value in getattr(model, name).state_dict().items()
    }


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
