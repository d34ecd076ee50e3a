"""What a run recommends: the best accuracy, the best value for deployment, or the cheapest near-best arm.

An evaluation ends with an arm to deploy.  The :class:`Objective` says which arm that is,
given the finite-benchmark posterior of each arm's full-benchmark mean ``Zbar_k``
(:class:`~gittinseval.core.posterior.FiniteBenchmarkPosterior`, mean ``M_k``, variance
``V_k``) and each arm's deployment price ``p_k`` (the benchmark's price table, USD per 1M
tokens for the bundled data; a live task's prices, see :func:`live_deployment_prices`):

- ``accuracy`` (the paper's, the default): the policy's own recommendation; the
  certificate is that of ``Zbar_k``.
- ``value``: the arm of the largest ``Zbar_k - mu p_k``, with ``mu >= 0`` in score units
  per unit of price (per dollar per 1M tokens, or per dollar per request, as the prices
  are given).  The price is known, so the value of arm ``k`` is its accuracy plus the
  known offset ``b_k = -mu p_k``: its posterior is ``N(M_k + b_k, V_k)``.  The
  recommendation is ``argmax_k M_k + b_k - kappa sqrt(V_k)`` (the run's LCB rule on the
  value), and the certificate (interval, ``P(best)``, ``P(eps-best)``) is that of the
  value.  GittinsEval also allocates by the value (see :class:`GittinsPolicy
  <gittinseval.core.gittins.GittinsPolicy>` and below); every other policy allocates as
  it always does, and the objective changes only its recommendation and certificate.
- ``cheapest_within``: the cheapest arm whose ``P(eps-best)`` of accuracy,
  ``P(Zbar_k >= max_j Zbar_j - eps)``, is at least ``1 - delta`` (ties of price: the
  larger ``P(eps-best)``, then the lower arm id).  If no arm qualifies, the
  recommendation falls back to the ``accuracy`` one, and the choice says it did not
  qualify (:attr:`Choice.qualified` is ``False``).

Why an offset leaves the Gittins roots unchanged.  GittinsEval's index of an unfinished
arm at stage ``n`` is ``G = M - r_n``, where the root ``r_n`` solves ``q_n(r_n) = 0`` for the
centred continuation value of the optimal-stopping problem against a retirement reward
``g`` (:mod:`gittinseval.core.roots`)::

    W_H(x) = max(x, 0),   q_n(x) = -c_n + E[W_{n+1}(x + sigma_n Z)],   W_n(x) = max(0, q_n(x)),

with ``x = M - g`` the posterior mean of the target in excess of the retirement reward,
``sigma_n`` the sd of the next change of ``M`` and ``c_n`` the stage cost.  The index is the
retirement reward ``g`` at which continuing and retiring are equally good, ``q_n(M - g) =
0``, i.e. ``g = M - r_n``.  Now let the target be ``Zbar_k + b_k`` with ``b_k`` known.  The
prior and posterior means shift by ``b_k`` (``M'_k = M_k + b_k``); the variances, the
step sds ``sigma_n`` (functions of ``v_0``, ``tau_cell^2``, ``N`` and the batch sizes only)
and the costs do not change.  The problem with reward ``g' = g + b_k`` then has the same
excess ``x' = M' - g' = x`` at every stage and every sample path, hence the same ``W_n``,
``q_n`` and root ``r_n``, and the indifference point is ``g' = M_k + b_k - r_n = G + b_k``:
the index shifts by exactly ``b_k`` and the roots are unchanged.  A completed arm's index
``Zbar_k`` becomes ``Zbar_k + b_k`` (root 0), the LCB ``M_k - kappa sqrt(V_k)`` becomes
``M_k + b_k - kappa sqrt(V_k)``, and the stopping signal (a completed arm attains the
largest index) compares the shifted indices.  So a run whose policy adds ``b_k`` to each
arm's index, LCB and completed mean makes exactly the decisions of a run on the scores
``Z_kj + b_k`` under the prior ``N(mu_0 + b_k, v_0)`` (checked run for run in
``tests/core/test_objective.py``).  GittinsEval-EB fits its prior to the accuracies and
adds the offsets after; the equivalence above is for a fixed prior.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gittinseval.core.certificate import Certificate, certify
from gittinseval.core.posterior import FiniteBenchmarkPosterior
from gittinseval.utils.validation import ConfigError, non_negative_float

__all__ = ["OBJECTIVES", "Choice", "Objective", "shifted_posterior", "value_offsets"]

OBJECTIVES = ("accuracy", "value", "cheapest_within")
"""The objectives by name."""


def value_offsets(prices: ArrayLike, mu: float) -> np.ndarray:
    """``[K]`` known offsets ``b_k = -mu p_k`` that turn accuracy into value.

    Args:
        prices: ``[K]`` deployment price of each arm, ``>= 0``.
        mu: score units per unit of price, ``>= 0``.
    """
    prices = np.asarray(prices, dtype=np.float64)
    if prices.ndim != 1 or not np.all(np.isfinite(prices)) or np.any(prices < 0):
        raise ValueError(f"deployment prices must be a 1-D array of finite numbers >= 0, got {prices!r}")
    return -non_negative_float("objective.mu", mu) * prices


@dataclass(frozen=True)
class Choice:
    """The recommended arm under an objective, with what the objective knew of it.

    Attributes:
        arm: the recommended arm.
        qualified: ``cheapest_within``: whether some arm had ``P(eps-best) >= 1 - delta``
            (``False``: ``arm`` is the accuracy fallback); ``None`` for the other objectives.
        prob_eps_best: ``cheapest_within``: ``[K]`` each arm's ``P(eps-best)`` of accuracy; else ``None``.
    """

    arm: int
    qualified: bool | None = None
    prob_eps_best: np.ndarray | None = None


@dataclass(frozen=True)
class Objective:
    """Which arm a run recommends and certifies (module docstring: the objectives and their maths).

    Attributes:
        name: ``accuracy``, ``value`` or ``cheapest_within``.
        mu: ``value``: score units per unit of deployment price, ``>= 0`` (0.01: a point of accuracy).
        eps: ``cheapest_within``: the tolerance of ``P(eps-best)``, in score units.
        delta: ``cheapest_within``: an arm qualifies when ``P(eps-best) >= 1 - delta``, ``delta`` in (0, 1).
    """

    name: str = "accuracy"
    mu: float = 0.0
    eps: float = 0.01
    delta: float = 0.05

    def __post_init__(self) -> None:
        if self.name not in OBJECTIVES:
            raise ConfigError(f"objective.name must be one of {', '.join(OBJECTIVES)}, got {self.name!r}")
        object.__setattr__(self, "mu", non_negative_float("objective.mu", self.mu))
        object.__setattr__(self, "eps", non_negative_float("objective.eps", self.eps))
        delta = non_negative_float("objective.delta", self.delta)
        if not 0 < delta < 1:
            raise ConfigError(f"objective.delta must be a number in (0, 1), got {self.delta!r}")
        object.__setattr__(self, "delta", delta)

    @classmethod
    def from_config(cls, config: Any) -> Objective:
        """An objective from a config mapping (``None``: the default ``accuracy``)."""
        return cls() if config is None else cls(**dict(config))

    @property
    def needs_prices(self) -> bool:
        """Whether the objective reads the arms' deployment prices."""
        return self.name != "accuracy"

    def as_dict(self) -> dict[str, Any]:
        """The settings that matter to this objective, as JSON values."""
        if self.name == "value":
            return {"name": self.name, "mu": self.mu}
        if self.name == "cheapest_within":
            return {"name": self.name, "eps": self.eps, "delta": self.delta}
        return {"name": self.name}

    def offsets(self, prices: ArrayLike | None, n_arms: int) -> np.ndarray:
        """``[K]`` offsets ``b_k`` added to each arm's accuracy: ``-mu p_k`` for ``value``, else zeros."""
        if self.name != "value":
            return np.zeros(n_arms)
        return value_offsets(self._prices(prices, n_arms), self.mu)

    def choose(
        self,
        posterior: FiniteBenchmarkPosterior,
        prices: ArrayLike | None,
        accuracy_choice: int,
        *,
        kappa: float = 1.0,
        n_samples: int | None = None,
    ) -> Choice:
        """The recommended arm under this objective.

        Args:
            posterior: the run's posterior of the arms' accuracies (its ``mean`` and
                ``variance``, ``[K]``; see
                :func:`~gittinseval.core.certificate.posterior_from_statistics`).
            prices: ``[K]`` deployment prices (``None`` only under ``accuracy``).
            accuracy_choice: the policy's own recommendation: the ``accuracy`` choice and
                the ``cheapest_within`` fallback.
            kappa: weight of the posterior sd in the ``value`` LCB rule.
            n_samples: Monte Carlo draws of ``P(eps-best)`` (``None``: the certificate's default).
        """
        n_arms = np.asarray(posterior.mean).size
        if self.name == "accuracy":
            return Choice(accuracy_choice)
        if self.name == "value":
            score = posterior.mean + self.offsets(prices, n_arms) - kappa * np.sqrt(posterior.variance)
            return Choice(int(np.argmax(score)))
        prices = self._prices(prices, n_arms)
        options = {} if n_samples is None else {"n_samples": n_samples}
        prob = certify(posterior, accuracy_choice, eps=self.eps, **options).arm_prob_eps_best
        qualifying = np.flatnonzero(prob >= 1.0 - self.delta)
        if qualifying.size == 0:
            return Choice(accuracy_choice, qualified=False, prob_eps_best=prob)
        # lexsort: the last key is the primary one.
        cheapest = qualifying[np.lexsort((qualifying, -prob[qualifying], prices[qualifying]))[0]]
        return Choice(int(cheapest), qualified=True, prob_eps_best=prob)

    def certify(
        self, posterior: FiniteBenchmarkPosterior, recommended: int, prices: ArrayLike | None, **options: Any
    ) -> Certificate:
        """The certificate of ``recommended`` under this objective (``options``: those of
        :func:`~gittinseval.core.certificate.certify`).

        ``value`` certifies ``Zbar_k + b_k``: the posterior of the value has mean ``M_k + b_k``,
        the same variance, and the interval's clipping range shifted by ``b_k``; the
        other objectives certify the accuracy.
        """
        if self.name == "value":
            posterior = shifted_posterior(posterior, self.offsets(prices, np.asarray(posterior.mean).size))
        return certify(posterior, recommended, **options)

    def _prices(self, prices: ArrayLike | None, n_arms: int) -> np.ndarray:
        if prices is None:
            raise ConfigError(
                f"objective {self.name!r} needs each arm's deployment price; give the benchmark a prices file "
                "(benchmark.costs=...) or the live task its prices"
            )
        prices = np.asarray(prices, dtype=np.float64)
        if prices.shape != (n_arms,):
            raise ValueError(f"{prices.size} deployment prices for {n_arms} arms")
        return prices


def shifted_posterior(posterior: FiniteBenchmarkPosterior, offsets: np.ndarray) -> FiniteBenchmarkPosterior:
    """A copy of ``posterior`` for the targets ``Zbar_k + b_k``: means and score sums shifted, variances kept.

    The score sum moves by ``N b_k`` so that the certificate's clipping range
    ``[R_k / N, (R_k + m_k) / N]`` moves by ``b_k`` with the target.
    """
    shifted = copy.copy(posterior)
    shifted.mean = posterior.mean + offsets
    shifted.score_sum = posterior.score_sum + posterior.n_examples * offsets
    return shifted
