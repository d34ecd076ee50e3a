"""Nested uniform grids, one per stage and table (refined path)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gittinseval.core.roots.grid import grid_bottom

_FINEST_LEVEL = 40
"""At most ``2^40`` times finer than the whole chain's grid (see :class:`StageGrids`)."""


@dataclass(frozen=True)
class StageGrids:
    """Nested uniform grids, one per stage and table, each as fine as its stage allows.

    Stage ``n`` needs its grid to span ``[min(-5 S_n, x_n), 1.01 C_n + 5 S_n]``: the
    rule of :func:`~gittinseval.core.roots.grid.chain_grids` with the chain's remaining sd
    ``S_n = sqrt(sum_{m >= n} sigma_m^2)``, remaining cost ``C_n = sum_{m >= n} c_m``
    and full-information bound ``EI_{S_n}(x_n) = c_n`` (widened, going backwards,
    to every later stage's span).  Late stages of a long chain need a span of a few
    ``S_n`` only, where ``W`` varies on the scale ``S_n``: on the whole chain's grid
    that is a cell or two and its tail is not resolved.  So stage ``n`` takes the
    finest level ``l`` of spacing ``delta_l = delta_0 / 2^l`` whose ``P`` points hold
    its span, on the lattice ``origin + k delta_l`` (level 0 is the whole chain's
    grid): levels only coarsen going backwards, and a coarser grid's points are
    points of every finer one.  Shapes: ``origin``/``coarsest`` ``[C]``,
    ``level``/``start`` ``[H, C]``.
    """

    origin: np.ndarray
    coarsest: np.ndarray
    level: np.ndarray
    start: np.ndarray

    @classmethod
    def plan(cls, origin, coarsest, sds, stage_costs, n_points) -> StageGrids:
        remaining_sd = np.sqrt(np.cumsum(np.square(sds)[::-1])[::-1])[:, None]  # [H, 1]
        costs = stage_costs.T  # [H, C]
        low = grid_bottom(remaining_sd, costs)
        high = 1.01 * np.cumsum(costs[::-1], axis=0)[::-1] + 5.0 * remaining_sd
        low = np.minimum.accumulate(low[::-1], axis=0)[::-1]
        high = np.maximum.accumulate(high[::-1], axis=0)[::-1]
        room = (n_points - 2) * coarsest[None, :] / (high - low)
        level = np.clip(np.floor(np.log2(room)), 0, _FINEST_LEVEL).astype(np.int64)
        start = np.zeros_like(level)
        for table in range(level.shape[1]):
            # A level's grid serves a run of stages; the run's first stage has the widest span.
            first = np.searchsorted(level[:, table], level[:, table])
            delta = coarsest[table] / 2.0 ** level[:, table]
            start[:, table] = np.floor((low[first, table] - origin[table]) / delta)
        start[level == 0] = 0
        return cls(origin, coarsest, level, start)

    @property
    def deltas(self) -> np.ndarray:
        """``[H, C]`` spacings of every stage's grids."""
        return self.coarsest[None, :] / 2.0 ** self.level

    def delta(self, stage: int) -> np.ndarray:
        return self.coarsest / 2.0 ** self.level[stage]

    def points(self, stage: int, n_points: int) -> np.ndarray:
        offsets = self.start[stage][:, None] + np.arange(n_points)[None, :]
        return self.origin[:, None] + offsets * self.delta(stage)[:, None]

    def transfer(self, values: np.ndarray, stage: int) -> np.ndarray:
        """``W_n`` (``[C, P]`` on stage ``n``'s grid) on stage ``n - 1``'s grid.

        A point of the coarser grid is a point of the finer one, or lies below it,
        where ``W_n = 0`` (the finer grid starts below ``r_n``), or above it, where the
        grid's slope-1 extension holds.
        """
        n_points = values.shape[1]
        factor = 2 ** (self.level[stage] - self.level[stage - 1])
        index = (self.start[stage - 1][:, None] + np.arange(n_points)[None, :]) * factor[:, None]
        index -= self.start[stage][:, None]
        rows = np.arange(values.shape[0])[:, None]
        inside = values[rows, np.minimum(np.maximum(index, 0), n_points - 1)]
        beyond = values[:, -1:] + (index - (n_points - 1)) * self.delta(stage)[:, None]
        return np.where(index < 0, 0.0, np.where(index >= n_points, beyond, inside))
