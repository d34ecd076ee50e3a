"""The refined path's stage grids (gittinseval.core.roots.stage_grids)."""

import numpy as np

from gittinseval.core.roots import EmpiricalTargetChain
from gittinseval.core.roots.stage_grids import StageGrids
from tests.core.roots.roots_reference import full_information_root


def test_stage_grids_are_nested_and_hold_every_stage():
    chain = EmpiricalTargetChain(1534, 8, 0.04)
    sds, stage_costs = chain.step_sds, 1e-6 * chain.batch_sizes[None, :]
    total = float(np.sqrt(np.sum(sds**2)))
    origin = np.array([min(-5 * total, full_information_root(total, stage_costs.min()))])
    coarsest = (1.01 * stage_costs.sum() + 5 * total - origin) / 1024
    grids = StageGrids.plan(origin, coarsest, sds, stage_costs, 1025)
    levels = grids.level[:, 0]
    assert levels[0] == 0 and levels[-1] > 5 and np.all(np.diff(levels) >= 0)
    np.testing.assert_array_equal(grids.points(0, 1025), origin[:, None] + coarsest * np.arange(1025))
    remaining_sd = np.sqrt(np.cumsum(sds[::-1] ** 2)[::-1])
    remaining_cost = np.cumsum(stage_costs[0, ::-1])[::-1]
    for stage in range(chain.horizon):
        points = grids.points(stage, 1025)[0]
        # Every root lies between the full-information bound and the remaining cost.
        assert points[0] <= full_information_root(remaining_sd[stage], stage_costs[0, stage])
        assert points[-1] >= remaining_cost[stage] + 5 * remaining_sd[stage]
        if stage and levels[stage] != levels[stage - 1]:
            coarser = grids.points(stage - 1, 1025)[0]
            shared = coarser[(coarser >= points[0]) & (coarser <= points[-1])]
            assert np.abs(shared[:, None] - points[None, :]).min(axis=1).max() < 1e-12 * total
            # W_n = max(x - a, 0) with its kink on the finer grid moves over exactly.
            kink = points[500]
            moved = grids.transfer(np.maximum(points - kink, 0.0)[None], stage)[0]
            np.testing.assert_allclose(moved, np.maximum(coarser - kink, 0.0), rtol=0, atol=1e-12 * total)
