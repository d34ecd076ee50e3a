"""Curve aggregation from the runs' rows: fixed nodes of the budget, no extrapolation, mean ± SE, mean stop
cost; BO runs with their initial design dropped, aligned at its mean endpoint and right-held; a sweep's curves."""

import numpy as np
import pytest

from gittinseval.results.curves import aggregate_runs, sweep_curves
from gittinseval.sim.results_store import LOG_GRID_FLOOR, RunRow
from gittinseval.sim.simulator import RunResult
from tests.results.conftest import fake_run


def test_a_row_is_the_trace_interpolated_at_the_papers_grid_of_its_budget():
    rng = np.random.default_rng(1)
    cost = np.sort(rng.uniform(0.002, 10.4, 60))  # the last batch crosses the 10 % budget
    regret = rng.uniform(0, 0.3, 60)
    row = RunRow.of(fake_run(cost, regret))
    linear = 10.0 * np.arange(350) / 349  # 350 points evenly spaced over [0, budget]
    log = 10.0 * LOG_GRID_FLOOR ** (1 - np.arange(350) / 349)  # evenly spaced in log cost, up to the budget
    for nodes, values in ((linear, row.linear), (log, row.log)):
        inside = (nodes >= cost[0]) & (nodes <= cost[-1])
        expected = [np.interp(x, cost, regret) for x in nodes[inside]]
        np.testing.assert_allclose(values[inside], expected, rtol=1e-12)
        assert np.isnan(values[~inside]).all()
    assert (row.start_pct, row.start_regret, row.end_pct, row.end_regret) == (cost[0], regret[0], cost[-1], regret[-1])
    x, y = row.points(log_grid=False)
    np.testing.assert_allclose(x[1:-1], linear[(linear > cost[0]) & (linear < cost[-1])], rtol=1e-12)
    assert (x[0], x[-1], y[0], y[-1]) == (cost[0], cost[-1], regret[0], regret[-1])
    assert row.init_pct is None and row.summary["n_steps"] == 60


def test_runs_are_interpolated_without_extrapolation():
    # Budget 4 %, 5 nodes: the nodes are 0, 1, ..., 4 % and hold the traces' batches.
    runs = [fake_run([1, 2, 3], [0.3, 0.1, 0.0], stop=2.0, budget=0.04),
            fake_run([1, 4], [0.5, 0.1], stop=4.0, seed=1, budget=0.04)]
    (curve,) = aggregate_runs([RunRow.of(run, grid_points=5) for run in runs])
    np.testing.assert_allclose(curve.grid, [1, 2, 3, 4])
    np.testing.assert_array_equal(curve.count, [2, 2, 2, 1])
    second = np.interp(curve.grid, [1, 4], [0.5, 0.1])
    first = np.array([0.3, 0.1, 0.0])
    np.testing.assert_allclose(curve.mean[:3], (first + second[:3]) / 2)
    np.testing.assert_allclose(curve.mean[3:], second[3:])
    np.testing.assert_allclose(curve.stderr[:3], np.abs(first - second[:3]) / 2)  # std(ddof=1)/sqrt(2)
    np.testing.assert_array_equal(curve.stderr[3:], 0.0)
    assert curve.stop_pct == pytest.approx(3.0) and curve.n_stopped == 2


@pytest.mark.parametrize("log_grid", [False, True])
def test_runs_of_one_budget_average_each_runs_own_interpolation_at_every_grid_point(log_grid):
    """The group's grid is the nodes within the observed range; at each point, the mean of the traces."""
    rng = np.random.default_rng(2)
    runs = []
    for seed in range(4):
        n = int(rng.integers(5, 40))
        runs.append(fake_run(np.sort(rng.uniform(0.01, 11.0, n)), rng.uniform(0, 0.3, n), seed=seed))
    (curve,) = aggregate_runs([RunRow.of(run) for run in runs], log_grid=log_grid)
    start = min(r.trace["cost_pct"][0] for r in runs)
    end = max(r.trace["cost_pct"][-1] for r in runs)
    nodes = 10.0 * (LOG_GRID_FLOOR ** (1 - np.arange(350) / 349) if log_grid else np.arange(350) / 349)
    np.testing.assert_allclose(curve.grid, [start, *nodes[(nodes > start) & (nodes < end)], end], rtol=1e-12)
    stacked = []
    for run in runs:
        cost, regret = run.trace["cost_pct"], run.trace["regret"]
        present = (curve.grid >= cost[0]) & (curve.grid <= cost[-1])
        stacked.append(np.where(present, np.interp(curve.grid, cost, regret), np.nan))
    stacked = np.array(stacked)
    count = (~np.isnan(stacked)).sum(axis=0)
    np.testing.assert_array_equal(curve.count, count)
    np.testing.assert_allclose(curve.mean, np.nanmean(stacked, axis=0), rtol=1e-12)
    several = count > 1
    expected_se = np.nanstd(stacked[:, several], axis=0, ddof=1) / np.sqrt(count[several])
    np.testing.assert_allclose(curve.stderr[several], expected_se, rtol=1e-10)


def test_runs_of_two_budgets_share_the_union_of_their_nodes():
    """Each run is exact at its own nodes and interpolated between them at the other run's."""
    runs = [fake_run([1, 2, 4], [0.3, 0.2, 0.1], budget=0.04),
            fake_run([1, 3, 6], [0.4, 0.2, 0.0], budget=0.08, seed=1)]
    (curve,) = aggregate_runs([RunRow.of(run, grid_points=5) for run in runs])
    np.testing.assert_allclose(curve.grid, [1, 2, 3, 4, 6])  # nodes 0..4 step 1 and 0..8 step 2, within [1, 6]
    first = [0.3, 0.2, 0.15, 0.1, np.nan]  # its nodes 1, 2, 3, 4 % (its batch at 4 % is its end)
    # Its nodes 2 and 4 % give 0.3 and 0.2 - 0.2 / 3; at 3 % the mean of those, not its batch's 0.2.
    second = [0.4, 0.3, (0.3 + 0.2 - 0.2 / 3) / 2, 0.2 - 0.2 / 3, 0.0]
    np.testing.assert_allclose(curve.mean, np.nanmean([first, second], axis=0))
    np.testing.assert_array_equal(curve.count, [2, 2, 2, 2, 1])


def test_groups_by_label_and_rows_hold_350_nodes():
    runs = [fake_run([0.5, 1], [0.2, 0.0], label=label, seed=s) for label in ("A", "B") for s in range(3)]
    rows = [RunRow.of(run) for run in runs]
    curves = aggregate_runs(rows)
    assert [c.label for c in curves] == ["A", "B"]
    assert all(c.n_runs == 3 and c.stop_pct is None for c in curves)
    assert all(row.linear.shape == row.log.shape == (350,) for row in rows)



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


def test_a_sweeps_curves_are_per_benchmark_with_unit_cost_first(tmp_path):
    for seed, (benchmark, mode) in enumerate([("toy", "aware"), ("toy", "unit"), ("other", "unit")]):
        run = fake_run([0.5, 1, 2], [0.2, 0.1, 0.0], seed=seed, benchmark=benchmark)
        run.summary["cost_mode"] = mode
        run.save(tmp_path / str(seed))
    toy, other = sweep_curves(tmp_path)
    assert (toy.benchmark, list(toy.by_cost_mode), toy.stand_in) == ("toy", ["unit", "aware"], False)
    assert other.benchmark == "other" and [c.n_runs for c in other.by_cost_mode["unit"]] == [1]
    assert sweep_curves(tmp_path, max_panels=2) == []  # three (benchmark, cost mode) panels
