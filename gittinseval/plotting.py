"""Aggregate runs into regret curves and draw them as in the paper.

Aggregation (paper appendix "Curve aggregation and visualization"): each run's
regret trajectory is linearly interpolated onto a shared grid of 350 evenly
spaced budget points spanning the observed range of its group; a run is missing
outside its own observed range (no extrapolation).  The curve is the mean over
the runs present at a grid point, the band one standard error, and the dashed
line the mean cost at which the stopping signal fired.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gittinseval.simulator import RunResult

__all__ = ["RegretCurve", "aggregate_runs", "find_runs", "plot_curves", "plot_sweep"]

GRID_POINTS = 350


@dataclass
class RegretCurve:
    """Mean regret of a group of runs on a budget grid.

    Attributes (arrays of shape ``[G]``): ``grid`` (cost % of exhaustive),
    ``mean``, ``stderr`` (0 where fewer than two runs) and ``count`` of runs
    present at each point; ``stop_pct`` is the mean stopping cost % over the runs
    whose signal fired (``None`` if none did) and ``n_stopped`` their number.
    """

    label: str
    grid: np.ndarray
    mean: np.ndarray
    stderr: np.ndarray
    count: np.ndarray
    n_runs: int
    stop_pct: float | None
    n_stopped: int


def find_runs(sweep_dir: str | Path) -> list[RunResult]:
    """Every run (a directory with ``summary.json`` and ``trace.csv``) under ``sweep_dir``."""
    sweep_dir = Path(sweep_dir)
    runs = [RunResult.load(p.parent) for p in sorted(sweep_dir.rglob("summary.json"))
            if (p.parent / "trace.csv").is_file()]
    if not runs:
        raise FileNotFoundError(f"no runs (summary.json + trace.csv) under {sweep_dir}")
    return runs


def _interpolate(x: np.ndarray, y: np.ndarray, grid: np.ndarray) -> np.ndarray:
    values = np.interp(grid, x, y)
    values[(grid < x[0]) | (grid > x[-1])] = np.nan
    return values


def aggregate_runs(runs: list[RunResult], grid_points: int = GRID_POINTS) -> list[RegretCurve]:
    """One :class:`RegretCurve` per (benchmark, label), in order of first appearance."""
    groups: dict[tuple[str, str], list[RunResult]] = defaultdict(list)
    for run in runs:
        if len(run.trace["step"]):
            groups[(run.summary["benchmark"], run.summary["label"])].append(run)
    curves = []
    for (_, label), members in groups.items():
        start = min(r.trace["cost_pct"][0] for r in members)
        end = max(r.trace["cost_pct"][-1] for r in members)
        grid = np.linspace(start, end, grid_points)
        stacked = np.stack([_interpolate(r.trace["cost_pct"], r.trace["regret"], grid) for r in members])
        count = np.sum(~np.isnan(stacked), axis=0)
        with warnings.catch_warnings():
            # Grid points that no run (or one run) covers give NaN means / SEs.
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(stacked, axis=0)
            std = np.nanstd(stacked, axis=0, ddof=1)
        stderr = np.where(count > 1, std / np.sqrt(np.maximum(count, 1)), 0.0)
        stops = [r.summary["stop_cost_pct"] for r in members if r.summary.get("stop_cost_pct") is not None]
        curves.append(
            RegretCurve(
                label=label,
                grid=grid,
                mean=mean,
                stderr=stderr,
                count=count,
                n_runs=len(members),
                stop_pct=float(np.mean(stops)) if stops else None,
                n_stopped=len(stops),
            )
        )
    return curves


def plot_curves(curves: list[RegretCurve], out: str | Path, title: str = "") -> Path:
    """Draw regret against cost % with ±1 SE bands and dashed mean stopping lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=150)
    for i, curve in enumerate(curves):
        color = f"C{i}"
        ax.plot(curve.grid, curve.mean, color=color, lw=1.6, label=f"{curve.label} (n={curve.n_runs})")
        ax.fill_between(curve.grid, curve.mean - curve.stderr, curve.mean + curve.stderr, color=color, alpha=0.2, lw=0)
        if curve.stop_pct is not None:
            ax.axvline(curve.stop_pct, color=color, ls="--", lw=1.0)
    ax.set_xlabel("cumulative evaluation cost (% of exhaustive)")
    ax.set_ylabel("simple regret")
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def plot_sweep(sweep_dir: str | Path, out: str | Path | None = None) -> tuple[list[Path], list[RegretCurve]]:
    """Aggregate every run under ``sweep_dir`` and write the regret figure (PNG).

    With a single benchmark the figure is ``out`` (default
    ``<sweep_dir>/regret.png``); with several, one figure per benchmark named
    ``<out stem>_<benchmark>.png`` next to ``out``.
    """
    sweep_dir = Path(sweep_dir)
    out = Path(out) if out is not None else sweep_dir / "regret.png"
    by_benchmark: dict[str, list[RunResult]] = defaultdict(list)
    for run in find_runs(sweep_dir):
        by_benchmark[run.summary["benchmark"]].append(run)
    figures, all_curves = [], []
    for benchmark, members in by_benchmark.items():
        curves = aggregate_runs(members)
        first = members[0].summary
        title = f"{benchmark} ({first['cost_mode']} cost)" + (" [stand-in]" if first.get("stand_in") else "")
        name = benchmark.replace("/", "_")
        target = out if len(by_benchmark) == 1 else out.with_name(f"{out.stem}_{name}{out.suffix}")
        figures.append(plot_curves(curves, target, title))
        all_curves.extend(curves)
    return figures, all_curves
