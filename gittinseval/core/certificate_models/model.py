"""The empirical-Bayes certificate model: lattice posteriors with a prior learned from the run.

Model (shapes for ``K`` arms, ``N`` examples, lattice of ``X`` points).  Each arm's
full-benchmark mean ``Zbar_k`` is drawn from a prior ``g`` learned from the run's observations
(:class:`~gittinseval.core.certificate_models.spline_prior.SplinePrior`), independently across
arms; given ``Zbar_k`` the arm's observed scores are a uniformly random sample without
replacement of its ``N`` scores, with the exact hypergeometric likelihood for 0/1 scores and a
Gaussian one for continuous scores (:mod:`~gittinseval.core.certificate_models.lattice`).  The
posterior of each ``Zbar_k`` is a ``[X]`` row of lattice probabilities; arms with the same data
share a row (0/1 scores: same ``(R_k, n_k)``).  Which arms a policy evaluated, in what order and
how often, depends on past scores only, so it is ignorable: the posterior is that of the same
cells observed in any order.

The certificate of a recommended arm ``a`` reads from these rows:

- ``arm_mean`` / per-arm posterior mean, and the central credible interval ``[arm_lower,
  arm_upper]`` at ``level`` (lattice quantiles, within ``[R_k / N, (R_k + m_k) / N]``; a completed
  arm's mean is known exactly);
- ``arm_prob_best = P(Zbar_k >= max_j Zbar_j)`` and ``arm_prob_eps_best = P(Zbar_k >= max_j Zbar_j -
  eps)``, exact sums over the lattice (no Monte Carlo), ``O(U X)`` for ``U`` rows.

Continuous scores need each arm's dispersion ``phi_k`` (``Var(score) = phi_k x (1 - x)``): the
pooled estimate ``phi = sum_k SS_k / sum_k (n_k - 1) ybar_k (1 - ybar_k)`` over arms with
``n_k >= 2`` (``SS_k = Q_k - R_k^2 / n_k``), shrunk per arm as
``phi_k = (nu phi + SS_k / (ybar_k (1 - ybar_k))) / (nu + n_k - 1)`` with ``nu = dispersion_dof``
pseudo-observations, clipped to ``[0.02, 1]``.

What the numbers are and are not: posterior probabilities under this model, with the prior
estimated from the same run (empirical Bayes, refitted when the observed cells grow by
``refit_growth``; between refits the prior is held and only the likelihood moves).  Arms are
independent given the prior, so arms that share a model or template, or examples, are not
linked; and the prior's upper tail is a smooth extrapolation (see the spline prior's docstring).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from gittinseval.core.certificate import Certificate, check_arm, open_unit_interval
from gittinseval.core.certificate_models.attribute_prior import AttributePrior, has_shared_attributes
from gittinseval.core.certificate_models.binary_rows import BinaryRows
from gittinseval.core.certificate_models.lattice import (
    Lattice,
    RowData,
    central_interval,
    eps_best_against,
    eps_steps,
    log_cdf_at_eps,
    win_probabilities,
)
from gittinseval.core.certificate_models.spline_prior import SplinePrior
from gittinseval.core.observations import ObservedCells
from gittinseval.utils.validation import non_negative_float, positive_int

__all__ = ["CEILING_RIVALS", "ArmPosterior", "EmpiricalBayesModel"]

_DISPERSION_RANGE = (0.02, 1.0)

CEILING_RIVALS = 32
"""Rivals of the cheap ceiling of :meth:`EmpiricalBayesModel.eps_best_reached`."""


@dataclass(frozen=True, eq=False)
class ArmPosterior:
    """The lattice posterior of every arm (rows shared by arms with the same data).

    Attributes:
        lattice: the lattice and its likelihood.
        rows: ``[U, X]`` posterior probabilities of each row.
        row_of_arm: ``[K]`` the row of each arm.
        counts: ``[U]`` arms per row.
        data: the rows' observed data.
    """

    lattice: Lattice
    rows: np.ndarray
    row_of_arm: np.ndarray
    counts: np.ndarray
    data: RowData

    def row_moments(self) -> tuple[np.ndarray, np.ndarray]:
        """``[U]`` posterior means and standard deviations of the rows (a completed arm's exact mean)."""
        points = self.lattice.points
        mean = self.rows @ points
        variance = np.maximum(self.rows @ points**2 - mean**2, 0.0)
        complete = self.data.n_seen >= self.lattice.n_examples
        mean = np.where(complete, self.data.score_sum / self.lattice.n_examples, mean)
        return mean, np.where(complete, 0.0, np.sqrt(variance))

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        """``[K]`` posterior means and standard deviations of the arms' full-benchmark means."""
        mean, sd = self.row_moments()
        return mean[self.row_of_arm], sd[self.row_of_arm]


class EmpiricalBayesModel:
    """Certificates from exact lattice posteriors with a spline prior learned from the run.

    The model and its maths are in the module docstring.  One instance follows one run (or several
    runs in turn): it keeps the last prior fit, refits it when the observed cells have grown by
    ``refit_growth`` since (or shrunk: a new run), and warm-starts the fit from the last one.

    Args:
        knots: inner knots of the prior's spline basis.
        penalty: the spline prior's smoothing weight ``lam``.
        default_arms: weight of the wide default prior, in pseudo-arms.
        refit_growth: refit once the observed cells exceed ``(1 + refit_growth)`` times those at the
            last fit; 0 refits at every call.
        continuous_points: lattice points for continuous scores.
        dispersion_dof: ``nu``, pseudo-observations of the pooled dispersion in each arm's estimate.
    """

    def __init__(
        self,
        *,
        knots: int = 20,
        penalty: float = 1.0,
        default_arms: float = 2.0,
        refit_growth: float = 0.05,
        continuous_points: int = 401,
        dispersion_dof: float = 20.0,
    ) -> None:
        self.knots = positive_int("knots", knots)
        if self.knots < 2:
            raise ValueError(f"knots must be at least 2, got {knots!r}")
        self.penalty = non_negative_float("penalty", penalty)
        self.default_arms = non_negative_float("default_arms", default_arms)
        self.refit_growth = non_negative_float("refit_growth", refit_growth)
        self.continuous_points = positive_int("continuous_points", continuous_points)
        if self.continuous_points < 3:
            raise ValueError(f"continuous_points must be at least 3, got {continuous_points!r}")
        self.dispersion_dof = non_negative_float("dispersion_dof", dispersion_dof)
        self._lattice: Lattice | None = None
        self._prior: SplinePrior | None = None
        self._attributes: AttributePrior | None = None
        self._features: np.ndarray | None = None
        self._cells_at_fit = -1
        self._fits = 0
        self._last_ceiling: tuple[tuple[int, int, float, int], np.ndarray, np.ndarray, np.ndarray, float] | None = None
        self._table_key: tuple[int, float, int] | None = None
        self._table: BinaryRows | None = None

    # ------------------------------------------------------------------ public API
    def certify(
        self, observed: ObservedCells, recommended: int, *, level: float = 0.95, eps: float = 0.01
    ) -> Certificate:
        """The certificate of arm ``recommended`` (numbers for every arm; maths in the module docstring): its
        probabilities are exact lattice sums, so its ``n_samples`` is ``None``."""
        observed = _check_observed(observed)
        recommended = check_arm(recommended, observed.n_arms)
        level = open_unit_interval("level", level)
        eps = non_negative_float("eps", eps)
        posterior = self.posterior(observed)
        lattice = posterior.lattice
        mean, _ = posterior.row_moments()
        lower, upper = central_interval(posterior.rows, lattice.points, level)
        data = posterior.data
        lowest = data.score_sum / lattice.n_examples
        highest = (data.score_sum + lattice.n_examples - data.n_seen) / lattice.n_examples
        lower, upper = np.clip(lower, lowest, highest), np.clip(upper, lowest, highest)
        prob_best, prob_eps_best = win_probabilities(
            posterior.rows, posterior.counts, eps_steps(lattice, eps), lattice.binary
        )
        index = posterior.row_of_arm
        return Certificate(
            arm=recommended,
            level=level,
            eps=eps,
            n_samples=None,
            arm_mean=_read_only(mean[index]),
            arm_lower=_read_only(lower[index]),
            arm_upper=_read_only(upper[index]),
            arm_prob_best=_read_only(prob_best[index]),
            arm_prob_eps_best=_read_only(prob_eps_best[index]),
            model="eb",
        )

    def prob_eps_best(self, observed: ObservedCells, arm: int, eps: float = 0.01) -> float:
        """``P(Zbar_arm >= max_j Zbar_j - eps)`` (the prior refitted first if it is due, as by :meth:`posterior`).

        The range bounds settle it when they can (:meth:`_range_bound`); otherwise the exact lattice sum,
        ``O(U X)``.
        """
        observed = _check_observed(observed)
        arm = check_arm(arm, observed.n_arms)
        eps = non_negative_float("eps", eps)
        self._refit_if_due(observed)
        settled = _range_bound(observed, arm, eps)
        if settled is not None:
            return settled
        return self._exact_eps_best(observed, arm, eps)

    def eps_best_reached(self, observed: ObservedCells, arm: int, eps: float, threshold: float) -> bool:
        """Whether ``P(Zbar_arm >= max_j Zbar_j - eps) >= threshold``: the confidence stop's check.

        Three steps, each exact for the decision:

        1. the range bounds (:meth:`_range_bound`);
        2. a ceiling under the prior of the last fit: the probability that ``arm`` is eps-best among
           itself and its :data:`CEILING_RIVALS` strongest rivals only (by a cheap score), ``O(C X)``.  A
           maximum over fewer arms is never larger, so the ceiling is at least the full probability, and a
           ceiling below ``threshold`` answers ``False``;
        3. otherwise :meth:`prob_eps_best` (a refit if one is due, the exact sum).

        The prior is refitted first when it is due, as for every read of the posterior; the last ceiling is
        reused while its arms, ``eps`` and the prior's fit are unchanged (0/1 scores).
        """
        observed = _check_observed(observed)
        arm = check_arm(arm, observed.n_arms)
        eps = non_negative_float("eps", eps)
        self._refit_if_due(observed)
        if self._cached_ceiling_below(observed, arm, eps, threshold):
            return False
        settled = _range_bound(observed, arm, eps)
        if settled is not None:
            return settled >= threshold
        if self._ceiling(observed, arm, eps) < threshold:
            return False
        return self._exact_eps_best(observed, arm, eps) >= threshold

    def _cached_ceiling_below(self, observed: ObservedCells, arm: int, eps: float, threshold: float) -> bool:
        """Whether the last ceiling still holds and is below ``threshold``: same arm, eps and prior fit, and
        none of its arms observed since.  (0/1 scores only: a continuous row's dispersion is pooled over
        all arms, so any batch changes it.)"""
        cached = self._last_ceiling
        if cached is None or not observed.binary:
            return False
        key, arms, n_seen, score_sum, value = cached
        if key != (id(observed), arm, eps, self._fits) or value >= threshold:
            return False
        same_counts = np.array_equal(observed.n_seen[arms], n_seen)
        return bool(same_counts and np.array_equal(observed.score_sum[arms], score_sum))

    def _exact_eps_best(self, observed: ObservedCells, arm: int, eps: float) -> float:
        if observed.binary:
            # The rows of the arms observed since the last check are recomputed, the others kept: O(K X) additions
            # instead of K posteriors.
            return self._binary_table(observed, eps_steps(self._lattice_for(observed), eps)).eps_best(arm)
        posterior = self.posterior(observed)
        row = posterior.row_of_arm[arm]
        _, prob = win_probabilities(
            posterior.rows, posterior.counts, eps_steps(posterior.lattice, eps), posterior.lattice.binary, [row]
        )
        return float(prob[0])

    def _matches(self, observed: ObservedCells) -> bool:
        """Whether the lattice and the prior are those of ``observed``'s benchmark (examples, score kind,
        arms' attributes)."""
        lattice = self._lattice
        if lattice is None or lattice.n_examples != observed.n_examples or lattice.binary != observed.binary:
            return False
        features = observed.features
        if features is None or self._features is None:
            return features is None and self._features is None
        return features is self._features or np.array_equal(features, self._features)

    def _ceiling(self, observed: ObservedCells, arm: int, eps: float) -> float:
        """``P(arm eps-best among itself and its strongest rivals)`` under the last fit's prior (step 2 of
        :meth:`eps_best_reached`).  The rivals are the arms least likely to trail ``arm`` by ``eps`` under a
        normal approximation of smoothed means; any choice gives a ceiling, this one a low one."""
        big_n = observed.n_examples
        counts = observed.n_seen.astype(np.float64)
        mean = (observed.score_sum + 1.0) / (counts + 2.0)
        spread = mean * (1.0 - mean) * (1.0 - counts / big_n) / (counts + 3.0) + 1e-12
        threat = (mean[arm] + eps - mean) / np.sqrt(spread[arm] + spread)
        threat[arm] = np.inf
        n_rivals = min(CEILING_RIVALS, observed.n_arms - 1)
        rivals = np.argpartition(threat, n_rivals - 1)[:n_rivals]
        arms = np.concatenate([[arm], rivals])
        lattice = self._lattice
        steps = eps_steps(lattice, eps)
        score_sum = np.asarray(observed.score_sum[arms], dtype=np.float64)
        n_seen = counts[arms].astype(np.int64)
        if lattice.binary:
            table = self._binary_table(observed, steps, arms)
            post, log_cdf = table.post[arms], table.log_cdf[arms]
        else:
            data = RowData(score_sum, n_seen, self._dispersion(observed)[arms])
            post = lattice.posterior(lattice.log_likelihood(data), self._log_prior_rows(arms))
            log_cdf = log_cdf_at_eps(post, steps, binary=False)
        ceiling = eps_best_against(post[0], log_cdf[1:])
        self._last_ceiling = ((id(observed), arm, eps, self._fits), arms, n_seen, score_sum, ceiling)
        return ceiling

    def _binary_table(self, observed: ObservedCells, steps: float, arms: np.ndarray | None = None) -> BinaryRows:
        """The rows of every 0/1 arm under the last fit's prior (:class:`BinaryRows`, kept while the fit, ``eps`` and
        the arms are), those of ``arms`` (default all) brought up to ``observed``'s data."""
        key = (self._fits, steps, observed.n_arms)
        if self._table is None or self._table_key != key:
            shared = self._attributes is None  # exchangeable arms with the same data share a row
            self._table = BinaryRows(observed.n_arms, self._lattice.size, shared_prior=shared)
            self._table_key = key
        ones = np.rint(observed.score_sum).astype(np.int64)
        self._table.refresh(ones, observed.n_seen, partial(self._binary_rows, steps), arms)
        return self._table

    def _binary_rows(
        self, steps: float, arms: np.ndarray, ones: np.ndarray, n_seen: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``[A, X]`` posterior rows of 0/1 ``arms`` with ``ones`` and ``n_seen`` observed, under the last fit's prior
        (with attributes each arm has its own), and their :func:`log_cdf_at_eps`."""
        lattice = self._lattice
        data = RowData(ones.astype(np.float64), n_seen, np.ones(len(arms)))
        log_prior = self._log_prior_rows(arms if self._attributes is not None else None)
        post = lattice.posterior(lattice.log_likelihood(data), log_prior)
        return post, log_cdf_at_eps(post, steps, binary=True)

    def recommend(self, observed: ObservedCells, kappa: float = 1.0) -> int:
        """The arm with the largest posterior mean minus ``kappa`` posterior standard deviations (lowest index
        on ties)."""
        observed = _check_observed(observed)
        kappa = non_negative_float("kappa", kappa)
        mean, sd = self.posterior(observed).moments()
        return int(np.argmax(mean - kappa * sd))

    def moments(self, observed: ObservedCells) -> tuple[np.ndarray, np.ndarray]:
        """``[K]`` posterior means and standard deviations of the arms' full-benchmark means."""
        return self.posterior(_check_observed(observed)).moments()

    @property
    def log_prior(self) -> np.ndarray | None:
        """The lattice log-prior of the last fit (a copy; ``[K, X]`` unnormalised with attributes), or ``None``
        before the first."""
        return None if self._lattice is None else np.array(self._log_prior_rows())

    # ------------------------------------------------------------------ the posterior
    def posterior(self, observed: ObservedCells) -> ArmPosterior:
        """Every arm's lattice posterior, refitting the prior first if it is due."""
        lattice = self._lattice_for(observed)
        data, row_of_arm, counts = self._rows(observed, lattice)
        log_lik = lattice.log_likelihood(data)  # [U, X]
        cells = int(observed.n_seen.sum())
        if self._refit_due(cells):
            self._refit(observed, log_lik, data, counts)
            self._cells_at_fit = cells
        rows = lattice.posterior(log_lik, self._log_prior_rows())
        return ArmPosterior(lattice=lattice, rows=rows, row_of_arm=row_of_arm, counts=counts, data=data)

    def _refit_if_due(self, observed: ObservedCells) -> None:
        if not self._matches(observed) or self._refit_due(int(observed.n_seen.sum())):
            self._fit(observed)

    def _refit_due(self, cells: int) -> bool:
        """Whether the prior is to be refitted with ``cells`` observed: none yet, fewer cells than at the last fit
        (a new run), or more than ``(1 + refit_growth)`` times as many."""
        at_fit = self._cells_at_fit
        return at_fit < 0 or cells < at_fit or cells > (1.0 + self.refit_growth) * at_fit or self.refit_growth == 0

    def fit(self, observed: ObservedCells) -> np.ndarray:
        """Refit the prior now; returns the lattice log-prior: ``[X]``, or ``[K, X]`` (unnormalised) with
        attributes."""
        self._fit(_check_observed(observed))
        return self._log_prior_rows().copy()

    def _fit(self, observed: ObservedCells) -> None:
        lattice = self._lattice_for(observed)
        if self._attributes is not None:
            # The attribute prior is fitted from the arms' sums and counts: no lattice likelihood needed.
            self._refit(observed, None, None, None)
        else:
            data, _, counts = self._rows(observed, lattice)
            self._refit(observed, lattice.log_likelihood(data), data, counts)
        self._cells_at_fit = int(observed.n_seen.sum())

    def _refit(
        self, observed: ObservedCells, log_lik: np.ndarray | None, data: RowData | None, counts: np.ndarray | None
    ) -> None:
        """Refit the prior: the attribute prior from the arms' sums and counts, the spline prior from the
        ``[U, X]`` log-likelihood of the rows ``data`` (``counts`` arms each)."""
        if self._attributes is not None:
            dispersion = np.ones(observed.n_arms) if observed.binary else self._dispersion(observed)
            self._attributes.fit(observed.score_sum, observed.n_seen, observed.n_examples, dispersion)
        else:
            seen = data.n_seen > 0
            rows = log_lik[seen]
            likelihood = np.exp(rows - rows.max(axis=1, keepdims=True))
            self._prior.fit(likelihood, counts[seen])
        self._fits += 1

    def _log_prior_rows(self, arms: np.ndarray | None = None) -> np.ndarray:
        """The lattice log-prior: ``[X]`` shared by exchangeable arms, ``[A, X]`` of ``arms`` (default all) with
        attributes."""
        if self._attributes is not None:
            return self._attributes.log_prior_rows(self._lattice.points, arms)
        return self._prior.log_prior

    def _lattice_for(self, observed: ObservedCells) -> Lattice:
        lattice = self._lattice
        if lattice is None or not self._matches(observed):
            lattice = Lattice(observed.n_examples, observed.binary, self.continuous_points)
            self._features = None if observed.features is None else np.array(observed.features)
            shared = has_shared_attributes(observed.features)
            self._attributes = AttributePrior(observed.features) if shared else None
            self._lattice = lattice
            self._prior = SplinePrior(
                lattice.logit_points,
                lattice.points,
                knots=self.knots,
                penalty=self.penalty,
                default_arms=self.default_arms,
            )
            self._cells_at_fit = -1
            self._fits += 1
        return lattice

    def _rows(self, observed: ObservedCells, lattice: Lattice) -> tuple[RowData, np.ndarray, np.ndarray]:
        """The rows of the posterior: exchangeable 0/1 arms grouped by ``(R, n)``, other arms one row each."""
        counts_seen = observed.n_seen.astype(np.int64)
        if lattice.binary and self._attributes is not None:
            ones = np.rint(observed.score_sum).astype(np.float64)
            each = np.ones(observed.n_arms)
            return RowData(ones, counts_seen, each), np.arange(observed.n_arms), each
        if lattice.binary:
            ones = np.rint(observed.score_sum).astype(np.int64)
            key = ones * (lattice.n_examples + 1) + counts_seen
            _, first, row_of_arm, counts = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
            data = RowData(ones[first].astype(np.float64), counts_seen[first], np.ones(first.size))
            return data, row_of_arm.reshape(-1), counts.astype(np.float64)
        data = RowData(
            np.asarray(observed.score_sum, dtype=np.float64).copy(),
            counts_seen,
            self._dispersion(observed),
        )
        return data, np.arange(observed.n_arms), np.ones(observed.n_arms)

    def _dispersion(self, observed: ObservedCells) -> np.ndarray:
        """``[K]`` each arm's dispersion ``phi_k`` (module docstring)."""
        counts = observed.n_seen.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(counts > 0, observed.score_sum / counts, 0.5)
            squares = np.where(counts > 0, observed.score_sq_sum - observed.score_sum**2 / counts, 0.0)
        squares = np.maximum(squares, 0.0)
        base = np.clip(mean * (1.0 - mean), 1e-3, None)
        several = counts >= 2
        if several.any():
            pooled = float(np.sum(squares[several]) / np.sum(((counts - 1.0) * base)[several]))
        else:
            pooled = 1.0
        pooled = min(max(pooled, _DISPERSION_RANGE[0]), _DISPERSION_RANGE[1])
        nu = self.dispersion_dof
        with np.errstate(divide="ignore", invalid="ignore"):
            own = (nu * pooled + squares / base) / (nu + np.maximum(counts - 1.0, 0.0))
        own = np.where(np.isfinite(own), own, pooled)
        return np.clip(own, *_DISPERSION_RANGE)


def _check_observed(observed: Any) -> ObservedCells:
    if not isinstance(observed, ObservedCells):
        raise TypeError(f"expected ObservedCells, got {type(observed).__name__}")
    return observed


def _read_only(array: np.ndarray) -> np.ndarray:
    array = np.array(array, dtype=np.float64)
    array.flags.writeable = False
    return array


def _range_bound(observed: ObservedCells, arm: int, eps: float) -> float | None:
    """``P(arm eps-best)`` when the ranges the means can take settle it, else ``None``.

    It is 0 when some arm's least possible mean ``R_j / N`` exceeds ``arm``'s greatest ``(R_arm + m_arm) / N``
    by more than ``eps``, and 1 when every other arm's greatest possible mean is at most ``arm``'s least plus
    ``eps`` (and with one arm).
    """
    big_n = observed.n_examples
    least = observed.score_sum / big_n
    most = (observed.score_sum + big_n - observed.n_seen) / big_n
    others = np.ones(observed.n_arms, dtype=bool)
    others[arm] = False
    if not others.any():
        return 1.0
    tolerance = 1e-12
    if least[others].max() > most[arm] + eps + tolerance:
        return 0.0
    if most[others].max() <= least[arm] + eps - tolerance:
        return 1.0
    return None
