"""Curve aggregation from the runs' rows (fixed nodes of the budget, no extrapolation, mean ± SE, mean stop
cost) and the paper's figure layout (cost modes side by side, one colour per method, 1-2-5 cost ticks)."""

import numpy as np
import pytest

from gittinseval.results.plotting import (
    METHOD_COLORS,
    SPARE_COLORS,
    aggregate_runs,
    cost_ticks,
    curve_colors,
    plot_sweep,
    plot_wall_times,
)
from gittinseval.sim.results_store import LOG_GRID_FLOOR, RunRow
from gittinseval.sim.simulator import RunResult


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


def test_plot_sweep_draws_one_figure_per_benchmark_with_its_cost_modes(tmp_path):
    for seed, (benchmark, mode) in enumerate([("toy", "unit"), ("toy", "aware"), ("toy", "unit"), ("other", "aware")]):
        run = fake_run([0.5, 1, 2], [0.2, 0.1, 0.0], seed=seed, benchmark=benchmark)
        run.summary["cost_mode"] = mode
        run.save(tmp_path / str(seed))
    figures, curves = plot_sweep(tmp_path, tmp_path / "fig.png")
    assert sorted(f.name for f in figures) == ["fig_other.png", "fig_toy.png"]
    assert sorted(c.n_runs for c in curves) == [1, 1, 2]
    assert plot_sweep(tmp_path, tmp_path / "none.png", max_figures=2) == ([], [])
    assert len(plot_sweep(tmp_path, tmp_path / "two.png", max_figures=3)[0]) == 2


@pytest.fixture
def saved_figures(monkeypatch):
    """The matplotlib figures the plotting functions save, kept open for inspection."""
    import matplotlib.figure

    saved = []
    original = matplotlib.figure.Figure.savefig

    def recording_savefig(self, *args, **kwargs):
        saved.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", recording_savefig)
    return saved


def _solid_line_colors(ax):
    """{legend label: colour} of the solid curves of one axes."""
    return {line.get_label(): line.get_color() for line in ax.get_lines() if not line.get_label().startswith("_")}


def test_unit_and_cost_aware_side_by_side_with_one_colour_per_method(tmp_path, saved_figures):
    from matplotlib.colors import to_hex

    for seed in range(2):
        for mode, labels in (("aware", ["UCB-E", "GittinsEval-S"]), ("unit", ["GittinsEval-S", "SySRs", "UCB-E"])):
            for label in labels:
                run = fake_run([0.05, 1, 10], [0.2, 0.1, 0.0], label=label, seed=seed)
                run.summary["cost_mode"] = mode
                run.save(tmp_path / f"{mode}_{label}_{seed}")
    (figure,) = plot_sweep(tmp_path)[0]
    unit, aware = saved_figures[-1].axes
    assert (unit.get_title(), aware.get_title()) == ("unit cost", "aware cost")
    by_method = [{label.split(" ")[0]: to_hex(color) for label, color in _solid_line_colors(ax).items()}
                 for ax in (unit, aware)]
    # Each method has its fixed colour in both panels, whatever the other curves are.
    assert by_method[0] == {"GittinsEval-S": "#d62728", "SySRs": "#2ca02c", "UCB-E": "#ff7f0e"}
    assert by_method[1] == {"UCB-E": "#ff7f0e", "GittinsEval-S": "#d62728"}
    for ax in (unit, aware):
        assert list(ax.get_xticks()) == [0.1, 0.2, 0.5, 1, 2, 5, 10]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0.1", "0.2", "0.5", "1", "2", "5", "10"]


def test_curve_colors_fix_each_method_and_shade_its_variants():
    from matplotlib.colors import to_rgb

    colors = curve_colors(["GittinsEval-S λ=1e-05", "GittinsEval-S λ=0.0001", "GittinsEval-S λ=0.001", "UCB-E",
                           "MyPolicy", "Other"])
    assert colors["UCB-E"] == to_rgb(METHOD_COLORS["UCB-E"])
    variants = [np.array(colors[f"GittinsEval-S λ={lam}"]) for lam in ("1e-05", "0.0001", "0.001")]
    red = np.array(to_rgb(METHOD_COLORS["GittinsEval-S"]))
    # Dark to light along the line from black through the method's colour to white.
    assert variants[0].sum() < red.sum() < variants[2].sum()
    for variant in variants:
        mix = variant / red if variant.sum() < red.sum() else (1 - variant) / (1 - red)
        np.testing.assert_allclose(mix, mix[0], atol=1e-12)  # same hue: one scale factor per channel
    assert len({tuple(v) for v in variants}) == 3
    assert (colors["MyPolicy"], colors["Other"]) == (to_rgb(SPARE_COLORS[0]), to_rgb(SPARE_COLORS[1]))


@pytest.mark.parametrize(
    ("low", "high", "log_cost", "expected"),
    [
        (0.01, 10.4, True, [0.01, 0.1, 0.2, 0.5, 1, 2, 5, 10]),
        (0.0004, 10, True, [0.001, 0.01, 0.1, 0.2, 0.5, 1, 2, 5, 10]),
        (0.3, 10, True, [0.5, 1, 2, 5, 10]),
        (0.0, 10.2, False, [0, 1, 2, 5, 10]),
        (0.002, 10.0, False, [1, 2, 5, 10]),
        (0.001, 0.9, True, [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5]),
    ],
)
def test_cost_ticks_are_the_papers_1_2_5_steps(low, high, log_cost, expected):
    assert cost_ticks(low, high, log_cost) == pytest.approx(expected)


def test_cost_ticks_reject_an_empty_axis():
    with pytest.raises(ValueError, match="cost axis limits"):
        cost_ticks(5.0, 1.0)


def test_wall_time_bars_use_the_method_colours(tmp_path, saved_figures):
    from matplotlib.colors import to_hex

    groups = {"small": {"SySRs": [1.0, 1.2], "UCB-E": [0.2, 0.3]}, "large": {"UCB-E": [0.5, 0.6]}}
    plot_wall_times(groups, tmp_path / "t.png", "times")
    (ax,) = saved_figures[-1].axes
    colors = {container.get_label(): {to_hex(bar.get_facecolor()) for bar in container}
              for container in ax.containers if hasattr(container, "patches")}
    assert colors == {"SySRs": {METHOD_COLORS["SySRs"]}, "UCB-E": {METHOD_COLORS["UCB-E"]}}


def test_arm_quality_marks_mean_best_and_prior(tmp_path, monkeypatch):
    import matplotlib.axes

    from gittinseval.data import Benchmark
    from gittinseval.results.plotting import plot_arm_quality

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
    from gittinseval.cli.data import main

    main(["quality", "gsm8k", "--out", str(tmp_path)])
    assert (tmp_path / "arm_quality_gsm8k.png").is_file() and "wrote" in capsys.readouterr().out
    with pytest.raises(SystemExit) as error:
        main(["quality", "bogus", "--out", str(tmp_path)])
    assert error.value.code == 2
