"""Anytime-valid confidence sequences for each arm's benchmark mean, and the eps-best statement they certify.

The target.  Arm ``k`` has a score ``Z_kj`` in ``[0, 1]`` on each of the ``N`` examples of the
benchmark; its target is the finite-population mean ``Zbar_k = (1/N) sum_j Z_kj``.  The arm's
examples are scored in a uniformly random order fixed in advance
(:class:`~gittinseval.core.protocol.RandomExampleOrder`): ``X_1, X_2, ..., X_N`` are the scores
``Z_kj`` read along that permutation, so the arm is sampled without replacement.

Per-arm confidence sequence (Waudby-Smith & Ramdas, "Confidence sequences for sampling without
replacement", NeurIPS 2020, and "Estimating means of bounded random variables by betting",
JRSS-B 2024).  For a candidate value ``m`` of ``Zbar`` and ``S_t = X_1 + ... + X_t``, the mean of
the next draw given the past, were ``Zbar = m``, is

    mu_t(m) = (N m - S_{t-1}) / (N - t + 1),

and two capital processes bet on the next draw being above or below it:

    K_t^+(m) = prod_{i <= t} (1 + lambda_i^+(m) (X_i - mu_i(m))),
    K_t^-(m) = prod_{i <= t} (1 - lambda_i^-(m) (X_i - mu_i(m))),
    lambda_i^+(m) = min(lambda_i, c / mu_i(m)),    lambda_i^-(m) = min(lambda_i, c / (1 - mu_i(m))),

with ``c = 1/2`` (every factor is then at least ``1 - c > 0``) and the predictable plug-in bet of the
JRSS-B paper, which depends only on the arm's own earlier scores,

    lambda_t = sqrt(2 log(2 / alpha) / (sigma2_{t-1} t log(1 + t))),
    muhat_t = (1/2 + S_t) / (t + 1),    sigma2_t = (1/4 + sum_{i <= t} (X_i - muhat_i)^2) / (t + 1).

At ``m = Zbar`` the draw ``X_t`` given the past is uniform over the unseen scores, whose mean is
``mu_t(Zbar)``, so both capitals are non-negative martingales starting at 1, and by Ville's
inequality each exceeds ``2 / alpha`` at some ``t <= N`` with probability at most ``alpha / 2``.  The
confidence sequence is the running intersection

    C_t = F_t  intersected with  {m : K_s^+(m) < 2/alpha and K_s^-(m) < 2/alpha for all s <= t},
    F_t = [S_t / N, (S_t + N - t) / N],

where ``F_t`` is the range ``Zbar`` can take whatever the unseen scores are (a sure bound).  So
``P(Zbar in C_t for all t = 0..N) >= 1 - alpha``: the two processes are the two sides of the hedged
capital process ``max(K^+ / 2, K^- / 2)``.  ``C_0 = [0, 1]`` and ``C_N = {Zbar}``.

The grid.  ``K^+_t(m)`` is non-increasing in ``m`` (each factor is non-increasing in ``mu``, which
increases with ``m``; the bet ``lambda_t`` does not depend on ``m``) and ``K^-_t(m)`` non-decreasing,
so each process rejects a down-set (resp. up-set) of ``m`` and ``C_t`` is an interval.  The
capitals are kept on ``G`` grid points ``g_i = i / (G - 1)`` (in logs), and the reported bounds are

    L_t = max(S_t / N, largest grid point rejected by K^+ so far),
    U_t = min((S_t + N - t) / N, smallest grid point rejected by K^- so far).

A rejected grid point ``g`` rejects every ``m <= g`` (resp. ``m >= g``), so ``L_t`` and ``U_t``
contain the exact (continuous) interval: the grid rounds outward, by at most one grid step
``1 / (G - 1)``, and never loses coverage, whether or not ``Zbar`` is on the grid.  Only the grid
points still inside ``C_t`` are tracked, so a batch of ``b`` scores costs ``O(b G)`` and the window
shrinks as the interval does.

The eps-best statement.  With ``K`` arms, each arm's sequence is run at ``alpha = delta / K``.  By
the union bound over arms (which needs no independence between arms), with probability at least
``1 - delta`` every arm's interval contains its ``Zbar_k`` at every one of its sample counts at
once.  On that event, for any arm ``a`` and any ``eps >= 0``,

    L_a >= max_{j != a} U_j - eps   implies   Zbar_a >= max_j Zbar_j - eps,

so the smallest certified ``eps`` is ``max(0, max_{j != a} U_j - L_a)``.

What the guarantee covers, exactly.  The probability is over the arms' random orders (and any
randomness of the policy) for a FIXED benchmark: any score matrix in ``[0, 1]``, binary or
continuous, chosen by an adversary before the orders are drawn.  (Random scores, e.g. a sampled LLM
answer, are covered if they are independent of the orders: condition on them; ``Zbar_k`` is then the
mean of the scores the arm gets, or would get, on the ``N`` examples.)

- Time-uniform.  The event is "every arm's interval covers at every sample count ``0..N``", so the
  statement holds at every batch of the run simultaneously: at data-dependent stopping times (the
  confidence stop of :meth:`~gittinseval.core.anytime.AnytimeCertifier.reached`), for a recommended
  arm and an ``eps`` chosen from the data, and when the run is continued after a look.
- Adaptive choice of WHICH ARM to sample.  Each arm's interval after ``t`` samples is a fixed
  function of its first ``t`` scores along its own permutation (the bets use only those scores, not
  the batch boundaries or the other arms).  So arm ``k``'s failure event, "``C_t`` misses ``Zbar_k``
  for some ``t = 0..N``", is a function of its permutation alone, which is uniformly random and drawn
  before the run: its probability is at most ``delta / K`` whatever the policy does.  A policy that
  interleaves the arms adaptively, with adaptive batch sizes, only decides how far along each arm's
  permutation the run has read at each moment: a random time change of each arm's sequence, which a
  time-uniform confidence sequence survives because its failure event does not depend on the times
  at which it is read.
- Not covered: a policy that chooses WHICH EXAMPLES of an arm to score from the scores (e.g. the
  examples on which an ensemble is most uncertain, hard examples first, re-ordering, skipping or
  re-scoring examples, or dropping failed evaluations that correlate with the score).  The draws
  are then no longer a uniformly random permutation, ``mu_t(Zbar)`` is no longer the conditional
  mean of the next draw, and the guarantee is void.  Scores must be fed to
  :meth:`~gittinseval.core.anytime.AnytimeCertifier.update` in the order in which the arm's permutation drew them.
- The level is per arm ``delta / K`` (union bound over arms), not ``delta``; with many arms the
  intervals widen like ``sqrt(log(K / delta))``.
- On the failure event (probability at most ``delta``) nothing is claimed: an interval may then
  miss its mean, stop being nested when ``F_t`` pulls it back towards ``Zbar`` (the bounds are always
  inside ``F_t``, and equal ``Zbar`` at ``t = N``), and if an arm's two processes together reject
  every value it collapses to a single point of ``F_t``.  On the coverage event the intervals are
  nested: ``L_t`` never decreases and ``U_t`` never increases.

Measured (``tests/core/test_confidence_sequences.py``, and a one-off run): at ``alpha = 0.1`` the
per-arm time-uniform miss rates on the test populations (0/1 and continuous, ``N`` from 50 to 800)
were 0 to 0.075.  On a 0/1 population with ``N = 1319`` and mean 0.8, the mean half-width at
``n = 50, 100, 200, 500`` (100 random orders, ``G = 2001``) was 0.151, 0.114, 0.085, 0.055 at
``alpha = 0.05`` and 0.215, 0.157, 0.114, 0.072 at ``alpha = 0.05 / 41``: narrower than the closed-form
without-replacement empirical-Bernstein sequence of the NeurIPS paper (0.19, 0.13, 0.090, 0.054 and
0.27, 0.19, 0.13, 0.074) except at ``n = 500``, where the two are within 0.002, and than its
Hoeffding sequence at every ``n``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gittinseval.utils.validation import positive_int

__all__ = [
    "BET_CLIP",
    "DEFAULT_GRID_SIZE",
    "ArmSequence",
    "check_level",
    "check_scores",
    "confidence_sequence",
    "make_grid",
    "plug_in_bets",
]

DEFAULT_GRID_SIZE = 2001
"""``G``: grid points ``i / (G - 1)`` for the candidate means; outward rounding adds at most ``1 / (G - 1)``."""
BET_CLIP = 0.5
"""``c``: bets are clipped to ``c / mu`` (above) and ``c / (1 - mu)`` (below), so each factor is ``>= 1 - c``."""
_CHUNK = 64
"""Scores processed together in one vectorised step: bounds the ``[chunk, W]`` temporaries, and keeps the running
product of at most 64 factors in ``[1 - c, 1 + lambda]`` within floating-point range."""
_INDEX_TOL = 1e-9
"""Slack (in grid steps) when comparing the sure range ``F_t`` with grid points: keeps borderline points."""


def check_level(name: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if isinstance(value, bool) or not (0.0 < number < 1.0):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")
    return number


def check_scores(scores: Any, where: str) -> np.ndarray:
    """``scores`` as a 1-D float64 array of finite values in ``[0, 1]``, else a ``ValueError``."""
    array = np.asarray(scores, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{where}: scores must be a 1-D array (one batch in the arm's order), got shape {array.shape}")
    # min and max propagate NaN, which fails both comparisons.
    if array.size and not (array.min() >= 0.0 and array.max() <= 1.0):
        bad = np.flatnonzero(~(np.isfinite(array) & (array >= 0.0) & (array <= 1.0)))
        kind = "NaN" if np.isnan(array[bad]).any() else "outside [0, 1]"
        raise ValueError(
            f"{where}: scores must be finite and in [0, 1]; got {kind} values {array[bad][:5].tolist()} "
            f"at batch positions {bad[:5].tolist()}"
        )
    return array


def plug_in_bets(
    scores: np.ndarray, alpha: float, sum_before: float = 0.0, var_sum_before: float = 0.25, n_before: int = 0
) -> tuple[np.ndarray, float, float]:
    """The predictable plug-in bets ``lambda_t`` of a batch of scores, and the statistics after it.

    With ``t = n_before + 1, ..., n_before + b`` (the arm's sample counts of the batch),

        lambda_t = sqrt(2 log(2 / alpha) / (sigma2_{t-1} t log(1 + t))),
        muhat_t = (1/2 + S_t) / (t + 1),    sigma2_t = V_t / (t + 1),    V_t = 1/4 + sum_{i <= t} (X_i - muhat_i)^2,

    so ``lambda_t`` uses only ``X_1..X_{t-1}``.

    Args:
        scores: ``[b]`` the batch ``X_{n+1}, ..., X_{n+b}``, in ``[0, 1]``.
        alpha: the arm's two-sided error level.
        sum_before: ``S_n``, the sum of the arm's earlier scores.
        var_sum_before: ``V_n`` (``1/4`` before any score).
        n_before: ``n``, the number of earlier scores.

    Returns:
        ``([b] bets, S_{n+b}, V_{n+b})``.
    """
    t = n_before + np.arange(1, scores.size + 1, dtype=np.float64)
    sums = sum_before + np.cumsum(scores)
    muhat = (0.5 + sums) / (t + 1.0)
    var_sums = var_sum_before + np.cumsum((scores - muhat) ** 2)
    var_sums_before = np.concatenate(([var_sum_before], var_sums[:-1]))
    sigma2_before = var_sums_before / t  # sigma2_{t-1} = V_{t-1} / t
    bets = np.sqrt(2.0 * math.log(2.0 / alpha) / (sigma2_before * t * np.log1p(t)))
    final_sum = float(sums[-1]) if scores.size else sum_before
    final_var = float(var_sums[-1]) if scores.size else var_sum_before
    return bets, final_sum, final_var


class ArmSequence:
    """The confidence sequence of one arm: sufficient statistics and the log-capitals on the live grid window.

    The window is the grid indices ``[start, stop)`` not yet excluded; ``log_plus`` and ``log_minus``
    (``[stop - start]``) are ``log K^+_t`` and ``log K^-_t`` there.  Index ``start - 1`` (if ``>= 0``) is
    below ``Zbar`` on the coverage event, and index ``stop`` (if ``< G``) above it.
    """

    __slots__ = ("n", "total", "var_sum", "start", "stop", "log_plus", "log_minus")

    def __init__(self, grid_size: int) -> None:
        self.n = 0
        self.total = 0.0
        self.var_sum = 0.25
        self.start = 0
        self.stop = grid_size
        self.log_plus: np.ndarray | None = None  # allocated at the first score
        self.log_minus: np.ndarray | None = None

    def advance(
        self, scores: np.ndarray, n_examples: int, alpha: float, grid: np.ndarray, path: bool = False
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Take ``scores`` (``[b]``, the next draws in order), in ``O(b W)`` for a window of ``W`` points.

        Returns ``([b] lower, [b] upper)`` after each score when ``path`` is true, else ``None``.
        """
        lowers, uppers = [], []
        for begin in range(0, scores.size, _CHUNK):
            result = self._advance_chunk(scores[begin : begin + _CHUNK], n_examples, alpha, grid, path)
            if path:
                lowers.append(result[0])
                uppers.append(result[1])
        if path:
            return np.concatenate(lowers), np.concatenate(uppers)
        return None

    def _advance_chunk(
        self, x: np.ndarray, n_examples: int, alpha: float, grid: np.ndarray, path: bool
    ) -> tuple[np.ndarray, np.ndarray] | None:
        size, width = x.size, self.stop - self.start
        bets, total, var_sum = plug_in_bets(x, alpha, self.total, self.var_sum, self.n)
        sums_after = self.total + np.cumsum(x)  # S_t of each draw
        steps = self.n + np.arange(1, size + 1)  # t of each draw
        starts = stops = None
        new_start, new_stop = self.start, self.stop
        if width > 0:
            grow_plus, grow_minus = self._growth(x, bets, sums_after - x, n_examples, grid)
            threshold = math.log(2.0 / alpha)
            # K^+ rejects a prefix of the window and K^- a suffix: keep from the first point K^+ never rejected to
            # the last point K^- never rejected (conservative should rounding ever break the monotonicity).
            if path:
                rej_plus = self.log_plus + np.log(grow_plus) >= threshold  # [b, W]
                rej_minus = self.log_minus + np.log(grow_minus) >= threshold
                rej_plus = np.logical_or.accumulate(rej_plus, axis=0)
                rej_minus = np.logical_or.accumulate(rej_minus, axis=0)[:, ::-1]  # reversed
                starts = self.start + np.where(rej_plus.all(axis=1), width, rej_plus.argmin(axis=1))
                stops = self.stop - np.where(rej_minus.all(axis=1), width, rej_minus.argmin(axis=1))
            else:
                # Rejected at some draw of the chunk: log is increasing, so compare the largest capital.
                rej_plus = self.log_plus + np.log(grow_plus.max(axis=0)) >= threshold  # [W]
                rej_minus = (self.log_minus + np.log(grow_minus.max(axis=0)) >= threshold)[::-1]  # reversed
                first, last = int(rej_plus.argmin()), int(rej_minus.argmin())
                new_start = self.start + (width if rej_plus[first] else first)
                new_stop = self.stop - (width if rej_minus[last] else last)
        # The sure range F_t in grid indices: keep i with S_t / N <= i / (G - 1) <= (S_t + N - t) / N (with slack).
        scale = grid.size - 1
        if path:
            feasible_start = np.ceil(scale * sums_after / n_examples - _INDEX_TOL).astype(np.int64)
            feasible_stop = np.floor(scale * (sums_after + n_examples - steps) / n_examples + _INDEX_TOL)
            feasible_stop = feasible_stop.astype(np.int64)
            starts = np.maximum(self.start if starts is None else starts, feasible_start)
            stops = np.minimum(self.stop if stops is None else stops, feasible_stop + 1)
            new_start, new_stop = int(starts[-1]), int(stops[-1])
        else:
            n_after = self.n + size
            new_start = max(new_start, math.ceil(scale * total / n_examples - _INDEX_TOL))
            new_stop = min(new_stop, math.floor(scale * (total + n_examples - n_after) / n_examples + _INDEX_TOL) + 1)
        if width > 0:
            keep = slice(new_start - self.start, max(new_stop, new_start) - self.start)
            self.log_plus = self.log_plus[keep] + np.log(grow_plus[-1, keep])
            self.log_minus = self.log_minus[keep] + np.log(grow_minus[-1, keep])
        self.start, self.stop = new_start, new_stop  # start > stop only if the two processes crossed
        self.n += size
        self.total, self.var_sum = total, var_sum
        if not path:
            return None
        return _interval(starts, stops, sums_after, steps, n_examples, grid)

    def _growth(
        self, x: np.ndarray, bets: np.ndarray, sums_before: np.ndarray, n_examples: int, grid: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``([b, W] K^+_t / K^+_n, [b, W] K^-_t / K^-_n)``: the capitals' growth on the window over the chunk.

        ``b <= 64`` factors, each in ``[1 - c, 1 + lambda]``, so the running products neither overflow nor
        underflow, and one logarithm per point (not per factor) suffices.
        """
        if self.log_plus is None:
            self.log_plus = np.zeros(self.stop - self.start)
            self.log_minus = np.zeros(self.stop - self.start)
        remaining = n_examples - self.n - np.arange(x.size, dtype=np.float64)  # N - t + 1
        # [b, W] mean of draw t were Zbar = m.  Clipping to [0, 1] only touches m outside F_{t-1}, which are
        # excluded from the window after the chunk, and keeps every factor positive and monotone in m.
        mu = np.multiply.outer(n_examples / remaining, grid[self.start : self.stop])
        mu -= (sums_before / remaining)[:, None]
        np.clip(mu, 0.0, 1.0, out=mu)
        bet, scaled = bets[:, None], (bets / BET_CLIP)[:, None]
        dev = x[:, None] - mu
        # Up: 1 + min(lambda, c / mu) (x - mu), with min(lambda, c / mu) = lambda / max(1, lambda mu / c).
        factor = mu * scaled
        np.maximum(factor, 1.0, out=factor)
        np.divide(bet, factor, out=factor)
        factor *= dev
        factor += 1.0
        _running_product(factor)
        # Down: 1 - min(lambda, c / (1 - mu)) (x - mu), in place of mu.
        np.subtract(1.0, mu, out=mu)
        mu *= scaled
        np.maximum(mu, 1.0, out=mu)
        np.divide(bet, mu, out=mu)
        mu *= dev
        np.subtract(1.0, mu, out=mu)
        _running_product(mu)
        return factor, mu

    def interval(self, n_examples: int, grid: np.ndarray) -> tuple[float, float]:
        """``(L_n, U_n)`` of the arm now (the scalar case of :func:`_interval`)."""
        f_low = self.total / n_examples
        f_high = (self.total + (n_examples - self.n)) / n_examples
        below = float(grid[self.start - 1]) if self.start > 0 else -math.inf
        above = float(grid[self.stop]) if self.stop < grid.size else math.inf
        lower = min(max(f_low, below), f_high)
        upper = max(min(f_high, above), f_low)
        if lower > upper:
            lower = upper = 0.5 * (lower + upper)
        return lower, upper


def _running_product(factors: np.ndarray) -> None:
    """Replace ``[b, W]`` factors by their running products along the first axis, in place.

    (Row by row: ``np.cumprod(axis=0)`` is several times slower for the short, wide arrays of a batch.)
    """
    for row in range(1, factors.shape[0]):
        np.multiply(factors[row - 1], factors[row], out=factors[row])


def _interval(
    starts: np.ndarray, stops: np.ndarray, sums: np.ndarray, counts: np.ndarray, n_examples: int, grid: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``[T]`` bounds from window indices and statistics: each side clipped to the sure range ``F_t``.

    ``L = min(max(S / N, g[start - 1]), F_high)`` and ``U = max(min(F_high, g[stop]), S / N)``; if the two
    processes crossed (``L > U``, only on the failure event), both become their midpoint.
    """
    f_low = sums / n_examples
    f_high = (sums + (n_examples - counts)) / n_examples
    below = np.where(starts > 0, grid[np.clip(starts - 1, 0, grid.size - 1)], -np.inf)
    above = np.where(stops < grid.size, grid[np.clip(stops, 0, grid.size - 1)], np.inf)
    lower = np.minimum(np.maximum(f_low, below), f_high)
    upper = np.maximum(np.minimum(f_high, above), f_low)
    crossed = lower > upper
    if crossed.any():
        middle = 0.5 * (lower + upper)
        lower = np.where(crossed, middle, lower)
        upper = np.where(crossed, middle, upper)
    return lower, upper


def make_grid(grid_size: Any) -> np.ndarray:
    size = positive_int("grid_size", grid_size)
    if size < 2:
        raise ValueError(f"grid_size must be at least 2, got {grid_size!r}")
    return np.arange(size, dtype=np.float64) / (size - 1)


def confidence_sequence(
    scores: Any, n_examples: int, alpha: float, grid_size: int = DEFAULT_GRID_SIZE
) -> tuple[np.ndarray, np.ndarray]:
    """The confidence sequence of one arm's mean after each of its scores, ``t = 1..n``.

    The same bounds :class:`~gittinseval.core.anytime.AnytimeCertifier` reports for an arm run at level
    ``alpha``, whatever the batches: ``P(L_t <= Zbar <= U_t for all t) >= 1 - alpha`` when ``scores``
    are the first ``n`` scores of a uniformly random permutation of the ``N`` examples.

    Args:
        scores: ``[n]`` the arm's scores in ``[0, 1]``, in the order drawn, ``n <= N``.
        n_examples: ``N``, the population size.
        alpha: the error level in ``(0, 1)``.
        grid_size: ``G``, grid points for the candidate means.

    Returns:
        ``([n] lower, [n] upper)``: ``L_t`` and ``U_t``, inside the sure range ``F_t``, equal to ``Zbar`` at
        ``t = N``, and (while they cover ``Zbar``) non-decreasing and non-increasing in ``t``.
    """
    n_examples = positive_int("n_examples", n_examples)
    alpha = check_level("alpha", alpha)
    grid = make_grid(grid_size)
    x = check_scores(scores, "confidence_sequence")
    if x.size > n_examples:
        raise ValueError(f"confidence_sequence: {x.size} scores for a population of N = {n_examples} examples")
    if x.size == 0:
        return np.zeros(0), np.zeros(0)
    return ArmSequence(grid.size).advance(x, n_examples, alpha, grid, path=True)
