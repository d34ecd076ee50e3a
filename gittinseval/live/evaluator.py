"""Ask/tell live evaluation with any policy, backed by a crash-safe store.

The :class:`Evaluator` drives the policy; it composes the run's :class:`~gittinseval.live.ledger.Ledger`
(what every scoring call was charged), the state its recorded events change
(:class:`~gittinseval.live.run_state.RunState`), its store (:mod:`gittinseval.live.run_store`, whose identity
is :mod:`gittinseval.live.store_identity` and whose replay is :mod:`gittinseval.live.replay`) and the reports
of :mod:`gittinseval.live.status`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from gittinseval.core.certificate import Certificate
from gittinseval.core.confidence_stop import ConfidenceStop
from gittinseval.core.cost_learning import CostEstimator
from gittinseval.core.posterior import FiniteBenchmarkPosterior
from gittinseval.core.priors import GaussianPrior
from gittinseval.core.protocol import EvaluationProblem, Request, check_live_support, validate_scores
from gittinseval.core.session import RunSession
from gittinseval.live.config import LiveConfig
from gittinseval.live.failures import ScoringError
from gittinseval.live.ledger import Attempt, Ledger
from gittinseval.live.replay import UnbilledCalls, replay, settle_lost, unbilled_calls
from gittinseval.live.run_state import RunState
from gittinseval.live.run_store import RunStore
from gittinseval.live.status import ArmStatus, Recommendation, same_scores, score_warnings
from gittinseval.live.store_identity import define_or_check, run_settings, stored_run
from gittinseval.live.task import DOLLARS, LiveTask, TaskDefinition
from gittinseval.live.usage import Usage

__all__ = ["Evaluator"]

ABANDONED = "abandoned in flight (a second Ctrl-C): its outcome is unknown"
"""The error recorded for a call that its driver abandoned."""


class Evaluator:
    """A policy as an ask/tell loop over live scores, recorded in SQLite.

    ``ask()`` returns the next :class:`~gittinseval.core.protocol.Request` (an arm and
    the ids of its batch of unseen examples), ``tell(request, scores, cost)``
    records its scores and ``cancel(request)`` takes back one that will not be
    told.  The evaluator drives ``policy`` only through the public protocol
    (``reset``, ``select``, ``observe``, ``cancel``, ``recommend``,
    ``stop_signal``, ``hyperparameters``, ``posterior_report``, ``update_costs``), seeded with
    ``np.random.default_rng(seed)``: with one request in flight at a time, a run
    is the simulator's run on the same scores.

    Several requests may be outstanding.  A ``concurrent`` policy is asked with
    the arms that have one (``select(busy)``) and never gets a second batch of a
    busy arm: for GittinsEval the index ``G_k = M_k - r_{k, n_k}`` values *one*
    batch followed by a look at it, so a second batch sent before the first is
    told would be chosen on a stale posterior and leave the arm's batch stage
    ambiguous.  ``ask()`` returns ``None`` when every candidate is busy.  Other
    policies get one request at a time.  ``ask()`` never hands out an example twice.

    Budget: ``ask()`` returns ``None`` once :attr:`spent` plus the expected cost of the
    examples not yet scored of the requests out reaches ``config.budget_usd``, as the
    driver (:func:`~gittinseval.live.evaluate_async`) starts no call then; an ask/tell
    loop therefore spends at most the budget plus the requests it holds out at once.

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

    Learned costs (``config.learn_costs``, on by default for a task in dollars): each told
    request's charge (every call of it, in the raw unit) goes to a
    :class:`~gittinseval.core.cost_learning.CostEstimator` started from the task's expected
    costs, and when an arm's estimate moves by more than the refresh share the policy gets
    the estimates (:meth:`~gittinseval.core.protocol.Policy.update_costs`) before it observes
    the request.  A replayed store feeds the same charges in the same order, so a resumed
    run re-plans as the recorded one did.  The ledger, the expected cost of a call in
    flight and the budget rule stay those of the task's costs: spend is what was charged.

    Ledger.  A driver that makes the scoring calls records each one before it is
    sent (:meth:`start_attempt`, for the examples of a request not yet scored) and
    after (:meth:`finish_attempt`, which tells the request, or :meth:`fail_attempt`,
    which keeps the cells a failed call scored).  :attr:`spent` is the sum of every
    call's charge; a call whose outcome was never recorded (the process died with it
    in flight) is charged its expected cost when the store is next opened.  A
    :meth:`tell` is one call, recorded at once.  The charges: :mod:`gittinseval.live.ledger`.

    Store: every issue, call, tell and cancel is written to the SQLite file of
    ``config.store`` (or ``config.fork``; see :mod:`gittinseval.live.run_store`) before
    the method returns.  Opening an existing store replays its events through the
    public protocol in the order they happened, checking that the policy re-selects
    each stored request (:mod:`gittinseval.live.replay`); this restores the policy,
    the posterior, the stopping signal, the future example order and the ledger.
    Requests issued but not told are handed out again by the next calls to ``ask()``,
    oldest first.  A store made with other arms, costs, scorer, examples, policy or
    settings is refused with an error listing the differences
    (:mod:`gittinseval.live.store_identity`), and a store open in another evaluator is
    refused with a :class:`~gittinseval.live.run_store.StoreLockedError`.

    Args:
        task: the arms (strings, or JSON-serialisable configurations), the examples
            (only their number and a digest of their content are used here), the
            expected costs, ``tokens_per_example`` and ``binary`` (checked on each
            tell); its ``score_fn`` is never called here (the caller scores), only
            recorded (:func:`~gittinseval.live.task.scorer_identity`).
        config: the policy (fresh, live-capable), prior, seed, store and
            ``budget_usd``: the limit of ``ask()``, and the spend a budget-planning policy
            (SySRs, PromptEval, UCB-E-LRF) plans for, converted to its raw cost unit;
            ``None``: no limit, and the exhaustive cost to plan for.  A resumed store keeps
            the budget the policy plans for from when it was created.
            Default: ``LiveConfig()`` (GittinsEval, in memory).
    """

    def __init__(self, task: LiveTask, config: LiveConfig | None = None) -> None:
        self._start(TaskDefinition.of(task), LiveConfig() if config is None else config, unbilled_calls(task))

    def _start(self, task: TaskDefinition, config: LiveConfig, unbilled: UnbilledCalls | None = None) -> None:
        self.task, self.unbilled = task, unbilled
        self.names = task.names
        self.labels = task.labels
        self.n_examples = task.n_examples
        self.costs = task.costs
        self.cost_unit = task.cost_unit
        self.binary = task.binary
        self.policy = config.policy
        self.budget_usd = config.budget_usd
        self.objective = config.objective
        # Deployment prices: the expected dollars of a request (per example) of each arm.
        prices = task.costs if self.objective.needs_prices and task.cost_unit == DOLLARS else None
        offsets = self.objective.offsets(prices, task.n_arms)
        prior = config.prior
        # Refused before a store is made: a policy that cannot run live.
        check_live_support(self.policy, self._problem(task, prior, None, offsets))
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
            guessed = task.cost_unit == DOLLARS
            self.session = RunSession(
                self.policy,
                self._problem(task, prior, raw_budget, offsets),
                seed=config.seed,
                settings=config.run_settings,
                prices=prices,
                guessed_costs=guessed,
                attributes=task.attributes,
            )
            self.settings = run_settings(task, prior, self.policy, config.seed, config.learn_costs if guessed else None)
            if self.objective.name != "accuracy":
                # Only then: the stores made before objectives existed keep their settings.
                self.settings["objective"] = self.objective.as_dict()
            arm_costs = np.zeros(self.n_arms) if self.costs is None else self.costs
            forks = config.fork is not None and config.store is not None and config.store.is_file()
            meta = {"policy_budget": raw_budget, "forked_from": str(config.store) if forks else None}
            define_or_check(self.store, stored, (self.settings, self.names, arm_costs), meta)
            self.ledger = Ledger(self.store, self.costs)
            self.state = RunState(self.session, self.ledger, task.dollars_per_raw_unit)
            replay(self.store, self.state, unbilled)
        except BaseException:
            self.store.close()
            raise

    @staticmethod
    def _problem(
        task: TaskDefinition, prior: GaussianPrior, raw_budget: float | None, offsets: np.ndarray
    ) -> EvaluationProblem:
        """The policy's view of the run: raw costs, the raw budget (``None``: the exhaustive cost) and the
        objective's offsets."""
        raw_costs = task.raw_costs()
        return EvaluationProblem(
            n_examples=task.n_examples,
            costs=raw_costs,
            budget=task.n_examples * float(raw_costs.sum()) if raw_budget is None else raw_budget,
            prior_mean=prior.mean,
            prior_var=prior.var,
            binary=task.binary,
            offsets=offsets,
        )

    @classmethod
    def from_store(cls, store: str | Path, unbilled: UnbilledCalls | None = None) -> Evaluator:
        """Reopen an existing store with the arms, policy and settings it was created with
        (:func:`~gittinseval.live.store_identity.stored_run`).  No scoring function is rebuilt: the caller scores
        (ask/tell); ``unbilled``: its scorer's count of requests no batch billed (:func:`~gittinseval.live.replay.
        unbilled_calls` of its task; ``None``: a lost call is charged as expected)."""
        evaluator = cls.__new__(cls)
        evaluator._start(*stored_run(store), unbilled)
        return evaluator

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
    def posterior(self) -> FiniteBenchmarkPosterior:
        """The run's posterior of the arms' full-benchmark means (:attr:`RunSession.posterior
        <gittinseval.core.session.RunSession.posterior>`)."""
        return self.session.posterior

    @property
    def learned_costs(self) -> CostEstimator | None:
        """The learned costs per example in the policy's raw unit, or ``None`` (not learned)."""
        return self.session.learned_costs

    @property
    def spent(self) -> float:
        """Money charged for every scoring call that may have reached the provider, over every session
        of the store: successful calls, failed ones, and calls lost in a crash (see :attr:`charged_as_expected`)."""
        return self.ledger.spent

    @property
    def charged_as_expected(self) -> float:
        """The part of :attr:`spent` charged at the expected cost because calls that may have been billed
        reported no cost: calls lost when a session ended in flight, timeouts, replies without usage."""
        return self.ledger.charged_as_expected

    @property
    def calls_charged_as_expected(self) -> int:
        """How many finished calls :attr:`charged_as_expected` counts (charged as expected in whole or part)."""
        return self.ledger.calls_charged_as_expected

    @property
    def attempt_counts(self) -> dict[str, int]:
        """Finished scoring calls by outcome: ``scored``, ``failed`` and ``lost``."""
        return dict(self.ledger.counts)

    @property
    def stop_signal(self) -> bool:
        """The policy's stopping signal (GittinsEval: a completed arm attains the largest index)."""
        return bool(self.policy.stop_signal)

    @property
    def n_outstanding(self) -> int:
        return len(self.state.requests)

    @property
    def outstanding(self) -> list[Request]:
        """The requests in flight, oldest first."""
        return self.state.outstanding

    @property
    def expected_in_flight(self) -> float:
        """The expected cost of the scoring calls in flight (started and not finished)."""
        return self.ledger.expected_in_flight

    @property
    def finished(self) -> bool:
        """True when every example of every arm is told."""
        return bool(self.session.seen.all())

    @property
    def expected_handed_out(self) -> float:
        """The expected cost of the examples not yet scored of the requests handed out by :meth:`ask`
        and not told: outstanding, and not waiting to be handed out again."""
        return self.state.expected_handed_out

    def ask(self) -> Request | None:
        """The next request, or ``None`` if the policy has nothing to ask while the
        requests in flight are out (or at all), or once :attr:`spent` plus
        :attr:`expected_handed_out` reaches ``budget_usd``: the driver's rule for
        starting a call, with the requests handed out as its calls in flight.
        Requests issued and not told are handed out again first, oldest first."""
        if self.budget_usd is not None and self.spent + self.expected_handed_out >= self.budget_usd:
            return None
        if (reissued := self.state.next_reissued()) is not None:
            return reissued
        request = self.state.select()
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
        self.state.open(request_id, request)
        return request

    def hand_out_again(self, request: Request) -> None:
        """Have the next :meth:`ask` return this outstanding request again (before any new one): its
        driver could not make its next call now (a retry held back by the budget)."""
        self.state.hand_out_again(self.state.entry_for(request).request.arm)

    def start_attempt(self, request: Request) -> Attempt:
        """Record in the ledger a scoring call about to be sent, for the examples of an outstanding
        request not yet scored (all of them unless an earlier call failed part-way)."""
        return self.ledger.start(self.state.entry_for(request))

    def finish_attempt(
        self, attempt: Attempt, scores: Any, cost: float | None = None, usage: Usage | None = None
    ) -> tuple[np.ndarray, float]:
        """Record a call that scored every example of ``attempt``: its ``[m]`` scores and the dollars it
        reported (``None``: the sum of its ``usage``, what each example was billed, if given; else the
        expected cost, an error with ``costs=None``).  The request is then complete and the policy
        observes it; returns its ``[size]`` scores and what its calls were charged, every attempt
        included.  Invalid scores, cost or usage (a usage not of ``m`` examples, or whose sum is not a
        given ``cost``) are recorded as a failed call and raise a ``ValueError``.
        """
        entry = self.state.entry_in_flight(attempt)
        arm = attempt.request.arm
        reported = cost if usage is None else usage.cost
        try:
            if usage is not None and cost is not None and not math.isclose(cost, usage.cost, rel_tol=1e-9):
                raise ValueError(f"arm {arm}: the call reported {cost!r} dollars and a usage of {usage.cost!r}")
            values = self._valid_scores(arm, attempt.examples, scores)
            charge = self.ledger.valid_cost(arm, reported)
            record = attempt.outcome(entry.id, usage)
        except ValueError as error:
            # The usage's sum is what was billed when it disagrees with the reported cost.
            valid_cost = None if reported is None or not (math.isfinite(reported) and reported >= 0) else reported
            self.fail_attempt(attempt, ScoringError(str(error), cost=valid_cost))
            raise
        scored = dict(zip(attempt.examples.tolist(), values.tolist(), strict=True))
        self.state.settle(entry, record, "scored", scored, charge, 0, None)
        return entry.scores(), entry.charged

    def fail_attempt(self, attempt: Attempt, failure: BaseException) -> float:
        """Record a call that failed with ``failure``, keeping the cells it scored and charging it what it
        reported, plus the expected cost of its calls of unknown cost (all of it when a failure says
        nothing: see :class:`~gittinseval.live.ScoringError`).  Returns the charge of this call."""
        entry = self.state.entry_in_flight(attempt)
        scored, reported, uncosted, usage = {}, None, 0, None
        if isinstance(failure, ScoringError):
            reported, uncosted, usage = failure.cost, failure.uncosted, failure.usage
            if failure.scores is not None:
                scored = self._partial_scores(attempt, failure.scores)
        error = repr(failure)
        try:
            record = attempt.outcome(entry.id, usage)
        except ValueError as malformed:  # the failure's cost is charged all the same; only its breakdown is lost
            record, error = attempt.outcome(entry.id), f"{error}; {malformed}, not kept"
        return self.state.settle(entry, record, "failed", scored, reported, uncosted, error)

    def abandon_calls(self) -> int:
        """Settle every scoring call in flight as lost, charged as reopening the store would (as expected, but its
        requests no batch billed: :func:`~gittinseval.live.replay.settle_lost`): its driver abandoned it (a second
        Ctrl-C), so its outcome is unknown and it may have been billed.  Its request
        stays outstanding, handed out again by :meth:`ask`.  Returns how many calls were abandoned."""
        abandoned = self.ledger.in_flight
        for attempt in abandoned:
            settle_lost(self.state, attempt.outcome(self.state.entry_in_flight(attempt).id), self.unbilled, ABANDONED)
            self.state.hand_out_again(attempt.request.arm)
        return len(abandoned)

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

    def tell(self, request: Request, scores: Any, cost: float | None = None, usage: Usage | None = None) -> float:
        """Record the ``[request.size]`` scores of an outstanding request; returns its cost.

        ``cost`` is what the request actually cost; ``None`` means the sum of ``usage`` if
        given, else its expected cost ``size * costs[arm]`` (an error with ``costs=None``).
        ``usage`` is what each example not yet scored was billed, in the request's order
        (a :class:`~gittinseval.live.usage.Usage`; a given ``cost`` must equal its sum):
        the store keeps it, and ``gittinseval-live export`` writes each cell's tokens
        and dollars.  The call is one scored attempt in the ledger; the scores, the cost
        and the request's state are written in one transaction before anything in memory
        changes: if the write fails, or the cost or usage is invalid, the request stays
        outstanding and the run is as before.  Examples scored already by a call that
        failed part-way keep their scores.
        """
        entry = self.state.entry_for(request)
        arm = entry.request.arm
        values = self._valid_scores(arm, entry.request.examples, scores)
        if usage is not None and cost is not None and not math.isclose(cost, usage.cost, rel_tol=1e-9):
            raise ValueError(f"arm {arm}: told a cost of {cost!r} dollars and a usage of {usage.cost!r}")
        charge = self.ledger.valid_cost(arm, cost if usage is None else usage.cost)
        unscored = entry.unscored()
        examples = entry.request.examples[unscored]
        attempt = Attempt(-1, entry.request, examples, self.ledger.expected(arm, examples.size))
        record = attempt.outcome(entry.id, usage)
        scored = dict(zip(examples.tolist(), values[unscored].tolist(), strict=True))
        self.state.settle(entry, record, "scored", scored, charge, 0, None)
        return entry.charged

    def cancel(self, request: Request) -> None:
        """Take back an outstanding request that will not be told; the policy may ask
        for its examples again."""
        entry = self.state.entry_for(request)
        if not self.policy.cancellable:
            raise ValueError(f"policy {self.policy.name!r} cannot take back a request; tell its scores instead")
        if entry.scored:
            raise ValueError(
                f"arm {request.arm}: {len(entry.scored)} examples of this request are scored and paid for; "
                "tell the rest instead of cancelling it"
            )
        self.store.cancel(entry.id)
        self.state.cancel(request.arm)

    def same_scores(self) -> tuple[int | None, dict[int, np.ndarray]]:
        """:func:`~gittinseval.live.status.same_scores` of the run's posterior: the score every told score
        has, if any, and the arms whose told scores are all 0 or all 1."""
        return same_scores(self.posterior)

    def score_warnings(self) -> list[str]:
        """:func:`~gittinseval.live.status.score_warnings` of the run: each line suggests to check the grading."""
        return score_warnings(self.posterior)

    def recommend(self) -> Recommendation | None:
        """The recommended arm under the run's objective with its posterior ``M``, ``V`` and LCB (and, under
        ``value``, its value and the value's LCB); ``None`` while nothing has been told (a recommendation
        from the prior alone would be a guess)."""
        session = self.session
        if session.recommended is None:
            return None
        arm = session.recommended
        mean, variance = float(session.posterior.mean[arm]), float(session.posterior.variance[arm])
        lcb = mean - session.kappa * math.sqrt(variance)
        offset = None if session.value_offsets is None else float(session.value_offsets[arm])
        valued = (None, None) if offset is None else (mean + offset, lcb + offset)
        return Recommendation(arm, self.names[arm], mean, variance, lcb, self.labels[arm], *valued)

    def certificate(self) -> Certificate | None:
        """How sure the run is of :meth:`recommend`'s arm (:func:`~gittinseval.core.certificate.certify` of the
        run's posterior, under its prior, with ``config.certificate``); ``None`` while nothing has been told.

        About 40 ms at K = 1500 arms (the Monte Carlo draws): a driver asks for it when it writes a
        status or refreshes its progress, not after every tell.
        """
        return self.session.certificate()

    def confident(self, stop: ConfidenceStop) -> bool:
        """Whether ``stop`` is reached: the recommended arm is eps-best with its probability.  Cheap in most
        calls (Gaussian bounds decide; Monte Carlo only when they do not), so a driver asks after each tell."""
        return self.session.confident(stop)

    def status(self) -> ArmStatus:
        """The arms' table: told examples (and those kept from a failed call), requests in flight, posterior
        moments, LCB, each arm's credible interval and P(best) (:meth:`certificate`), and with learned costs
        each arm's guessed and learned dollars per example; under the ``value`` objective each arm's value and
        its LCB, the certificate's columns being of the value."""
        kept = {arm: list(entry.scored.values()) for arm, entry in self.state.requests.items() if entry.scored}
        session = self.session
        learned = session.learned_costs
        costs = None if learned is None else (self.costs, learned.estimate * self.task.dollars_per_raw_unit)
        return ArmStatus.of(
            session.posterior,
            self.labels,
            list(self.state.requests),
            session.kappa,
            kept,
            self.certificate(),
            costs,
            session.value_offsets,
        )

    def trace(self) -> dict[str, np.ndarray]:
        """One entry per told request, in tell order (:meth:`~gittinseval.live.run_state.RunState.trace`): ``step``,
        ``arm``, ``batch_size``, ``cost`` (cumulative spend), ``recommended`` and ``stop_signal``."""
        return self.state.trace()
