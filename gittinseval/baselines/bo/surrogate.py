"""The surrogate of the configuration-level BO baselines: an all-categorical GP, its closed forms and its fit.

:func:`mixed_gp` builds BoTorch's ``MixedSingleTaskGP`` with every input dimension
categorical (:class:`CategoricalGP`, whose posterior at single points is computed in
closed form); :func:`fit_mixed_gp` maximises its marginal likelihood with BoTorch's
fit and the objective of :class:`CategoricalLossClosure`; :func:`hyperparameters_of`
keeps a fitted state to start from, or to fall back on.  The policy that refits it
at every step is :class:`~gittinseval.baselines.bo.policy.ConfigurationBOPolicy`.
"""

from __future__ import annotations

import math
from typing import Any

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

__all__ = [
    "DTYPE",
    "FIT_ERRORS",
    "CategoricalGP",
    "CategoricalLossClosure",
    "categorical_correlation",
    "fit_mixed_gp",
    "hyperparameters_of",
    "mismatch_of",
    "mixed_gp",
]

DTYPE = torch.float64

# Errors a GP fit may raise on degenerate data; anything else is a bug and propagates.
FIT_ERRORS = (ModelFittingError, NotPSDError, RuntimeError, ValueError)


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
