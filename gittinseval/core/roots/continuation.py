"""The continuation value ``q_n`` off the grid near its root, and the root (refined path)."""

from __future__ import annotations

import math

import numpy as np

from gittinseval.core.roots.grid import first_kinks
from gittinseval.core.roots.hermite import quintic_hermite
from gittinseval.core.roots.smoothing import TAIL, HingeSum, curvature_width

_ROOT_ITERATIONS = 12
"""Halley steps per root at most; one from the bracketing nodes usually meets the tolerance."""


class ContinuationNearCells:
    """Exact ``q(x) = -c + E[W(x + sigma Z)]`` of the stage's model, off the grid.

    For ``x`` in the cells ``first_cell .. first_cell + n_cells - 1``:

        q(x) = w_lo + m_lo (x - xi_lo) + sum_i d_i (EI_sigma - w phi_s)(x - xi_i)
               + E[D(x + sigma Z)] + w sum_{i in patch} d_i phi_s(x - xi_i) - c,

    the same model as the grid values, with the sum over the grid kinks within
    ``TAIL max(sigma, s)`` of the cells: kinks further below contribute ``d_i (x - xi_i)``
    (the line through ``w_lo`` of slope ``m_lo``), kinks as far above nothing.
    Per table (``[C]``): first cell, stage cost, chord weight ``w``; ``values``,
    ``kinks`` (the ``d_i``) and ``grid`` are ``[C, P]``.
    """

    def __init__(self, values, kinks, grid, delta, sigma, stage_cost, chord_weight, patch_terms, first_cell,
                 n_cells):
        self._inputs = values, kinks, grid, delta, sigma, stage_cost, chord_weight, patch_terms, first_cell, n_cells
        rows = np.arange(grid.shape[0])[:, None]
        reach = TAIL * float(curvature_width(sigma, delta).max())
        index, on_grid = _window(first_cell, n_cells, reach, delta, grid.shape[1], first_kinks(kinks))
        window_kinks = np.where(on_grid, kinks[rows, index], 0.0)
        points = grid[rows, index]
        lowest = index[:, 0]
        self.slope = np.where(lowest > 0, (values[rows[:, 0], lowest] - values[rows[:, 0], lowest - 1]) / delta, 0.0)
        self.intercept = values[rows[:, 0], lowest] - self.slope * points[:, 0] - stage_cost
        widths = np.repeat(curvature_width(sigma, delta)[:, None], points.shape[1], axis=1)
        self.terms = HingeSum(points, window_kinks, chord_weight[:, None] * window_kinks, sigma, widths) + patch_terms

    def restricted(self, which: np.ndarray) -> ContinuationNearCells:
        """The same ``q`` for the tables ``which`` only, on windows sized for them alone."""
        values, kinks, grid, delta, sigma, stage_cost, chord_weight, patch_terms, first_cell, n_cells = self._inputs
        if which.size == grid.shape[0]:
            return self
        return ContinuationNearCells(values[which], kinks[which], grid[which], delta[which], sigma, stage_cost[which],
                                     chord_weight[which], patch_terms.take(which), first_cell[which], n_cells)

    def __call__(self, x: np.ndarray, derivatives: int = 1) -> list[np.ndarray]:
        """``[q, q', ...]`` up to the ``derivatives``-th at ``x`` (``[C, X]``, inside the cells)."""
        terms = self.terms(x, derivatives)
        terms[0] = terms[0] + self.intercept[:, None] + self.slope[:, None] * x
        if derivatives >= 1:
            terms[1] = terms[1] + self.slope[:, None]
        return terms


def _window(first_cell: np.ndarray, n_cells: int, reach: float, delta: np.ndarray, n_points: int,
            floor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Grid indices within ``reach`` of cells ``first_cell .. first_cell + n_cells - 1``, from ``floor`` up.

    Returns ``[C, M]`` indices clamped to the grid and the mask of those on it
    (rows shorter than the longest are padded with masked points).
    """
    half = min(n_points, math.ceil(reach / float(delta.min())) + 1)
    stop = np.minimum(first_cell + n_cells + half, n_points - 1)
    start = np.minimum(np.maximum(first_cell - half, floor), stop)
    index = start[:, None] + np.arange(int((stop - start).max()) + 1)[None, :]
    on_grid = index <= stop[:, None]
    return np.minimum(index, n_points - 1), on_grid


def continuation_at_nodes(q: ContinuationNearCells, nodes: np.ndarray, per_cell: int,
                          tables: np.ndarray) -> np.ndarray:
    """``q`` at the patch nodes (``[C, M]``, ``per_cell`` to a grid cell) of ``tables``; 0 elsewhere.

    ``q`` is a Gaussian expectation, smooth on the scale ``sigma``: where that
    spans a node cell, the quintic through ``q``, ``q'`` and ``q''`` at the cell's
    ends (:func:`~gittinseval.core.roots.hermite.quintic_hermite`) is within about ``delta (delta / sigma)^5 / 4e4``
    of it, at a seventh of the kernel evaluations; elsewhere ``q`` is evaluated at
    every node.
    """
    out = np.zeros(nodes.shape)
    smooth = tables & (q.terms.sigma >= nodes[:, per_cell] - nodes[:, 0])
    direct = np.flatnonzero(tables & ~smooth)
    if direct.size:
        out[direct] = q.restricted(direct)(nodes[direct], derivatives=0)[0]
    smooth = np.flatnonzero(smooth)
    if smooth.size:
        ends = nodes[smooth, ::per_cell]
        out[smooth] = quintic_hermite(ends, *q.restricted(smooth)(ends, derivatives=2), per_cell)
    return out


def node_bracket(nodes: np.ndarray, q_nodes: np.ndarray, offset: np.ndarray,
                 per_cell: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start and bracket of the root among the nodes of the grid cell that holds it.

    The cell's nodes are ``offset .. offset + per_cell`` (``[C]`` offsets into the
    ``[C, M]`` nodes); the bracket is the first pair of them across which ``q``
    turns non-negative, the start the linear interpolation between them.
    """
    rows = np.arange(nodes.shape[0])
    index = offset[:, None] + np.arange(per_cell + 1)[None, :]
    crossed = q_nodes[rows[:, None], index] >= 0
    # Rounding may put a sign on the cell's ends against the grid's: stay in the cell.
    upper = np.where(crossed.any(axis=1), crossed.argmax(axis=1), per_cell)
    upper = np.minimum(np.maximum(upper, 1), per_cell) + offset
    lower = upper - 1
    x_lo, x_hi = nodes[rows, lower], nodes[rows, upper]
    q_lo, q_hi = q_nodes[rows, lower], q_nodes[rows, upper]
    rising = q_hi > q_lo
    start = x_lo - q_lo * (x_hi - x_lo) / np.where(rising, q_hi - q_lo, 1.0)
    start = np.where(rising, np.minimum(np.maximum(start, x_lo), x_hi), 0.5 * (x_lo + x_hi))
    return start, x_lo, x_hi


def halley_root(q: ContinuationNearCells, start: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                tolerance: np.ndarray) -> np.ndarray:
    """Root of the non-decreasing ``q`` in ``[lower, upper]`` (``[C]``), by safeguarded Halley steps.

    Halley's step ``s = -2 q q' / (2 q'^2 - q q'')`` leaves an error of
    ``(q''^2 / (4 q'^2) - q''' / (6 q')) s^3`` to leading order, so one step from a
    start inside the root's cell usually ends the search; a step that leaves the
    current bracket is replaced by bisection.
    """
    x = start
    active = np.ones(x.shape, dtype=bool)
    for _ in range(_ROOT_ITERATIONS):
        value, slope, curvature, third = (column[:, 0] for column in q(x[:, None], derivatives=3))
        lower = np.where(value < 0, x, lower)
        upper = np.where(value >= 0, x, upper)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = -2.0 * value * slope / (2.0 * slope * slope - value * curvature)
            error = np.abs((0.25 * curvature * curvature / slope - third / 6.0) / slope * step**3)
        inside = (x + step >= lower) & (x + step <= upper) & (slope > 0)
        step = np.where(inside, step, 0.5 * (lower + upper) - x)
        x = np.where(active, x + step, x)
        # A table stops on its own tolerance, so it comes out the same alone or in a batch.
        active &= np.where(inside, error, np.abs(step)) > tolerance
        if not active.any():
            break
    return x
