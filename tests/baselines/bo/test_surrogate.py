"""The surrogate of configuration-level BO (gittinseval.baselines.bo.surrogate): the categorical GP's closed
forms, its fit objective and its fit against BoTorch's own."""

import numpy as np
import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import MixedSingleTaskGP
from botorch.models.kernels.categorical import CategoricalKernel
from botorch.optim.closures import get_loss_closure_with_grads
from botorch.optim.utils import get_parameters_and_bounds
from gpytorch.mlls import ExactMarginalLogLikelihood

from gittinseval.baselines.bo import (
    CategoricalLossClosure,
    categorical_correlation,
    fit_mixed_gp,
    mismatch_of,
    mixed_gp,
)
from tests.baselines.bo_reference import categorical_data, stock_gp


@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_categorical_correlation_is_botorchs_kernel(n_dims):
    train_X, _, candidates = categorical_data(n_dims)
    lengthscale = torch.as_tensor(np.random.default_rng(n_dims).uniform(0.05, 5.0, n_dims))
    kernel = CategoricalKernel(ard_num_dims=n_dims).double()
    kernel.lengthscale = lengthscale
    expected = kernel(train_X, candidates).to_dense().detach()
    ours = categorical_correlation(mismatch_of(train_X, candidates), lengthscale)
    torch.testing.assert_close(ours, expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_loss_closure_is_botorchs_loss_and_gradient(n_dims):
    train_X, train_Y, _ = categorical_data(n_dims, seed=n_dims)
    mll = ExactMarginalLogLikelihood((model := mixed_gp(train_X, train_Y, 1e-6)).likelihood, model).train()
    parameters = get_parameters_and_bounds(mll, requires_grad=True)[0]
    reference, ours = get_loss_closure_with_grads(mll, parameters=parameters), CategoricalLossClosure(mll)
    rng = np.random.default_rng(0)
    for _ in range(5):
        with torch.no_grad():
            for parameter in parameters.values():
                parameter.copy_(torch.as_tensor(rng.normal(0.0, 2.0, size=parameter.shape)))
        (loss, grads), (expected_loss, expected_grads) = ours(), reference()
        torch.testing.assert_close(loss, expected_loss.detach(), rtol=0, atol=1e-10)
        for grad, expected in zip(grads, expected_grads, strict=True):
            torch.testing.assert_close(grad, expected, rtol=0, atol=1e-10)


def test_loss_closure_hands_a_failed_cholesky_to_botorch(monkeypatch):
    train_X, train_Y, _ = categorical_data(2)
    mll = ExactMarginalLogLikelihood((model := mixed_gp(train_X, train_Y, 1e-6)).likelihood, model).train()
    closure = CategoricalLossClosure(mll)
    calls = []
    monkeypatch.setattr(closure, "botorch_closure", lambda: calls.append(1) or "botorch")
    monkeypatch.setattr(torch.linalg, "cholesky_ex", lambda a: (a, torch.tensor(1)))
    assert closure() == "botorch" and calls == [1]


@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_fit_reaches_botorchs_optimum_and_posterior_is_botorchs(n_dims):
    train_X, train_Y, candidates = categorical_data(n_dims, seed=10 + n_dims)
    ours = fit_mixed_gp(mixed_gp(train_X, train_Y, 1e-6))
    stock = stock_gp(train_X, train_Y)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(stock.likelihood, stock), max_attempts=1)
    # The same optimum: the same marginal likelihood (the optimiser stops within its tolerance of it).
    losses = []
    for model in (ours, stock):
        mll = ExactMarginalLogLikelihood(model.likelihood, model).train()
        losses.append(get_loss_closure_with_grads(mll, get_parameters_and_bounds(mll, requires_grad=True)[0])()[0])
        model.eval()
    torch.testing.assert_close(losses[0], losses[1], rtol=1e-8, atol=0)
    # The closed-form posterior of the fitted model against BoTorch's on the same model.
    with torch.no_grad():
        fast = ours.posterior(candidates.unsqueeze(-2))
        reference = MixedSingleTaskGP.posterior(ours, candidates.unsqueeze(-2))
    torch.testing.assert_close(fast.mean, reference.mean, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(fast.variance, reference.variance, rtol=1e-10, atol=1e-14)
