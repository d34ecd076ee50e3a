"""What the plain and refined paths share (gittinseval.core.roots.grid): the extended interpolant's slope
changes, the FFT convolution of rows, the grid's lower end and the whole chain's grid."""

import numpy as np
import pytest

from gittinseval.core.roots.grid import (
    chain_grids,
    check_bracket,
    convolve_rows,
    first_kinks,
    grid_bottom,
    slope_changes,
)
from tests.core.roots.roots_reference import extended_linear, full_information_root


def test_grid_bottom_is_minus_5_sd_or_the_full_information_root_below_it():
    # EI_1(-5) = 5.35e-8: costs on both sides of 5.35e-8 sd, and far below and above it.
    sds = np.array([0.2, 0.01, 3e-4])[:, None]
    costs = sds * np.array([1e-12, 1e-9, 5.3e-8, 5.4e-8, 1e-6, 0.5, 2.0])
    bottoms = grid_bottom(sds, costs)
    assert bottoms.shape == costs.shape
    for (row, col), bottom in np.ndenumerate(bottoms):
        sd = sds[row, 0]
        expected = min(-5.0 * sd, full_information_root(sd, costs[row, col]))
        assert bottom == pytest.approx(expected, rel=0, abs=1e-13 * sd)


def test_the_slope_changes_rebuild_the_extended_interpolant():
    # W(x) = w_0 + sum_i d_i (x - xi_i)_+ is the linear interpolant of the values, flat on the left and of
    # slope 1 on the right of the grid.
    rng = np.random.default_rng(0)
    delta = np.array([0.1, 0.03])
    grid = np.array([-1.0, 0.2])[:, None] + delta[:, None] * np.arange(12)[None, :]
    values = np.cumsum(rng.uniform(0.0, 0.1, size=(2, 12)), axis=1)
    kinks = slope_changes(values, delta)
    assert kinks.shape == (2, 12)
    for row in range(2):
        x = np.linspace(grid[row, 0] - 0.5, grid[row, -1] + 0.5, 301)
        rebuilt = values[row, 0] + np.maximum(x[:, None] - grid[row][None, :], 0.0) @ kinks[row]
        np.testing.assert_allclose(rebuilt, extended_linear(x, grid[row], values[row]), rtol=0, atol=1e-12)


def test_rows_are_convolved_as_numpy_convolves_them():
    rng = np.random.default_rng(1)
    signal, kernel = rng.normal(size=(3, 17)), rng.normal(size=(3, 9))
    out = convolve_rows(signal, kernel, 32)
    assert out.shape == (3, 32)
    for row in range(3):
        np.testing.assert_allclose(out[row, :25], np.convolve(signal[row], kernel[row]), rtol=0, atol=1e-12)
    np.testing.assert_allclose(out[:, 25:], 0.0, atol=1e-12)  # the padding stays empty


def test_first_kinks_are_the_first_nonzero_slope_changes():
    kinks = np.array([[0.0, 0.0, 0.3, 0.0, 1.0], [2.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, -0.5]])
    assert first_kinks(kinks).tolist() == [2, 0, 4]


def test_the_chain_grid_runs_from_its_bottom_to_the_whole_cost_and_five_sds_above():
    sds = np.array([0.2, 0.1, 0.05])
    stage_costs = np.array([[1e-3, 1e-3, 5e-4], [1e-12, 1e-12, 1e-12]])  # the second's bottom is below -5 S
    origin, delta = chain_grids(sds, stage_costs, 101)
    total = np.sqrt(0.2**2 + 0.1**2 + 0.05**2)
    for row, costs in enumerate(stage_costs):
        bottom = min(-5 * total, full_information_root(total, costs.min()))
        assert origin[row] == pytest.approx(bottom, rel=0, abs=1e-13 * total)
        top = 1.01 * costs.sum() + 5 * total
        assert origin[row] + 100 * delta[row] == pytest.approx(top, rel=1e-14)
    assert origin[1] < -5 * total


def test_a_root_off_the_grid_is_named_by_its_stage():
    check_bracket(False, 3)
    with pytest.raises(RuntimeError, match="Gittins root left the grid at stage 7"):
        check_bracket(True, 7)
