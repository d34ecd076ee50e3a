"""Every 0/1 arm's lattice posterior row, kept up to date between the confidence-stop checks of a run.

A run checks the stop after every batch, and a batch changes the data ``(R_k, n_k)`` of a few arms
only; between refits of the prior the other arms' posterior rows ``p_k`` and their
``log F_k(x + eps)`` (:func:`~gittinseval.core.certificate_models.lattice.log_cdf_at_eps`) are
unchanged.  :class:`BinaryRows` keeps both ``[K, X]`` tables and recomputes only the rows whose
data changed since they were computed (one row per distinct ``(R, n)`` of exchangeable arms), so
that a check costs ``O(changed x X)`` for the rows plus the sum below, not ``K`` posteriors.

The exact ``P(eps-best)`` of an arm ``a`` is

    sum_i p_a(x_i) prod_{k != a} F_k(x_i + eps),

and only the columns where ``p_a > 0`` contribute (elsewhere the term is ``0 x exp(<= 0)``), so the
sum is taken over that contiguous window of ``a``'s support: the same sum as
:func:`~gittinseval.core.certificate_models.lattice.win_probabilities`, over fewer columns.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["BinaryRows", "RowMaker"]

RowMaker = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""``make(arms, ones, n_seen) -> (post, log_cdf)``: the ``[A, X]`` posterior rows of ``arms`` with ``ones`` and
``n_seen`` observed, and their ``log F(x + eps)``."""


class BinaryRows:
    """The ``[K, X]`` posterior rows of 0/1 arms and their ``log F(x + eps)``, for one prior fit and one ``eps``.

    Args:
        n_arms: ``K``.
        size: ``X``, the lattice's points.
        shared_prior: whether every arm has the same prior (exchangeable arms), so that arms with the same
            ``(R, n)`` share one computation.
    """

    def __init__(self, n_arms: int, size: int, *, shared_prior: bool) -> None:
        self.post = np.zeros((n_arms, size))
        self.log_cdf = np.zeros((n_arms, size))
        self._ones = np.full(n_arms, -1, dtype=np.int64)  # the data each row was computed with; -1: none yet
        self._n_seen = np.full(n_arms, -1, dtype=np.int64)
        self._shared_prior = shared_prior

    def refresh(self, ones: np.ndarray, n_seen: np.ndarray, make: RowMaker, arms: np.ndarray | None = None) -> None:
        """Recompute with ``make`` (:data:`RowMaker`) the rows of ``arms`` (default all) whose data is no longer
        ``(ones, n_seen)`` (``[K]`` each)."""
        arms = np.arange(ones.size) if arms is None else np.asarray(arms)
        stale = arms[(self._ones[arms] != ones[arms]) | (self._n_seen[arms] != n_seen[arms])]
        if stale.size == 0:
            return
        if self._shared_prior:
            pairs, first, which = np.unique(
                np.stack([ones[stale], n_seen[stale]]), axis=1, return_index=True, return_inverse=True
            )
            post, log_cdf = make(stale[first], pairs[0], pairs[1])
            which = which.reshape(-1)
            self.post[stale], self.log_cdf[stale] = post[which], log_cdf[which]
        else:
            self.post[stale], self.log_cdf[stale] = make(stale, ones[stale], n_seen[stale])
        self._ones[stale], self._n_seen[stale] = ones[stale], n_seen[stale]

    def eps_best(self, arm: int) -> float:
        """``P(Zbar_arm >= max_{k != arm} Zbar_k - eps)`` from the current rows of every arm."""
        own = self.post[arm]
        support = np.flatnonzero(own)
        low, high = support[0], support[-1] + 1
        # Every term is <= 0, so the sums are finite or -inf and never inf - inf.
        total = self.log_cdf[:arm, low:high].sum(axis=0) + self.log_cdf[arm + 1 :, low:high].sum(axis=0)
        return float(np.clip(own[low:high] @ np.exp(total), 0.0, 1.0))
