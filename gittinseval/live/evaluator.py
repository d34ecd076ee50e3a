"""Ask/tell live evaluation with any policy, backed by a crash-safe store."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gittinseval.live.config import LiveConfig
from gittinseval.live.store import RunStore, StoredEvent, describe_differences
from gittinseval.live.task import LiveTask, TaskDefinition
from gittinseval.params import build, target_of
from gittinseval.posterior import FiniteBenchmarkPosterior
from gittinseval.priors import GaussianPrior
from gittinseval.protocol import EvaluationProblem, Request, check_live_support, validate_scores

__all__ = ["ArmStatus", "Evaluator", "Recommendation"]

STORE_FORMAT = 2


def _jsonable(value: Any) -> Any:
    """``value`` as it reads back from JSON (so that stored and given settings compare equal)."""
    return json.loads(json.dumps(value, default=float))


@dataclass(frozen=True)
class Recommendation:
    """The policy's recommended arm with the run's posterior of its full-benchmark mean.

    ``mean`` and ``variance`` are ``M`` and ``V`` of the finite-benchmark posterior
    under the run's prior (the same for every policy); ``lcb = M - kappa sqrt(V)``
    with the ``kappa`` of the policy's :meth:`~gittinseval.protocol.Policy.posterior_report`
    (1 unless the policy has its own, as GittinsEval does).  For
    GittinsEval this is the score its recommendation maximises.  GittinsEval-EB
    (``prior_estimator``) maximises it under its learned prior instead, which its
    ``diagnostics()`` report; the reported moments stay under the run's starting prior,
    so that they mean the same for every policy.
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
    ``variance`` the posterior ``M`` and ``V`` of the full-benchmark mean and
    ``lcb`` = ``M - kappa sqrt(V)`` (see :class:`Recommendation`).
    """

    names: tuple[str, ...]
    n_seen: np.ndarray
    outstanding: np.ndarray
    sample_mean: np.ndarray
    mean: np.ndarray
    variance: np.ndarray
    lcb: np.ndarray

    def format(self, top: int = 10) -> str:
        """The ``top`` arms by ``lcb`` as a text table (``*``: request in flight)."""
        order = np.argsort(-self.lcb, kind="stable")[:top]
        width = min(40, max(len(self.names[k]) for k in order))
        header = f"{'arm':>6}  {'name':<{width}}  {'seen':>6}  {'mean':>6}  {'M':>6}  {'sd(V)':>6}  {'lcb':>6}"
        lines = [header]
        for k in order:
            lines.append(
                f"{k:>6}  {self.names[k][:width]:<{width}}  {self.n_seen[k]:>6}  {self.sample_mean[k]:>6.3f}  "
                f"{self.mean[k]:>6.3f}  {math.sqrt(self.variance[k]):>6.3f}  {self.lcb[k]:>6.3f}"
                + ("  *" if self.outstanding[k] else "")
            )
        return "\n".join(lines)


class Evaluator:
    """A policy as an ask/tell loop over live scores, recorded in SQLite.

    ``ask()`` returns the next :class:`~gittinseval.protocol.Request` (an arm and
    the ids of its batch of unseen examples), ``tell(request, scores, cost)``
    records its scores and ``cancel(request)`` takes back one that will not be
    told.  The evaluator drives ``policy`` only through the public protocol
    (``reset``, ``select``, ``observe``, ``cancel``, ``recommend``,
    ``stop_signal``, ``hyperparameters``, ``posterior_report``), seeded with
    ``np.random.default_rng(seed)``: with one request in flight at a time, a run
    is the simulator's run on the same scores.

    Several requests may be outstanding.  A ``concurrent`` policy is asked with
    the arms that have one (``select(busy)``) and never gets a second batch of a
    busy arm: for GittinsEval the index ``G_k = M_k - r_{k, n_k}`` values *one*
    batch followed by a look at it, so a second batch sent before the first is
    told would be chosen on a stale posterior and leave the arm's batch stage
    ambiguous.  ``ask()`` returns ``None`` when every candidate is busy.  Other
    policies get one request at a time.  ``ask()`` never hands out an example twice.

    Costs and lambda.  ``task.costs`` are the expected **dollars** per example of
    each arm.  The policy sees them in the paper's raw cost unit, **USD per 1M
    tokens**, ``c_k = costs_k * 1e6 / tokens_per_example``, so that a policy's
    ``lam`` means in both modes what it means in the paper (``lam * c_k`` score
    units per example; the simulator's ``cost=aware`` prices are in that unit):
    live, ``lam * c_k = lam_$ * costs_k`` with ``lam_$ = lam * 1e6 /
    tokens_per_example`` score units per dollar (0.1 at lam = 1e-4 and 1000
    tokens).  ``costs="unit"``: every example costs 1, the policy's ``c_k = 1``
    as in ``cost=unit``, and the budget counts examples.  ``costs=None``: the
    policy sees equal costs of 1 and every ``tell`` must say what the request
    cost.

    Store: every issue, tell and cancel is written to the SQLite file ``config.store``
    (see :mod:`gittinseval.live.store`) before the call returns.  Opening an
    existing store replays its events through the public protocol in the order
    they happened, checking that the policy re-selects each stored request; this
    restores the policy, the posterior, the stopping signal and the future
    example order.  Requests issued but not told are handed out again by the
    next calls to ``ask()``, oldest first.  A store made with other arms, costs,
    policy or settings is refused with an error listing the differences, and a
    store open in another evaluator is refused with a
    :class:`~gittinseval.live.store.StoreLockedError`.

    Args:
        task: the arms (strings, or JSON-serialisable configurations), the examples
            (only their number and a digest of their content are used here), the
            expected costs, ``tokens_per_example`` and ``binary`` (checked on each
            tell); its ``score_fn`` is not used: the caller scores.
        config: the policy (fresh, live-capable), prior, seed, store and
            ``budget_usd``: the spend a budget-planning policy (SySRs, PromptEval,
            UCB-E-LRF) plans for, converted to its raw cost unit; ``None``: the
            exhaustive cost.  A resumed store keeps the budget it was created with.
            Default: ``LiveConfig()`` (GittinsEval, in memory).
    """

    def __init__(self, task: LiveTask, config: LiveConfig | None = None) -> None:
        self._start(TaskDefinition.of(task), LiveConfig() if config is None else config)

    def _start(self, task: TaskDefinition, config: LiveConfig) -> None:
        self.task = task
        self.names = task.names
        self.n_examples = task.n_examples
        self.costs = task.costs
        self.cost_unit = task.cost_unit
        self.binary = task.binary
        self.policy = config.policy
        prior = config.prior
        self.store = RunStore(config.store)
        try:
            stored = self.store.load_definition()
            if stored is not None:
                raw_budget = self.store.get_meta("policy_budget")
            elif config.budget_usd is None or task.costs is None:
                raw_budget = None
            else:
                raw_budget = config.budget_usd / task.dollars_per_raw_unit
            raw_costs = task.raw_costs()
            problem = EvaluationProblem(
                n_examples=task.n_examples,
                costs=raw_costs,
                budget=task.n_examples * float(raw_costs.sum()) if raw_budget is None else raw_budget,
                prior_mean=prior.mean,
                prior_var=prior.var,
                binary=task.binary,
            )
            check_live_support(self.policy, problem)
            self.policy.reset(problem, np.random.default_rng(config.seed))
            report = self.policy.posterior_report()
            self.kappa = float(report.kappa)
            self.posterior = FiniteBenchmarkPosterior(
                task.n_arms, task.n_examples, prior.mean, prior.var, float(report.cell_var)
            )
            self.settings = _jsonable(
                {
                    "format": STORE_FORMAT,
                    "n_examples": task.n_examples,
                    "prior_mean": float(prior.mean),
                    "prior_var": float(prior.var),
                    "policy": target_of(self.policy),
                    **{f"policy.{key}": value for key, value in self.policy.hyperparameters().items()},
                    "cost_unit": task.cost_unit,
                    "tokens_per_example": task.tokens_per_example,
                    "binary": task.binary,
                    "seed": config.seed,
                    "dataset": task.dataset,
                }
            )
            self._open_store(stored, raw_budget)
        except BaseException:
            self.store.close()
            raise

    @classmethod
    def from_store(cls, store: str | Path) -> Evaluator:
        """Reopen an existing store with the arms, policy and settings it was created with.

        The policy is rebuilt from its ``_target_`` and its recorded parameters
        (:meth:`~gittinseval.protocol.Policy.hyperparameters`: the constructor's
        arguments, with the batch size the run resolved).
        """
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
        recorded = {key.removeprefix("policy."): v for key, v in settings.items() if key.startswith("policy.")}
        unit = settings["cost_unit"]
        task = TaskDefinition(
            tuple(names),
            settings["n_examples"],
            None if unit == "reported" else costs,
            unit,
            settings["tokens_per_example"],
            settings["binary"],
            settings["dataset"],
        )
        config = LiveConfig(
            policy=build(settings["policy"], recorded),
            prior=GaussianPrior(settings["prior_mean"], settings["prior_var"]),
            seed=settings["seed"],
            store=store,
        )
        evaluator = cls.__new__(cls)
        evaluator._start(task, config)
        return evaluator

    def _open_store(self, stored: tuple | None, raw_budget: float | None) -> None:
        arm_costs = np.zeros(self.n_arms) if self.costs is None else self.costs
        given = (self.settings, self.names, arm_costs)
        if stored is None:
            self.store.define(*given, meta={"policy_budget": raw_budget})
        elif differences := describe_differences(stored, given):
            raise ValueError(
                f"store {self.store.path} was created with other arms or settings:\n  " + "\n  ".join(differences)
            )
        self._outstanding: dict[int, tuple[int, Request]] = {}
        self._spent = 0.0
        self._seen = np.zeros((self.n_arms, self.n_examples), dtype=bool)
        self._trace: list[tuple[int, int, float, int, bool]] = []
        for event in self.store.events():
            self._replay(event)
        self._reissue = sorted(self._outstanding, key=lambda arm: self._outstanding[arm][0])

    def _replay(self, event: StoredEvent) -> None:
        stored = event.request
        if event.kind == "issue":
            request = self._select()
            if request is None or request.arm != stored.arm or not np.array_equal(request.examples, stored.examples):
                got = "nothing" if request is None else f"arm {request.arm}, examples {request.examples[:5].tolist()}"
                raise ValueError(
                    f"store {self.store.path}: replaying request {stored.id}, the policy selects {got} where the "
                    f"store has arm {stored.arm}, examples {stored.examples[:5].tolist()} (was the store edited, or "
                    "written by another version of the policy or numpy?)"
                )
            self._outstanding[request.arm] = (stored.id, request)
        elif event.kind == "tell":
            self._record(self._outstanding.pop(stored.arm)[1], stored.scores, stored.cost)
        else:
            self.policy.cancel(self._outstanding.pop(stored.arm)[1])

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
        """The policy's stopping signal (GittinsEval: a completed arm attains the largest index)."""
        return bool(self.policy.stop_signal)

    @property
    def n_outstanding(self) -> int:
        return len(self._outstanding)

    @property
    def outstanding(self) -> list[Request]:
        """The requests in flight, oldest first."""
        return [request for _, request in sorted(self._outstanding.values(), key=lambda entry: entry[0])]

    def expected_cost(self, request: Request) -> float:
        """Expected cost of a request: ``size * costs[arm]``; with ``costs=None``, ``size``
        times the mean told cost per example so far (0 before any tell)."""
        if self.costs is not None:
            return request.size * float(self.costs[request.arm])
        told = int(self._seen.sum())
        return request.size * (self._spent / told if told else 0.0)

    @property
    def finished(self) -> bool:
        """True when every example of every arm is told."""
        return bool(self._seen.all())

    def _select(self) -> Request | None:
        if not self._outstanding:
            return self.policy.select()
        if not self.policy.concurrent:
            return None
        return self.policy.select(frozenset(self._outstanding))

    def ask(self) -> Request | None:
        """The next request, or ``None`` if the policy has nothing to ask while the
        requests in flight are out (or at all)."""
        if self._reissue:
            return self._outstanding[self._reissue.pop(0)][1]
        request = self._select()
        if request is None:
            return None
        try:
            request_id = self.store.issue(request.arm, request.examples)
        except BaseException as failure:
            # Not recorded, so not issued: the policy takes it back, or the store,
            # which holds everything up to here, is all that may go on.
            if self.policy.cancellable:
                self.policy.cancel(request)
                raise
            self.close()
            raise RuntimeError(
                f"recording a request in {self.store.path} failed ({failure!r}) and policy {self.policy.name!r} "
                "cannot take back its selection: this evaluator is closed; reopen the store to go on "
                "(every told score is in it)"
            ) from failure
        self._outstanding[request.arm] = (request_id, request)
        return request

    def _entry(self, request: Request) -> tuple[int, Request]:
        arm = int(request.arm)
        entry = self._outstanding.get(arm) if 0 <= arm < self.n_arms else None
        if entry is None or not np.array_equal(entry[1].examples, request.examples):
            raise ValueError(self._describe_unknown(request))
        return entry

    def tell(self, request: Request, scores: Any, cost: float | None = None) -> float:
        """Record the ``[request.size]`` scores of an outstanding request; returns its cost.

        ``cost`` is what the request actually cost; ``None`` means its expected
        cost ``size * costs[arm]`` (an error with ``costs=None``).  The scores,
        the cost and the request's state are written in one transaction before
        anything in memory changes: if the write fails, the request stays
        outstanding and the run is as before.
        """
        request_id, issued = self._entry(request)
        arm = issued.arm
        scores = validate_scores(issued, scores)
        if self.binary and not np.isin(scores, (0.0, 1.0)).all():
            raise ValueError(f"arm {arm}: the task declares binary scores, got {scores[:5].tolist()}")
        if cost is None:
            if self.costs is None:
                raise ValueError(
                    f"arm {arm}: no cost for this request: score_fn returned scores only and no costs were given; "
                    "return (scores, dollars) from score_fn, pass costs= (expected dollars per example), "
                    "or costs='unit' to count examples"
                )
            cost = issued.size * float(self.costs[arm])
        elif not (math.isfinite(cost) and cost >= 0):
            raise ValueError(f"arm {arm}: cost must be finite and non-negative, got {cost!r}")
        self.store.tell(request_id, arm, issued.examples, scores, float(cost))
        self._forget(arm)
        self._record(issued, scores, float(cost))
        return float(cost)

    def cancel(self, request: Request) -> None:
        """Take back an outstanding request that will not be told; the policy may ask
        for its examples again."""
        request_id, issued = self._entry(request)
        if not self.policy.cancellable:
            raise ValueError(f"policy {self.policy.name!r} cannot take back a request; tell its scores instead")
        self.store.cancel(request_id)
        self._forget(issued.arm)
        self.policy.cancel(issued)

    def _forget(self, arm: int) -> None:
        del self._outstanding[arm]
        if arm in self._reissue:
            self._reissue.remove(arm)

    def _record(self, request: Request, scores: np.ndarray, cost: float) -> None:
        self.policy.observe(request, scores)
        self.posterior.update(request.arm, scores)
        self._seen[request.arm, request.examples] = True
        self._spent += cost
        self._trace.append((request.arm, request.size, self._spent, self.policy.recommend(), self.stop_signal))

    def _describe_unknown(self, request: Request) -> str:
        arm = int(request.arm)
        if not 0 <= arm < self.n_arms:
            return f"request for arm {arm}, outside [0, {self.n_arms})"
        examples = np.asarray(request.examples)
        if examples.size and np.isin(examples, np.arange(self.n_examples)).all() and self._seen[arm, examples].all():
            return f"arm {arm}: examples {examples[:5].tolist()} were already told"
        return (
            f"arm {arm}: no outstanding request for examples {examples[:5].tolist()}; tell() takes requests from ask()"
        )

    def recommend(self) -> Recommendation | None:
        """The policy's recommended arm with its posterior ``M``, ``V`` and LCB;
        ``None`` while nothing has been told (a recommendation from the prior alone
        would be a guess)."""
        if not self._trace:
            return None
        arm = int(self.policy.recommend())
        mean, variance = float(self.posterior.mean[arm]), float(self.posterior.variance[arm])
        return Recommendation(arm, self.names[arm], mean, variance, mean - self.kappa * math.sqrt(variance))

    def status(self) -> ArmStatus:
        post = self.posterior
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
            post.mean - self.kappa * np.sqrt(post.variance),
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
