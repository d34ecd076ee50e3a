"""The report's one markdown writer: the numbers of :mod:`gittinseval.results.panels` as text.

Every number of the report becomes text here and nowhere else.  An estimate
(:class:`~gittinseval.results.stats.Estimate`) is written ``mean ± SE``: its SE ``– (one seed)``
when it cannot be estimated, ``–`` for a column without values, and ``(n=k)`` after it when
it is over ``k`` values of a row that has more runs (or pairs).  Regrets have 4 decimals,
stop costs (% of the exhaustive cost) 3.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gittinseval.results.panels import CurveRow, PairedRow, PanelTables
from gittinseval.results.stats import Estimate

__all__ = [
    "OVERVIEW_PERCENTS",
    "Figure",
    "curve_cells",
    "estimate_cell",
    "markdown_table",
    "overview_cells",
    "overview_markdown",
    "paired_cells",
    "panel_markdown",
    "report_markdown",
]

# The overview's regret columns (% of the exhaustive cost), and that of its paired differences.
OVERVIEW_PERCENTS = (1, 2, 5)
OVERVIEW_PAIRED_PERCENT = 2
EMPTY = "–"
REPORT_INTRO = (
    "Simple regret after the last batch at or below each share of the exhaustive cost (mean ± SE over runs); "
    "stop cost and the regret at the stop over the runs whose stopping signal fired."
)


@dataclass(frozen=True)
class Figure:
    """A figure of the report: its title (the image's alt text) and its file, beside the markdown."""

    title: str
    path: Path


def estimate_cell(estimate: Estimate | None, total: int, digits: int = 4) -> str:
    """``mean ± SE`` of ``estimate`` (see the module docstring), in a row of ``total`` runs or pairs."""
    if estimate is None:
        return EMPTY
    spread = f"{EMPTY} (one seed)" if math.isnan(estimate.se) else f"{estimate.se:.{digits}f}"
    text = f"{estimate.mean:.{digits}f} ± {spread}"
    return text if estimate.n == total else f"{text} (n={estimate.n})"


def curve_cells(rows: Sequence[CurveRow]) -> list[dict[str, str]]:
    """The cells of a panel's table, one dict (column -> text) per :class:`~gittinseval.results.panels.CurveRow`."""
    return [
        {
            "method": row.label,
            "runs": str(row.runs),
            **{f"regret @ {percent}%": estimate_cell(regret, row.runs) for percent, regret in row.regret.items()},
            "stop cost %": estimate_cell(row.stop_cost, row.stopped, 3),
            "regret at stop": estimate_cell(row.stop_regret, row.stopped),
            "stopped": f"{row.stopped}/{row.runs}",
            "median wall s": f"{row.median_wall_s:.3g}",
        }
        for row in rows
    ]


def paired_cells(rows: Sequence[PairedRow]) -> list[dict[str, str]]:
    """The cells of a paired table, one dict per :class:`~gittinseval.results.panels.PairedRow`."""
    return [
        {
            f"method − {row.versus}": row.label,
            "pairs": str(row.pairs),
            **{f"Δ regret @ {p}%": estimate_cell(difference, row.pairs) for p, difference in row.difference.items()},
        }
        for row in rows
    ]


def _runs_cell(rows: Sequence[CurveRow]) -> str:
    counts = [row.runs for row in rows]
    return f"{counts[0]} each" if len(set(counts)) == 1 else ", ".join(f"{row.label} {row.runs}" for row in rows)


def overview_cells(tables: Sequence[PanelTables]) -> list[dict[str, str]]:
    """One row per panel of one cost mode: each method's regret at :data:`OVERVIEW_PERCENTS` and its
    stop cost (with how many of its runs stopped), and each paired difference at 2 %.

    A panel without some method of another has :data:`EMPTY` in that method's columns.
    """
    by_panel = []
    for table in tables:
        cells = {"panel": table.panel.name, "runs": _runs_cell(table.rows)}
        for percent in OVERVIEW_PERCENTS:
            cells |= {f"{percent} % {row.label}": estimate_cell(row.regret[percent], row.runs) for row in table.rows}
        cells |= {
            f"stop % {row.label}": f"{estimate_cell(row.stop_cost, row.stopped, 3)} ({row.stopped}/{row.runs})"
            for row in table.rows
        }
        for baseline, paired in table.paired.items():
            cells |= {
                f"{row.label} − {baseline} @ {OVERVIEW_PAIRED_PERCENT} %":
                    estimate_cell(row.difference[OVERVIEW_PAIRED_PERCENT], row.pairs)
                for row in paired
            }
        by_panel.append(cells)
    columns = list(dict.fromkeys(column for cells in by_panel for column in cells))
    return [{column: cells.get(column, EMPTY) for column in columns} for cells in by_panel]


def markdown_table(rows: Sequence[dict[str, str]]) -> list[str]:
    """The lines of a markdown table of ``rows`` (their keys, in the first row's order, are the header)."""
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row[column] for column in header) + " |" for row in rows]


def panel_markdown(table: PanelTables) -> str:
    """A panel's section: its title, its table and its tables of paired differences."""
    lines = [f"### {table.panel.title}", "", *markdown_table(curve_cells(table.rows))]
    for baseline, paired in table.paired.items():
        if paired:
            lines += ["", f"Paired differences against {baseline} (same benchmark and seed; negative: lower regret):"]
            lines += ["", *markdown_table(paired_cells(paired))]
    return "\n".join(lines) + "\n"


def overview_markdown(by_cost_mode: dict[str, list[PanelTables]]) -> str:
    """``overview.md``: one table per cost mode, one row per panel (:func:`overview_cells`)."""
    lines = ["# Overview", ""]
    for cost_mode, tables in by_cost_mode.items():
        lines += [f"## {cost_mode} cost", "", *markdown_table(overview_cells(tables)), ""]
    return "\n".join(lines)


def report_markdown(sources: Sequence[str | Path], blocks: Sequence[PanelTables | Figure]) -> str:
    """``report.md``: the sources, then ``blocks`` in order, each a panel's section or a figure."""
    lines = ["# GittinsEval report", "", "Sources: " + ", ".join(f"`{Path(source)}`" for source in sources), ""]
    lines += [REPORT_INTRO, ""]
    for block in blocks:
        lines += [f"![{block.title}]({block.path.name})" if isinstance(block, Figure) else panel_markdown(block), ""]
    return "\n".join(lines)
