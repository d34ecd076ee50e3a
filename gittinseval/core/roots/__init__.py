"""Stopping-root schedules of the empirical-target Gittins index.

The index of an unfinished arm at local stage ``n`` (``n`` batches observed) is
``G = M - r_n`` where ``M`` is the posterior mean of the arm's full-benchmark
empirical mean and ``r_n`` is the root of the centred continuation value
``q_n(r_n) = 0`` (paper, appendices "One-Dimensional Gittins Index Computation",
"FFT Implementation" and "Anytime Recommendation").  :func:`root_schedule` computes
the whole schedule ``r_0, ..., r_{H-1}`` by the backward dynamic program

    W_H(x) = max(x, 0),
    q_n(x) = -c_n + E[W_{n+1}(x + sigma_n Z)],      Z ~ N(0, 1),
    W_n(x) = max(0, q_n(x)),

on a uniform grid, with the Gaussian expectation taken as an FFT convolution (the
paper's numerics, ``refine=False``) or, refined off the grid near each root, as a
convolution of the interpolant's slope changes with a kernel that vanishes beyond
8 sds (the default).

The modules, in reading order:

- :mod:`~gittinseval.core.roots.chain`: the arm's chain (stages, batch sizes, step sds);
- :mod:`~gittinseval.core.roots.grid`: what both paths share (the whole chain's grid and
  its lower end, the interpolant's slope changes, their FFT convolution);
- :mod:`~gittinseval.core.roots.plain`: the plain grid program, the reference;
- :mod:`~gittinseval.core.roots.cost_grid`: schedules at any cost, interpolated between tables cached
  on a log grid of costs (for costs learned during a run);
- :mod:`~gittinseval.core.roots.refined`: the refined path's stage loop, which builds on
  :mod:`~gittinseval.core.roots.stage_grids` (per-stage grids),
  :mod:`~gittinseval.core.roots.smoothing` (expectations on and off the grid),
  :mod:`~gittinseval.core.roots.patch` (``W`` kept exactly near its root),
  :mod:`~gittinseval.core.roots.continuation` (``q_n`` near its root, and the root) and
  :mod:`~gittinseval.core.roots.hermite` (quintic Hermite interpolation).

The public names are those of ``__all__``; the modules' other names are internal
(documented, and used by the tests, but not a stable interface).
"""

from __future__ import annotations

import numpy as np

from gittinseval.core.roots.chain import EmpiricalTargetChain
from gittinseval.core.roots.cost_grid import interpolated_root_schedule
from gittinseval.core.roots.grid import chain_grids
from gittinseval.core.roots.plain import expected_improvement, gaussian_smoothing, plain_grid_roots
from gittinseval.core.roots.refined import refined_roots
from gittinseval.utils.caches import run_shared_cache
from gittinseval.utils.threads import active_threads, torch_threads
from gittinseval.utils.validation import positive_finite_values, positive_int

__all__ = [
    "EmpiricalTargetChain",
    "completed_root_table",
    "expected_improvement",
    "gaussian_smoothing",
    "interpolated_root_schedule",
    "root_schedule",
]


_SMALLEST_COST_RATIO = 1e-13
"""Smallest stage cost, relative to the chain's total sd, that double precision resolves."""


def root_schedule(
    n_examples: int,
    batch_size: int,
    prior_var: float,
    cost_per_example: float | np.ndarray,
    cell_var: float = 0.25,
    grid_points: int = 1025,
    refine: bool = True,
    threads: int | None = None,
) -> np.ndarray:
    """Gittins stopping roots ``r_n`` of the empirical-target chain, one table per cost.

    Stage ``n`` charges ``c_n = b_n * cost_per_example`` (``cost_per_example`` is
    ``lambda * c_k``), uses the step sd ``sigma_n`` of :class:`EmpiricalTargetChain`
    (partial last batch included) and the recursion in the module docstring.

    Grid: ``grid_points`` uniform points ``xi_j`` per table from
    ``min(-5 S, x_lb)`` to ``1.01 sum_n c_n + 5 S``, where
    ``S = sqrt(sum_n sigma_n^2)`` is the total step sd of the chain and ``x_lb``
    solves ``EI_S(x_lb) = min_n c_n``.  Every root lies in
    ``[x_lb, sum_n c_n]`` (continuing to the end is worth at least
    ``x - sum_n c_n``; no continuation is worth more than full information), so the
    grid always brackets it.  Each table has its own grid, so a cheap arm is not
    resolved on an expensive arm's span.  Outside the grid ``W`` is extended with
    slope 0 on the left and slope 1 on the right (``W(x) -> max(x, 0)``).

    Root: ``q_n`` is non-decreasing in ``x``; with ``refine=False`` (the paper's
    plain-grid numerics, :mod:`~gittinseval.core.roots.plain`) ``r_n`` is the zero crossing
    linearly interpolated between the last grid point with ``q_n < 0`` and the first
    with ``q_n >= 0``.  Near the end of the chain the roots are smaller than the grid
    spacing and the plain grid gets them wrong (even their sign).  ``refine=True``
    (default, :mod:`~gittinseval.core.roots.refined`) corrects the grid model near each root
    and solves ``q_n(r_n) = 0`` off the grid: every stage's root is then within ``1e-6``
    or 1 % of its stage cost of the continuous dynamic program.

    Args:
        n_examples: ``N``, the number of benchmark examples per arm.
        batch_size: ``B``, examples per batch (``1 <= B <= N``).
        prior_var: ``v_0 > 0``, the prior variance of the latent mean.
        cost_per_example: ``lambda * c_k > 0``: a float, or a 1-D array of them.
        cell_var: ``tau_cell^2 > 0``, the working variance of one score.
        grid_points: ``P``, the number of grid points (at least 3).
        refine: solve the roots off the grid (see above); ``False`` reproduces the
            plain-grid roots exactly.
        threads: torch threads for the FFTs; ``None``: the count of the run that
            calls it (:func:`~gittinseval.utils.threads.torch_threads`), else one, since a
            second thread beside any busy process makes the tables several times slower.

    Returns:
        Float64 array of shape ``[len(costs), H]`` (``[H]`` for a float cost) with
        ``H = ceil(N / B)``; entry ``n`` is the root ``r_n`` of stage ``n``.
    """
    chain = EmpiricalTargetChain(n_examples, batch_size, prior_var, cell_var)
    grid_points = positive_int("grid_points", grid_points)
    if grid_points < 3:
        raise ValueError(f"grid_points must be at least 3, got {grid_points}")
    scalar = np.ndim(cost_per_example) == 0
    costs = np.atleast_1d(np.asarray(cost_per_example, dtype=np.float64))
    if costs.ndim != 1 or costs.size == 0:
        raise ValueError(f"cost_per_example must be a float or a non-empty 1-D array, got shape {costs.shape}")
    costs = positive_finite_values(costs, "cost_per_example")

    sds = chain.step_sds
    total_sd = float(np.sqrt(np.sum(sds**2)))
    stage_costs = costs[:, None] * chain.batch_sizes[None, :]  # [C, H]
    if stage_costs.min() < _SMALLEST_COST_RATIO * total_sd:
        raise ValueError(
            f"cost_per_example {costs.min():.3g} is too small to resolve: a stage cost below "
            f"{_SMALLEST_COST_RATIO:g} x the chain's total sd ({total_sd:.3g}) vanishes in double precision; "
            "use a larger lambda or cost"
        )
    origin, delta = chain_grids(sds, stage_costs, grid_points)
    with torch_threads(active_threads() if threads is None else threads):
        roots = (refined_roots if refine else plain_grid_roots)(origin, delta, sds, stage_costs, grid_points)
    return roots[0] if scalar else roots


@run_shared_cache(maxsize=256)
def completed_root_table(
    n_examples: int,
    batch_size: int,
    prior_var: float,
    costs: tuple[float, ...],
    cell_var: float,
    grid_points: int,
    refine: bool,
) -> np.ndarray:
    """``[C, H + 1]`` read-only :func:`root_schedule` table with stage ``H`` (a completed arm) at 0.

    Cached per process: the tables depend only on these settings, so the runs of one
    sweep that share them (every seed of a subject and cost mode) compute them once.
    """
    roots = root_schedule(
        n_examples, batch_size, prior_var, np.array(costs), cell_var=cell_var, grid_points=grid_points, refine=refine
    )
    table = np.concatenate([roots, np.zeros((len(costs), 1))], axis=1)
    table.flags.writeable = False
    return table
