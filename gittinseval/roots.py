"""Stopping-root schedules of the empirical-target Gittins index.

The index of an unfinished arm at local stage ``n`` (``n`` batches observed) is
``G = M - r_n`` where ``M`` is the posterior mean of the arm's full-benchmark
empirical mean and ``r_n`` is the root of the centred continuation value
``q_n(r_n) = 0`` (paper, appendices "One-Dimensional Gittins Index Computation",
"FFT Implementation" and "Anytime Recommendation").  This module computes the
whole schedule ``r_0, ..., r_{H-1}`` by the backward dynamic program

    W_H(x) = max(x, 0),
    q_n(x) = -c_n + E[W_{n+1}(x + sigma_n Z)],      Z ~ N(0, 1),
    W_n(x) = max(0, q_n(x)),

on a uniform grid, with the Gaussian expectation taken as an FFT convolution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import brentq
from scipy.stats import norm

__all__ = [
    "EmpiricalTargetChain",
    "expected_improvement",
    "gaussian_smoothing",
    "root_schedule",
]


def _validate_positive(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


def _validate_count(name: str, value: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class EmpiricalTargetChain:
    """Batch schedule of one arm's empirical-target Markov chain.

    For ``N`` examples evaluated in batches of ``B`` the chain has ``H = ceil(N / B)``
    stages with batch sizes ``b_n = min(B, N - n B)`` (the last one may be partial).
    The latent mean has prior ``N(mu_0, v_0)`` and every cell has working variance
    ``tau_cell^2``, so the latent variance before stage ``n`` is

        v_{n+1} = (1 / v_n + b_n / tau_cell^2)^{-1},

    and the posterior mean ``M`` of the empirical target moves by a centred Gaussian
    step of standard deviation

        sigma_n = a v_n / sqrt(v_n + tau_cell^2 / b_n),   a = 1 + tau_cell^2 / (N v_0).

    Attributes are NumPy float64 arrays of shape ``[H]``.
    """

    n_examples: int
    batch_size: int
    prior_var: float
    cell_var: float = 0.25

    def __post_init__(self) -> None:
        _validate_count("n_examples", self.n_examples)
        _validate_count("batch_size", self.batch_size)
        if self.batch_size > self.n_examples:
            raise ValueError(
                f"batch_size ({self.batch_size}) is larger than the number of examples "
                f"N = {self.n_examples}"
            )
        _validate_positive("prior_var", self.prior_var)
        _validate_positive("cell_var", self.cell_var)

    @property
    def horizon(self) -> int:
        return -(-self.n_examples // self.batch_size)

    @property
    def batch_sizes(self) -> np.ndarray:
        starts = np.arange(self.horizon) * self.batch_size
        return np.minimum(self.batch_size, self.n_examples - starts).astype(np.float64)

    @property
    def latent_vars(self) -> np.ndarray:
        """Latent posterior variance ``v_n`` before stage ``n``, shape ``[H]``."""
        precisions = 1.0 / self.prior_var + np.concatenate(
            ([0.0], np.cumsum(self.batch_sizes)[:-1])
        ) / self.cell_var
        return 1.0 / precisions

    @property
    def target_scale(self) -> float:
        """``a = 1 + tau_cell^2 / (N v_0)``, with ``M = a mu + (1 - a) mu_0``."""
        return 1.0 + self.cell_var / (self.n_examples * self.prior_var)

    @property
    def step_sds(self) -> np.ndarray:
        """Transition standard deviations ``sigma_n`` of ``M``, shape ``[H]``."""
        v = self.latent_vars
        return self.target_scale * v / np.sqrt(v + self.cell_var / self.batch_sizes)


def expected_improvement(z: torch.Tensor, sigma: torch.Tensor | float) -> torch.Tensor:
    """``EI_sigma(z) = E[(z + sigma Z)_+] = z Phi(z / sigma) + sigma phi(z / sigma)``.

    Broadcasts ``z`` against ``sigma`` (which must be positive).
    """
    sigma = torch.as_tensor(sigma, dtype=z.dtype, device=z.device)
    u = z / sigma
    cdf = 0.5 * torch.special.erfc(-u / math.sqrt(2.0))
    pdf = torch.exp(-0.5 * u * u) / math.sqrt(2.0 * math.pi)
    return z * cdf + sigma * pdf


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
    n_tables, n_points = values.shape
    delta = torch.as_tensor(delta, dtype=values.dtype, device=values.device)
    ones = values.new_ones(n_tables, 1)
    slopes = torch.cat(
        [torch.zeros_like(ones), torch.diff(values, dim=1) / delta[:, None], ones], dim=1
    )
    kinks = torch.diff(slopes, dim=1)
    offsets = torch.arange(-(n_points - 1), n_points, dtype=values.dtype, device=values.device)
    kernel = expected_improvement(offsets[None, :] * delta[:, None], sigma)
    fft_len = 1 << (3 * n_points - 3).bit_length()
    spectrum = torch.fft.rfft(kinks, n=fft_len) * torch.fft.rfft(kernel, n=fft_len)
    full = torch.fft.irfft(spectrum, n=fft_len)
    return values[:, :1] + full[:, n_points - 1 : 2 * n_points - 1]


def _full_information_lower_bound(total_sd: float, cost: float) -> float:
    """Root of ``EI_S(x) = cost``: no stage root of a chain with total sd ``S`` is lower.

    Every ``W_{n+1}`` lies below the full-information value ``EI_{S_{n+1}}`` (the
    value of seeing the terminal state for free), hence ``q_n(x) <= EI_S(x) - c_n``.
    """
    def value(x: float) -> float:
        return total_sd * norm.pdf(x / total_sd) + x * norm.cdf(x / total_sd) - cost

    lo = -total_sd
    while value(lo) > 0:
        lo *= 2.0
    return brentq(value, lo, max(cost, total_sd), xtol=1e-14 * total_sd)


def root_schedule(
    n_examples: int,
    batch_size: int,
    prior_var: float,
    cost_per_example: float | np.ndarray,
    cell_var: float = 0.25,
    grid_points: int = 1025,
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

    Root: ``q_n`` is non-decreasing in ``x``; ``r_n`` is the zero crossing, linearly
    interpolated between the last grid point with ``q_n < 0`` and the first with
    ``q_n >= 0``.

    Args:
        n_examples: ``N``, the number of benchmark examples per arm.
        batch_size: ``B``, examples per batch (``1 <= B <= N``).
        prior_var: ``v_0 > 0``, the prior variance of the latent mean.
        cost_per_example: ``lambda * c_k > 0``: a float, or a 1-D array of them.
        cell_var: ``tau_cell^2 > 0``, the working variance of one score.
        grid_points: ``P``, the number of grid points (at least 3).

    Returns:
        Float64 array of shape ``[len(costs), H]`` (``[H]`` for a float cost) with
        ``H = ceil(N / B)``; entry ``n`` is the root ``r_n`` of stage ``n``.
    """
    chain = EmpiricalTargetChain(n_examples, batch_size, prior_var, cell_var)
    grid_points = _validate_count("grid_points", grid_points)
    if grid_points < 3:
        raise ValueError(f"grid_points must be at least 3, got {grid_points}")
    scalar = np.ndim(cost_per_example) == 0
    costs = np.atleast_1d(np.asarray(cost_per_example, dtype=np.float64))
    if costs.ndim != 1 or costs.size == 0:
        raise ValueError(f"cost_per_example must be a float or a non-empty 1-D array, got shape {costs.shape}")
    if not np.all(np.isfinite(costs)) or np.any(costs <= 0):
        bad = np.flatnonzero(~(np.isfinite(costs) & (costs > 0)))
        raise ValueError(f"cost_per_example must be positive and finite; bad entries at {bad.tolist()}")

    sds = chain.step_sds
    total_sd = float(np.sqrt(np.sum(sds**2)))
    stage_costs = costs[:, None] * chain.batch_sizes[None, :]  # [C, H]
    lower = np.array(
        [min(-5.0 * total_sd, _full_information_lower_bound(total_sd, c.min())) for c in stage_costs]
    )
    upper = 1.01 * stage_costs.sum(axis=1) + 5.0 * total_sd

    dtype = torch.float64
    lower_t = torch.as_tensor(lower, dtype=dtype)
    delta = torch.as_tensor((upper - lower) / (grid_points - 1), dtype=dtype)
    grid = lower_t[:, None] + delta[:, None] * torch.arange(grid_points, dtype=dtype)[None, :]
    stage_costs_t = torch.as_tensor(stage_costs, dtype=dtype)

    values = torch.clamp(grid, min=0.0)  # W_H(x) = max(x, 0)
    roots = torch.empty(costs.size, chain.horizon, dtype=dtype)
    rows = torch.arange(costs.size)
    for stage in range(chain.horizon - 1, -1, -1):
        continuation = gaussian_smoothing(values, delta, float(sds[stage])) - stage_costs_t[:, stage, None]
        first = torch.argmax((continuation >= 0).to(torch.int8), dim=1)
        if torch.any(first == 0) or not torch.all(continuation[:, -1] >= 0):
            raise RuntimeError(
                "Gittins root left the grid at stage "
                f"{stage}; this indicates a numerical problem (costs {costs.tolist()})"
            )
        q_lo, q_hi = continuation[rows, first - 1], continuation[rows, first]
        roots[:, stage] = grid[rows, first - 1] + delta * (-q_lo) / (q_hi - q_lo)
        values = torch.clamp(continuation, min=0.0)

    out = roots.numpy()
    return out[0] if scalar else out
