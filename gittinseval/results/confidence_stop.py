"""The confidence stop: how often it fired, how early, and how often on an arm that was not eps-best.

A run with a confidence stop (``stop_when``) records whether and where its posterior first stated
P(eps-best) of at least ``1 - delta`` for its recommendation (``confidence_stop``).  The stop
promises that at most ``delta`` of its stops are on an arm more than ``eps`` from the best, on
benchmarks drawn from the prior; a simulation knows the regret of each, so the promise can be
checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gittinseval.results.pooling import REGRET_TOLERANCE, by_benchmark_cost_and_label
from gittinseval.results.stats import Share

__all__ = ["ConfidenceStopRow", "confidence_stop_rows"]

# A regret within eps by rounding alone still counts as within.


@dataclass(frozen=True)
class ConfidenceStopRow:
    """One benchmark, cost mode and curve ``label``, over its ``runs`` runs that recorded a confidence stop:
    ``wrong``, the share of the stops that fired whose recommendation was more than ``eps`` from the best
    (``wrong.n``: how many fired), against the promised ``delta`` (``1 - P(eps-best)`` of the stop rule), and
    ``cost_pct``, the mean share of the exhaustive cost (%) at which they fired (``nan``: none fired).
    ``eps`` and ``delta`` are those of the first run."""

    benchmark: str
    cost_mode: str
    label: str
    runs: int
    eps: float
    delta: float
    wrong: Share
    cost_pct: float

    @property
    def fired(self) -> int:
        return self.wrong.n


def confidence_stop_rows(summaries: Sequence[dict]) -> list[ConfidenceStopRow]:
    """One row per benchmark, cost mode and curve label with a recorded confidence stop, in that order."""
    rows = []
    groups = by_benchmark_cost_and_label(summaries, "confidence_stop")
    for (benchmark, cost_mode, label), stops in sorted(groups.items()):
        fired = [stop for stop in stops if stop["step"] is not None]
        eps = stops[0]["eps"]
        rows.append(ConfidenceStopRow(
            benchmark=benchmark,
            cost_mode=cost_mode,
            label=label,
            runs=len(stops),
            eps=eps,
            delta=1 - stops[0]["prob_eps_best"],
            wrong=Share.of([stop["regret"] > eps + REGRET_TOLERANCE for stop in fired]),
            cost_pct=sum(stop["cost_pct"] for stop in fired) / len(fired) if fired else float("nan"),
        ))
    return rows
