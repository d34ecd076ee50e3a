"""How sure a run is of its recommendation, from the observed scores and the prior alone.

The certificate is computed from the finite-benchmark posterior
(:class:`~gittinseval.core.posterior.FiniteBenchmarkPosterior`) of the observed sufficient
statistics: each arm's score sum ``R_k`` and count ``n_k``, the number of examples ``N``,
the run's prior ``N(mu_0, v_0)`` and the cell variance ``tau_cell^2``.  Which examples a
policy chose to observe, and in what order, does not enter: the likelihood of adaptively
chosen observations factors into the policy's choice probabilities, which do not depend on
the unknown means, times the scores' own likelihood, so the posterior is that of the same
cells observed in any order (adaptive sampling is ignorable).  One function therefore
certifies the recommendation of every policy.

The model (Gaussian surrogate).  Latent means ``theta_k ~ N(mu_0, v_0)`` independent
across arms; given ``theta_k`` each score of arm ``k`` is ``N(theta_k, tau_cell^2)``.  The
target is the full-benchmark mean ``Zbar_k = (1/N) sum_j Z_kj``.  Its posterior is
Gaussian, independent across arms, with (paper eq. finite-posterior-moments)

    M_k = (R_k + m_k mu_k) / N,
    V_k = (m_k^2 v_k + m_k tau_cell^2) / N^2,

where ``m_k = N - n_k`` is the number of unseen examples and ``N(mu_k, v_k)`` the latent
posterior.  Both terms of ``V_k`` are needed: the latent mean's uncertainty and the
sampling of the ``m_k`` unseen scores (the finite-population term).  A completed arm
(``m_k = 0``) has ``V_k = 0``: its mean is known exactly.

What it reports, for the recommended arm ``a`` and per arm:

- a central credible interval ``M_k -+ z sqrt(V_k)`` with ``z = Phi^{-1}((1 + level)/2)``,
  clipped to ``[R_k / N, (R_k + m_k) / N]``, the range that ``Zbar_k`` can take when every
  score lies in ``[0, 1]`` (so the clipping never excludes the true value);
- ``P(best) = P(Zbar_k = max_j Zbar_j)`` and ``P(eps-best) = P(Zbar_k >= max_j Zbar_j - eps)``.

The probabilities are Monte Carlo estimates over ``S`` joint draws of the independent
Gaussians ``Zbar^(s)``:

    p_hat_k = (1/S) sum_s 1{Zbar_k^(s) >= max_j Zbar_j^(s) - eps}     (eps = 0: P(best)),
    SE(p_hat_k) = sqrt(p_hat_k (1 - p_hat_k) / S) <= 1 / (2 sqrt(S)),

0.0078 at the default ``S = 4096``.  Two devices keep this fast at ``K = 1500`` and change
no estimate beyond that error:

- Arms that cannot come within ``eps`` of the best are left out, with probabilities 0.
  With ``c = -Phi^{-1}(delta / (K + 1))`` and ``L = max_j (M_j - c sqrt(V_j))``, an arm
  with ``M_k + c sqrt(V_k) < L - eps`` exceeds ``L - eps`` with probability at most
  ``delta / (K + 1)``, and the arm attaining ``L`` falls below ``L`` with at most that
  probability; so leaving all of them out changes every probability by at most
  ``delta = 1e-9`` (:data:`PRUNE_TOLERANCE`).
- Without a generator (``rng=None``) every call uses the same standard normals of a
  fixed seed (common random numbers, cached per process).  The certificate is then a
  deterministic function of the data, and a stopping rule checked after every
  observation does not stop on a lucky draw of fresh Monte Carlo noise: its estimate
  changes only when the data do.  A generator draws fresh normals instead (independent
  replications).

Known arms need no draws; draws are float32 (ample for means in ``[0, 1]``).

Assumptions and what the numbers are not:

- They are posterior probabilities of the working model: exact for Gaussian scores
  with the prior and ``tau_cell^2`` of the model, approximate otherwise.  They are not a
  frequentist guarantee for a fixed benchmark, only calibrated on average over
  benchmarks drawn from the prior (measured in ``tests/core/test_certificate.py``: P(best)
  within its sampling error for Gaussian scores; for 0/1 scores the 95 % interval of the
  recommended arm covered in 97.7 to 99.7 % of runs, and P(best) was conservative).
- ``tau_cell^2 = 0.25`` is the largest variance of a score in ``[0, 1]`` (a 0/1 score
  with mean 0.5), so the intervals over-cover for arms whose accuracy is far from 0.5,
  and the probabilities are less extreme than the data warrant.
- The arms are independent a priori; correlated configurations (a shared model or
  prompt) make the best arm's lead look more certain or less certain than it is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtri

from gittinseval.core.anytime import EpsBestStatement
from gittinseval.core.posterior import FiniteBenchmarkPosterior
from gittinseval.utils.validation import ConfigError, non_negative_float, positive_int

__all__ = [
    "CERTIFICATE_MODELS",
    "DEFAULT_SAMPLES",
    "PRUNE_TOLERANCE",
    "Certificate",
    "CertificateSettings",
    "candidate_arms",
    "certify",
    "check_arm",
    "fixed_normals",
    "format_certificate",
    "open_unit_interval",
    "posterior_from_statistics",
    "settings_from_mapping",
]

DEFAULT_SAMPLES = 4096
"""Monte Carlo draws of a certificate: a probability's standard error is at most 0.5 / sqrt(4096) = 0.0078."""

CERTIFICATE_MODELS = ("gaussian", "eb")
"""The posteriors a certificate can be computed under (``certificate.model``): ``gaussian``, the paper's surrogate
of this module, and ``eb``, the empirical-Bayes lattice posterior of
:class:`~gittinseval.core.certificate_models.EmpiricalBayesModel` (exact likelihood, prior learned from the run)."""

PRUNE_TOLERANCE = 1e-9
"""Largest change of any probability from leaving out the arms that cannot come within ``eps`` of the best."""

_NORMALS_SEED = 0
_SMALLEST_BANK = 64


def posterior_from_statistics(
    score_sum: ArrayLike,
    n_seen: ArrayLike,
    n_examples: int,
    prior_mean: float,
    prior_var: float,
    cell_var: float = 0.25,
) -> FiniteBenchmarkPosterior:
    """The finite-benchmark posterior of observed scores, whichever policy chose them.

    The posterior depends on the data only through each arm's score sum and count
    (see the module docstring), so it is computed from them in one vectorised step:
    the same cells observed in any order and batching give the same posterior bit for bit
    (with 0/1 scores, whose sums are exact).  Its ``n_batches`` are not part of the
    statistics and stay 0; they matter to the Gittins index, not to the certificate.

    Args:
        score_sum: ``[K]`` sum of each arm's observed scores, each score in ``[0, 1]``.
        n_seen: ``[K]`` number of observed scores of each arm, in ``[0, N]``.
        n_examples: ``N``, examples per arm.
        prior_mean, prior_var: the run's prior ``N(mu_0, v_0)``.
        cell_var: ``tau_cell^2``, the working variance of one score.
    """
    score_sum = np.asarray(score_sum, dtype=np.float64)
    counts = np.asarray(n_seen)
    if score_sum.ndim != 1 or score_sum.shape != counts.shape:
        raise ValueError(f"score_sum and n_seen must be 1-D of one length, got {score_sum.shape} and {counts.shape}")
    n_examples = positive_int("n_examples", n_examples)
    if not (np.all(counts == np.round(counts)) and np.all(counts >= 0) and np.all(counts <= n_examples)):
        raise ValueError(f"n_seen must be integers in [0, {n_examples}], got {counts[:5].tolist()} ...")
    counts = counts.astype(np.int64)
    # Float sums of scores in [0, 1] may overshoot their count by rounding only.
    if not (np.all(np.isfinite(score_sum)) and np.all(score_sum >= 0) and np.all(score_sum <= counts * (1 + 1e-12))):
        raise ValueError("score_sum must lie in [0, n_seen] for each arm: scores are in [0, 1]")
    posterior = FiniteBenchmarkPosterior(score_sum.size, n_examples, prior_mean, prior_var, cell_var)
    posterior.score_sum[:] = score_sum
    posterior.n_seen[:] = counts
    posterior.set_prior(prior_mean, prior_var)
    return posterior


@dataclass(frozen=True, eq=False)
class Certificate:
    """How sure the posterior is of the recommended arm, and the same numbers for every arm.

    The per-arm arrays have shape ``[K]`` and are read-only; the recommended arm's
    numbers are the properties of the same names without ``arm_``.  ``as_dict`` gives
    the recommended arm's numbers as JSON values, for a run's summary.

    Attributes:
        arm: the recommended arm.
        level: credibility of the intervals, in (0, 1).
        eps: ``eps`` of ``P(eps-best)``, in score units (0.01: one point of accuracy).
        n_samples: ``S``, Monte Carlo draws of the probabilities; ``None`` when they are exact sums (their
            standard errors are then 0).
        arm_mean: ``M_k``, the posterior mean of each arm's full-benchmark mean.
        arm_lower, arm_upper: each arm's central credible interval at ``level``.
        arm_prob_best: ``P(Zbar_k = max_j Zbar_j)``; they sum to 1 unless completed arms tie.
        arm_prob_eps_best: ``P(Zbar_k >= max_j Zbar_j - eps)``.
        model: the posterior the numbers are of (one of :data:`CERTIFICATE_MODELS`).
        anytime: the anytime-valid eps-best statement about the same arm
            (:class:`~gittinseval.core.anytime.EpsBestStatement`), or ``None`` when the run keeps no
            confidence sequences.
    """

    arm: int
    level: float
    eps: float
    n_samples: int | None
    arm_mean: np.ndarray
    arm_lower: np.ndarray
    arm_upper: np.ndarray
    arm_prob_best: np.ndarray
    arm_prob_eps_best: np.ndarray
    model: str = "gaussian"
    anytime: EpsBestStatement | None = None

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

    @property
    def prob_best_se(self) -> float:
        """Monte Carlo standard error of :attr:`prob_best`, ``sqrt(p (1 - p) / S)`` (0 when exact)."""
        return _standard_error(self.prob_best, self.n_samples)

    @property
    def prob_eps_best_se(self) -> float:
        """Monte Carlo standard error of :attr:`prob_eps_best`."""
        return _standard_error(self.prob_eps_best, self.n_samples)

    def as_dict(self) -> dict[str, Any]:
        """The recommended arm's numbers as JSON values (the ``certificate`` of a summary)."""
        return {
            "arm": self.arm,
            "mean": self.mean,
            "lower": self.lower,
            "upper": self.upper,
            "level": self.level,
            "prob_best": self.prob_best,
            "prob_best_se": self.prob_best_se,
            "prob_eps_best": self.prob_eps_best,
            "prob_eps_best_se": self.prob_eps_best_se,
            "eps": self.eps,
            "n_samples": self.n_samples,
            "model": self.model,
            **({} if self.anytime is None else {"anytime": self.anytime.as_dict()}),
        }

    def format(self) -> str:
        """One line for a progress display, e.g. ``0.652 [0.611, 0.690] 95%, P(best) 0.81, P(within 0.01) 0.93``."""
        return format_certificate(self.as_dict())


def format_certificate(values: Mapping[str, Any]) -> str:
    """:meth:`Certificate.format` of a certificate's :meth:`~Certificate.as_dict` (e.g. read from a summary);
    with an anytime statement, e.g. ``; anytime 95%: within 0.034 of the best``."""
    line = (
        f"{values['mean']:.3f} [{values['lower']:.3f}, {values['upper']:.3f}] {100 * values['level']:g}%, "
        f"P(best) {values['prob_best']:.2f}, P(within {values['eps']:g}) {values['prob_eps_best']:.2f}"
    )
    anytime = values.get("anytime")
    if anytime is None:
        return line
    return f"{line}; anytime {100 * (1 - anytime['delta']):g}%: within {anytime['certified_eps']:.3f} of the best"


def certify(
    posterior: FiniteBenchmarkPosterior,
    recommended: int,
    *,
    level: float = 0.95,
    eps: float = 0.01,
    n_samples: int = DEFAULT_SAMPLES,
    rng: np.random.Generator | None = None,
) -> Certificate:
    """The certificate of arm ``recommended`` under ``posterior`` (maths in the module docstring).

    Args:
        posterior: the run's finite-benchmark posterior, e.g. from
            :func:`posterior_from_statistics`; only its ``mean``, ``variance``,
            ``score_sum``, ``n_seen`` and ``n_examples`` are read.
        recommended: the arm to certify, in ``[0, K)``.
        level: credibility of the intervals, in (0, 1).
        eps: tolerance of ``P(eps-best)``, ``>= 0``.
        n_samples: ``S``, Monte Carlo draws.
        rng: draw fresh normals from this generator; ``None`` (the default) uses the same
            fixed normals at every call, so the certificate is a function of the data.
    """
    mean = np.asarray(posterior.mean, dtype=np.float64)
    recommended = check_arm(recommended, mean.size)
    level = open_unit_interval("level", level)
    eps = non_negative_float("eps", eps)
    n_samples = positive_int("n_samples", n_samples)
    sd = np.sqrt(posterior.variance)
    half_width = ndtri(0.5 + level / 2) * sd
    lowest = posterior.score_sum / posterior.n_examples
    highest = lowest + (posterior.n_examples - posterior.n_seen) / posterior.n_examples
    prob_best, prob_eps_best = _win_fractions(mean, sd, eps, n_samples, rng)
    return Certificate(
        arm=recommended,
        level=level,
        eps=eps,
        n_samples=n_samples,
        arm_mean=_read_only(mean.copy()),
        arm_lower=_read_only(np.clip(mean - half_width, lowest, highest)),
        arm_upper=_read_only(np.clip(mean + half_width, lowest, highest)),
        arm_prob_best=_read_only(prob_best),
        arm_prob_eps_best=_read_only(prob_eps_best),
    )


@dataclass(frozen=True)
class CertificateSettings:
    """How a run states its confidence in its recommendation (config key ``certificate``).

    Attributes:
        level: credibility of the intervals, in (0, 1).
        eps: ``eps`` of ``P(eps-best)``, in score units, ``>= 0``.
        samples: ``S``, Monte Carlo draws of the probabilities (of the ``gaussian`` model; ``eb``'s are exact).
        model: the posterior of the certificate, one of :data:`CERTIFICATE_MODELS`: ``eb`` by default, the
            one that measured best on real data (``docs/reproduction/certificate.md``).
        anytime: also state the anytime-valid eps-best statement (:mod:`gittinseval.core.anytime`), at
            ``delta``.
        delta: the anytime statement's error level, in (0, 1): it holds with probability ``>= 1 - delta``
            at every batch of the run at once.
    """

    level: float = 0.95
    eps: float = 0.01
    samples: int = DEFAULT_SAMPLES
    model: str = "eb"
    anytime: bool = False
    delta: float = 0.05

    def __post_init__(self) -> None:
        object.__setattr__(self, "level", open_unit_interval("certificate.level", self.level))
        object.__setattr__(self, "eps", non_negative_float("certificate.eps", self.eps))
        object.__setattr__(self, "samples", positive_int("certificate.samples", self.samples))
        if self.model not in CERTIFICATE_MODELS:
            raise ConfigError(f"certificate.model must be one of {', '.join(CERTIFICATE_MODELS)}, got {self.model!r}")
        if not isinstance(self.anytime, bool):
            raise ConfigError(f"certificate.anytime must be true or false, got {self.anytime!r}")
        object.__setattr__(self, "delta", open_unit_interval("certificate.delta", self.delta))

    @classmethod
    def of(cls, value: Any) -> CertificateSettings:
        """``value`` as settings: settings, ``None`` (the defaults) or a mapping of the fields (a config's
        ``certificate``)."""
        return cls() if value is None else settings_from_mapping(cls, "certificate", value)


def _win_fractions(
    mean: np.ndarray, sd: np.ndarray, eps: float, n_samples: int, rng: np.random.Generator | None
) -> tuple[np.ndarray, np.ndarray]:
    """``[K]`` Monte Carlo estimates of ``P(best)`` and ``P(eps-best)`` of each arm.

    Only the arms that can come within ``eps`` of the best are drawn (see the module
    docstring); known arms (``sd = 0``) are compared with the draws' maxima by sorting.
    """
    n_arms = mean.size
    drawn, known = candidate_arms(mean, sd, eps)
    if rng is None:
        normals = fixed_normals(drawn.size, n_samples)
    else:
        normals = rng.standard_normal((drawn.size, n_samples), dtype=np.float32)
    draws = normals * sd[drawn, None].astype(np.float32)  # [C, S]
    draws += mean[drawn, None].astype(np.float32)
    best = draws.max(axis=0) if drawn.size else np.full(n_samples, -np.inf, dtype=np.float32)
    if known.size:
        best = np.maximum(best, mean[known].max().astype(np.float32))
    near_best = best - np.float32(eps)
    wins = np.zeros(n_arms)
    near = np.zeros(n_arms)
    wins[drawn] = np.count_nonzero(draws >= best, axis=1)
    near[drawn] = np.count_nonzero(draws >= near_best, axis=1)
    known_means = mean[known].astype(np.float32)
    # Subtracting eps keeps the sorted order, so both counts come from one sort.
    ordered = np.sort(best)
    wins[known] = np.searchsorted(ordered, known_means, side="right")
    near[known] = np.searchsorted(ordered - np.float32(eps), known_means, side="right")
    return wins / n_samples, near / n_samples


def candidate_arms(mean: np.ndarray, sd: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """The arms that can come within ``eps`` of the best (the module docstring's pruning), split into
    those drawn (``sd > 0``; row ``i`` of the fixed normals goes to ``drawn[i]``) and those known."""
    reach = -ndtri(PRUNE_TOLERANCE / (mean.size + 1))
    candidate = mean + reach * sd >= np.max(mean - reach * sd) - eps
    return np.flatnonzero(candidate & (sd > 0)), np.flatnonzero(candidate & (sd == 0))


_NORMALS: dict[int, np.ndarray] = {}
"""The fixed normals of each sample count, ``[rows, S]``, grown as more arms are drawn."""


def fixed_normals(n_rows: int, n_samples: int) -> np.ndarray:
    """``[n_rows, n_samples]`` read-only float32 standard normals of a fixed seed.

    The generator fills rows in order, so the first rows of a larger bank equal a smaller
    bank: a result does not depend on the size of the bank cached before it.
    """
    bank = _NORMALS.get(n_samples)
    if bank is None or len(bank) < n_rows:
        rows = max(_SMALLEST_BANK, 1 << (n_rows - 1).bit_length())
        bank = _read_only(np.random.default_rng(_NORMALS_SEED).standard_normal((rows, n_samples), dtype=np.float32))
        _NORMALS[n_samples] = bank
    return bank[:n_rows]


def settings_from_mapping(cls: type, key: str, value: Any) -> Any:
    """An instance of the frozen dataclass ``cls`` from itself or from a mapping of its fields (config ``key``)."""
    if isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key} must be a mapping of {', '.join(cls.__dataclass_fields__)}, got {value!r}")
    unknown = sorted(set(value) - set(cls.__dataclass_fields__))
    if unknown:
        raise ConfigError(f"{key} has unknown keys {unknown}; its keys are {', '.join(cls.__dataclass_fields__)}")
    return cls(**value)


def check_arm(arm: Any, n_arms: int) -> int:
    if isinstance(arm, bool) or not (isinstance(arm, int | np.integer) and 0 <= arm < n_arms):
        raise ValueError(f"the arm must be an integer in [0, {n_arms}), got {arm!r}")
    return int(arm)


def _standard_error(probability: float, n_samples: int | None) -> float:
    if n_samples is None:
        return 0.0
    return math.sqrt(probability * (1.0 - probability) / n_samples)


def open_unit_interval(key: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be a number in (0, 1), got {value!r}") from None
    if isinstance(value, bool) or not 0 < number < 1:
        raise ConfigError(f"{key} must be a number in (0, 1), got {value!r}")
    return number


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array
