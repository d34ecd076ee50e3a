"""Regret curves: runs aggregated onto a cost grid, as in the paper.

Aggregation (paper appendix "Curve aggregation and visualization"), on the runs'
rows (:class:`~gittinseval.sim.results_store.RunRow`): each run's regret trajectory is linearly
interpolated onto fixed nodes of its budget (350 evenly spaced over ``[0, budget]``,
or evenly spaced in log cost for a log axis, :func:`~gittinseval.sim.results_store.run_grid`).  A
group's grid is those nodes within the observed range of its runs, between its first
and last batch; a run is missing outside its own observed range (no extrapolation).
Runs of one budget share their nodes, so at every node the curve is the mean of the
runs' stored values; runs of other budgets are interpolated between theirs.  The curve
is the mean over the runs present at a grid point, the band one standard error
(clustered by seed, :mod:`gittinseval.results.stats`), and the stop the mean cost at
which the stopping signal fired.

Configuration-level BO runs (their summary's ``hyperparameters`` carry
``n_initial``, the size of the random initial design) are aggregated as the
paper does: each run's initial-design segment is dropped, its remaining
trajectory (from its initial-design endpoint ``e_r`` on) is shifted to start at
the mean endpoint ``mean_r e_r``, linearly interpolated onto 350 points from
there to the latest shifted end, and right-held at its final regret past its
own end, so every run counts at every grid point.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gittinseval.results.stats import clustered_mean_se
from gittinseval.sim.results_store import RunRow, find_runs, interpolate, run_grid

__all__ = ["BenchmarkCurves", "RegretCurve", "aggregate_group", "aggregate_runs", "cost_mode_order", "sweep_curves"]


@dataclass
class RegretCurve:
    """Mean regret of a group of runs on a budget grid.

    Attributes (arrays of shape ``[G]``): ``grid`` (cost % of exhaustive),
    ``mean``, ``stderr`` (clustered by seed, :mod:`gittinseval.results.stats`; 0 where the
    runs present are of fewer than two seeds) and ``count`` of runs
    present at each point; ``stop_pct`` is the mean stopping cost % over the runs
    whose signal fired (``None`` if none did) and ``n_stopped`` their number;
    ``init_pct`` is the mean initial-design endpoint of BO runs (``None`` otherwise).
    """

    label: str
    grid: np.ndarray
    mean: np.ndarray
    stderr: np.ndarray
    count: np.ndarray
    n_runs: int
    stop_pct: float | None
    n_stopped: int
    init_pct: float | None = None


def _bandit_rows(members: list[RunRow], log_grid: bool) -> tuple[np.ndarray, np.ndarray, None]:
    """The runs' nodes within their observed range ``[G]``, and each run on them ``[R, G]``, NaN outside its range."""
    points = [row.points(log_grid) for row in members]
    start = min(x[0] for x, _ in points)
    end = max(x[-1] for x, _ in points)
    budgets = {row.summary["budget_fraction"]: len(row.linear) for row in members}
    nodes = np.concatenate([run_grid(budget, size, log_grid) for budget, size in budgets.items()])
    grid = np.unique(np.concatenate([[start], nodes[(nodes > start) & (nodes < end)], [end]]))
    return grid, np.stack([interpolate(x, y, grid) for x, y in points]), None


def _spaced(start: float, end: float, grid_points: int, log_grid: bool) -> np.ndarray:
    return np.geomspace(start, end, grid_points) if log_grid else np.linspace(start, end, grid_points)


def _bo_rows(members: list[RunRow], log_grid: bool) -> tuple[np.ndarray, np.ndarray, float]:
    """Post-initialisation trajectories ``[R, G]`` aligned at the mean initial-design endpoint, right-held."""
    segments = []
    for row in members:
        x, y = row.points(log_grid)
        after = x > row.init_pct
        segments.append((np.concatenate([[row.init_pct], x[after]]), np.concatenate([[row.init_regret], y[after]])))
    init_pct = float(np.mean([row.init_pct for row in members]))
    shifted = [(x - x[0] + init_pct, y) for x, y in segments]
    grid = _spaced(init_pct, max(x[-1] for x, _ in shifted), len(members[0].linear), log_grid)
    # np.interp holds the end values outside [x[0], x[-1]]; every segment starts at the grid's start.
    return grid, np.stack([np.interp(grid, x, y) for x, y in shifted]), init_pct


def aggregate_group(label: str, members: list[RunRow], log_grid: bool = False) -> RegretCurve:
    """The :class:`RegretCurve` of one group of runs (one curve of a figure), from their rows.

    BO runs use the BO aggregation of the module docstring; a group mixing BO and
    other runs is an error.  ``log_grid`` uses the runs' log-spaced nodes (for a log
    cost axis) instead of the paper's even linear spacing.
    """
    n_bo = sum(row.init_pct is not None for row in members)
    if 0 < n_bo < len(members):
        raise ValueError(f"{label}: {n_bo} of {len(members)} runs are BO runs; cannot aggregate both")
    grid, stacked, init_pct = (_bo_rows if n_bo else _bandit_rows)(members, log_grid)
    count = np.sum(~np.isnan(stacked), axis=0)
    mean, stderr, _ = clustered_mean_se(stacked, [row.summary["seed"] for row in members])
    stderr = np.nan_to_num(stderr, nan=0.0)  # no band where the runs present are of one seed
    stops = [row.summary["stop_cost_pct"] for row in members if row.summary.get("stop_cost_pct") is not None]
    return RegretCurve(
        label=label,
        grid=grid,
        mean=mean,
        stderr=stderr,
        count=count,
        n_runs=len(members),
        stop_pct=float(np.mean(stops)) if stops else None,
        n_stopped=len(stops),
        init_pct=init_pct,
    )


def aggregate_runs(rows: list[RunRow], log_grid: bool = False) -> list[RegretCurve]:
    """One :class:`RegretCurve` per (benchmark, label), in order of first appearance."""
    groups: dict[tuple[str, str], list[RunRow]] = defaultdict(list)
    for row in rows:
        if row.has_steps:
            groups[(row.summary["benchmark"], row.summary["label"])].append(row)
    return [aggregate_group(label, members, log_grid) for (_, label), members in groups.items()]


def cost_mode_order(cost_mode: str) -> tuple[bool, str]:
    """Sort key of cost modes: unit cost first, as in the paper's figures, then by name."""
    return cost_mode != "unit", cost_mode


@dataclass
class BenchmarkCurves:
    """The curves of one benchmark of a sweep: ``by_cost_mode`` maps a cost mode (unit cost first) to its curves."""

    benchmark: str
    stand_in: bool
    by_cost_mode: dict[str, list[RegretCurve]]


def sweep_curves(sweep_dir: str | Path, log_grid: bool = True, max_panels: int | None = None) -> list[BenchmarkCurves]:
    """The curves of every run under ``sweep_dir``, per benchmark (in order of first appearance) and cost mode.

    With more than ``max_panels`` (benchmark, cost mode) pairs, counted from the runs'
    summaries before any trace is read, nothing is read: ``[]``.
    """
    sweep_dir = Path(sweep_dir)
    if max_panels is not None:
        keys = set()
        for path in sweep_dir.rglob("summary.json"):
            summary = json.loads(path.read_text())
            keys.add((summary["benchmark"], summary["cost_mode"]))
        if len(keys) > max_panels:
            return []
    by_benchmark: dict[str, dict[str, list[RunRow]]] = defaultdict(lambda: defaultdict(list))
    for run in find_runs(sweep_dir):
        by_benchmark[run.summary["benchmark"]][run.summary["cost_mode"]].append(RunRow.of(run))
    return [
        BenchmarkCurves(
            benchmark,
            bool(next(iter(modes.values()))[0].summary.get("stand_in")),
            {
                cost_mode: aggregate_runs(modes[cost_mode], log_grid=log_grid)
                for cost_mode in sorted(modes, key=cost_mode_order)
            },
        )
        for benchmark, modes in by_benchmark.items()
    ]
