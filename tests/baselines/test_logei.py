"""LogEI (gittinseval.baselines.logei): BoTorch's log expected improvement, blind to costs, and the stopping rule
``max_x log EI(x) - log c(x) <= log lambda``."""

import math

import mpmath
import numpy as np
import pytest
import torch

from gittinseval.baselines.logei import LogEIPolicy
from tests.baselines.bo_reference import expected_improvement_mp, mock_model


def test_the_acquisition_is_the_log_of_the_expected_improvement_whatever_the_costs():
    rng = np.random.default_rng(5)
    best_f = 0.55
    mean, sigma = rng.uniform(0.2, 0.9, 60), np.exp(rng.uniform(np.log(1e-3), np.log(0.3), 60))
    X = torch.zeros(60, 1, 1, dtype=torch.float64)
    policy = LogEIPolicy()
    cheap = policy.acquisition_values(mock_model(mean, sigma), X, best_f, torch.ones(60, dtype=torch.float64))
    dear = policy.acquisition_values(mock_model(mean, sigma), X, best_f, torch.full((60,), 1e4, dtype=torch.float64))
    torch.testing.assert_close(cheap, dear, rtol=0, atol=0)
    for value, m, s in zip(cheap.tolist(), mean, sigma, strict=True):
        assert value == pytest.approx(float(mpmath.log(expected_improvement_mp(m, s, best_f))), rel=1e-10, abs=1e-10)


@pytest.mark.parametrize(("lam", "fires"), [(5e-4, False), (1e-3, True), (2e-3, True)])
def test_the_stop_rule_compares_the_best_log_ei_per_cost_with_log_lambda(lam, fires):
    # EI per cost: 1e-3 / 1 and 2e-3 / 4 = 5e-4, so the best is 1e-3: the rule fires from lambda = 1e-3 on.
    values = torch.tensor([math.log(1e-3), math.log(2e-3)], dtype=torch.float64)
    costs = torch.tensor([1.0, 4.0], dtype=torch.float64)
    assert LogEIPolicy(lam=lam).stop_rule_fires(values, 0.7, costs) is fires


def test_the_policy_is_named_as_its_config():
    policy = LogEIPolicy()
    assert (policy.name, policy.label) == ("logei", "LogEI")
