"""Each arm's posterior of its full-benchmark mean on a lattice, and the probabilities read from it.

The target of a certificate is the full-benchmark mean ``Zbar_k = (1/N) sum_j Z_kj``, a
finite-population quantity.  Its posterior is held on a lattice of ``X`` points
``x_0 < ... < x_{X-1}`` of ``[0, 1]``, one row of probabilities per arm (or per group of arms
with the same data and prior), so that every certificate quantity is exact for the lattice:

- 0/1 scores: the lattice is ``x_i = i / N`` (``X = N + 1``), every value ``Zbar`` can take.  Arm
  ``k`` scored ``n`` examples drawn uniformly without replacement (a uniformly random order per
  arm; which arms are scored, and how often, is chosen from past scores only and is ignorable)
  and saw ``R`` ones.  Given ``Y = N Zbar`` ones in all, ``R`` is hypergeometric:

      P(R | Y) = C(Y, R) C(N - Y, n - R) / C(N, n),   R <= Y <= R + m,  m = N - n,

  exact whatever the scores of the unseen examples are (the finite-population remainder needs no
  model of its own).  With a prior ``g`` on the lattice, the posterior is
  ``p(Y) ~ g(Y) P(R | Y)``.
- Continuous scores in ``[0, 1]``: the lattice is ``x_i = i / (X - 1)`` and the sample mean
  ``ybar = R / n`` of a simple random sample has, by the central limit theorem for sampling
  without replacement, the likelihood

      ybar | Zbar = x  ~  N(x, (1 - n/N) phi x (1 - x) / n),

  with ``phi`` in ``(0, 1]`` the arm's dispersion (``Var(score) = phi x (1 - x)``, at most the 0/1
  worst case ``phi = 1``), estimated from ``score_sq_sum``; ``Zbar`` is restricted to the values it
  can take, ``[R / N, (R + m) / N]``.

Probabilities (arms independent given their data, rows ``u`` with ``c_u`` arms each, ``F_u``
their lattice CDFs):

    P(best)_u     = sum_i p_u(x_i) prod_v F_v(x_i)^{c_v - [v = u]},
    P(eps-best)_u = sum_i p_u(x_i) prod_v F_v(x_i + eps)^{c_v - [v = u]},

evaluated in ``O(U X)`` with ``S(x) = sum_v c_v log F_v(x)``.  For 0/1 scores these are exact
(``F_v(x + eps)`` is the step CDF; a tie counts as best, ``P(Zbar_u >= max_v Zbar_v)``, so the
``P(best)`` of tied arms can sum to more than 1).  For continuous scores the mass of a cell is
spread uniformly over it: ``F`` is taken at the cell's middle (``F(x_{i-1}) + p(x_i) / 2``) and
linearly interpolated at ``x + eps``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

__all__ = [
    "Lattice",
    "RowData",
    "central_interval",
    "eps_best_against",
    "eps_steps",
    "log_cdf_at_eps",
    "win_probabilities",
]



@dataclass(frozen=True)
class RowData:
    """The observed data of ``U`` rows (arms, or groups of arms with the same data), shapes ``[U]``.

    Attributes:
        score_sum: ``R``, the sum of the observed scores.
        n_seen: ``n``, the number of observed scores.
        dispersion: ``phi`` of continuous scores (ignored for 0/1 scores).
    """

    score_sum: np.ndarray
    n_seen: np.ndarray
    dispersion: np.ndarray


class Lattice:
    """The lattice of ``Zbar`` values of a benchmark with ``N`` examples, and the likelihood on it.

    Args:
        n_examples: ``N``.
        binary: 0/1 scores (lattice ``i / N``, hypergeometric likelihood) or continuous scores
            (lattice of ``continuous_points`` points, Gaussian likelihood).
        continuous_points: ``X`` for continuous scores.
    """

    def __init__(self, n_examples: int, binary: bool, continuous_points: int = 401) -> None:
        self.n_examples = int(n_examples)
        self.binary = bool(binary)
        self.size = self.n_examples + 1 if self.binary else int(continuous_points)
        self.points = np.arange(self.size) / (self.size - 1)  # [X]
        self.step = 1.0 / (self.size - 1)
        if self.binary:
            self._log_factorial = gammaln(np.arange(self.n_examples + 1) + 1.0)  # [N + 1]
            # log k! at index k + N, +inf for k < 0: [2N + 1].
            self._padded_log_factorial = np.concatenate([np.full(self.n_examples, np.inf), self._log_factorial])
        # The coordinate of the prior's spline basis: the logit of each cell's middle, finite at 0 and 1.
        middle = (np.arange(self.size) + 0.5) / self.size
        self.logit_points = np.log(middle / (1.0 - middle))  # [X]

    def log_likelihood(self, rows: RowData) -> np.ndarray:
        """``[U, X]`` log-likelihood of each row's data at each lattice value, up to a constant per row;
        ``-inf`` where ``Zbar`` cannot lie.  A row with no observations has 0 everywhere."""
        if self.binary:
            return self._hypergeometric(rows)
        return self._gaussian(rows)

    def _hypergeometric(self, rows: RowData) -> np.ndarray:
        big_n = self.n_examples
        ones = np.rint(rows.score_sum).astype(np.int64)[:, None]  # [U, 1]
        unseen = (big_n - rows.n_seen.astype(np.int64))[:, None]
        total = np.arange(self.size)  # Y
        # log C(Y, R) + log C(N - Y, n - R) without the terms constant in Y: log Y! + log (N - Y)! minus the log
        # factorials of Y - R (the unseen ones) and R + m - Y (the unseen zeros), each in [-N, N]; a negative one
        # reads +inf from the padding, so Y where Zbar cannot lie gets -inf.
        padded = self._padded_log_factorial
        log_lik = (self._log_factorial[total] + self._log_factorial[big_n - total])[None, :]
        log_lik = log_lik - padded[total[None, :] + (big_n - ones)]
        return log_lik - padded[(ones + unseen + big_n) - total[None, :]]

    def _gaussian(self, rows: RowData) -> np.ndarray:
        big_n = self.n_examples
        counts = rows.n_seen.astype(np.float64)[:, None]
        total = rows.score_sum[:, None]
        x = self.points[None, :]
        spread = np.maximum(x * (1.0 - x), 0.25 / big_n)  # keeps the variance positive at 0 and 1
        with np.errstate(divide="ignore", invalid="ignore"):
            variance = rows.dispersion[:, None] * spread * (1.0 - counts / big_n) / counts
            mean = total / counts
            log_lik = -0.5 * (mean - x) ** 2 / variance - 0.5 * np.log(variance)
        log_lik = np.where(counts > 0, log_lik, 0.0)
        # Zbar lies in [R / N, (R + m) / N]; a cell counts if it overlaps that range.
        half = 0.5 * self.step
        low = total / big_n
        high = (total + big_n - counts) / big_n
        valid = (x + half >= low) & (x - half <= high)
        complete = (counts >= big_n)[:, 0]
        if complete.any():
            # A completed arm is known: its mass goes to the two cells around R / N, keeping the mean.
            with np.errstate(divide="ignore"):
                log_lik[complete] = np.log(_two_point_mass(low[complete, 0], self.size))
            valid[complete] = True
        return np.where(valid & np.isfinite(log_lik), log_lik, -np.inf)

    def posterior(self, log_lik: np.ndarray, log_prior: np.ndarray) -> np.ndarray:
        """``[U, X]`` posterior probabilities from a ``[U, X]`` log-likelihood and a ``[X]`` or ``[U, X]`` log-prior."""
        log_post = log_lik + log_prior
        log_post -= log_post.max(axis=1, keepdims=True)
        post = np.exp(log_post)
        post /= post.sum(axis=1, keepdims=True)
        return post


def _two_point_mass(value: np.ndarray, size: int) -> np.ndarray:
    """``[U, X]`` probabilities on the lattice ``i / (X - 1)`` with mean ``value``, on its two nearest points."""
    position = np.clip(value, 0.0, 1.0) * (size - 1)
    lower = np.minimum(np.floor(position).astype(np.int64), size - 2)
    upper_weight = position - lower
    mass = np.zeros((value.size, size))
    rows = np.arange(value.size)
    mass[rows, lower] = 1.0 - upper_weight
    mass[rows, lower + 1] += upper_weight
    return mass


def eps_steps(lattice: Lattice, eps: float) -> float:
    """``eps`` in lattice steps: a whole number for 0/1 scores (``Zbar_j <= x + eps`` with ``x`` and
    ``Zbar_j`` on the lattice), a fraction for continuous scores."""
    if lattice.binary:
        return float(np.floor(eps * lattice.n_examples + 1e-9))
    return eps / lattice.step


def _cdfs(post: np.ndarray, binary: bool) -> np.ndarray:
    """``[U, X]`` ``F_u(x_i)``: the step CDF ``P(Zbar <= x_i)`` (0/1 scores) or the CDF at the middle of cell ``i``
    (continuous), in ``[0, 1]``."""
    lower = np.cumsum(post, axis=1)
    if not binary:
        lower -= 0.5 * post
    return np.clip(lower, 0.0, 1.0, out=lower)


def _log_cdfs(post: np.ndarray, binary: bool) -> np.ndarray:
    """``[U, X]`` ``log F_u(x_i)`` (see :func:`_cdfs`).  The upper half comes from ``log1p`` of the upper tail, so
    that sums of many logarithms of CDFs near 1 keep their precision."""
    upper = np.cumsum(post[:, ::-1], axis=1)[:, ::-1]  # P(Zbar >= x_i)
    above = np.zeros_like(post)
    above[:, :-1] = upper[:, 1:]  # P(Zbar > x_i)
    if not binary:
        above += 0.5 * post
    above = np.clip(above, 0.0, 1.0)
    lower = _cdfs(post, binary)
    with np.errstate(divide="ignore"):
        return np.where(above < 0.5, np.log1p(-above), np.log(lower))


def _shift(values: np.ndarray, steps: float, binary: bool, log: bool) -> np.ndarray:
    """``[U, X]`` ``F_u(x_i + eps)`` from ``[U, X]`` CDFs ``values`` (``log F`` in and out if ``log``), with ``eps``
    in lattice steps (``F = 1`` beyond the lattice; continuous: linear between cell middles)."""
    size = values.shape[1]
    if binary or steps == int(steps):
        whole = int(steps)
        shifted = np.zeros_like(values) if log else np.ones_like(values)
        if whole < size:
            shifted[:, : size - whole] = values[:, whole:]
        return shifted
    position = np.arange(size) + steps
    lower = np.floor(position).astype(np.int64)
    weight = position - lower
    padded = np.concatenate([np.exp(values) if log else values, np.ones((values.shape[0], 2))], axis=1)
    lower = np.minimum(lower, size)
    cdf = (1.0 - weight) * padded[:, lower] + weight * padded[:, lower + 1]
    if not log:
        return cdf
    with np.errstate(divide="ignore"):
        return np.log(cdf)


def log_cdf_at_eps(post: np.ndarray, steps: float, binary: bool) -> np.ndarray:
    """``[U, X]`` ``log F_u(x_i + eps)`` of posterior rows ``post`` (``eps`` in lattice steps): what a row
    contributes to another row's ``P(eps-best)``."""
    return _shift(_log_cdfs(post, binary), steps, binary, log=True)


def eps_best_against(own: np.ndarray, rivals_log_cdf: np.ndarray) -> float:
    """``P(Zbar >= max_v Zbar_v - eps)`` of one row ``own`` (``[X]`` probabilities) against the rows whose
    :func:`log_cdf_at_eps` are ``rivals_log_cdf`` (``[C, X]``), all independent:
    ``sum_i p(x_i) prod_v F_v(x_i + eps)``."""
    total = rivals_log_cdf.sum(axis=0)  # every term <= 0, so no inf - inf
    return float(np.clip(own @ np.exp(total), 0.0, 1.0))


def win_probabilities(
    post: np.ndarray, counts: np.ndarray, steps: float, binary: bool, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``P(best)`` and ``P(eps-best)`` of rows ``rows`` (default all) of independent arms on a lattice.

    Args:
        post: ``[U, X]`` posterior probabilities of the rows.
        counts: ``[U]`` number of arms of each row (arms with the same data and prior share a row).
        steps: ``eps`` in lattice steps (:func:`eps_steps`).
        binary: 0/1 scores (step CDF, ties count as best) or continuous (mid-cell CDF).
        rows: ``[R]`` rows to return (all rows enter the products).

    Returns:
        ``[R]`` ``P(best)`` and ``[R]`` ``P(eps-best)`` (the module docstring's sums).
    """
    cdf = _cdfs(post, binary)  # [U, X]
    rows = np.arange(post.shape[0]) if rows is None else np.asarray(rows)
    own = post[rows]  # [R, X]
    shared = not np.all(counts == 1)
    results = []
    for f in (cdf, _shift(cdf, steps, binary, log=False)):
        # prod_u F_u(x)^{c_u}: products of values in [0, 1], where sums of logarithms would take U x X logarithms.
        # An underflow to 0 only drops terms below 1e-308.
        product = np.prod(f**counts[:, None] if shared else f, axis=0)  # [X]
        # Where p_u(x) > 0, F_u(x) >= p_u(x) > 0: p_u(x) prod_{v != u} F_v(x) = (p_u(x) / F_u(x)) prod_v F_v(x).
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(own > 0, own / f[rows], 0.0)
        results.append(np.clip(ratio @ product, 0.0, 1.0))
    return results[0], results[1]


def central_interval(post: np.ndarray, points: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """``[U]`` lower and upper ends of each row's central credible interval: the lattice points where the CDF
    first reaches ``(1 - level) / 2`` and ``(1 + level) / 2`` (at least ``level`` of the mass lies between)."""
    cdf = np.cumsum(post, axis=1)
    tail = 0.5 * (1.0 - level)
    lower = np.minimum(np.sum(cdf < tail - 1e-12, axis=1), points.size - 1)
    upper = np.minimum(np.sum(cdf < 1.0 - tail - 1e-12, axis=1), points.size - 1)
    return points[lower], points[upper]
