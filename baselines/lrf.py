"""UCB-E-LRF: UCB-E on a low-rank ensemble completion of the score matrix (BanditEval)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from baselines._common import RunningMeans
from gittinseval.gittins import argmax_by_priority
from gittinseval.protocol import EvaluationProblem, Policy, Request, check_batch_size, validate_scores

__all__ = ["LowRankEnsemble", "LRFPolicy"]

PAIRINGS = ("reference", "independent")


class LowRankEnsemble:
    """Ensemble of ridge alternating-least-squares factorisations ``X ~ U_e V_e^T``.

    Member ``e`` sees the observed cells minus its own random 5% dropout ``D_e``,
    ``O_e = O & ~D_e``, and alternates (``V`` first) for ``iterations`` rounds

        V[e, n] = (sum_k O_e[k,n] u u^T + w I)^{-1} sum_k O_e[k,n] X[k,n] u,   u = U[p_V(e,n), k],
        U[e, k] = (sum_n O_e[k,n] v v^T + w I)^{-1} sum_n O_e[k,n] X[k,n] v,   v = V[p_U(e,k), n],

    from ``U, V ~ N(0, 1)``.  ``pairing="independent"`` fits every member against
    its own factors, ``p(e, .) = e``.  ``pairing="reference"`` reproduces the
    reference implementation, which flattens members and columns into one batch
    and tiles the fixed factor member-major, so that column ``n`` of member ``e``
    is fitted against member ``p_V(e, n) = (e N + n) mod E`` and row ``k`` against
    member ``p_U(e, k) = (e K + k) mod E``.  That mixing pulls the members towards
    each other and shrinks the ensemble spread; it is what the paper's LRF ran.

    Only observed cells enter the normal equations, so each update gathers the
    partner factors at the ``M`` observed cells (``[E, M, r]``) and scatter-adds
    their terms into the solved rows or columns: ``O(E M r^2)`` work per update,
    batched over members and cells, with no loop over arms or members.

    The factors are float32, as in the reference: scores lie in ``[0, 1]``, the
    ridge weight keeps every ``r x r`` system well conditioned, and float32 halves
    the ``[E, K, N]`` dropout draw that dominates memory.  The ensemble moments
    are accumulated in float64.  Random draws, in the reference's order and
    dtype: ``U [E, K, r]`` and ``V [E, N, r]`` normal, then the dropout uniforms
    ``[E, K, N]``, all from the given ``torch.Generator``.
    """

    def __init__(
        self,
        rank: int = 1,
        ensemble_size: int = 64,
        ridge: float = 0.1,
        drop_probability: float = 0.05,
        iterations: int = 10,
        pairing: str = "reference",
    ) -> None:
        for key, value in (("rank", rank), ("ensemble_size", ensemble_size), ("iterations", iterations)):
            if isinstance(value, bool) or int(value) != value or value < 1:
                raise ValueError(f"{key} must be a positive integer, got {value!r}")
        if ensemble_size < 2:
            raise ValueError(f"ensemble_size must be at least 2 for an ensemble spread, got {ensemble_size}")
        if not (math.isfinite(ridge) and ridge > 0):
            raise ValueError(f"ridge must be positive and finite, got {ridge!r}")
        if not (0 <= drop_probability < 1):
            raise ValueError(f"drop_probability must be in [0, 1), got {drop_probability!r}")
        if pairing not in PAIRINGS:
            raise ValueError(f"pairing must be one of {PAIRINGS}, got {pairing!r}")
        self.rank = int(rank)
        self.ensemble_size = int(ensemble_size)
        self.ridge = float(ridge)
        self.drop_probability = float(drop_probability)
        self.iterations = int(iterations)
        self.pairing = pairing

    def hyperparameters(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "ensemble_size": self.ensemble_size,
            "ridge": self.ridge,
            "drop_probability": self.drop_probability,
            "iterations": self.iterations,
            "pairing": self.pairing,
        }

    def fit(
        self, values: np.ndarray, observed: np.ndarray, generator: torch.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Ensemble mean and standard deviation ``[K, N]`` of ``U_e V_e^T`` over members.

        Args:
            values: ``[K, N]`` scores; only cells where ``observed`` is true are read.
            observed: ``[K, N]`` boolean mask of observed cells.
            generator: source of the initial factors and the dropout masks.

        The standard deviation uses the ``E - 1`` denominator, like ``torch.std``.
        """
        n_arms, n_examples = observed.shape
        members, rank = self.ensemble_size, self.rank
        u = torch.randn(members, n_arms, rank, generator=generator)
        v = torch.randn(members, n_examples, rank, generator=generator)
        uniforms = torch.rand(members, n_arms, n_examples, generator=generator)
        rows, columns = (torch.from_numpy(i) for i in np.nonzero(observed))
        kept = (uniforms[:, rows, columns] >= self.drop_probability).to(torch.float32)
        del uniforms
        scores = torch.from_numpy(values[observed]).to(torch.float32)
        weighted = kept * scores
        # Flat positions, in the [E * length] stacked factors, of each (member, cell)'s partner factor.
        partner_u = self._partners(columns, n_examples) * n_arms + rows
        partner_v = self._partners(rows, n_arms) * n_examples + columns
        for _ in range(self.iterations):
            v = self._solve(kept, weighted, u.reshape(-1, rank)[partner_u], columns, n_examples)
            u = self._solve(kept, weighted, v.reshape(-1, rank)[partner_v], rows, n_arms)
        return _ensemble_moments(u.double(), v.double())

    def _partners(self, solved_index: torch.Tensor, length: int) -> torch.Tensor:
        """``[E, M]`` member whose fixed factor member ``e`` uses at each observed cell.

        ``solved_index [M]`` is each cell's row or column on the side being solved,
        which has ``length`` rows or columns.
        """
        members = torch.arange(self.ensemble_size)[:, None]
        if self.pairing == "independent":
            return members.expand(-1, solved_index.numel())
        return (members * length + solved_index[None, :]) % self.ensemble_size

    def _solve(
        self, kept: torch.Tensor, weighted: torch.Tensor, fixed: torch.Tensor, index: torch.Tensor, length: int
    ) -> torch.Tensor:
        """Ridge solutions ``[E, length, r]`` given each cell's partner factor ``fixed [E, M, r]``.

        ``kept [E, M]`` is 1 where a member keeps an observed cell, ``weighted [E, M]``
        that times the cell's score.  The normal equations are accumulated by
        scatter-adding the cells' terms into their row or column ``index [M]``.
        """
        members, rank = self.ensemble_size, self.rank
        outer = (fixed[..., :, None] * fixed[..., None, :]).flatten(-2)
        gram = torch.zeros(members, length, rank * rank).index_add_(1, index, kept[..., None] * outer)
        target = torch.zeros(members, length, rank).index_add_(1, index, weighted[..., None] * fixed)
        if rank == 1:
            return target / (gram + self.ridge)
        eye = self.ridge * torch.eye(rank)
        return torch.linalg.solve(gram.unflatten(-1, (rank, rank)) + eye, target[..., None])[..., 0]


def _ensemble_moments(u: torch.Tensor, v: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd over members of ``U_e V_e^T``, via ``[K, E r^2] x [E r^2, N]`` products."""
    members = u.shape[0]
    total = torch.einsum("ekr,enr->kn", u, v)
    u_outer = (u[..., :, None] * u[..., None, :]).flatten(-2)
    v_outer = (v[..., :, None] * v[..., None, :]).flatten(-2)
    squares = torch.einsum("eks,ens->kn", u_outer, v_outer)
    mean = total / members
    variance = ((squares - total * mean) / (members - 1)).clamp_min(0.0)
    return mean.numpy(), variance.sqrt().numpy()


class LRFPolicy(Policy):
    """UCB-E-LRF: optimism on a completed matrix, evaluating its most uncertain cells.

    Warm-up: ``T0 = ceil(w K N)`` cells drawn uniformly without replacement,
    counted in the budget and issued as one request per arm that received any
    (arms in a random order).  After the warm-up, each ``select`` refits a
    :class:`LowRankEnsemble` on the observed matrix and scores

        cell:  s[k, n] = X[k, n] if observed, else mean[k, n] + eta * sd[k, n],
        arm:   S_k = (1/N) sum_n s[k, n]   (+inf if unobserved, -inf if completed),

    then evaluates ``argmax_k S_k`` on its ``B`` unseen examples of largest ``sd``.
    ``recommend`` returns the arm of largest imputed mean: observed cells at their
    values, the others at the latest fit's ensemble mean (the fit made by the last
    ``select``, so recommending costs no refit).  Before the first fit (during the
    warm-up and after its last request) it returns the best empirical mean.
    Ties go to a per-run random ranking of the arms.  Costs play no part in the
    allocation.

    Args:
        batch_size: ``B``, examples per pull after the warm-up (32 in the paper).
        eta: weight of the ensemble sd in the cell score.
        warmup_fraction: ``w``, the warm-up's share of the ``K N`` cells.
        ensemble: the :class:`LowRankEnsemble` refitted each step (default: the
            reference's rank 1, 64 members).
    """

    name = "lrf"
    label = "UCB-E-LRF"
    uses_prior = False

    def __init__(
        self,
        batch_size: int = 32,
        eta: float = 5.0,
        warmup_fraction: float = 0.05,
        ensemble: LowRankEnsemble | None = None,
    ) -> None:
        if not (math.isfinite(eta) and eta >= 0):
            raise ValueError(f"eta must be non-negative and finite, got {eta!r}")
        if not (0 < warmup_fraction < 1):
            raise ValueError(f"warmup_fraction must be in (0, 1), got {warmup_fraction!r}")
        self.batch_size = check_batch_size(batch_size)
        self.eta = float(eta)
        self.warmup_fraction = float(warmup_fraction)
        self.ensemble = LowRankEnsemble() if ensemble is None else ensemble

    def hyperparameters(self) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size,
            "eta": self.eta,
            "warmup_fraction": self.warmup_fraction,
            **self.ensemble.hyperparameters(),
        }

    def reset(self, problem: EvaluationProblem, rng: np.random.Generator) -> None:
        n_arms, n_examples = problem.n_arms, problem.n_examples
        warmup_cells = math.ceil(self.warmup_fraction * n_arms * n_examples - 1e-9)
        cells = np.sort(rng.choice(n_arms * n_examples, size=warmup_cells, replace=False))
        arms, first = np.unique(cells // n_examples, return_index=True)
        per_arm = np.split(cells % n_examples, first[1:])
        self.warmup = [Request(int(arms[i]), per_arm[i]) for i in rng.permutation(arms.size)]
        self.priority = rng.permutation(n_arms)
        self.generator = torch.Generator().manual_seed(int(rng.integers(2**63 - 1)))
        self.values = np.zeros((n_arms, n_examples))
        self.observed = np.zeros((n_arms, n_examples), dtype=bool)
        self.stats = RunningMeans(n_arms)
        self.all_arms = np.ones(n_arms, dtype=bool)
        self.fit_mean: np.ndarray | None = None
        self.imputed_sums = np.zeros(n_arms)

    def arm_scores(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Refit; return the arm scores ``S [K]``, the ensemble mean and sd ``[K, N]``."""
        mean, sd = self.ensemble.fit(self.values, self.observed, self.generator)
        cell = np.where(self.observed, self.values, mean + self.eta * sd)
        scores = cell.mean(axis=1)
        counts = self.stats.counts
        scores[counts == 0] = np.inf
        scores[counts == self.observed.shape[1]] = -np.inf
        return scores, mean, sd

    def select(self) -> Request | None:
        if self.warmup:
            return self.warmup.pop()
        scores, mean, sd = self.arm_scores()
        self.fit_mean = mean
        self.imputed_sums = np.where(self.observed, self.values, mean).sum(axis=1)
        arm = argmax_by_priority(scores, self.priority)
        if arm < 0:
            return None
        unseen = np.flatnonzero(~self.observed[arm])
        spread = sd[arm, unseen]
        size = min(self.batch_size, unseen.size)
        return Request(arm, unseen[np.argsort(-spread, kind="stable")[:size]])

    def observe(self, request: Request, scores: np.ndarray) -> None:
        scores = validate_scores(request, scores)
        arm, examples = request.arm, request.examples
        self.values[arm, examples] = scores
        self.observed[arm, examples] = True
        self.stats.update(arm, scores)
        if self.fit_mean is not None:
            self.imputed_sums[arm] += (scores - self.fit_mean[arm, examples]).sum()

    def recommend(self) -> int:
        if self.fit_mean is None:
            return self.stats.best(self.all_arms, self.priority)
        return argmax_by_priority(self.imputed_sums, self.priority)
