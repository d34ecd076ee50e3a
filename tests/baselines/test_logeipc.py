"""LogEIPC (gittinseval.baselines.logeipc): log EI per cost, against BoTorch's LogEI and 50-digit arithmetic."""

import mpmath
import numpy as np
import pytest
import torch
from botorch.acquisition.analytic import LogExpectedImprovement

from gittinseval.baselines.logeipc import LogExpectedImprovementPerCost
from tests.baselines.bo_reference import expected_improvement_mp, mock_model


def test_logeipc_is_logei_minus_log_cost(fitted_gp):
    model, candidates, best_f = fitted_gp
    costs = torch.as_tensor(np.random.default_rng(3).uniform(0.1, 500.0, len(candidates)), dtype=torch.float64)
    logeipc = LogExpectedImprovementPerCost(model, best_f, costs)(candidates)
    logei = LogExpectedImprovement(model, best_f=torch.tensor(best_f, dtype=torch.float64))(candidates)
    torch.testing.assert_close(logeipc, logei - costs.log(), rtol=0, atol=1e-12)


def test_logeipc_is_the_log_of_ei_per_cost_on_known_posteriors():
    rng = np.random.default_rng(4)
    best_f = 0.6
    mean, sigma = rng.uniform(0.3, 0.9, 100), np.exp(rng.uniform(np.log(1e-3), np.log(0.3), 100))
    costs = np.exp(rng.uniform(-2, 8, 100))
    X = torch.zeros(100, 1, 1, dtype=torch.float64)
    values = LogExpectedImprovementPerCost(mock_model(mean, sigma), best_f, torch.as_tensor(costs))(X)
    for value, m, s, c in zip(values.tolist(), mean, sigma, costs, strict=True):
        reference = float(mpmath.log(expected_improvement_mp(m, s, best_f) / c))
        assert value == pytest.approx(reference, rel=1e-10, abs=1e-10)
