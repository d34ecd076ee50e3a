"""Means of runs and their standard errors, clustered by seed; shares of runs and their Wilson intervals.

A run's seed fixes its random draws on every benchmark of a panel (BO's initial
design, for one, is the same configurations on every MMLU subject), so runs of one
seed are not independent: a panel of S subjects and G seeds holds G independent
draws, not S G.  The cluster-robust (CR1) variance of a mean allows any
correlation within a seed.

A share of runs in which something happened (:class:`Share`) is given with its Wilson
interval (:func:`wilson_interval`), the runs taken as independent.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

__all__ = ["Estimate", "Share", "clustered_mean_se", "wilson_interval"]


def clustered_mean_se(values: np.ndarray, clusters: Sequence) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column means of ``values [R, P]`` (``nan``: no value) and their seed-clustered standard errors.

    For column ``p`` with ``n_p`` values in ``G_p`` clusters (``clusters [R]``: the seed of each row),

        mean_p = (1 / n_p) sum_i x_ip,
        SE_p^2 = G_p / (G_p - 1) * sum_g (sum_{i in g} (x_ip - mean_p))^2 / n_p^2.

    With one value per cluster ``SE_p`` is the usual ``sd / sqrt(n_p)``; with equal
    numbers per cluster, the SE of the ``G_p`` cluster means.  A 1-D ``values`` is one column.

    Returns:
        ``mean [P]`` (``nan`` without values), ``se [P]`` (``nan`` where ``G_p < 2``:
        no spread between clusters to estimate) and ``G_p [P]``.
    """
    x = np.asarray(values, dtype=float)
    x = x[:, None] if x.ndim == 1 else x
    if x.ndim != 2 or len(clusters) != x.shape[0]:
        raise ValueError(f"values must be [R] or [R, P] with one cluster per row, got {x.shape} and {len(clusters)}")
    present = ~np.isnan(x)
    count = present.sum(axis=0)
    mean = np.divide(np.where(present, x, 0.0).sum(axis=0), count, out=np.full(x.shape[1], np.nan), where=count > 0)
    _, cluster = np.unique(np.asarray(clusters), return_inverse=True)
    membership = np.zeros((cluster.max() + 1, x.shape[0]))
    membership[cluster, np.arange(x.shape[0])] = 1.0
    cluster_sums = membership @ np.where(present, x - mean, 0.0)  # [G, P]
    n_clusters = ((membership @ present) > 0).sum(axis=0)
    se = np.full(x.shape[1], np.nan)
    several = n_clusters > 1
    g = n_clusters[several]
    se[several] = np.sqrt(g / (g - 1) * (cluster_sums[:, several] ** 2).sum(axis=0)) / count[several]
    return mean, se, n_clusters


@dataclass(frozen=True)
class Estimate:
    """The mean of ``n`` values drawn under ``seeds`` distinct seeds, and its seed-clustered standard error.

    ``se`` is that of :func:`clustered_mean_se`, except that a single value's is 0 (the
    value is its own mean); several values of one seed leave it ``nan`` (no spread between
    seeds to estimate).
    """

    mean: float
    se: float
    n: int
    seeds: int

    @classmethod
    def of(cls, measured: Sequence[tuple[float, Hashable]]) -> Estimate | None:
        """The estimate of ``(value, seed)`` pairs; ``None`` without any."""
        if not measured:
            return None
        values, seeds = zip(*measured, strict=True)
        mean, se, n_seeds = clustered_mean_se(np.asarray(values, dtype=float), seeds)
        return cls(float(mean[0]), 0.0 if len(values) == 1 else float(se[0]), len(values), int(n_seeds[0]))


def wilson_interval(hits: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a binomial share ``hits / n`` at ``level``:
    ``(p + z^2/2n -+ z sqrt(p (1 - p) / n + z^2 / 4n^2)) / (1 + z^2 / n)``, ``z = Phi^{-1}((1 + level) / 2)``.
    Unlike ``p -+ z SE`` it is not empty at 0 or ``n`` hits (``[0, z^2 / (n + z^2)]`` at 0)."""
    z = NormalDist().inv_cdf(0.5 + level / 2)
    share, z2 = hits / n, z * z
    centre = share + z2 / (2 * n)
    half = z * math.sqrt(share * (1 - share) / n + z2 / (4 * n * n))
    return max(0.0, (centre - half) / (1 + z2 / n)), min(1.0, (centre + half) / (1 + z2 / n))


@dataclass(frozen=True)
class Share:
    """``hits`` of ``n`` runs (or statements): its ``value`` ``hits / n`` and the 95 % Wilson ``interval``
    of it.  ``n`` may be 0 (nothing to count), which has neither."""

    hits: int
    n: int

    @classmethod
    def of(cls, happened: Sequence[bool]) -> Share:
        """The share of ``happened`` that are true."""
        return cls(sum(happened), len(happened))

    @property
    def value(self) -> float:
        return self.hits / self.n

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.hits, self.n)
