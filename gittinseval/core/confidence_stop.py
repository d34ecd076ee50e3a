"""Stop a run once its recommendation is certified: the confidence stop and its cheap bounds.

A driver asks :meth:`ConfidenceStop.reached` after each batch, beside the budget and the
policy's own signal, and records which ended the run as a :class:`StopReason`.  The check
is of the certificate's ``P(eps-best)`` (:mod:`gittinseval.core.certificate`), but most checks
are settled by bounds that need no Monte Carlo (:func:`eps_best_bounds`) or by a Monte Carlo
against a few rivals only, which bounds the full estimate from above.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtr

from gittinseval.core.certificate import (
    DEFAULT_SAMPLES,
    candidate_arms,
    certify,
    check_arm,
    fixed_normals,
    open_unit_interval,
    settings_from_mapping,
)
from gittinseval.core.posterior import FiniteBenchmarkPosterior
from gittinseval.utils.validation import ConfigError, non_negative_float, positive_int

__all__ = ["CEILING_RIVALS", "STOP_MODES", "ConfidenceStop", "StopReason", "eps_best_bounds"]

STOP_MODES = ("posterior", "anytime")
"""What a confidence stop reads: the certificate's posterior probability, or the anytime-valid statement."""

CEILING_RIVALS = (4, 32)
"""Rivals of the cheap exact ceilings a confidence stop checks, in turn, before a full Monte Carlo certificate."""


class StopReason(StrEnum):
    """Which rule ended a run (a ``str``, so it goes into ``summary.json`` as its value)."""

    BUDGET = "budget"
    """The spend reached the budget."""
    POLICY = "policy"
    """The policy's own stopping signal (GittinsEval: a completed arm attains the largest index)."""
    CONFIDENCE = "confidence"
    """The :class:`ConfidenceStop`: the recommended arm is eps-best with the required probability."""
    EXHAUSTED = "exhausted"
    """The policy had nothing left to evaluate."""


@dataclass(frozen=True)
class ConfidenceStop:
    """Stop once the recommended arm is eps-best with probability at least ``prob_eps_best``.

    A driver asks :meth:`reached` after each observation, beside the budget and the
    policy's own signal, and records which ended the run as a :class:`StopReason`.
    Under the model, the recommended arm at the stop is eps-best with posterior
    probability at least ``prob_eps_best``, so on benchmarks drawn from the prior the
    share of stops on an arm that is not eps-best is at most ``delta = 1 - prob_eps_best``,
    up to the Monte Carlo error and the surrogate's misfit (measured in
    ``tests/core/test_confidence_stop.py``: 5.3 % for ``delta`` = 10 %).

    Most checks need no Monte Carlo: with ``D_j = Zbar_a - Zbar_j``,
    ``P(a eps-best)`` lies between the union bound ``1 - sum_{j != a} P(D_j < -eps)`` and
    ``min_{j != a} P(D_j >= -eps)``, both Gaussian tails.  When the threshold lies between
    them, the estimate with the fixed normals against only the 4, then the 32 strongest
    rivals (:data:`CEILING_RIVALS`) is a ceiling of the full estimate with the same draws, so
    a ceiling below the threshold is the full comparison's answer; :func:`certify`
    (``O(K S)``) is called only when neither is.

    With ``mode="anytime"`` the stop is instead the anytime-valid statement of
    :class:`~gittinseval.core.anytime.AnytimeCertifier` at ``delta = 1 - prob_eps_best``: the run stops
    once the recommendation is certified eps-best by the arms' confidence sequences, a statement that
    holds with probability at least ``prob_eps_best`` whatever the benchmark (the run's driver checks it;
    :meth:`reached` is the posterior mode's check).

    Attributes:
        prob_eps_best: the required probability, in (0, 1).
        eps: the tolerance in score units, ``>= 0``.
        n_samples: Monte Carlo draws when the bounds do not decide.
        mode: ``posterior`` (the certificate's posterior probability) or ``anytime``.
    """

    prob_eps_best: float = 0.95
    eps: float = 0.01
    n_samples: int = DEFAULT_SAMPLES
    mode: str = "posterior"

    def __post_init__(self) -> None:
        if self.mode not in STOP_MODES:
            raise ConfigError(f"stop_when.mode must be one of {', '.join(STOP_MODES)}, got {self.mode!r}")
        object.__setattr__(self, "prob_eps_best", open_unit_interval("prob_eps_best", self.prob_eps_best))
        object.__setattr__(self, "eps", non_negative_float("eps", self.eps))
        object.__setattr__(self, "n_samples", positive_int("n_samples", self.n_samples))

    @classmethod
    def of(cls, value: Any) -> ConfidenceStop | None:
        """``value`` as a stop: a stop, ``None`` (no confidence stop) or a mapping of the fields (a config's
        ``stop_when``)."""
        return None if value is None else settings_from_mapping(cls, "stop_when", value)

    def reached(self, posterior: FiniteBenchmarkPosterior, recommended: int) -> bool:
        """Whether ``P(recommended is eps-best) >= prob_eps_best`` under ``posterior``."""
        z = _standardised_margins(posterior.mean, posterior.variance, recommended, self.eps)
        # The upper bound first: one normal CDF settles most checks, where the union bound takes K.
        if float(ndtr(z.min())) < self.prob_eps_best:
            return False
        if _union_bound(z) >= self.prob_eps_best:
            return True
        # The same fixed normals against the strongest rivals only: an exact ceiling, cheap at many arms.
        mean, sd = np.asarray(posterior.mean, dtype=np.float64), np.sqrt(posterior.variance)
        for rivals in CEILING_RIVALS:
            if _eps_best_ceiling(mean, sd, recommended, self.eps, self.n_samples, rivals) < self.prob_eps_best:
                return False
        certificate = certify(posterior, recommended, eps=self.eps, n_samples=self.n_samples)
        return certificate.prob_eps_best >= self.prob_eps_best


def eps_best_bounds(mean: ArrayLike, variance: ArrayLike, arm: int, eps: float) -> tuple[float, float]:
    """Lower and upper bounds on ``P(Zbar_arm >= max_j Zbar_j - eps)`` for independent Gaussians.

    With ``D_j = Zbar_arm - Zbar_j ~ N(M_arm - M_j, V_arm + V_j)`` and
    ``q_j = P(D_j >= -eps)``: the event is the intersection over ``j != arm`` of
    ``{D_j >= -eps}``, so its probability is at most ``min_j q_j`` and, by the union
    bound, at least ``1 - sum_j (1 - q_j)`` (clipped at 0).  Pairs of known arms give
    ``q_j`` of 0 or 1.

    Args:
        mean, variance: ``[K]`` posterior means and variances of the full-benchmark means.
        arm: the arm in question.
        eps: the tolerance, ``>= 0``.
    """
    z = _standardised_margins(mean, variance, arm, eps)
    return _union_bound(z), float(ndtr(z.min()))


def _standardised_margins(mean: ArrayLike, variance: ArrayLike, arm: int, eps: float) -> np.ndarray:
    """``[K]`` ``(M_arm + eps - M_j) / sqrt(V_arm + V_j)``, so that ``q_j = Phi(z_j)``; ``+inf`` at ``arm``."""
    mean = np.asarray(mean, dtype=np.float64)
    arm = check_arm(arm, mean.size)
    margin = mean[arm] + eps - mean
    spread = np.sqrt(variance[arm] + np.asarray(variance, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(spread > 0, margin / spread, np.where(margin >= 0, np.inf, -np.inf))
    z[arm] = np.inf
    return z


def _union_bound(z: np.ndarray) -> float:
    """``max(0, 1 - sum_j Phi(-z_j))``; ``Phi(-z)`` rather than ``1 - Phi(z)``: the bound sums small tails."""
    return max(0.0, 1.0 - float(ndtr(-z).sum()))


def _eps_best_ceiling(mean: np.ndarray, sd: np.ndarray, arm: int, eps: float, n_samples: int, n_rivals: int) -> float:
    """An upper bound on :func:`certify`'s estimate of ``P(arm eps-best)`` with the fixed normals, from
    ``O(n_rivals S)`` work instead of ``O(K S)``.

    The same draws as :func:`_win_fractions` (same candidates, same rows of the fixed normals,
    same float32 arithmetic), but ``arm`` is compared with only the ``n_rivals`` drawn arms most
    likely to beat it by more than ``eps`` (smallest ``(M_arm + eps - M_j) / sqrt(V_arm + V_j)``)
    and the best known arm.  In every draw the maximum over a subset is at most the maximum over
    all, so ``arm`` is near that maximum at least as often: the count can only be larger, and a
    ceiling below a threshold decides the comparison exactly as the full estimate would.
    """
    drawn, known = candidate_arms(mean, sd, eps)
    normals = fixed_normals(drawn.size, n_samples)
    threat = (mean[arm] + eps - mean[drawn]) / np.sqrt(sd[arm] ** 2 + sd[drawn] ** 2)
    threat[drawn == arm] = np.inf
    rows = np.argsort(threat, kind="stable")[: min(n_rivals, drawn.size)]
    rows = rows[drawn[rows] != arm]
    rivals = normals[rows] * sd[drawn[rows], None].astype(np.float32)
    rivals += mean[drawn[rows], None].astype(np.float32)
    best = rivals.max(axis=0) if rows.size else np.full(n_samples, -np.inf, dtype=np.float32)
    others = known[known != arm]
    if others.size:
        best = np.maximum(best, mean[others].max().astype(np.float32))
    if arm in drawn:
        (row,) = np.flatnonzero(drawn == arm)
        own = normals[row] * np.float32(sd[arm]) + np.float32(mean[arm])
    elif arm in known:
        own = np.float32(mean[arm])
    else:
        return 0.0  # pruned: the full estimate is 0
    # The full estimate compares with max(own, rivals) - eps; own >= own - eps always, so only the rivals count.
    return float(np.count_nonzero(own >= np.maximum(best, own) - np.float32(eps))) / n_samples
