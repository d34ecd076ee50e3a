"""Ask/tell live evaluation with any policy, backed by a crash-safe store."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from gittinseval.core.params import build, target_of
from gittinseval.core.posterior import FiniteBenchmarkPosterior
from gittinseval.core.priors import GaussianPrior
from gittinseval.core.protocol import EvaluationProblem, Request, check_live_support, validate_scores
from gittinseval.live.config import LiveConfig
from gittinseval.live.failures import ScoringError
from gittinseval.live.run_store import STORE_FORMAT, AttemptOutcome, RunStore, StoredEvent, describe_differences
from gittinseval.live.task import LiveTask, TaskDefinition

__all__ = ["SAME_SCORE_AFTER", "ArmStatus", "Attempt", "Evaluator", "Recommendation"]

SAME_SCORE_AFTER = 20
"""Told scores of an arm, or of the whole run, after which scores that are all 0 (or all 1) raise a
warning (:meth:`Evaluator.score_warnings`): a grading that never matches looks like that."""


def _jsonable(value: Any) -> Any:
    """``value`` as it reads back from JSON (so that stored and given settings compare equal)."""
    return json.loads(json.dumps(value, default=float))


@dataclass(frozen=True)
class Attempt:
    """A scoring call in flight: the examples ``[m]`` of an outstanding request not yet scored, and
    their expected cost; ``id`` is its row in the store's ledger."""

    id: int
    request: Request
    examples: np.ndarray = field(repr=False)
    expected: float = 0.0

    def outcome(self, request_id: int) -> AttemptOutcome:
        return AttemptOutcome(self.id, request_id, self.request.arm, self.examples, self.expected)


@dataclass
class _Open:
    """An outstanding request: its row in the store, the cells scored so far and what its calls cost."""

    id: int
    request: Request
    scored: dict[int, float] = field(default_factory=dict)
    charged: float = 0.0


@dataclass(frozen=True)
class Recommendation:
    """The policy's recommended arm with the run's posterior of its full-benchmark mean.

    ``mean`` and ``variance`` are ``M`` and ``V`` of the finite-benchmark posterior
    under the run's prior (the same for every policy); ``lcb = M - kappa sqrt(V)``
    with the ``kappa`` of the policy's :meth:`~gittinseval.core.protocol.Policy.posterior_report`
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
    label: str = ""
    """The arm's short label (:func:`~gittinseval.live.labels.arm_labels`); ``name`` is its store key."""


@dataclass(frozen=True)
class ArmStatus:
    """Per-arm table, every column of length ``K``.

    ``n_seen`` told examples, ``outstanding`` whether a request is in flight,
    ``sample_mean`` the mean of the told scores (NaN before any), ``mean`` and
    ``variance`` the posterior ``M`` and ``V`` of the full-benchmark mean and
    ``lcb`` = ``M - kappa sqrt(V)`` (see :class:`Recommendation`); ``names`` are the
    arms' labels.
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

    ``ask()`` returns the next :class:`~gittinseval.core.protocol.Request` (an arm and
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

    Ledger.  A driver that makes the scoring calls records each one before it is
    sent (:meth:`start_attempt`, for the examples of a request not yet scored) and
    after (:meth:`finish_attempt`, which tells the request, or :meth:`fail_attempt`,
    which keeps the cells a failed call scored).  :attr:`spent` is the sum of every
    call's charge; a call whose outcome was never recorded (the process died with it
    in flight) is charged its expected cost when the store is next opened.  A
    :meth:`tell` is one call, recorded at once.

    Store: every issue, call, tell and cancel is written to the SQLite file of
    ``config.store`` (or ``config.fork``; see :mod:`gittinseval.live.run_store`) before
    the method returns.  Opening an existing store replays its events through the
    public protocol in the order they happened, checking that the policy re-selects
    each stored request; this restores the policy, the posterior, the stopping
    signal, the future example order and the ledger.  Requests issued but not told
    are handed out again by the next calls to ``ask()``, oldest first.  A store made
    with other arms, costs, scorer, examples, policy or settings is refused with an
    error listing the differences, and a store open in another evaluator is refused
    with a :class:`~gittinseval.live.run_store.StoreLockedError`.

    Args:
        task: the arms (strings, or JSON-serialisable configurations), the examples
            (only their number and a digest of their content are used here), the
            expected costs, ``tokens_per_example`` and ``binary`` (checked on each
            tell); its ``score_fn`` is never called here (the caller scores), only
            recorded (:func:`~gittinseval.live.task.scorer_identity`).
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
        self.labels = task.labels
        self.n_examples = task.n_examples
        self.costs = task.costs
        self.cost_unit = task.cost_unit
        self.binary = task.binary
        self.policy = config.policy
        prior = config.prior
        # Refused before a store is made: a policy that cannot run live.
        check_live_support(self.policy, self._problem(task, prior, None))
        self.store = RunStore(config.run_store)
        try:
            stored = self.store.load_definition()
            self.resumed = stored is not None
            if stored is not None:
                raw_budget = self.store.get_meta("policy_budget")
            elif config.budget_usd is None or task.costs is None:
                raw_budget = None
            else:
                raw_budget = config.budget_usd / task.dollars_per_raw_unit
            self.policy.reset(self._problem(task, prior, raw_budget), np.random.default_rng(config.seed))
            report = self.policy.posterior_report()
            self.kappa = float(report.kappa)
            self.posterior = FiniteBenchmarkPosterior(
                task.n_arms, task.n_examples, prior.mean, prior.var, float(report.cell_var)
            )
            # The store's identity: everything that makes a score or a selection.
            self.settings = _jsonable(
                {
                    "format": STORE_FORMAT,
                    "n_examples": task.n_examples,
                    "dataset": task.dataset,
                    "scorer": task.scorer,
                    "prior_mean": float(prior.mean),
                    "prior_var": float(prior.var),
                    "policy": {"_target_": target_of(self.policy), **self.policy.hyperparameters()},
                    "cost_unit": task.cost_unit,
                    "tokens_per_example": task.tokens_per_example,
                    "binary": task.binary,
                    "seed": config.seed,
                }
            )
            self._open_store(stored, raw_budget, config)
        except BaseException:
            self.store.close()
            raise

    @staticmethod
    def _problem(task: TaskDefinition, prior: GaussianPrior, raw_budget: float | None) -> EvaluationProblem:
        """The policy's view of the run: raw costs, and the raw budget (``None``: the exhaustive cost)."""
        raw_costs = task.raw_costs()
        return EvaluationProblem(
            n_examples=task.n_examples,
            costs=raw_costs,
            budget=task.n_examples * float(raw_costs.sum()) if raw_budget is None else raw_budget,
            prior_mean=prior.mean,
            prior_var=prior.var,
            binary=task.binary,
        )

    @classmethod
    def from_store(cls, store: str | Path) -> Evaluator:
        """Reopen an existing store with the arms, policy and settings it was created with.

        The policy is rebuilt by :func:`~gittinseval.core.params.build` from its ``_target_``
        and its recorded parameters (:meth:`~gittinseval.core.protocol.Policy.get_params`,
        nested objects included, with the batch size the run resolved).  No scoring
        function is rebuilt: the caller scores (ask/tell).
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
        policy = dict(settings["policy"])
        unit = settings["cost_unit"]
        task = TaskDefinition(
            tuple(names),
            settings["n_examples"],
            None if unit == "reported" else costs,
            unit,
            settings["tokens_per_example"],
            settings["binary"],
            settings["dataset"],
            settings["scorer"],
        )
        config = LiveConfig(
            policy=build(policy.pop("_target_"), policy),
            prior=GaussianPrior(settings["prior_mean"], settings["prior_var"]),
            seed=settings["seed"],
            store=store,
        )
        evaluator = cls.__new__(cls)
        evaluator._start(task, config)
        return evaluator

    def _open_store(self, stored: tuple | None, raw_budget: float | None, config: LiveConfig) -> None:
        arm_costs = np.zeros(self.n_arms) if self.costs is None else self.costs
        given = (self.settings, self.names, arm_costs)
        if stored is None:
            forked = None if config.fork is None else str(config.store)
            self.store.define(*given, meta={"policy_budget": raw_budget, "forked_from": forked})
        elif differences := describe_differences(stored, given):
            raise ValueError(
                f"store {self.store.path} was made with other settings, so its scores and spend do not carry over: "
                + "; ".join(differences)
                + " (to start afresh, keep it and add fork=NEW_STORE: a new store that reuses nothing of it)"
            )
        self._outstanding: dict[int, _Open] = {}
        self._in_flight: dict[int, Attempt] = {}
        self._spent = 0.0
        self._charged_as_expected = 0.0
        self._n_scored = 0
        self._attempt_counts = {"scored": 0, "failed": 0, "lost": 0}
        self._seen = np.zeros((self.n_arms, self.n_examples), dtype=bool)
        self._trace: list[tuple[int, int, float, int, bool]] = []
        for event in self.store.events():
            self._replay(event)
        # Calls in flight when the last session ended: they may have been answered, and billed.
        for lost in self.store.open_attempts():
            self._settle(lost, "lost", {}, None, 0, "the run ended before the outcome of this call was recorded")
        self._reissue = sorted(self._outstanding, key=lambda arm: self._outstanding[arm].id)

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
            self._outstanding[request.arm] = _Open(stored.id, request)
        elif event.kind == "attempt":
            self._count(stored)
        elif event.kind == "tell":
            self._record(self._outstanding.pop(stored.arm).request, stored.scores)
        else:
            self.policy.cancel(self._outstanding.pop(stored.arm).request)

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
        """Money charged for every scoring call that may have reached the provider, over every session
        of the store: successful calls, failed ones, and calls lost in a crash (see :attr:`charged_as_expected`)."""
        return self._spent

    @property
    def charged_as_expected(self) -> float:
        """The part of :attr:`spent` charged at the expected cost because calls that may have been billed
        reported no cost: calls lost when a session ended in flight, timeouts, replies without usage."""
        return self._charged_as_expected

    @property
    def attempt_counts(self) -> dict[str, int]:
        """Finished scoring calls by outcome: ``scored``, ``failed`` and ``lost``."""
        return dict(self._attempt_counts)

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
        return [entry.request for entry in sorted(self._outstanding.values(), key=lambda entry: entry.id)]

    def _expected(self, arm: int, n_examples: int) -> float:
        """Expected cost of ``n_examples`` of an arm: ``n * costs[arm]``; with ``costs=None``, ``n``
        times the mean charge per scored example so far (0 before any)."""
        if self.costs is not None:
            return n_examples * float(self.costs[arm])
        return n_examples * (self._spent / self._n_scored if self._n_scored else 0.0)

    @property
    def expected_in_flight(self) -> float:
        """The expected cost of the scoring calls in flight (started and not finished)."""
        return sum(attempt.expected for attempt in self._in_flight.values())

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
            return self._outstanding[self._reissue.pop(0)].request
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
        self._outstanding[request.arm] = _Open(request_id, request)
        return request

    def hand_out_again(self, request: Request) -> None:
        """Have the next :meth:`ask` return this outstanding request again (before any new one): its
        driver could not make its next call now (a retry held back by the budget)."""
        entry = self._entry(request)
        if request.arm not in self._reissue:
            self._reissue.append(entry.request.arm)

    def _entry(self, request: Request) -> _Open:
        arm = int(request.arm)
        entry = self._outstanding.get(arm) if 0 <= arm < self.n_arms else None
        if entry is None or not np.array_equal(entry.request.examples, request.examples):
            raise ValueError(self._describe_unknown(request))
        if any(attempt.request is entry.request for attempt in self._in_flight.values()):
            raise ValueError(f"arm {arm}: a scoring call of this request is in flight; finish or fail it first")
        return entry

    def start_attempt(self, request: Request) -> Attempt:
        """Record in the ledger a scoring call about to be sent, for the examples of an outstanding
        request not yet scored (all of them unless an earlier call failed part-way)."""
        entry = self._entry(request)
        examples = np.array([e for e in entry.request.examples if int(e) not in entry.scored], dtype=np.int64)
        expected = self._expected(request.arm, examples.size)
        attempt = Attempt(self.store.start_attempt(entry.id, examples, expected), entry.request, examples, expected)
        self._in_flight[attempt.id] = attempt
        return attempt

    def finish_attempt(self, attempt: Attempt, scores: Any, cost: float | None = None) -> tuple[np.ndarray, float]:
        """Record a call that scored every example of ``attempt``: its ``[m]`` scores and the dollars it
        reported (``None``: the expected cost, an error with ``costs=None``).  The request is then
        complete and the policy observes it; returns its ``[size]`` scores and what its calls were
        charged, every attempt included.  Invalid scores or cost are recorded as a failed call and
        raise a ``ValueError``.
        """
        entry = self._flying(attempt)
        try:
            values = self._valid_scores(attempt.request.arm, attempt.examples, scores)
            charge = self._valid_cost(attempt.request.arm, cost)
        except ValueError as error:
            valid_cost = None if cost is None or not (math.isfinite(cost) and cost >= 0) else float(cost)
            self.fail_attempt(attempt, ScoringError(str(error), cost=valid_cost))
            raise
        scored = dict(zip(attempt.examples.tolist(), values.tolist(), strict=True))
        self._settle(attempt.outcome(entry.id), "scored", scored, charge, 0, None)
        return np.array([entry.scored[int(e)] for e in entry.request.examples]), entry.charged

    def fail_attempt(self, attempt: Attempt, failure: BaseException) -> float:
        """Record a call that failed with ``failure``, keeping the cells it scored and charging it what it
        reported, plus the expected cost of its calls of unknown cost (all of it when a failure says
        nothing: see :class:`~gittinseval.live.ScoringError`).  Returns the charge of this call."""
        entry = self._flying(attempt)
        scored, reported, uncosted = {}, None, 0
        if isinstance(failure, ScoringError):
            reported, uncosted = failure.cost, failure.uncosted
            if failure.scores is not None:
                scored = self._partial_scores(attempt, failure.scores)
        return self._settle(attempt.outcome(entry.id), "failed", scored, reported, uncosted, repr(failure))

    def _flying(self, attempt: Attempt) -> _Open:
        if attempt.id not in self._in_flight:
            raise ValueError(f"attempt {attempt.id} is not in flight")
        return self._outstanding[attempt.request.arm]

    def _partial_scores(self, attempt: Attempt, scores: list[float | None]) -> dict[int, float]:
        if len(scores) != attempt.examples.size:
            raise ValueError(
                f"arm {attempt.request.arm}: a failed call reported {len(scores)} scores for {attempt.examples.size} "
                "examples"
            )
        kept = [(int(e), s) for e, s in zip(attempt.examples, scores, strict=True) if s is not None]
        examples = np.array([e for e, _ in kept], dtype=np.int64)
        values = self._valid_scores(attempt.request.arm, examples, [s for _, s in kept])
        return dict(zip(examples.tolist(), values.tolist(), strict=True))

    def _valid_scores(self, arm: int, examples: np.ndarray, scores: Any) -> np.ndarray:
        values = validate_scores(Request(arm, examples), scores)
        if self.binary and not np.isin(values, (0.0, 1.0)).all():
            raise ValueError(f"arm {arm}: the task declares binary scores, got {values[:5].tolist()}")
        return values

    def _valid_cost(self, arm: int, cost: float | None) -> float | None:
        if cost is None:
            if self.costs is None:
                raise ValueError(
                    f"arm {arm}: no cost for this request: score_fn returned scores only and no costs were given; "
                    "return (scores, dollars) from score_fn, pass costs= (expected dollars per example), "
                    "or costs='unit' to count examples"
                )
            return None
        if not (math.isfinite(cost) and cost >= 0):
            raise ValueError(f"arm {arm}: cost must be finite and non-negative, got {cost!r}")
        return float(cost)

    def tell(self, request: Request, scores: Any, cost: float | None = None) -> float:
        """Record the ``[request.size]`` scores of an outstanding request; returns its cost.

        ``cost`` is what the request actually cost; ``None`` means its expected
        cost ``size * costs[arm]`` (an error with ``costs=None``).  The call is one
        scored attempt in the ledger; the scores, the cost and the request's state
        are written in one transaction before anything in memory changes: if the
        write fails, the request stays outstanding and the run is as before.
        Examples scored already by a call that failed part-way keep their scores.
        """
        entry = self._entry(request)
        arm = entry.request.arm
        values = self._valid_scores(arm, entry.request.examples, scores)
        charge = self._valid_cost(arm, cost)
        unscored = np.array([int(e) not in entry.scored for e in entry.request.examples])
        examples = entry.request.examples[unscored]
        attempt = Attempt(-1, entry.request, examples, self._expected(arm, examples.size))
        scored = dict(zip(examples.tolist(), values[unscored].tolist(), strict=True))
        self._settle(attempt.outcome(entry.id), "scored", scored, charge, 0, None)
        return entry.charged

    def _settle(
        self,
        attempt: AttemptOutcome,
        outcome: str,
        scored: dict[int, float],
        reported: float | None,
        uncosted: int,
        error: str | None,
    ) -> float:
        """Charge a finished call and keep its cells, in the store then in memory; a call that scored
        the rest of its request completes it.  Returns the call's charge."""
        if outcome == "scored":
            charged, as_expected = (attempt.expected if reported is None else reported), 0.0
        elif reported is None:
            charged = as_expected = attempt.expected
        else:
            as_expected = uncosted * attempt.expected / max(attempt.examples.size, 1)
            charged = reported + as_expected
        record = replace(
            attempt,
            outcome=outcome,
            scored=scored,
            reported_cost=reported,
            charged=charged,
            charged_as_expected=as_expected,
            error=error,
        )
        entry = self._outstanding[attempt.arm]
        complete = len(entry.scored) + len(scored) == entry.request.size
        request_cost = entry.charged + charged
        record = replace(record, id=self.store.finish_attempt(record, request_cost if complete else None))
        self._in_flight.pop(record.id, None)
        self._count(record)
        if complete:
            del self._outstanding[attempt.arm]
            if attempt.arm in self._reissue:
                self._reissue.remove(attempt.arm)
            self._record(entry.request, np.array([entry.scored[int(e)] for e in entry.request.examples]))
        return charged

    def _count(self, attempt: AttemptOutcome) -> None:
        """An attempt's charge and cells, as recorded (live, or replayed from the store)."""
        entry = self._outstanding[attempt.arm]
        if entry.id != attempt.request:
            raise ValueError(f"store {self.store.path}: attempt {attempt.id} is not of arm {attempt.arm}'s request")
        self._spent += attempt.charged
        self._charged_as_expected += attempt.charged_as_expected
        self._attempt_counts[attempt.outcome] += 1
        self._n_scored += len(attempt.scored)
        entry.scored.update(attempt.scored)
        entry.charged += attempt.charged

    def cancel(self, request: Request) -> None:
        """Take back an outstanding request that will not be told; the policy may ask
        for its examples again."""
        entry = self._entry(request)
        if not self.policy.cancellable:
            raise ValueError(f"policy {self.policy.name!r} cannot take back a request; tell its scores instead")
        if entry.scored:
            raise ValueError(
                f"arm {request.arm}: {len(entry.scored)} examples of this request are scored and paid for; "
                "tell the rest instead of cancelling it"
            )
        self.store.cancel(entry.id)
        del self._outstanding[request.arm]
        if request.arm in self._reissue:
            self._reissue.remove(request.arm)
        self.policy.cancel(entry.request)

    def _record(self, request: Request, scores: np.ndarray) -> None:
        self.policy.observe(request, scores)
        self.posterior.update(request.arm, scores)
        self._seen[request.arm, request.examples] = True
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

    def same_scores(self) -> tuple[int | None, dict[int, np.ndarray]]:
        """Scores that suggest a grading that never (or always) matches.

        Returns the score (0 or 1) that every one of the run's told scores has, once there
        are :data:`SAME_SCORE_AFTER` of them (else ``None``), and for each of 0 and 1 the
        arms with that many told scores or more, all equal to it.
        """
        n_seen, sums = self.posterior.n_seen, self.posterior.score_sum
        told, total = int(n_seen.sum()), float(sums.sum())
        whole = None
        if told >= SAME_SCORE_AFTER and total in (0.0, float(told)):
            whole = 0 if total == 0 else 1
        arms = {value: np.flatnonzero((n_seen >= SAME_SCORE_AFTER) & (sums == value * n_seen)) for value in (0, 1)}
        return whole, arms

    def score_warnings(self) -> list[str]:
        """:meth:`same_scores` as lines: the whole run's, or else the arms', each suggesting to check the grading."""
        whole, arms = self.same_scores()
        if whole is not None:
            told = int(self.posterior.n_seen.sum())
            return [f"every one of the {told} scores so far is {whole}: check the grading against the replies"]
        warnings = []
        for value, flagged in arms.items():
            if flagged.size:
                listed = ", ".join(str(arm) for arm in flagged[:8]) + (", ..." if flagged.size > 8 else "")
                warnings.append(
                    f"{flagged.size} arm{'s' if flagged.size > 1 else ''} ({listed}) scored {value} on every one of "
                    f"{SAME_SCORE_AFTER} or more examples: check the grading against the replies"
                )
        return warnings

    def recommend(self) -> Recommendation | None:
        """The policy's recommended arm with its posterior ``M``, ``V`` and LCB;
        ``None`` while nothing has been told (a recommendation from the prior alone
        would be a guess)."""
        if not self._trace:
            return None
        arm = int(self.policy.recommend())
        mean, variance = float(self.posterior.mean[arm]), float(self.posterior.variance[arm])
        lcb = mean - self.kappa * math.sqrt(variance)
        return Recommendation(arm, self.names[arm], mean, variance, lcb, self.labels[arm])

    def status(self) -> ArmStatus:
        post = self.posterior
        outstanding = np.zeros(self.n_arms, dtype=bool)
        outstanding[list(self._outstanding)] = True
        with np.errstate(invalid="ignore", divide="ignore"):
            sample_mean = np.where(post.n_seen > 0, post.score_sum / post.n_seen, np.nan)
        return ArmStatus(
            self.labels,
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
