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

evaluated in ``O(U X)`` with ``S(x) = sum_v c_v log F_v(x)``.

Arms that share one uncertain effect (:class:`SharedEffect`: the arms of an unseen level of an
attribute, ``Zbar_k = m_k + t + e_k`` with ``t ~ N(0, v)`` common to them) are independent of the other
arms but not of each other.  Their factor of the product is the CDF of their maximum,
``F_max(x) = P(max_k Zbar_k <= x)``, which replaces ``sum_k log F_k(x)`` in ``S``, and an arm ``a`` of
the group has ``P_a = sum_i mass_a(x_i) exp(S(x_i) - log F_max(x_i))`` with ``mass_a(x_i) = P(Zbar_a =
x_i, its siblings <= x_i)`` (and ``x_i + eps``, with ``F(x + eps)`` in ``S``, for ``P(eps-best)``):
:func:`shared_effect` computes both by sums over ``t``.  Treating such arms as independent
instead makes the maximum of a hundred barely-known siblings look far higher than it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, log_ndtr

__all__ = [
    "Lattice",
    "RowData",
    "SharedEffect",
    "central_interval",
    "eps_best_against",
    "eps_steps",
    "log_cdf_at_eps",
    "shared_effect",
    "shift_log_cdf",
    "win_probabilities",
]

_LOG_TINY = -1e300
# exp of less is below the smallest positive float: a column there adds nothing.
_LOG_NEGLIGIBLE = -745.0
# The shared effect's values run this many of its standard deviations each way (a tail of 2e-11).
_EFFECT_SDS = 7.0
# An arm's own part is summed over this many of its standard deviations each way (a tail of 1e-19).
_SUPPORT_SDS = 9.0
# Arms of a shared effect whose leading masses are computed together (bounds the [M, X, K] arrays).
_MEMBER_CHUNK = 16


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


@dataclass(frozen=True)
class SharedEffect:
    """``A`` arms whose means share one uncertain effect: the CDF of their maximum and each arm's mass where it leads.

    Attributes:
        rows: ``[A]`` the arms' rows in the posterior they belong to (their own rows there are not used).
        log_cdf: ``[X]`` ``log P(max_k Zbar_k <= x_i)`` over the group's arms.
        member_rows: ``[M]`` the rows (of ``rows``) whose own probabilities can be read.
        leading_mass: ``leading_mass(s, members, columns)``: ``[len(members), C]`` ``P(Zbar_a = x_i, every sibling
            <= x_i + s)`` with ``s`` = 0 (``s = 0``) or ``eps`` (``s = 1``), of ``member_rows[members]`` at the
            lattice ``columns`` (computed when asked: the sums over the effect are the costly part).
    """

    rows: np.ndarray
    log_cdf: np.ndarray
    member_rows: np.ndarray
    leading_mass: Callable[[int, np.ndarray, np.ndarray], np.ndarray]


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
        total = np.arange(self.size)[None, :]  # [1, X]: Y
        above = total - ones  # Y - R, the unseen ones
        below = ones + unseen - total  # R + m - Y, the unseen zeros
        valid = (above >= 0) & (below >= 0)
        lf = self._log_factorial
        # log C(Y, R) + log C(N - Y, n - R) without the terms constant in Y.
        log_lik = lf[total] - lf[np.clip(above, 0, big_n)] + lf[big_n - total] - lf[np.clip(below, 0, big_n)]
        return np.where(valid, log_lik, -np.inf)

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


def _log_cdfs(post: np.ndarray, binary: bool) -> np.ndarray:
    """``[U, X]`` ``log F_u(x_i)``: the step CDF ``P(Zbar <= x_i)`` (0/1 scores) or the CDF at the middle
    of cell ``i`` (continuous).  The upper half comes from ``log1p`` of the upper tail, so that products of
    many CDFs near 1 keep their precision."""
    upper = np.cumsum(post[:, ::-1], axis=1)[:, ::-1]  # P(Zbar >= x_i)
    above = np.zeros_like(post)
    above[:, :-1] = upper[:, 1:]  # P(Zbar > x_i)
    lower = np.cumsum(post, axis=1)  # P(Zbar <= x_i)
    if not binary:
        above += 0.5 * post
        lower -= 0.5 * post
    above = np.clip(above, 0.0, 1.0)
    lower = np.clip(lower, 0.0, 1.0)
    with np.errstate(divide="ignore"):
        return np.where(above < 0.5, np.log1p(-above), np.log(lower))


def _shift(log_cdf: np.ndarray, steps: float, binary: bool) -> np.ndarray:
    """``[U, X]`` ``log F_u(x_i + eps)`` with ``eps`` in lattice steps (``F = 1`` beyond the lattice)."""
    size = log_cdf.shape[1]
    if binary or steps == int(steps):
        whole = int(steps)
        shifted = np.zeros_like(log_cdf)
        if whole < size:
            shifted[:, : size - whole] = log_cdf[:, whole:]
        return shifted
    position = np.arange(size) + steps
    lower = np.floor(position).astype(np.int64)
    weight = position - lower
    padded = np.concatenate([np.exp(log_cdf), np.ones((log_cdf.shape[0], 2))], axis=1)
    lower = np.minimum(lower, size)
    cdf = (1.0 - weight) * padded[:, lower] + weight * padded[:, lower + 1]
    with np.errstate(divide="ignore"):
        return np.log(cdf)


def shift_log_cdf(log_cdf: np.ndarray, steps: float, binary: bool) -> np.ndarray:
    """``[U, X]`` ``log F_u(x_i + eps)`` from ``[U, X]`` ``log F_u(x_i)`` (``eps`` in lattice steps; ``F = 1`` beyond
    the lattice)."""
    return _shift(log_cdf, steps, binary)


def log_cdf_at_eps(post: np.ndarray, steps: float, binary: bool) -> np.ndarray:
    """``[U, X]`` ``log F_u(x_i + eps)`` of posterior rows ``post`` (``eps`` in lattice steps): what a row
    contributes to another row's ``P(eps-best)``."""
    return _shift(_log_cdfs(post, binary), steps, binary)


def eps_best_against(own: np.ndarray, rivals_log_cdf: np.ndarray) -> float:
    """``P(Zbar >= max_v Zbar_v - eps)`` of one row ``own`` (``[X]`` probabilities) against the rows whose
    :func:`log_cdf_at_eps` are ``rivals_log_cdf`` (``[C, X]``), all independent:
    ``sum_i p(x_i) prod_v F_v(x_i + eps)``."""
    total = rivals_log_cdf.sum(axis=0)  # every term <= 0, so no inf - inf
    return float(np.clip(own @ np.exp(total), 0.0, 1.0))


def win_probabilities(
    post: np.ndarray,
    counts: np.ndarray,
    steps: float,
    binary: bool,
    rows: np.ndarray | None = None,
    shared: tuple[SharedEffect, ...] = (),
) -> tuple[np.ndarray, np.ndarray]:
    """``P(best)`` and ``P(eps-best)`` of rows ``rows`` (default all) of arms on a lattice.

    Args:
        post: ``[U, X]`` posterior probabilities of the rows.
        counts: ``[U]`` number of arms of each row (arms with the same data and prior share a row).
        steps: ``eps`` in lattice steps (:func:`eps_steps`).
        binary: 0/1 scores (step CDF, ties count as best) or continuous (mid-cell CDF).
        rows: ``[R]`` rows to return (all rows enter the products).
        shared: groups of arms (rows of ``post`` with a count of 1) that share an uncertain effect,
            integrated over it (module docstring); the other rows are independent.

    Returns:
        ``[R]`` ``P(best)`` and ``[R]`` ``P(eps-best)`` (the module docstring's sums).
    """
    rows = np.arange(post.shape[0]) if rows is None else np.asarray(rows)
    independent = np.ones(post.shape[0], dtype=bool)
    for group in shared:
        independent[group.rows] = False
    weight_of_row = np.where(independent, counts, 0.0)
    log_cdf = _log_cdfs(post, binary)  # [U, X]
    group_cdfs = np.stack([group.log_cdf for group in shared]) if shared else np.zeros((0, post.shape[1]))
    results = []
    for index, shift in enumerate((0.0, steps)):
        log_f = _shift(log_cdf, shift, binary) if shift else log_cdf
        group_f = _shift(group_cdfs, shift, binary) if shift else group_cdfs  # [G, X]
        total = weight_of_row @ _finite(log_f) + _finite(group_f).sum(axis=0)  # [X]: S(x)
        probability = np.zeros(rows.size)
        alone = independent[rows]
        if alone.any():
            own, mine = post[rows[alone]], log_f[rows[alone]]
            # Where p_u(x) > 0, F_u(x) >= p_u(x) > 0, so S - log F_u is finite or -inf (another arm's F is 0).
            with np.errstate(invalid="ignore", over="ignore"):
                others = np.where(own > 0, np.exp(np.minimum(total[None, :] - mine, 0.0)), 0.0)
            probability[alone] = np.sum(own * others, axis=1)
        for group, group_log_f in zip(shared, group_f, strict=True):
            member = {int(row): position for position, row in enumerate(group.member_rows)}
            in_group = set(group.rows.tolist())
            wanted = [(out, member.get(int(row))) for out, row in enumerate(rows) if int(row) in in_group]
            if any(position is None for _, position in wanted):
                raise ValueError("a row of a shared effect was asked for without its member mass")
            if not wanted:
                continue
            out, positions = (np.array(column) for column in zip(*wanted, strict=True))
            outside = total - _finite(group_log_f)  # log of every arm's F outside the group
            # Only where the arms outside the group may all trail does a member's mass count.
            columns = np.flatnonzero(outside > _LOG_NEGLIGIBLE)
            mass = group.leading_mass(index, positions, columns)  # [M, C]
            probability[out] = mass @ np.exp(np.minimum(outside[columns], 0.0))
        results.append(np.clip(probability, 0.0, 1.0))
    return results[0], results[1]


def _finite(log_f: np.ndarray) -> np.ndarray:
    """``log F`` with ``-inf`` (``F = 0``) replaced by a huge negative number, so that sums of them stay finite."""
    return np.where(np.isfinite(log_f), log_f, _LOG_TINY)


def shared_effect(
    rows: np.ndarray,
    means: np.ndarray,
    sds: np.ndarray,
    variance: float,
    n_examples: int,
    steps: int,
    members: np.ndarray | None = None,
    effect_step: int | None = None,
) -> SharedEffect:
    """The :class:`SharedEffect` of ``A`` unseen arms of one level, on the 0/1 lattice ``x_i = i / N``.

    The model, in lattice steps (``h = 1 / N``): the shared effect ``T`` is ``N(0, v)`` on the multiples of ``r``
    steps within 7 sd (weights ``w_j``); given ``T = t``, each arm is its own ``N(m_k + t, s_k^2)`` rounded to the
    lattice, ``Y_k + t`` with ``A_k(y) = P(Y_k <= y) = Phi((y + h/2 - m_k) / s_k)``, truncated to at most 1 like
    each arm's own prior (a mean cannot exceed 1; conditioned, not clipped, so that no mass piles up at 1) and
    with what lies below 0 put at 0; arms independent given ``t``.  With ``H = prod_k A_k`` and
    ``H_{-a} = H / A_a``:

        P(max_k Zbar_k <= x_i) = sum_j w_j H(x_i - t_j) / H(1 - t_j),
        P(Zbar_a = x_i, siblings <= x_i + eps) = sum_j w_j p_a(x_i - t_j) H_{-a}(x_i + eps - t_j) / H(1 - t_j),

    with ``p_a(y) = A_a(y) - A_a(y - h)`` (``A_a(y)`` at ``x_0``, the mass put at 0); where ``x_i + eps >= 1`` every
    sibling trails and the second is ``sum_j w_j p_a(x_i - t_j) / A_a(1 - t_j)``.  The sums run in log space (a
    group's ``H(1 - t)`` underflows where ``t`` pushes every arm past 1) over the ``t`` where ``p_a`` is not
    negligible (9 of the arm's sds).

    Args:
        rows: ``[A]`` the arms' rows in the posterior.
        means, sds: ``[A]`` ``m_k`` and ``s_k`` (each arm's mean and spread given the shared effect).
        variance: ``v``.
        n_examples: ``N``.
        steps: ``eps`` in lattice steps (a whole number, :func:`eps_steps`).
        members: positions in ``rows`` whose ``member_mass`` to compute (default all).
        effect_step: ``r``, the spacing of the effect's values in lattice steps; default a quarter of the
            smallest ``s_k`` (at least 1), fine beside the arms' own spread.
    """
    big_n, steps = int(n_examples), int(steps)
    h = 1.0 / big_n
    means = np.asarray(means, dtype=np.float64)
    sds = np.asarray(sds, dtype=np.float64)
    step = max(1, int(sds.min() * big_n / 4)) if effect_step is None else int(effect_step)
    reach = int(np.ceil(_EFFECT_SDS * np.sqrt(variance) * big_n / step))
    shifts = step * np.arange(-reach, reach + 1)  # t_j in lattice steps
    log_w = -0.5 * (shifts * h) ** 2 / variance
    log_w -= _log_sum_exp(log_w, axis=0)
    # y on the lattice from x_0 - max t to x_N + eps + max t: every x_i + s - t_j the sums read.
    low = -int(shifts.max()) - 1
    y = np.arange(low, big_n + steps + int(shifts.max()) + 2)  # [Y], in steps
    log_a = log_ndtr(((y[None, :] + 0.5) * h - means[:, None]) / sds[:, None])  # [A, Y] log A_k(y)
    log_h = log_a.sum(axis=0)  # [Y]
    top = big_n - shifts - low  # the y index of 1 - t_j
    log_norm = log_h[top]  # [J] log H(1 - t_j)
    lattice = np.arange(big_n + 1)
    read = lattice[:, None] - shifts[None, :] - low  # [X, J] the y index of x_i - t_j
    group_log_cdf = _log_sum_exp(log_w + log_h[read] - log_norm, axis=1)
    group_log_cdf[-1] = 0.0
    rows = np.asarray(rows)
    positions = np.arange(rows.size) if members is None else np.asarray(members, dtype=np.int64)

    def leading_mass(shift_index: int, wanted: np.ndarray, columns: np.ndarray) -> np.ndarray:
        arms = positions[np.asarray(wanted, dtype=np.int64)]
        mass = np.zeros((arms.size, np.size(columns)))
        for start in range(0, arms.size, _MEMBER_CHUNK):
            chunk = arms[start : start + _MEMBER_CHUNK]
            mass[start : start + chunk.size] = _member_mass(
                log_a[chunk], log_h, log_w, shifts, low, big_n, (0, steps)[shift_index], means[chunk], sds[chunk],
                np.asarray(columns, dtype=np.int64),
            )
        return mass

    return SharedEffect(rows=rows, log_cdf=group_log_cdf, member_rows=rows[positions], leading_mass=leading_mass)


def _member_mass(
    log_a: np.ndarray,
    log_h: np.ndarray,
    log_w: np.ndarray,
    shifts: np.ndarray,
    low: int,
    big_n: int,
    shift: int,
    means: np.ndarray,
    sds: np.ndarray,
    columns: np.ndarray,
) -> np.ndarray:
    """``[M, C]`` some arms' ``P(Zbar_a = x_i, siblings <= x_i + shift)`` at lattice ``columns`` (:func:`shared_effect`;
    ``log_a`` their ``[M, Y]`` ``log A_a``), summed over the effect values ``t_j`` that put ``x_i - t_j`` within 9 sds
    of an arm's own mean."""
    with np.errstate(divide="ignore", invalid="ignore"):
        below = np.concatenate([np.full((log_a.shape[0], 1), -np.inf), log_a[:, :-1]], axis=1)
        log_p = log_a + np.log1p(-np.exp(below - log_a))  # log P(Y_a = y)
    log_p[:, 0] = log_a[:, 0]
    x = columns[:, None]  # [C, 1]
    # x_i - t_j within every arm's [centre - width, centre + width]: a band of j for each i.
    width = _SUPPORT_SDS * sds.max() * big_n + 1.0
    lowest, highest = means.min() * big_n - width, means.max() * big_n + width
    step = int(shifts[1] - shifts[0]) if shifts.size > 1 else 1
    first = np.ceil((columns - highest) / step).astype(np.int64)
    band = int(np.ceil((highest - lowest) / step)) + 2
    j = first[:, None] + np.arange(band)[None, :]  # [C, K] effect multiples
    reach = (shifts.size - 1) // 2
    inside = np.abs(j) <= reach
    j = np.clip(j, -reach, reach)
    t = step * j
    band_w = np.where(inside, log_w[j + reach], -np.inf)  # [C, K]
    rows = np.arange(log_a.shape[0])[:, None, None]

    def leading(own_log: np.ndarray, at: np.ndarray, t_of: np.ndarray) -> np.ndarray:
        """``log [p_a(x - t) H_{-a}(x + eps - t) / H(1 - t)]``, or ``log [p_a(x - t) / A_a(1 - t)]`` where
        ``x + eps >= 1`` (every sibling trails)."""
        ahead = at + shift - t_of - low
        top = big_n - t_of - low
        return np.where(
            at + shift < big_n,
            log_h[ahead] - log_a[rows, ahead] + own_log - log_h[top],
            own_log - log_a[rows, top],
        )

    own = log_p[rows, x - t - low]  # [M, C, K] log p_a(x_i - t_j)
    result = np.exp(_log_sum_exp(band_w + leading(own, x, t), axis=2))
    if columns.size and columns[0] == 0:
        # At x_0 the arm's mass is all of A_a(-t): every t that pushes it below 0, not a band.
        zero_own = log_a[rows, -shifts[None, :] - low]  # [M, 1, J]
        at_zero = leading(zero_own, np.zeros((1, 1), np.int64), shifts[None, :])
        result[:, 0] = np.exp(_log_sum_exp(log_w + at_zero, axis=2))[:, 0]
    return np.clip(result, 0.0, 1.0)


def _log_sum_exp(values: np.ndarray, axis: int) -> np.ndarray:
    """``log sum exp(values)`` along ``axis`` (``-inf`` where every value is)."""
    top = np.max(values, axis=axis, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        total = np.log(np.sum(np.exp(values - safe), axis=axis, keepdims=True)) + safe
    return np.squeeze(total, axis=axis)


def central_interval(post: np.ndarray, points: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """``[U]`` lower and upper ends of each row's central credible interval: the lattice points where the CDF
    first reaches ``(1 - level) / 2`` and ``(1 + level) / 2`` (at least ``level`` of the mass lies between)."""
    cdf = np.cumsum(post, axis=1)
    tail = 0.5 * (1.0 - level)
    lower = np.minimum(np.sum(cdf < tail - 1e-12, axis=1), points.size - 1)
    upper = np.minimum(np.sum(cdf < 1.0 - tail - 1e-12, axis=1), points.size - 1)
    return points[lower], points[upper]
