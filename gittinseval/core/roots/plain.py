"""The paper's plain grid dynamic program (``refine=False``): the reference numerics.

On one uniform grid per table, ``q_n = -c_n + E[W_{n+1}(x + sigma_n Z)]`` at every grid
point by one FFT convolution (:func:`gaussian_smoothing`), ``W_n = max(0, q_n)``, and the
root ``r_n`` linearly interpolated between the grid points around ``q_n``'s sign change.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from gittinseval.core.roots.grid import SQRT_2PI, check_bracket, convolve_rows, slope_changes


def expected_improvement(z: torch.Tensor, sigma: torch.Tensor | float) -> torch.Tensor:
    """``EI_sigma(z) = E[(z + sigma Z)_+] = z Phi(z / sigma) + sigma phi(z / sigma)``.

    Broadcasts ``z`` against ``sigma`` (which must be positive).
    """
    sigma = torch.as_tensor(sigma, dtype=z.dtype, device=z.device)
    u = z / sigma
    cdf = 0.5 * torch.special.erfc(-u / math.sqrt(2.0))
    pdf = torch.exp(-0.5 * u * u) / SQRT_2PI
    return z * cdf + sigma * pdf


def gaussian_smoothing(values: np.ndarray, delta: np.ndarray, sigma: float) -> np.ndarray:
    """Expectation ``E[W(xi_j + sigma Z)]`` of a piecewise-linear ``W`` by FFT.

    ``W`` is given by its values ``w_j = W(xi_j)`` on a uniform grid of spacing
    ``delta`` and is extended with slope 0 left of the grid and slope 1 right of it:
    ``W(x) = w_0 + sum_i d_i (x - xi_i)_+`` with the slope changes ``d_i``
    (:func:`~gittinseval.core.roots.grid.slope_changes`).  Then

        E[W(xi_j + sigma Z)] = w_0 + sum_i d_i EI_sigma((j - i) delta),

    a linear convolution of ``d`` (length ``P``) with the kernel
    ``e_l = EI_sigma((l - (P - 1)) delta)`` (length ``2P - 1``), whose valid slice
    ``l = P-1 .. 2P-2`` is read off a zero-padded FFT of length ``L >= 3P - 2``.

    Args:
        values: ``[C, P]`` float64 grid values, one row per table.
        delta: ``[C]`` grid spacings.
        sigma: transition standard deviation (shared by all rows).

    Returns:
        ``[C, P]`` expected values at the grid points.
    """
    n_points = values.shape[1]
    offsets = np.arange(-(n_points - 1), n_points, dtype=np.float64)
    kernel = expected_improvement(torch.from_numpy(offsets[None, :] * delta[:, None]), sigma)
    full = convolve_rows(slope_changes(values, delta), kernel, 1 << (3 * n_points - 3).bit_length())
    return values[:, :1] + full[:, n_points - 1 : 2 * n_points - 1]


def plain_grid_roots(origin: np.ndarray, delta: np.ndarray, sds: np.ndarray, stage_costs: np.ndarray,
                     n_points: int) -> np.ndarray:
    """The roots ``[C, H]`` on the grids ``origin + j delta`` (``[C]``, ``j < n_points``), from the last stage back."""
    rows = np.arange(origin.size)
    grid = origin[:, None] + delta[:, None] * np.arange(n_points)
    values = np.maximum(grid, 0.0)  # W_H(x) = max(x, 0), with its kink at 0
    roots = np.empty(stage_costs.shape)
    for stage in range(sds.size - 1, -1, -1):
        continuation = gaussian_smoothing(values, delta, float(sds[stage])) - stage_costs[:, stage, None]
        first = np.argmax(continuation >= 0, axis=1)
        check_bracket(bool(np.any(first == 0)) or not bool(np.all(continuation[:, -1] >= 0)), stage)
        q_lo, q_hi = continuation[rows, first - 1], continuation[rows, first]
        roots[:, stage] = grid[rows, first - 1] + delta * (-q_lo) / (q_hi - q_lo)
        values = np.maximum(continuation, 0.0)
    return roots
