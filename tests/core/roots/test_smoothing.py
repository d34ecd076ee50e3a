"""Expectations on and off the grid with chord corrections (gittinseval.core.roots.smoothing)."""

import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import ndtr
from scipy.stats import norm

from gittinseval.core.roots import gaussian_smoothing
from gittinseval.core.roots.grid import slope_changes
from gittinseval.core.roots.smoothing import HingeSum, chord_weight, normal_cdf, smooth_on_grid
from tests.core.roots.roots_reference import ei, normal_quadrature


@pytest.mark.parametrize("size", [7, 5000])  # both sides of the switch to torch's erfc
def test_normal_cdf_matches_scipy(size):
    u = np.linspace(-40, 12, size).reshape(1, -1)
    np.testing.assert_allclose(normal_cdf(u), ndtr(u), rtol=5e-13, atol=1e-300)


@pytest.mark.parametrize("ratio", [0.05, 0.3, 0.8, 1.0, 1.7, 4.0])
def test_chord_weight_is_the_mean_chord_gap_after_a_gaussian_step(ratio):
    # w = delta^2 / 2 E[g(frac(r Z))], g(t) = t (1 - t): integrated cell by cell, no series.
    delta = 0.01
    edges = np.arange(-math.ceil(9 * ratio) - 1, math.ceil(9 * ratio) + 2) / ratio  # frac(r z) restarts at z = m / r
    inside = edges[(edges > -9) & (edges < 9)]
    pieces = np.concatenate([[-9.0], inside, [9.0]])
    expected = sum(
        quad(lambda z: (r := np.mod(ratio * z, 1.0)) * (1 - r) * norm.pdf(z), a, b, epsabs=1e-14)[0]
        for a, b in zip(pieces[:-1], pieces[1:], strict=True)
    )
    weight = chord_weight(np.array([ratio * delta]), np.array([delta]))[0, 0]
    assert weight == pytest.approx(delta**2 / 2 * expected, rel=1e-9)


def test_chord_correction_removes_the_second_order_error_of_the_chords():
    # A smooth W with the grid's extensions (slope 0 far left, 1 far right): softplus.
    scale, sigma = 0.05, 0.02
    exact_w = lambda x: scale * np.logaddexp(0.0, x / scale)  # noqa: E731
    z, weights = normal_quadrature(20001, 10.0)
    errors = {}
    for n_points in (201, 401):
        grid = np.linspace(-1.0, 1.0, n_points)
        delta = np.array([grid[1] - grid[0]])
        values = exact_w(grid)[None]
        exact = exact_w(grid[:, None] + sigma * z[None, :]) @ weights
        kinks = slope_changes(values, delta)
        for label, weight in (("chords", np.zeros(1)), ("corrected", chord_weight(np.array([sigma]), delta)[0])):
            errors[label, n_points] = np.abs(smooth_on_grid(values, kinks, delta, sigma, weight)[0] - exact).max()
    assert errors["corrected", 201] < errors["chords", 201] / 30
    # Second order left: halving delta cuts the chords' error by 4, the corrected one by about 16.
    assert errors["chords", 201] / errors["chords", 401] == pytest.approx(4.0, rel=0.05)
    assert errors["corrected", 201] / errors["corrected", 401] > 10.0


@pytest.mark.parametrize("sigma", [0.004, 0.03, 0.4])
def test_short_convolution_is_the_fft_smoothing_less_the_chord_correction(sigma):
    rng = np.random.default_rng(1)
    n_points, delta = 129, 0.01
    grid = -0.6 + delta * np.arange(n_points)
    values = np.stack([np.maximum(grid, 0.0), np.maximum(0, np.cumsum(rng.uniform(0, 1, n_points)) * delta - 0.3)])
    deltas = np.array([delta, delta])
    weight = np.array([2e-5, 5e-6])
    kinks = slope_changes(values, deltas)
    assert np.all(kinks[:, :20] == 0)  # W = 0 on the left: the convolution starts at the first kink
    fft = gaussian_smoothing(values, deltas, sigma)
    offsets = (np.arange(n_points)[:, None] - np.arange(n_points)[None, :]) * delta
    width = max(sigma, delta)  # the chord correction's density never narrower than a cell
    density = norm.pdf(offsets / width) / width
    # Both tables in one FFT, and each alone (a direct convolution).
    for rows in ([0, 1], [0], [1]):
        ours = smooth_on_grid(values[rows], kinks[rows], deltas[rows], sigma, weight[rows])
        for ours_row, row in zip(ours, rows, strict=True):
            expected = fft[row] - weight[row] * density @ kinks[row]
            np.testing.assert_allclose(ours_row, expected, rtol=0, atol=1e-13)


@pytest.mark.parametrize("ratio", [0.02, 0.07, 0.3, 1.0, 3.0])
def test_chord_correction_never_amplifies_a_grid_scale_oscillation(ratio):
    # Over thousands of stages a factor above 1 on the sawtooth mode blows the program up.
    n_points, delta = 201, 0.01
    grid = -1.0 + delta * np.arange(n_points)
    smooth = 0.1 * np.logaddexp(0.0, grid / 0.1)[None]
    sawtooth = 1e-6 * (-1.0) ** np.arange(n_points)
    sigma, deltas = ratio * delta, np.array([delta])
    weight = chord_weight(np.array([sigma]), deltas)[0]
    out = [smooth_on_grid(w, slope_changes(w, deltas), deltas, sigma, weight)[0]
           for w in (smooth, smooth + sawtooth)]
    interior = slice(50, 150)
    assert np.abs((out[1] - out[0])[interior]).max() <= 1e-6


@pytest.mark.parametrize("one_width", [True, False])
def test_hinge_sum_and_its_derivatives_match_scipy(one_width):
    # F = sum_j h_j EI_sigma(x - p_j) - g_j phi_{s_j}(x - p_j); the derivatives from
    # norm.pdf's closed forms in z, and the first also by central differences of F.
    rng = np.random.default_rng(7)
    sigma, shape = 0.3, (3, 9)
    points, hinge, density = rng.normal(size=shape), rng.normal(size=shape), rng.normal(size=shape)
    widths = np.full(shape, sigma) if one_width else rng.choice([sigma, 0.45, 0.8], size=shape)
    sums = HingeSum(points, hinge, density, sigma, widths)
    assert sums.uniform == one_width
    x = rng.normal(size=(3, 5))
    z, h, g, s = x[:, :, None] - points[:, None, :], hinge[:, None, :], density[:, None, :], widths[:, None, :]
    phi_sigma, phi_s = norm.pdf(z, scale=sigma), norm.pdf(z, scale=s)

    def value(at):
        shifted = at[:, :, None] - points[:, None, :]
        return (h * ei(shifted, sigma)).sum(-1) - (g * norm.pdf(shifted, scale=s)).sum(-1)

    expected = [
        value(x),
        (h * norm.cdf(z / sigma)).sum(-1) + (g * z / s**2 * phi_s).sum(-1),
        (h * phi_sigma).sum(-1) - (g * (z**2 / s**4 - 1 / s**2) * phi_s).sum(-1),
        -(h * z / sigma**2 * phi_sigma).sum(-1) - (g * (3 * z / s**4 - z**3 / s**6) * phi_s).sum(-1),
    ]
    ours = sums(x, derivatives=3)
    for order, (mine, theirs) in enumerate(zip(ours, expected, strict=True)):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-12, err_msg=f"derivative {order}")
    step = 1e-5
    np.testing.assert_allclose(ours[1], (value(x + step) - value(x - step)) / (2 * step), rtol=0, atol=1e-8)
    for order in range(3):
        np.testing.assert_array_equal(sums(x, derivatives=order)[order], ours[order])
