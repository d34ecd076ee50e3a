"""PromptEval-BAI, PE-OneHot variant (Polo et al. 2024): successive halving with a Rasch fit."""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse
from sklearn.linear_model import LogisticRegression

from gittinseval.baselines._common import RunningMeans, cell_budget
from gittinseval.core.protocol import (
    EvaluationProblem,
    Policy,
    Request,
    argmax_by_priority,
    check_batch_size,
)
from gittinseval.utils.validation import positive_float, positive_int

__all__ = ["PromptEvalPolicy", "rasch_completion"]


def rasch_completion(values: np.ndarray, observed: np.ndarray, inverse_regularization: float = 100.0) -> np.ndarray:
    """Fill the unobserved cells with a one-hot logistic (Rasch-type) model.

    Fits ``P(X[k, n] = 1) = sigmoid(theta_k + beta_n)`` to the observed cells by
    L2-penalised maximum likelihood, ``min 1/2 |(theta, beta)|^2 + C sum loglik``,
    with no intercept (scikit-learn's liblinear solver, ``C =
    inverse_regularization``), and returns the ``[K, N]`` matrix with observed
    cells at their values and the others at the fitted probability.  If every
    observed score is the same, the model has one class and the fill is that score.

    Args:
        values: ``[K, N]`` binary scores, read where ``observed``.
        observed: ``[K, N]`` boolean mask.
    """
    n_arms, n_examples = observed.shape
    rows, columns = np.nonzero(observed)
    labels = values[rows, columns]
    if labels.min() == labels.max():
        return np.where(observed, values, labels[0])
    ones = np.ones(rows.size)
    design = sparse.hstack(
        [
            sparse.csr_matrix((ones, (np.arange(rows.size), rows)), shape=(rows.size, n_arms)),
            sparse.csr_matrix((ones, (np.arange(rows.size), columns)), shape=(rows.size, n_examples)),
        ],
        format="csr",
    )
    model = LogisticRegression(C=inverse_regularization, solver="liblinear", fit_intercept=False)
    model.fit(design, labels.astype(np.int64))
    arm_effect, example_effect = model.coef_[0, :n_arms], model.coef_[0, n_arms:]
    logits = arm_effect[:, None] + example_effect[None, :]
    return np.where(observed, values, 1.0 / (1.0 + np.exp(-logits)))


class PromptEvalPolicy(Policy):
    """Successive halving with stratified sampling and a Rasch-model completion.

    The budget of ``n`` cells is split over ``P = min(ceil(log2 K), max_phases)``
    phases, ``floor(n / P)`` each and the remainder to the first.  Within a phase
    each request goes to the surviving arm with the fewest observed cells, on up
    to ``B`` of its unseen examples, least-covered first (coverage = arms
    observed on the example; ties in a per-run random example order).  At the
    end of a phase, :func:`rasch_completion` is fitted to all observed cells and
    the ``ceil(S / 2)`` survivors of largest completed row mean are kept.
    ``recommend`` returns the best raw empirical mean among the survivors.
    Ties between arms go to a per-run random ranking.

    Binary scores only: the Rasch model is a model of correct/incorrect outcomes,
    so :meth:`reset` rejects continuous scores.  The budget in cells is the run's
    budget fraction of the ``K N`` cells: costs play no part in the allocation.

    Args:
        batch_size: ``B``, examples per request (the reference samples one cell at a time).
        max_phases: cap on the number of halving phases (5 in the paper's runner).
        inverse_regularization: ``C`` of the logistic fit.
    """

    name = "prompteval"
    label = "PromptEval"
    uses_prior = False
    requires_binary = True

    def __init__(self, batch_size: int = 1, max_phases: int = 5, inverse_regularization: float = 100.0) -> None:
        max_phases = positive_int("max_phases", max_phases)
        inverse_regularization = positive_float("inverse_regularization", inverse_regularization)
        self.batch_size = check_batch_size(batch_size)
        self.max_phases = int(max_phases)
        self.inverse_regularization = float(inverse_regularization)

    def reset(self, problem: EvaluationProblem, rng: np.random.Generator) -> None:
        if not problem.binary:
            raise ValueError(
                "prompteval (PE-OneHot) fits a logistic Rasch model of correct/incorrect outcomes and "
                "needs binary scores; this benchmark has continuous scores (e.g. AlpacaEval preferences)"
            )
        n_arms, n_examples = problem.n_arms, problem.n_examples
        n_phases = min(math.ceil(math.log2(n_arms)), self.max_phases) if n_arms > 1 else 0
        cells = cell_budget(problem)
        self.phase_budgets = np.full(n_phases, cells // max(n_phases, 1), dtype=np.int64)
        if n_phases:
            self.phase_budgets[0] += cells % n_phases
        self.priority = rng.permutation(n_arms)
        self.example_rank = rng.permutation(n_examples)
        self.coverage = np.zeros(n_examples, dtype=np.int64)
        self.values = np.zeros((n_arms, n_examples))
        self.observed = np.zeros((n_arms, n_examples), dtype=bool)
        self.stats = RunningMeans(n_arms)
        self.survivors = np.ones(n_arms, dtype=bool)
        self.phase = 0
        self.phase_spent = 0

    def select(self) -> Request | None:
        if self.phase >= self.phase_budgets.size:
            return None
        counts = self.stats.counts
        open_arms = self.survivors & (counts < self.observed.shape[1])
        arm = argmax_by_priority(np.where(open_arms, -counts.astype(np.float64), -np.inf), self.priority)
        if arm < 0:
            return None
        unseen = np.flatnonzero(~self.observed[arm])
        size = min(self.batch_size, int(self.phase_budgets[self.phase] - self.phase_spent), unseen.size)
        chosen = np.lexsort((self.example_rank[unseen], self.coverage[unseen]))[:size]
        return Request(arm, unseen[chosen])

    def cancel(self, request: Request) -> None:
        """Nothing to undo: :meth:`select` changes no state."""

    def observe(self, request: Request, scores: np.ndarray) -> None:
        arm, examples = request.arm, request.examples
        self.values[arm, examples] = scores
        self.observed[arm, examples] = True
        self.coverage[examples] += 1
        self.stats.update(arm, scores)
        self.phase_spent += request.size
        if self.phase_spent >= self.phase_budgets[self.phase]:
            self._halve()

    def _halve(self) -> None:
        """Keep the ``ceil(S / 2)`` survivors of largest Rasch-completed row mean."""
        completed = rasch_completion(self.values, self.observed, self.inverse_regularization).mean(axis=1)
        arms = np.flatnonzero(self.survivors)
        # Sort by score, then by the random ranking among exact ties.
        ranked = arms[np.lexsort((self.priority[arms], -completed[arms]))]
        self.survivors[ranked[math.ceil(arms.size / 2) :]] = False
        self.phase += 1
        self.phase_spent = 0

    def recommend(self) -> int:
        return self.stats.best(self.survivors, self.priority)
