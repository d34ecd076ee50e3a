"""The report's one markdown writer: the numbers of :mod:`gittinseval.results.panels` as text.

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
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

from gittinseval.results import certificate_models
from gittinseval.results.panels import TABLE_PERCENTS, CurveRow, PairedRow, PanelTables, StopRow
from gittinseval.results.stats import Estimate

__all__ = [
    "CALIBRATION_BINS",
    "CHECKPOINTS",
    "EMPTY",
    "IN_DESIGN",
    "TIMING_BASELINE",
    "Figure",
    "benchmark_family",
    "calibration_cells",
    "certificate_cells",
    "confidence_stop_cells",
    "estimate_cell",
    "markdown_table",
    "model_calibration_cells",
    "model_regret_cells",
    "model_reliability_cells",
    "model_stop_cells",
    "overview_cells",
    "overview_markdown",
    "paired_cells",
    "panel_markdown",
    "regret_cells",
    "reliability_cells",
    "report_markdown",
    "slug",
    "stop_cells",
    "timing_cells",
    "wilson_interval",
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
    """Every panel's regret at ``percent`` % side by side: one row per panel, one column per curve.

    A panel without some curve of another has :data:`EMPTY` in that curve's column.
    """
    by_panel = [
        {"panel": table.panel.name, "runs": _runs_cell(table.rows)}
        | {row.label: estimate_cell(row.regret[percent], row.runs, in_design=row.in_design[percent])
           for row in table.rows}
        for table in tables
    ]
    columns = list(dict.fromkeys(column for cells in by_panel for column in cells))
    return [{column: cells.get(column, EMPTY) for column in columns} for cells in by_panel]


def _by_benchmark_cost_and_label(summaries: Sequence[dict], field: str) -> dict[tuple[str, str, str], list[dict]]:
    """The summaries' ``field`` values that are set, grouped by (benchmark, cost mode, curve label)."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for summary in summaries:
        if summary.get(field) is not None:
            groups.setdefault((summary["benchmark"], summary["cost_mode"], summary["label"]), []).append(summary[field])
    return groups


def certificate_cells(summaries: Sequence[dict]) -> list[dict[str, str]]:
    """Per benchmark, cost mode and method, over its runs whose summary carries a ``certificate``: the mean
    P(best) and P(eps-best) of the final recommendation, and the coverage of its interval (the share of
    runs whose interval holds the recommended arm's full-benchmark mean, ``true_mean``).  No rows when no
    run carries one (runs made before certificates)."""
    groups = _by_benchmark_cost_and_label(summaries, "certificate")
    cells = []
    for (benchmark, cost_mode, label), certificates in sorted(groups.items()):
        covered = [c["lower"] <= c["true_mean"] <= c["upper"] for c in certificates]
        first = certificates[0]
        cells.append({
            "benchmark": benchmark,
            "cost": cost_mode,
            "method": label,
            "runs": str(len(certificates)),
            "P(best)": f"{sum(c['prob_best'] for c in certificates) / len(certificates):.3f}",
            f"P(within {first['eps']:g})": f"{sum(c['prob_eps_best'] for c in certificates) / len(certificates):.3f}",
            f"{100 * first['level']:g}% interval covers": f"{sum(covered) / len(covered):.3f}",
        })
    return cells


CHECKPOINTS = ("1pct", "2pct", "5pct", "10pct", "stop")
"""The keys of a summary's ``certificates`` (``checkpoint_certificates``), in the order the tables show them."""

CALIBRATION_BINS = (0.0, 0.05, 0.2, 0.4, 0.6, 0.8, 0.95, 1.0)
"""Edges of the bins of stated probability in :func:`reliability_cells`; the last bin holds 1."""


def benchmark_family(benchmark: str) -> str:
    """The benchmark family a calibration table pools: the name before ``/`` (``mmlu/anatomy`` -> ``mmlu``)."""
    return benchmark.split("/")[0]


def wilson_interval(hits: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a binomial share ``hits / n`` at ``level``:
    ``(p + z^2/2n -+ z sqrt(p (1 - p) / n + z^2 / 4n^2)) / (1 + z^2 / n)``, ``z = Phi^{-1}((1 + level) / 2)``.
    Unlike ``p -+ z SE`` it is not empty at 0 or ``n`` hits (``[0, z^2 / (n + z^2)]`` at 0)."""
    z = NormalDist().inv_cdf(0.5 + level / 2)
    share, z2 = hits / n, z * z
    centre = share + z2 / (2 * n)
    half = z * math.sqrt(share * (1 - share) / n + z2 / (4 * n * n))
    return max(0.0, (centre - half) / (1 + z2 / n)), min(1.0, (centre + half) / (1 + z2 / n))


def _share_cell(hits: Sequence[bool]) -> str:
    """The share of ``hits`` and its 95 % Wilson interval, the runs taken as independent."""
    low, high = wilson_interval(sum(hits), len(hits))
    return f"{sum(hits) / len(hits):.3f} [{low:.3f}, {high:.3f}]"


def _checkpoint_certificates(summaries: Sequence[dict]) -> dict[str, list[tuple[str, str, dict]]]:
    """Per benchmark family: (curve label, checkpoint, certificate) of every checkpoint certificate."""
    families: dict[str, list[tuple[str, str, dict]]] = {}
    for summary in summaries:
        for checkpoint, certificate in (summary.get("certificates") or {}).items():
            if certificate is not None:
                families.setdefault(benchmark_family(summary["benchmark"]), []).append(
                    (summary["label"], checkpoint, certificate)
                )
    return families


def calibration_cells(summaries: Sequence[dict]) -> dict[str, list[dict[str, str]]]:
    """Per benchmark family, one row per curve label and checkpoint (:data:`CHECKPOINTS`), over the runs
    with checkpoint certificates: how often the recommended arm's credible interval held its
    full-benchmark mean (``true_mean``), the mean stated P(best) beside the share of runs whose
    recommendation was a best arm (regret 0), and the mean stated P(eps-best) beside the share within
    ``eps`` (regret at most ``eps``); each share with its 95 % Wilson interval.  A calibrated
    certificate states a mean inside the interval of its share.  Empty when no run has checkpoint certificates."""
    tables = {}
    for family, certificates in sorted(_checkpoint_certificates(summaries).items()):
        groups: dict[tuple[str, str], list[dict]] = {}
        for label, checkpoint, certificate in certificates:
            groups.setdefault((label, checkpoint), []).append(certificate)
        rows = []
        for label, checkpoint in sorted(groups, key=lambda key: (key[0], CHECKPOINTS.index(key[1]))):
            group = groups[(label, checkpoint)]
            first = group[0]
            eps = first["eps"]
            rows.append({
                "method": label,
                "at": checkpoint.replace("pct", " %") if checkpoint != "stop" else "stopping signal",
                "runs": str(len(group)),
                f"{100 * first['level']:g} % interval covers": _share_cell(
                    [c["lower"] <= c["true_mean"] <= c["upper"] for c in group]
                ),
                "P(best) stated": f"{sum(c['prob_best'] for c in group) / len(group):.3f}",
                "best": _share_cell([c["regret"] == 0 for c in group]),
                f"P(within {eps:g}) stated": f"{sum(c['prob_eps_best'] for c in group) / len(group):.3f}",
                f"within {eps:g}": _share_cell([c["regret"] <= eps + 1e-12 for c in group]),
            })
        tables[family] = rows
    return tables


def reliability_cells(summaries: Sequence[dict]) -> dict[str, list[dict[str, str]]]:
    """Per benchmark family, the checkpoint certificates of every curve pooled into bins of stated
    probability (:data:`CALIBRATION_BINS`): for P(best) and for P(eps-best), how many certificates
    stated a probability in the bin, their mean, and the share of them whose recommendation was best
    (eps-best), with its 95 % Wilson interval.  Calibrated: the share matches the mean statement in every bin."""
    tables = {}
    edges = CALIBRATION_BINS
    for family, certificates in sorted(_checkpoint_certificates(summaries).items()):
        eps = certificates[0][2]["eps"]
        events = {
            "P(best)": [(c["prob_best"], c["regret"] == 0) for _, _, c in certificates],
            f"P(within {eps:g})": [(c["prob_eps_best"], c["regret"] <= eps + 1e-12) for _, _, c in certificates],
        }
        rows = []
        for low, high in zip(edges[:-1], edges[1:], strict=True):
            last = high == edges[-1]
            row = {"stated": f"[{low:g}, {high:g}{']' if last else ')'}"}
            for name, pairs in events.items():
                inside = [(p, hit) for p, hit in pairs if low <= p < high or (last and p == high)]
                row[f"{name}: n"] = str(len(inside))
                row[f"{name}: mean stated"] = f"{sum(p for p, _ in inside) / len(inside):.3f}" if inside else EMPTY
                row[f"{name}: observed"] = _share_cell([hit for _, hit in inside]) if inside else EMPTY
            rows.append(row)
        tables[family] = rows
    return tables


def confidence_stop_cells(summaries: Sequence[dict]) -> list[dict[str, str]]:
    """Per benchmark, cost mode and curve label, over the runs that recorded a confidence stop: how often
    it fired, the mean share of the exhaustive cost at which it fired, and the share of fired stops whose
    recommendation was *not* eps-best (regret above ``eps``) with its 95 % Wilson interval, against the
    ``delta = 1 - prob_eps_best`` the stop promises on benchmarks drawn from the prior."""
    groups = _by_benchmark_cost_and_label(summaries, "confidence_stop")
    rows = []
    for (benchmark, cost_mode, label), stops in sorted(groups.items()):
        fired = [stop for stop in stops if stop["step"] is not None]
        first = stops[0]
        rows.append({
            "benchmark": benchmark,
            "cost": cost_mode,
            "method": label,
            "runs": str(len(stops)),
            "fired": f"{len(fired)}/{len(stops)}",
            "mean stop (% of exhaustive)": f"{sum(s['cost_pct'] for s in fired) / len(fired):.3g}" if fired else EMPTY,
            f"not within {first['eps']:g} (δ = {1 - first['prob_eps_best']:.2g})": (
                _share_cell([stop["regret"] > first["eps"] + 1e-12 for stop in fired]) if fired else EMPTY
            ),
        })
    return rows


def _number(value: float, digits: int = 3) -> str:
    return EMPTY if math.isnan(value) else f"{value:.{digits}f}"


def model_calibration_cells(summaries: Sequence[dict]) -> list[dict[str, str]]:
    """:func:`~gittinseval.results.certificate_models.calibration_rows` as text: per family and model, the
    coverage (with its Wilson interval) and, of ``P(within eps)`` and ``P(best)``, the mean stated, the share
    that came true and the ECE; the anytime statement's runs with a false statement instead."""
    cells = []
    for row in certificate_models.calibration_rows(summaries):
        low, high = wilson_interval(row.covered, row.n)
        anytime = row.model == certificate_models.ANYTIME
        cells.append({
            "family": row.family,
            "model": row.model,
            "statements": str(row.n),
            "interval covers": f"{row.coverage:.3f} [{low:.3f}, {high:.3f}]",
            "P(within eps) stated": _number(row.within_stated),
            "came true": _number(row.within_observed),
            "ECE": _number(row.within_ece),
            "P(best) stated": _number(row.best_stated),
            "was best": _number(row.best_observed),
            "ECE ": _number(row.best_ece),
            "runs with a false statement": f"{row.violated_runs}/{row.runs} (δ = {row.delta:g})" if anytime else EMPTY,
        })
    return cells


def model_stop_cells(summaries: Sequence[dict]) -> list[dict[str, str]]:
    """:func:`~gittinseval.results.certificate_models.stop_rows` as text: per family and model, how often the
    stop fired, at what mean cost, and its wrong stops per run against the promised δ (± 2 SE)."""
    cells = []
    for row in certificate_models.stop_rows(summaries):
        low, high = wilson_interval(row.wrong, row.runs)
        cells.append({
            "family": row.family,
            "model": row.model,
            "runs": str(row.runs),
            "fired": f"{row.fired}/{row.runs}",
            "mean stop (% of exhaustive)": EMPTY if math.isnan(row.cost_pct) else f"{row.cost_pct:.3g}",
            "wrong stops per run": f"{row.wrong_per_run:.3f} [{low:.3f}, {high:.3f}]",
            "δ": f"{row.delta:g}",
            "within δ + 2 SE": "yes" if row.keeps_promise else "no",
        })
    return cells


def model_regret_cells(summaries: Sequence[dict]) -> list[dict[str, str]]:
    """:func:`~gittinseval.results.certificate_models.regret_rows` as text: per family, checkpoint and model,
    the regret of the model's LCB recommendation and its paired difference from the Gaussian surrogate's."""
    return [
        {
            "family": row.family,
            "at": row.checkpoint.replace("pct", " %"),
            "model": row.model,
            "regret of its LCB choice": estimate_cell(row.regret, 4),
            "minus the gaussian's (paired)": (
                EMPTY if row.versus_gaussian is None else estimate_cell(row.versus_gaussian, 4)
            ),
        }
        for row in certificate_models.regret_rows(summaries)
    ]


def model_reliability_cells(summaries: Sequence[dict]) -> dict[tuple[str, str], list[dict[str, str]]]:
    """Per family and model (not the anytime statement), :func:`reliability_cells` of the model's checkpoint
    statements."""
    tables: dict[tuple[str, str], list[dict[str, str]]] = {}
    models = sorted({model for s in summaries for model in (s.get("model_certificates") or {})})
    for model in models:
        restated = [
            {**s, "certificates": s["model_certificates"][model]}
            for s in summaries
            if model in (s.get("model_certificates") or {})
        ]
        for family, rows in reliability_cells(restated).items():
            tables[(family, model)] = rows
    return dict(sorted(tables.items()))


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
