"""Root schedules against closed forms, direct summation and an independent solver."""

import numpy as np
import pytest
import torch
from scipy.optimize import brentq
from scipy.stats import norm

from gittinseval.roots import EmpiricalTargetChain, expected_improvement, gaussian_smoothing, root_schedule


def ei(z, sigma):
    return z * norm.cdf(z / sigma) + sigma * norm.pdf(z / sigma)


def extended_linear(x, grid, values):
    """The piecewise-linear W on the grid, slope 0 on the left and 1 on the right."""
    inside = np.interp(x, grid, values)
    return np.where(x > grid[-1], values[-1] + (x - grid[-1]), inside)


def normal_quadrature(n_nodes: int = 1601, width: float = 8.0):
    """Trapezoidal nodes and weights of the standard normal on [-width, width]."""
    z = np.linspace(-width, width, n_nodes)
    weights = norm.pdf(z) * (z[1] - z[0])
    weights[[0, -1]] /= 2
    return z, weights / weights.sum()


def quadrature_roots(chain: EmpiricalTargetChain, cost: float, n_grid: int = 3001):
    """Independent solver: backward DP by trapezoidal quadrature, no FFT.

    W is kept on its own grid and linearly interpolated; each root is found by
    Brent's method on the interpolated continuation value.
    """
    nodes, weights = normal_quadrature()
    sds, sizes = chain.step_sds, chain.batch_sizes
    total = np.sqrt(np.sum(sds**2))
    grid = np.linspace(-8 * total, cost * sizes.sum() + 8 * total, n_grid)
    values = np.maximum(grid, 0.0)
    roots = np.empty(chain.horizon)
    for stage in range(chain.horizon - 1, -1, -1):
        def continuation(x, values=values, stage=stage):
            x = np.atleast_1d(x)
            points = x[:, None] + sds[stage] * nodes[None, :]
            return extended_linear(points, grid, values) @ weights - cost * sizes[stage]

        q = continuation(grid)
        roots[stage] = brentq(lambda x: continuation(x)[0], grid[0], grid[-1], xtol=1e-13)
        values = np.maximum(q, 0.0)
    return roots


def test_chain_schedule_has_partial_last_batch():
    chain = EmpiricalTargetChain(n_examples=43, batch_size=8, prior_var=0.04)
    assert chain.horizon == 6
    np.testing.assert_array_equal(chain.batch_sizes, [8, 8, 8, 8, 8, 3])
    # v_n by direct summation of precisions.
    seen = np.array([0, 8, 16, 24, 32, 40])
    np.testing.assert_allclose(chain.latent_vars, 1 / (1 / 0.04 + seen / 0.25))


@pytest.mark.parametrize("cost", [1e-5, 1e-4, 1e-3, 1e-2])
@pytest.mark.parametrize("n_examples", [4, 8, 32])
def test_single_stage_matches_closed_form(cost, n_examples):
    # H = 1: q_0(x) = EI_sigma(x) - c B, so the root solves EI_sigma(r) = c B.
    chain = EmpiricalTargetChain(n_examples, n_examples, 0.04)
    sigma = chain.step_sds[0]
    exact = brentq(lambda x: ei(x, sigma) - cost * n_examples, -20, 20, xtol=1e-15)
    root = root_schedule(n_examples, n_examples, 0.04, cost)
    assert root.shape == (1,)
    assert root[0] == pytest.approx(exact, abs=2e-5)


def test_fft_smoothing_matches_direct_summation():
    rng = np.random.default_rng(0)
    n_points, delta, sigma = 65, 0.013, 0.05
    grid = -0.4 + delta * np.arange(n_points)
    values = np.stack([np.maximum(grid, 0.0), np.maximum(0, np.cumsum(rng.uniform(0, 1, n_points)) * delta - 0.2)])
    deltas = torch.tensor([delta, delta], dtype=torch.float64)
    smoothed = gaussian_smoothing(torch.tensor(values), deltas, sigma).numpy()
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
    deltas = torch.tensor([delta], dtype=torch.float64)
    smoothed = gaussian_smoothing(torch.tensor(values[None]), deltas, sigma).numpy()[0]
    z = np.linspace(-9, 9, 200001)
    density = norm.pdf(z)
    for j in (0, 17, 50, 99):
        expected = np.trapezoid(extended_linear(grid[j] + sigma * z, grid, values) * density, z)
        assert smoothed[j] == pytest.approx(expected, abs=1e-8)


def test_expected_improvement_formula():
    z = torch.linspace(-1, 1, 11, dtype=torch.float64)
    np.testing.assert_allclose(expected_improvement(z, 0.3).numpy(), ei(z.numpy(), 0.3), atol=1e-15)


@pytest.mark.parametrize("cost", [2e-5, 3e-4, 4e-3])
@pytest.mark.parametrize("prior_var", [0.01, 0.04])
def test_roots_match_independent_quadrature_solver(cost, prior_var):
    chain = EmpiricalTargetChain(n_examples=43, batch_size=8, prior_var=prior_var)
    fft = root_schedule(43, 8, prior_var, cost)
    reference = quadrature_roots(chain, cost)
    assert fft.shape == (6,)
    np.testing.assert_allclose(fft, reference, atol=1e-4)


def _stopping_value(chain, cost, alpha, s_grid):
    """Uncentred DP: V_n(s; alpha) on an absolute grid of posterior means, no FFT."""
    nodes, weights = normal_quadrature(401)
    values = np.maximum(s_grid, alpha)
    continuation = None
    for stage in range(chain.horizon - 1, -1, -1):
        points = s_grid[:, None] + chain.step_sds[stage] * nodes[None, :]
        # Far above the grid the continuation is worth about the state itself.
        inside = np.interp(points, s_grid, values)
        expected = np.where(points > s_grid[-1], values[-1] + points - s_grid[-1], inside) @ weights
        continuation = expected - cost * chain.batch_sizes[stage]
        values = np.maximum(alpha, continuation)
    return continuation


def test_index_is_translation_invariant_and_equals_state_minus_root():
    # The Gittins index of state s is the smallest outside value alpha at which
    # stopping is optimal; it must equal s - r_0 for every s.
    chain = EmpiricalTargetChain(n_examples=24, batch_size=8, prior_var=0.04)
    cost = 1e-3
    root = root_schedule(24, 8, 0.04, cost)[0]
    s_grid = np.linspace(-1.5, 2.5, 2001)
    for state in (0.2, 0.5, 0.9):
        position = np.searchsorted(s_grid, state)

        def advantage(alpha, position=position):
            return _stopping_value(chain, cost, alpha, s_grid)[position] - alpha

        index = brentq(advantage, state - 1.0, state + 1.0, xtol=1e-12)
        assert index - s_grid[position] == pytest.approx(-root, abs=3e-4)


def test_roots_grow_with_cost_and_batching_matches_single_calls():
    costs = np.array([1e-6, 1e-5, 1e-4, 1e-3, 1e-2])
    table = root_schedule(200, 8, 0.04, costs)
    assert table.shape == (5, 25)
    assert np.all(np.diff(table, axis=0) > 0)
    for row, cost in zip(table, costs, strict=True):
        np.testing.assert_allclose(row, root_schedule(200, 8, 0.04, cost), rtol=0, atol=1e-12)


def test_roots_are_finite_for_large_horizons():
    table = root_schedule(1534, 8, 0.04, [1e-4 * 0.03, 1e-4 * 5.0])
    assert table.shape == (2, 192)
    assert np.all(np.isfinite(table))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"batch_size": 9}, "larger than the number of examples"),
        ({"batch_size": 0}, "batch_size must be a positive integer"),
        ({"prior_var": 0.0}, "prior_var must be a positive"),
        ({"prior_var": float("nan")}, "prior_var must be a positive"),
        ({"cost_per_example": -1.0}, "cost_per_example must be positive"),
        ({"cost_per_example": [1e-4, 0.0]}, "bad entries at \\[1\\]"),
        ({"cell_var": 0.0}, "cell_var must be a positive"),
        ({"grid_points": 2}, "grid_points must be at least 3"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    arguments = {"n_examples": 8, "batch_size": 4, "prior_var": 0.04, "cost_per_example": 1e-4} | kwargs
    with pytest.raises(ValueError, match=message):
        root_schedule(**arguments)
