"""BO curve aggregation from the runs' rows: initial design dropped, runs aligned at its mean endpoint, right-held."""

import numpy as np
import pytest

from gittinseval.results.plotting import aggregate_runs, plot_sweep
from gittinseval.sim.results_store import RunRow
from gittinseval.sim.simulator import RunResult


def bo_run(cost_pct, regret, n_initial, seed=0, label="PBGI", stop=None, grid_points=7):
    """The row of a BO run with a 6 % budget: with ``grid_points=7`` its nodes are 0, 1, ..., 6 %."""
    cost_pct, regret = np.asarray(cost_pct, float), np.asarray(regret, float)
    n = len(cost_pct)
    trace = {
        "step": np.arange(1, n + 1),
        "arm": np.arange(n),
        "batch_size": np.full(n, 10),
        "cost": cost_pct,
        "cost_pct": cost_pct,
        "recommended": np.zeros(n, int),
        "regret": regret,
    }
    summary = {"benchmark": "toy", "label": label, "stop_cost_pct": stop, "cost_mode": "aware", "stand_in": False,
               "seed": seed, "hyperparameters": {"lam": 1e-4, "n_initial": n_initial}, "budget_fraction": 0.06}
    if n_initial is None:  # not a BO run
        del summary["hyperparameters"]["n_initial"]
    return RunRow.of(RunResult(trace, summary), grid_points)


def test_bo_runs_drop_the_initial_design_align_at_its_mean_end_and_hold_right():
    first = bo_run([1, 2, 4, 6], [0.5, 0.3, 0.2, 0.1], n_initial=2, stop=4.0)
    second = bo_run([2, 4, 5], [0.4, 0.4, 0.0], n_initial=2, seed=1)
    (curve,) = aggregate_runs([first, second])
    # Initial-design ends at 2% and 4%: both post-initialisation segments start at 3%.
    assert curve.init_pct == pytest.approx(3.0)
    np.testing.assert_allclose(curve.grid, np.linspace(3, 7, 7))  # as many points as the rows' curves
    shifted_first = np.interp(curve.grid, [3, 5, 7], [0.3, 0.2, 0.1])  # its batches at 2, 4, 6 %, shifted by +1
    held_second = np.interp(curve.grid, [3, 4], [0.4, 0.0])  # at 4, 5 %, shifted by -1, then its final regret
    np.testing.assert_allclose(curve.mean, (shifted_first + held_second) / 2)
    np.testing.assert_allclose(curve.stderr, np.abs(shifted_first - held_second) / 2)
    np.testing.assert_array_equal(curve.count, 2)
    assert curve.stop_pct == 4.0 and curve.n_stopped == 1 and curve.n_runs == 2


def test_a_bo_run_that_ends_inside_its_initial_design_is_a_held_point():
    short = bo_run([3.0], [0.2], n_initial=4)
    longer = bo_run([1, 2, 3, 5], [0.6, 0.5, 0.4, 0.1], n_initial=2, seed=1)
    (curve,) = aggregate_runs([short, longer])
    assert curve.init_pct == pytest.approx(2.5)
    np.testing.assert_allclose(curve.grid, np.linspace(2.5, 5.5, 7))
    # The longer run, shifted by +0.5, passes (2.5, 0.5), (3.5, 0.4), (5.5, 0.1).
    longer_shifted = np.interp(curve.grid, [2.5, 3.5, 5.5], [0.5, 0.4, 0.1])
    np.testing.assert_allclose(curve.mean, (0.2 + longer_shifted) / 2)


def test_bandit_groups_keep_their_aggregation_and_have_no_initial_endpoint():
    bandit = bo_run([1, 2.5], [0.3, 0.1], n_initial=None, label="GittinsEval-S")
    (curve,) = aggregate_runs([bandit])
    assert curve.init_pct is None
    np.testing.assert_allclose(curve.grid, [1, 2, 2.5])  # its first batch, its node at 2 %, its last batch


def test_a_group_mixing_bo_and_bandit_runs_is_an_error():
    bandit = bo_run([1, 2], [0.3, 0.1], n_initial=None, seed=1)
    with pytest.raises(ValueError, match="1 of 2 runs are BO runs"):
        aggregate_runs([bo_run([1, 2], [0.3, 0.1], n_initial=1), bandit])


def test_plot_sweep_draws_simulated_bo_runs(tmp_path):
    from baselines.logei import LogEIPolicy
    from gittinseval.core.priors import GaussianPrior
    from gittinseval.data import Benchmark
    from gittinseval.sim.simulator import simulate

    rng = np.random.default_rng(0)
    scores = (rng.uniform(size=(40, 20)) < rng.uniform(0.2, 0.8, (40, 1))).astype(float)
    benchmark = Benchmark(name="toy", scores=scores, prices=rng.choice([0.5, 2.0], 40),
                          features=np.stack([np.arange(40) // 8, np.arange(40) % 8], axis=1))
    ends = []
    for seed in range(3):
        result = simulate(benchmark, LogEIPolicy(), benchmark.prices, GaussianPrior(0.5, 0.04), seed=seed)
        result.save(tmp_path / str(seed))
        ends.append(result.trace["cost_pct"][result.summary["hyperparameters"]["n_initial"] - 1])
    figures, (curve,) = plot_sweep(tmp_path)
    assert figures[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert curve.init_pct == pytest.approx(np.mean(ends)) and curve.grid[0] == pytest.approx(np.mean(ends))
    assert (curve.count == 3).all()
