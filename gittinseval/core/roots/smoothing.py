"""Gaussian expectations of piecewise-linear functions, with chord corrections (refined path).

:func:`smooth_on_grid` takes ``E[W(x + sigma Z)]`` at the grid points by convolving
the interpolant's slope changes with a kernel that vanishes beyond :data:`TAIL` sds;
:class:`HingeSum` evaluates such expectations, and three derivatives, anywhere off
the grid.  :func:`chord_weight` removes the ``O(delta^2)`` error of the chords.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.fft import next_fast_len
from scipy.special import ndtr

from gittinseval.core.roots.grid import SQRT_2PI, convolve_rows, first_kinks

TAIL = 8.0
"""Beyond this many sds, ``EI_sigma(z)`` differs from ``max(z, 0)`` by under ``1e-17 sigma``."""
_FFT_KERNEL_HALF = 512
"""A single table's grid expectation is a direct convolution below this kernel half-length, else an FFT."""
_TORCH_CDF_SIZE = 4096
"""Arrays from this size on take torch's ``erfc`` for ``Phi`` (see :func:`normal_cdf`)."""


def normal_cdf(u: np.ndarray) -> np.ndarray:
    """``Phi(u)`` elementwise.

    On large arrays torch's vectorised ``erfc`` (``Phi(u) = erfc(-u / sqrt 2) / 2``)
    is 2-5x faster than SciPy's ``ndtr``, whose per-call cost is lower on small ones.
    """
    if u.size < _TORCH_CDF_SIZE:
        return ndtr(u)
    cdf = torch.from_numpy(u * (-1.0 / math.sqrt(2.0)))
    cdf.erfc_().mul_(0.5)
    return cdf.numpy()


def curvature_width(sigma: float, spacing: np.ndarray) -> np.ndarray:
    """Width ``s = max(sigma, spacing)`` of the densities that spread the chord corrections.

    The correction needs ``W''`` near ``x``, estimated from the kinks as
    ``sum_i d_i phi_s(x - xi_i)``.  With ``s = sigma`` that is ``E[W''(x + sigma Z)]``
    as long as ``sigma`` spans a cell; a narrower density would weigh a single kink
    by ``1 / sigma`` rather than ``1 / delta`` and amplify grid-scale oscillations
    from one stage to the next, so ``s`` never drops below the spacing.
    """
    return np.maximum(sigma, spacing)


def chord_weight(sigma: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Weight ``w`` that turns the expectation of ``W``'s chords into that of ``W``.

    Between grid points the chords of a smooth ``W`` lie above it by
    ``W'' delta^2 g(t) / 2``, ``g(t) = t (1 - t)`` at the fraction ``t`` of the cell.
    A Gaussian step from a grid point lands at the fraction ``frac(r Z)``,
    ``r = sigma / delta``, so there

        E[chords - W](x + sigma Z) = w E[W''(x + sigma Z)],   w = delta^2 / 2 * E[g(frac(r Z))],

    and since ``E[W''(x + sigma Z)] ~ sum_i d_i phi_s(x - xi_i)`` (``s`` from
    :func:`curvature_width`), subtracting ``w sum_i d_i phi_s`` removes the
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
    # Cells within TAIL sds of the start, for the ratios below 1.
    m = np.arange(-math.ceil(TAIL) - 1, math.ceil(TAIL) + 1, dtype=np.float64)
    r = np.minimum(ratio, 1.0)[..., None]
    a, b = m / r, (m + 1) / r  # cell ends in sds
    phi_a, phi_b = np.exp(-0.5 * a * a) / SQRT_2PI, np.exp(-0.5 * b * b) / SQRT_2PI
    mass = ndtr(b) - ndtr(a)
    first = r * (phi_a - phi_b)  # E[rZ; cell]
    second = r * r * (mass + a * phi_a - b * phi_b)  # E[(rZ)^2; cell]
    cells = (first - m * mass) - (second - 2.0 * m * first + m * m * mass)
    expected = np.where(ratio >= 1.0, fourier, cells.sum(axis=-1))
    return np.square(delta) / 2.0 * expected


def smooth_on_grid(values: np.ndarray, kinks: np.ndarray, delta: np.ndarray, sigma: float,
                   chord_weight: np.ndarray) -> np.ndarray:
    """Chord-corrected Gaussian expectation of the grid interpolant at the grid points.

    ``E[G(x + sigma Z)] = G(x) + sum_i d_i h_sigma(x - xi_i)`` for the extended
    interpolant ``G = w_0 + sum_i d_i (. - xi_i)_+`` (the FFT sum of
    :func:`~gittinseval.core.roots.plain.gaussian_smoothing`), where
    ``h_sigma(z) = EI_sigma(z) - max(z, 0) = sigma^2 phi_sigma(z) - |z| Phi(-|z| / sigma)``
    vanishes beyond ``TAIL`` sds, so at the grid points

        E[G(xi_j + sigma Z)] - w sum_i d_i phi_s(xi_j - xi_i)
            = w_j + sum_i d_i (h_sigma - w phi_s)((j - i) delta),

    a convolution with a kernel ``2 ceil(8 s / delta) + 1`` points long (``s`` from
    :func:`curvature_width`): the kinks, not ``W``, are convolved, so the rounding
    does not grow with the grid's span.  (The plain grid's
    :func:`~gittinseval.core.roots.plain.gaussian_smoothing` convolves them with
    ``EI_sigma`` over the whole span; that kernel, less the chord correction, would move
    the refined roots by up to ``5.6e-9``, 140 stage costs at a cost of ``1e-11``.)
    A single table with a kernel shorter than ``2 _FFT_KERNEL_HALF`` is convolved
    directly, several at once by one FFT.
    ``values``/``kinks`` ``[C, P]``, ``delta``/``chord_weight`` ``[C]``; returns ``[C, P]``.
    """
    n_points = values.shape[1]
    width = curvature_width(sigma, delta)[:, None]
    half = min(n_points - 1, math.ceil(TAIL * float(width.max()) / float(delta.min())))
    distance = np.abs(np.arange(-half, half + 1, dtype=np.float64))[None, :] * delta[:, None]
    u = distance / sigma
    v = distance / width
    kernel = sigma * sigma * np.exp(-0.5 * u * u) / (SQRT_2PI * sigma) - distance * normal_cdf(-u)
    kernel -= chord_weight[:, None] * np.exp(-0.5 * v * v) / (SQRT_2PI * width)
    # The convolution starts at the first table's first kink, often a third of the grid or more in.
    first = int(first_kinks(kinks).min())
    start = max(first - half, 0)
    valid = slice(start - first + half, n_points - first + half)
    smoothed = values.copy()
    if values.shape[0] == 1 and half < _FFT_KERNEL_HALF:
        smoothed[0, start:] += np.convolve(kinks[0, first:], kernel[0])[valid]
        return smoothed
    # Each table's kernel only as long as its own spacing needs.
    own = np.minimum(np.ceil(TAIL * width[:, 0] / delta).astype(np.int64), half)
    kernel[np.abs(np.arange(-half, half + 1))[None, :] > own[:, None]] = 0.0
    # One FFT for all tables, as on the plain grid: its rounding, ~1e-16 sum_i |d_i| max |kernel|
    # <= 1e-16 sigma, is far below the roots' tolerance.
    length = next_fast_len(n_points - first + 2 * half, real=True)
    smoothed[:, start:] += convolve_rows(kinks[:, first:], kernel, length)[:, valid]
    return smoothed


class HingeSum:
    """``F(x) = sum_j h_j EI_sigma(x - p_j) - sum_j g_j phi_{s_j}(x - p_j)`` and its derivatives.

    The Gaussian expectation of a piecewise-linear function with kinks ``h_j`` at
    ``p_j``, less chord corrections ``g_j`` spread over normal densities of widths
    ``s_j`` (see :func:`curvature_width`).  Points, hinge and density weights and
    widths are ``[C, M]``; terms of several sums are concatenated so that one kernel
    evaluation serves them all.
    """

    def __init__(self, points: np.ndarray, hinge: np.ndarray, density: np.ndarray, sigma: float,
                 widths: np.ndarray):
        self.points, self.hinge, self.density, self.sigma, self.widths = points, hinge, density, sigma, widths
        self.uniform = bool(widths.size) and bool((widths == sigma).all())

    def __add__(self, other: HingeSum) -> HingeSum:
        return HingeSum(
            np.concatenate([self.points, other.points], axis=1),
            np.concatenate([self.hinge, other.hinge], axis=1),
            np.concatenate([self.density, other.density], axis=1),
            self.sigma,
            np.concatenate([self.widths, other.widths], axis=1),
        )

    def take(self, rows: np.ndarray) -> HingeSum:
        """The sums of the given rows (``[R]`` indices, repeats allowed), without terms zero in all of them."""
        hinge, density = self.hinge[rows], self.density[rows]
        live = ((hinge != 0) | (density != 0)).any(axis=0)
        if live.all():
            return HingeSum(self.points[rows], hinge, density, self.sigma, self.widths[rows])
        return HingeSum(self.points[rows][:, live], hinge[:, live], density[:, live], self.sigma,
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
        cdf = normal_cdf(u)
        gaussian = np.square(u)
        gaussian *= -0.5
        np.exp(gaussian, out=gaussian)  # sqrt(2 pi) sigma phi_sigma(z)
        if self.uniform:
            return self._sums_of_one_width(z, u, cdf, gaussian, derivatives)
        h, widths = self.hinge[:, :, None], self.widths[:, None, :]
        v = z / widths
        density = np.exp(-0.5 * v * v) / (SQRT_2PI * widths)  # phi_s(z)
        g = self.density[:, :, None]
        terms = [sigma * np.matmul(u * cdf, h) + np.matmul(gaussian, h) * (sigma / SQRT_2PI)
                 - np.matmul(density, g)]
        if derivatives >= 1:
            v_density = v * density / widths
            terms.append(np.matmul(cdf, h) + np.matmul(v_density, g))
        if derivatives >= 2:
            hinge_density = gaussian / (SQRT_2PI * sigma)
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
        g = self.density[:, :, None] / (SQRT_2PI * sigma)
        sums = [np.matmul(z * cdf, h) + np.matmul(gaussian, sigma / SQRT_2PI * h - g)]
        if derivatives >= 1:
            u_gaussian = u * gaussian
            sums.append(np.matmul(cdf, h) + np.matmul(u_gaussian, g / sigma))
        if derivatives >= 2:
            curvature = g / sigma**2
            u2_gaussian = u * u_gaussian
            sums.append(np.matmul(gaussian, h / (SQRT_2PI * sigma) + curvature) - np.matmul(u2_gaussian, curvature))
        if derivatives >= 3:
            third = g / sigma**3
            sums.append(np.matmul(u_gaussian, -h / (SQRT_2PI * sigma**2) - 3.0 * third)
                        + np.matmul(u * u2_gaussian, third))
        return [term[:, :, 0] for term in sums]
