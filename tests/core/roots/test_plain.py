"""The plain grid (gittinseval.core.roots.plain) against direct summation and quadrature."""

import numpy as np
import pytest
import torch
from scipy.optimize import brentq
from scipy.stats import norm

from gittinseval.core.roots import EmpiricalTargetChain, expected_improvement, gaussian_smoothing, root_schedule
from tests.core.roots.roots_reference import ei, extended_linear


def test_expected_improvement_formula():
    z = torch.linspace(-1, 1, 11, dtype=torch.float64)
    np.testing.assert_allclose(expected_improvement(z, 0.3).numpy(), ei(z.numpy(), 0.3), atol=1e-15)


def test_fft_smoothing_matches_direct_summation():
    rng = np.random.default_rng(0)
    n_points, delta, sigma = 65, 0.013, 0.05
    grid = -0.4 + delta * np.arange(n_points)
    values = np.stack([np.maximum(grid, 0.0), np.maximum(0, np.cumsum(rng.uniform(0, 1, n_points)) * delta - 0.2)])
    smoothed = gaussian_smoothing(values, np.array([delta, delta]), sigma)
    for row, w in zip(smoothed, values, strict=True):
        slopes = np.concatenate([[0.0], np.diff(w) / delta, [1.0]])
        kinks = np.diff(slopes)
        direct = [w[0] + sum(kinks[i] * ei((j - i) * delta, sigma) for i in range(n_points)) for j in range(n_points)]
        np.testing.assert_allclose(row, direct, rtol=0, atol=1e-13)


def test_fft_smoothing_is_the_gaussian_expectation_of_the_extension():
    # Independent of the EI formula: integrate the extended W against the normal density.
    n_points, delta, sigma = 101, 0.01, 0.07
    grid = -0.5 + delta * np.arange(n_points)
    values = np.maximum(0.0, (grid + 0.1) ** 3 + 0.3 * np.maximum(grid, 0))
    smoothed = gaussian_smoothing(values[None], np.array([delta]), sigma)[0]
    z = np.linspace(-9, 9, 200001)
    density = norm.pdf(z)
    for j in (0, 17, 50, 99):
        expected = np.trapezoid(extended_linear(grid[j] + sigma * z, grid, values) * density, z)
        assert smoothed[j] == pytest.approx(expected, abs=1e-8)


def plain_grid_roots(n_examples, batch_size, prior_var, cost, grid_points):
    """The plain-grid program by direct O(P^2) summation: the same grid, no FFT, no refinement."""
    chain = EmpiricalTargetChain(n_examples, batch_size, prior_var)
    sds, stage_costs = chain.step_sds, cost * chain.batch_sizes
    total = float(np.sqrt(np.sum(sds**2)))
    lower = min(-5 * total, brentq(lambda x: ei(x, total) - stage_costs.min(), -50 * total, total))
    grid = np.linspace(lower, 1.01 * stage_costs.sum() + 5 * total, grid_points)
    delta = grid[1] - grid[0]
    values = np.maximum(grid, 0.0)
    roots = np.empty(chain.horizon)
    for stage in range(chain.horizon - 1, -1, -1):
        kinks = np.diff(np.concatenate([[0.0], np.diff(values) / delta, [1.0]]))
        smoothed = values[0] + ei(grid[:, None] - grid[None, :], sds[stage]) @ kinks
        q = smoothed - stage_costs[stage]
        first = int(np.argmax(q >= 0))
        roots[stage] = grid[first - 1] - delta * q[first - 1] / (q[first] - q[first - 1])
        values = np.maximum(q, 0.0)
    return roots


def test_unrefined_roots_are_the_plain_grid_program():
    expected = plain_grid_roots(60, 8, 0.04, 1e-3, 129)
    np.testing.assert_allclose(root_schedule(60, 8, 0.04, 1e-3, grid_points=129, refine=False), expected,
                               rtol=0, atol=1e-12)
