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

import numpy as np

from gittinseval.results.tables import EMPTY, benchmark_family

__all__ = ["prior_fit_cells"]


def _spread(values: Sequence[float], spec: str) -> str:
    """``median [min, max]`` of ``values``, each written with the format ``spec``."""
    values = np.asarray(values, dtype=np.float64)
    return f"{np.median(values):{spec}} [{values.min():{spec}}, {values.max():{spec}}]"


def prior_fit_cells(summaries: Sequence[dict]) -> list[dict[str, str]]:
    """The rows of the prior-fit table of the ``summaries`` whose diagnostics count prior fits
    (GittinsEval-EB runs; none: ``[]``), one per benchmark family and cost mode."""
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
        rows.append({
            "benchmark": family,
            "cost": cost_mode,
            "EB runs": str(len(group)),
            "table refreshes": _spread([d["table_refreshes"] for d in diagnostics], "g"),
            "tables built": _spread([d["tables_computed"] for d in diagnostics], "g"),
            "prior fits": _spread([d["prior_fits"] for d in diagnostics], "g"),
            "final μ₀ − mean of arm means": _spread(offsets, "+.3f") if judged else EMPTY,
            "final v₀ estimate / variance of arm means": _spread(ratios, ".2f") if judged else EMPTY,
        })
        if 0 < len(judged) < len(group):
            rows[-1]["EB runs"] += f" ({len(judged)} judged)"
    return rows
