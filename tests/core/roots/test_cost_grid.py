"""Root schedules at any cost, interpolated between tables on a log grid of costs (core/roots/cost_grid.py)."""

import math

import numpy as np

from gittinseval.core.roots import EmpiricalTargetChain, interpolated_root_schedule, root_schedule
from gittinseval.core.roots.cost_grid import GRID_STEPS_PER_DOUBLING


def test_interpolated_roots_are_within_the_root_schedules_own_accuracy_of_the_table_at_the_cost():
    """Within 1e-6 or 1 % of the stage cost of root_schedule at that cost, over six decades of cost."""
    n_examples, batch_size, prior_var = 90, 4, 0.02
    costs = np.exp(np.random.default_rng(0).uniform(math.log(1e-6), math.log(3e-2), size=8))
    interpolated = interpolated_root_schedule(n_examples, batch_size, prior_var, costs)
    exact = root_schedule(n_examples, batch_size, prior_var, costs)
    stage_costs = costs[:, None] * EmpiricalTargetChain(n_examples, batch_size, prior_var).batch_sizes
    assert interpolated.shape == exact.shape == (8, 23)
    assert np.all(np.abs(interpolated - exact) <= np.maximum(1e-6, 0.01 * stage_costs))
    # Linear interpolation between the same grid tables is not that close: the cubic is needed.
    grid = np.exp(math.log(2) / GRID_STEPS_PER_DOUBLING * np.floor(np.log2(costs) * GRID_STEPS_PER_DOUBLING))
    step = 2 ** (1 / GRID_STEPS_PER_DOUBLING)
    t = (np.log(costs) - np.log(grid)) / math.log(step)
    below, above = root_schedule(n_examples, batch_size, prior_var, grid), root_schedule(
        n_examples, batch_size, prior_var, grid * step
    )
    linear = (1 - t[:, None]) * below + t[:, None] * above
    assert np.any(np.abs(linear - exact) > np.maximum(1e-6, 0.01 * stage_costs))


def test_at_a_grid_cost_the_interpolation_is_the_grid_table():
    cost = 2.0 ** (-13 - 3 / GRID_STEPS_PER_DOUBLING)
    np.testing.assert_allclose(
        interpolated_root_schedule(40, 4, 0.04, np.array([cost]))[0], root_schedule(40, 4, 0.04, cost),
        rtol=1e-12, atol=1e-15,
    )

