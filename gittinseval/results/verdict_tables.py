"""The verdicts as the results pages show them: the rule, a one-screen summary, a table per page and the evidence.

:func:`write_verdicts` judges every claim of ``claims.yaml`` (:mod:`gittinseval.results.verdicts`) from
the committed stores and writes into ``docs/figures/verdicts/``:

- ``rule.md``: the rule, stated once (the reproduction index includes it), with the rule's SE multiple;
- ``summary.md``: one row per claim, its page and verdict, and how many cells held, were level or were
  against on real and on stand-in data (the index's summary);
- ``page_<page>.md``: the claims a page judges, each with the paper's words, its test and its verdict;
- ``claim_<name>.md``: the evidence of one claim under its statement and verdict, one row per panel and
  comparison, one column per share of the cost (or one for a measure without shares): the estimate,
  ``mean ± SE``, and its outcome.
"""

from __future__ import annotations

from pathlib import Path

from gittinseval.results.manifest import StoreReport
from gittinseval.results.stats import Estimate
from gittinseval.results.tables import EMPTY, estimate_cell, markdown_table
from gittinseval.results.verdicts import (
    AGAINST,
    HOLDS,
    LEVEL,
    NO_STORE,
    NOT_REPRODUCED,
    PARTIAL,
    REPRODUCED,
    SE_MULTIPLE,
    STAND_IN_ONLY,
    Claim,
    Judgement,
    judge_all,
    read_claims,
)
from gittinseval.sim.results_store import RunRow, load_rows

__all__ = ["VERDICTS_DIR", "evidence_cells", "page_cells", "rule_markdown", "summary_cells", "write_verdicts"]

VERDICTS_DIR = Path("docs", "figures", "verdicts")

_DIRECTION = {"lower": "lower than", "higher": "higher than", "level_or_lower": "level with or below",
              "level": "level with"}
_DIGITS = {"regret": 4, "stop": 3, "stop_within": 3, "wall_time": 3}
_MEASURE = {"stop": "stop cost (% of the exhaustive cost; no stop: the budget's end)",
            "wall_time": "wall time per run (s)"}


def rule_markdown() -> str:
    """The rule in words, for the reproduction index: what a cell's outcome and a claim's verdict mean."""
    k = f"{SE_MULTIPLE:g} SE"
    return "\n".join([
        "A claim of the paper is judged as a comparison: the methods it names against the other methods it "
        "names (or against a level), in a direction (lower, higher, level with or below, level with), of one "
        "value per run: the simple regret at stated shares of the exhaustive cost, the cost at which the "
        "stopping signal fired (its budget's end where it did not), whether it fired within a window of cost, "
        "or the wall time. Each panel "
        "(benchmark family and cost mode) of the stores the claim names, compared method and share of the "
        "cost is one *cell*. Its estimate is the paired difference over the runs that share a benchmark and "
        "seed (or the mean minus the level), its SE clustered by seed.",
        "",
        f"- A cell **holds** when the estimate lies in the claim's direction by more than {k}, is **against** "
        f"when it lies the other way by more than {k}, and is **level** otherwise. *Level with or below* holds "
        f"unless the method is above by more than {k}; *level with* holds within {k}. A cell without values "
        "(a BO method still in its random initial design) is left out.",
        f"- **{REPRODUCED}**: every cell holds, and some cell is on real data (the real matrices, or MMLU's "
        "real row sums).",
        f"- **{STAND_IN_ONLY}**: every stand-in cell holds, but the claim has no real cell, or a real cell "
        "that does not hold.",
        f"- **{PARTIAL}**: some cell holds, and neither of the above.",
        f"- **{NOT_REPRODUCED}**: no cell holds.",
        "",
        "Each claim is one entry of `docs/results/claims.yaml`: the paper's words, the page that judges it, "
        "its methods, stores, panels, shares of the cost and direction, and how the test reads words the "
        "paper leaves open (*near-zero*, *typically*). `make results` writes every verdict from the stores.",
        "",
    ])


def _counts(judgement: Judgement, stand_in: bool) -> str:
    counts = judgement.count(stand_in)
    if not any(counts.values()):
        return EMPTY
    return f"{counts[HOLDS]} hold, {counts[LEVEL]} level, {counts[AGAINST]} against"


def _verdict(judgement: Judgement) -> str:
    missing = "" if judgement.verdict == NO_STORE or not judgement.missing else (
        f" (no store yet: {', '.join(judgement.missing)})")
    return f"**{judgement.verdict}**{missing}"


def summary_cells(judgements: list[Judgement]) -> list[dict[str, str]]:
    """The summary: per claim, a link to its page, its verdict and its cells' outcomes by kind of data."""
    return [
        {
            "claim": f"[{j.claim.claim}]({j.claim.page}.md)",
            "verdict": _verdict(j),
            "real data": _counts(j, stand_in=False),
            "stand-in data": _counts(j, stand_in=True),
        }
        for j in judgements
    ]


def _measure(claim: Claim) -> str:
    if claim.measure == "regret":
        percents = sorted({p for test in claim.tests for p in test.percents})
        return f"regret at {', '.join(map(str, percents))} % of the cost"
    if claim.measure == "stop_within":
        low, high = claim.window
        return f"share of runs whose stopping signal fired within {low:g}–{high:g} % of the cost"
    return _MEASURE[claim.measure]


def _test_text(claim: Claim) -> str:
    parts = []
    for test in claim.tests:
        other = ", ".join(test.versus) if test.level is None else f"{test.level:g}"
        panels = "" if test.panels == ("*",) else f" (panels {', '.join(f'`{pattern}`' for pattern in test.panels)})"
        parts.append(f"{', '.join(test.methods)} {_DIRECTION[claim.direction]} {other}; "
                     f"{', '.join(test.reports)}{panels}")
    note = f" Read: {claim.note}." if claim.note else ""
    return f"{_measure(claim)}: " + "; ".join(parts) + "." + note


def page_cells(judgements: list[Judgement]) -> list[dict[str, str]]:
    """A page's verdict table: per claim, the paper's words, the test, the cells' outcomes and the verdict."""
    return [
        {
            "claim": j.claim.claim,
            "the paper": "beyond the paper" if j.claim.paper is None else f"“{j.claim.paper}”",
            "test": _test_text(j.claim),
            "real data": _counts(j, stand_in=False),
            "stand-in data": _counts(j, stand_in=True),
            "verdict": _verdict(j),
        }
        for j in judgements
    ]


def _estimate(estimate: Estimate | None, outcome: str | None, digits: int) -> str:
    if estimate is None:
        return EMPTY
    return f"{estimate_cell(estimate, estimate.n, digits)} {outcome or ''}".rstrip()


def evidence_cells(judgement: Judgement) -> list[dict[str, str]]:
    """A claim's evidence: per panel and comparison, the estimate and outcome of each cell."""
    claim = judgement.claim
    digits = _DIGITS[claim.measure]
    columns = sorted({cell.percent for cell in judgement.cells}, key=lambda p: -1 if p is None else p)
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for cell in judgement.cells:
        key = (cell.panel, f"{cell.method} − {cell.versus}")
        row = rows.setdefault(key, {"panel": cell.panel, "data": "stand-in" if cell.stand_in else "real",
                                    "comparison": key[1]} | {_column(claim, p): EMPTY for p in columns})
        row[_column(claim, cell.percent)] = _estimate(cell.estimate, cell.outcome, digits)
    return list(rows.values())


def _column(claim: Claim, percent: int | None) -> str:
    if percent is not None:
        return f"Δ regret @ {percent} %"
    if claim.measure == "stop_within":
        return "Δ share fired within the window"
    return "Δ " + _MEASURE[claim.measure].split(" (")[0]


def write_verdicts(
    results_dir: str | Path,
    reports: list[StoreReport],
    out: str | Path = VERDICTS_DIR,
    runs: dict[Path, list[RunRow]] | None = None,
) -> list[Path]:
    """Judge every claim of ``<results_dir>/claims.yaml`` from the manifest's ``reports`` and their stores
    (``runs``: their rows by store, if already read) and write the tables of the module docstring into
    ``out``; nothing without claims.  Returns the files."""
    claims = read_claims(results_dir)
    if not claims:
        return []
    stores = {report.store for report in reports}
    rows = {store: (runs or {}).get(store) or load_rows(store) for store in stores}
    judgements = judge_all(claims, reports, rows)
    written = {"rule.md": rule_markdown(), "summary.md": markdown_table(summary_cells(judgements))}
    for page in dict.fromkeys(j.claim.page for j in judgements):
        written[f"page_{page}.md"] = markdown_table(page_cells([j for j in judgements if j.claim.page == page]))
    for judgement in judgements:
        evidence = evidence_cells(judgement) or [{"store": f"no store yet: {name}"} for name in judgement.missing]
        caption = f"**{judgement.claim.claim}**: {_verdict(judgement)}.\n\n"
        written[f"claim_{judgement.claim.name}.md"] = caption + markdown_table(evidence)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in written.items():
        (out / name).write_text(text)
        paths.append(out / name)
    return paths
