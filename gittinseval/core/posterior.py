"""Gaussian posterior of each arm's latent mean and of its full-benchmark mean."""

from __future__ import annotations

import numpy as np

from gittinseval.utils.validation import positive_float

__all__ = ["FiniteBenchmarkPosterior"]


class FiniteBenchmarkPosterior:
    """Posterior of ``K`` arms under the working model of the paper.

    Model: ``theta_k ~ N(mu_0, v_0)`` and, given ``theta_k``, every score of arm
    ``k`` is ``N(theta_k, tau_cell^2)``.  A batch of ``b`` scores with sum ``s``
    (batch-mean noise ``tau_cell^2 / b``) updates the latent posterior by

        v' = (1 / v + b / tau_cell^2)^{-1},   mu' = v' (mu / v + s / tau_cell^2).

    The target is the full-benchmark mean ``Zbar_k = (1/N) sum_j Z_kj``.  With
    ``R_k`` the observed sum and ``m_k`` the number of unseen examples
    (paper eq. finite-posterior-moments),

        M_k = (R_k + m_k mu_k) / N,
        V_k = (m_k^2 v_k + m_k tau_cell^2) / N^2.

    All attributes are float64 or int64 arrays of shape ``[K]``.
    """

    def __init__(
        self,
        n_arms: int,
        n_examples: int,
        prior_mean: float,
        prior_var: float,
        cell_var: float = 0.25,
    ) -> None:
        cell_var = positive_float("cell_var", cell_var)
        self.n_examples = int(n_examples)
        self.cell_var = float(cell_var)
        self.score_sum = np.zeros(n_arms)
        self.n_seen = np.zeros(n_arms, dtype=np.int64)
        self.n_batches = np.zeros(n_arms, dtype=np.int64)
        self.mean = np.empty(n_arms)
        self.variance = np.empty(n_arms)
        self.set_prior(prior_mean, prior_var)

    @property
    def completed(self) -> np.ndarray:
        return self.n_seen == self.n_examples

    def set_prior(self, prior_mean: float, prior_var: float) -> None:
        """Recompute every arm's posterior under the prior ``N(prior_mean, prior_var)``.

        From the sufficient statistics ``(R_k, n_k)``:
        ``v_k = (1 / v_0 + n_k / tau_cell^2)^{-1}``,
        ``mu_k = v_k (mu_0 / v_0 + R_k / tau_cell^2)``; nothing is replayed.
        """
        prior_var = positive_float("prior_var", prior_var)
        precision = 1.0 / prior_var + self.n_seen / self.cell_var
        self.latent_var = 1.0 / precision
        self.latent_mean = (prior_mean / prior_var + self.score_sum / self.cell_var) / precision
        self._refresh(slice(None))

    def update(self, arm: int, scores: np.ndarray) -> None:
        """Condition arm ``arm`` on one batch of ``[b]`` scores."""
        count = len(scores)
        if self.n_seen[arm] + count > self.n_examples:
            raise ValueError(f"arm {arm} would exceed its {self.n_examples} examples")
        total = float(np.asarray(scores).sum())
        precision = 1.0 / self.latent_var[arm] + count / self.cell_var
        self.latent_mean[arm] = (
            self.latent_mean[arm] / self.latent_var[arm] + total / self.cell_var
        ) / precision
        self.latent_var[arm] = 1.0 / precision
        self.score_sum[arm] += total
        self.n_seen[arm] += count
        self.n_batches[arm] += 1
        self._refresh(arm)

    def _refresh(self, arms: int | slice) -> None:
        unseen = self.n_examples - self.n_seen[arms]
        n = self.n_examples
        self.mean[arms] = (self.score_sum[arms] + unseen * self.latent_mean[arms]) / n
        self.variance[arms] = (unseen**2 * self.latent_var[arms] + unseen * self.cell_var) / n**2
