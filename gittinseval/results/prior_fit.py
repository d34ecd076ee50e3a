"""How GittinsEval-EB learned its prior: the fits, table refreshes and final prior of its runs.

A GittinsEval-EB run (``prior=empirical``) records in its diagnostics the prior it ended
with, ``N(mu_0, v_0)`` with the unsnapped estimate of ``v_0``, and how many prior fits,
root-table refreshes and root tables it made.  Per benchmark family (``mmlu/anatomy`` ->
``mmlu``) and cost mode, one row: each count's median [min, max] over the runs, and the
final prior against the run's arm population (``arm_population``, the mean ``m`` and
variance ``s^2`` of its ``K`` true arm means):

    mu_0 - m,        v_0 estimate / s^2,

each as median [min, max] over the runs that record a population of unequal arms.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gittinseval.results.pooling import benchmark_family

__all__ = ["PriorFitRow", "Spread", "prior_fit_rows"]


@dataclass(frozen=True)
class Spread:
    """The ``median``, the smallest (``low``) and the largest (``high``) of a quantity over runs."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        values = np.asarray(values, dtype=np.float64)
        return cls(float(np.median(values)), float(values.min()), float(values.max()))


@dataclass(frozen=True)
class PriorFitRow:
    """One benchmark ``family`` and cost mode, over its ``runs`` GittinsEval-EB runs: the spread of the counts of
    root-table refreshes, root tables built and prior fits; and, over the ``judged`` runs that record a
    population of unequal arms, the spread of ``mu_0 - m`` (``prior_mean_offset``) and of ``v_0 estimate / s^2``
    (``prior_var_ratio``), ``None`` when no run is judged (the module docstring)."""

    family: str
    cost_mode: str
    runs: int
    judged: int
    table_refreshes: Spread
    tables_computed: Spread
    prior_fits: Spread
    prior_mean_offset: Spread | None
    prior_var_ratio: Spread | None


def prior_fit_rows(summaries: Sequence[dict]) -> list[PriorFitRow]:
    """The rows of the ``summaries`` whose diagnostics count prior fits (GittinsEval-EB runs; none: ``[]``), one
    per benchmark family and cost mode, in that order."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for summary in summaries:
        if "prior_fits" in (summary.get("diagnostics") or {}):
            groups[(benchmark_family(summary["benchmark"]), summary["cost_mode"])].append(summary)
    rows = []
    for (family, cost_mode), group in sorted(groups.items()):
        diagnostics = [summary["diagnostics"] for summary in group]
        # A run without the population (older stores), or whose arms are all equal, cannot be judged.
        judged = [summary for summary in group if (summary.get("arm_population") or {}).get("var", 0) > 0]
        offsets = [s["diagnostics"]["final_prior_mean"] - s["arm_population"]["mean"] for s in judged]
        ratios = [s["diagnostics"]["final_prior_var_estimate"] / s["arm_population"]["var"] for s in judged]
        rows.append(PriorFitRow(
            family=family,
            cost_mode=cost_mode,
            runs=len(group),
            judged=len(judged),
            table_refreshes=Spread.of([d["table_refreshes"] for d in diagnostics]),
            tables_computed=Spread.of([d["tables_computed"] for d in diagnostics]),
            prior_fits=Spread.of([d["prior_fits"] for d in diagnostics]),
            prior_mean_offset=Spread.of(offsets) if judged else None,
            prior_var_ratio=Spread.of(ratios) if judged else None,
        ))
    return rows
