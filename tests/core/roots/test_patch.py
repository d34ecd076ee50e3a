"""``W`` kept exactly near its root (gittinseval.core.roots.patch): the patch's hinges rebuild ``W`` at its nodes
and vanish outside it, and its Gaussian expectation is added to the grid values where it reaches them."""

import numpy as np
import pytest

from gittinseval.core.roots.grid import slope_changes
from gittinseval.core.roots.patch import PATCH_CELLS, Patch, add_patch_smoothing, patch_with_root
from tests.core.roots.roots_reference import ei

PER_CELL = 4
"""Nodes per grid cell in these patches."""


def continuation(x, root):
    """A ``W = max(q, 0)`` whose ``q`` is curved: ``(x - r) + 2 (x - r)^2`` above its root ``r``."""
    z = x - root
    return np.where(z > 0, z + 2 * z**2, 0.0)


def a_patch(deltas=(0.01, 0.004), roots=(0.137, -0.3551)):
    """Two tables (uniform grids of 200 points from -1) and their patches through ``W`` on the cells from the one
    holding the root, at ``PER_CELL`` nodes a cell and at the root."""
    delta, root = np.array(deltas), np.array(roots)
    grid = -1.0 + delta[:, None] * np.arange(200)[None, :]
    values = continuation(grid, root[:, None])
    cell = np.floor((root - grid[:, 0]) / delta).astype(np.int64)
    nodes = grid[np.arange(2), cell][:, None] + delta[:, None] * np.arange(PATCH_CELLS * PER_CELL + 1) / PER_CELL
    exact = continuation(nodes, root[:, None])
    patch = patch_with_root(nodes, exact, root, cell, grid, values, delta, np.array([True, False]))
    return patch, grid, values, delta, root, cell


def test_the_patch_takes_the_root_among_its_nodes_where_w_is_zero():
    patch, grid, _, _, root, cell = a_patch()
    assert patch.points.shape == (2, PATCH_CELLS * PER_CELL + 2)
    assert np.all(np.diff(patch.points, axis=1) > 0)
    for row in range(2):
        assert root[row] in patch.points[row]
        assert patch.points[row, 0] == grid[row, cell[row]]
        assert patch.points[row, -1] == pytest.approx(grid[row, cell[row] + PATCH_CELLS], abs=1e-14)
    np.testing.assert_array_equal(patch.grid_index, cell[:, None] + np.arange(PATCH_CELLS + 1)[None, :])


def test_the_hinges_rebuild_w_at_the_nodes_over_the_grid_interpolant_and_vanish_beyond_the_patch():
    patch, grid, values, _, root, _ = a_patch()
    for row in range(2):
        points, kinks = patch.points[row], patch.kinks[row]
        correction = np.maximum(points[:, None] - points[None, :], 0.0) @ kinks  # D(p) = sum_j k_j (p - p_j)_+
        exact = continuation(points, root[row])
        np.testing.assert_allclose(np.interp(points, grid[row], values[row]) + correction, exact, rtol=0, atol=1e-14)
        # D and its slope are zero above the patch: the kinks and their first moment sum to zero.
        assert abs(kinks.sum()) < 1e-12 and abs(kinks @ points) < 1e-12


def test_the_curvature_is_the_slope_change_of_w_between_nodes_and_none_at_the_root():
    patch, _, _, _, root, _ = a_patch()
    for row in range(2):
        points = patch.points[row]
        slopes = np.diff(continuation(points, root[row])) / np.diff(points)
        expected = np.concatenate([[0.0], np.diff(slopes), [0.0]])
        expected[points == root[row]] = 0.0
        np.testing.assert_allclose(patch.curvature[row], expected, rtol=0, atol=1e-10)
        # Above the root, q'' = 4: each interior node carries 4 times its share of the nodes' spacing.
        above = np.flatnonzero(points > root[row])[1:-1]
        spacing = (points[above + 1] - points[above - 1]) / 2
        np.testing.assert_allclose(patch.curvature[row, above], 4 * spacing, rtol=1e-9)


def test_rows_replaced_by_a_shorter_patch_are_padded_with_terms_of_no_weight():
    patch, grid, values, delta, root, cell = a_patch()
    nodes = grid[1:2, cell[1] : cell[1] + PATCH_CELLS + 1]  # the grid points alone
    short = patch_with_root(nodes, continuation(nodes, root[1]), root[1:], cell[1:], grid[1:], values[1:], delta[1:],
                            np.array([False]))
    merged = patch.with_rows(np.array([1]), short)
    n = short.points.shape[1]
    np.testing.assert_array_equal(merged.points[0], patch.points[0])
    np.testing.assert_array_equal(merged.points[1, :n], short.points[0])
    assert np.all(merged.points[1, n:] == short.points[0, -1])
    assert np.all(merged.kinks[1, n:] == 0) and np.all(merged.curvature[1, n:] == 0)
    assert isinstance(merged, Patch)


@pytest.mark.parametrize("sigma", [0.004, 0.2])  # every grid point (stride 1), and interpolated (stride > 2)
def test_the_patch_expectation_is_added_to_the_grid_values_it_reaches(sigma):
    patch, grid, values, delta, _, _ = a_patch()
    zero = np.zeros(2)
    terms = patch.terms(grid, slope_changes(values, delta), sigma, delta, zero, zero)  # no chord corrections
    smoothed = np.zeros_like(grid)
    add_patch_smoothing(smoothed, terms, patch, grid, delta)
    for row in range(2):
        expected = ei(grid[row][:, None] - patch.points[row][None, :], sigma) @ patch.kinks[row]
        # Interpolated where sigma spans several cells: within 1e-5 of the expectation's size (measured: 5e-6).
        np.testing.assert_allclose(smoothed[row], expected, rtol=0, atol=1e-5 * np.abs(expected).max())
        assert np.count_nonzero(smoothed[row]) > 2 * PATCH_CELLS  # the expectation reaches beyond the patch
