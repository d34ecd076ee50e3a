"""Root schedules at any cost, interpolated between tables cached on a log grid of costs.

A policy whose costs are learned during a run (:mod:`gittinseval.core.cost_learning`)
needs the roots at a new cost every time an arm's estimate moves.  A table of
:func:`~gittinseval.core.roots.root_schedule` costs tens of milliseconds (N = 1319, B = 8);
:func:`interpolated_root_schedule` builds it instead from the tables at the four
neighbouring points of the log grid ``c_j = 2^(j / GRID_STEPS_PER_DOUBLING)`` (integer
``j``), each computed once per process and cached, so that a refresh costs an
interpolation once the grid points near an arm's cost are built, and the runs of a sweep
share them.
"""

from __future__ import annotations

import math

import numpy as np

from gittinseval.utils.caches import run_shared_cache
from gittinseval.utils.validation import positive_finite_values

__all__ = ["GRID_STEPS_PER_DOUBLING", "interpolated_root_schedule"]

GRID_STEPS_PER_DOUBLING = 8
"""Grid points per doubling of the cost: the spacing ``h = log(2) / 8`` in log cost."""
_SPACING = math.log(2.0) / GRID_STEPS_PER_DOUBLING


@run_shared_cache(maxsize=2048)
def _grid_table(n_examples: int, batch_size: int, prior_var: float, point: int, cell_var: float,
                grid_points: int, refine: bool) -> np.ndarray:
    """``[H]`` read-only roots at the grid cost ``exp(point * h)``, computed alone (a table computed in a
    batch of costs can differ in the last bits, and a run must not depend on what was cached before it)."""
    # Imported here: the package's __init__ imports this module.
    from gittinseval.core.roots import root_schedule

    roots = root_schedule(n_examples, batch_size, prior_var, math.exp(point * _SPACING), cell_var=cell_var,
                          grid_points=grid_points, refine=refine)
    roots.flags.writeable = False
    return roots


def interpolated_root_schedule(
    n_examples: int,
    batch_size: int,
    prior_var: float,
    cost_per_example: np.ndarray,
    cell_var: float = 0.25,
    grid_points: int = 1025,
    refine: bool = True,
) -> np.ndarray:
    """The roots of :func:`~gittinseval.core.roots.root_schedule` at each cost, by cubic interpolation in log cost.

    With ``u = log(c) / h``, ``i = floor(u)`` and ``t = u - i``, each stage's root is the
    cubic through the roots at the grid costs ``c_{i-1}, c_i, c_{i+1}, c_{i+2}``:

        r(c) = -t (t - 1)(t - 2) / 6 r_{i-1} + (t + 1)(t - 1)(t - 2) / 2 r_i
               - (t + 1) t (t - 2) / 2 r_{i+1} + (t + 1) t (t - 1) / 6 r_{i+2},

    exact at grid costs.  Every root of the continuous dynamic program is smooth in
    ``log c``; linear interpolation at this spacing is off by up to a third of a stage cost,
    the cubic by at most 0.3 of the root schedule's own accuracy (``1e-6`` or 1 % of the
    stage cost ``b_n c``), measured at 25 random costs in ``[1e-6, 3e-2]`` on each of
    ``(N, B, v_0) = (1319, 8, 0.01), (200, 4, 0.04), (100, 1, 0.0025)``.  Within that
    accuracy the interpolated index is the Gittins index at ``c``.

    Args:
        n_examples, batch_size, prior_var, cell_var, grid_points, refine: as in
            :func:`~gittinseval.core.roots.root_schedule`.
        cost_per_example: ``[C]`` costs ``lambda c_k > 0``.

    Returns:
        ``[C, H]`` float64 roots, ``H = ceil(N / B)``.
    """
    costs = positive_finite_values(np.atleast_1d(np.asarray(cost_per_example, dtype=np.float64)), "cost_per_example")
    position = np.log(costs) / _SPACING
    lower = np.floor(position).astype(np.int64)
    t = (position - lower)[:, None]
    weights = (-t * (t - 1) * (t - 2) / 6, (t + 1) * (t - 1) * (t - 2) / 2, -(t + 1) * t * (t - 2) / 2,
               (t + 1) * t * (t - 1) / 6)
    settings = (int(n_examples), int(batch_size), float(prior_var))
    options = (float(cell_var), int(grid_points), bool(refine))
    roots = np.zeros((costs.size, -(-int(n_examples) // int(batch_size))))
    for offset, weight in zip((-1, 0, 1, 2), weights, strict=True):
        roots += weight * np.stack([_grid_table(*settings, int(point) + offset, *options) for point in lower])
    return roots
