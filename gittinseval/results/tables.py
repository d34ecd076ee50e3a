"""The report's one markdown writer: the numbers of the panels and of the summary tables as text.

Every number of the report becomes text here and nowhere else.  An estimate
(:class:`~gittinseval.results.stats.Estimate`) is written ``mean ± SE``: its SE ``– (one seed)``
when it cannot be estimated, ``–`` for a column without values, and ``(n=k)`` after it when
it is over ``k`` values of a row that has more runs (or pairs).  A BO cell whose runs are
still in their random initial design is ``in design`` when all of them are, and names how
many were left out otherwise (``(n=k, m in design)``).  Regrets have 4 decimals, stop costs
(% of the exhaustive cost) 3, wall times 3 significant digits.

The tables are narrow, one row per curve: a panel's regret at each share of the budget
(:func:`regret_cells`) and its paired differences (:func:`paired_cells`); a store's stops
(:func:`stop_cells`, one block of rows per panel), wall times (:func:`timing_cells`, one
column per panel) and, per share of the budget, every panel's regret side by side
(:func:`overview_cells`, one column per curve).

The summary tables, of what the runs' summaries carry beside their regret, are the rows of
one module each: the final certificates (:mod:`~gittinseval.results.certificates`,
:func:`certificate_cells`), their calibration (:mod:`~gittinseval.results.calibration`,
:func:`calibration_cells` and :func:`reliability_cells`), the confidence stop
(:mod:`~gittinseval.results.confidence_stop`), the spend (:mod:`~gittinseval.results.spend`; by price decile,
:mod:`~gittinseval.results.price_deciles`),
the prior fits (:mod:`~gittinseval.results.prior_fit`) and the posterior models compared
(:mod:`~gittinseval.results.certificate_models`, the ``model_*`` cells).  A share of runs is
written with its 95 % Wilson interval (:func:`share_cell`), a stated probability or a share
without interval with 3 decimals.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gittinseval.results import certificate_models
from gittinseval.results.calibration import CheckpointCalibration, ReliabilityBin
from gittinseval.results.certificates import CertificateRow
from gittinseval.results.confidence_stop import ConfidenceStopRow
from gittinseval.results.panels import TABLE_PERCENTS, CurveRow, PairedRow, PanelTables, StopRow
from gittinseval.results.price_deciles import PriceDecileRow
from gittinseval.results.prior_fit import PriorFitRow, Spread
from gittinseval.results.spend import SpendRow, SpendShare
from gittinseval.results.stats import Estimate, Share

__all__ = [
    "EMPTY",
    "IN_DESIGN",
    "TIMING_BASELINE",
    "Figure",
    "calibration_cells",
    "certificate_cells",
    "confidence_stop_cells",
    "estimate_cell",
    "markdown_table",
    "model_calibration_cells",
    "model_regret_cells",
    "model_stop_cells",
    "overview_cells",
    "overview_markdown",
    "paired_cells",
    "panel_markdown",
    "price_decile_cells",
    "prior_fit_cells",
    "regret_cells",
    "reliability_cells",
    "report_markdown",
    "share_cell",
    "slug",
    "spend_cells",
    "stop_cells",
    "timing_cells",
    "verdict_markdown",
]

EMPTY = "–"
IN_DESIGN = "in design"
# Wall times are also given as a multiple of this curve's, where a panel has it (the paper's
# timing claim: "close to UCB-E and well below LRF").
TIMING_BASELINE = "UCB-E"
REPORT_INTRO = (
    "Simple regret after the last batch at or below each share of the exhaustive cost (mean ± SE over runs, "
    "SE clustered by seed); configuration-level BO only after its random initial design. Stop cost and the "
    "regret at the stop over the runs whose stopping signal fired."
)


@dataclass(frozen=True)
class Figure:
    """A figure of the report: its title (the image's alt text) and its file, beside the markdown."""

    title: str
    path: Path


def estimate_cell(estimate: Estimate | None, total: int, digits: int = 4, in_design: int = 0) -> str:
    """``mean ± SE`` of ``estimate`` (see the module docstring), in a row of ``total`` runs or pairs of
    which ``in_design`` were left out in their initial design."""
    if in_design and in_design == total:
        return IN_DESIGN
    if estimate is None:
        return EMPTY
    spread = f"{EMPTY} (one seed)" if math.isnan(estimate.se) else f"{estimate.se:.{digits}f}"
    notes = ([f"n={estimate.n}"] if estimate.n != total else []) + ([f"{in_design} in design"] if in_design else [])
    text = f"{estimate.mean:.{digits}f} ± {spread}"
    return f"{text} ({', '.join(notes)})" if notes else text


def _seconds(estimate: Estimate) -> str:
    spread = f"{EMPTY} (one seed)" if math.isnan(estimate.se) else f"{estimate.se:.2g}"
    return f"{estimate.mean:.3g} ± {spread}"


def regret_cells(rows: Sequence[CurveRow]) -> list[dict[str, str]]:
    """A panel's regret table: per curve, its runs and its regret at each share of :data:`TABLE_PERCENTS`."""
    return [
        {
            "method": row.label,
            "runs": str(row.runs),
            **{f"regret @ {p} %": estimate_cell(row.regret[p], row.runs, in_design=row.in_design[p])
               for p in TABLE_PERCENTS},
        }
        for row in rows
    ]


def paired_cells(rows: Sequence[PairedRow]) -> list[dict[str, str]]:
    """A paired table: per curve, its number of pairs and the paired difference at each share of the budget."""
    return [
        {
            f"method − {row.versus}": row.label,
            "pairs": str(row.pairs),
            **{f"Δ regret @ {p} %": estimate_cell(row.difference[p], row.pairs, in_design=row.in_design[p])
               for p in TABLE_PERCENTS},
        }
        for row in rows
    ]


def _stop_cells(row: StopRow, with_bo: bool) -> dict[str, str]:
    cells = {
        "method": row.label,
        "stopped": f"{row.stopped}/{row.runs}",
        "stop cost %": estimate_cell(row.stop_cost, row.stopped, 3),
        "regret at stop": estimate_cell(row.stop_regret, row.stopped),
    }
    if with_bo:
        first = row.first_stops
        cells |= {
            "earlier than BO": EMPTY if first is None else f"{first.earlier}/{first.pairs}",
            "stop % − BO's": EMPTY if first is None or first.difference is None
            else estimate_cell(first.difference, first.pairs, 3),
        }
    return cells


def stop_cells(tables: Sequence[PanelTables]) -> list[dict[str, str]]:
    """The stopping table of a report: per panel, one row per curve with a stopping signal.

    Its stop rate (``stopped``), mean stop cost and the regret of the recommendation at the
    stop; in panels with BO, for each non-BO curve, in how many of the (benchmark, seed)
    pairs where either stopped its signal fired before BO's first stop (``earlier than BO``),
    and its stop cost minus BO's first over the pairs where both stopped (``stop % − BO's``).
    """
    with_bo = any(row.first_stops is not None for table in tables for row in table.stops)
    return [{"panel": table.panel.title, **_stop_cells(row, with_bo)} for table in tables for row in table.stops]


def timing_cells(tables: Sequence[PanelTables]) -> list[dict[str, str]]:
    """Wall time per run, one row per curve and one column per panel (of one cost mode).

    Each cell is the mean ± SE of the runs' wall time in seconds and, in a panel with a
    :data:`TIMING_BASELINE` curve, the ratio of the two means.
    """
    labels = list(dict.fromkeys(row.label for table in tables for row in table.rows))
    rows = []
    for label in labels:
        cells = {"method": label}
        for table in tables:
            by_label = {row.label: row for row in table.rows}
            row, baseline = by_label.get(label), by_label.get(TIMING_BASELINE)
            if row is None:
                cells[table.panel.name] = EMPTY
                continue
            text = f"{_seconds(row.wall_time)} s"
            if baseline is not None and label != TIMING_BASELINE:
                text += f" ({row.wall_time.mean / baseline.wall_time.mean:.3g}× {TIMING_BASELINE})"
            cells[table.panel.name] = text
        rows.append(cells)
    return rows


def _runs_cell(rows: Sequence[CurveRow]) -> str:
    counts = [row.runs for row in rows]
    return f"{counts[0]} each" if len(set(counts)) == 1 else ", ".join(f"{row.label} {row.runs}" for row in rows)


def overview_cells(tables: Sequence[PanelTables], percent: int) -> list[dict[str, str]]:
    """Every panel's regret at ``percent`` % side by side: one row per panel, one column per curve; the first
    column's header names the share, so that the table says what it shows wherever it is included.

    A panel without some curve of another has :data:`EMPTY` in that curve's column.
    """
    by_panel = [
        {f"panel (regret @ {percent} %)": table.panel.name, "runs": _runs_cell(table.rows)}
        | {row.label: estimate_cell(row.regret[percent], row.runs, in_design=row.in_design[percent])
           for row in table.rows}
        for table in tables
    ]
    columns = list(dict.fromkeys(column for cells in by_panel for column in cells))
    return [{column: cells.get(column, EMPTY) for column in columns} for cells in by_panel]


def share_cell(share: Share) -> str:
    """A share and its 95 % Wilson interval: ``0.500 [0.150, 0.850]``."""
    low, high = share.interval
    return f"{share.value:.3f} [{low:.3f}, {high:.3f}]"


def _checkpoint_name(checkpoint: str) -> str:
    return checkpoint.replace("pct", " %") if checkpoint != "stop" else "stopping signal"


def certificate_cells(rows: Sequence[CertificateRow]) -> list[dict[str, str]]:
    """``certificate.md``: per benchmark, cost mode and method, the mean P(best) and P(eps-best) of the final
    recommendation and the coverage of its interval."""
    return [
        {
            "benchmark": row.benchmark,
            "cost": row.cost_mode,
            "method": row.label,
            "runs": str(row.runs),
            "P(best)": f"{row.prob_best:.3f}",
            f"P(within {row.eps:g})": f"{row.prob_eps_best:.3f}",
            f"{100 * row.level:g}% interval covers": f"{row.covered.value:.3f}",
        }
        for row in rows
    ]


def calibration_cells(rows: Sequence[CheckpointCalibration]) -> list[dict[str, str]]:
    """A family's ``calibration_<family>.md``: per method and checkpoint, the coverage, and each stated
    probability's mean beside the share of runs in which its event happened, each share with its interval."""
    return [
        {
            "method": row.label,
            "at": _checkpoint_name(row.checkpoint),
            "runs": str(row.runs),
            f"{100 * row.level:g} % interval covers": share_cell(row.covered),
            "P(best) stated": f"{row.prob_best:.3f}",
            "best": share_cell(row.best),
            f"P(within {row.eps:g}) stated": f"{row.prob_eps_best:.3f}",
            f"within {row.eps:g}": share_cell(row.within),
        }
        for row in rows
    ]


def reliability_cells(rows: Sequence[ReliabilityBin]) -> list[dict[str, str]]:
    """A family's ``reliability_<family>.md``: per bin of stated probability, for P(best) and P(eps-best), how
    many statements fell in it, their mean and the share that came true (:data:`EMPTY` in an empty bin)."""
    cells = []
    for row in rows:
        cell = {"stated": f"[{row.low:g}, {row.high:g}{']' if row.closed else ')'}"}
        for name, statements in (("P(best)", row.best), (f"P(within {row.eps:g})", row.within)):
            some = statements.observed.n > 0
            cell[f"{name}: n"] = str(statements.observed.n)
            cell[f"{name}: mean stated"] = f"{statements.stated:.3f}" if some else EMPTY
            cell[f"{name}: observed"] = share_cell(statements.observed) if some else EMPTY
        cells.append(cell)
    return cells


def confidence_stop_cells(rows: Sequence[ConfidenceStopRow]) -> list[dict[str, str]]:
    """``confidence_stop.md``: per benchmark, cost mode and method, how often the stop fired, how early, and the
    share of its stops not within eps against the promised δ (:data:`EMPTY` when none fired)."""
    return [
        {
            "benchmark": row.benchmark,
            "cost": row.cost_mode,
            "method": row.label,
            "runs": str(row.runs),
            "fired": f"{row.fired}/{row.runs}",
            "mean stop (% of exhaustive)": f"{row.cost_pct:.3g}" if row.fired else EMPTY,
            f"not within {row.eps:g} (δ = {row.delta:.2g})": share_cell(row.wrong) if row.fired else EMPTY,
        }
        for row in rows
    ]


def _spend_cell(share: SpendShare, runs: int) -> str:
    """A mean share, with how many runs it is over when some of the row's ``runs`` have none."""
    cell = EMPTY if not share.runs else f"{share.mean:.3f}"
    return cell + (f" ({share.runs} runs)" if 0 < share.runs < runs else "")


def spend_cells(rows: Sequence[SpendRow]) -> list[dict[str, str]]:
    """``spend.md``: per benchmark, cost mode and curve, the mean share of the spend on the arms guessed cheap,
    those guessed dear and the best arms."""
    return [
        {
            "benchmark": row.benchmark,
            "cost": row.cost_mode,
            f"share of the spend to {row.percent} %": row.curve,
            "guessed cheap": _spend_cell(row.cheap, row.runs),
            "guessed dear": _spend_cell(row.dear, row.runs),
            f"the {row.top} best": _spend_cell(row.best, row.runs),
            "runs": str(row.runs),
        }
        for row in rows
    ]


def price_decile_cells(rows: Sequence[PriceDecileRow]) -> list[dict[str, str]]:
    """``price_deciles.md``: per benchmark, cost mode and curve, the mean share of the spend on each price decile
    (D1 the cheapest tenth of the arms, ``–`` a decile of no arm) and the decile of the best arm."""
    return [
        {
            "benchmark": row.benchmark,
            "cost": row.cost_mode,
            f"share of the spend to {row.percent} %": row.label + ("" if row.lam is None else f" λ={row.lam:g}"),
            **{f"D{d}": EMPTY if math.isnan(share) else f"{100 * share:.1f} %"
               for d, share in enumerate(row.shares, start=1)},
            "best arm in": f"D{row.best_decile}",
            "runs": str(row.runs),
        }
        for row in rows
    ]


def _spread_cell(spread: Spread | None, spec: str) -> str:
    """``median [min, max]``, each written with the format ``spec``."""
    if spread is None:
        return EMPTY
    return f"{spread.median:{spec}} [{spread.low:{spec}}, {spread.high:{spec}}]"


def prior_fit_cells(rows: Sequence[PriorFitRow]) -> list[dict[str, str]]:
    """``prior_fit.md``: per benchmark family and cost mode, the counts of table refreshes, tables and prior fits
    of its GittinsEval-EB runs, and their final prior against the arm population (how many runs were judged,
    when not all)."""
    return [
        {
            "benchmark": row.family,
            "cost": row.cost_mode,
            "EB runs": str(row.runs) + (f" ({row.judged} judged)" if 0 < row.judged < row.runs else ""),
            "table refreshes": _spread_cell(row.table_refreshes, "g"),
            "tables built": _spread_cell(row.tables_computed, "g"),
            "prior fits": _spread_cell(row.prior_fits, "g"),
            "final μ₀ − mean of arm means": _spread_cell(row.prior_mean_offset, "+.3f"),
            "final v₀ estimate / variance of arm means": _spread_cell(row.prior_var_ratio, ".2f"),
        }
        for row in rows
    ]


def _number(value: float, digits: int = 3) -> str:
    return EMPTY if math.isnan(value) else f"{value:.{digits}f}"


def model_calibration_cells(rows: Sequence[certificate_models.CalibrationRow]) -> list[dict[str, str]]:
    """``models_calibration.md``: per family and model, the coverage (with its Wilson interval) and, of
    ``P(within eps)`` and ``P(best)``, the mean stated, the share that came true and the ECE; the anytime
    statement's runs with a false statement instead."""
    cells = []
    for row in rows:
        anytime = row.model == certificate_models.ANYTIME
        cells.append({
            "family": row.family,
            "model": row.model,
            "statements": str(row.n),
            "interval covers": share_cell(Share(row.covered, row.n)),
            "P(within eps) stated": _number(row.within_stated),
            "came true": _number(row.within_observed),
            "ECE": _number(row.within_ece),
            "P(best) stated": _number(row.best_stated),
            "was best": _number(row.best_observed),
            "ECE ": _number(row.best_ece),
            "runs with a false statement": f"{row.violated_runs}/{row.runs} (δ = {row.delta:g})" if anytime else EMPTY,
        })
    return cells


def model_stop_cells(rows: Sequence[certificate_models.StopRow]) -> list[dict[str, str]]:
    """``models_stops.md``: per family and model, how often the stop fired, at what mean cost, and its wrong stops
    per run against the promised δ (± 2 SE)."""
    return [
        {
            "family": row.family,
            "model": row.model,
            "runs": str(row.runs),
            "fired": f"{row.fired}/{row.runs}",
            "mean stop (% of exhaustive)": EMPTY if math.isnan(row.cost_pct) else f"{row.cost_pct:.3g}",
            "wrong stops per run": share_cell(Share(row.wrong, row.runs)),
            "δ": f"{row.delta:g}",
            "within δ + 2 SE": "yes" if row.keeps_promise else "no",
        }
        for row in rows
    ]


def model_regret_cells(rows: Sequence[certificate_models.RegretRow]) -> list[dict[str, str]]:
    """``models_regret.md``: per family, checkpoint and model, the regret of the model's LCB recommendation and
    its paired difference from the Gaussian surrogate's."""
    return [
        {
            "family": row.family,
            "at": row.checkpoint.replace("pct", " %"),
            "model": row.model,
            # Every run states every model, so a row's estimates are over all its runs: no (n=k) note.
            "regret of its LCB choice": estimate_cell(row.regret, row.regret.n),
            "minus the gaussian's (paired)": (
                EMPTY if row.versus_gaussian is None else estimate_cell(row.versus_gaussian, row.versus_gaussian.n)
            ),
        }
        for row in rows
    ]


def verdict_markdown(verdicts: dict[str, str]) -> str:
    """``models_verdicts.md``: one bullet per family, its sentence
    (:func:`~gittinseval.results.certificate_models.verdicts`)."""
    return "\n".join(f"- **{family}**: {sentence}" for family, sentence in verdicts.items()) + "\n"


def markdown_table(rows: Sequence[dict[str, str]]) -> str:
    """A markdown table of ``rows`` (their keys, in the first row's order, are the header), one line each."""
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row[column] for column in header) + " |" for row in rows]) + "\n"


def slug(label: str) -> str:
    """A curve label as part of a file name: ``GittinsEval-S λ=0.0001`` -> ``gittinseval-s-0.0001``."""
    return re.sub(r"[^0-9a-z.]+", "-", label.lower()).strip("-")


def panel_markdown(table: PanelTables) -> str:
    """A panel's section of the report: its title, its regret table and its tables of paired differences."""
    lines = [f"### {table.panel.title}", "", markdown_table(regret_cells(table.rows))]
    for baseline, paired in table.paired.items():
        if paired:
            lines += [f"Paired differences against {baseline} (same benchmark and seed; negative: lower regret):", ""]
            lines += [markdown_table(paired_cells(paired))]
    return "\n".join(lines)


def overview_markdown(by_cost_mode: dict[str, list[PanelTables]]) -> str:
    """``overview.md``: per cost mode and share of the budget, every panel's regret side by side."""
    lines = ["# Overview", ""]
    for cost_mode, tables in by_cost_mode.items():
        for percent in TABLE_PERCENTS:
            lines += [f"## {cost_mode} cost, regret @ {percent} %", "", markdown_table(overview_cells(tables, percent))]
    return "\n".join(lines)


def report_markdown(
    sources: Sequence[str | Path],
    blocks: Sequence[PanelTables | Figure],
    stopping: str | None,
    timing: dict[str, str],
    timing_figures: Sequence[Figure],
) -> str:
    """``report.md``: the sources, then ``blocks`` in order (each a panel's section or a figure), the
    stopping table (if any curve has a stopping signal), and the wall-time tables by cost mode and figures."""
    lines = ["# GittinsEval report", "", "Sources: " + ", ".join(f"`{Path(source)}`" for source in sources), ""]
    lines += [REPORT_INTRO, ""]
    for block in blocks:
        lines += [f"![{block.title}]({block.path.name})" if isinstance(block, Figure) else panel_markdown(block), ""]
    if stopping:
        lines += ["## Stopping", "", stopping]
    lines += ["## Wall time per run", ""]
    for cost_mode, text in timing.items():
        lines += [f"### {cost_mode} cost", "", text]
    lines += [f"![{figure.title}]({figure.path.name})\n" for figure in timing_figures]
    return "\n".join(lines)
