"""Empirical-Bayes estimate of the shared prior ``N(mu_0, v_0)`` (GittinsEval-EB).

The working model of :class:`~gittinseval.core.posterior.FiniteBenchmarkPosterior` is
``theta_k ~ N(mu_0, v_0)`` and scores ``N(theta_k, tau_cell^2)``.  After ``n_k``
scores with mean ``y_k``, arm ``k`` contributes the marginal likelihood
``y_k ~ N(mu_0, v_0 + s_k^2)`` with ``s_k^2 = tau_cell^2 / n_k``.  Which arms were
evaluated, and how often, depends only on scores already observed, so this
likelihood is the right one under adaptive allocation (the allocation rule is
ignorable); moment estimators that treat the counts as fixed are not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from gittinseval.utils.validation import non_negative_float, positive_float

__all__ = ["EmpiricalPriorEstimator"]

_COARSE_POINTS = 33


@dataclass(frozen=True)
class EmpiricalPriorEstimator:
    """Penalised restricted maximum likelihood (REML) of ``(mu_0, v_0)``.

    Let the observed arms (``n_k >= 1``) have means ``y_k`` and sampling variances
    ``s_k^2 = tau_cell^2 / n_k``, and write ``sigma_k^2 = v + s_k^2``,
    ``w_k = 1 / sigma_k^2``.  The starting (general) prior ``N(m_g, v_g)`` enters
    as ``kappa = prior_arms`` pseudo-arms whose means are known exactly, with mean
    ``m_g`` and sample variance ``v_g`` (sum of squares ``(kappa - 1) v_g``).  With
    ``W = sum_k w_k + kappa / v`` the weighted mean is

        mu(v) = (sum_k w_k y_k + kappa m_g / v) / W,

    and the restricted log-likelihood of ``v`` (``mu_0`` integrated out under a
    flat prior) is, up to a constant,

        l(v) = -1/2 [ sum_k log sigma_k^2 + sum_k w_k (y_k - mu(v))^2 + log W
                      + kappa log v + ((kappa - 1) v_g + kappa (m_g - mu(v))^2) / v ].

    The estimate is ``v_0 = argmax l(v)`` over ``[var_floor, max(v_g, tau_cell^2)]``
    (a mean of scores in [0, 1] has variance at most 1/4 = the default
    ``tau_cell^2``) and ``mu_0 = mu(v_0)``.  With no data it is exactly
    ``(m_g, v_g)``; as arms accumulate the pseudo-arms' weight fades.  With
    ``kappa = 0`` and every arm at the same count ``n`` it is the textbook method of
    moments, ``mu_0 = ybar``, ``v_0 = max(var_floor, S^2 - tau_cell^2 / n)`` with
    ``S^2 = sum_k (y_k - ybar)^2 / (K - 1)``.  The maximum is found on a coarse
    log grid of ``v`` and refined by bounded Brent search around the best point.

    GittinsEval's root tables depend on ``v_0``.  The policy keeps the ``v_0`` of
    its current tables until the estimate differs from it by more than a factor
    ``exp(tolerance)``; it then moves to the estimate snapped to the log grid
    ``v_g exp(j * tolerance)`` (integer ``j``, not below the floor), whose tables
    are built once and cached.  So the ``v_0`` in use is always within a factor
    ``exp(tolerance)`` of the estimate, and an estimate hovering at a grid
    boundary does not switch tables back and forth.

    Args:
        var_floor: smallest ``v_0`` (positive, finite); keeps the prior from
            collapsing when arms look alike.
        tolerance: largest ``|log(v_0 / estimate)|`` kept before switching root
            tables, and the log spacing of their grid (positive, finite).
        prior_arms: ``kappa``, the weight of the starting prior in pseudo-arms
            observed without noise; 0 (no shrinkage) or larger than 1.
        refit_growth: the prior is refitted after a batch once the number of
            observed scores has grown by this fraction since the last fit
            (0: after every batch); non-negative, finite.
    """

    var_floor: float = 1e-4
    tolerance: float = 0.25
    prior_arms: float = 5.0
    refit_growth: float = 0.05

    def __post_init__(self) -> None:
        for key in ("var_floor", "tolerance"):
            positive_float(f"prior estimator {key}", getattr(self, key))
        kappa = self.prior_arms
        if not (isinstance(kappa, (int, float)) and math.isfinite(kappa) and (kappa == 0 or kappa > 1)):
            raise ValueError(f"prior estimator prior_arms must be 0 or a finite number > 1, got {kappa!r}")
        non_negative_float("prior estimator refit_growth", self.refit_growth)

    def estimate(
        self,
        score_sums: np.ndarray,
        counts: np.ndarray,
        start_mean: float,
        start_var: float,
        cell_var: float = 0.25,
    ) -> tuple[float, float]:
        """``(mu_0, v_0)`` from the arms' ``[K]`` score sums and ``[K]`` counts."""
        counts = np.asarray(counts)
        observed = counts > 0
        kappa = float(self.prior_arms)
        if (observed.sum() + kappa < 2) or not observed.any():
            return float(start_mean), max(float(start_var), self.var_floor)
        means = np.asarray(score_sums, dtype=np.float64)[observed] / counts[observed]
        sampling_vars = cell_var / counts[observed].astype(np.float64)
        lower = math.log(self.var_floor)
        upper = max(math.log(max(start_var, cell_var)), lower)

        def negative_loglik(log_var: np.ndarray) -> np.ndarray:
            return -self._restricted_loglik(np.exp(log_var), means, sampling_vars, start_mean, start_var)[0]

        coarse = np.linspace(lower, upper, _COARSE_POINTS)
        best = int(np.argmin(negative_loglik(coarse)))
        log_var = coarse[best]
        if upper > lower:
            refined = minimize_scalar(
                lambda t: float(negative_loglik(np.array([t]))[0]),
                bounds=(coarse[max(best - 1, 0)], coarse[min(best + 1, _COARSE_POINTS - 1)]),
                method="bounded",
                options={"xatol": 1e-10},
            )
            if refined.fun <= negative_loglik(np.array([log_var]))[0]:
                log_var = refined.x
        var = float(np.exp(log_var))
        mean = float(self._restricted_loglik(np.array([var]), means, sampling_vars, start_mean, start_var)[1][0])
        return mean, var

    def _restricted_loglik(
        self, var: np.ndarray, means: np.ndarray, sampling_vars: np.ndarray, start_mean: float, start_var: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """``l(v)`` and ``mu(v)`` of the class docstring for ``[G]`` values of ``v``."""
        kappa = float(self.prior_arms)
        total_vars = var[:, None] + sampling_vars[None, :]  # [G, K]
        weights = 1.0 / total_vars
        pseudo_weight = kappa / var
        weight_sum = weights.sum(axis=1) + pseudo_weight
        mean = (weights @ means + pseudo_weight * start_mean) / weight_sum
        residual = (weights * (means[None, :] - mean[:, None]) ** 2).sum(axis=1)
        pseudo_squares = max(kappa - 1.0, 0.0) * start_var + kappa * (start_mean - mean) ** 2
        loglik = -0.5 * (
            np.log(total_vars).sum(axis=1)
            + residual
            + np.log(weight_sum)
            + kappa * np.log(var)
            + pseudo_squares / var
        )
        return loglik, mean

    def grid_index(self, var: float, start_var: float) -> int:
        """Grid cell ``j`` of ``var`` on ``v_g exp(j * tolerance)``, not below the floor."""
        lowest = math.ceil(math.log(self.var_floor / start_var) / self.tolerance - 1e-9)
        return max(round(math.log(var / start_var) / self.tolerance), lowest)

    def grid_var(self, index: int, start_var: float) -> float:
        """The prior variance ``v_g exp(index * tolerance)`` of grid cell ``index``."""
        return float(start_var * math.exp(index * self.tolerance))
