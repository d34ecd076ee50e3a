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
from typing import Any

import numpy as np

from gittinseval.core.certificate import check_arm, open_unit_interval
from gittinseval.core.certificate_models.lattice import (
    Lattice,
    RowData,
    central_interval,
    eps_steps,
    win_probabilities,
)
from gittinseval.core.certificate_models.spline_prior import SplinePrior
from gittinseval.core.observations import ObservedCells
from gittinseval.utils.validation import non_negative_float, positive_int

__all__ = ["ArmPosterior", "EmpiricalBayesModel", "PosteriorCertificate"]

_DISPERSION_RANGE = (0.02, 1.0)


@dataclass(frozen=True, eq=False)
class PosteriorCertificate:
    """How sure the posterior is of the recommended arm, and the same numbers for every arm.

    The per-arm arrays have shape ``[K]`` and are read-only; the recommended arm's numbers are
    the properties of the same names without ``arm_``.

    Attributes:
        arm: the recommended arm.
        level: credibility of the intervals, in (0, 1).
        eps: ``eps`` of ``P(eps-best)``, in score units.
        arm_mean: posterior mean of each arm's full-benchmark mean ``Zbar_k``.
        arm_lower, arm_upper: each arm's central credible interval at ``level``.
        arm_prob_best: ``P(Zbar_k >= max_j Zbar_j)`` (ties count as best).
        arm_prob_eps_best: ``P(Zbar_k >= max_j Zbar_j - eps)``.
    """

    arm: int
    level: float
    eps: float
    arm_mean: np.ndarray
    arm_lower: np.ndarray
    arm_upper: np.ndarray
    arm_prob_best: np.ndarray
    arm_prob_eps_best: np.ndarray

    @property
    def mean(self) -> float:
        return float(self.arm_mean[self.arm])

    @property
    def lower(self) -> float:
        return float(self.arm_lower[self.arm])

    @property
    def upper(self) -> float:
        return float(self.arm_upper[self.arm])

    @property
    def prob_best(self) -> float:
        return float(self.arm_prob_best[self.arm])

    @property
    def prob_eps_best(self) -> float:
        return float(self.arm_prob_eps_best[self.arm])

    def as_dict(self) -> dict[str, Any]:
        """The recommended arm's numbers as JSON values."""
        return {
            "arm": self.arm,
            "mean": self.mean,
            "lower": self.lower,
            "upper": self.upper,
            "level": self.level,
            "prob_best": self.prob_best,
            "prob_eps_best": self.prob_eps_best,
            "eps": self.eps,
        }


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
        self._cells_at_fit = -1

    # ------------------------------------------------------------------ public API
    def certify(
        self, observed: ObservedCells, recommended: int, *, level: float = 0.95, eps: float = 0.01
    ) -> PosteriorCertificate:
        """The certificate of arm ``recommended`` (numbers for every arm; maths in the module docstring)."""
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
        return PosteriorCertificate(
            arm=recommended,
            level=level,
            eps=eps,
            arm_mean=_read_only(mean[index]),
            arm_lower=_read_only(lower[index]),
            arm_upper=_read_only(upper[index]),
            arm_prob_best=_read_only(prob_best[index]),
            arm_prob_eps_best=_read_only(prob_eps_best[index]),
        )

    def prob_eps_best(self, observed: ObservedCells, arm: int, eps: float = 0.01) -> float:
        """``P(Zbar_arm >= max_j Zbar_j - eps)``, the confidence stop's check.

        Cheap bounds settle it first when they can: it is 0 when some arm's least possible mean
        ``R_j / N`` exceeds ``arm``'s greatest ``(R_arm + m_arm) / N`` by more than ``eps``, and 1 when
        every other arm's greatest possible mean is at most ``arm``'s least plus ``eps``.  Otherwise the
        exact lattice sum, ``O(U X)``, about as cheap as bounds on it would be.
        """
        observed = _check_observed(observed)
        arm = check_arm(arm, observed.n_arms)
        eps = non_negative_float("eps", eps)
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
        posterior = self.posterior(observed)
        row = posterior.row_of_arm[arm]
        _, prob = win_probabilities(
            posterior.rows, posterior.counts, eps_steps(posterior.lattice, eps), posterior.lattice.binary, [row]
        )
        return float(prob[0])

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
        """The ``[X]`` lattice log-prior of the last fit (a copy), or ``None`` before the first."""
        return None if self._prior is None else self._prior.log_prior.copy()

    # ------------------------------------------------------------------ the posterior
    def posterior(self, observed: ObservedCells) -> ArmPosterior:
        """Every arm's lattice posterior, refitting the prior first if it is due."""
        lattice = self._lattice_for(observed)
        data, row_of_arm, counts = self._rows(observed, lattice)
        log_lik = lattice.log_likelihood(data)  # [U, X]
        cells = int(observed.n_seen.sum())
        due = self._cells_at_fit < 0 or cells < self._cells_at_fit
        due = due or cells > (1.0 + self.refit_growth) * self._cells_at_fit or self.refit_growth == 0
        if due:
            self._refit(log_lik, data, counts)
            self._cells_at_fit = cells
        rows = lattice.posterior(log_lik, self._prior.log_prior)
        return ArmPosterior(lattice=lattice, rows=rows, row_of_arm=row_of_arm, counts=counts, data=data)

    def fit(self, observed: ObservedCells) -> np.ndarray:
        """Refit the prior now; returns the ``[X]`` lattice log-prior."""
        observed = _check_observed(observed)
        lattice = self._lattice_for(observed)
        data, _, counts = self._rows(observed, lattice)
        self._refit(lattice.log_likelihood(data), data, counts)
        self._cells_at_fit = int(observed.n_seen.sum())
        return self._prior.log_prior.copy()

    def _refit(self, log_lik: np.ndarray, data: RowData, counts: np.ndarray) -> None:
        seen = data.n_seen > 0
        rows = log_lik[seen]
        likelihood = np.exp(rows - rows.max(axis=1, keepdims=True))
        self._prior.fit(likelihood, counts[seen])

    def _lattice_for(self, observed: ObservedCells) -> Lattice:
        lattice = self._lattice
        if lattice is None or lattice.n_examples != observed.n_examples or lattice.binary != observed.binary:
            lattice = Lattice(observed.n_examples, observed.binary, self.continuous_points)
            self._lattice = lattice
            self._prior = SplinePrior(
                lattice.logit_points,
                lattice.points,
                knots=self.knots,
                penalty=self.penalty,
                default_arms=self.default_arms,
            )
            self._cells_at_fit = -1
        return lattice

    def _rows(self, observed: ObservedCells, lattice: Lattice) -> tuple[RowData, np.ndarray, np.ndarray]:
        """The rows of the posterior: 0/1 arms grouped by ``(R, n)``, continuous arms one row each."""
        counts_seen = observed.n_seen.astype(np.int64)
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
