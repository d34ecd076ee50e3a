"""``W`` kept exactly on a few cells above its root, as a correction of the grid (refined path)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gittinseval.core.roots.grid import differences
from gittinseval.core.roots.hermite import hermite_cells, padded_bases
from gittinseval.core.roots.smoothing import TAIL, HingeSum, curvature_width
from gittinseval.utils.caches import run_shared_cache

PATCH_CELLS = 5
"""Grid cells, from the one holding the root up, on which ``W`` is kept exactly."""
_PATCH_EXEMPT = np.append(np.ones(PATCH_CELLS), 0.5)
"""Share of each patch grid kink's chord correction handed back (see :class:`Patch`)."""
PATCH_NODES = 8
"""Fine nodes per patch cell in the stages that take them (see :mod:`~gittinseval.core.roots.refined`)."""
MIN_STRIDE = 3
"""The patch's expectation is interpolated only between samples this many cells apart or more."""


@dataclass(frozen=True)
class Patch:
    """``W`` kept exactly on a few cells around its kink, as a correction of the grid.

    The grid interpolant ``G`` of ``W = max(0, q)`` smears the kink at the root
    ``k`` over a cell and cuts the curvature of ``q`` just above it; near the end of
    the chain (``sigma << delta``) that is all that matters.  The patch stores
    ``W`` at nodes ``p_0 < ... < p_M`` (grid points, in ``fine`` rows ``PATCH_NODES - 1`` fine
    nodes between them, and the root) spanning whole grid cells from
    ``first_cell``, as ``D = W - G`` there: piecewise linear, zero at the patch's
    ends and outside it, so

        D(x) = sum_j kappa_j (x - p_j)_+,   E[D(x + sigma Z)] = sum_j kappa_j EI_sigma(x - p_j),

    with ``kappa_j`` the slope changes of ``D``.  Chord corrections (see
    :func:`~gittinseval.core.roots.smoothing.chord_weight`): the grid kinks ``d_i`` inside the patch are not
    curvature of a smooth ``W`` and are exempt from the grid's, so
    ``+ w sum_i e_i d_i phi_s(x - xi_i)`` adds it back (``e_i = 1``, or
    ``1/2`` at an upper end above which ``W`` is smooth: a kink's curvature spans
    the half cells on both sides of it); the fine chords get their own,
    ``- w_fine sum_j c_j phi_s'(x - p_j)`` (``s'`` for the fine spacing) over the slope changes ``c_j`` of the
    fine interpolant at nodes other than the root and the ends.
    Shapes: ``first_cell``/``fine`` ``[C]``, ``exempt`` ``[n_cells + 1]``,
    ``points``/``kinks``/``curvature`` ``[C, M + 1]``.
    """

    first_cell: np.ndarray
    exempt: np.ndarray
    fine: np.ndarray
    points: np.ndarray
    kinks: np.ndarray
    curvature: np.ndarray

    @classmethod
    def through(cls, points, exact, root, first_cell, exempt, grid, values, delta, fine) -> Patch:
        """The patch through ``exact = W(points)`` (``[C, M + 1]``, sorted, ``root`` among them)."""
        rows = np.arange(grid.shape[0])[:, None]
        position = (points - grid[:, :1]) / delta[:, None]
        left = np.minimum(np.maximum(position.astype(np.int64), 0), grid.shape[1] - 2)
        weight = position - left
        corrections = exact - ((1 - weight) * values[rows, left] + weight * values[rows, left + 1])
        # D vanishes at the patch's ends (grid points) by construction; there the
        # difference is rounding, which must not leak outside the patch.
        corrections[:, [0, -1]] = 0.0
        zero = np.zeros((points.shape[0], 1))
        kinks = differences(np.concatenate([zero, _slopes(points, corrections), zero], axis=1))
        curvature = np.concatenate([zero, differences(_slopes(points, exact)), zero], axis=1)
        curvature[points == root[:, None]] = 0.0
        return cls(first_cell, exempt, fine, points, kinks, curvature)

    def with_rows(self, rows: np.ndarray, other: Patch) -> Patch:
        """This patch with ``rows`` replaced by ``other``'s (fewer nodes, padded with terms of weight 0)."""
        n_nodes = other.points.shape[1]
        points, kinks, curvature = self.points.copy(), self.kinks.copy(), self.curvature.copy()
        points[rows, :n_nodes], points[rows, n_nodes:] = other.points, other.points[:, -1:]
        kinks[rows, :n_nodes], kinks[rows, n_nodes:] = other.kinks, 0.0
        curvature[rows, :n_nodes], curvature[rows, n_nodes:] = other.curvature, 0.0
        return Patch(self.first_cell, self.exempt, self.fine, points, kinks, curvature)

    @property
    def grid_index(self) -> np.ndarray:
        """``[C, n_cells + 1]`` indices of the patch's grid points."""
        return self.first_cell[:, None] + np.arange(self.exempt.size)[None, :]

    def terms(self, grid, grid_kinks, sigma, delta, chord_weight, fine_chord_weight) -> HingeSum:
        """``E[D(x + sigma Z)]`` with the chord corrections above, as a :class:`HingeSum`.

        ``grid_kinks`` ``[C, P]`` are the ``d_i`` of the grid values the patch corrects.
        """
        rows, index = np.arange(grid.shape[0])[:, None], self.grid_index
        exempt = chord_weight[:, None] * self.exempt[None, :] * grid_kinks[rows, index]
        fine_spacing = np.where(self.fine, delta / PATCH_NODES, delta)
        widths = np.concatenate([
            np.repeat(curvature_width(sigma, fine_spacing)[:, None], self.points.shape[1], axis=1),
            np.repeat(curvature_width(sigma, delta)[:, None], exempt.shape[1], axis=1),
        ], axis=1)
        return HingeSum(
            np.concatenate([self.points, grid[rows, index]], axis=1),
            np.concatenate([self.kinks, np.zeros_like(exempt)], axis=1),
            np.concatenate([fine_chord_weight[:, None] * self.curvature, -exempt], axis=1),
            sigma,
            widths,
        )


def patch_with_root(nodes, exact, root, cell, grid, values, delta, fine) -> Patch:
    """The patch through ``W = exact`` at the nodes (``[C, M]``, ascending) and ``W = 0`` at the root."""
    all_points = np.concatenate([nodes, root[:, None]], axis=1)
    order = np.arange(nodes.shape[0])[:, None], np.argsort(all_points, axis=1, kind="stable")
    exact = np.concatenate([exact, np.zeros((nodes.shape[0], 1))], axis=1)
    return Patch.through(all_points[order], exact[order], root, cell, _PATCH_EXEMPT, grid, values, delta, fine)


def _slopes(points: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Slopes between consecutive nodes; 0 on a zero-width piece (a root on a node)."""
    widths = differences(points)
    return np.divide(differences(values), widths, out=np.zeros_like(widths), where=widths > 0)


def add_patch_smoothing(smoothed, patch_terms: HingeSum, patch: Patch, grid, delta) -> None:
    """Add the patch's expectation to the grid values ``[C, P]`` (in place; C-contiguous, from :func:`smooth_on_grid`).

    It is linear (zero, as ``D`` and its slope vanish beyond the patch) further
    than its reach from the patch, so only a window of each table's grid changes.
    It is a Gaussian expectation, smooth on the scale ``sigma``: where that spans
    several of a table's cells, it is evaluated with two derivatives at every
    ``stride``-th point of the window (``stride delta <= sigma / 2``, so about 32
    points per table whatever its spacing) and filled in by quintic Hermite
    interpolation (:func:`~gittinseval.core.roots.hermite.quintic_hermite`), within about ``1e-6 sigma`` of its
    slope changes.  Tables evaluated at every point and interpolated ones are
    handled apart, each group on windows as long as its own longest.
    """
    n_points = grid.shape[1]
    sigma = patch_terms.sigma
    reach = TAIL * np.maximum(sigma, patch_terms.widths.max(axis=1, initial=0.0))
    half = np.ceil(reach / delta).astype(np.int64) + 1
    low = np.maximum(patch.first_cell - half, 0)
    high = np.minimum(patch.first_cell + patch.exempt.size - 1 + half, n_points - 1)
    stride = (sigma / (2.0 * delta)).astype(np.int64)
    # On a short window the interpolation's overhead would not pay (and at stride 1 it is exact).
    stride = np.where(stride >= MIN_STRIDE, stride, 1)
    # Flat indices into the grid values (a view, as they are C-contiguous): a 2-D index with
    # broadcast rows costs twice as much.
    flat = smoothed.reshape(-1)
    for group in (np.flatnonzero(stride == 1), np.flatnonzero(stride > 1)):
        if not group.size:
            continue
        terms = patch_terms if group.size == grid.shape[0] else patch_terms.take(group)
        g_low, g_high = low[group, None], high[group, None]
        origin, g_delta, g_stride = grid[group, :1], delta[group, None], stride[group, None]
        if g_stride[0, 0] == 1:
            offset = np.arange(int((g_high - g_low).max()) + 1)[None, :]
            correction = terms(origin + (g_low + offset) * g_delta, derivatives=0)[0]
        else:
            offset, correction = _strided_patch_values(terms, origin, g_low, g_high, g_delta, g_stride)
        index = g_low + offset
        inside = index <= g_high
        flat[(group[:, None] * n_points + index)[inside]] += correction[inside]


def _strided_patch_values(terms: HingeSum, origin, low, high, delta, stride) -> tuple[np.ndarray, np.ndarray]:
    """The patch's expectation at ``origin + (low + offset) delta``, interpolated from every ``stride``-th point.

    Each row's window is cut into intervals of its own ``stride`` points, laid out
    ``[R, K, S]`` with ``S`` the largest stride (the stages' grids keep the rows'
    strides close, so little of the layout is padding), and filled by one
    :func:`hermite_cells` product.  ``origin``/``low``/``high``/``delta``/``stride``
    ``[R, 1]``; returns the offsets from ``low`` and the values, both ``[R, K S]``,
    with the padding's offsets beyond ``high - low``.
    """
    intervals = int(((high - low) // stride).max()) + 1
    samples = origin + (low + np.arange(intervals + 1)[None, :] * stride) * delta
    strides = tuple(stride[:, 0].tolist())
    values = hermite_cells(samples, *terms(samples, derivatives=2), padded_bases(strides))
    return _strided_offsets(strides, intervals), values.reshape(values.shape[0], -1)


@run_shared_cache(maxsize=256)
def _strided_offsets(strides: tuple[int, ...], intervals: int) -> np.ndarray:
    """``[R, K S]`` offsets of the layout of :func:`_strided_patch_values`: ``k s_r + j`` for ``j < s_r``, the
    padding (``s_r <= j < S``) at a sentinel beyond every window.  Cached like :func:`padded_bases`.
    """
    stride = np.array(strides)[:, None, None]
    interval = np.arange(intervals)[None, :, None]
    within = np.arange(stride.max())[None, None, :]
    offsets = np.where(within < stride, interval * stride + within, np.iinfo(np.int64).max // 2)
    offsets = offsets.reshape(len(strides), -1)
    offsets.setflags(write=False)
    return offsets
