"""Shared by the configuration-level BO tests: 50-digit expected improvement, mock posteriors, small categorical
data sets, BoTorch's own GP as the surrogate's reference, and toy benchmarks run through the simulator."""

import mpmath
import numpy as np
import torch
from botorch.models import MixedSingleTaskGP
from botorch.models.transforms.outcome import Standardize
from botorch.utils.testing import MockModel, MockPosterior

from gittinseval.baselines.logei import LogEIPolicy
from gittinseval.baselines.logeipc import LogEIPCPolicy
from gittinseval.baselines.pbgi import PBGIPolicy
from gittinseval.core.priors import GaussianPrior
from gittinseval.data import Benchmark
from gittinseval.sim.simulator import simulate

mpmath.mp.dps = 50


POLICIES = [PBGIPolicy, LogEIPolicy, LogEIPCPolicy]


def expected_improvement_mp(mean, sigma, threshold):
    """``E[max(f - threshold, 0)]``, ``f ~ N(mean, sigma^2)``, in 50-digit arithmetic."""
    mean, sigma, threshold = (mpmath.mpf(float(v)) for v in (mean, sigma, threshold))
    z = (mean - threshold) / sigma
    return sigma * (z * mpmath.ncdf(z) + mpmath.npdf(z))


def mock_model(mean, sigma):
    """A model whose posterior at any ``[M, 1, D]`` input is ``N(mean, sigma^2)`` elementwise."""
    mean = torch.as_tensor(mean, dtype=torch.float64).reshape(-1, 1, 1)
    variance = torch.as_tensor(sigma, dtype=torch.float64).reshape(-1, 1, 1) ** 2
    return MockModel(MockPosterior(mean=mean, variance=variance))


def posterior_moments(model, candidates):
    posterior = model.posterior(candidates)
    return posterior.mean.reshape(-1).detach(), posterior.variance.reshape(-1).detach().sqrt()


def categorical_data(n_dims, n_train=40, seed=0):
    """All ``[K, D]`` codes of a small grid (``K = 4^D``, 5 x 4 x 3 for ``D = 3``), ``n_train`` of them observed."""
    rng = np.random.default_rng(seed)
    sizes = (5, 4, 3)[:n_dims] if n_dims > 1 else (20,)
    codes = np.stack(np.meshgrid(*(np.arange(size) for size in sizes), indexing="ij"), -1).reshape(-1, n_dims)
    observed = rng.choice(len(codes), size=min(n_train, len(codes) - 5), replace=False)
    X = torch.as_tensor(codes, dtype=torch.float64)
    Y = torch.as_tensor(0.5 + 0.1 * rng.normal(size=(len(observed), 1)))
    unobserved = np.setdiff1d(np.arange(len(codes)), observed)
    return X[observed], Y, X[unobserved]


def stock_gp(train_X, train_Y, noise_var=1e-6):
    """BoTorch's own ``MixedSingleTaskGP`` as :func:`mixed_gp` configures it."""
    return MixedSingleTaskGP(train_X, train_Y, cat_dims=list(range(train_X.shape[-1])),
                             train_Yvar=torch.full_like(train_Y, noise_var), outcome_transform=Standardize(m=1))


def random_benchmark(n_arms=40, n_examples=30, seed=0):
    """Binary scores; each arm a distinct (model, template) pair of a 10 x 10 grid."""
    rng = np.random.default_rng(seed)
    means = rng.uniform(0.2, 0.8, n_arms)
    scores = (rng.uniform(size=(n_arms, n_examples)) < means[:, None]).astype(float)
    cells = rng.choice(100, size=n_arms, replace=False)
    features = np.stack([cells // 10, cells % 10], axis=1)
    return Benchmark(name="toy", scores=scores, prices=rng.choice([0.5, 1.0, 7.0], n_arms), features=features)


def run(policy, benchmark, costs, seed=0, budget_fraction=0.1):
    return simulate(benchmark, policy, costs, GaussianPrior(0.5, 0.04, "g"), budget_fraction=budget_fraction, seed=seed)
