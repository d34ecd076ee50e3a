"""Are the checkpoint certificates calibrated?  Their statements against what the simulation knows.

A run with checkpoint certificates (``checkpoint_certificates``) states, at 1, 2, 5 and 10 % of
the exhaustive cost and at its stopping signal (:data:`CHECKPOINTS`), the certificate of its
recommendation: a credible interval at ``level``, P(best) and P(eps-best).  A simulation knows
the recommended arm's full-benchmark mean (``true_mean``) and its regret, so each statement can
be checked.  Per benchmark family (MMLU's subjects pooled):

- :func:`calibration_rows`, per curve label and checkpoint: how often the interval held the
  mean, and each stated probability's mean beside the share of runs in which its event happened;
- :func:`reliability_rows`, every curve's statements pooled into bins of stated probability
  (:data:`CALIBRATION_BINS`): per bin, the mean statement beside the share that came true;
- :func:`model_reliability_rows`, the same per posterior model of a model-comparison store
  (``model_certificates``, see :mod:`gittinseval.results.certificate_models`).

A calibrated certificate states a mean inside the Wilson interval of its share.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gittinseval.results.pooling import REGRET_TOLERANCE, benchmark_family
from gittinseval.results.stats import Share

__all__ = [
    "CALIBRATION_BINS",
    "CHECKPOINTS",
    "CheckpointCalibration",
    "ReliabilityBin",
    "StatedBin",
    "calibration_rows",
    "model_reliability_rows",
    "reliability_rows",
]

CHECKPOINTS = ("1pct", "2pct", "5pct", "10pct", "stop")
"""The keys of a summary's ``certificates`` (``checkpoint_certificates``), in the order the tables show them."""

CALIBRATION_BINS = (0.0, 0.05, 0.2, 0.4, 0.6, 0.8, 0.95, 1.0)
"""Edges of the bins of stated probability in :func:`reliability_rows`; the last bin holds 1."""

# A regret within eps by rounding alone still counts as within.


@dataclass(frozen=True)
class CheckpointCalibration:
    """One curve ``label`` at one ``checkpoint`` (of :data:`CHECKPOINTS`), over its ``runs`` runs with a
    certificate there: ``covered``, the share whose ``level`` credible interval held the recommended arm's
    full-benchmark mean; the mean stated ``prob_best`` beside ``best``, the share whose recommendation was a
    best arm (regret 0); and the mean stated ``prob_eps_best`` beside ``within``, the share within ``eps``
    (regret at most ``eps``).  ``eps`` and ``level`` are those of the first run."""

    label: str
    checkpoint: str
    runs: int
    eps: float
    level: float
    covered: Share
    prob_best: float
    best: Share
    prob_eps_best: float
    within: Share


@dataclass(frozen=True)
class StatedBin:
    """The statements of one event whose stated probability fell in one bin: their mean statement ``stated``
    (``nan`` without any) and ``observed``, the share of them whose event happened (``observed.n``: how many)."""

    stated: float
    observed: Share


@dataclass(frozen=True)
class ReliabilityBin:
    """The bin ``[low, high)`` of stated probability (``[low, high]`` when ``closed``, the last bin): the
    statements of P(best) in it (``best``) and of P(within ``eps``) (``within``)."""

    low: float
    high: float
    closed: bool
    eps: float
    best: StatedBin
    within: StatedBin


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


def calibration_rows(summaries: Sequence[dict]) -> dict[str, list[CheckpointCalibration]]:
    """Per benchmark family (sorted), one row per curve label and checkpoint, in the order of
    :data:`CHECKPOINTS` within a label.  Empty when no run has checkpoint certificates."""
    tables = {}
    for family, certificates in sorted(_checkpoint_certificates(summaries).items()):
        groups: dict[tuple[str, str], list[dict]] = {}
        for label, checkpoint, certificate in certificates:
            groups.setdefault((label, checkpoint), []).append(certificate)
        rows = []
        for label, checkpoint in sorted(groups, key=lambda key: (key[0], CHECKPOINTS.index(key[1]))):
            group = groups[(label, checkpoint)]
            eps = group[0]["eps"]
            rows.append(CheckpointCalibration(
                label=label,
                checkpoint=checkpoint,
                runs=len(group),
                eps=eps,
                level=group[0]["level"],
                covered=Share.of([c["lower"] <= c["true_mean"] <= c["upper"] for c in group]),
                prob_best=sum(c["prob_best"] for c in group) / len(group),
                best=Share.of([c["regret"] == 0 for c in group]),
                prob_eps_best=sum(c["prob_eps_best"] for c in group) / len(group),
                within=Share.of([c["regret"] <= eps + REGRET_TOLERANCE for c in group]),
            ))
        tables[family] = rows
    return tables


def _stated_bin(pairs: Sequence[tuple[float, bool]], low: float, high: float, closed: bool) -> StatedBin:
    """The (stated probability, happened) ``pairs`` whose probability falls in the bin."""
    inside = [(p, hit) for p, hit in pairs if low <= p < high or (closed and p == high)]
    stated = sum(p for p, _ in inside) / len(inside) if inside else float("nan")
    return StatedBin(stated, Share.of([hit for _, hit in inside]))


def reliability_rows(summaries: Sequence[dict]) -> dict[str, list[ReliabilityBin]]:
    """Per benchmark family (sorted), every curve's checkpoint certificates pooled into the bins of
    :data:`CALIBRATION_BINS`, one row per bin (empty bins too).  ``eps`` is the family's first certificate's."""
    tables = {}
    edges = CALIBRATION_BINS
    for family, certificates in sorted(_checkpoint_certificates(summaries).items()):
        eps = certificates[0][2]["eps"]
        best = [(c["prob_best"], c["regret"] == 0) for _, _, c in certificates]
        within = [(c["prob_eps_best"], c["regret"] <= eps + REGRET_TOLERANCE) for _, _, c in certificates]
        rows = []
        for low, high in zip(edges[:-1], edges[1:], strict=True):
            closed = high == edges[-1]
            rows.append(ReliabilityBin(
                low, high, closed, eps, _stated_bin(best, low, high, closed), _stated_bin(within, low, high, closed)
            ))
        tables[family] = rows
    return tables


def model_reliability_rows(summaries: Sequence[dict]) -> dict[tuple[str, str], list[ReliabilityBin]]:
    """Per benchmark family and posterior model of a model-comparison store (sorted; not the anytime statement,
    which states no probability), :func:`reliability_rows` of the model's checkpoint statements."""
    tables: dict[tuple[str, str], list[ReliabilityBin]] = {}
    models = sorted({model for s in summaries for model in (s.get("model_certificates") or {})})
    for model in models:
        restated = [
            {**s, "certificates": s["model_certificates"][model]}
            for s in summaries
            if model in (s.get("model_certificates") or {})
        ]
        for family, rows in reliability_rows(restated).items():
            tables[(family, model)] = rows
    return dict(sorted(tables.items()))
