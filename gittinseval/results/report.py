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

from collections import defaultdict
from pathlib import Path

from gittinseval.results.curves import aggregate_group
from gittinseval.results.panels import PanelTables, by_cost_mode, by_family, panels
from gittinseval.results.plotting import plot_panels, plot_wall_times
from gittinseval.results.tables import Figure, overview_markdown, panel_markdown, report_markdown
from gittinseval.sim.results_store import load_rows

__all__ = ["draw_figures", "write_markdown", "write_report"]


def draw_figures(
    families: dict[str, list[PanelTables]], out: Path, log_cost: bool = True
) -> tuple[dict[str, Figure], list[Figure]]:
    """Draw ``<family>.png`` per benchmark family (its cost modes' panels side by side, as in the
    paper) and ``timing_<cost mode>.png`` (wall time per run of every method and panel) into ``out``.

    Returns the family figures by family and the timing figures, in order of first appearance.
    """
    family_figures: dict[str, Figure] = {}
    wall_times: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(dict)
    for family, members in families.items():
        figure_panels = []
        for panel in (tables.panel for tables in members):
            wall_times[panel.cost_mode][panel.family_title] = {
                label: [run.summary["wall_time_s"] for run in runs] for label, runs in panel.curves.items()
            }
            curves = [aggregate_group(label, runs, log_grid=log_cost) for label, runs in panel.curves.items()]
            figure_panels.append((f"{panel.cost_mode} cost", curves))
        title = members[0].panel.family_title
        family_figures[family] = Figure(title, plot_panels(figure_panels, out / f"{family}.png", title, log_cost))
    timing = []
    for cost_mode, groups in wall_times.items():
        title = f"Wall time per run ({cost_mode} cost)"
        timing.append(Figure(title, plot_wall_times(groups, out / f"timing_{cost_mode}.png", title)))
    return family_figures, timing


def write_markdown(
    sources: list[str | Path],
    tables: list[PanelTables],
    families: dict[str, list[PanelTables]],
    family_figures: dict[str, Figure],
    timing_figures: list[Figure],
    out: Path,
) -> Path:
    """Write ``<panel>.md`` per panel, ``overview.md`` (``tables`` side by side per cost mode) and
    ``report.md`` (every family's tables, each followed by its figure, then the timing figures)."""
    for table in tables:
        (out / f"{table.panel.key}.md").write_text(panel_markdown(table))
    (out / "overview.md").write_text(overview_markdown(by_cost_mode(tables)))
    blocks = [block for family, members in families.items() for block in (*members, family_figures[family])]
    report = out / "report.md"
    report.write_text(report_markdown(sources, blocks + timing_figures))
    return report


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
    (every table) into ``out``, from the runs of ``sources`` (sweep folders and results stores).

    In three steps: the runs are grouped into panels and their tables computed as numbers
    (:mod:`gittinseval.results.panels`), the figures drawn (:func:`draw_figures`) and the
    tables written (:func:`write_markdown`).
    """
    runs = [row for source in sources for row in load_rows(source)]
    tables = [PanelTables.of(panel, versus) for panel in panels(runs, mmlu_panels)]
    families = by_family(tables)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    family_figures, timing_figures = draw_figures(families, out, log_cost)
    return write_markdown(sources, tables, families, family_figures, timing_figures, out)
