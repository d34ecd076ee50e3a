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

on a uniform grid, with the Gaussian expectation taken as an FFT convolution (the
paper's numerics, ``refine=False``) or, refined off the grid near each root, as a
convolution of the interpolant's slope changes with a kernel that vanishes beyond
8 sds (the default; see :func:`root_schedule`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.fft import next_fast_len
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


_SQRT_2PI = math.sqrt(2.0 * math.pi)
_TAIL = 8.0
"""Beyond this many sds, ``EI_sigma(z)`` differs from ``max(z, 0)`` by under ``1e-17 sigma``."""
_SMALLEST_COST_RATIO = 1e-13
"""Smallest stage cost, relative to the chain's total sd, that double precision resolves."""
_PATCH_CELLS = 5
"""Grid cells, from the one holding the root up, on which ``W`` is kept exactly."""
_PATCH_EXEMPT = np.append(np.ones(_PATCH_CELLS), 0.5)
"""Share of each patch grid kink's chord correction handed back (see :class:`_Patch`)."""
_PATCH_NODES = 8
"""Fine nodes per patch cell while the next step is short against the grid ..."""
_FINE_PATCH_RATIO = 8.0
"""... shorter than this many cells."""
_ROOT_ITERATIONS = 12
"""Halley steps per root at most; one from the bracketing nodes usually meets the tolerance."""
_FINEST_LEVEL = 40
"""At most ``2^40`` times finer than the whole chain's grid (see :class:`_StageGrids`)."""
_MIN_STRIDE = 3
"""The patch's expectation is interpolated only between samples this many cells apart or more."""
_FFT_KERNEL_HALF = 512
"""A single table's grid expectation is a direct convolution below this kernel half-length, else an FFT."""
_TORCH_CDF_SIZE = 4096
"""Arrays from this size on take torch's ``erfc`` for ``Phi`` (see :func:`_normal_cdf`)."""


def _normal_cdf(u: np.ndarray) -> np.ndarray:
    """``Phi(u)`` elementwise.

    On large arrays torch's vectorised ``erfc`` (``Phi(u) = erfc(-u / sqrt 2) / 2``)
    is 2-5x faster than SciPy's ``ndtr``, whose per-call cost is lower on small ones.
    """
    if u.size < _TORCH_CDF_SIZE:
        return ndtr(u)
    cdf = torch.from_numpy(u * (-1.0 / math.sqrt(2.0)))
    cdf.erfc_().mul_(0.5)
    return cdf.numpy()


def _chord_weight(sigma: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Weight ``w`` that turns the expectation of ``W``'s chords into that of ``W``.

    Between grid points the chords of a smooth ``W`` lie above it by
    ``W'' delta^2 g(t) / 2``, ``g(t) = t (1 - t)`` at the fraction ``t`` of the cell.
    A Gaussian step from a grid point lands at the fraction ``frac(r Z)``,
    ``r = sigma / delta``, so there

        E[chords - W](x + sigma Z) = w E[W''(x + sigma Z)],   w = delta^2 / 2 * E[g(frac(r Z))],

    and since ``E[W''(x + sigma Z)] ~ sum_i d_i phi_s(x - xi_i)`` (``s`` from
    :func:`_curvature_width`), subtracting ``w sum_i d_i phi_s`` removes the
    ``O(delta^2)`` error of the chords.  For
    ``r >= 1`` the Fourier series of ``g`` gives
    ``E[g] = 1/6 - sum_{k >= 1} exp(-2 pi^2 k^2 r^2) / (pi^2 k^2)`` (three terms
    reach double precision); for ``r < 1`` the sum over the cells ``m`` that the
    step reaches, ``E[g] = sum_m E[(rZ - m)(1 - rZ + m); m <= rZ < m + 1]``, in
    truncated normal moments.  ``w -> delta^2 / 12`` once ``sigma`` spans a cell
    and ``w -> 0`` as ``sigma -> 0`` (the chords are exact at the grid points).
    ``sigma`` ``[H]`` against ``delta`` ``[H, C]`` (or ``[C]``); returns ``[H, C]``.
    """
    ratio = sigma[:, None] / delta
    k = np.arange(1, 4, dtype=np.float64)
    fourier = 1.0 / 6.0 - (np.exp(-2.0 * math.pi**2 * np.square(ratio[..., None] * k)) / k**2).sum(axis=-1) / math.pi**2
    # Cells within _TAIL sds of the start, for the ratios below 1.
    m = np.arange(-math.ceil(_TAIL) - 1, math.ceil(_TAIL) + 1, dtype=np.float64)
    r = np.minimum(ratio, 1.0)[..., None]
    a, b = m / r, (m + 1) / r  # cell ends in sds
    phi_a, phi_b = np.exp(-0.5 * a * a) / _SQRT_2PI, np.exp(-0.5 * b * b) / _SQRT_2PI
    mass = ndtr(b) - ndtr(a)
    first = r * (phi_a - phi_b)  # E[rZ; cell]
    second = r * r * (mass + a * phi_a - b * phi_b)  # E[(rZ)^2; cell]
    cells = (first - m * mass) - (second - 2.0 * m * first + m * m * mass)
    expected = np.where(ratio >= 1.0, fourier, cells.sum(axis=-1))
    return np.square(delta) / 2.0 * expected


def _interpolant_kinks(values: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Slope changes ``d_i = m_{i+1} - m_i`` of the extended interpolant (numpy twin of :func:`_kinks`)."""
    slopes = np.empty((values.shape[0], values.shape[1] + 1))
    slopes[:, 0], slopes[:, -1] = 0.0, 1.0
    np.divide(_differences(values), delta[:, None], out=slopes[:, 1:-1])
    return _differences(slopes)


def _first_kinks(kinks: np.ndarray) -> np.ndarray:
    """``[C]`` index of each row's first non-zero kink: ``W = max(q, 0)`` has none below the last stage's root."""
    return np.argmax(kinks != 0, axis=1)


def _smooth_on_grid(values: np.ndarray, kinks: np.ndarray, delta: np.ndarray, sigma: float,
                    chord_weight: np.ndarray) -> np.ndarray:
    """Chord-corrected Gaussian expectation of the grid interpolant at the grid points.

    ``E[G(x + sigma Z)] = G(x) + sum_i d_i h_sigma(x - xi_i)`` for the extended
    interpolant ``G = w_0 + sum_i d_i (. - xi_i)_+`` (the FFT sum of
    :func:`gaussian_smoothing`), where
    ``h_sigma(z) = EI_sigma(z) - max(z, 0) = sigma^2 phi_sigma(z) - |z| Phi(-|z| / sigma)``
    vanishes beyond ``_TAIL`` sds, so at the grid points

        E[G(xi_j + sigma Z)] - w sum_i d_i phi_s(xi_j - xi_i)
            = w_j + sum_i d_i (h_sigma - w phi_s)((j - i) delta),

    a convolution with a kernel ``2 ceil(8 s / delta) + 1`` points long (``s`` from
    :func:`_curvature_width`): the kinks, not ``W``, are convolved, so the rounding
    does not grow with the grid's span.  A single table with a kernel shorter than
    ``2 _FFT_KERNEL_HALF`` is convolved directly, several at once by one FFT.
    ``values``/``kinks`` ``[C, P]``, ``delta``/``chord_weight`` ``[C]``; returns ``[C, P]``.
    """
    n_points = values.shape[1]
    width = _curvature_width(sigma, delta)[:, None]
    half = min(n_points - 1, math.ceil(_TAIL * float(width.max()) / float(delta.min())))
    distance = np.abs(np.arange(-half, half + 1, dtype=np.float64))[None, :] * delta[:, None]
    u = distance / sigma
    v = distance / width
    kernel = sigma * sigma * np.exp(-0.5 * u * u) / (_SQRT_2PI * sigma) - distance * _normal_cdf(-u)
    kernel -= chord_weight[:, None] * np.exp(-0.5 * v * v) / (_SQRT_2PI * width)
    # The convolution starts at the first table's first kink, often a third of the grid or more in.
    first = int(_first_kinks(kinks).min())
    start = max(first - half, 0)
    valid = slice(start - first + half, n_points - first + half)
    smoothed = values.copy()
    if values.shape[0] == 1 and half < _FFT_KERNEL_HALF:
        smoothed[0, start:] += np.convolve(kinks[0, first:], kernel[0])[valid]
        return smoothed
    # Each table's kernel only as long as its own spacing needs.
    own = np.minimum(np.ceil(_TAIL * width[:, 0] / delta).astype(np.int64), half)
    kernel[np.abs(np.arange(-half, half + 1))[None, :] > own[:, None]] = 0.0
    # One FFT for all tables (torch's, which, like the plain grid's, runs on every core): its
    # rounding, ~1e-16 sum_i |d_i| max |kernel| <= 1e-16 sigma, is far below the roots' tolerance.
    length = next_fast_len(n_points - first + 2 * half, real=True)
    spectrum = torch.fft.rfft(torch.from_numpy(kinks[:, first:]), n=length)
    spectrum *= torch.fft.rfft(torch.from_numpy(kernel), n=length)
    smoothed[:, start:] += torch.fft.irfft(spectrum, n=length).numpy()[:, valid]
    return smoothed


class _HingeSum:
    """``F(x) = sum_j h_j EI_sigma(x - p_j) - sum_j g_j phi_{s_j}(x - p_j)`` and its derivatives.

    The Gaussian expectation of a piecewise-linear function with kinks ``h_j`` at
    ``p_j``, less chord corrections ``g_j`` spread over normal densities of widths
    ``s_j`` (see :func:`_curvature_width`).  Points, hinge and density weights and
    widths are ``[C, M]``; terms of several sums are concatenated so that one kernel
    evaluation serves them all.
    """

    def __init__(self, points: np.ndarray, hinge: np.ndarray, density: np.ndarray, sigma: float,
                 widths: np.ndarray):
        self.points, self.hinge, self.density, self.sigma, self.widths = points, hinge, density, sigma, widths
        self.uniform = bool(widths.size) and bool((widths == sigma).all())

    def __add__(self, other: _HingeSum) -> _HingeSum:
        return _HingeSum(
            np.concatenate([self.points, other.points], axis=1),
            np.concatenate([self.hinge, other.hinge], axis=1),
            np.concatenate([self.density, other.density], axis=1),
            self.sigma,
            np.concatenate([self.widths, other.widths], axis=1),
        )

    def take(self, rows: np.ndarray) -> _HingeSum:
        """The sums of the given rows (``[R]`` indices, repeats allowed), without terms zero in all of them."""
        hinge, density = self.hinge[rows], self.density[rows]
        live = ((hinge != 0) | (density != 0)).any(axis=0)
        if live.all():
            return _HingeSum(self.points[rows], hinge, density, self.sigma, self.widths[rows])
        return _HingeSum(self.points[rows][:, live], hinge[:, live], density[:, live], self.sigma,
                         self.widths[rows][:, live])

    def __call__(self, x: np.ndarray, derivatives: int = 1) -> list[np.ndarray]:
        """``[F, F', ...]`` up to the ``derivatives``-th (at most 3) at ``x`` (``[C, X]``).

        With ``u = z / sigma``: ``EI_sigma(z) = sigma (u Phi(u) + phi(u))``,
        ``EI_sigma' = Phi(u)``, ``EI_sigma'' = phi_sigma`` and, with ``v = z / s``,
        ``phi_s^(k)(z) = (-1)^k He_k(v) phi_s(z) / s^k`` (Hermite ``He_k``).  Sums whose
        widths are all ``sigma`` take :meth:`_sums_of_one_width`.
        """
        sigma = self.sigma
        z = x[:, :, None] - self.points[:, None, :]
        u = z / sigma
        cdf = _normal_cdf(u)
        gaussian = np.square(u)
        gaussian *= -0.5
        np.exp(gaussian, out=gaussian)  # sqrt(2 pi) sigma phi_sigma(z)
        if self.uniform:
            return self._sums_of_one_width(z, u, cdf, gaussian, derivatives)
        h, widths = self.hinge[:, :, None], self.widths[:, None, :]
        v = z / widths
        density = np.exp(-0.5 * v * v) / (_SQRT_2PI * widths)  # phi_s(z)
        g = self.density[:, :, None]
        terms = [sigma * np.matmul(u * cdf, h) + np.matmul(gaussian, h) * (sigma / _SQRT_2PI)
                 - np.matmul(density, g)]
        if derivatives >= 1:
            v_density = v * density / widths
            terms.append(np.matmul(cdf, h) + np.matmul(v_density, g))
        if derivatives >= 2:
            hinge_density = gaussian / (_SQRT_2PI * sigma)
            v2 = v * v
            terms.append(np.matmul(hinge_density, h) - np.matmul((v2 - 1.0) * density / widths**2, g))
        if derivatives >= 3:
            terms.append(-np.matmul(u * hinge_density, h) / sigma + np.matmul((v2 - 3.0) * v_density / widths**2, g))
        return [term[:, :, 0] for term in terms]

    def _sums_of_one_width(self, z, u, cdf, gaussian, derivatives: int) -> list[np.ndarray]:
        """:meth:`__call__` where every ``s_j = sigma``: ``phi_s = A / (sqrt(2 pi) sigma)``, ``A = exp(-u^2 / 2)``.

        With ``g'_j = g_j / (sqrt(2 pi) sigma)`` and ``.`` the sum over the terms:
        ``F = (z Phi(u)) . h + A . (sigma h / sqrt(2 pi) - g')``,
        ``dF/dx = Phi(u) . h + (u A) . g' / sigma``,
        ``d2F/dx2 = A . (h / (sqrt(2 pi) sigma) + g' / sigma^2) - (u^2 A) . g' / sigma^2`` and
        ``d3F/dx3 = (u A) . (-h / (sqrt(2 pi) sigma^2) - 3 g' / sigma^3) + (u^3 A) . g' / sigma^3``:
        the per-term factors go into the ``[C, M]`` weights, so fewer ``[C, X, M]`` arrays are formed.
        """
        sigma, h = self.sigma, self.hinge[:, :, None]
        g = self.density[:, :, None] / (_SQRT_2PI * sigma)
        sums = [np.matmul(z * cdf, h) + np.matmul(gaussian, sigma / _SQRT_2PI * h - g)]
        if derivatives >= 1:
            u_gaussian = u * gaussian
            sums.append(np.matmul(cdf, h) + np.matmul(u_gaussian, g / sigma))
        if derivatives >= 2:
            curvature = g / sigma**2
            u2_gaussian = u * u_gaussian
            sums.append(np.matmul(gaussian, h / (_SQRT_2PI * sigma) + curvature) - np.matmul(u2_gaussian, curvature))
        if derivatives >= 3:
            third = g / sigma**3
            sums.append(np.matmul(u_gaussian, -h / (_SQRT_2PI * sigma**2) - 3.0 * third)
                        + np.matmul(u * u2_gaussian, third))
        return [term[:, :, 0] for term in sums]


def _curvature_width(sigma: float, spacing: np.ndarray) -> np.ndarray:
    """Width ``s = max(sigma, spacing)`` of the densities that spread the chord corrections.

    The correction needs ``W''`` near ``x``, estimated from the kinks as
    ``sum_i d_i phi_s(x - xi_i)``.  With ``s = sigma`` that is ``E[W''(x + sigma Z)]``
    as long as ``sigma`` spans a cell; a narrower density would weigh a single kink
    by ``1 / sigma`` rather than ``1 / delta`` and amplify grid-scale oscillations
    from one stage to the next, so ``s`` never drops below the spacing.
    """
    return np.maximum(sigma, spacing)


@dataclass(frozen=True)
class _Patch:
    """``W`` kept exactly on a few cells around its kink, as a correction of the grid.

    The grid interpolant ``G`` of ``W = max(0, q)`` smears the kink at the root
    ``k`` over a cell and cuts the curvature of ``q`` just above it; near the end of
    the chain (``sigma << delta``) that is all that matters.  The patch stores
    ``W`` at nodes ``p_0 < ... < p_M`` (grid points, in ``fine`` rows ``_PATCH_NODES - 1`` fine
    nodes between them, and the root) spanning whole grid cells from
    ``first_cell``, as ``D = W - G`` there: piecewise linear, zero at the patch's
    ends and outside it, so

        D(x) = sum_j kappa_j (x - p_j)_+,   E[D(x + sigma Z)] = sum_j kappa_j EI_sigma(x - p_j),

    with ``kappa_j`` the slope changes of ``D``.  Chord corrections (see
    :func:`_chord_weight`): the grid kinks ``d_i`` inside the patch are not
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
    def through(cls, points, exact, root, first_cell, exempt, grid, values, delta, fine) -> _Patch:
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
        kinks = _differences(np.concatenate([zero, _slopes(points, corrections), zero], axis=1))
        curvature = np.concatenate([zero, _differences(_slopes(points, exact)), zero], axis=1)
        curvature[points == root[:, None]] = 0.0
        return cls(first_cell, exempt, fine, points, kinks, curvature)

    def with_rows(self, rows: np.ndarray, other: _Patch) -> _Patch:
        """This patch with ``rows`` replaced by ``other``'s (fewer nodes, padded with terms of weight 0)."""
        n_nodes = other.points.shape[1]
        points, kinks, curvature = self.points.copy(), self.kinks.copy(), self.curvature.copy()
        points[rows, :n_nodes], points[rows, n_nodes:] = other.points, other.points[:, -1:]
        kinks[rows, :n_nodes], kinks[rows, n_nodes:] = other.kinks, 0.0
        curvature[rows, :n_nodes], curvature[rows, n_nodes:] = other.curvature, 0.0
        return _Patch(self.first_cell, self.exempt, self.fine, points, kinks, curvature)

    @property
    def grid_index(self) -> np.ndarray:
        """``[C, n_cells + 1]`` indices of the patch's grid points."""
        return self.first_cell[:, None] + np.arange(self.exempt.size)[None, :]

    def terms(self, grid, grid_kinks, sigma, delta, chord_weight, fine_chord_weight) -> _HingeSum:
        """``E[D(x + sigma Z)]`` with the chord corrections above, as a :class:`_HingeSum`.

        ``grid_kinks`` ``[C, P]`` are the ``d_i`` of the grid values the patch corrects.
        """
        rows, index = np.arange(grid.shape[0])[:, None], self.grid_index
        exempt = chord_weight[:, None] * self.exempt[None, :] * grid_kinks[rows, index]
        fine_spacing = np.where(self.fine, delta / _PATCH_NODES, delta)
        widths = np.concatenate([
            np.repeat(_curvature_width(sigma, fine_spacing)[:, None], self.points.shape[1], axis=1),
            np.repeat(_curvature_width(sigma, delta)[:, None], exempt.shape[1], axis=1),
        ], axis=1)
        return _HingeSum(
            np.concatenate([self.points, grid[rows, index]], axis=1),
            np.concatenate([self.kinks, np.zeros_like(exempt)], axis=1),
            np.concatenate([fine_chord_weight[:, None] * self.curvature, -exempt], axis=1),
            sigma,
            widths,
        )


def _slopes(points: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Slopes between consecutive nodes; 0 on a zero-width piece (a root on a node)."""
    widths = _differences(points)
    return np.divide(_differences(values), widths, out=np.zeros_like(widths), where=widths > 0)


def _differences(rows: np.ndarray) -> np.ndarray:
    """``np.diff(rows, axis=1)`` without its per-call overhead, which shows on these small arrays."""
    return rows[:, 1:] - rows[:, :-1]


def _window(first_cell: np.ndarray, n_cells: int, reach: float, delta: np.ndarray, n_points: int,
            floor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Grid indices within ``reach`` of cells ``first_cell .. first_cell + n_cells - 1``, from ``floor`` up.

    Returns ``[C, M]`` indices clamped to the grid and the mask of those on it
    (rows shorter than the longest are padded with masked points).
    """
    half = min(n_points, math.ceil(reach / float(delta.min())) + 1)
    stop = np.minimum(first_cell + n_cells + half, n_points - 1)
    start = np.minimum(np.maximum(first_cell - half, floor), stop)
    index = start[:, None] + np.arange(int((stop - start).max()) + 1)[None, :]
    on_grid = index <= stop[:, None]
    return np.minimum(index, n_points - 1), on_grid


def _add_patch_smoothing(smoothed, patch_terms: _HingeSum, patch: _Patch, grid, delta) -> None:
    """Add the patch's expectation to the grid values ``[C, P]`` (in place; C-contiguous, from :func:`_smooth_on_grid`).

    It is linear (zero, as ``D`` and its slope vanish beyond the patch) further
    than its reach from the patch, so only a window of each table's grid changes.
    It is a Gaussian expectation, smooth on the scale ``sigma``: where that spans
    several of a table's cells, it is evaluated with two derivatives at every
    ``stride``-th point of the window (``stride delta <= sigma / 2``, so about 32
    points per table whatever its spacing) and filled in by quintic Hermite
    interpolation (:func:`_quintic_hermite`), within about ``1e-6 sigma`` of its
    slope changes.  Tables evaluated at every point and interpolated ones are
    handled apart, each group on windows as long as its own longest.
    """
    n_points = grid.shape[1]
    sigma = patch_terms.sigma
    reach = _TAIL * np.maximum(sigma, patch_terms.widths.max(axis=1, initial=0.0))
    half = np.ceil(reach / delta).astype(np.int64) + 1
    low = np.maximum(patch.first_cell - half, 0)
    high = np.minimum(patch.first_cell + patch.exempt.size - 1 + half, n_points - 1)
    stride = (sigma / (2.0 * delta)).astype(np.int64)
    # On a short window the interpolation's overhead would not pay (and at stride 1 it is exact).
    stride = np.where(stride >= _MIN_STRIDE, stride, 1)
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


def _strided_patch_values(terms: _HingeSum, origin, low, high, delta, stride) -> tuple[np.ndarray, np.ndarray]:
    """The patch's expectation at ``origin + (low + offset) delta``, interpolated from every ``stride``-th point.

    Each row's window is cut into intervals of its own ``stride`` points, laid out
    ``[R, K, S]`` with ``S`` the largest stride (the stages' grids keep the rows'
    strides close, so little of the layout is padding), and filled by one
    :func:`_hermite_cells` product.  ``origin``/``low``/``high``/``delta``/``stride``
    ``[R, 1]``; returns the offsets from ``low`` and the values, both ``[R, K S]``,
    with the padding's offsets beyond ``high - low``.
    """
    intervals = int(((high - low) // stride).max()) + 1
    samples = origin + (low + np.arange(intervals + 1)[None, :] * stride) * delta
    strides = tuple(stride[:, 0].tolist())
    values = _hermite_cells(samples, *terms(samples, derivatives=2), _padded_bases(strides))
    return _strided_offsets(strides, intervals), values.reshape(values.shape[0], -1)


@functools.lru_cache(maxsize=256)
def _strided_offsets(strides: tuple[int, ...], intervals: int) -> np.ndarray:
    """``[R, K S]`` offsets of the layout of :func:`_strided_patch_values`: ``k s_r + j`` for ``j < s_r``, the
    padding (``s_r <= j < S``) at a sentinel beyond every window.  Cached like :func:`_padded_bases`.
    """
    stride = np.array(strides)[:, None, None]
    interval = np.arange(intervals)[None, :, None]
    within = np.arange(stride.max())[None, None, :]
    offsets = np.where(within < stride, interval * stride + within, np.iinfo(np.int64).max // 2)
    offsets = offsets.reshape(len(strides), -1)
    offsets.setflags(write=False)
    return offsets


class _ContinuationNearCells:
    """Exact ``q(x) = -c + E[W(x + sigma Z)]`` of the stage's model, off the grid.

    For ``x`` in the cells ``first_cell .. first_cell + n_cells - 1``:

        q(x) = w_lo + m_lo (x - xi_lo) + sum_i d_i (EI_sigma - w phi_s)(x - xi_i)
               + E[D(x + sigma Z)] + w sum_{i in patch} d_i phi_s(x - xi_i) - c,

    the same model as the grid values, with the sum over the grid kinks within
    ``_TAIL max(sigma, s)`` of the cells: kinks further below contribute ``d_i (x - xi_i)``
    (the line through ``w_lo`` of slope ``m_lo``), kinks as far above nothing.
    Per table (``[C]``): first cell, stage cost, chord weight ``w``; ``values``,
    ``kinks`` (the ``d_i``) and ``grid`` are ``[C, P]``.
    """

    def __init__(self, values, kinks, grid, delta, sigma, stage_cost, chord_weight, patch_terms, first_cell,
                 n_cells):
        self._inputs = values, kinks, grid, delta, sigma, stage_cost, chord_weight, patch_terms, first_cell, n_cells
        rows = np.arange(grid.shape[0])[:, None]
        reach = _TAIL * float(_curvature_width(sigma, delta).max())
        index, on_grid = _window(first_cell, n_cells, reach, delta, grid.shape[1], _first_kinks(kinks))
        window_kinks = np.where(on_grid, kinks[rows, index], 0.0)
        points = grid[rows, index]
        lowest = index[:, 0]
        self.slope = np.where(lowest > 0, (values[rows[:, 0], lowest] - values[rows[:, 0], lowest - 1]) / delta, 0.0)
        self.intercept = values[rows[:, 0], lowest] - self.slope * points[:, 0] - stage_cost
        widths = np.repeat(_curvature_width(sigma, delta)[:, None], points.shape[1], axis=1)
        self.terms = _HingeSum(points, window_kinks, chord_weight[:, None] * window_kinks, sigma, widths) + patch_terms

    def restricted(self, which: np.ndarray) -> _ContinuationNearCells:
        """The same ``q`` for the tables ``which`` only, on windows sized for them alone."""
        values, kinks, grid, delta, sigma, stage_cost, chord_weight, patch_terms, first_cell, n_cells = self._inputs
        if which.size == grid.shape[0]:
            return self
        return _ContinuationNearCells(values[which], kinks[which], grid[which], delta[which], sigma, stage_cost[which],
                                      chord_weight[which], patch_terms.take(which), first_cell[which], n_cells)

    def __call__(self, x: np.ndarray, derivatives: int = 1) -> list[np.ndarray]:
        """``[q, q', ...]`` up to the ``derivatives``-th at ``x`` (``[C, X]``, inside the cells)."""
        terms = self.terms(x, derivatives)
        terms[0] = terms[0] + self.intercept[:, None] + self.slope[:, None] * x
        if derivatives >= 1:
            terms[1] = terms[1] + self.slope[:, None]
        return terms


def _halley_root(q: _ContinuationNearCells, start: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                 tolerance: np.ndarray) -> np.ndarray:
    """Root of the non-decreasing ``q`` in ``[lower, upper]`` (``[C]``), by safeguarded Halley steps.

    Halley's step ``s = -2 q q' / (2 q'^2 - q q'')`` leaves an error of
    ``(q''^2 / (4 q'^2) - q''' / (6 q')) s^3`` to leading order, so one step from a
    start inside the root's cell usually ends the search; a step that leaves the
    current bracket is replaced by bisection.
    """
    x = start
    active = np.ones(x.shape, dtype=bool)
    for _ in range(_ROOT_ITERATIONS):
        value, slope, curvature, third = (column[:, 0] for column in q(x[:, None], derivatives=3))
        lower = np.where(value < 0, x, lower)
        upper = np.where(value >= 0, x, upper)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = -2.0 * value * slope / (2.0 * slope * slope - value * curvature)
            error = np.abs((0.25 * curvature * curvature / slope - third / 6.0) / slope * step**3)
        inside = (x + step >= lower) & (x + step <= upper) & (slope > 0)
        step = np.where(inside, step, 0.5 * (lower + upper) - x)
        x = np.where(active, x + step, x)
        # A table stops on its own tolerance, so it comes out the same alone or in a batch.
        active &= np.where(inside, error, np.abs(step)) > tolerance
        if not active.any():
            break
    return x


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


def _full_information_bounds(sd: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Elementwise root ``x`` of ``EI_sd(x) = cost`` (vectorised :func:`_full_information_lower_bound`).

    Bisection on ``u = x / sd`` in ``[-40, 0]`` (``EI_1(u) = phi(u) + u Phi(u)`` is
    increasing); a cost above ``EI_sd(0)`` gives 0.  Shapes broadcast.
    """
    ratio = np.broadcast_to(cost / sd, np.broadcast_shapes(np.shape(cost), np.shape(sd)))
    lo, hi = np.full(ratio.shape, -40.0), np.zeros(ratio.shape)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        above = np.exp(-0.5 * mid * mid) / _SQRT_2PI + mid * ndtr(mid) > ratio
        hi, lo = np.where(above, mid, hi), np.where(above, lo, mid)
    return lo * sd


@dataclass(frozen=True)
class _StageGrids:
    """Nested uniform grids, one per stage and table, each as fine as its stage allows.

    Stage ``n`` needs its grid to span ``[min(-5 S_n, x_n), 1.01 C_n + 5 S_n]``: the
    rule of :func:`root_schedule` with the chain's remaining sd
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
    def plan(cls, origin, coarsest, sds, stage_costs, n_points) -> _StageGrids:
        remaining_sd = np.sqrt(np.cumsum(np.square(sds)[::-1])[::-1])[:, None]  # [H, 1]
        costs = stage_costs.T  # [H, C]
        low = np.minimum(-5.0 * remaining_sd, _full_information_bounds(remaining_sd, costs))
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
    gets them wrong (even their sign).  ``refine=True`` (default) works on nested
    per-stage grids of ``P`` points (:class:`_StageGrids`; the grid above is the
    coarsest, and a stage near the end of a long chain takes one as fine as its
    remaining span allows), keeps ``W`` exactly on a few cells above each root
    (:class:`_Patch`), corrects the grid's chords where ``W`` is smooth
    (:func:`_chord_weight`), takes the expectation on the grid by convolving the
    interpolant's slope changes (:func:`_smooth_on_grid`; the kernel is
    ``EI_sigma(z) - max(z, 0)``, negligible beyond 8 sds) and solves ``q_n(r_n) = 0`` off the
    grid by safeguarded Halley steps on the exact Gaussian expectation of that model
    (:class:`_ContinuationNearCells`): every stage's root is then within ``1e-6`` or
    1 % of its stage cost of the continuous dynamic program (tested against nested
    quadrature and an independent fine-grid solver).

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

    if refine:
        roots = _refined_roots(lower, (upper - lower) / (grid_points - 1), sds, stage_costs, grid_points)
    else:
        dtype = torch.float64
        delta_t = torch.as_tensor((upper - lower) / (grid_points - 1), dtype=dtype)
        grid_t = torch.as_tensor(lower, dtype=dtype)[:, None] + delta_t[:, None] * torch.arange(
            grid_points, dtype=dtype
        )[None, :]
        roots = _plain_grid_roots(grid_t, delta_t, sds, stage_costs)
    return roots[0] if scalar else roots


def _plain_grid_roots(grid: torch.Tensor, delta: torch.Tensor, sds: np.ndarray, stage_costs: np.ndarray) -> np.ndarray:
    """The paper's numerics: FFT smoothing on the grid, roots interpolated linearly between grid points."""
    rows = torch.arange(grid.shape[0])
    stage_costs_t = torch.as_tensor(stage_costs, dtype=grid.dtype)
    values = torch.clamp(grid, min=0.0)  # W_H(x) = max(x, 0), with its kink at 0
    roots = torch.empty(stage_costs.shape, dtype=grid.dtype)
    for stage in range(sds.size - 1, -1, -1):
        continuation = gaussian_smoothing(values, delta, float(sds[stage])) - stage_costs_t[:, stage, None]
        first = torch.argmax((continuation >= 0).to(torch.int8), dim=1)
        _check_bracket(bool(torch.any(first == 0)) or not bool(torch.all(continuation[:, -1] >= 0)), stage)
        q_lo, q_hi = continuation[rows, first - 1], continuation[rows, first]
        roots[:, stage] = grid[rows, first - 1] + delta * (-q_lo) / (q_hi - q_lo)
        values = torch.clamp(continuation, min=0.0)
    return roots.numpy()


def _check_bracket(left_the_grid: bool, stage: int) -> None:
    if left_the_grid:
        raise RuntimeError(f"Gittins root left the grid at stage {stage}; this indicates a numerical problem")


def _refined_roots(origin: np.ndarray, coarsest: np.ndarray, sds: np.ndarray, stage_costs: np.ndarray,
                   n_points: int) -> np.ndarray:
    """Roots of the grid model with patches and chord corrections, solved off the grid (``refine=True``)."""
    n_tables = origin.size
    rows = np.arange(n_tables)
    grids = _StageGrids.plan(origin, coarsest, sds, stage_costs, n_points)
    deltas = grids.coarsest[None, :] / 2.0 ** grids.level  # [H, C]
    chord = _chord_weight(sds, deltas)
    fine_chord = _chord_weight(sds, deltas / _PATCH_NODES)
    # Fine nodes pay only while the next step is short against the grid W_n lies
    # on; a longer one averages W over many cells, where the chord correction holds.
    fine_rows = np.zeros((sds.size, n_tables), dtype=bool)
    fine_rows[1:] = sds[:-1, None] < _FINE_PATCH_RATIO * deltas[:-1]

    grid, delta = grids.points(sds.size - 1, n_points), grids.delta(sds.size - 1)
    values = np.maximum(grid, 0.0)  # W_H(x) = max(x, 0), with its kink at 0
    zero_cell = np.clip(np.floor(-grid[:, 0] / delta).astype(np.int64), 0, n_points - 2)
    zero = np.zeros(n_tables)
    points = np.stack([grid[rows, zero_cell], zero, grid[rows, zero_cell + 1]], axis=1)
    # max(x, 0) is linear on both sides of 0: both grid kinks of its cell are exempt.
    patch = _Patch.through(points, np.maximum(points, 0.0), zero, zero_cell, np.ones(2), grid, values, delta,
                           np.zeros(n_tables, dtype=bool))
    roots = np.empty(stage_costs.shape)
    for stage in range(sds.size - 1, -1, -1):
        sigma = float(sds[stage])
        kinks = _interpolant_kinks(values, delta)
        smoothed = _smooth_on_grid(values, kinks, delta, sigma, chord[stage])
        fine_weight = np.where(patch.fine, fine_chord[stage], chord[stage])
        patch_terms = patch.terms(grid, kinks, sigma, delta, chord[stage], fine_weight)
        _add_patch_smoothing(smoothed, patch_terms, patch, grid, delta)
        continuation = smoothed - stage_costs[:, stage, None]
        first = np.argmax(continuation >= 0, axis=1)
        _check_bracket(bool(np.any(first == 0)) or not bool(np.all(continuation[:, -1] >= 0)), stage)

        # W_n's patch lies on the next stage's grid; a coarser one's cells span several of these.
        coarsening = int(2 ** (grids.level[stage] - grids.level[stage - 1]).max()) if stage > 0 else 1
        cell = np.minimum(first - 1, n_points - 1 - _PATCH_CELLS)
        q = _ContinuationNearCells(values, kinks, grid, delta, sigma, stage_costs[:, stage], chord[stage],
                                   patch_terms, cell, _PATCH_CELLS * coarsening)
        fine = fine_rows[stage]
        per_cell = _PATCH_NODES if fine.any() else 1
        fractions = np.arange(_PATCH_CELLS * per_cell + 1) / per_cell
        nodes = grid[rows, cell][:, None] + delta[:, None] * fractions
        if not fine.all():
            grid_nodes = rows[:, None], cell[:, None] + np.arange(_PATCH_CELLS + 1)
            bracket = _node_bracket(grid[grid_nodes], continuation[grid_nodes], first - 1 - cell, 1)
        if per_cell > 1:
            q_nodes = _continuation_at_nodes(q, nodes, per_cell, fine)
            in_cell = _node_bracket(nodes, q_nodes, (first - 1 - cell) * per_cell, per_cell)
            if fine.all():
                bracket = in_cell
            else:
                bracket = tuple(np.where(fine, a, b) for a, b in zip(in_cell, bracket, strict=True))
        root = _halley_root(q, *bracket, 1e-8 * delta)
        roots[:, stage] = root
        if stage == 0:
            break

        values = np.maximum(continuation, 0.0)
        if coarsening > 1:
            values = grids.transfer(values, stage)
            grid, delta = grids.points(stage - 1, n_points), grids.delta(stage - 1)
            moved = grids.level[stage] != grids.level[stage - 1]
            moved_cell = np.floor((root - grid[:, 0]) / delta).astype(np.int64)
            cell = np.where(moved, np.minimum(np.maximum(moved_cell, 0), n_points - 1 - _PATCH_CELLS), cell)
            nodes = grid[rows, cell][:, None] + delta[:, None] * fractions
            if per_cell > 1:
                q_nodes = _continuation_at_nodes(q, nodes, per_cell, fine)
        grid_nodes = rows[:, None], cell[:, None] + np.arange(_PATCH_CELLS + 1)
        if per_cell == 1:
            q_nodes = values[grid_nodes]
        patch = _patch_with_root(nodes, np.maximum(q_nodes, 0.0), root, cell, grid, values, delta, fine)
        coarse = np.flatnonzero(~fine) if per_cell > 1 else rows[:0]
        if coarse.size:
            # W exact at the grid points and the root only, as the row alone would have it; its
            # terms at the other nodes are exactly 0, and dropped where no row of a sum needs them.
            coarse_nodes = coarse[:, None], cell[coarse, None] + np.arange(_PATCH_CELLS + 1)
            alone = _patch_with_root(grid[coarse_nodes], values[coarse_nodes], root[coarse], cell[coarse],
                                     grid[coarse], values[coarse], delta[coarse], fine[coarse])
            patch = patch.with_rows(coarse, alone)
    return roots


def _patch_with_root(nodes, exact, root, cell, grid, values, delta, fine) -> _Patch:
    """The patch through ``W = exact`` at the nodes (``[C, M]``, ascending) and ``W = 0`` at the root."""
    all_points = np.concatenate([nodes, root[:, None]], axis=1)
    order = np.arange(nodes.shape[0])[:, None], np.argsort(all_points, axis=1, kind="stable")
    exact = np.concatenate([exact, np.zeros((nodes.shape[0], 1))], axis=1)
    return _Patch.through(all_points[order], exact[order], root, cell, _PATCH_EXEMPT, grid, values, delta, fine)


def _continuation_at_nodes(q: _ContinuationNearCells, nodes: np.ndarray, per_cell: int,
                           tables: np.ndarray) -> np.ndarray:
    """``q`` at the patch nodes (``[C, M]``, ``per_cell`` to a grid cell) of ``tables``; 0 elsewhere.

    ``q`` is a Gaussian expectation, smooth on the scale ``sigma``: where that
    spans a node cell, the quintic through ``q``, ``q'`` and ``q''`` at the cell's
    ends (:func:`_quintic_hermite`) is within about ``delta (delta / sigma)^5 / 4e4``
    of it, at a seventh of the kernel evaluations; elsewhere ``q`` is evaluated at
    every node.
    """
    out = np.zeros(nodes.shape)
    smooth = tables & (q.terms.sigma >= nodes[:, per_cell] - nodes[:, 0])
    direct = np.flatnonzero(tables & ~smooth)
    if direct.size:
        out[direct] = q.restricted(direct)(nodes[direct], derivatives=0)[0]
    smooth = np.flatnonzero(smooth)
    if smooth.size:
        ends = nodes[smooth, ::per_cell]
        out[smooth] = _quintic_hermite(ends, *q.restricted(smooth)(ends, derivatives=2), per_cell)
    return out


def _quintic_hermite(ends: np.ndarray, value: np.ndarray, slope: np.ndarray, curvature: np.ndarray,
                     per_cell: int) -> np.ndarray:
    """The quintic Hermite interpolant at ``per_cell`` equal steps across each interval.

    On ``[a, b]``, ``h = b - a``, ``t = (x - a) / h``, it matches value, slope and
    curvature at both ends:
    ``p = f_a H_0 + h f'_a H_1 + h^2 f''_a H_2 + f_b H_3 + h f'_b H_4 + h^2 f''_b H_5`` with
    ``H_0 = 1 - 10t^3 + 15t^4 - 6t^5``, ``H_1 = t - 6t^3 + 8t^4 - 3t^5``,
    ``H_2 = (t^2 - 3t^3 + 3t^4 - t^5) / 2``, ``H_3 = 1 - H_0``,
    ``H_4 = -4t^3 + 7t^4 - 3t^5``, ``H_5 = (t^3 - 2t^4 + t^5) / 2``.
    ``ends`` and the three ``[R, K + 1]``; returns ``[R, K per_cell + 1]``.
    """
    inner = _hermite_cells(ends, value, slope, curvature, _padded_bases((per_cell,)))  # [R, K, per_cell]
    return np.concatenate([inner.reshape(inner.shape[0], -1), value[:, -1:]], axis=1)


def _hermite_cells(ends: np.ndarray, value: np.ndarray, slope: np.ndarray, curvature: np.ndarray,
                   basis: np.ndarray) -> np.ndarray:
    """The quintic Hermite interpolant of :func:`_quintic_hermite` on every interval, at the basis's points.

    ``ends`` and the three ``[R, K + 1]``; ``basis`` ``[6, S]`` (or ``[R, 6, S]``, one
    per row, as from :func:`_padded_bases`): ``H_0 .. H_5`` at ``S`` fractions of an interval.  Returns ``[R, K, S]``.
    """
    h = _differences(ends)
    coefficients = np.stack([value[:, :-1], h * slope[:, :-1], h * h * curvature[:, :-1],
                             value[:, 1:], h * slope[:, 1:], h * h * curvature[:, 1:]], axis=-1)
    return np.matmul(coefficients, basis)


@functools.lru_cache(maxsize=256)
def _padded_bases(strides: tuple[int, ...]) -> np.ndarray:
    """``[R, 6, S]``: row ``r`` holds ``H_0 .. H_5`` of :func:`_quintic_hermite` at ``t = 0, 1 / s, ..., (s - 1) / s``
    for ``s = strides[r]``, padded to ``S = max(strides)``.

    Cached (at most 256, a few MB): a chain's stages repeat the same strides many times.
    """
    stride = np.array(strides)[:, None]
    bases = _hermite_basis_at(np.arange(stride.max())[None, :] / stride).transpose(1, 0, 2)
    bases.setflags(write=False)
    return bases


def _hermite_basis_at(t: np.ndarray) -> np.ndarray:
    """``[6, *t.shape]``: ``H_0 .. H_5`` of :func:`_quintic_hermite` at ``t``."""
    t2 = t * t
    t3, t4, t5 = t2 * t, t2 * t2, t2 * t2 * t
    h0 = 1 - 10 * t3 + 15 * t4 - 6 * t5
    return np.stack([h0, t - 6 * t3 + 8 * t4 - 3 * t5, (t2 - 3 * t3 + 3 * t4 - t5) / 2,
                     1 - h0, -4 * t3 + 7 * t4 - 3 * t5, (t3 - 2 * t4 + t5) / 2])


def _node_bracket(nodes: np.ndarray, q_nodes: np.ndarray, offset: np.ndarray,
                  per_cell: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start and bracket of the root among the nodes of the grid cell that holds it.

    The cell's nodes are ``offset .. offset + per_cell`` (``[C]`` offsets into the
    ``[C, M]`` nodes); the bracket is the first pair of them across which ``q``
    turns non-negative, the start the linear interpolation between them.
    """
    rows = np.arange(nodes.shape[0])
    index = offset[:, None] + np.arange(per_cell + 1)[None, :]
    crossed = q_nodes[rows[:, None], index] >= 0
    # Rounding may put a sign on the cell's ends against the grid's: stay in the cell.
    upper = np.where(crossed.any(axis=1), crossed.argmax(axis=1), per_cell)
    upper = np.minimum(np.maximum(upper, 1), per_cell) + offset
    lower = upper - 1
    x_lo, x_hi = nodes[rows, lower], nodes[rows, upper]
    q_lo, q_hi = q_nodes[rows, lower], q_nodes[rows, upper]
    rising = q_hi > q_lo
    start = x_lo - q_lo * (x_hi - x_lo) / np.where(rising, q_hi - q_lo, 1.0)
    start = np.where(rising, np.minimum(np.maximum(start, x_lo), x_hi), 0.5 * (x_lo + x_hi))
    return start, x_lo, x_hi
