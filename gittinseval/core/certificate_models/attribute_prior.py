"""A prior of each arm's full-benchmark mean from its attributes: crossed random effects, fitted by empirical Bayes.

When arms are configurations with shared attributes (MMLU: 15 models x 100 prompt templates; a live
task's ``arm.*`` settings), an arm's mean is told a lot by its siblings'.  The model, for ``K`` arms
with ``D`` categorical attributes ``g_dk`` (``features``, ``[K, D]``), on the scale of the means:

    Zbar_k = mu + sum_d a_d[g_dk] + e_k,     a_d[l] ~ N(0, s_d^2),     e_k ~ N(0, s_e^2),

all independent.  Each observed arm gives ``y_k = R_k / n_k``, unbiased for ``Zbar_k`` with sampling
variance ``v_k = f_k (1 - f_k) phi_k (N - n_k) / (n_k (N - 1))`` (simple random sampling without
replacement; ``f_k`` the current fitted mean, clipped to ``[0.02, 0.98]``, ``phi_k`` the dispersion, 1 for
0/1 scores).  The probability scale, not the logit: the mean of a few 0/1 scores is unbiased, while its
logit is pulled towards 0 and would bias every effect estimated from barely-seen arms.

The fit: EM steps, accelerated by SQUAREM (Varadhan and Roland, 2008), from a fixed start until a step
moves no log variance component and no fitted mean by more than ``tolerance`` (at most ``max_iterations``
accelerated steps).  With weights ``w_k = 1 / (v_k + s_e^2)`` over the observed arms,
``theta = (mu, a_1, ..., a_D)`` (``P = 1 + sum_d L_d`` entries, ``z_k`` the arm's row of the design, its
intercept and one level per attribute) has the Gaussian posterior ``N(C Z'W y, C)`` with
``C = (Z'WZ + diag(0, 1/s_d^2, ...))^-1`` (Henderson's mixed-model equations, solved jointly: solving for
the effects one attribute at a time, as backfitting does, creeps along the ridge where ``mu`` and the mean
of an attribute's effects trade off).  Then

- ``s_d^2 = sum_l (a_d[l]^2 + C_ll) / (L_d - 1)``: EM's update under the boundary-avoiding prior of Chung et al.
  (2013), ``Gamma(2, -> 0)`` on ``s_d`` (the divisor ``L_d - 1`` instead of ``L_d``).  It keeps the estimate off
  0, where plain EM creeps towards the floor for hundreds of steps (on real MMLU runs the model and template
  variances had not settled after 5000 backfitting sweeps);
- ``s_e^2`` is the moment estimate ``sum w_k^2 (r_k^2 / (1 - h_k) - v_k) / sum w_k^2`` over observed arms
  (``r_k = y_k - z_k theta`` the residual, ``h_k = w_k z_k' C z_k`` the arm's leverage), floored at 0, plus
  its standard error ``sqrt(sum w_k^4 2 (v_k + s_e^2)^2) / sum w_k^2`` (and ``1e-5``): when the arms are
  seen on few examples the estimate is noisy, and the prior errs wide rather than at the floor.  (EM's
  update of ``s_e^2`` barely moves when most arms are seen on a few examples, as in a run over 1500
  configurations.)

Every variance component is kept in ``[1e-5, 1/4]`` (``1/4``: the largest variance of a mean in ``[0, 1]``, which
a fit on two or three arms would otherwise exceed).  Measured on a GittinsEval-G run of MMLU anatomy (K = 1500,
to 10 % of the exhaustive cost): all 139 fits converged, in 19 accelerated steps on average, 1.7 s for all fits
on one core.

Each arm's prior (observed or not) is then ``N(m_k, s_k^2)`` restricted to the lattice, with
``m_k = z_k theta`` and ``s_k^2 = s_e^2 + z_k' C z_k``: the interaction and the uncertainty of its effects
(their posterior covariances included).  Arms are independent given the fitted effects (a plug-in: the
correlation that the effects' own uncertainty induces between siblings enters only through ``s_k^2``).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve

__all__ = ["AttributePrior", "has_shared_attributes"]

_FITTED_RANGE = (0.02, 0.98)
_SMALLEST_VARIANCE = 1e-5


def has_shared_attributes(features: np.ndarray | None) -> bool:
    """Whether some attribute has a level shared by two arms or more (else the arms are exchangeable)."""
    if features is None:
        return False
    features = np.asarray(features)
    return any(np.unique(column).size < column.size for column in features.T)


class AttributePrior:
    """The crossed-random-effects prior of the module docstring, refitted as observations arrive.

    Args:
        features: ``[K, D]`` integer attribute codes of the arms.
        tolerance: the fit stops once an EM step moves no variance component by more than this factor
            (relative) and no fitted mean by more than this (absolute).
        max_iterations: EM steps at most per fit.

    Attributes:
        mean, variance: ``[K]`` each arm's prior mean ``m_k`` and variance ``s_k^2`` (after a fit; before,
            the wide default ``N(0.5, 0.04)`` for every arm).
        effect_variances: ``[D]`` the fitted ``s_d^2`` of each attribute's effects.
        interaction: the fitted ``s_e^2``.
        iterations: EM steps the last fit took; ``converged``: whether it met ``tolerance`` within
            ``max_iterations``.
    """

    def __init__(self, features: np.ndarray, *, tolerance: float = 1e-4, max_iterations: int = 100) -> None:
        features = np.asarray(features)
        if features.ndim != 2 or not np.issubdtype(features.dtype, np.integer):
            raise ValueError(f"features must be a [K, D] integer array, got {features.dtype} of shape {features.shape}")
        if not tolerance > 0:
            raise ValueError(f"tolerance must be positive, got {tolerance}")
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be at least 1, got {max_iterations}")
        # Codes 0..L_d - 1 per attribute, whatever the given codes.
        levels = np.stack([np.unique(column, return_inverse=True)[1].reshape(-1) for column in features.T], axis=1)
        self.n_levels = (levels.max(axis=0) + 1).astype(np.int64)
        # Column of each arm's intercept and levels in theta = (mu, a_1, ..., a_D): [K, 1 + D].
        # The attribute with the most levels takes the last columns: the mixed-model equations eliminate it first
        # (its block of Z'WZ is diagonal, each arm having one level of it), and only the columns before are factored.
        self.column_order = np.argsort(self.n_levels, kind="stable")
        offsets = np.empty_like(self.n_levels)
        offsets[self.column_order] = 1 + np.concatenate([[0], np.cumsum(self.n_levels[self.column_order])[:-1]])
        self.columns = np.concatenate([np.zeros((levels.shape[0], 1), dtype=np.int64), levels + offsets], axis=1)
        self.tolerance = float(tolerance)
        self.max_iterations = int(max_iterations)
        n_arms = features.shape[0]
        self.mean = np.full(n_arms, 0.5)
        self.variance = np.full(n_arms, 0.04)
        self.effect_variances = np.full(features.shape[1], np.nan)
        self.interaction = float("nan")
        self.iterations = 0
        self.converged = False

    def fit(self, score_sum: np.ndarray, n_seen: np.ndarray, n_examples: int, dispersion: np.ndarray) -> None:
        """Refit from each arm's ``[K]`` score sum ``R_k``, count ``n_k`` and dispersion ``phi_k``, from a fixed
        start (so that the prior is a function of the data alone)."""
        counts = np.asarray(n_seen, dtype=np.float64)
        seen = counts > 0
        if not seen.any():
            return
        correction = np.maximum(n_examples - counts[seen], 0.0) / (max(n_examples - 1, 1) * counts[seen])
        em = _CrossedEffectsEM(
            self.columns[seen],
            score_sum[seen] / counts[seen],
            correction * np.asarray(dispersion)[seen],
            self.n_levels,
            self.column_order,
        )
        state = em.initial_state(float(score_sum[seen].sum() / counts[seen].sum()))
        self.converged = False
        # SQUAREM (Varadhan and Roland, 2008): two EM steps, an extrapolation along them, one EM step from there.
        # Plain EM creeps when a variance component heads for its floor (hundreds of steps on real MMLU runs).
        for iteration in range(1, self.max_iterations + 1):
            self.iterations = iteration
            first = em.step(state)
            second = em.step(first)
            change, curvature = first - state, second - 2.0 * first + state
            length = float(np.linalg.norm(curvature))
            step = -max(float(np.linalg.norm(change)) / length, 1.0) if length > 0 else -1.0
            proposal = em.step(em.feasible(state - 2.0 * step * change + step**2 * curvature))
            new_state = proposal if np.all(np.isfinite(proposal)) else second
            settled = np.max(np.abs(new_state - state)) <= self.tolerance
            state = new_state
            if settled:
                self.converged = True
                break
        theta, covariance = em.solution(state)
        self.mean = theta[self.columns].sum(axis=1)
        self.variance = em.interaction(state) + _quadratic_forms(covariance, _pair_indices(self.columns, em.size))
        self.effect_variances = em.spreads(state)
        self.interaction = em.interaction(state)

    def log_prior_rows(self, points: np.ndarray, arms: np.ndarray | None = None) -> np.ndarray:
        """``[A, X]`` unnormalised lattice log-priors of ``arms`` (default all): ``-(x - m_k)^2 / (2 s_k^2)``."""
        mean = self.mean if arms is None else self.mean[arms]
        variance = self.variance if arms is None else self.variance[arms]
        return -0.5 * (points[None, :] - mean[:, None]) ** 2 / variance[:, None]


class _CrossedEffectsEM:
    """One EM step of the module docstring's fit as a map of its state ``(log s_d^2 [D], log s_e^2, f [n])``, over
    the ``n`` observed arms: their ``[n, 1 + D]`` design columns, ``[n]`` means ``y`` and sampling factors
    ``c_k = phi_k (N - n_k) / (n_k (N - 1))`` (so that ``v_k = f_k (1 - f_k) c_k``), and the ``[D]`` levels per
    attribute."""

    def __init__(
        self,
        columns: np.ndarray,
        y: np.ndarray,
        sampling_factor: np.ndarray,
        n_levels: np.ndarray,
        column_order: np.ndarray,
    ) -> None:
        self.columns, self.y, self.sampling_factor, self.n_levels = columns, y, sampling_factor, n_levels
        self.size = 1 + int(n_levels.sum())
        self.attribute_of_level = np.repeat(column_order, n_levels[column_order])
        # The last attribute's block of Z'WZ is diagonal (MMLU: 100 templates): the first columns alone are factored.
        self._dense = self.size - int(n_levels[column_order[-1]])
        # The entries of Z'WZ that each arm's weight adds to.
        self.pairs = _pair_indices(columns, self.size)

    def initial_state(self, pooled_mean: float) -> np.ndarray:
        d = self.n_levels.size
        return np.concatenate([np.full(d, np.log(0.01)), [np.log(1e-3)], np.full(self.y.size, pooled_mean)])

    def feasible(self, state: np.ndarray) -> np.ndarray:
        """``state`` with its variances in ``[1e-5, 1/4]`` (the largest variance of a mean in ``[0, 1]``) and its
        fitted means in ``[0, 1]``: an extrapolated state can leave them."""
        variances = self.n_levels.size + 1
        return np.concatenate(
            [np.clip(state[:variances], np.log(_SMALLEST_VARIANCE), np.log(0.25)), np.clip(state[variances:], 0.0, 1.0)]
        )

    def spreads(self, state: np.ndarray) -> np.ndarray:
        return np.exp(state[: self.n_levels.size])

    def interaction(self, state: np.ndarray) -> float:
        return float(np.exp(state[self.n_levels.size]))

    def _weights(self, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        f = np.clip(state[self.n_levels.size + 1 :], *_FITTED_RANGE)
        sampling = f * (1.0 - f) * self.sampling_factor
        return sampling, 1.0 / (sampling + self.interaction(state))

    def solution(self, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``theta = C Z'W y`` (``[P]``) and ``C = (Z'WZ + diag(0, 1/s_d^2, ...))^-1`` (``[P, P]``) at ``state``."""
        return self._solution(state, self._weights(state)[1])

    def _solution(self, state: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        size = self.size
        pairs = self.pairs
        normal = np.bincount(pairs.reshape(-1), weights=np.repeat(weight, pairs.shape[1]), minlength=size * size)
        normal = normal.reshape(size, size)
        normal[np.arange(1, size), np.arange(1, size)] += 1.0 / self.spreads(state)[self.attribute_of_level]
        columns = self.columns
        right = np.bincount(columns.reshape(-1), weights=np.repeat(weight * self.y, columns.shape[1]), minlength=size)
        covariance = _block_inverse(normal, self._dense)
        return covariance @ right, covariance

    def step(self, state: np.ndarray) -> np.ndarray:
        """The state after one EM step from ``state``."""
        sampling, weight = self._weights(state)
        theta, covariance = self._solution(state, weight)
        effects = theta[1:]
        # The EM update of s_d^2 with a boundary-avoiding prior (Chung et al., 2013: a Gamma(2, ->0) prior on s_d,
        # the divisor L_d - 1 instead of L_d): the estimate stays off 0, where plain EM creeps for hundreds of steps.
        spreads = np.bincount(self.attribute_of_level, weights=effects**2 + np.diag(covariance)[1:])
        spreads /= np.maximum(self.n_levels - 1, 1)
        fitted = theta[self.columns].sum(axis=1)
        residual = self.y - fitted
        leverage = np.clip(weight * _quadratic_forms(covariance, self.pairs), 0.0, 0.9)
        squared_weight = weight**2
        total = float(np.sum(squared_weight))
        moment = float(np.sum(squared_weight * (residual**2 / (1.0 - leverage) - sampling))) / total
        # Var(r_k^2) = 2 (v_k + s_e^2)^2 for a normal residual: the estimate's standard error, added so that a
        # noisy estimate from imprecise arms errs wide rather than at the floor.
        error = float(np.sqrt(np.sum(squared_weight**2 * 2.0 * (sampling + self.interaction(state)) ** 2))) / total
        interaction = max(moment, 0.0) + error + _SMALLEST_VARIANCE
        return self.feasible(np.concatenate([np.log(np.append(spreads, interaction)), fitted]))


def _pair_indices(columns: np.ndarray, size: int) -> np.ndarray:
    """``[n, (1 + D)^2]`` flat indices into a ``[P, P]`` matrix of every pair of each design row's columns."""
    width = columns.shape[1]
    return np.repeat(columns, width, axis=1) * size + np.tile(columns, (1, width))


def _quadratic_forms(covariance: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """``[n]`` ``z_k' C z_k`` of the design rows whose column pairs are ``pairs`` (:func:`_pair_indices`)."""
    return covariance.reshape(-1)[pairs].sum(axis=1)


def _block_inverse(matrix: np.ndarray, dense: int) -> np.ndarray:
    """The inverse of a symmetric positive definite ``[P, P]`` ``matrix`` whose block after its first ``dense`` rows
    and columns is diagonal, by the Schur complement of that block: with ``E``, ``F`` and ``G = diag(g)`` the
    blocks ``[:d, :d]``, ``[:d, d:]`` and ``[d:, d:]``, ``S = E - F G^-1 F'`` and

        inverse = [[S^-1, -S^-1 F G^-1], [-G^-1 F' S^-1, G^-1 + G^-1 F' S^-1 F G^-1]],

    so only ``S`` (``[d, d]``) is factored."""
    g = np.diag(matrix)[dense:]
    scaled = matrix[:dense, dense:] / g  # F G^-1
    schur = matrix[:dense, :dense] - scaled @ matrix[dense:, :dense]
    schur_inverse = cho_solve(cho_factor(schur), np.eye(dense))
    cross = schur_inverse @ scaled  # S^-1 F G^-1
    inverse = np.empty_like(matrix)
    inverse[:dense, :dense] = schur_inverse
    inverse[:dense, dense:] = -cross
    inverse[dense:, :dense] = -cross.T
    inverse[dense:, dense:] = scaled.T @ cross
    diagonal = np.arange(dense, matrix.shape[0])
    inverse[diagonal, diagonal] += 1.0 / g
    return inverse
