"""Root schedules against closed forms, direct summation and an independent solver."""

import math

import numpy as np
import pytest
import torch
from scipy.integrate import quad
from scipy.optimize import brentq
from scipy.signal import fftconvolve
from scipy.special import ndtr
from scipy.stats import norm

from gittinseval.roots import (
    EmpiricalTargetChain,
    expected_improvement,
    gaussian_smoothing,
    patch,
    refined,
    root_schedule,
)
from gittinseval.roots.continuation import ContinuationNearCells
from gittinseval.roots.grid import grid_bottom, slope_changes
from gittinseval.roots.hermite import quintic_hermite
from gittinseval.roots.smoothing import TAIL, HingeSum, chord_weight, normal_cdf, smooth_on_grid
from gittinseval.roots.stage_grids import StageGrids


def ei(z, sigma):
    return z * norm.cdf(z / sigma) + sigma * norm.pdf(z / sigma)


def extended_linear(x, grid, values):
    """The piecewise-linear W on the grid, slope 0 on the left and 1 on the right."""
    inside = np.interp(x, grid, values)
    return np.where(x > grid[-1], values[-1] + (x - grid[-1]), inside)


def normal_quadrature(n_nodes: int = 1601, width: float = 8.0):
    """Trapezoidal nodes and weights of the standard normal on [-width, width]."""
    z = np.linspace(-width, width, n_nodes)
    weights = norm.pdf(z) * (z[1] - z[0])
    weights[[0, -1]] /= 2
    return z, weights / weights.sum()


def quadrature_roots(chain: EmpiricalTargetChain, cost: float, n_grid: int = 3001):
    """Independent solver: backward DP by trapezoidal quadrature, no FFT.

    W is kept on its own grid and linearly interpolated; each root is found by
    Brent's method on the interpolated continuation value.
    """
    nodes, weights = normal_quadrature()
    sds, sizes = chain.step_sds, chain.batch_sizes
    total = np.sqrt(np.sum(sds**2))
    grid = np.linspace(-8 * total, cost * sizes.sum() + 8 * total, n_grid)
    values = np.maximum(grid, 0.0)
    roots = np.empty(chain.horizon)
    for stage in range(chain.horizon - 1, -1, -1):
        def continuation(x, values=values, stage=stage):
            x = np.atleast_1d(x)
            points = x[:, None] + sds[stage] * nodes[None, :]
            return extended_linear(points, grid, values) @ weights - cost * sizes[stage]

        q = continuation(grid)
        roots[stage] = brentq(lambda x: continuation(x)[0], grid[0], grid[-1], xtol=1e-13)
        values = np.maximum(q, 0.0)
    return roots


def test_chain_schedule_has_partial_last_batch():
    chain = EmpiricalTargetChain(n_examples=43, batch_size=8, prior_var=0.04)
    assert chain.horizon == 6
    np.testing.assert_array_equal(chain.batch_sizes, [8, 8, 8, 8, 8, 3])
    # v_n by direct summation of precisions.
    seen = np.array([0, 8, 16, 24, 32, 40])
    np.testing.assert_allclose(chain.latent_vars, 1 / (1 / 0.04 + seen / 0.25))


@pytest.mark.parametrize("cost", [1e-5, 1e-4, 1e-3, 1e-2])
@pytest.mark.parametrize("n_examples", [4, 8, 32])
def test_single_stage_matches_closed_form(cost, n_examples):
    # H = 1: q_0(x) = EI_sigma(x) - c B, so the root solves EI_sigma(r) = c B.
    chain = EmpiricalTargetChain(n_examples, n_examples, 0.04)
    sigma = chain.step_sds[0]
    exact = brentq(lambda x: ei(x, sigma) - cost * n_examples, -20, 20, xtol=1e-15)
    root = root_schedule(n_examples, n_examples, 0.04, cost)
    assert root.shape == (1,)
    assert root[0] == pytest.approx(exact, abs=2e-5)


def test_fft_smoothing_matches_direct_summation():
    rng = np.random.default_rng(0)
    n_points, delta, sigma = 65, 0.013, 0.05
    grid = -0.4 + delta * np.arange(n_points)
    values = np.stack([np.maximum(grid, 0.0), np.maximum(0, np.cumsum(rng.uniform(0, 1, n_points)) * delta - 0.2)])
    smoothed = gaussian_smoothing(values, np.array([delta, delta]), sigma)
    for row, w in zip(smoothed, values, strict=True):
        slopes = np.concatenate([[0.0], np.diff(w) / delta, [1.0]])
        kinks = np.diff(slopes)
        direct = [w[0] + sum(kinks[i] * ei((j - i) * delta, sigma) for i in range(n_points)) for j in range(n_points)]
        np.testing.assert_allclose(row, direct, rtol=0, atol=1e-13)


def test_fft_smoothing_is_the_gaussian_expectation_of_the_extension():
    # Independent of the EI formula: integrate the extended W against the normal density.
    n_points, delta, sigma = 101, 0.01, 0.07
    grid = -0.5 + delta * np.arange(n_points)
    values = np.maximum(0.0, (grid + 0.1) ** 3 + 0.3 * np.maximum(grid, 0))
    smoothed = gaussian_smoothing(values[None], np.array([delta]), sigma)[0]
    z = np.linspace(-9, 9, 200001)
    density = norm.pdf(z)
    for j in (0, 17, 50, 99):
        expected = np.trapezoid(extended_linear(grid[j] + sigma * z, grid, values) * density, z)
        assert smoothed[j] == pytest.approx(expected, abs=1e-8)


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


@pytest.mark.parametrize("size", [7, 5000])  # both sides of the switch to torch's erfc
def test_normal_cdf_matches_scipy(size):
    u = np.linspace(-40, 12, size).reshape(1, -1)
    np.testing.assert_allclose(normal_cdf(u), ndtr(u), rtol=5e-13, atol=1e-300)


def test_expected_improvement_formula():
    z = torch.linspace(-1, 1, 11, dtype=torch.float64)
    np.testing.assert_allclose(expected_improvement(z, 0.3).numpy(), ei(z.numpy(), 0.3), atol=1e-15)


@pytest.mark.parametrize("cost", [2e-5, 3e-4, 4e-3])
@pytest.mark.parametrize("prior_var", [0.01, 0.04])
def test_roots_match_independent_quadrature_solver(cost, prior_var):
    chain = EmpiricalTargetChain(n_examples=43, batch_size=8, prior_var=prior_var)
    fft = root_schedule(43, 8, prior_var, cost)
    reference = quadrature_roots(chain, cost)
    assert fft.shape == (6,)
    np.testing.assert_allclose(fft, reference, atol=1e-4)


def _stopping_value(chain, cost, alpha, s_grid):
    """Uncentred DP: V_n(s; alpha) on an absolute grid of posterior means, no FFT."""
    nodes, weights = normal_quadrature(401)
    values = np.maximum(s_grid, alpha)
    continuation = None
    for stage in range(chain.horizon - 1, -1, -1):
        points = s_grid[:, None] + chain.step_sds[stage] * nodes[None, :]
        # Far above the grid the continuation is worth about the state itself.
        inside = np.interp(points, s_grid, values)
        expected = np.where(points > s_grid[-1], values[-1] + points - s_grid[-1], inside) @ weights
        continuation = expected - cost * chain.batch_sizes[stage]
        values = np.maximum(alpha, continuation)
    return continuation


def test_index_is_translation_invariant_and_equals_state_minus_root():
    # The Gittins index of state s is the smallest outside value alpha at which
    # stopping is optimal; it must equal s - r_0 for every s.
    chain = EmpiricalTargetChain(n_examples=24, batch_size=8, prior_var=0.04)
    cost = 1e-3
    root = root_schedule(24, 8, 0.04, cost)[0]
    s_grid = np.linspace(-1.5, 2.5, 2001)
    for state in (0.2, 0.5, 0.9):
        position = np.searchsorted(s_grid, state)

        def advantage(alpha, position=position):
            return _stopping_value(chain, cost, alpha, s_grid)[position] - alpha

        index = brentq(advantage, state - 1.0, state + 1.0, xtol=1e-12)
        assert index - s_grid[position] == pytest.approx(-root, abs=3e-4)


@pytest.mark.parametrize(
    "n_examples, costs",
    [(200, np.array([1e-6, 1e-5, 1e-4, 1e-3, 1e-2])), (1534, np.array([3e-6, 1e-5, 3e-5, 1e-4, 5e-4]))],
)
def test_roots_grow_with_cost_and_batching_matches_single_calls(n_examples, costs):
    # A table comes out the same alone or in a batch, to rounding (about 2e-11 of its stage
    # costs): a batch's tables differ in their patch nodes, and rounding kinks at nodes a
    # table does not need moved its roots by up to 4e-9 of them.
    chain = EmpiricalTargetChain(n_examples, 8, 0.04)
    table = root_schedule(n_examples, 8, 0.04, costs)
    assert table.shape == (costs.size, chain.horizon)
    assert np.all(np.diff(table, axis=0) > 0)
    for row, cost in zip(table, costs, strict=True):
        alone = root_schedule(n_examples, 8, 0.04, cost)
        assert np.all(np.abs(row - alone) <= 2e-10 * cost * chain.batch_sizes), np.abs(row - alone).max()


def test_roots_are_finite_for_large_horizons():
    table = root_schedule(1534, 8, 0.04, [1e-4 * 0.03, 1e-4 * 5.0])
    assert table.shape == (2, 192)
    assert np.all(np.isfinite(table))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"batch_size": 9}, "larger than the number of examples"),
        ({"batch_size": 0}, "batch_size must be a positive integer"),
        ({"prior_var": 0.0}, "prior_var must be positive and finite"),
        ({"prior_var": float("nan")}, "prior_var must be positive and finite"),
        ({"cost_per_example": -1.0}, "cost_per_example must be positive"),
        ({"cost_per_example": [1e-4, 0.0]}, "bad entries at \\[1\\]"),
        ({"cell_var": 0.0}, "cell_var must be positive and finite"),
        ({"grid_points": 2}, "grid_points must be at least 3"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    arguments = {"n_examples": 8, "batch_size": 4, "prior_var": 0.04, "cost_per_example": 1e-4} | kwargs
    with pytest.raises(ValueError, match=message):
        root_schedule(**arguments)


def _ei_scalar(x, sigma):
    u = x / sigma
    return x * 0.5 * math.erfc(-u / math.sqrt(2.0)) + sigma * math.exp(-0.5 * u * u) / math.sqrt(2.0 * math.pi)


def nested_quadrature_roots(chain: EmpiricalTargetChain, cost: float, n_stages: int) -> dict[int, float]:
    """The last ``n_stages`` roots of the continuous DP, by nested adaptive quadrature (no grid).

    ``q_{H-1}(x) = EI_sigma(x) - c`` in closed form; each earlier
    ``q_n(x) = -c_n + int_{z > (r_{n+1} - x) / sigma_n} q_{n+1}(x + sigma_n z) phi(z) dz``.
    """
    sds, stage_costs = chain.step_sds, cost * chain.batch_sizes
    last = chain.horizon - 1

    def root_of(q):
        lo, hi = -1.0, 1.0
        while q(lo) > 0:
            lo *= 2
        while q(hi) < 0:
            hi *= 2
        return brentq(q, lo, hi, xtol=1e-15, rtol=1e-15)

    def q(x, s=sds[last], c=stage_costs[last]):
        return _ei_scalar(x, s) - c

    roots = {last: root_of(q)}
    for stage in range(last - 1, last - n_stages, -1):
        def q(x, s=sds[stage], c=stage_costs[stage], following=q, r=roots[stage + 1]):
            start = (r - x) / s
            value, _ = quad(lambda z: following(x + s * z) * norm.pdf(z), start, max(start, 0) + 14,
                            epsabs=1e-15, epsrel=1e-13, limit=200)
            return value - c

        roots[stage] = root_of(q)
    return roots


@pytest.mark.parametrize(
    "n_examples, batch_size, prior_var, cost, n_stages",
    [
        (20, 8, 0.04, 1e-4, 3),  # every stage of a chain with a partial last batch
        (24, 4, 0.005, 1e-6, 2),
        (43, 8, 0.04, 1e-2, 2),
        (1534, 8, 0.04, 1e-4, 2),  # the case: roots below the grid spacing
        (200, 4, 0.04, 1e-6, 2),
        (100, 2, 0.04, 1e-4, 2),
    ],
)
def test_refined_roots_match_the_continuous_program(n_examples, batch_size, prior_var, cost, n_stages):
    chain = EmpiricalTargetChain(n_examples, batch_size, prior_var)
    ours = root_schedule(n_examples, batch_size, prior_var, cost)
    for stage, exact in nested_quadrature_roots(chain, cost, n_stages).items():
        tolerance = max(1e-6, 0.01 * cost * chain.batch_sizes[stage])
        assert abs(ours[stage] - exact) <= tolerance, (stage, ours[stage], exact)


def fine_grid_roots(chain: EmpiricalTargetChain, cost: float, n_points: int) -> np.ndarray:
    """Independent solver for every stage: the plain program on one fine uniform grid.

    NumPy/SciPy only (no torch, no patches, chord corrections or stage grids): the
    expectation of the piecewise-linear W by ``scipy.signal.fftconvolve`` of its
    kinks with EI, the roots by linear interpolation.  Its error falls as
    ``delta^2`` where the roots are many cells apart from the kinks, so two
    resolutions give a Richardson estimate.
    """
    sds, stage_costs = chain.step_sds, cost * chain.batch_sizes
    total = float(np.sqrt(np.sum(sds**2)))
    lower = min(-6 * total, brentq(lambda x: ei(x, total) - stage_costs.min(), -60 * total, total))
    grid = np.linspace(lower, 1.01 * stage_costs.sum() + 6 * total, n_points)
    delta = grid[1] - grid[0]
    offsets = np.arange(-(n_points - 1), n_points) * delta
    values = np.maximum(grid, 0.0)
    roots = np.empty(chain.horizon)
    for stage in range(chain.horizon - 1, -1, -1):
        kinks = np.diff(np.concatenate([[0.0], np.diff(values) / delta, [1.0]]))
        smoothed = values[0] + fftconvolve(kinks, ei(offsets, sds[stage]))[n_points - 1 : 2 * n_points - 1]
        q = smoothed - stage_costs[stage]
        first = int(np.argmax(q >= 0))
        roots[stage] = grid[first - 1] - delta * q[first - 1] / (q[first] - q[first - 1])
        values = np.maximum(q, 0.0)
    return roots


@pytest.mark.parametrize(
    "n_examples, batch_size, cost",
    [
        (200, 8, 1e-6),  # cheap chains: W's tail spans a few cells of the whole chain's grid
        (100, 4, 1e-7),
        (120, 2, 1e-4),
    ],
)
def test_every_refined_root_matches_a_fine_grid_solver(n_examples, batch_size, cost):
    chain = EmpiricalTargetChain(n_examples, batch_size, 0.04)
    coarse, fine = (fine_grid_roots(chain, cost, 2**k + 1) for k in (16, 17))
    reference = fine + (fine - coarse) / 3
    tolerance = np.maximum(1e-6, 0.01 * cost * chain.batch_sizes)
    assert np.all(np.abs(fine - coarse) < 0.3 * tolerance)  # the reference itself has converged
    errors = np.abs(root_schedule(n_examples, batch_size, 0.04, cost) - reference)
    assert np.all(errors <= tolerance), (errors / tolerance).max()


def test_quintic_hermite_reproduces_quintics():
    rng = np.random.default_rng(3)
    coefficients = rng.normal(size=(2, 6))
    ends = np.sort(rng.uniform(-1, 1, size=(2, 4)), axis=1)
    polys = [np.poly1d(c) for c in coefficients]
    value, slope, curvature = (np.stack([p.deriv(k)(e) for p, e in zip(polys, ends, strict=True)]) for k in range(3))
    ours = quintic_hermite(ends, value, slope, curvature, 5)
    for row, p in enumerate(polys):
        cells = zip(ends[row, :-1], ends[row, 1:], strict=True)
        nodes = np.concatenate([np.linspace(a, b, 6)[:-1] for a, b in cells] + [ends[row, -1:]])
        np.testing.assert_allclose(ours[row], p(nodes), rtol=0, atol=1e-12)


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


def test_continuation_off_the_grid_sums_every_kink_of_a_function_zero_below_a_point():
    # W = max(q, 0) has no kinks below the last root, so the window of kinks starts at
    # the first non-zero one, well above the 8 sds below the cells it would otherwise take.
    n_points, delta, sigma, chord, cost = 400, 0.01, 0.03, 2e-5, 0.004
    grid = -1.0 + delta * np.arange(n_points)[None, :]
    values = np.maximum(grid + 0.195, 0.0) ** 1.5  # its zero inside a cell
    kinks = slope_changes(values, np.array([delta]))
    first_kink = int(np.argmax(kinks[0] != 0))
    first_cell = np.array([first_kink + 3])
    assert first_kink > 0 and first_cell[0] - TAIL * sigma / delta < first_kink  # the trimming is active
    empty = np.zeros((1, 0))
    q = ContinuationNearCells(values, kinks, grid, np.array([delta]), sigma, np.array([cost]), np.array([chord]),
                               HingeSum(empty, empty, empty, sigma, empty), first_cell, 5)
    x = grid[0, first_cell[0]] + delta * np.linspace(0.0, 5.0, 23)
    expected = [values[0, 0] - cost + np.sum(kinks[0] * (ei(z, sigma) - chord * norm.pdf(z, scale=sigma)))
                for z in x[:, None] - grid]
    np.testing.assert_allclose(q(x[None, :], derivatives=0)[0][0], expected, rtol=0, atol=1e-14)


def full_information_root(sd, cost):
    """``x`` with ``EI_sd(x) = cost``, by Brent's method on SciPy's normal pdf and cdf."""
    return brentq(lambda x: ei(x, sd) - cost, -60.0 * sd, max(cost, sd), xtol=1e-15 * sd)


def test_grid_bottom_is_minus_5_sd_or_the_full_information_root_below_it():
    # EI_1(-5) = 5.35e-8: costs on both sides of 5.35e-8 sd, and far below and above it.
    sds = np.array([0.2, 0.01, 3e-4])[:, None]
    costs = sds * np.array([1e-12, 1e-9, 5.3e-8, 5.4e-8, 1e-6, 0.5, 2.0])
    bottoms = grid_bottom(sds, costs)
    assert bottoms.shape == costs.shape
    for (row, col), bottom in np.ndenumerate(bottoms):
        sd = sds[row, 0]
        expected = min(-5.0 * sd, full_information_root(sd, costs[row, col]))
        assert bottom == pytest.approx(expected, rel=0, abs=1e-13 * sd)


def test_stage_grids_are_nested_and_hold_every_stage():
    chain = EmpiricalTargetChain(1534, 8, 0.04)
    sds, stage_costs = chain.step_sds, 1e-6 * chain.batch_sizes[None, :]
    total = float(np.sqrt(np.sum(sds**2)))
    origin = np.array([min(-5 * total, full_information_root(total, stage_costs.min()))])
    coarsest = (1.01 * stage_costs.sum() + 5 * total - origin) / 1024
    grids = StageGrids.plan(origin, coarsest, sds, stage_costs, 1025)
    levels = grids.level[:, 0]
    assert levels[0] == 0 and levels[-1] > 5 and np.all(np.diff(levels) >= 0)
    np.testing.assert_array_equal(grids.points(0, 1025), origin[:, None] + coarsest * np.arange(1025))
    remaining_sd = np.sqrt(np.cumsum(sds[::-1] ** 2)[::-1])
    remaining_cost = np.cumsum(stage_costs[0, ::-1])[::-1]
    for stage in range(chain.horizon):
        points = grids.points(stage, 1025)[0]
        # Every root lies between the full-information bound and the remaining cost.
        assert points[0] <= full_information_root(remaining_sd[stage], stage_costs[0, stage])
        assert points[-1] >= remaining_cost[stage] + 5 * remaining_sd[stage]
        if stage and levels[stage] != levels[stage - 1]:
            coarser = grids.points(stage - 1, 1025)[0]
            shared = coarser[(coarser >= points[0]) & (coarser <= points[-1])]
            assert np.abs(shared[:, None] - points[None, :]).min(axis=1).max() < 1e-12 * total
            # W_n = max(x - a, 0) with its kink on the finer grid moves over exactly.
            kink = points[500]
            moved = grids.transfer(np.maximum(points - kink, 0.0)[None], stage)[0]
            np.testing.assert_allclose(moved, np.maximum(coarser - kink, 0.0), rtol=0, atol=1e-12 * total)


@pytest.mark.slow
def test_refined_last_root_of_a_long_benchmark_has_the_right_sign():
    # 12 x 41,871: the plain grid gives -0.00128 for a root of +0.0007.
    chain = EmpiricalTargetChain(41871, 8, 0.04)
    exact = nested_quadrature_roots(chain, 1e-4, 1)[chain.horizon - 1]
    assert exact > 0
    assert root_schedule(41871, 8, 0.04, 1e-4)[-1] == pytest.approx(exact, abs=1e-6)


def plain_grid_roots(n_examples, batch_size, prior_var, cost, grid_points):
    """The plain-grid program by direct O(P^2) summation: the same grid, no FFT, no refinement."""
    chain = EmpiricalTargetChain(n_examples, batch_size, prior_var)
    sds, stage_costs = chain.step_sds, cost * chain.batch_sizes
    total = float(np.sqrt(np.sum(sds**2)))
    lower = min(-5 * total, brentq(lambda x: ei(x, total) - stage_costs.min(), -50 * total, total))
    grid = np.linspace(lower, 1.01 * stage_costs.sum() + 5 * total, grid_points)
    delta = grid[1] - grid[0]
    values = np.maximum(grid, 0.0)
    roots = np.empty(chain.horizon)
    for stage in range(chain.horizon - 1, -1, -1):
        kinks = np.diff(np.concatenate([[0.0], np.diff(values) / delta, [1.0]]))
        smoothed = values[0] + ei(grid[:, None] - grid[None, :], sds[stage]) @ kinks
        q = smoothed - stage_costs[stage]
        first = int(np.argmax(q >= 0))
        roots[stage] = grid[first - 1] - delta * q[first - 1] / (q[first] - q[first - 1])
        values = np.maximum(q, 0.0)
    return roots


def test_unrefined_roots_are_the_plain_grid_program():
    expected = plain_grid_roots(60, 8, 0.04, 1e-3, 129)
    np.testing.assert_allclose(root_schedule(60, 8, 0.04, 1e-3, grid_points=129, refine=False), expected,
                               rtol=0, atol=1e-12)


def test_step_sds_of_a_tiny_chain_worked_by_hand():
    # N = 4, B = 2, v0 = 0.04, tau^2 = 1/4: a = 1 + 0.25 / 0.16 = 2.5625,
    # v_0 = 0.04, v_1 = 1 / (25 + 8) = 1/33,
    # sigma_0 = 2.5625 * 0.04 / sqrt(0.04 + 0.125)   = 0.252338...,
    # sigma_1 = 2.5625 / 33 / sqrt(1/33 + 0.125)     = 0.197042...
    chain = EmpiricalTargetChain(4, 2, 0.04)
    np.testing.assert_array_equal(chain.batch_sizes, [2.0, 2.0])
    np.testing.assert_allclose(chain.latent_vars, [0.04, 1 / 33], rtol=1e-14)
    assert chain.target_scale == pytest.approx(2.5625, rel=1e-14)
    np.testing.assert_allclose(chain.step_sds, [0.252338, 0.197042], atol=1e-6)
    # The steps of M add up to the prior variance of the full-row mean, v0 + tau^2 / N.
    assert np.sum(chain.step_sds**2) == pytest.approx(0.04 + 0.25 / 4, rel=1e-12)


def test_tiny_costs_work_and_vanishing_costs_are_refused():
    roots = root_schedule(100, 4, 0.04, 1e-11)
    assert np.all(np.isfinite(roots)) and np.all(np.diff(roots) > 0)
    assert roots[-1] == pytest.approx(nested_quadrature_roots(EmpiricalTargetChain(100, 4, 0.04), 1e-11, 1)[24],
                                      abs=1e-9)
    with pytest.raises(ValueError, match="cost_per_example 1e-16 is too small to resolve"):
        root_schedule(100, 4, 0.04, 1e-16)
