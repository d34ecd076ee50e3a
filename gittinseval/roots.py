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
from scipy.special import ndtr
from scipy.stats import norm

from gittinseval.validation import positive_float, positive_int

__all__ = [
    "EmpiricalTargetChain",
    "expected_improvement",
    "gaussian_smoothing",
    "root_schedule",
]


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
        positive_int("n_examples", self.n_examples)
        positive_int("batch_size", self.batch_size)
        if self.batch_size > self.n_examples:
            raise ValueError(
                f"batch_size ({self.batch_size}) is larger than the number of examples "
                f"N = {self.n_examples}"
            )
        positive_float("prior_var", self.prior_var)
        positive_float("cell_var", self.cell_var)

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


def _kinks(values: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """Slope changes ``d_i = m_{i+1} - m_i`` of the extended piecewise-linear ``W``.

    ``m_0 = 0`` (left extension), ``m_i = (w_i - w_{i-1}) / delta`` and ``m_P = 1``
    (right extension), so ``W(x) = w_0 + sum_i d_i (x - xi_i)_+``.  Shape ``[C, P]``.
    """
    ones = values.new_ones(values.shape[0], 1)
    slopes = torch.cat([torch.zeros_like(ones), torch.diff(values, dim=1) / delta[:, None], ones], dim=1)
    return torch.diff(slopes, dim=1)


def gaussian_smoothing(
    values: torch.Tensor, delta: torch.Tensor, sigma: float, chord_weight: torch.Tensor | None = None
) -> torch.Tensor:
    """Expectation ``E[W(xi_j + sigma Z)]`` of a piecewise-linear ``W`` by FFT.

    ``W`` is given by its values ``w_j = W(xi_j)`` on a uniform grid of spacing
    ``delta`` and is extended with slope 0 left of the grid and slope 1 right of it:
    ``W(x) = w_0 + sum_i d_i (x - xi_i)_+`` with ``d_i = m_{i+1} - m_i``,
    ``m_0 = 0``, ``m_i = (w_i - w_{i-1}) / delta`` and ``m_P = 1``.  Then

        E[W(xi_j + sigma Z)] = w_0 + sum_i d_i EI_sigma((j - i) delta),

    a linear convolution of ``d`` (length ``P``) with the kernel
    ``e_l = EI_sigma((l - (P - 1)) delta)`` (length ``2P - 1``), whose valid slice
    ``l = P-1 .. 2P-2`` is read off a zero-padded FFT of length ``L >= 3P - 2``.

    With ``chord_weight`` ``w`` the kernel becomes ``EI_sigma(z) - w phi_sigma(z)``
    (``phi_sigma`` the ``N(0, sigma^2)`` density, ``d^2 EI_sigma / dz^2``): the
    expectation of a smooth ``W`` of which ``w_j`` are samples, rather than of its
    chords (see :func:`_chord_weight`).

    Args:
        values: ``[C, P]`` float64 grid values, one row per table.
        delta: ``[C]`` grid spacings.
        sigma: transition standard deviation (shared by all rows).
        chord_weight: ``[C]`` weights ``w`` of the chord correction, or ``None``.

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
    if chord_weight is not None:
        kernel = kernel - chord_weight[:, None] * density / sigma
    fft_len = 1 << (3 * n_points - 3).bit_length()
    spectrum = torch.fft.rfft(kinks, n=fft_len) * torch.fft.rfft(kernel, n=fft_len)
    full = torch.fft.irfft(spectrum, n=fft_len)
    return values[:, :1] + full[:, n_points - 1 : 2 * n_points - 1]


_SQRT_2PI = math.sqrt(2.0 * math.pi)
_TAIL = 8.0
"""Beyond this many sds, ``EI_sigma(z)`` differs from ``max(z, 0)`` by under ``1e-17 sigma``."""
_SMALLEST_COST_RATIO = 1e-13
"""Smallest stage cost, relative to the chain's total sd, that double precision resolves."""
_SMOOTH_RATIO = 1.0
"""Chords are corrected only where ``sigma`` spans a cell: a ``W`` curved on a
shorter scale is not smooth at the grid's resolution (the patch handles it)."""
_PATCH_CELLS = 5
"""Grid cells, from the one holding the root up, on which ``W`` is kept exactly."""
_PATCH_NODES = 8
"""Fine nodes per patch cell while the next step is short against the grid ..."""
_FINE_PATCH_RATIO = 4.0
"""... shorter than this many cells."""


def _chord_weight(sigma: float, delta: np.ndarray) -> np.ndarray:
    """Weight ``w`` that turns the expectation of ``W``'s chords into that of ``W``.

    Between grid points the chords of a smooth ``W`` lie above it by
    ``W'' t (delta - t) / 2`` (``t`` the offset in the cell).  Averaged over a
    Gaussian step, with ``t (delta - t)`` expanded in its Fourier series,

        E[chords - W](x + sigma Z) = w E[W''(x + sigma Z)],
        w = delta^2 / 12 * (1 - 6 / pi^2 sum_{k >= 1} exp(-2 pi^2 k^2 sigma^2 / delta^2) / k^2),

    at the grid points: ``delta^2 / 12`` once ``sigma`` spans a cell, and 0 as
    ``sigma -> 0`` (the chords are exact at the grid points).  Since
    ``E[W''(x + sigma Z)] ~ sum_i d_i phi_sigma(x - xi_i)``, subtracting
    ``w sum_i d_i phi_sigma`` removes the ``O(delta^2)`` error of the chords.
    Returns ``[C]``.
    """
    ratio = sigma / np.asarray(delta, dtype=np.float64)
    # Only ratio >= _SMOOTH_RATIO = 1 is used, where term k is below exp(-2 pi^2 k^2):
    # three terms reach double precision.
    k = np.arange(1, 4, dtype=np.float64)
    series = (np.exp(-2.0 * math.pi**2 * np.square(ratio[:, None] * k[None, :])) / k**2).sum(axis=1)
    weight = np.square(delta) / 12.0 * (1.0 - 6.0 / math.pi**2 * series)
    return np.where(ratio >= _SMOOTH_RATIO, weight, 0.0)


def _kernels(offsets: np.ndarray, sigma: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """At ``z``: ``EI_sigma``, its slope ``Phi(z / sigma)``, ``phi_sigma`` and its slope."""
    u = offsets / sigma
    cdf = ndtr(u)
    density = np.exp(-0.5 * u * u) / (_SQRT_2PI * sigma)
    return offsets * cdf + sigma * sigma * density, cdf, density, -u / sigma * density


def _grid_kinks(values: np.ndarray, delta: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Slope changes ``d_i`` of the extended interpolant at ``index`` (``[C, M]``), and ``m_i``."""
    rows = np.arange(values.shape[0])[:, None]
    # Slopes left (m_i) and right (m_{i+1}) of each point; 0 / 1 beyond the grid.
    padded = np.concatenate([values[:, :1], values, values[:, -1:] + delta[:, None]], axis=1)
    left = (padded[rows, index + 1] - padded[rows, index]) / delta[:, None]
    right = (padded[rows, index + 2] - padded[rows, index + 1]) / delta[:, None]
    return right - left, left


class _HingeSum:
    """``F(x) = sum_j h_j EI_sigma(x - p_j) - sum_j g_j phi_sigma(x - p_j)`` and ``F'(x)``.

    The Gaussian expectation of a piecewise-linear function with kinks ``h_j`` at
    ``p_j``, less chord corrections ``g_j`` (see :func:`_chord_weight`).  Points,
    hinge and density weights are ``[C, M]``; terms of several sums are
    concatenated so that one kernel evaluation serves them all.
    """

    def __init__(self, points: np.ndarray, hinge: np.ndarray, density: np.ndarray, sigma: float):
        self.points, self.hinge, self.density, self.sigma = points, hinge, density, sigma

    def __add__(self, other: _HingeSum) -> _HingeSum:
        return _HingeSum(
            np.concatenate([self.points, other.points], axis=1),
            np.concatenate([self.hinge, other.hinge], axis=1),
            np.concatenate([self.density, other.density], axis=1),
            self.sigma,
        )

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``F`` and ``F'`` at ``x`` (``[C, X]``)."""
        hinge, cdf, density, density_slope = _kernels(x[:, :, None] - self.points[:, None, :], self.sigma)
        h, g = self.hinge[:, :, None], self.density[:, :, None]
        value = np.matmul(hinge, h) - np.matmul(density, g)
        slope = np.matmul(cdf, h) - np.matmul(density_slope, g)
        return value[:, :, 0], slope[:, :, 0]


@dataclass(frozen=True)
class _Patch:
    """``W`` kept exactly on a few cells around its kink, as a correction of the grid.

    The grid interpolant ``G`` of ``W = max(0, q)`` smears the kink at the root
    ``k`` over a cell and cuts the curvature of ``q`` just above it; near the end of
    the chain (``sigma << delta``) that is all that matters.  The patch stores
    ``W`` at fine nodes ``p_0 < ... < p_M`` (spacing ``delta / _PATCH_NODES``)
    spanning whole grid cells, the root among them, as ``D = W - G`` there:
    piecewise linear, zero at the patch's ends and outside it, so

        D(x) = sum_j kappa_j (x - p_j)_+,   E[D(x + sigma Z)] = sum_j kappa_j EI_sigma(x - p_j),

    with ``kappa_j`` the slope changes of ``D``.  Chord corrections (see
    :func:`_chord_weight`): the grid kinks ``d_i`` inside the patch are not
    curvature of a smooth ``W`` and are exempt from the grid's, so
    ``+ w sum_i e_i d_i phi_sigma(x - xi_i)`` adds it back (``e_i = 1``, or
    ``1/2`` at an upper end above which ``W`` is smooth: a kink's curvature spans
    the half cells on both sides of it); the fine chords get their own,
    ``- w_fine sum_j c_j phi_sigma(x - p_j)`` over the slope changes ``c_j`` of the
    fine interpolant at nodes other than the root and the ends.
    Shapes: ``first_cell`` ``[C]``, ``points``/``weights``/``curvature``
    ``[C, M + 1]``, ``grid_points``/``grid_kinks`` ``[C, n_cells + 1]``.
    """

    first_cell: np.ndarray
    n_cells: int
    points: np.ndarray
    weights: np.ndarray
    curvature: np.ndarray
    fine_delta: np.ndarray
    grid_points: np.ndarray
    grid_kinks: np.ndarray

    @classmethod
    def from_values(cls, first_cell, n_cells, points, exact, root, grid, values, delta, exempt,
                    nodes_per_cell=1) -> _Patch:
        """The patch through ``exact = W(points)`` (``[C, M + 1]``, sorted, ``root`` among them)."""
        rows = np.arange(grid.shape[0])[:, None]
        position = (points - grid[:, :1]) / delta[:, None]
        left = np.clip(np.floor(position).astype(np.int64), 0, grid.shape[1] - 2)
        weight = position - left
        corrections = exact - ((1 - weight) * values[rows, left] + weight * values[rows, left + 1])
        # D vanishes at the patch's ends (grid points) by construction; there the
        # difference is rounding, which must not leak outside the patch.
        corrections[:, [0, -1]] = 0.0
        zero = np.zeros((points.shape[0], 1))
        weights = np.diff(np.concatenate([zero, _slopes(points, corrections), zero], axis=1), axis=1)
        fine_kinks = np.diff(_slopes(points, exact), axis=1)
        curvature = np.concatenate([zero, fine_kinks, zero], axis=1)
        curvature[points == root[:, None]] = 0.0
        index = first_cell[:, None] + np.arange(n_cells + 1)[None, :]
        grid_kinks = _grid_kinks(values, delta, index)[0] * np.asarray(exempt, dtype=np.float64)[None, :]
        return cls(first_cell, n_cells, points, weights, curvature, delta / nodes_per_cell, grid[rows, index],
                   grid_kinks)

    def terms(self, sigma: float, chord_weight: np.ndarray) -> _HingeSum:
        """``E[D(x + sigma Z)]`` with the chord corrections above, as a :class:`_HingeSum`."""
        fine = _chord_weight(sigma, self.fine_delta)[:, None] * self.curvature
        exempt = chord_weight[:, None] * self.grid_kinks
        return _HingeSum(
            np.concatenate([self.points, self.grid_points], axis=1),
            np.concatenate([self.weights, np.zeros_like(self.grid_points)], axis=1),
            np.concatenate([fine, -exempt], axis=1),
            sigma,
        )


def _slopes(points: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Slopes between consecutive nodes; 0 on a zero-width piece (a root on a node)."""
    widths = np.diff(points, axis=1)
    return np.divide(np.diff(values, axis=1), widths, out=np.zeros_like(widths), where=widths > 0)


def _window(first_cell: np.ndarray, n_cells: int, sigma: float, delta: np.ndarray,
            n_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Grid indices within ``_TAIL`` sds of cells ``first_cell .. first_cell + n_cells - 1``.

    Returns ``[C, M]`` indices clamped to the grid and the mask of those on it.
    """
    half = min(n_points, math.ceil(_TAIL * sigma / float(delta.min())) + 1)
    index = first_cell[:, None] + np.arange(-half, half + n_cells + 1)[None, :]
    on_grid = (index >= 0) & (index < n_points)
    return np.clip(index, 0, n_points - 1), on_grid


def _add_patch_smoothing(smoothed, patch_terms: _HingeSum, first_cell, n_cells, grid, delta) -> None:
    """Add the patch's expectation to the grid values ``[C, P]`` (in place).

    It vanishes more than ``_TAIL`` sds from the patch: only a window changes.
    """
    index, on_grid = _window(first_cell, n_cells, patch_terms.sigma, delta, grid.shape[1])
    rows = np.arange(grid.shape[0])[:, None]
    correction, _ = patch_terms(grid[rows, index])
    # Clamped duplicates of an edge index must not be added twice.
    np.add.at(smoothed, (np.broadcast_to(rows, index.shape), index), np.where(on_grid, correction, 0.0))


class _ContinuationNearCells:
    """Exact ``q(x) = -c + E[W(x + sigma Z)]`` of the stage's model, off the grid.

    For ``x`` in the cells ``first_cell .. first_cell + n_cells - 1``:

        q(x) = w_lo + m_lo (x - xi_lo) + sum_i d_i (EI_sigma - w phi_sigma)(x - xi_i)
               + E[D(x + sigma Z)] + w sum_{i in patch} d_i phi_sigma(x - xi_i) - c,

    the same model as the FFT grid values, with the sum over the grid kinks within
    ``_TAIL`` sds of the cells: kinks further below contribute ``d_i (x - xi_i)``
    (the line through ``w_lo`` of slope ``m_lo``), kinks as far above nothing.
    Per table (``[C]``): first cell, stage cost, chord weight ``w``; ``values`` and
    ``grid`` are ``[C, P]``.
    """

    def __init__(self, values, grid, delta, sigma, stage_cost, chord_weight, patch_terms, first_cell, n_cells):
        rows = np.arange(grid.shape[0])[:, None]
        index, on_grid = _window(first_cell, n_cells, sigma, delta, grid.shape[1])
        kinks, left = _grid_kinks(values, delta, index)
        kinks = np.where(on_grid, kinks, 0.0)
        points = grid[rows, index]
        self.slope = np.where(index[:, 0] > 0, left[:, 0], 0.0)
        self.intercept = values[rows[:, 0], index[:, 0]] - self.slope * points[:, 0] - stage_cost
        self.terms = _HingeSum(points, kinks, chord_weight[:, None] * kinks, sigma) + patch_terms

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``q`` and ``q'`` at ``x`` (``[C, X]``, inside the cells)."""
        value, slope = self.terms(x)
        return self.intercept[:, None] + self.slope[:, None] * x + value, self.slope[:, None] + slope


def _newton_root(q: _ContinuationNearCells, start: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                 tolerance: float, iterations: int = 12) -> np.ndarray:
    """Root of the non-decreasing ``q`` in ``[lower, upper]`` (``[C]``), by safeguarded Newton.

    A Newton step that leaves the current bracket is replaced by bisection.
    """
    x = start
    for _ in range(iterations):
        value, slope = (column[:, 0] for column in q(x[:, None]))
        lower = np.where(value < 0, x, lower)
        upper = np.where(value >= 0, x, upper)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = x - value / slope
        inside = (newton >= lower) & (newton <= upper) & (slope > 0)
        step = np.where(inside, newton, 0.5 * (lower + upper)) - x
        x = x + step
        if np.abs(step).max() <= tolerance:
            break
    return x


def _patch_above_root(q, root, cell, grid, values, delta, fine) -> _Patch:
    """The patch of ``W = max(0, q)`` on ``_PATCH_CELLS`` cells from ``cell``.

    With ``fine``, ``_PATCH_NODES`` nodes per cell; else the root and grid points only.
    """
    nodes = _PATCH_NODES if fine else 1
    fractions = np.arange(_PATCH_CELLS * nodes + 1) / nodes
    fine = grid[np.arange(grid.shape[0]), cell][:, None] + delta[:, None] * fractions[None, :]
    points = np.sort(np.concatenate([fine, root[:, None]], axis=1), axis=1)
    exact = np.maximum(q(points)[0], 0.0)
    exempt = np.ones(_PATCH_CELLS + 1)
    exempt[-1] = 0.5
    return _Patch.from_values(cell, _PATCH_CELLS, points, exact, root, grid, values, delta, exempt, nodes)


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
    refine: bool = True,
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
    plain-grid numerics) ``r_n`` is the zero crossing linearly interpolated between
    the last grid point with ``q_n < 0`` and the first with ``q_n >= 0``.  Near the
    end of the chain the roots are smaller than the grid spacing and the plain grid
    gets them wrong (even their sign).  ``refine=True`` (default) keeps ``W``
    exactly on a few cells above each root (:class:`_Patch`), corrects the grid's
    chords where ``W`` is smooth (:func:`_chord_weight`, in the same FFT) and
    solves ``q_n(r_n) = 0`` off the grid by safeguarded Newton on the exact
    Gaussian expectation of that model (:class:`_ContinuationNearCells`): every
    stage's root is then within about ``1e-6`` or 1 % of its stage cost of the
    continuous dynamic program (tested against nested quadrature).

    Args:
        n_examples: ``N``, the number of benchmark examples per arm.
        batch_size: ``B``, examples per batch (``1 <= B <= N``).
        prior_var: ``v_0 > 0``, the prior variance of the latent mean.
        cost_per_example: ``lambda * c_k > 0``: a float, or a 1-D array of them.
        cell_var: ``tau_cell^2 > 0``, the working variance of one score.
        grid_points: ``P``, the number of grid points (at least 3).
        refine: solve the roots off the grid (see above); ``False`` reproduces the
            plain-grid roots exactly.

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
    if not np.all(np.isfinite(costs)) or np.any(costs <= 0):
        bad = np.flatnonzero(~(np.isfinite(costs) & (costs > 0)))
        raise ValueError(f"cost_per_example must be positive and finite; bad entries at {bad.tolist()}")

    sds = chain.step_sds
    total_sd = float(np.sqrt(np.sum(sds**2)))
    stage_costs = costs[:, None] * chain.batch_sizes[None, :]  # [C, H]
    if stage_costs.min() < _SMALLEST_COST_RATIO * total_sd:
        raise ValueError(
            f"cost_per_example {costs.min():.3g} is too small to resolve: a stage cost below "
            f"{_SMALLEST_COST_RATIO:g} x the chain's total sd ({total_sd:.3g}) vanishes in double precision; "
            "use a larger lambda or cost"
        )
    lower = np.array(
        [min(-5.0 * total_sd, _full_information_lower_bound(total_sd, c.min())) for c in stage_costs]
    )
    upper = 1.01 * stage_costs.sum(axis=1) + 5.0 * total_sd

    dtype = torch.float64
    lower_t = torch.as_tensor(lower, dtype=dtype)
    delta = torch.as_tensor((upper - lower) / (grid_points - 1), dtype=dtype)
    grid = lower_t[:, None] + delta[:, None] * torch.arange(grid_points, dtype=dtype)[None, :]
    stage_costs_t = torch.as_tensor(stage_costs, dtype=dtype)

    values = torch.clamp(grid, min=0.0)  # W_H(x) = max(x, 0), with its kink at 0
    rows = torch.arange(costs.size)
    # The refinement works on NumPy views of the same memory: its arrays are tiny,
    # and NumPy's per-operation overhead is a fraction of torch's.
    grid_np, delta_np = grid.numpy(), delta.numpy()
    tolerance = 1e-8 * float(delta_np.min())
    if refine:
        zero_cell = np.clip(np.floor(-lower / delta_np).astype(np.int64), 0, grid_points - 2)
        zero = np.zeros(costs.size)
        points = np.stack([grid_np[rows, zero_cell], zero, grid_np[rows, zero_cell + 1]], axis=1)
        # max(x, 0) is linear on both sides of 0: both grid kinks of its cell are exempt.
        patch = _Patch.from_values(
            zero_cell, 1, points, np.maximum(points, 0.0), zero, grid_np, values.numpy(), delta_np, [1.0, 1.0]
        )
    roots = torch.empty(costs.size, chain.horizon, dtype=dtype)
    for stage in range(chain.horizon - 1, -1, -1):
        sigma = float(sds[stage])
        if refine:
            chord_weight = _chord_weight(sigma, delta_np)
            smoothed = gaussian_smoothing(values, delta, sigma, torch.from_numpy(chord_weight))
            patch_terms = patch.terms(sigma, chord_weight)
            _add_patch_smoothing(smoothed.numpy(), patch_terms, patch.first_cell, patch.n_cells, grid_np, delta_np)
        else:
            smoothed = gaussian_smoothing(values, delta, sigma)
        continuation = smoothed - stage_costs_t[:, stage, None]
        first = torch.argmax((continuation >= 0).to(torch.int8), dim=1)
        if torch.any(first == 0) or not torch.all(continuation[:, -1] >= 0):
            raise RuntimeError(
                "Gittins root left the grid at stage "
                f"{stage}; this indicates a numerical problem (costs {costs.tolist()})"
            )
        q_lo, q_hi = continuation[rows, first - 1], continuation[rows, first]
        roots[:, stage] = grid[rows, first - 1] + delta * (-q_lo) / (q_hi - q_lo)
        if refine:
            cell = np.minimum((first - 1).numpy(), grid_points - 1 - _PATCH_CELLS)
            q = _ContinuationNearCells(
                values.numpy(), grid_np, delta_np, sigma, stage_costs[:, stage], chord_weight, patch_terms, cell,
                _PATCH_CELLS,
            )
            bracket = grid_np[rows, (first - 1).numpy()], grid_np[rows, first.numpy()]
            root = _newton_root(q, roots[:, stage].numpy(), *bracket, tolerance)
            roots[:, stage] = torch.from_numpy(root)
        values = torch.clamp(continuation, min=0.0)
        if refine:
            # Fine nodes pay only while the next step is short against the grid; a
            # longer one averages W over many cells, where the chord correction holds.
            # The spacing compared with is the cost-free part of every table's,
            # 10 S / (P - 1), so a table comes out the same alone or in a batch.
            fine = stage == 0 or sds[stage - 1] < _FINE_PATCH_RATIO * 10.0 * total_sd / (grid_points - 1)
            patch = _patch_above_root(q, root, cell, grid_np, values.numpy(), delta_np, fine)

    out = roots.numpy()
    return out[0] if scalar else out
