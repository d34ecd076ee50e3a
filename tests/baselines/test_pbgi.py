"""PBGI (gittinseval.baselines.pbgi): the Pandora's-box Gittins index solves EI = lambda c, against 50-digit
arithmetic and a scalar root finder."""

import math

import mpmath
import numpy as np
import pytest
import torch
from scipy.optimize import brentq
from scipy.stats import norm

from gittinseval.baselines.pbgi import PandoraBoxGittinsIndex, solve_log_ei_equation
from tests.baselines.bo_reference import expected_improvement_mp, mock_model, posterior_moments


def test_index_equation_root_is_exact_over_a_wide_range_of_targets():
    targets = torch.linspace(-60.0, 25.0, 301, dtype=torch.float64)
    roots = solve_log_ei_equation(targets)
    for u, t in zip(roots.tolist(), targets.tolist(), strict=True):
        u = mpmath.mpf(u)
        log_h = mpmath.log(u * mpmath.ncdf(u) + mpmath.npdf(u))
        assert abs(float(log_h) - t) <= 1e-10, (t, float(log_h))


def test_pbgi_index_solves_ei_equals_lambda_cost_on_a_fitted_gp(fitted_gp):
    model, candidates, _ = fitted_gp
    lam = 1e-4
    costs = torch.as_tensor(np.random.default_rng(1).uniform(1.0, 2000.0, len(candidates)), dtype=torch.float64)
    with torch.no_grad():
        index = PandoraBoxGittinsIndex(model, lam, costs)(candidates)
    mean, sigma = posterior_moments(model, candidates)
    assert index.shape == (len(candidates),)
    for m, s, g, c in zip(mean, sigma, index, costs, strict=True):
        ei = expected_improvement_mp(m, s, g)
        assert abs(float(ei / (lam * float(c))) - 1) < 1e-8


def test_pbgi_index_decreases_in_cost(fitted_gp):
    model, candidates, _ = fitted_gp
    costs = torch.logspace(-2, 5, 40, dtype=torch.float64)
    point = candidates[:1].expand(len(costs), 1, -1)
    index = PandoraBoxGittinsIndex(model, 1e-4, costs)(point)
    assert (index.diff() < 0).all()


def test_pbgi_index_matches_a_scalar_root_finder_on_random_posteriors():
    rng = np.random.default_rng(2)
    mean, sigma = rng.uniform(0, 1, 200), np.exp(rng.uniform(np.log(1e-3), np.log(0.5), 200))
    costs = np.exp(rng.uniform(0, np.log(1e4), 200))
    lam = 1e-4
    X = torch.zeros(200, 1, 1, dtype=torch.float64)
    index = PandoraBoxGittinsIndex(mock_model(mean, sigma), lam, torch.as_tensor(costs))(X)
    for m, s, c, g in zip(mean, sigma, costs, index.tolist(), strict=True):

        def excess(threshold, m=m, s=s, c=c):
            z = (m - threshold) / s
            return s * (z * norm.cdf(z) + norm.pdf(z)) - lam * c

        reference = brentq(excess, m - 50 * s - lam * c, m + 50 * s, xtol=1e-14, rtol=1e-14)
        assert g == pytest.approx(reference, rel=1e-9, abs=1e-9 * s)


def test_pbgi_with_unit_cost_is_a_constant_cost(fitted_gp):
    model, candidates, _ = fitted_gp
    scalar = PandoraBoxGittinsIndex(model, 1e-4)(candidates)
    vector = PandoraBoxGittinsIndex(model, 1e-4, torch.ones(len(candidates), dtype=torch.float64))(candidates)
    torch.testing.assert_close(scalar, vector, rtol=0, atol=0)


def test_index_solver_and_acquisition_reject_bad_input(fitted_gp):
    with pytest.raises(ValueError, match="float64"):
        solve_log_ei_equation(torch.zeros(3, dtype=torch.float32))
    with pytest.raises(ValueError, match="finite"):
        solve_log_ei_equation(torch.tensor([0.0, math.nan], dtype=torch.float64))
    with pytest.raises(ValueError, match="lam must be positive"):
        PandoraBoxGittinsIndex(fitted_gp[0], 0.0)
    with pytest.raises(ValueError, match="costs must be positive"):
        PandoraBoxGittinsIndex(fitted_gp[0], 1e-4, torch.tensor([1.0, -1.0]))
