"""``gittinseval-report``: figures and tables of sweeps and results stores, per panel.

Every run is first reduced to its row (:class:`~gittinseval.sim.results_store.RunRow`: summary and
regret curve), whether it comes from a sweep folder or from a results store (a
``.parquet`` file, see :mod:`gittinseval.sim.results_store`); everything below is computed from
rows, so a store gives the report of the sweeps exported into it.  ``--export STORE``
adds the runs of the given sources to a store instead of writing a report.

A *panel* is what one figure of the paper shows: one benchmark family and cost
mode.  GSM8K and PIQA pool their five matrix seeds; MMLU pools its subjects by the
paper's buckets (``difficulty-size``, e.g. ``hard-large``), by size group
(``--mmlu-panels size``, the sensitivity studies), or shows each subject alone
(``--mmlu-panels subject``).  Within a panel, one curve per
method label; when a setting (``batch_size``, ``lam`` or ``kappa``) takes several
values among a label's runs, each value is its own curve (the sensitivity studies
and the recommendation ablation).

Curves are aggregated as in :mod:`gittinseval.results.plotting` (350-point grids of the budget,
±1 SE, BO after its initial design; on the default log cost axis the grid is spaced
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

Every SE, in the tables and the figures' bands, is clustered by seed
(:mod:`gittinseval.results.stats`): the runs of one seed share its random draws on every
benchmark of a panel, so a panel of S subjects and G seeds has G independent draws,
not S G.
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gittinseval.results.plotting import aggregate_group, plot_panels, plot_wall_times
from gittinseval.results.stats import clustered_mean_se
from gittinseval.sim.results_store import RunRow, export_rows, load_rows
from gittinseval.sim.simulator import REPORT_PERCENTS

__all__ = [
    "Panel",
    "PanelTables",
    "TABLE_PERCENTS",
    "curve_rows",
    "export",
    "main",
    "overview_tables",
    "paired_rows",
    "panels",
    "write_report",
]

TABLE_PERCENTS = REPORT_PERCENTS
MMLU_PANELS = ("bucket", "size", "subject")
# Settings that name their own curve when they vary among one label's runs.
SWEPT_SETTINGS = (("batch_size", "B"), ("lam", "λ"), ("kappa", "κ"))


@dataclass
class Panel:
    """Runs drawn in one figure: ``curves`` maps a curve label to its runs."""

    family: str
    cost_mode: str
    title: str
    curves: dict[str, list[RunRow]]
    family_title: str = ""

    @property
    def key(self) -> str:
        """File-name stem of the panel's table: ``<family>_<cost mode>``."""
        return f"{self.family}_{self.cost_mode}"


def _family(run: RunRow, mmlu_panels: str) -> tuple[str, str]:
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


def _curve_label(run: RunRow, varying: set[str]) -> str:
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


def panels(runs: list[RunRow], mmlu_panels: str = "bucket") -> list[Panel]:
    """Group ``runs`` into panels (in order of first appearance) and curves (by label, then setting)."""
    if mmlu_panels not in MMLU_PANELS:
        raise ValueError(f"mmlu_panels must be one of {', '.join(MMLU_PANELS)}, got {mmlu_panels!r}")
    grouped: dict[tuple[str, str], list[RunRow]] = defaultdict(list)
    titles: dict[tuple[str, str], tuple[str, str]] = {}
    for run in runs:
        if not run.has_steps:
            continue
        family, title = _family(run, mmlu_panels)
        cost_mode = run.summary["cost_mode"]
        key = (family, cost_mode)
        grouped[key].append(run)
        stand_in = " [stand-in data]" if run.summary.get("stand_in") else ""
        titles[key] = (title, stand_in)
    result = []
    for (family, cost_mode), members in grouped.items():
        values: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
        for run in members:
            for key, _ in SWEPT_SETTINGS:
                values[run.summary["label"]][key].add(run.summary.get(key))
        curves: dict[str, list[RunRow]] = defaultdict(list)
        for run in members:
            by_key = values[run.summary["label"]]
            varying = {key for key, _ in SWEPT_SETTINGS if len(by_key[key]) > 1}
            curves[_curve_label(run, varying)].append(run)
        ordered = dict(sorted(curves.items(), key=lambda item: _natural_key(item[0])))
        title, stand_in = titles[(family, cost_mode)]
        result.append(Panel(family, cost_mode, f"{title} ({cost_mode} cost){stand_in}", ordered, title + stand_in))
    return result


def _cell(measured: list[tuple[float, int]], n_runs: int, digits: int = 4) -> str:
    """``mean ± SE`` of ``(value, seed)`` pairs, clustered by seed
    (:func:`~gittinseval.results.stats.clustered_mean_se`); the SE of one value is 0, that of
    several of a single seed cannot be estimated."""
    if not measured:
        return "–"
    values, seeds = zip(*measured, strict=True)
    mean, se, _ = clustered_mean_se(np.asarray(values, dtype=float), seeds)
    if len(values) == 1:
        spread = f"{0:.{digits}f}"
    elif np.isnan(se[0]):
        spread = "– (one seed)"
    else:
        spread = f"{se[0]:.{digits}f}"
    text = f"{mean[0]:.{digits}f} ± {spread}"
    return text if len(values) == n_runs else f"{text} (n={len(values)})"


def curve_rows(panel: Panel) -> list[dict[str, str]]:
    """One table row per curve of ``panel`` (columns in the module docstring)."""
    rows = []
    for label, members in panel.curves.items():
        row = {"method": label, "runs": str(len(members))}
        for percent in TABLE_PERCENTS:
            measured = [(v, r.summary["seed"]) for r in members if (v := _regret_at(r, percent)) is not None]
            row[f"regret @ {percent}%"] = _cell(measured, len(members))
        stopped = [r for r in members if r.summary.get("stop_cost_pct") is not None]
        row["stop cost %"] = _cell([(r.summary["stop_cost_pct"], r.summary["seed"]) for r in stopped], len(stopped), 3)
        row["regret at stop"] = _cell([(r.summary["stop_regret"], r.summary["seed"]) for r in stopped], len(stopped))
        row["stopped"] = f"{len(stopped)}/{len(members)}"
        row["median wall s"] = f"{statistics.median(r.summary['wall_time_s'] for r in members):.3g}"
        rows.append(row)
    return rows


def _regret_at(run: RunRow, percent: int) -> float | None:
    if percent > 100 * run.summary["budget_fraction"] + 1e-9:  # a run says nothing past its budget
        return None
    return run.summary[f"regret_at_{percent}pct"]


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
                (a - b, run.summary["seed"])
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
    sources: list[str | Path],
    out: str | Path,
    mmlu_panels: str = "bucket",
    log_cost: bool = True,
    versus: tuple[str, ...] = (),
) -> Path:
    """Write ``<panel>.md`` per panel and ``<family>.png`` per benchmark family (its unit-cost and
    cost-aware panels side by side, as in the paper), ``timing_<cost mode>.png`` (wall time per
    run of every method and panel), ``overview.md`` (the panels side by side) and ``report.md``
    (every table) into ``out``, from the runs of ``sources`` (sweep folders and results stores)."""
    runs = [row for source in sources for row in load_rows(source)]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sections = [
        "# GittinsEval report",
        "",
        "Sources: " + ", ".join(f"`{Path(source)}`" for source in sources),
        "",
        "Simple regret after the last batch at or below each share of the exhaustive cost (mean ± SE over runs); "
        "stop cost and the regret at the stop over the runs whose stopping signal fired.",
        "",
    ]
    wall_times: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(dict)
    all_tables = [PanelTables.of(panel, versus) for panel in panels(runs, mmlu_panels)]
    families: dict[str, list[PanelTables]] = defaultdict(list)
    for tables in all_tables:
        families[tables.panel.family].append(tables)
    for family, members in families.items():
        members.sort(key=lambda tables: (tables.panel.cost_mode != "unit", tables.panel.cost_mode))
        figure_panels = []
        for tables in members:
            panel = tables.panel
            wall_times[panel.cost_mode][panel.family_title] = {
                label: [r.summary["wall_time_s"] for r in runs_of] for label, runs_of in panel.curves.items()
            }
            curves = [aggregate_group(label, runs_of, log_grid=log_cost) for label, runs_of in panel.curves.items()]
            figure_panels.append((f"{panel.cost_mode} cost", curves))
            table = _markdown(tables)
            (out / f"{panel.key}.md").write_text(table)
            sections += [table, ""]
        family_title = members[0].panel.family_title
        plot_panels(figure_panels, out / f"{family}.png", family_title, log_cost=log_cost)
        sections += [f"![{family_title}]({family}.png)", ""]
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


def export(sources: list[str | Path], store: str | Path) -> tuple[int, int]:
    """Add the runs of ``sources`` (sweep folders and stores) to the results store ``store``
    (a ``.parquet`` file, created if need be); ``(added, already stored)``, see
    :func:`~gittinseval.sim.results_store.export_rows`."""
    return export_rows((row for source in sources for row in load_rows(source)), store)


def _default_out(source: Path) -> Path:
    """``<sweep>/report``, or ``outputs/report/<name>`` for a store (not beside it: stores sit in the repository)."""
    return Path("outputs", "report", source.stem) if source.suffix == ".parquet" else source / "report"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="gittinseval-report",
        description="Figures (PNG) and markdown tables of regret, stopping and wall time for sweeps and results "
        "stores; or, with --export, add the runs of sweeps to a results store.",
    )
    parser.add_argument(
        "sources", nargs="+", metavar="SOURCE",
        help="sweep directories (any directory holding runs) and results stores (.parquet files)",
    )
    parser.add_argument(
        "--out", default=None,
        help="output directory (default: <first sweep>/report, or outputs/report/<name> for a store)",
    )
    parser.add_argument(
        "--export", metavar="STORE", default=None,
        help="instead of a report, add every run of the sources to the results store STORE (a .parquet file; "
        "runs already stored with the same config digest are kept as they are)",
    )
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
    try:
        if args.export is not None:
            added, already = export(args.sources, args.export)
            print(f"{args.export}: added {added} runs, {already} were stored already")
            return
        out = Path(args.out) if args.out else _default_out(Path(args.sources[0]))
        report = write_report(
            args.sources, out, args.mmlu_panels, log_cost=not args.linear, versus=tuple(args.versus)
        )
    except (FileNotFoundError, ValueError) as error:
        parser.exit(2, f"gittinseval-report: error: {error}\n")
    print(report.read_text())
    print(f"wrote {out}/ (report.md, overview.md, one PNG and one table per panel)")


if __name__ == "__main__":
    main()
