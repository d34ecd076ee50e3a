"""The refined path's pieces: Hermite interpolation, q off the grid, and the interpolation's effect on the roots."""

import numpy as np
import pytest
from scipy.stats import norm

from gittinseval.core.roots import EmpiricalTargetChain, patch, refined, root_schedule
from gittinseval.core.roots.continuation import ContinuationNearCells
from gittinseval.core.roots.grid import slope_changes
from gittinseval.core.roots.hermite import quintic_hermite
from gittinseval.core.roots.smoothing import TAIL, HingeSum
from tests.core.roots.roots_reference import ei


def test_quintic_hermite_reproduces_quintics():
    rng = np.random.default_rng(3)
    coefficients = rng.normal(size=(2, 6))
    ends = np.sort(rng.uniform(-1, 1, size=(2, 4)), axis=1)
    polys = [np.poly1d(c) for c in coefficients]
    value, slope, curvature = (np.stack([p.deriv(k)(e) for p, e in zip(polys, ends, strict=True)]) for k in range(3))
    ours = quintic_hermite(ends, value, slope, curvature, 5)
    for row, p in enumerate(polys):
        cells = zip(ends[row, :-1], ends[row, 1:], strict=True)
        nodes = np.concatenate([np.linspace(a, b, 6)[:-1] for a, b in cells] + [ends[row, -1:]])
        np.testing.assert_allclose(ours[row], p(nodes), rtol=0, atol=1e-12)


def test_continuation_off_the_grid_sums_every_kink_of_a_function_zero_below_a_point():
    # W = max(q, 0) has no kinks below the last root, so the window of kinks starts at
    # the first non-zero one, well above the 8 sds below the cells it would otherwise take.
    n_points, delta, sigma, chord, cost = 400, 0.01, 0.03, 2e-5, 0.004
    grid = -1.0 + delta * np.arange(n_points)[None, :]
    values = np.maximum(grid + 0.195, 0.0) ** 1.5  # its zero inside a cell
    kinks = slope_changes(values, np.array([delta]))
    first_kink = int(np.argmax(kinks[0] != 0))
    first_cell = np.array([first_kink + 3])
    assert first_kink > 0 and first_cell[0] - TAIL * sigma / delta < first_kink  # the trimming is active
    empty = np.zeros((1, 0))
    q = ContinuationNearCells(values, kinks, grid, np.array([delta]), sigma, np.array([cost]), np.array([chord]),
                              HingeSum(empty, empty, empty, sigma, empty), first_cell, 5)
    x = grid[0, first_cell[0]] + delta * np.linspace(0.0, 5.0, 23)
    expected = [values[0, 0] - cost + np.sum(kinks[0] * (ei(z, sigma) - chord * norm.pdf(z, scale=sigma)))
                for z in x[:, None] - grid]
    np.testing.assert_allclose(q(x[None, :], derivatives=0)[0][0], expected, rtol=0, atol=1e-14)


@pytest.mark.parametrize(
    "n_examples, batch_size, prior_var, cost",
    [(120, 2, 0.04, 1e-4), (500, 1, 0.005, 1e-4), (1534, 8, 0.04, 1e-4),
     (1534, 8, 0.04, np.array([3e-6, 1e-4, 5e-4]))],  # tables of different strides in one call
)
def test_interpolated_expectations_leave_the_roots_unchanged(monkeypatch, n_examples, batch_size, prior_var, cost):
    # The patch's expectation on the grid and q at the patch nodes are interpolated
    # (quintic Hermite) where sigma spans several cells; evaluated directly, the roots move by far below 1 %.
    interpolated = root_schedule(n_examples, batch_size, prior_var, cost)
    monkeypatch.setattr(patch, "MIN_STRIDE", 10**9)
    monkeypatch.setattr(refined, "continuation_at_nodes",
                        lambda q, nodes, per_cell, tables: q(nodes, derivatives=0)[0])
    direct = root_schedule(n_examples, batch_size, prior_var, cost)
    stage_costs = np.atleast_1d(cost)[:, None] * EmpiricalTargetChain(n_examples, batch_size, prior_var).batch_sizes
    assert np.all(np.abs(np.atleast_2d(interpolated - direct)) < 1e-6 * stage_costs.min(axis=1, keepdims=True))
