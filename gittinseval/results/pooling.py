"""How the summary tables pool runs: by benchmark, cost mode and curve label, or by benchmark family."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["REGRET_TOLERANCE", "benchmark_family", "by_benchmark_cost_and_label"]

REGRET_TOLERANCE = 1e-12
"""Regrets are differences of float means: a regret within this of 0 (or of eps) counts as 0 (eps)."""


def benchmark_family(benchmark: str) -> str:
    """The benchmark family a table pools: the name before ``/`` (``mmlu/anatomy`` -> ``mmlu``)."""
    return benchmark.split("/")[0]


def by_benchmark_cost_and_label(summaries: Sequence[dict], field: str) -> dict[tuple[str, str, str], list[dict]]:
    """The summaries' ``field`` values that are set, grouped by (benchmark, cost mode, curve label)."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for summary in summaries:
        if summary.get(field) is not None:
            groups.setdefault((summary["benchmark"], summary["cost_mode"], summary["label"]), []).append(summary[field])
    return groups
