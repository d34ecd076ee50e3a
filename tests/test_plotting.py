"""Curve aggregation from the runs' rows: fixed nodes of the budget, no extrapolation, mean ± SE, mean stop cost."""

import numpy as np
import pytest

from gittinseval.plotting import aggregate_runs, plot_sweep
from gittinseval.simulator import RunResult
from gittinseval.store import LOG_GRID_FLOOR, RunRow


def fake_run(cost_pct, regret, label="GittinsEval-G", stop=None, benchmark="toy", seed=0, budget=0.1):
    cost_pct, regret = np.asarray(cost_pct, float), np.asarray(regret, float)
    n = len(cost_pct)
    trace = {
        "step": np.arange(1, n + 1),
        "arm": np.zeros(n, int),
        "batch_size": np.ones(n, int),
        "cost": cost_pct,
        "cost_pct": cost_pct,
        "recommended": np.zeros(n, int),
        "regret": regret,
    }
    summary = {"benchmark": benchmark, "label": label, "stop_cost_pct": stop, "cost_mode": "unit",
               "stand_in": False, "seed": seed, "budget_fraction": budget}
    return RunResult(trace, summary)


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


def test_plot_sweep_writes_a_png(tmp_path):
    for seed in range(3):
        fake_run([0.5, 1, 2], [0.2, 0.1, 0.0], stop=1.0, seed=seed).save(tmp_path / str(seed))
    figures, curves = plot_sweep(tmp_path)
    assert figures == [tmp_path / "regret.png"]
    assert figures[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert curves[0].n_runs == 3


def test_plot_sweep_without_runs_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no runs"):
        plot_sweep(tmp_path)


def test_plot_sweep_draws_one_figure_per_benchmark_and_cost_mode(tmp_path):
    for seed, mode in enumerate(["unit", "aware", "unit"]):
        run = fake_run([0.5, 1, 2], [0.2, 0.1, 0.0], seed=seed)
        run.summary["cost_mode"] = mode
        run.save(tmp_path / str(seed))
    figures, curves = plot_sweep(tmp_path, tmp_path / "fig.png")
    assert sorted(f.name for f in figures) == ["fig_toy_aware.png", "fig_toy_unit.png"]
    assert sorted(c.n_runs for c in curves) == [1, 2]
    assert plot_sweep(tmp_path, tmp_path / "none.png", max_figures=1) == ([], [])
    assert len(plot_sweep(tmp_path, tmp_path / "two.png", max_figures=2)[0]) == 2


def test_arm_quality_marks_mean_best_and_prior(tmp_path, monkeypatch):
    import matplotlib.axes

    from gittinseval.data import Benchmark
    from gittinseval.plotting import plot_arm_quality

    drawn = []
    original = matplotlib.axes.Axes.axvline

    def recording_axvline(self, x, **kw):
        drawn.append((round(float(x), 12), kw.get("label")))
        return original(self, x, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "axvline", recording_axvline)
    scores = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]], dtype=float)  # row means 0.25, 0.5, 0.75
    out = plot_arm_quality([Benchmark("toy", scores)], tmp_path / "q.png", "toy", [0.4])
    assert out.stat().st_size > 5_000
    assert drawn == [(0.5, "mean arm"), (0.75, "best arm"), (0.4, "prior mean")]


def test_data_quality_command_writes_the_papers_figures(tmp_path, capsys):
    from gittinseval.data.catalog import main

    main(["quality", "gsm8k", "--out", str(tmp_path)])
    assert (tmp_path / "arm_quality_gsm8k.png").is_file() and "wrote" in capsys.readouterr().out
    with pytest.raises(SystemExit) as error:
        main(["quality", "bogus", "--out", str(tmp_path)])
    assert error.value.code == 2
