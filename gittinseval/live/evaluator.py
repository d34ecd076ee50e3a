"""Ask/tell GittinsEval for live evaluation, backed by a crash-safe store."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gittinseval.data import validate_prices
from gittinseval.gittins import GittinsPolicy
from gittinseval.live.store import RunStore, describe_differences
from gittinseval.priors import GaussianPrior
from gittinseval.protocol import EvaluationProblem, Request, validate_scores

__all__ = ["ArmStatus", "Evaluator", "Recommendation", "arm_name"]

STORE_FORMAT = 1


def arm_name(arm: Any) -> str:
    """Stable name of an arm: a string as is, anything else as sorted-key JSON."""
    return arm if isinstance(arm, str) else json.dumps(arm, sort_keys=True, default=str)


@dataclass(frozen=True)
class Recommendation:
    """The recommended arm and its posterior moments of the full-benchmark mean.

    ``lcb = mean - kappa * sqrt(variance)`` is the score the recommendation
    maximises (kappa = 1: the paper's LCB rule).
    """

    arm: int
    name: str
    mean: float
    variance: float
    lcb: float


@dataclass(frozen=True)
class ArmStatus:
    """Per-arm table, every column of length ``K``.

    ``n_seen`` told examples, ``outstanding`` whether a request is in flight,
    ``sample_mean`` the mean of the told scores (NaN before any), ``mean`` and
    ``variance`` the posterior ``M`` and ``V`` of the full-benchmark mean,
    ``index`` the Gittins index and ``lcb`` the recommendation score.
    """

    names: tuple[str, ...]
    n_seen: np.ndarray
    outstanding: np.ndarray
    sample_mean: np.ndarray
    mean: np.ndarray
    variance: np.ndarray
    index: np.ndarray
    lcb: np.ndarray

    def format(self, top: int = 10) -> str:
        """The ``top`` arms by ``lcb`` as a text table."""
        order = np.argsort(-self.lcb, kind="stable")[:top]
        width = min(40, max(len(self.names[k]) for k in order))
        header = (
            f"{'arm':>6}  {'name':<{width}}  {'seen':>6}  {'mean':>6}  {'M':>6}  {'sd(V)':>6}  {'index':>7}  {'lcb':>6}"
        )
        lines = [header]
        for k in order:
            lines.append(
                f"{k:>6}  {self.names[k][:width]:<{width}}  {self.n_seen[k]:>6}  {self.sample_mean[k]:>6.3f}  "
                f"{self.mean[k]:>6.3f}  {math.sqrt(self.variance[k]):>6.3f}  {self.index[k]:>7.3f}  {self.lcb[k]:>6.3f}"
                + ("  *" if self.outstanding[k] else "")
            )
        return "\n".join(lines)


class Evaluator:
    """GittinsEval as an ask/tell loop over live scores, recorded in SQLite.

    ``ask()`` returns the next :class:`~gittinseval.protocol.Request` (an arm and
    the ids of its batch of unseen examples), ``tell(request, scores, cost)``
    records its scores.  The allocation, example order and recommendation are
    exactly those of :class:`~gittinseval.gittins.GittinsPolicy` seeded with
    ``np.random.default_rng(seed)``: with one request in flight at a time the run
    is the simulator's run on the same scores.

    Several requests may be outstanding.  **Arms with an outstanding request are
    skipped**: ``ask()`` picks the largest Gittins index among idle unfinished
    arms, and returns ``None`` when every unfinished arm is busy.  Why this rule
    rather than sending the same arm several batches at once: the index of an
    arm ``G_k = M_k - r_{k, n_k}`` is the value of evaluating *one* batch and then
    looking at it; a second batch sent before the first is told would be
    chosen on a stale posterior, commit money the first batch may show to be
    wasted, and leave the arm's batch stage (and so its root ``r_{k, n_k}``)
    ambiguous.  With ``c`` requests in flight the rule evaluates the ``c`` best
    idle arms, each on a fully updated posterior, and it keeps each arm's batches
    in the order of its example permutation, so a store can be replayed exactly.
    ``ask()`` never hands out an example twice.

    Store: every issued request and every told cell is written to the SQLite
    file ``store`` (see :mod:`gittinseval.live.store`) before ``ask`` or ``tell``
    returns.  Opening an existing store replays its told requests in the order
    they were told, giving the same posterior, stopping signal and future
    example order; its issued-but-untold requests are handed out again by the
    next calls to ``ask()``, oldest first.  A store made with other arms, costs
    or settings is refused with an error listing the differences.

    Args:
        arms: the ``K`` arms; strings, or JSON-serialisable configurations.
        n_examples: ``N``, the examples of the dataset, with ids ``0 .. N-1``.
        costs: ``[K]`` expected cost of one example of each arm (dollars); the
            policy's cost ``c_k``.  ``None``: equal costs of 1.
        prior: Gaussian prior on each arm's mean score; ``None``: N(0.5, 0.04).
        batch_size, lam, kappa, cell_var, grid_points: as in
            :class:`~gittinseval.gittins.GittinsPolicy`.
        store: path of the SQLite store, or ``None`` to keep the run in memory.
        seed: seed of the example order and tie-breaking.
        dataset: identifier of the dataset (e.g. a digest), checked on resume.
    """

    def __init__(
        self,
        arms: Sequence[Any],
        n_examples: int,
        costs: Sequence[float] | np.ndarray | None = None,
        prior: GaussianPrior | None = None,
        *,
        batch_size: int = 8,
        lam: float = 1e-4,
        kappa: float = 1.0,
        cell_var: float = 0.25,
        grid_points: int = 1025,
        store: str | Path | None = None,
        seed: int = 0,
        dataset: str | None = None,
    ) -> None:
        names = [arm_name(arm) for arm in arms]
        if not names:
            raise ValueError("at least one arm is needed")
        if len(set(names)) != len(names):
            repeated = sorted({name for name in names if names.count(name) > 1})
            raise ValueError(f"arm names must be distinct; repeated: {repeated[:5]}")
        if isinstance(seed, bool) or int(seed) != seed:
            raise ValueError(f"seed must be an integer, got {seed!r}")
        costs = np.ones(len(names)) if costs is None else validate_prices(costs, len(names), "costs")
        prior = GaussianPrior() if prior is None else prior
        if not isinstance(prior, GaussianPrior):
            raise ValueError(f"prior must be a GaussianPrior (resolve a BenchmarkPrior first), got {prior!r}")
        self.policy = GittinsPolicy(batch_size, lam, kappa, cell_var, grid_points)
        problem = EvaluationProblem(
            n_examples=n_examples,
            costs=costs,
            # The evaluator has no budget of its own (the driver enforces one); the
            # policy does not read it.
            budget=n_examples * float(costs.sum()),
            prior_mean=prior.mean,
            prior_var=prior.var,
            binary=False,
        )
        self.names = tuple(names)
        self.costs = problem.costs
        self.n_examples = problem.n_examples
        self.settings = {
            "format": STORE_FORMAT,
            "n_examples": int(n_examples),
            "prior_mean": float(prior.mean),
            "prior_var": float(prior.var),
            **self.policy.hyperparameters(),
            "seed": int(seed),
            "dataset": dataset,
        }
        self.store = RunStore(store)
        try:
            self._open_store(problem, int(seed))
        except BaseException:
            self.store.close()
            raise

    @classmethod
    def from_store(cls, store: str | Path) -> Evaluator:
        """Reopen an existing store with the arms and settings it was created with."""
        if not Path(store).is_file():
            raise FileNotFoundError(f"no store at {store}")
        reader = RunStore(store)
        try:
            definition = reader.load_definition()
        finally:
            reader.close()
        if definition is None:
            raise ValueError(f"store {store} holds no run")
        settings, names, costs = definition
        return cls(
            names,
            settings["n_examples"],
            costs,
            GaussianPrior(settings["prior_mean"], settings["prior_var"]),
            batch_size=settings["batch_size"],
            lam=settings["lam"],
            kappa=settings["kappa"],
            cell_var=settings["cell_var"],
            grid_points=settings["grid_points"],
            store=store,
            seed=settings["seed"],
            dataset=settings["dataset"],
        )

    def _open_store(self, problem: EvaluationProblem, seed: int) -> None:
        given = (self.settings, self.names, self.costs)
        stored = self.store.load_definition()
        if stored is None:
            self.store.define(*given)
        elif differences := describe_differences(stored, given):
            raise ValueError(
                f"store {self.store.path} was created with other arms or settings:\n  " + "\n  ".join(differences)
            )
        self.policy.reset(problem, np.random.default_rng(seed))
        self._outstanding: dict[int, tuple[int, Request]] = {}
        self._reissue: list[int] = []
        self._spent = 0.0
        self._trace: list[tuple[int, int, float, int, bool]] = []
        for told in self.store.told_requests():
            self._record(self._replay_take(told.arm, told.examples), told.scores, told.cost)
        for pending in self.store.outstanding_requests():
            if pending.arm in self._outstanding:
                raise ValueError(f"store {self.store.path} has two outstanding requests for arm {pending.arm}")
            self._outstanding[pending.arm] = (pending.id, self._replay_take(pending.arm, pending.examples))
            self._reissue.append(pending.arm)

    def _replay_take(self, arm: int, examples: np.ndarray) -> Request:
        """Take a stored request's batch from the example order, checking it matches."""
        taken = self.policy.order.take(arm, len(examples))
        if not np.array_equal(taken, examples):
            raise ValueError(
                f"store {self.store.path}: arm {arm}'s stored examples do not follow the seed's example order "
                "(was it written by another numpy version or edited?)"
            )
        return Request(arm, taken)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    @property
    def n_arms(self) -> int:
        return len(self.names)

    @property
    def spent(self) -> float:
        """Money spent on told requests (the costs passed to :meth:`tell`)."""
        return self._spent

    @property
    def stop_signal(self) -> bool:
        """The Gittins stopping signal: a completed arm has attained the largest index."""
        return self.policy.stop_signal

    @property
    def n_outstanding(self) -> int:
        return len(self._outstanding)

    @property
    def outstanding_cost(self) -> float:
        """Expected cost of the outstanding requests, ``sum size * c_arm``."""
        return float(sum(request.size * self.costs[arm] for arm, (_, request) in self._outstanding.items()))

    @property
    def finished(self) -> bool:
        """True when every example of every arm is told."""
        return bool(self.policy.posterior.completed.all())

    def ask(self) -> Request | None:
        """The next request, or ``None`` if every unfinished arm has one outstanding."""
        if self._reissue:
            return self._outstanding[self._reissue.pop(0)][1]
        busy = list(self._outstanding)
        open_index = self.policy.open_index
        saved = open_index[busy]
        open_index[busy] = -np.inf
        try:
            request = self.policy.select()
        finally:
            open_index[busy] = saved
        if request is None:
            return None
        try:
            request_id = self.store.issue(request.arm, request.examples)
        except BaseException:
            # Not recorded, so not issued: give the examples back to the order.
            self.policy.order.n_taken[request.arm] -= request.size
            raise
        self._outstanding[request.arm] = (request_id, request)
        return request

    def tell(self, request: Request, scores: Any, cost: float | None = None) -> float:
        """Record the ``[request.size]`` scores of an outstanding request; returns its cost.

        ``cost`` is what the request actually cost; ``None`` means its expected
        cost ``size * c_arm``.  The scores, the cost and the request's state are
        written in one transaction before the posterior is updated.
        """
        arm = int(request.arm)
        entry = self._outstanding.get(arm) if 0 <= arm < self.n_arms else None
        if entry is None or not np.array_equal(entry[1].examples, request.examples):
            raise ValueError(self._describe_unknown(request))
        request_id, issued = entry
        scores = validate_scores(issued, scores)
        if cost is None:
            cost = issued.size * float(self.costs[arm])
        elif not (math.isfinite(cost) and cost >= 0):
            raise ValueError(f"arm {arm}: cost must be finite and non-negative, got {cost!r}")
        self.store.tell(request_id, arm, issued.examples, scores, float(cost))
        del self._outstanding[arm]
        if arm in self._reissue:
            self._reissue.remove(arm)
        self._record(issued, scores, float(cost))
        return float(cost)

    def _record(self, request: Request, scores: np.ndarray, cost: float) -> None:
        self.policy.observe(request, scores)
        self._spent += cost
        self._trace.append((request.arm, request.size, self._spent, self.policy.recommend(), self.stop_signal))

    def _describe_unknown(self, request: Request) -> str:
        arm = int(request.arm)
        if not 0 <= arm < self.n_arms:
            return f"request for arm {arm}, outside [0, {self.n_arms})"
        told = self.policy.order.order[arm, : self.policy.posterior.n_seen[arm]]
        examples = np.asarray(request.examples)
        if examples.size and np.isin(examples, told).all():
            return f"arm {arm}: examples {examples[:5].tolist()} were already told"
        return (
            f"arm {arm}: no outstanding request for examples {examples[:5].tolist()}; tell() takes requests from ask()"
        )

    def recommend(self) -> Recommendation:
        """The arm maximising ``M - kappa sqrt(V)``, with its ``M``, ``V`` and that score."""
        arm = self.policy.recommend()
        post = self.policy.posterior
        return Recommendation(
            arm,
            self.names[arm],
            float(post.mean[arm]),
            float(post.variance[arm]),
            float(self.policy.recommend_score[arm]),
        )

    def status(self) -> ArmStatus:
        post = self.policy.posterior
        outstanding = np.zeros(self.n_arms, dtype=bool)
        outstanding[list(self._outstanding)] = True
        with np.errstate(invalid="ignore", divide="ignore"):
            sample_mean = np.where(post.n_seen > 0, post.score_sum / post.n_seen, np.nan)
        return ArmStatus(
            self.names,
            post.n_seen.copy(),
            outstanding,
            sample_mean,
            post.mean.copy(),
            post.variance.copy(),
            self.policy.index.copy(),
            self.policy.recommend_score.copy(),
        )

    def trace(self) -> dict[str, np.ndarray]:
        """One entry per told request, in tell order (columns as in the simulator's trace).

        ``step`` (1-based), ``arm``, ``batch_size``, ``cost`` (cumulative spend),
        ``recommended`` (arm recommended after the tell) and ``stop_signal``.
        """
        rows = self._trace
        return {
            "step": np.arange(1, len(rows) + 1),
            "arm": np.array([r[0] for r in rows], dtype=np.int64),
            "batch_size": np.array([r[1] for r in rows], dtype=np.int64),
            "cost": np.array([r[2] for r in rows], dtype=np.float64),
            "recommended": np.array([r[3] for r in rows], dtype=np.int64),
            "stop_signal": np.array([r[4] for r in rows], dtype=bool),
        }
