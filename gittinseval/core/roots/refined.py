"""The refined roots (``refine=True``, the default): the grid model corrected near each root, solved off the grid.

Going back from the last stage, each stage

1. works on its own grid of ``P`` points (:class:`~gittinseval.core.roots.stage_grids.StageGrids`:
   the whole chain's grid is the coarsest, and a stage near the end of a long chain
   takes one as fine as its remaining span allows);
2. takes ``E[W_{n+1}(x + sigma_n Z)]`` at the grid points by convolving the
   interpolant's slope changes, with the chords' curvature error removed
   (:func:`~gittinseval.core.roots.smoothing.smooth_on_grid`), plus the expectation of
   the patch, ``W_{n+1}`` kept exactly on a few cells above its root
   (:class:`~gittinseval.core.roots.patch.Patch`);
3. solves ``q_n(r_n) = 0`` off the grid by safeguarded Halley steps on the exact
   Gaussian expectation of that model near the root
   (:class:`~gittinseval.core.roots.continuation.ContinuationNearCells`), from a bracket
   among the nodes of the root's grid cell: the grid points or, while the next step
   is short against the grid, :data:`~gittinseval.core.roots.patch.PATCH_NODES` fine
   nodes per cell;
4. keeps ``W_n = max(0, q_n)`` on the grid, moved to the next stage's grid where
   that is coarser, and its patch through the root.

Every stage's root is then within ``1e-6`` or 1 % of its stage cost of the continuous
dynamic program (tested against nested quadrature and an independent fine-grid solver).
"""

from __future__ import annotations

import numpy as np

from gittinseval.core.roots.continuation import ContinuationNearCells, continuation_at_nodes, halley_root, node_bracket
from gittinseval.core.roots.grid import check_bracket, slope_changes
from gittinseval.core.roots.patch import PATCH_CELLS, PATCH_NODES, Patch, add_patch_smoothing, patch_with_root
from gittinseval.core.roots.smoothing import chord_weight, smooth_on_grid
from gittinseval.core.roots.stage_grids import StageGrids

_FINE_PATCH_RATIO = 8.0
"""A stage takes ``PATCH_NODES`` fine nodes per patch cell while the next step is shorter than this many cells."""


def fine_node_stages(sds: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    """``[H, C]``: where the patch of ``W_n`` takes ``PATCH_NODES`` fine nodes per grid cell.

    Fine nodes pay only while the next step, ``sigma_{n-1}``, is short against the
    grid ``W_n`` lies on (stage ``n - 1``'s, of spacings ``deltas[n - 1]``); a longer
    one averages ``W_n`` over many cells, where the chord correction holds.
    """
    fine = np.zeros(deltas.shape, dtype=bool)
    fine[1:] = sds[:-1, None] < _FINE_PATCH_RATIO * deltas[:-1]
    return fine


def refined_roots(origin: np.ndarray, coarsest: np.ndarray, sds: np.ndarray, stage_costs: np.ndarray,
                  n_points: int) -> np.ndarray:
    """The roots ``[C, H]``, by the steps above, from the whole chain's grids ``origin + j coarsest`` (``[C]``)."""
    n_tables = origin.size
    rows = np.arange(n_tables)
    grids = StageGrids.plan(origin, coarsest, sds, stage_costs, n_points)
    deltas = grids.deltas
    chord = chord_weight(sds, deltas)
    fine_chord = chord_weight(sds, deltas / PATCH_NODES)
    fine_rows = fine_node_stages(sds, deltas)

    grid, delta = grids.points(sds.size - 1, n_points), grids.delta(sds.size - 1)
    values = np.maximum(grid, 0.0)  # W_H(x) = max(x, 0), with its kink at 0
    zero_cell = np.clip(np.floor(-grid[:, 0] / delta).astype(np.int64), 0, n_points - 2)
    zero = np.zeros(n_tables)
    points = np.stack([grid[rows, zero_cell], zero, grid[rows, zero_cell + 1]], axis=1)
    # max(x, 0) is linear on both sides of 0: both grid kinks of its cell are exempt.
    patch = Patch.through(points, np.maximum(points, 0.0), zero, zero_cell, np.ones(2), grid, values, delta,
                          np.zeros(n_tables, dtype=bool))
    roots = np.empty(stage_costs.shape)
    for stage in range(sds.size - 1, -1, -1):
        sigma = float(sds[stage])
        kinks = slope_changes(values, delta)
        smoothed = smooth_on_grid(values, kinks, delta, sigma, chord[stage])
        fine_weight = np.where(patch.fine, fine_chord[stage], chord[stage])
        patch_terms = patch.terms(grid, kinks, sigma, delta, chord[stage], fine_weight)
        add_patch_smoothing(smoothed, patch_terms, patch, grid, delta)
        continuation = smoothed - stage_costs[:, stage, None]
        first = np.argmax(continuation >= 0, axis=1)
        check_bracket(bool(np.any(first == 0)) or not bool(np.all(continuation[:, -1] >= 0)), stage)

        # W_n's patch lies on the next stage's grid; a coarser one's cells span several of these.
        coarsening = int(2 ** (grids.level[stage] - grids.level[stage - 1]).max()) if stage > 0 else 1
        cell = np.minimum(first - 1, n_points - 1 - PATCH_CELLS)
        q = ContinuationNearCells(values, kinks, grid, delta, sigma, stage_costs[:, stage], chord[stage],
                                  patch_terms, cell, PATCH_CELLS * coarsening)
        fine = fine_rows[stage]
        per_cell = PATCH_NODES if fine.any() else 1
        fractions = np.arange(PATCH_CELLS * per_cell + 1) / per_cell
        nodes = grid[rows, cell][:, None] + delta[:, None] * fractions
        if not fine.all():
            grid_nodes = rows[:, None], cell[:, None] + np.arange(PATCH_CELLS + 1)
            bracket = node_bracket(grid[grid_nodes], continuation[grid_nodes], first - 1 - cell, 1)
        if per_cell > 1:
            q_nodes = continuation_at_nodes(q, nodes, per_cell, fine)
            in_cell = node_bracket(nodes, q_nodes, (first - 1 - cell) * per_cell, per_cell)
            if fine.all():
                bracket = in_cell
            else:
                bracket = tuple(np.where(fine, a, b) for a, b in zip(in_cell, bracket, strict=True))
        root = halley_root(q, *bracket, 1e-8 * delta)
        roots[:, stage] = root
        if stage == 0:
            break

        values = np.maximum(continuation, 0.0)
        if coarsening > 1:
            values = grids.transfer(values, stage)
            grid, delta = grids.points(stage - 1, n_points), grids.delta(stage - 1)
            moved = grids.level[stage] != grids.level[stage - 1]
            moved_cell = np.floor((root - grid[:, 0]) / delta).astype(np.int64)
            cell = np.where(moved, np.minimum(np.maximum(moved_cell, 0), n_points - 1 - PATCH_CELLS), cell)
            nodes = grid[rows, cell][:, None] + delta[:, None] * fractions
            if per_cell > 1:
                q_nodes = continuation_at_nodes(q, nodes, per_cell, fine)
        grid_nodes = rows[:, None], cell[:, None] + np.arange(PATCH_CELLS + 1)
        if per_cell == 1:
            q_nodes = values[grid_nodes]
        patch = patch_with_root(nodes, np.maximum(q_nodes, 0.0), root, cell, grid, values, delta, fine)
        coarse = np.flatnonzero(~fine) if per_cell > 1 else rows[:0]
        if coarse.size:
            # W exact at the grid points and the root only, as the row alone would have it; its
            # terms at the other nodes are exactly 0, and dropped where no row of a sum needs them.
            coarse_nodes = coarse[:, None], cell[coarse, None] + np.arange(PATCH_CELLS + 1)
            alone = patch_with_root(grid[coarse_nodes], values[coarse_nodes], root[coarse], cell[coarse],
                                    grid[coarse], values[coarse], delta[coarse], fine[coarse])
            patch = patch.with_rows(coarse, alone)
    return roots
