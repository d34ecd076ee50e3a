"""Curve aggregation: shared grid, no extrapolation, mean ± SE, mean stopping cost."""

import numpy as np
import pytest

from gittinseval.plotting import aggregate_runs, plot_sweep
from gittinseval.simulator import RunResult


def fake_run(cost_pct, regret, label="GittinsEval-G", stop=None, benchmark="toy", seed=0):
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
               "stand_in": False, "seed": seed}
    return RunResult(trace, summary)


def test_runs_are_interpolated_without_extrapolation():
    runs = [fake_run([1, 2, 3], [0.3, 0.1, 0.0], stop=2.0), fake_run([1, 5], [0.5, 0.1], stop=4.0, seed=1)]
    (curve,) = aggregate_runs(runs, grid_points=5)
    np.testing.assert_allclose(curve.grid, [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(curve.count, [2, 2, 2, 1, 1])
    second = np.interp(curve.grid, [1, 5], [0.5, 0.1])
    first = np.array([0.3, 0.1, 0.0])
    np.testing.assert_allclose(curve.mean[:3], (first + second[:3]) / 2)
    np.testing.assert_allclose(curve.mean[3:], second[3:])
    np.testing.assert_allclose(curve.stderr[:3], np.abs(first - second[:3]) / 2)  # std(ddof=1)/sqrt(2)
    np.testing.assert_array_equal(curve.stderr[3:], 0.0)
    assert curve.stop_pct == pytest.approx(3.0) and curve.n_stopped == 2


def test_groups_by_label_and_default_grid_has_350_points():
    runs = [fake_run([0, 1], [0.2, 0.0], label=label, seed=s) for label in ("A", "B") for s in range(3)]
    curves = aggregate_runs(runs)
    assert [c.label for c in curves] == ["A", "B"]
    assert all(c.grid.size == 350 and c.n_runs == 3 and c.stop_pct is None for c in curves)


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
    from gittinseval.data_cli import main

    main(["quality", "gsm8k", "--out", str(tmp_path)])
    assert (tmp_path / "arm_quality_gsm8k.png").is_file() and "wrote" in capsys.readouterr().out
    with pytest.raises(SystemExit) as error:
        main(["quality", "bogus", "--out", str(tmp_path)])
    assert error.value.code == 2
