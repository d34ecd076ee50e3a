"""Root schedules (gittinseval.core.roots: root_schedule and completed_root_table) against closed forms and
independent solvers; the chain they are of is tested in test_chain.py."""

import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import brentq
from scipy.signal import fftconvolve
from scipy.stats import norm

from gittinseval.core.roots import EmpiricalTargetChain, completed_root_table, root_schedule
from tests.core.roots.roots_reference import ei, extended_linear, normal_quadrature


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
        ({"cost_per_example": [1e-4, 0.0]}, "cost_per_example must be positive and finite; bad entries \\[1\\]"),
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
        # Every stage of a chain with a partial last batch: three nested quadratures take minutes, so it
        # runs with -m slow; test_every_refined_root_matches_a_fine_grid_solver checks every stage in CI.
        pytest.param(20, 8, 0.04, 1e-4, 3, marks=pytest.mark.slow),
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
        (20, 8, 1e-4),  # a partial last batch, as the slow nested-quadrature case
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


@pytest.mark.slow
def test_refined_last_root_of_a_long_benchmark_has_the_right_sign():
    # 12 x 41,871: the plain grid gives -0.00128 for a root of +0.0007.
    chain = EmpiricalTargetChain(41871, 8, 0.04)
    exact = nested_quadrature_roots(chain, 1e-4, 1)[chain.horizon - 1]
    assert exact > 0
    assert root_schedule(41871, 8, 0.04, 1e-4)[-1] == pytest.approx(exact, abs=1e-6)


def test_tiny_costs_work_and_vanishing_costs_are_refused():
    roots = root_schedule(100, 4, 0.04, 1e-11)
    assert np.all(np.isfinite(roots)) and np.all(np.diff(roots) > 0)
    assert roots[-1] == pytest.approx(nested_quadrature_roots(EmpiricalTargetChain(100, 4, 0.04), 1e-11, 1)[24],
                                      abs=1e-9)
    with pytest.raises(ValueError, match="cost_per_example 1e-16 is too small to resolve"):
        root_schedule(100, 4, 0.04, 1e-16)


def test_the_completed_table_appends_a_zero_root_for_a_finished_arm_and_is_shared():
    costs = (1e-4, 3e-3)
    table = completed_root_table(20, 4, 0.04, costs, 0.25, 257, True)
    roots = root_schedule(20, 4, 0.04, np.array(costs), grid_points=257)
    assert table.shape == (2, 6) and not table.flags.writeable
    np.testing.assert_array_equal(table[:, :5], roots)
    np.testing.assert_array_equal(table[:, 5], [0.0, 0.0])
    assert completed_root_table(20, 4, 0.04, costs, 0.25, 257, True) is table  # cached per process
    plain = completed_root_table(20, 4, 0.04, costs, 0.25, 257, False)
    np.testing.assert_array_equal(plain[:, :5], root_schedule(20, 4, 0.04, np.array(costs), grid_points=257,
                                                              refine=False))
