"""Each arm's expected cost per example, learned from what its examples were charged.

A run plans with a guess of each arm's expected cost per example (the task's
``tokens_per_example`` at list prices, a pilot, or a benchmark's mean cell cost).  What an
arm's examples are charged shows how wrong the guess is: a reasoning model writes many
times the tokens of a terse one.  :class:`CostEstimator` keeps a running estimate from
those charges, shrunk toward the guess while the arm has few examples, and tells the
driver when the policy should re-plan with it (:meth:`~gittinseval.core.protocol.Policy.update_costs`).
The charges themselves, the ledger and the budget are not touched: spend is what was
charged, whatever the estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gittinseval.utils.validation import non_negative_float, positive_finite_values, positive_float

__all__ = ["CostEstimator", "CostLearning", "CostPlan"]


@dataclass(frozen=True)
class CostLearning:
    """How the arms' expected costs are learned: the guess's weight and when the policy re-plans.

    Args:
        pseudo_count: ``n_0 > 0``, the weight of the guess in examples (see
            :class:`CostEstimator` for the value that fits a given spread of cell costs
            and trust in the guess).  The default 1 fits cells of coefficient of
            variation about 0.7 and a guess off by a factor of about two (``CV = 1``).
        refresh_share: ``s >= 0``: the policy re-plans an arm once its estimate differs
            from the cost it plans with by more than this share of it (0: after every
            change).
    """

    pseudo_count: float = 1.0
    refresh_share: float = 0.1

    def __post_init__(self) -> None:
        object.__setattr__(self, "pseudo_count", positive_float("pseudo_count", self.pseudo_count))
        object.__setattr__(self, "refresh_share", non_negative_float("refresh_share", self.refresh_share))

    def start(self, guess: np.ndarray) -> CostEstimator:
        """A fresh estimator from the ``[K]`` guessed costs per example."""
        return CostEstimator(guess, self)


class CostEstimator:
    """Credibility estimate of each arm's expected cost per example, and the costs a policy plans with.

    After arm ``k``'s examples have been charged ``S_k`` in all over ``n_k`` examples, its
    expected cost per example is estimated by

        c_hat_k = (n_0 g_k + S_k) / (n_0 + n_k),

    the guess ``g_k`` counting as ``n_0`` examples (``pseudo_count``): the guess alone
    before any charge, the mean charge ``S_k / n_k`` once ``n_k >> n_0``.  It is the
    posterior mean of ``c_k`` when each example's cost is Gamma-distributed with mean
    ``c_k`` and known shape ``alpha = 1 / CV_cell^2`` and ``c_k`` has the inverse-gamma
    prior of mean ``g_k`` and shape ``n_0 alpha + 1``: the rate ``alpha / c_k`` is then
    conjugate, with posterior ``Gamma(n_0 alpha + 1 + n_k alpha, alpha (n_0 g_k + S_k))``
    and ``E[c_k | S_k] = alpha (n_0 g_k + S_k) / (alpha (n_0 + n_k))``.  The prior's
    coefficient of variation is ``CV_prior^2 = 1 / (n_0 alpha - 1)``, so

        n_0 = CV_cell^2 (1 + 1 / CV_prior^2):

    cells whose costs vary little (GSM8K's replies: ``CV_cell`` 0.2 to 0.9) or a guess
    trusted little make the charges take over after a few examples.  Without the Gamma
    model it is Buhlmann's credibility estimate, the best estimate linear in ``S_k`` under
    squared loss, with ``n_0 = E[within-arm variance] / Var[c_k]``.  Only sums of charges
    enter, as a live call reports the cost of a whole batch.

    The scale is linear, not logarithmic, although a guess is off by a factor: the policy
    and the budget need the expected (arithmetic mean) cost, which ``S_k / n_k`` estimates
    without bias, while a mean of log charges estimates the geometric mean, lower by about
    ``CV_cell^2 / 2`` (4 to 26 % on GSM8K's cells), and a batch's charge is one number for
    all its examples.

    Re-planning: the policy plans with ``planned_k``, the guess at first.  After a charge
    of arm ``k``, ``planned_k`` becomes ``c_hat_k`` if ``|c_hat_k - planned_k| > s planned_k``
    (``refresh_share``), and :meth:`charge` says so; the driver then hands the policy the
    new costs.  The share bounds the error the policy plans with at ``s`` of the estimate
    while sparing it a re-plan after every batch.  Shapes: every attribute is ``[K]``.

    Args:
        guess: ``[K]`` guessed costs per example, positive and finite.
        learning: the pseudo-count and the refresh share.
    """

    def __init__(self, guess: np.ndarray, learning: CostLearning) -> None:
        self.guess = positive_finite_values(np.array(guess, dtype=np.float64), "guessed costs", item="arms")
        self.learning = learning
        self.charged = np.zeros(self.guess.size)
        self.n_charged = np.zeros(self.guess.size, dtype=np.int64)
        self.planned = self.guess.copy()
        self.n_refreshes = 0

    @property
    def estimate(self) -> np.ndarray:
        """``[K]`` ``c_hat_k = (n_0 g_k + S_k) / (n_0 + n_k)``."""
        n_0 = self.learning.pseudo_count
        return (n_0 * self.guess + self.charged) / (n_0 + self.n_charged)

    def charge(self, arm: int, n_examples: int, cost: float) -> bool:
        """Add ``cost``, charged for ``n_examples`` examples of ``arm``; whether ``planned`` changed."""
        self.charged[arm] += cost
        self.n_charged[arm] += n_examples
        estimate = float(self.estimate[arm])
        if abs(estimate - self.planned[arm]) <= self.learning.refresh_share * self.planned[arm]:
            return False
        self.planned[arm] = estimate
        self.n_refreshes += 1
        return True


@dataclass(frozen=True)
class CostPlan:
    """How a simulated policy plans its costs: the ``[K]`` ``guess`` it starts from (which the run's
    ``learn_costs`` learns, :class:`~gittinseval.core.session.RunSettings`); ``name`` says how it was guessed,
    as the run's summary records it (``cost_plan``)."""

    name: str
    guess: np.ndarray
