"""Fixtures of the configuration-level BO tests (tests/baselines/bo, test_pbgi, test_logei, test_logeipc)."""

import numpy as np
import pytest
import torch

from gittinseval.baselines.bo import fit_mixed_gp, mixed_gp


@pytest.fixture(scope="module")
def fitted_gp():
    """A GP fitted on 12 of 30 configurations with two categorical features."""
    rng = np.random.default_rng(0)
    codes = np.stack(np.meshgrid(np.arange(6), np.arange(5)), -1).reshape(-1, 2)
    truth = 0.5 + 0.1 * rng.normal(size=6)[codes[:, 0]] + 0.05 * rng.normal(size=5)[codes[:, 1]]
    observed = rng.choice(len(codes), size=12, replace=False)
    X = torch.as_tensor(codes, dtype=torch.float64)
    Y = torch.as_tensor(truth[observed, None], dtype=torch.float64)
    model = fit_mixed_gp(mixed_gp(X[observed], Y, 1e-6))
    candidates = X[np.setdiff1d(np.arange(len(codes)), observed)].unsqueeze(-2)
    return model, candidates, float(Y.max())
