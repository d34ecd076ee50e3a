"""The refined path (gittinseval.core.roots.refined): the interpolation's effect on the roots.

Its pieces have their own files: test_hermite.py, test_continuation.py, test_patch.py."""

import numpy as np
import pytest

from gittinseval.core.roots import EmpiricalTargetChain, patch, refined, root_schedule


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
