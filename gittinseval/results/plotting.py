"""Figures of regret curves, wall times and arm quality, drawn as in the paper.

The curves come from :mod:`gittinseval.results.curves`; this module only draws them.
Figures follow the paper's layout: a benchmark's unit-cost and cost-aware panels
side by side in one figure (:func:`plot_panels`), one fixed colour per method in
every figure (:func:`curve_colors`), and cost-axis ticks at 1, 2, 5 and 10 % (and
the same 1-2-5 steps in the decades below on a log axis).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from gittinseval.results.curves import RegretCurve, sweep_curves

__all__ = [
    "METHOD_COLORS", "cost_ticks", "curve_colors", "plot_arm_quality", "plot_curves", "plot_panels",
    "plot_sweep", "plot_wall_times",
]

# One colour per method, the same in every figure (matplotlib's tab10 and black).
METHOD_COLORS = {
    "GittinsEval-S": "#d62728",
    "GittinsEval-G": "#1f77b4",
    "GittinsEval-EB": "#9467bd",
    "UCB-E": "#ff7f0e",
    "UCB-E-LRF": "#8c564b",
    "SySRs": "#2ca02c",
    "PromptEval": "#e377c2",
    "PBGI": "#bcbd22",
    "LogEI": "#17becf",
    "LogEIPC": "#7f7f7f",
    "Uniform": "#000000",
}
# Methods missing from METHOD_COLORS take these in order of first appearance in a figure.
SPARE_COLORS = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354")
# The paper's cost-axis ticks (% of the exhaustive cost): 1-2-5 steps.
TICK_STEPS = (1.0, 2.0, 5.0)


def _pyplot():
    """``matplotlib.pyplot`` on the file-only Agg backend (figures are written, never shown)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, out: str | Path, **savefig_options) -> Path:
    """Write ``fig`` to ``out`` (creating its folder) and close it."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, **savefig_options)
    _pyplot().close(fig)
    return out


def _method(label: str) -> str:
    """The method of a curve label: the label without its swept settings ("GittinsEval-S λ=0.001")."""
    return label.split(" ")[0]


def _shade(color: str, amount: float) -> tuple[float, float, float]:
    """``color`` mixed with white (``amount`` > 0) or black (< 0) by ``|amount|`` in [0, 1]."""
    from matplotlib.colors import to_rgb

    rgb = np.asarray(to_rgb(color))
    target = 1.0 if amount > 0 else 0.0
    return tuple(float(c) for c in rgb + abs(amount) * (target - rgb))


def curve_colors(labels: list[str]) -> dict[str, tuple[float, float, float]]:
    """The colour of each curve label: its method's fixed colour (:data:`METHOD_COLORS`).

    Curves of one method that differ in a swept setting (the sensitivity studies,
    the recommendation ablation) share the method's hue, from dark to light in
    the order given; a method not in :data:`METHOD_COLORS` takes the next
    :data:`SPARE_COLORS` entry.
    """
    from matplotlib.colors import to_rgb

    variants: dict[str, list[str]] = defaultdict(list)
    for label in dict.fromkeys(labels):
        variants[_method(label)].append(label)
    spare = iter(SPARE_COLORS * (1 + len(variants) // len(SPARE_COLORS)))
    colors = {}
    for method, members in variants.items():
        base = METHOD_COLORS.get(method) or next(spare)
        if len(members) == 1:
            colors[members[0]] = tuple(float(c) for c in to_rgb(base))
            continue
        for label, amount in zip(members, np.linspace(-0.45, 0.55, len(members)), strict=True):
            colors[label] = _shade(base, float(amount))
    return colors


def cost_ticks(low: float, high: float, log_cost: bool = True) -> list[float]:
    """Cost-axis ticks (% of exhaustive) in ``[low, high]``: the paper's 1, 2, 5, 10.

    On a log axis the 1-2-5 steps run through the three decades up to ``high`` (0.1 to
    10 for a 10 % budget) and only the powers of ten below, whose 1-2-5 labels would
    overlap; on a linear axis the ticks are 0 and the steps of at least a fifteenth of
    ``high`` (finer ones would crowd the origin).
    """
    if not 0 < high or not low <= high:
        raise ValueError(f"cost axis limits must satisfy low <= high and high > 0, got [{low}, {high}]")
    top = math.floor(math.log10(high))  # the decade of the highest tick
    first = math.floor(math.log10(low)) if log_cost and low > 0 else math.floor(math.log10(high / 15))
    steps = [
        step * 10.0**decade
        for decade in range(first, top + 1)
        for step in (TICK_STEPS if decade >= top - 2 or not log_cost else TICK_STEPS[:1])
    ]
    ticks = [round(t, 12) for t in steps if low * (1 - 1e-9) <= t <= high * (1 + 1e-9)]
    if not log_cost:
        ticks = ([0.0] if low <= 0 else []) + [t for t in ticks if t >= high / 15]
    return ticks


def _draw_curves(ax, curves: list[RegretCurve], colors: dict, log_cost: bool) -> None:
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter

    for curve in curves:
        color = colors[curve.label]
        stop = "no stop" if curve.stop_pct is None else f"stop {curve.stop_pct:.2g}% in {curve.n_stopped}"
        # A mean over only the runs that have reached a cost (the paper's no-extrapolation
        # rule) is drawn dotted: on a log axis the first batches of a few runs would
        # otherwise look like the whole curve.
        every_run = curve.count == curve.n_runs
        ax.plot(curve.grid, np.where(every_run, np.nan, curve.mean), color=color, lw=0.9, ls=":")
        ax.plot(curve.grid, np.where(every_run, curve.mean, np.nan), color=color, lw=1.6,
                label=f"{curve.label} (n={curve.n_runs}; {stop})")
        low = np.where(every_run, curve.mean - curve.stderr, np.nan)
        high = np.where(every_run, curve.mean + curve.stderr, np.nan)
        ax.fill_between(curve.grid, low, high, color=color, alpha=0.28, lw=0)
        # Edges keep a band visible where it is thin or overlaps another band.
        ax.plot(curve.grid, low, color=color, lw=0.5, alpha=0.7)
        ax.plot(curve.grid, high, color=color, lw=0.5, alpha=0.7)
        if curve.stop_pct is not None:
            ax.axvline(curve.stop_pct, color=color, ls="--", lw=1.0)
    start = min(float(c.grid[0]) for c in curves)
    end = max(float(c.grid[-1]) for c in curves)
    if log_cost:
        ax.set_xscale("log")
    ax.set_xlim(start, end)
    ticks = cost_ticks(start, end, log_cost)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FixedFormatter([f"{t:g}" for t in ticks]))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("cumulative evaluation cost (% of exhaustive" + (", log scale)" if log_cost else ")"))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)


def plot_panels(
    panels: list[tuple[str, list[RegretCurve]]], out: str | Path, title: str = "", log_cost: bool = True
) -> Path:
    """Draw panels side by side, each regret against cost % with ±1 SE bands and dashed mean stops.

    ``panels`` is a list of ``(panel title, curves)``, e.g. a benchmark's unit-cost and
    cost-aware curves.  Each curve is solid where every run of its group has reached
    that cost and dotted where the mean is over fewer runs; each panel's legend gives
    its curves' run counts, mean stopping costs and the number of runs whose signal
    fired.  Every method has its :func:`curve_colors` colour in every panel.

    ``log_cost`` puts the cost on a log axis: most of the regret falls below 1-2 %
    of the exhaustive cost, which a linear axis up to 10 % squeezes into its left edge.
    """
    plt = _pyplot()
    if not panels or any(not curves for _, curves in panels):
        raise ValueError("plot_panels needs at least one panel and at least one curve in each")
    colors = curve_colors([curve.label for _, curves in panels for curve in curves])
    fig, axes = plt.subplots(1, len(panels), figsize=(6.0 * len(panels), 5.6), dpi=150, sharey=True,
                             squeeze=False)
    for ax, (panel_title, curves) in zip(axes[0], panels, strict=True):
        _draw_curves(ax, curves, colors, log_cost)
        ax.set_title(panel_title, fontsize="medium")
        ax.legend(frameon=False, fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    axes[0][0].set_ylabel("simple regret")
    fig.suptitle(title + ("\n" if title else "") + "dashed: mean stop; dotted: not all runs yet", fontsize="small")
    fig.tight_layout()
    return _save(fig, out, bbox_inches="tight")


def plot_curves(curves: list[RegretCurve], out: str | Path, title: str = "", log_cost: bool = True) -> Path:
    """One panel of :func:`plot_panels`: ``curves`` under ``title``."""
    return plot_panels([(title, curves)], out, log_cost=log_cost)


def plot_sweep(
    sweep_dir: str | Path, out: str | Path | None = None, log_cost: bool = True, max_figures: int | None = None
) -> tuple[list[Path], list[RegretCurve]]:
    """Draw the regret figures (PNG) of the runs under ``sweep_dir``, aggregated by
    :func:`~gittinseval.results.curves.sweep_curves`.

    One figure per benchmark, its cost modes side by side (unit cost first, as in
    the paper): with a single benchmark the figure is ``out`` (default
    ``<sweep_dir>/regret.png``); with several, each is named ``<out stem>_<benchmark>.png``
    next to ``out``.  With more than ``max_figures`` (benchmark, cost mode) panels,
    nothing is read or drawn: ``([], [])``.  Returns the figures and every curve drawn.
    """
    sweep_dir = Path(sweep_dir)
    out = Path(out) if out is not None else sweep_dir / "regret.png"
    benchmarks = sweep_curves(sweep_dir, log_grid=log_cost, max_panels=max_figures)
    figures = []
    for benchmark in benchmarks:
        panels = [(f"{cost_mode} cost", curves) for cost_mode, curves in benchmark.by_cost_mode.items()]
        name = benchmark.benchmark.replace("/", "_")
        target = out if len(benchmarks) == 1 else out.with_name(f"{out.stem}_{name}{out.suffix}")
        title = benchmark.benchmark + (" [stand-in]" if benchmark.stand_in else "")
        figures.append(plot_panels(panels, target, title, log_cost))
    drawn = [curve for benchmark in benchmarks for curves in benchmark.by_cost_mode.values() for curve in curves]
    return figures, drawn


def plot_arm_quality(benchmarks: list, out: str | Path, title: str, prior_means: list[float | None]) -> Path:
    """Histograms of the arms' full-row means, one panel per benchmark (paper App. "arm quality").

    Each panel marks the mean over arms (red), the best arm (green) and, when given,
    the benchmark's prior mean (purple).
    """
    plt = _pyplot()
    n_panels = len(benchmarks)
    columns = min(n_panels, 5)
    rows = -(-n_panels // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(2.6 * columns, 2.2 * rows), dpi=150, squeeze=False)
    for ax, benchmark, prior_mean in zip(axes.flat, benchmarks, prior_means, strict=False):
        means = benchmark.row_means
        ax.hist(means, bins=30, range=(0.0, 1.0), color="0.6")
        ax.axvline(float(np.mean(means)), color="red", lw=1.2, label="mean arm")
        ax.axvline(float(np.max(means)), color="green", lw=1.2, label="best arm")
        if prior_mean is not None:
            ax.axvline(prior_mean, color="purple", lw=1.2, ls="--", label="prior mean")
        ax.set_title(benchmark.name, fontsize="small")
        ax.tick_params(labelsize="x-small")
    for ax in axes.flat[n_panels:]:
        ax.axis("off")
    axes.flat[0].legend(frameon=False, fontsize="x-small")
    fig.suptitle(title)
    fig.supxlabel("arm accuracy (full-row mean)", fontsize="small")
    fig.tight_layout()
    return _save(fig, out)


def plot_wall_times(
    groups: dict[str, dict[str, list[float]]],
    out: str | Path,
    title: str,
    stops: dict[str, dict[str, list[float]]] | None = None,
) -> Path:
    """Bars of the mean wall time per run (± 1 SE) of each method, grouped by panel, on a log axis, each
    marked with a diamond at the mean wall time at which its stopping signal fired, as the paper's are.

    ``groups`` maps a panel name to ``{method label: [wall seconds of each run]}``
    (paper App. "timing": total wall time per run, by benchmark and MMLU size group);
    ``stops``, likewise, to the wall seconds at the signal of the runs that recorded one
    (``stop_wall_time_s``; a bar without any has no mark).
    """
    plt = _pyplot()
    stops = stops or {}
    labels = list(dict.fromkeys(label for methods in groups.values() for label in methods))
    colors = curve_colors(labels)
    width = 0.8 / max(len(labels), 1)
    fig, ax = plt.subplots(figsize=(max(6.4, 1.6 * len(groups)), 4.2), dpi=150)
    marks: tuple[list[float], list[float]] = ([], [])
    for i, label in enumerate(labels):
        positions, means, errors = [], [], []
        for g, (group, methods) in enumerate(groups.items()):
            if label in methods:
                times = np.asarray(methods[label], dtype=float)
                positions.append(g + (i - (len(labels) - 1) / 2) * width)
                means.append(times.mean())
                errors.append(times.std(ddof=1) / np.sqrt(len(times)) if len(times) > 1 else 0.0)
                stopped = stops.get(group, {}).get(label, [])
                if stopped:
                    marks[0].append(positions[-1])
                    marks[1].append(float(np.mean(stopped)))
        ax.bar(positions, means, width, yerr=errors, color=colors[label], label=label, capsize=2)
    if marks[0]:
        ax.scatter(*marks, marker="D", s=16, color="white", edgecolors="black", linewidths=0.8, zorder=3,
                   label="mean wall time at the stopping signal")
    # A panel named after its subject ("MMLU small: abstract_algebra") breaks before the subject,
    # so that neighbouring long names do not overlap.
    ax.set_xticks(range(len(groups)), [name.replace(": ", ":\n") for name in groups], fontsize="small")
    ax.set_yscale("log")
    ax.set_ylabel("wall time per run (s, log scale)")
    ax.set_title(title)
    ax.legend(frameon=False, fontsize="x-small", ncol=2)
    fig.tight_layout()
    return _save(fig, out)
