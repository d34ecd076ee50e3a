"""Drive an :class:`Evaluator` with a user scoring function, concurrently, to a dollar budget."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from gittinseval.core.protocol import Request
from gittinseval.live.config import LiveConfig
from gittinseval.live.evaluator import ArmStatus, Attempt, Evaluator, Recommendation
from gittinseval.live.failures import is_transient
from gittinseval.live.task import LiveTask
from gittinseval.live.tracking import start_tracking

__all__ = ["LiveResult", "evaluate", "evaluate_async"]

log = logging.getLogger(__name__)

ScoreFn = Callable[[Any, list[Any]], Any]


@dataclass
class LiveResult:
    """End of a live run.

    ``stop_reason`` is ``"budget"``, ``"stop_signal"`` (with ``stop_at_signal``),
    ``"exhausted"`` (the policy has nothing more to ask: every example told, or
    its schedule done), ``"interrupted"`` (Ctrl-C) or ``"error"`` (a scoring call
    failed deterministically, or transiently after its retries, or returned
    invalid scores or cost; the exception is in ``error``, the arm and examples
    of the call in ``error_where``).  ``spent`` is the store's ledger: every
    scoring call that may have reached the provider, over every session, of which
    ``charged_as_expected`` was charged at its expected cost because its cost is
    unknown.  ``recommendation`` is ``None`` when nothing was scored;
    :attr:`failure` then says why.
    """

    recommendation: Recommendation | None
    spent: float
    budget_usd: float | None
    stop_reason: str
    stop_signal: bool
    trace: dict[str, np.ndarray] = field(repr=False)
    status: ArmStatus = field(repr=False)
    charged_as_expected: float = 0.0
    attempts: dict[str, int] = field(default_factory=dict)
    status_unit: str = "dollars"
    """The money of ``spent``: ``"dollars"``, or ``"unit"`` (examples) under unit costs."""
    """Scoring calls by outcome (``scored``, ``failed``, ``lost``), over every session of the store."""
    store: Path | None = None
    error: BaseException | None = None
    error_where: str | None = None
    warnings: list[str] = field(default_factory=list)
    """Scores all 0 or all 1 (:meth:`Evaluator.score_warnings`): check the grading."""
    diagnostics: dict[str, Any] = field(default_factory=dict)
    """The policy's own facts about the run (:meth:`Policy.diagnostics`), e.g. EB's prior."""

    @property
    def error_message(self) -> str | None:
        """The error that stopped the run, in one line that names the arm and the example."""
        if self.error is None:
            return None
        what = f"{type(self.error).__name__}: {self.error}"
        return f"{self.error_where}: {what}" if self.error_where else what

    @property
    def failure(self) -> str | None:
        """Why the run has no recommendation (nothing was scored), else ``None``."""
        if self.recommendation is not None:
            return None
        failed = self.error is not None
        cause = f"the scoring calls failed: {self.error_message}" if failed else f"stopped ({self.stop_reason})"
        return f"no recommendation: nothing was scored; {cause}"

    def ledger_line(self) -> str:
        """What was spent, on how many calls, and how much of it is charged as expected (cost unknown)."""
        money = "" if self.status_unit == "unit" else "$"
        budget = "no budget" if self.budget_usd is None else f"a budget of {money}{self.budget_usd:.6g}"
        calls = ", ".join(f"{count} {outcome}" for outcome, count in self.attempts.items())
        return (
            f"spent {money}{self.spent:.6g} of {budget} on {sum(self.attempts.values())} scoring calls ({calls}); "
            f"charged as expected (calls of unknown cost): {money}{self.charged_as_expected:.6g}"
        )

    def summary(self) -> dict[str, Any]:
        rec = self.recommendation
        return {
            "recommended": None if rec is None else rec.arm,
            "recommended_name": None if rec is None else rec.name,
            "recommended_label": None if rec is None else rec.label,
            "recommended_mean": None if rec is None else rec.mean,
            "recommended_sd": None if rec is None else math.sqrt(rec.variance),
            "recommended_lcb": None if rec is None else rec.lcb,
            "spent": self.spent,
            "charged_as_expected": self.charged_as_expected,
            "budget_usd": self.budget_usd,
            "attempts": self.attempts,
            "stop_reason": self.stop_reason,
            "stop_signal": self.stop_signal,
            "n_requests": len(self.trace["step"]),
            "n_cells": int(self.status.n_seen.sum()),
            "store": None if self.store is None else str(self.store),
            "error": self.error_message,
            "failure": self.failure,
            "warnings": self.warnings,
            "diagnostics": self.diagnostics,
        }


def evaluate(
    arms: Sequence[Any],
    examples: Sequence[Any],
    score_fn: ScoreFn,
    budget_usd: float | None,
    *,
    costs: Sequence[float] | np.ndarray | str | None = None,
    tokens_per_example: float = 1000.0,
    binary: bool = False,
    **settings: Any,
) -> LiveResult:
    """:func:`evaluate_async` to completion (from code that has no running event loop), from plain arguments.

    ``arms``, ``examples``, ``score_fn``, ``costs``, ``tokens_per_example`` and
    ``binary`` make the :class:`~gittinseval.live.LiveTask`; ``budget_usd`` and the
    keyword ``settings`` (``policy``, ``prior``, ``concurrency``, ``store``, ...) the
    :class:`~gittinseval.live.LiveConfig`.
    """
    task = LiveTask(list(arms), list(examples), score_fn, costs, tokens_per_example, binary)
    return asyncio.run(evaluate_async(task, LiveConfig(budget_usd=budget_usd, **settings)))


async def evaluate_async(task: LiveTask, config: LiveConfig) -> LiveResult:
    """Evaluate ``task.arms`` on ``task.examples`` with ``config.policy`` until ``config.budget_usd`` is spent.

    ``task.score_fn(arm, batch)`` gets one arm (an element of ``arms``) and a list
    of examples (elements of ``examples``) and returns their scores in [0, 1], or
    a pair ``(scores, cost)`` with the dollars the call cost.  Without a returned
    cost a batch costs ``len(batch) * costs[arm]``; with neither, the run stops
    with an error (``costs="unit"`` counts examples instead of dollars).  A plain
    function runs in a pool of ``config.concurrency`` threads; a coroutine
    function runs on the event loop with at most ``concurrency`` calls in flight.
    The costs, the conversion of lambda to dollars and the store are those of
    :class:`Evaluator`.

    Budget: every scoring call is in the store's ledger before it is sent, and one
    starts (a request's first call, or a retry) only while ``spent + expected cost
    of the calls in flight < budget_usd``, ``spent`` being the charge of every call
    that may have reached the provider (see :class:`Evaluator`).  At concurrency 1
    this is the simulator's rule (the last batch may cross the budget), and in
    general the final spend is at most the budget plus the actual cost of one batch
    per worker, ``spend <= budget_usd + concurrency * max batch cost``: when the
    last call starts the charged spend is below the budget and at most
    ``concurrency`` calls are in flight.  ``spent`` includes what an earlier
    session of the same store spent, so a resumed run continues toward the same
    budget.

    Stopping: at the budget; at the policy's stopping signal if
    ``stop_at_signal``; when the policy has nothing more to ask; after a
    ``score_fn`` call has failed transiently ``max_retries + 1`` times (waiting
    ``retry_backoff * 2**attempt`` seconds between attempts; transient: see
    :func:`~gittinseval.live.failures.is_transient`); at once on any other failure
    or on invalid scores or no cost; or on Ctrl-C (a cancellation of this coroutine).  In each
    case no new call starts, the calls in flight are awaited and recorded, and
    the store is closed.  A second Ctrl-C while waiting abandons them: their
    requests stay issued-but-untold in the store, a resumed run sends them again,
    and the abandoned calls are charged as expected (their outcome is unknown).  If
    nothing was scored, the result has no recommendation (see
    :attr:`LiveResult.failure`).  ``config.on_tell(request, scores, cost)`` is
    called after each tell.

    Logging: ``config.logger`` is an object of the ``logger=`` group
    (:class:`~gittinseval.sim.loggers.WandbLogger`, ``NullLogger`` or ``None``).
    A W&B run in ``config.log_dir`` (default: the store's directory, else the
    current one) gets ``config.log_config`` as its config and the figures of
    :mod:`gittinseval.live.tracking` after every tell; a resumed store
    continues the same W&B run.
    """
    if task.score_fn is None:
        raise ValueError("the task has no score_fn: a live run needs one (or drive an Evaluator by ask/tell)")
    budget = config.budget_usd
    arms, examples = list(task.arms), list(task.examples)
    evaluator = Evaluator(task, config)
    if evaluator.store.path is not None:
        told = len(evaluator.trace()["step"])
        opened = "resuming" if evaluator.resumed else "new store"
        log.info("%s %s: %d requests told, %.6g spent", opened, evaluator.store.path, told, evaluator.spent)
    try:
        default_dir = Path.cwd() if evaluator.store.path is None else evaluator.store.path.parent
        log_dir = default_dir if config.log_dir is None else config.log_dir
        tracker = start_tracking(config.logger, evaluator, config.log_config, log_dir)
    except BaseException:
        evaluator.close()
        raise
    call = _ScoreCall(task.score_fn, config.concurrency)
    in_flight: set[asyncio.Future] = set()
    halted: str | None = None
    error: BaseException | None = None
    error_where: str | None = None
    currency = "" if evaluator.cost_unit == "unit" else "$"
    bar = tqdm(
        total=budget,
        initial=evaluator.spent if budget is None else min(evaluator.spent, budget),
        disable=not config.progress,
        bar_format="{l_bar}{bar}| " + currency + "{n:.4g}/" + currency + "{total:.4g} [{elapsed}<{remaining}{postfix}]",
        desc="gittinseval-live",
    )

    def blocker() -> str | None:
        """Why no new scoring call may start, or ``None``: spent plus the expected cost of the calls
        in flight must stay below the budget."""
        if halted is not None:
            return halted
        if config.stop_at_signal and evaluator.stop_signal:
            return "stop_signal"
        if budget is not None and evaluator.spent + evaluator.expected_in_flight >= budget:
            return "budget"
        return None

    def stop(failure: BaseException, where: str) -> None:
        nonlocal halted, error, error_where
        log.error("%s: %s; stopping with everything scored so far kept", where, failure)
        if error is None:
            error, error_where = failure, where
        halted = "error"

    async def score(attempt: Attempt) -> tuple[np.ndarray, float] | None:
        """Score a request, retrying transient failures on its examples still unscored; its scores and
        cost once told, or ``None`` when it stays outstanding (a retry blocked, or a failure)."""
        request = attempt.request
        for retry in itertools.count():
            batch = [examples[int(e)] for e in attempt.examples]
            try:
                scores, cost = _split_result(await call(arms[request.arm], batch))
            except Exception as failure:  # noqa: BLE001 - every failure is recorded, then retried or stops the run
                evaluator.fail_attempt(attempt, failure)
                where = _where(evaluator, attempt, failure)
                if not is_transient(failure) or retry == config.max_retries:
                    stop(failure, where)
                    return None
                delay = config.retry_backoff * 2**retry
                log.warning("%s: call %d failed (%s); retrying in %.3g s", where, retry + 1, failure, delay)
                await asyncio.sleep(delay)
                if (reason := blocker()) not in (None, "stop_signal"):
                    if reason == "budget":
                        # Asked again once the calls in flight are charged, if the budget is not reached then.
                        log.warning("%s: retry held back: spent plus the calls in flight reach the budget", where)
                        evaluator.hand_out_again(request)
                    return None
                attempt = evaluator.start_attempt(request)
                continue
            try:
                told = evaluator.finish_attempt(attempt, scores, cost)
            except Exception as failure:  # noqa: BLE001 - invalid scores or cost, recorded as a failed call
                stop(failure, _where(evaluator, attempt, failure))
                return None
            report(request, *told)
            return told

    warned: set[tuple[int | None, int]] = set()

    def warn() -> list[str]:
        """Log each arm (or the whole run) the first time its scores are all 0 or all 1; the lines for the bar."""
        whole, by_value = evaluator.same_scores()
        flagged = [(None, whole)] if whole is not None else [(k, v) for v, group in by_value.items() for k in group]
        for arm, value in flagged:
            if (arm, value) in warned:
                continue
            warned.add((arm, value))
            if arm is None:
                log.warning("%s", evaluator.score_warnings()[0])
            else:
                log.warning(
                    "arm %d (%s) scored %d on each of its %d examples so far: check the grading against the replies",
                    arm, evaluator.labels[arm], value, evaluator.posterior.n_seen[arm],
                )
        return evaluator.score_warnings() if flagged else []

    def report(request: Request, scores: np.ndarray, cost: float) -> None:
        """Right after a tell: the logger, the user's callback, score warnings, the progress bar."""
        tracker.log(evaluator)
        if config.on_tell is not None:
            config.on_tell(request, scores, cost)
        warnings = warn()
        if not config.progress:
            return
        bar.update((evaluator.spent if budget is None else min(evaluator.spent, budget)) - bar.n)
        rec = evaluator.recommend()
        bar.set_postfix_str(
            f"best {rec.label} M={rec.mean:.3f} LCB={rec.lcb:.3f} stop={'yes' if evaluator.stop_signal else 'no'}"
            + (f" WARNING: {warnings[0]}" if warnings else ""),
            refresh=False,
        )

    stop_reason = None
    try:
        while stop_reason is None:
            try:
                while len(in_flight) < config.concurrency and blocker() is None:
                    request = evaluator.ask()
                    if request is None:
                        break
                    # The call is in the ledger (and in the budget's in-flight total) before it is sent.
                    in_flight.add(asyncio.ensure_future(score(evaluator.start_attempt(request))))
                if not in_flight:
                    stop_reason = blocker() or "exhausted"
                    break
                done, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                for future in done:
                    in_flight.remove(future)
                    future.result()  # re-raises a bug of the driver itself; scoring failures are handled in score()
            except asyncio.CancelledError:
                log.warning(
                    "interrupted: waiting for %d requests in flight (Ctrl-C again abandons them)", len(in_flight)
                )
                halted = halted or "interrupted"
    finally:
        bar.close()
        evaluator.close()
        await call.shutdown()
    # The evaluator's in-memory state outlives its store connection.
    result = LiveResult(
        recommendation=evaluator.recommend(),
        spent=evaluator.spent,
        budget_usd=budget,
        stop_reason=stop_reason,
        stop_signal=evaluator.stop_signal,
        trace=evaluator.trace(),
        status=evaluator.status(),
        charged_as_expected=evaluator.charged_as_expected,
        attempts=evaluator.attempt_counts,
        status_unit=evaluator.cost_unit,
        store=evaluator.store.path,
        error=error,
        error_where=error_where,
        warnings=evaluator.score_warnings(),
        diagnostics=evaluator.policy.diagnostics(),
    )
    tracker.finish(result.summary())
    return result


def _where(evaluator: Evaluator, attempt: Attempt, failure: BaseException) -> str:
    """The arm and the example(s) of a failed call, by id and name."""
    arm = attempt.request.arm
    position = getattr(failure, "example", None)
    if position is not None and 0 <= position < attempt.examples.size:
        examples = f"example {int(attempt.examples[position])}"
    else:
        examples = f"examples {attempt.examples[:8].tolist()}" + (" ..." if attempt.examples.size > 8 else "")
    return f"arm {arm} ({evaluator.labels[arm]}), {examples}"


class _ScoreCall:
    """Calls ``score_fn(arm, batch)``: a coroutine function on the event loop, a plain one in a thread pool."""

    def __init__(self, score_fn: ScoreFn, concurrency: int) -> None:
        self.score_fn = score_fn
        self.is_async = inspect.iscoroutinefunction(score_fn) or inspect.iscoroutinefunction(type(score_fn).__call__)
        self.pool = None if self.is_async else ThreadPoolExecutor(concurrency, thread_name_prefix="score_fn")

    async def __call__(self, arm: Any, batch: list[Any]) -> Any:
        if self.is_async:
            return await self.score_fn(arm, batch)
        return await asyncio.get_running_loop().run_in_executor(self.pool, self.score_fn, arm, batch)

    async def shutdown(self) -> None:
        """Stop the thread pool, and close the scorer's connections if it holds any (an ``aclose()`` coroutine)."""
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        if (aclose := getattr(self.score_fn, "aclose", None)) is not None:
            await aclose()


def _split_result(result: Any) -> tuple[Any, float | None]:
    """``scores`` or ``(scores, cost)``: a pair whose first item is a sequence carries a cost."""
    if isinstance(result, tuple) and len(result) == 2 and np.ndim(result[0]) == 1:
        return result[0], float(result[1])
    return result, None
