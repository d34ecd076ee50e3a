"""The continuation value off the grid and its root (gittinseval.core.roots.continuation), against direct sums
over the kinks and an independent root finder."""

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from gittinseval.core.roots.continuation import ContinuationNearCells, halley_root, node_bracket
from gittinseval.core.roots.grid import slope_changes
from gittinseval.core.roots.smoothing import TAIL, HingeSum
from tests.core.roots.roots_reference import ei


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


class Cubic:
    """``q(x) = a (x - r) + b (x - r)^3`` per row (non-decreasing for ``a, b >= 0``), called as the refined path
    calls its continuation: ``q(x [C, X], derivatives)`` -> ``[q, q', ...]``."""

    def __init__(self, root, a, b):
        self.root, self.a, self.b = (np.asarray(v, dtype=float)[:, None] for v in (root, a, b))

    def __call__(self, x, derivatives=1):
        z = x - self.root
        values = [self.a * z + self.b * z**3, self.a + 3 * self.b * z**2, 6 * self.b * z, 6 * self.b + 0 * z]
        return values[: derivatives + 1]


def test_the_root_by_safeguarded_halley_steps_is_the_known_root():
    roots, a, b = np.array([0.3, -1.2, 2.0, 0.05]), np.array([1.0, 1e-4, 0.01, 5.0]), np.array([0.5, 2.0, 3.0, 0.0])
    q = Cubic(roots, a, b)
    lower, upper = roots - np.array([1.0, 0.5, 3.0, 0.2]), roots + np.array([2.0, 0.1, 0.5, 0.3])
    start = lower + 0.9 * (upper - lower)  # far from the roots: some steps leave the bracket and bisect
    found = halley_root(q, start, lower, upper, np.full(4, 1e-12))
    np.testing.assert_allclose(found, roots, rtol=0, atol=1e-9)
    # The same root by Brent's method on the same function, for the row whose slope at the root is smallest.
    brent = brentq(lambda x: q(np.full((4, 1), x))[0][1, 0], lower[1], upper[1], xtol=1e-14)
    assert found[1] == pytest.approx(brent, abs=1e-9)


def test_the_bracket_is_the_first_pair_of_nodes_across_which_q_turns_non_negative():
    nodes = np.array([np.linspace(0.0, 1.0, 9), np.linspace(-2.0, 2.0, 9)])
    roots = np.array([0.3, 1.1])
    q_nodes = np.array([nodes[0] - roots[0], (nodes[1] - roots[1]) * 3.0])  # linear: the start is the root
    start, lower, upper = node_bracket(nodes, q_nodes, np.array([0, 4]), 4)
    np.testing.assert_allclose(start, roots, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(lower, [0.25, 1.0])
    np.testing.assert_array_equal(upper, [0.375, 1.5])
