"""What a live run reports of itself: the recommendation, the arms' table (``status.txt``) and the
warnings of a grading that never (or always) matches."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gittinseval.core.certificate import Certificate
from gittinseval.core.posterior import FiniteBenchmarkPosterior

__all__ = [
    "COST_LEGEND",
    "SAME_SCORE_AFTER",
    "LEGEND",
    "VALUE_LEGEND",
    "ArmStatus",
    "GradingWarnings",
    "Recommendation",
    "same_scores",
    "score_warnings",
    "status_text",
]

log = logging.getLogger(__name__)

SAME_SCORE_AFTER = 20
"""Told scores of an arm, or of the whole run, after which scores that are all 0 (or all 1) raise a
warning (:func:`score_warnings`): a grading that never matches looks like that."""


@dataclass(frozen=True)
class Recommendation:
    """The policy's recommended arm with the run's posterior of its full-benchmark mean.

    ``mean`` and ``variance`` are ``M`` and ``V`` of the finite-benchmark posterior
    under the run's prior (the same for every policy); ``lcb = M - kappa sqrt(V)``
    with the ``kappa`` of the policy's :meth:`~gittinseval.core.protocol.Policy.posterior_report`
    (1 unless the policy has its own, as GittinsEval does).  For
    GittinsEval this is the score its recommendation maximises.  GittinsEval-EB
    (``prior_estimator``) maximises it under its learned prior instead, which its
    ``diagnostics()`` report; the reported moments stay under the run's starting prior,
    so that they mean the same for every policy.
    """

    arm: int
    name: str
    mean: float
    variance: float
    lcb: float
    label: str = ""
    """The arm's short label (:func:`~gittinseval.live.labels.arm_labels`); ``name`` is its store key."""
    value: float | None = None
    """Under the ``value`` objective, the posterior mean of the arm's value ``M + b`` (``b = -mu p``, its known
    offset: :class:`~gittinseval.core.objective.Objective`); ``None`` under the other objectives."""
    value_lcb: float | None = None
    """Under the ``value`` objective, ``M + b - kappa sqrt(V)``: what the run recommends by; else ``None``."""


LEGEND = (
    "seen, mean: examples scored and their mean (with those kept from a failed call); "
    "M, sd(V), lcb: the posterior of the told requests; lo, hi: the credible interval of the arm's "
    "full-benchmark mean; P(best): the posterior probability that the arm is the best "
    "(both of the certificate's model, certificate.model; not a frequentist guarantee); *: a request in flight"
)
"""The line under the arms' table in ``status.txt`` (:func:`status_text`) that says what its columns mean."""
COST_LEGEND = "guess, learned: expected dollars per example, guessed and learned from the told requests' charges"
"""The legend's second line when the table shows learned costs."""
VALUE_LEGEND = (
    "objective value: value = M - mu * deployment price, v.lcb = value - kappa sd(V); the arms are ranked and "
    "recommended by v.lcb, and lo, hi and P(best) are of the value (M, sd(V), lcb and mean: of the accuracy)"
)
"""The legend's line when the table shows the ``value`` objective's columns."""


@dataclass(frozen=True)
class ArmStatus:
    """Per-arm table, every column of length ``K``.

    ``n_seen`` told examples, ``outstanding`` whether a request is in flight,
    ``sample_mean`` the mean of the told scores (NaN before any), ``mean`` and
    ``variance`` the posterior ``M`` and ``V`` of the full-benchmark mean and
    ``lcb`` = ``M - kappa sqrt(V)`` (see :class:`Recommendation`); ``names`` are the
    arms' labels.  ``n_scored`` and ``scored_mean`` count also the cells that a call
    which failed part-way kept (scored and paid for; the posterior sees them once
    their request is told).  ``lower``, ``upper`` and ``prob_best`` are each arm's credible interval and
    P(best) from the run's :class:`~gittinseval.core.certificate.Certificate` (NaN without one).
    With learned costs, ``guessed_cost`` and ``learned_cost`` are
    each arm's expected dollars per example, guessed and estimated from its charges
    (:class:`~gittinseval.core.cost_learning.CostEstimator`); ``None`` otherwise.
    Under the ``value`` objective, ``value`` and ``value_lcb`` are each arm's ``M + b`` and
    ``M + b - kappa sqrt(V)`` (see :class:`Recommendation`), and the certificate's columns
    are of the value; ``None`` otherwise.
    """

    names: tuple[str, ...]
    n_seen: np.ndarray
    outstanding: np.ndarray
    sample_mean: np.ndarray
    mean: np.ndarray
    variance: np.ndarray
    lcb: np.ndarray
    n_scored: np.ndarray
    scored_mean: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    prob_best: np.ndarray
    guessed_cost: np.ndarray | None = None
    learned_cost: np.ndarray | None = None
    value: np.ndarray | None = None
    value_lcb: np.ndarray | None = None

    @classmethod
    def of(
        cls,
        posterior: FiniteBenchmarkPosterior,
        labels: tuple[str, ...],
        outstanding: Sequence[int],
        kappa: float,
        kept: Mapping[int, Sequence[float]] | None = None,
        certificate: Certificate | None = None,
        costs: tuple[np.ndarray, np.ndarray] | None = None,
        value_offsets: np.ndarray | None = None,
    ) -> ArmStatus:
        """The table of ``posterior`` (copied), with a request in flight on the arms ``outstanding``,
        ``kept[arm]``: the scores of that arm's untold request kept from a failed call, the intervals and
        P(best) of ``certificate``, ``costs``: the ``[K]`` guessed and learned dollars per example
        (``None``: costs are not learned), and ``value_offsets``: the ``[K]`` offsets ``b`` of the ``value``
        objective (``None``: another objective)."""
        in_flight = np.zeros(len(labels), dtype=bool)
        in_flight[list(outstanding)] = True
        n_kept, kept_sum = np.zeros(len(labels), dtype=np.int64), np.zeros(len(labels))
        for arm, scores in (kept or {}).items():
            n_kept[arm], kept_sum[arm] = len(scores), float(np.sum(scores))
        n_scored = posterior.n_seen + n_kept
        lcb = posterior.mean - kappa * np.sqrt(posterior.variance)
        with np.errstate(invalid="ignore", divide="ignore"):
            sample_mean = np.where(posterior.n_seen > 0, posterior.score_sum / posterior.n_seen, np.nan)
            scored_mean = np.where(n_scored > 0, (posterior.score_sum + kept_sum) / n_scored, np.nan)
        return cls(
            labels,
            posterior.n_seen.copy(),
            in_flight,
            sample_mean,
            posterior.mean.copy(),
            posterior.variance.copy(),
            lcb,
            n_scored,
            scored_mean,
            *(
                (np.full(len(labels), np.nan),) * 3
                if certificate is None
                else (certificate.arm_lower.copy(), certificate.arm_upper.copy(), certificate.arm_prob_best.copy())
            ),
            *((None, None) if costs is None else (np.array(costs[0], dtype=float), np.array(costs[1], dtype=float))),
            *((None, None) if value_offsets is None else (posterior.mean + value_offsets, lcb + value_offsets)),
        )

    def format(self, top: int = 10) -> str:
        """The ``top`` arms by ``lcb`` (by ``value_lcb`` under the ``value`` objective) as a text table
        (:data:`LEGEND` says what its columns mean)."""
        valued = self.value_lcb is not None
        order = np.argsort(-(self.value_lcb if valued else self.lcb), kind="stable")[:top]
        width = min(40, max(len(self.names[k]) for k in order))
        header = (
            f"{'arm':>6}  {'name':<{width}}  {'seen':>6}  {'mean':>6}  {'M':>6}  {'sd(V)':>6}  {'lcb':>6}  "
            + (f"{'value':>6}  {'v.lcb':>6}  " if valued else "")
            + f"{'lo':>6}  {'hi':>6}  {'P(best)':>7}"
        )
        learned = self.learned_cost is not None
        lines = [header + (f"  {'guess':>9}  {'learned':>9}" if learned else "")]
        for k in order:
            lines.append(
                f"{k:>6}  {self.names[k][:width]:<{width}}  {self.n_scored[k]:>6}  {self.scored_mean[k]:>6.3f}  "
                f"{self.mean[k]:>6.3f}  {math.sqrt(self.variance[k]):>6.3f}  {self.lcb[k]:>6.3f}  "
                + (f"{self.value[k]:>6.3f}  {self.value_lcb[k]:>6.3f}  " if valued else "")
                + f"{self.lower[k]:>6.3f}  {self.upper[k]:>6.3f}  {self.prob_best[k]:>7.3f}"
                + (f"  {self.guessed_cost[k]:>9.3g}  {self.learned_cost[k]:>9.3g}" if learned else "")
                + ("  *" if self.outstanding[k] else "")
            )
        return "\n".join(lines)


def status_text(ledger_line: str, warnings: Sequence[str], status: ArmStatus, top: int = 20) -> str:
    """The text of ``status.txt``: the ledger's line, the warnings, then the ``top`` arms by LCB (of the value under
    the ``value`` objective) and the legend."""
    header = [ledger_line, *(f"WARNING: {warning}" for warning in warnings)]
    legend = LEGEND + ("" if status.learned_cost is None else "\n" + COST_LEGEND)
    legend += "" if status.value is None else "\n" + VALUE_LEGEND
    return "\n".join(header) + "\n\n" + status.format(top=top) + "\n\n" + legend + "\n"


def same_scores(posterior: FiniteBenchmarkPosterior) -> tuple[int | None, dict[int, np.ndarray]]:
    """Scores that suggest a grading that never (or always) matches.

    Returns the score (0 or 1) that every one of the run's told scores has, once there
    are :data:`SAME_SCORE_AFTER` of them (else ``None``), and for each of 0 and 1 the
    arms with that many told scores or more, all equal to it.
    """
    n_seen, sums = posterior.n_seen, posterior.score_sum
    told, total = int(n_seen.sum()), float(sums.sum())
    whole = None
    if told >= SAME_SCORE_AFTER and total in (0.0, float(told)):
        whole = 0 if total == 0 else 1
    arms = {value: np.flatnonzero((n_seen >= SAME_SCORE_AFTER) & (sums == value * n_seen)) for value in (0, 1)}
    return whole, arms


def score_warnings(posterior: FiniteBenchmarkPosterior) -> list[str]:
    """:func:`same_scores` as lines: the whole run's, or else the arms', each suggesting to check the grading."""
    whole, arms = same_scores(posterior)
    if whole is not None:
        told = int(posterior.n_seen.sum())
        return [f"every one of the {told} scores so far is {whole}: check the grading against the replies"]
    warnings = []
    for value, flagged in arms.items():
        if flagged.size:
            listed = ", ".join(str(arm) for arm in flagged[:8]) + (", ..." if flagged.size > 8 else "")
            warnings.append(
                f"{flagged.size} arm{'s' if flagged.size > 1 else ''} ({listed}) scored {value} on every one of "
                f"{SAME_SCORE_AFTER} or more examples: check the grading against the replies"
            )
    return warnings


class GradingWarnings:
    """Logs each arm (or the whole run) the first time its scores are all 0 or all 1."""

    def __init__(self) -> None:
        self._logged: set[tuple[int | None, int]] = set()

    def update(self, posterior: FiniteBenchmarkPosterior, labels: Sequence[str]) -> list[str]:
        """Log what is newly flagged; returns :func:`score_warnings` while anything is flagged, else ``[]``."""
        whole, by_value = same_scores(posterior)
        flagged = [(None, whole)] if whole is not None else [(k, v) for v, group in by_value.items() for k in group]
        for arm, value in flagged:
            if (arm, value) in self._logged:
                continue
            self._logged.add((arm, value))
            if arm is None:
                log.warning("%s", score_warnings(posterior)[0])
            else:
                log.warning(
                    "arm %d (%s) scored %d on each of its %d examples so far: check the grading against the replies",
                    arm, labels[arm], value, posterior.n_seen[arm],
                )
        return score_warnings(posterior) if flagged else []
