"""The report (``gittinseval-report``): figures and tables of sweeps and results stores, per panel.

Every run is first reduced to its row (:class:`~gittinseval.sim.results_store.RunRow`: summary and
regret curve), whether it comes from a sweep folder or from a results store (a
``.parquet`` file, see :mod:`gittinseval.sim.results_store`); everything below is computed from
rows, so a store gives the report of the sweeps exported into it (``gittinseval-store export``).

A *panel* is what one figure of the paper shows: one benchmark family and cost
mode.  GSM8K and PIQA pool their five matrix seeds; MMLU pools its subjects by the
paper's buckets (``difficulty-size``, e.g. ``hard-large``), by size group
(``--mmlu-panels size``, the sensitivity studies), or shows each subject alone
(``--mmlu-panels subject``).  Within a panel, one curve per
method label; when a setting (``batch_size``, ``lam`` or ``kappa``) takes several
values among a label's runs, each value is its own curve (the sensitivity studies
and the recommendation ablation).  Panels and their tables' numbers are computed by
:mod:`gittinseval.results.panels`, and written by :mod:`gittinseval.results.tables`.

Curves are aggregated as in :mod:`gittinseval.results.curves` (350-point grids of the budget,
±1 SE, BO after its initial design; on the default log cost axis the grid is spaced
evenly in log cost, with ``--linear`` evenly in cost as in the paper).  The report writes
narrow tables (:mod:`gittinseval.results.tables`), each a file of its own so that a page can
include it:

- ``<panel>.md``: per curve, the mean ± SE of the simple regret after the last batch at or
  below 1, 2, 5 and 10 % of the exhaustive cost (runs with no batch that cheap are left out
  of that column, as are runs whose budget ends below that share, and BO runs still in their
  random initial design; the cell says how many runs it has when that is not all of them);
- ``<panel>_versus_<label>.md`` (the label as :func:`~gittinseval.results.tables.slug` writes
  it) with ``--versus LABEL`` (repeatable): for every other curve,
  the mean ± SE of the *paired* difference of simple regret (curve minus ``LABEL``) over the
  runs of the two curves that share a benchmark (MMLU subject, matrix seed) and seed.
  Pairing removes the between-subject and between-seed spread that both curves share, so a
  difference is judged against its own SE;
- ``stopping.md``: per panel and curve with a stopping signal, how often it fired, the mean
  ± SE cost at which it fired and the regret of the recommendation at that moment, and
  whether it fired before BO's first stop on the same benchmark and seed;
- ``timing_<cost mode>.md``: the mean ± SE wall time of one run per curve and panel;
- ``overview_<cost mode>_<p>pct.md``: every panel's regret at ``p`` % side by side (one row
  per panel, one column per curve), all of them in ``overview.md``;
- ``certificate.md``, for runs whose summary carries a certificate (runs of the stores
  made before certificates have none, and get no table): per benchmark, cost mode and
  curve label, the mean P(best) and P(eps-best) of the final recommendation and the
  coverage of its credible interval (the share of runs whose interval holds the
  recommended arm's full-benchmark mean, which a simulation knows); also at the end of
  ``report.md``;
- ``spend.md``, for runs that record each arm's spend (``record_arm_spend``): per curve,
  the mean share of a run's spend to 10 % on the arms its seed's plan guessed cheap or dear
  and on the best arms (:mod:`gittinseval.results.spend`); also at the end of ``report.md``;
- ``price_deciles.md``, for runs that also record each arm's price: per curve, the mean share of a run's
  spend to 10 % on each tenth of the arms by price, and the best arm's tenth
  (:mod:`gittinseval.results.price_deciles`); also at the end of ``report.md``;
- ``prior_fit.md``, for GittinsEval-EB runs: per benchmark family and cost mode, how often
  the prior was fitted and its tables refreshed, and the final prior against the arm
  population (:mod:`gittinseval.results.prior_fit`); also at the end of ``report.md``;
- the other tables of what the runs' summaries carry (the certificates' calibration, the
  confidence stop, a model-comparison store's models), each computed as numbers by a module
  of its own and registered in :data:`SUMMARY_TABLES`; also at the end of ``report.md``;
- ``report.md``: every table, with the figures.

Figures (``figures="all"``): ``<family>.png`` per benchmark family, its cost modes' panels
side by side, and ``timing_<cost mode>.png``, the wall times (each bar marked at the mean wall time at the
stopping signal, where the runs recorded it); ``"families"`` leaves out the
timing figures, ``"timing"`` keeps only them (a timing study's regret curves show nothing
new) and ``"none"`` draws no figure (tables alone take a fraction of a second).

Every SE, in the tables and the figures' bands, is clustered by seed
(:mod:`gittinseval.results.stats`): the runs of one seed share its random draws on every
benchmark of a panel, so a panel of S subjects and G seeds has G independent draws,
not S G.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gittinseval.results import (
    calibration,
    certificate_models,
    certificates,
    confidence_stop,
    price_deciles,
    prior_fit,
    spend,
)
from gittinseval.results.curves import aggregate_group
from gittinseval.results.panels import TABLE_PERCENTS, PanelTables, by_cost_mode, by_family, panel_tables
from gittinseval.results.plotting import plot_panels, plot_wall_times
from gittinseval.results.tables import (
    Figure,
    calibration_cells,
    certificate_cells,
    confidence_stop_cells,
    markdown_table,
    model_calibration_cells,
    model_regret_cells,
    model_stop_cells,
    overview_cells,
    overview_markdown,
    paired_cells,
    price_decile_cells,
    prior_fit_cells,
    regret_cells,
    reliability_cells,
    report_markdown,
    slug,
    spend_cells,
    stop_cells,
    timing_cells,
    verdict_markdown,
)
from gittinseval.sim.results_store import RunRow, load_rows

__all__ = ["FIGURES", "SUMMARY_TABLES", "SummaryTable", "draw_figures", "write_markdown", "write_report",
           "write_summary_tables"]

# Which figures a report draws: every one, the benchmark families' regret figures only, the
# wall-time figures only (a timing store), or none.
FIGURES = ("all", "families", "timing", "none")


def draw_figures(
    families: dict[str, list[PanelTables]],
    out: Path,
    log_cost: bool = True,
    timing: bool = True,
    draw: bool = True,
    regret: bool = True,
) -> tuple[dict[str, Figure], list[Figure]]:
    """Draw, with ``regret``, ``<family>.png`` per benchmark family (its cost modes' panels side by
    side, as in the paper) and, with ``timing``, ``timing_<cost mode>.png`` (wall time per run of
    every method and panel) into ``out``; without ``draw``, only name them.

    Returns the family figures by family and the timing figures, in order of first appearance.
    """
    family_figures: dict[str, Figure] = {}
    wall_times: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(dict)
    stop_times: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(dict)
    for family, members in families.items():
        figure_panels = []
        for panel in (tables.panel for tables in members):
            wall_times[panel.cost_mode][panel.family_title] = {
                label: [run.summary["wall_time_s"] for run in runs] for label, runs in panel.curves.items()
            }
            # Runs stored before the wall time at the signal was recorded have none: their bars get no mark.
            stop_times[panel.cost_mode][panel.family_title] = {
                label: [seconds for run in runs if (seconds := run.summary.get("stop_wall_time_s")) is not None]
                for label, runs in panel.curves.items()
            }
            if draw and regret:
                curves = [aggregate_group(label, runs, log_grid=log_cost) for label, runs in panel.curves.items()]
                figure_panels.append((f"{panel.cost_mode} cost", curves))
        if not regret:
            continue
        title = members[0].panel.family_title
        path = out / f"{family}.png"
        family_figures[family] = Figure(title, plot_panels(figure_panels, path, title, log_cost) if draw else path)
    timing_figures = []
    for cost_mode, groups in wall_times.items() if timing else ():
        title = f"Wall time per run ({cost_mode} cost)"
        path = out / f"timing_{cost_mode}.png"
        timing_figures.append(Figure(title, plot_wall_times(groups, path, title, stop_times[cost_mode]) if draw
                                     else path))
    return family_figures, timing_figures


def write_markdown(
    sources: list[str | Path],
    tables: list[PanelTables],
    family_figures: dict[str, Figure],
    timing_figures: list[Figure],
    out: Path,
) -> Path:
    """Write every table of the module docstring into ``out``, and ``report.md``: every family's
    panels, each family followed by its figure (if the report has one), then the stops and wall times."""
    for table in tables:
        (out / f"{table.panel.key}.md").write_text(markdown_table(regret_cells(table.rows)))
        for baseline, paired in table.paired.items():
            if paired:
                (out / f"{table.panel.key}_versus_{slug(baseline)}.md").write_text(markdown_table(paired_cells(paired)))
    families = by_family(tables)
    stops = [table for members in families.values() for table in members if table.stops]
    stopping = markdown_table(stop_cells(stops)) if stops else None
    if stopping:
        (out / "stopping.md").write_text(stopping)
    modes = by_cost_mode(tables)
    timing = {cost_mode: markdown_table(timing_cells(members)) for cost_mode, members in modes.items()}
    for cost_mode, members in modes.items():
        (out / f"timing_{cost_mode}.md").write_text(timing[cost_mode])
        for percent in TABLE_PERCENTS:
            (out / f"overview_{cost_mode}_{percent}pct.md").write_text(markdown_table(overview_cells(members, percent)))
    (out / "overview.md").write_text(overview_markdown(modes))
    blocks = [
        block
        for family, members in families.items()
        for block in (*members, *([family_figures[family]] if family in family_figures else []))
    ]
    report = out / "report.md"
    report.write_text(report_markdown(sources, blocks, stopping, timing, timing_figures))
    return report


def write_report(
    sources: list[str | Path],
    out: str | Path,
    mmlu_panels: str = "bucket",
    log_cost: bool = True,
    versus: tuple[str, ...] = (),
    figures: str = "all",
    draw: bool = True,
    runs: list[RunRow] | None = None,
) -> Path:
    """Write the tables of the module docstring, ``report.md`` and the ``figures`` (one of
    :data:`FIGURES`) into ``out``, from the runs of ``sources`` (sweep folders and results stores;
    ``runs``: their rows, if already read).  Without ``draw`` the figures are named in
    ``report.md`` but not drawn (the tables alone, fast).  Returns the path of ``report.md``.

    In three steps: the runs are grouped into panels and their tables computed as numbers
    (:mod:`gittinseval.results.panels`), the figures drawn (:func:`draw_figures`) and the
    tables written (:func:`write_markdown`).
    """
    if figures not in FIGURES:
        raise ValueError(f"figures must be one of {', '.join(FIGURES)}, got {figures!r}")
    if runs is None:
        runs = [row for source in sources for row in load_rows(source)]
    tables = panel_tables(runs, mmlu_panels, versus)
    _check_versus(versus, tables)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    family_figures, timing_figures = ({}, []) if figures == "none" else draw_figures(
        by_family(tables), out, log_cost, timing=figures in ("all", "timing"), draw=draw, regret=figures != "timing"
    )
    report = write_markdown(sources, tables, family_figures, timing_figures, out)
    write_summary_tables([row.summary for row in runs], out, report)
    return report


def _check_versus(versus: tuple[str, ...], tables: list[PanelTables]) -> None:
    """Refuse a ``versus`` label that no curve has: its paired tables would be left out without a word."""
    present = list(dict.fromkeys(label for table in tables for label in table.panel.curves))
    unknown = [label for label in versus if label not in present]
    if unknown:
        raise ValueError(
            f"--versus {', '.join(map(repr, unknown))}: no runs of that method; the methods present: "
            f"{', '.join(present) or 'none'} (give one of them, quoted if it has spaces)"
        )


@dataclass(frozen=True)
class SummaryTable:
    """A table of what the runs' summaries carry: ``rows`` reads its numbers off the summaries and ``text``
    writes them, under the heading ``title`` at the end of ``report.md`` and alone in the file ``file``.
    Rows that are empty (no run carries what the table needs) give no table.

    With ``keyed``, ``rows`` gives one table per key (a family, or a family and a model): the ``{}`` of
    ``title`` take the key's parts, those of ``file`` the parts as :func:`slug` writes them."""

    title: str
    file: str
    rows: Callable[[Sequence[dict]], Any]
    text: Callable[[Any], str]
    keyed: bool = False


def _markdown(cells: Callable[[Any], list[dict[str, str]]]) -> Callable[[Any], str]:
    return lambda rows: markdown_table(cells(rows))


SUMMARY_TABLES = (
    SummaryTable("How sure the final recommendations were", "certificate.md", certificates.certificate_rows,
                 _markdown(certificate_cells)),
    SummaryTable("Where the money went", "spend.md", spend.spend_rows, _markdown(spend_cells)),
    SummaryTable("Where the money went, by price decile", "price_deciles.md", price_deciles.price_decile_rows,
                 _markdown(price_decile_cells)),
    SummaryTable("How GittinsEval-EB learned its prior", "prior_fit.md", prior_fit.prior_fit_rows,
                 _markdown(prior_fit_cells)),
    SummaryTable("Calibration on {}", "calibration_{}.md", calibration.calibration_rows, _markdown(calibration_cells),
                 keyed=True),
    SummaryTable("Stated against observed on {}", "reliability_{}.md", calibration.reliability_rows,
                 _markdown(reliability_cells), keyed=True),
    SummaryTable("The confidence stop", "confidence_stop.md", confidence_stop.confidence_stop_rows,
                 _markdown(confidence_stop_cells)),
    # A model-comparison store (runs with model_certificates), from here on.
    SummaryTable("Verdicts per family", "models_verdicts.md", certificate_models.verdicts, verdict_markdown),
    SummaryTable("Calibration of each model", "models_calibration.md", certificate_models.calibration_rows,
                 _markdown(model_calibration_cells)),
    SummaryTable("The confidence stop under each model", "models_stops.md", certificate_models.stop_rows,
                 _markdown(model_stop_cells)),
    SummaryTable("Recommending by each model's posterior", "models_regret.md", certificate_models.regret_rows,
                 _markdown(model_regret_cells)),
    SummaryTable("Stated against observed on {}, {}", "models_reliability_{}_{}.md",
                 calibration.model_reliability_rows, _markdown(reliability_cells), keyed=True),
)
"""Every summary table, in the order of ``report.md``: adding one is adding its entry."""


def write_summary_tables(summaries: list[dict], out: Path, report: Path) -> None:
    """The tables of :data:`SUMMARY_TABLES` that the runs' summaries give, each in its file in ``out`` and at
    the end of ``report``."""
    sections = []
    for table in SUMMARY_TABLES:
        numbers = table.rows(summaries)
        for key, rows in numbers.items() if table.keyed else [((), numbers)]:
            if rows:
                parts = key if isinstance(key, tuple) else (key,)
                sections.append((table.title.format(*parts), table.file.format(*map(slug, parts)), table.text(rows)))
    with report.open("a") as text:
        for title, name, table_text in sections:
            (out / name).write_text(table_text)
            text.write(f"\n## {title}\n\n" + table_text)
