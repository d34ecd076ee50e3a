"""The paper's plain grid dynamic program (``refine=False``): the reference numerics.

On one uniform grid per table, ``q_n = -c_n + E[W_{n+1}(x + sigma_n Z)]`` at every grid
point by one FFT convolution (:func:`gaussian_smoothing`), ``W_n = max(0, q_n)``, and the
root ``r_n`` linearly interpolated between the grid points around ``q_n``'s sign change.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from gittinseval.roots.grid import check_bracket


def expected_improvement(z: torch.Tensor, sigma: torch.Tensor | float) -> torch.Tensor:
    """``EI_sigma(z) = E[(z + sigma Z)_+] = z Phi(z / sigma) + sigma phi(z / sigma)``.

    Broadcasts ``z`` against ``sigma`` (which must be positive).
    """
    sigma = torch.as_tensor(sigma, dtype=z.dtype, device=z.device)
    u = z / sigma
    cdf = 0.5 * torch.special.erfc(-u / math.sqrt(2.0))
    pdf = torch.exp(-0.5 * u * u) / math.sqrt(2.0 * math.pi)
    return z * cdf + sigma * pdf


def _kinks(values: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """Slope changes ``d_i = m_{i+1} - m_i`` of the extended piecewise-linear ``W``.

    ``m_0 = 0`` (left extension), ``m_i = (w_i - w_{i-1}) / delta`` and ``m_P = 1``
    (right extension), so ``W(x) = w_0 + sum_i d_i (x - xi_i)_+``.  Shape ``[C, P]``.
    """
    ones = values.new_ones(values.shape[0], 1)
    slopes = torch.cat([torch.zeros_like(ones), torch.diff(values, dim=1) / delta[:, None], ones], dim=1)
    return torch.diff(slopes, dim=1)


def gaussian_smoothing(values: torch.Tensor, delta: torch.Tensor, sigma: float) -> torch.Tensor:
    """Expectation ``E[W(xi_j + sigma Z)]`` of a piecewise-linear ``W`` by FFT.

    ``W`` is given by its values ``w_j = W(xi_j)`` on a uniform grid of spacing
    ``delta`` and is extended with slope 0 left of the grid and slope 1 right of it:
    ``W(x) = w_0 + sum_i d_i (x - xi_i)_+`` with ``d_i = m_{i+1} - m_i``,
    ``m_0 = 0``, ``m_i = (w_i - w_{i-1}) / delta`` and ``m_P = 1``.  Then

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
    delta = torch.as_tensor(delta, dtype=values.dtype, device=values.device)
    kinks = _kinks(values, delta)
    offsets = torch.arange(-(n_points - 1), n_points, dtype=values.dtype, device=values.device)
    z = offsets[None, :] * delta[:, None]
    u = z / sigma
    density = torch.exp(-0.5 * u * u) / math.sqrt(2.0 * math.pi)
    kernel = z * (0.5 * torch.special.erfc(-u / math.sqrt(2.0))) + sigma * density  # EI_sigma(z)
    fft_len = 1 << (3 * n_points - 3).bit_length()
    spectrum = torch.fft.rfft(kinks, n=fft_len) * torch.fft.rfft(kernel, n=fft_len)
    full = torch.fft.irfft(spectrum, n=fft_len)
    return values[:, :1] + full[:, n_points - 1 : 2 * n_points - 1]


def plain_grid_roots(origin: np.ndarray, delta: np.ndarray, sds: np.ndarray, stage_costs: np.ndarray,
                     n_points: int) -> np.ndarray:
    """The roots ``[C, H]`` on the grids ``origin + j delta`` (``[C]``, ``j < n_points``), from the last stage back."""
    delta = torch.as_tensor(delta, dtype=torch.float64)
    grid = torch.as_tensor(origin, dtype=torch.float64)[:, None] + delta[:, None] * torch.arange(
        n_points, dtype=torch.float64
    )[None, :]
    rows = torch.arange(grid.shape[0])
    stage_costs_t = torch.as_tensor(stage_costs, dtype=grid.dtype)
    values = torch.clamp(grid, min=0.0)  # W_H(x) = max(x, 0), with its kink at 0
    roots = torch.empty(stage_costs.shape, dtype=grid.dtype)
    for stage in range(sds.size - 1, -1, -1):
        continuation = gaussian_smoothing(values, delta, float(sds[stage])) - stage_costs_t[:, stage, None]
        first = torch.argmax((continuation >= 0).to(torch.int8), dim=1)
        check_bracket(bool(torch.any(first == 0)) or not bool(torch.all(continuation[:, -1] >= 0)), stage)
        q_lo, q_hi = continuation[rows, first - 1], continuation[rows, first]
        roots[:, stage] = grid[rows, first - 1] + delta * (-q_lo) / (q_hi - q_lo)
        values = torch.clamp(continuation, min=0.0)
    return roots.numpy()
