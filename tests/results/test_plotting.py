"""The paper's figure layout (cost modes side by side, one colour per method, 1-2-5 cost ticks), a sweep's
figures, wall-time bars and arm-quality histograms."""

import numpy as np
import pytest

from gittinseval.results.plotting import (
    METHOD_COLORS,
    SPARE_COLORS,
    cost_ticks,
    curve_colors,
    plot_sweep,
    plot_wall_times,
)
from tests.results.conftest import fake_run


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


def _marks(ax):
    """The (x, y) of the scatter marks of ``ax`` (the bars' error bars are line collections)."""
    from matplotlib.collections import PathCollection

    return [tuple(map(float, xy)) for c in ax.collections if isinstance(c, PathCollection) for xy in c.get_offsets()]


def test_wall_time_bars_are_marked_at_the_mean_wall_time_of_the_stopping_signal(tmp_path, saved_figures):
    """Two methods a panel: bars 0.4 wide, GittinsEval-S's left of each panel's centre.  Only bars with runs that
    recorded the signal's wall time are marked, at their mean."""
    groups = {"small": {"GittinsEval-S": [1.0, 3.0], "UCB-E": [0.2, 0.3]}, "large": {"GittinsEval-S": [2.0],
                                                                                      "UCB-E": [0.5]}}
    stops = {"small": {"GittinsEval-S": [0.5, 0.1], "UCB-E": []}, "large": {"GittinsEval-S": [1.5]}}
    plot_wall_times(groups, tmp_path / "t.png", "times", stops)
    (ax,) = saved_figures[-1].axes
    assert _marks(ax) == [(pytest.approx(-0.2), pytest.approx(0.3)), (pytest.approx(0.8), pytest.approx(1.5))]
    assert "mean wall time at the stopping signal" in ax.get_legend_handles_labels()[1]
    plot_wall_times(groups, tmp_path / "none.png", "times")
    (ax,) = saved_figures[-1].axes
    assert _marks(ax) == [] and "mean wall time at the stopping signal" not in ax.get_legend_handles_labels()[1]


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


def test_plot_sweep_draws_simulated_bo_runs(tmp_path):
    from gittinseval.baselines.logei import LogEIPolicy
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
