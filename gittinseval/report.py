"""``gittinseval-report``: figures and tables of one or more sweeps, per panel.

A *panel* is what one figure of the paper shows: one benchmark family and cost
mode.  GSM8K and PIQA pool their five matrix seeds; MMLU pools its subjects by the
paper's buckets (``difficulty-size``, e.g. ``hard-large``), by size group
(``--mmlu-panels size``, the sensitivity studies), or shows each subject alone
(``--mmlu-panels subject``).  Within a panel, one curve per
method label; when a setting (``batch_size``, ``lam`` or ``kappa``) takes several
values among a label's runs, each value is its own curve (the sensitivity studies
and the recommendation ablation).

Curves are aggregated as in :mod:`gittinseval.plotting` (350-point grid, ±1 SE,
BO after its initial design; on the default log cost axis the grid is spaced
evenly in log cost, with ``--linear`` evenly in cost as in the paper).  Each table row gives, over the curve's runs:

- the mean ± SE of the simple regret after the last batch at or below 1, 2, 5 and
  10 % of the exhaustive cost (runs with no batch that cheap are left out of that
  column, as are runs whose budget ends below that share; the column says how many
  runs it has when that is not all of them);
- the mean ± SE cost at which the stopping signal fired and the mean ± SE simple
  regret of the recommendation at that moment (what stopping there would have
  left), over the runs where it fired, and the share of runs where it fired;
- the median wall time of one run.

``overview.md`` sets the panels side by side, one table per cost mode: per panel,
each method's mean ± SE regret at 1, 2 and 5 % and its mean stop cost (with the
number of runs that stopped), and with ``--versus`` the paired differences at 2 %.

With ``--versus LABEL`` (repeatable), each panel that has a curve ``LABEL`` gets a table:
for every other curve, the mean ± SE of the *paired* difference of simple regret
(curve minus ``LABEL``) at 1, 2, 5 and 10 %, over the runs of the two curves that
share a benchmark (MMLU subject, matrix seed) and seed.  Pairing removes the
between-subject and between-seed spread that both curves share, so a difference
is judged against its own SE.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gittinseval.plotting import aggregate_group, find_runs, plot_curves, plot_wall_times
from gittinseval.simulator import RunResult, regret_at

__all__ = [
    "Panel",
    "PanelTables",
    "TABLE_PERCENTS",
    "curve_rows",
    "main",
    "overview_tables",
    "paired_rows",
    "panels",
    "write_report",
]

TABLE_PERCENTS = (1, 2, 5, 10)
MMLU_PANELS = ("bucket", "size", "subject")
# Settings that name their own curve when they vary among one label's runs.
SWEPT_SETTINGS = (("batch_size", "B"), ("lam", "λ"), ("kappa", "κ"))


@dataclass
class Panel:
    """Runs drawn in one figure: ``curves`` maps a curve label to its runs."""

    key: str
    title: str
    curves: dict[str, list[RunResult]]


def _family(run: RunResult, mmlu_panels: str) -> tuple[str, str]:
    """(file-name key, title) of the panel a run belongs to, without the cost mode."""
    name = run.summary["benchmark"]
    details = run.summary.get("benchmark_details") or {}
    if name.startswith("mmlu/"):
        if mmlu_panels == "subject" or "difficulty" not in details:
            return name.replace("/", "_"), f"MMLU {details.get('subject', name[5:])}"
        if mmlu_panels == "size":
            return f"mmlu_{details['size']}", f"MMLU {details['size']} subjects"
        bucket = f"{details['difficulty']}-{details['size']}"
        return f"mmlu_{bucket}", f"MMLU {bucket}"
    # "gsm8k_standin/m3" -> the GSM8K panel pools its matrix seeds.
    family = re.sub(r"/m\d+$", "", name)
    return family.replace("/", "_"), family


def _curve_label(run: RunResult, varying: set[str]) -> str:
    parts = [run.summary["label"]]
    parts += [f"{symbol}={run.summary[key]}" for key, symbol in SWEPT_SETTINGS if key in varying]
    return " ".join(parts)


def _natural_key(label: str) -> list[tuple[int, float | str]]:
    """Sort key that orders ``B=8`` before ``B=16`` and ``λ=1e-05`` before ``λ=0.0001``."""
    key: list[tuple[int, float | str]] = []
    for part in re.split(r"=", label):
        try:
            key.append((0, float(part.split()[0])))
        except (ValueError, IndexError):
            key.append((1, part))
    return key


def panels(runs: list[RunResult], mmlu_panels: str = "bucket") -> list[Panel]:
    """Group ``runs`` into panels (in order of first appearance) and curves (by label, then setting)."""
    if mmlu_panels not in MMLU_PANELS:
        raise ValueError(f"mmlu_panels must be one of {', '.join(MMLU_PANELS)}, got {mmlu_panels!r}")
    grouped: dict[tuple[str, str], list[RunResult]] = defaultdict(list)
    titles: dict[tuple[str, str], str] = {}
    for run in runs:
        if not len(run.trace["step"]):
            continue
        family, title = _family(run, mmlu_panels)
        cost_mode = run.summary["cost_mode"]
        key = (family, cost_mode)
        grouped[key].append(run)
        stand_in = " [stand-in data]" if run.summary.get("stand_in") else ""
        titles[key] = f"{title} ({cost_mode} cost){stand_in}"
    result = []
    for (family, cost_mode), members in grouped.items():
        values: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
        for run in members:
            for key, _ in SWEPT_SETTINGS:
                values[run.summary["label"]][key].add(run.summary.get(key))
        curves: dict[str, list[RunResult]] = defaultdict(list)
        for run in members:
            by_key = values[run.summary["label"]]
            varying = {key for key, _ in SWEPT_SETTINGS if len(by_key[key]) > 1}
            curves[_curve_label(run, varying)].append(run)
        ordered = dict(sorted(curves.items(), key=lambda item: _natural_key(item[0])))
        result.append(Panel(f"{family}_{cost_mode}", titles[(family, cost_mode)], ordered))
    return result


def _mean_se(values: list[float]) -> tuple[float, float]:
    mean = float(np.mean(values))
    se = float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0
    return mean, se


def _cell(values: list[float], n_runs: int, digits: int = 4) -> str:
    if not values:
        return "–"
    mean, se = _mean_se(values)
    text = f"{mean:.{digits}f} ± {se:.{digits}f}"
    return text if len(values) == n_runs else f"{text} (n={len(values)})"


def curve_rows(panel: Panel) -> list[dict[str, str]]:
    """One table row per curve of ``panel`` (columns in the module docstring)."""
    rows = []
    for label, members in panel.curves.items():
        row = {"method": label, "runs": str(len(members))}
        for percent in TABLE_PERCENTS:
            regrets = [_regret_at(r, percent) for r in members]
            row[f"regret @ {percent}%"] = _cell([v for v in regrets if v is not None], len(members))
        stopped = [r for r in members if r.summary.get("stop_cost_pct") is not None]
        stops = [r.summary["stop_cost_pct"] for r in stopped]
        row["stop cost %"] = _cell(stops, len(stops), digits=3)
        row["regret at stop"] = _cell([r.summary["stop_regret"] for r in stopped], len(stopped))
        row["stopped"] = f"{len(stops)}/{len(members)}"
        row["median wall s"] = f"{statistics.median(r.summary['wall_time_s'] for r in members):.3g}"
        rows.append(row)
    return rows


def _regret_at(run: RunResult, percent: float) -> float | None:
    if percent > 100 * run.summary["budget_fraction"] + 1e-9:  # a run says nothing past its budget
        return None
    return regret_at(run.trace["cost_pct"], run.trace["regret"], percent)


def paired_rows(panel: Panel, versus: str) -> list[dict[str, str]]:
    """Per curve other than ``versus``: mean ± SE of the paired regret difference (curve − ``versus``).

    Runs are paired by benchmark and seed; a pair enters a column only if both
    runs have a regret at that share of cost.  Empty if ``panel`` has no ``versus`` curve.
    """
    if versus not in panel.curves:
        return []
    baseline = {(r.summary["benchmark"], r.summary["seed"]): r for r in panel.curves[versus]}
    rows = []
    for label, members in panel.curves.items():
        if label == versus:
            continue
        pairs = [
            (r, baseline[key]) for r in members if (key := (r.summary["benchmark"], r.summary["seed"])) in baseline
        ]
        row = {f"method − {versus}": label, "pairs": str(len(pairs))}
        for percent in TABLE_PERCENTS:
            differences = [
                a - b
                for run, other in pairs
                if (a := _regret_at(run, percent)) is not None and (b := _regret_at(other, percent)) is not None
            ]
            row[f"Δ regret @ {percent}%"] = _cell(differences, len(pairs))
        rows.append(row)
    return rows


def _table(rows: list[dict[str, str]]) -> list[str]:
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row[column] for column in header) + " |" for row in rows]


OVERVIEW_PERCENTS = (1, 2, 5)


@dataclass
class PanelTables:
    """A panel's table rows (:func:`curve_rows`) and paired rows per baseline (:func:`paired_rows`)."""

    panel: Panel
    rows: list[dict[str, str]]
    paired: dict[str, list[dict[str, str]]]

    @classmethod
    def of(cls, panel: Panel, versus: tuple[str, ...] = ()) -> PanelTables:
        return cls(panel, curve_rows(panel), {baseline: paired_rows(panel, baseline) for baseline in versus})


def overview_tables(all_panels: list[Panel], versus: tuple[str, ...] = ()) -> dict[str, list[dict[str, str]]]:
    """Per cost mode, one row per panel: each method's regret at :data:`OVERVIEW_PERCENTS`, its
    stop cost (mean ± SE over the runs that stopped, and how many), and for each label of
    ``versus`` every other method's paired difference at 2 % (see :func:`paired_rows`)."""
    return _overview([PanelTables.of(panel, versus) for panel in all_panels])


def _overview(tables: list[PanelTables]) -> dict[str, list[dict[str, str]]]:
    by_cost: dict[str, list[dict[str, str]]] = defaultdict(list)
    for table in tables:
        cost_mode = next(iter(table.panel.curves.values()))[0].summary["cost_mode"]
        rows = table.rows
        counts = [r["runs"] for r in rows]
        runs = f"{counts[0]} each" if len(set(counts)) == 1 else ", ".join(f"{r['method']} {r['runs']}" for r in rows)
        row = {"panel": table.panel.title.split(" (")[0], "runs": runs}
        for percent in OVERVIEW_PERCENTS:
            row.update({f"{percent} % {r['method']}": r[f"regret @ {percent}%"] for r in rows})
        row.update({f"stop % {r['method']}": f"{r['stop cost %']} ({r['stopped']})" for r in rows})
        for baseline, paired in table.paired.items():
            row.update({f"{r[f'method − {baseline}']} − {baseline} @ 2 %": r["Δ regret @ 2%"] for r in paired})
        by_cost[cost_mode].append(row)
    # Panels with fewer methods get "–" in the others' columns.
    filled = {}
    for cost_mode, rows in by_cost.items():
        columns = list(dict.fromkeys(column for row in rows for column in row))
        filled[cost_mode] = [{column: row.get(column, "–") for column in columns} for row in rows]
    return filled


def _markdown(table: PanelTables) -> str:
    lines = [f"### {table.panel.title}", "", *_table(table.rows)]
    for baseline, paired in table.paired.items():
        if paired:
            lines += ["", f"Paired differences against {baseline} (same benchmark and seed; negative: lower regret):"]
            lines += ["", *_table(paired)]
    return "\n".join(lines) + "\n"


def write_report(
    sweep_dirs: list[str | Path],
    out: str | Path,
    mmlu_panels: str = "bucket",
    log_cost: bool = True,
    versus: tuple[str, ...] = (),
) -> Path:
    """Write ``<panel>.png`` and ``<panel>.md`` per panel, ``timing_<cost mode>.png`` (wall
    time per run of every method and panel), ``overview.md`` (the panels side by side) and
    ``report.md`` (every table) into ``out``."""
    runs = [run for sweep_dir in sweep_dirs for run in find_runs(sweep_dir)]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sections = [
        "# GittinsEval report",
        "",
        "Sweeps: " + ", ".join(f"`{Path(d)}`" for d in sweep_dirs),
        "",
        "Simple regret after the last batch at or below each share of the exhaustive cost (mean ± SE over runs); "
        "stop cost and the regret at the stop over the runs whose stopping signal fired.",
        "",
    ]
    wall_times: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(dict)
    all_tables = [PanelTables.of(panel, versus) for panel in panels(runs, mmlu_panels)]
    for tables in all_tables:
        panel = tables.panel
        cost_mode = next(iter(panel.curves.values()))[0].summary["cost_mode"]
        wall_times[cost_mode][panel.title.split(" (")[0]] = {
            label: [r.summary["wall_time_s"] for r in members] for label, members in panel.curves.items()
        }
        curves = [aggregate_group(label, members, log_grid=log_cost) for label, members in panel.curves.items()]
        plot_curves(curves, out / f"{panel.key}.png", panel.title, log_cost=log_cost)
        table = _markdown(tables)
        (out / f"{panel.key}.md").write_text(table)
        sections += [table, f"![{panel.title}]({panel.key}.png)", ""]
    for cost_mode, groups in wall_times.items():
        figure = plot_wall_times(groups, out / f"timing_{cost_mode}.png", f"Wall time per run ({cost_mode} cost)")
        sections += [f"![Wall time per run ({cost_mode} cost)]({figure.name})", ""]
    overview = ["# Overview", ""]
    for cost_mode, rows in _overview(all_tables).items():
        overview += [f"## {cost_mode} cost", "", *_table(rows), ""]
    (out / "overview.md").write_text("\n".join(overview))
    report = out / "report.md"
    report.write_text("\n".join(sections))
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="gittinseval-report",
        description="Figures (PNG) and markdown tables of regret, stopping and wall time for one or more sweeps.",
    )
    parser.add_argument("sweep_dirs", nargs="+", help="sweep directories (any directory holding runs)")
    parser.add_argument("--out", default=None, help="output directory (default: <first sweep>/report)")
    parser.add_argument(
        "--mmlu-panels",
        choices=MMLU_PANELS,
        default="bucket",
        help="pool MMLU subjects by difficulty-size bucket or by size group, or one panel per subject "
        "(default: %(default)s)",
    )
    parser.add_argument("--linear", action="store_true", help="linear cost axis (default: log scale)")
    parser.add_argument(
        "--versus",
        metavar="LABEL",
        action="append",
        default=[],
        help="also tabulate each method's regret minus LABEL's (e.g. GittinsEval-S), paired by benchmark and "
        "seed; repeat for several",
    )
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else Path(args.sweep_dirs[0]) / "report"
    try:
        report = write_report(
            args.sweep_dirs, out, args.mmlu_panels, log_cost=not args.linear, versus=tuple(args.versus)
        )
    except (FileNotFoundError, ValueError) as error:
        parser.exit(2, f"gittinseval-report: error: {error}\n")
    print(report.read_text())
    print(f"wrote {out}/ (report.md, overview.md, one PNG and one table per panel)")


if __name__ == "__main__":
    main()
