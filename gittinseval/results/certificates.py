"""How sure the final recommendations were: the final certificates of the runs that carry one.

A run made with a certificate (``certificate``) states, for the arm it recommends at the end, a
credible interval of its mean at ``level`` and the probabilities that it is the best arm
(P(best)) and within ``eps`` of the best (P(eps-best)).  A simulation knows the recommended
arm's full-benchmark mean (``true_mean``), so each interval can be checked.  Runs of the
stores made before certificates have none, and give no rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gittinseval.results.pooling import by_benchmark_cost_and_label
from gittinseval.results.stats import Share

__all__ = ["CertificateRow", "certificate_rows"]


@dataclass(frozen=True)
class CertificateRow:
    """One benchmark, cost mode and curve ``label``, over its ``runs`` runs with a final certificate: the mean
    stated ``prob_best`` and ``prob_eps_best`` (P(within ``eps``)) of the final recommendation, and ``covered``,
    the share of those runs whose ``level`` credible interval held the recommended arm's full-benchmark mean.
    ``eps`` and ``level`` are those of the first run (a curve's runs share them)."""

    benchmark: str
    cost_mode: str
    label: str
    runs: int
    prob_best: float
    prob_eps_best: float
    eps: float
    level: float
    covered: Share


def certificate_rows(summaries: Sequence[dict]) -> list[CertificateRow]:
    """One row per benchmark, cost mode and curve label with a final certificate, in that order."""
    rows = []
    groups = by_benchmark_cost_and_label(summaries, "certificate")
    for (benchmark, cost_mode, label), certificates in sorted(groups.items()):
        first = certificates[0]
        rows.append(CertificateRow(
            benchmark=benchmark,
            cost_mode=cost_mode,
            label=label,
            runs=len(certificates),
            prob_best=sum(c["prob_best"] for c in certificates) / len(certificates),
            prob_eps_best=sum(c["prob_eps_best"] for c in certificates) / len(certificates),
            eps=first["eps"],
            level=first["level"],
            covered=Share.of([c["lower"] <= c["true_mean"] <= c["upper"] for c in certificates]),
        ))
    return rows
