"""Drive an :class:`Evaluator` with a user scoring function, concurrently, to a dollar budget."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
import signal
import sysconfig
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from gittinseval.core.certificate import Certificate
from gittinseval.core.confidence_stop import StopReason
from gittinseval.core.protocol import Request
from gittinseval.live.config import LiveConfig
from gittinseval.live.evaluator import Evaluator
from gittinseval.live.failures import ScoringError, is_transient
from gittinseval.live.ledger import Attempt
from gittinseval.live.rate_limits import WaitClock
from gittinseval.live.result import LiveResult, describe_failure
from gittinseval.live.status import GradingWarnings
from gittinseval.live.task import LiveTask
from gittinseval.live.tracking import LiveTracker, start_tracking
from gittinseval.live.usage import Usage

__all__ = ["evaluate", "evaluate_async"]

log = logging.getLogger(__name__)

ScoreFn = Callable[[Any, list[Any]], Any]
COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")
"""Frames a traceback names by the function they run in."""
CERTIFICATE_REFRESH_SECONDS = 1.0
"""How often the progress line and W&B get a new certificate (about 40 ms at K = 1500 arms)."""


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
    a pair ``(scores, cost)`` with the dollars the call cost, or ``(scores, usage)`` with
    what each example was billed (a :class:`~gittinseval.live.usage.Usage`, kept in the store).  Without a returned
    cost a batch costs ``len(batch) * costs[arm]``; with neither, the run stops
    with an error (``costs="unit"`` counts examples instead of dollars).  A plain
    function runs in a pool of ``config.concurrency`` threads; a coroutine
    function runs on the event loop with at most ``concurrency`` calls in flight.
    The costs, the conversion of lambda to dollars and the store are those of
    :class:`Evaluator`.  A ``score_fn`` with a ``check_ready()`` method has it called
    first: its error (an unset API key) ends the run before any store or call.

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
    ``stop_at_signal``; at the confidence stop ``config.stop_when`` (checked after
    each tell: :meth:`Evaluator.confident`); when the policy has nothing more to ask; after a
    ``score_fn`` call has failed transiently ``max_retries + 1`` times (waiting
    ``retry_backoff * 2**attempt`` seconds between attempts, or as long as a 429 asked: the
    failure's ``retry_after``; transient: see :func:`~gittinseval.live.failures.is_transient`); at once on any
    other failure or on invalid scores or no cost; or on Ctrl-C (a cancellation of this coroutine).  In each
    case no new call starts, the calls in flight are awaited and recorded, and
    the store is closed.  A second Ctrl-C while waiting abandons them: their
    requests stay issued-but-untold in the store, a resumed run sends them again,
    and the abandoned calls are charged as expected at once (lost: their outcome is
    unknown), so the result counts them as the resumed run will.  If
    nothing was scored, the result has no recommendation (see
    :attr:`LiveResult.failure`); a run that ends after failed calls says the last one
    (:attr:`LiveResult.stop_line`).  ``config.on_tell(request, scores, cost)`` is
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
    # A scorer that knows no call can succeed (an unset API key) says why before a store is made or a call sent.
    if (check_ready := getattr(task.score_fn, "check_ready", None)) is not None:
        check_ready()
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
    return await _AsyncRun(task, config, evaluator, tracker).run()


class _AsyncRun:
    """One run of :func:`evaluate_async`: its scoring calls in flight, why it halts, and its progress.

    A call starts only while :meth:`blocker` says nothing blocks it (:meth:`launch`); the
    run waits for the first call in flight to finish (:meth:`collect`) and starts more,
    until no call is in flight and none may start.  A call that fails for good, or
    returns invalid scores, halts the run (:meth:`halt_on`); so does a cancellation
    (Ctrl-C), after which the calls in flight are still awaited, unless a second one
    abandons them (:meth:`interrupt`).
    """

    def __init__(self, task: LiveTask, config: LiveConfig, evaluator: Evaluator, tracker: LiveTracker) -> None:
        self.config = config
        self.evaluator = evaluator
        self.tracker = tracker
        self.arms, self.examples = list(task.arms), list(task.examples)
        self.call = _ScoreCall(task.score_fn, config.concurrency)
        # A scorer that keeps rate limits has its own clock of their waits; the waits after a 429 add to it.
        waits = getattr(task.score_fn, "limit_waits", None)
        self.limit_waits = waits if isinstance(waits, WaitClock) else WaitClock()
        self.waited_before = self.limit_waits.seconds
        self.provider_label: Callable[[Any], str] | None = getattr(task.score_fn, "provider_label", None)
        self.in_flight: set[asyncio.Future] = set()
        """The scoring calls started and not yet recorded, each with its retries."""
        self.halted: str | None = None
        """``"error"`` or ``"interrupted"`` once no new call may start, whatever the budget."""
        self.error: BaseException | None = None
        """The first failure that halted the run."""
        self.error_where: str | None = None
        """The arm and the examples of that failure's call."""
        self.last_failure: str | None = None
        """The last failed call, retried or not (:func:`~gittinseval.live.result.describe_failure`)."""
        self.grading = GradingWarnings()
        self.interrupted = False
        """Whether a Ctrl-C (a cancellation) came: a second one abandons the calls in flight."""
        self.ctrl_c = _CtrlC()
        self.confident = config.stop_when is not None and evaluator.confident(config.stop_when)
        """Whether the confidence stop is reached (a resumed run may have reached it already)."""
        self.shown_certificate: tuple[float, Certificate | None] | None = None
        """When the progress line's certificate was computed, and it."""
        currency = "" if evaluator.cost_unit == "unit" else "$"
        spent_of_budget = currency + "{spent:.4g}/" + currency + "{total:.4g}"
        self.bar = _SpendBar(
            total=config.budget_usd,
            initial=self.evaluator.spent,
            disable=not config.progress,
            bar_format="{l_bar}{bar}| " + spent_of_budget + " [{elapsed}<{remaining}{postfix}]",
            desc="gittinseval-live",
        )

    async def run(self) -> LiveResult:
        """Score until the run stops, close the store, and report."""
        stop_reason = None
        try:
            while stop_reason is None:
                try:
                    self.launch()
                    if not self.in_flight:
                        stop_reason = self.blocker() or StopReason.EXHAUSTED
                    else:
                        await self.collect()
                except asyncio.CancelledError:
                    self.interrupt()
        finally:
            if self.config.progress and self.shown_certificate is not None:
                # The last line shows the final certificate, however recent the one before it.
                self.shown_certificate = None
                self.progress(self.evaluator.score_warnings(), self.recent_certificate())
            self.bar.close()
            self.evaluator.close()
            self.ctrl_c.restore()
            await self.call.shutdown()
        # The evaluator's in-memory state outlives its store connection.
        result = self.result(stop_reason)
        self.tracker.finish(result.summary())
        return result

    @property
    def limit_wait(self) -> float:
        """Seconds of this run during which a call waited for a rate limit (:class:`~gittinseval.live.rate_limits.
        WaitClock`)."""
        return self.limit_waits.seconds - self.waited_before

    def blocker(self) -> str | None:
        """Why no new scoring call may start, or ``None``: spent plus the expected cost of the calls
        in flight must stay below the budget."""
        if self.halted is not None:
            return self.halted
        if self.config.stop_at_signal and self.evaluator.stop_signal:
            return StopReason.POLICY
        if self.confident:
            return StopReason.CONFIDENCE
        budget = self.config.budget_usd
        if budget is not None and self.evaluator.spent + self.evaluator.expected_in_flight >= budget:
            return StopReason.BUDGET
        return None

    def launch(self) -> None:
        """Start the policy's next requests while fewer than ``concurrency`` calls are in flight and
        nothing blocks a new one."""
        while len(self.in_flight) < self.config.concurrency and self.blocker() is None:
            request = self.evaluator.ask()
            if request is None:
                return
            # The call is in the ledger (and in the budget's in-flight total) before it is sent.
            self.in_flight.add(asyncio.ensure_future(self.score(self.evaluator.start_attempt(request))))

    async def collect(self) -> None:
        """Wait for the first call in flight to finish (it is recorded by :meth:`score`)."""
        done, _ = await asyncio.wait(self.in_flight, return_when=asyncio.FIRST_COMPLETED)
        for future in done:
            self.in_flight.remove(future)
            if not future.cancelled():  # an abandoned call (interrupt) is left to the store
                future.result()  # re-raises a bug of the driver itself; scoring failures are handled in score()

    def interrupt(self) -> None:
        """A cancellation (Ctrl-C): the first starts no new call and waits for the calls in flight, and has
        a second Ctrl-C cancel again; the second abandons the calls in flight, settled as lost and charged as
        expected at once (:meth:`Evaluator.abandon_calls`), so that the stop line counts them as a resumed
        run does; their requests stay outstanding, and a resumed run asks them again."""
        if not self.interrupted:
            log.warning(
                "interrupted: waiting for %d requests in flight (Ctrl-C again abandons them)", len(self.in_flight)
            )
            self.interrupted = True
            self.halted = self.halted or "interrupted"
            self.ctrl_c.cancel_on_ctrl_c(asyncio.current_task())
            return
        for future in self.in_flight:
            future.cancel()
        # A cancelled call never records its outcome: it is lost now, as a resume would find it.
        if abandoned := self.evaluator.abandon_calls():
            log.warning(
                "abandoned %d calls in flight: charged as expected (lost); a resumed run sends them again", abandoned
            )

    def halt_on(self, failure: BaseException, where: str, trace: bool = False) -> None:
        """Start no new call: ``failure`` of the call ``where`` stops the run (``trace``: log its traceback)."""
        log.error(
            "%s: %s; stopping with everything scored so far kept", where, failure, exc_info=failure if trace else None
        )
        if self.error is None:
            self.error, self.error_where = failure, where
        self.halted = "error"

    async def score(self, attempt: Attempt) -> tuple[np.ndarray, float] | None:
        """Score a request, retrying transient failures on its examples still unscored; its scores and
        cost once told, or ``None`` when it stays outstanding (a retry blocked, or a failure)."""
        evaluator, request = self.evaluator, attempt.request
        for retry in itertools.count():
            batch = [self.examples[int(e)] for e in attempt.examples]
            try:
                scores, cost, usage = _split_result(await self.call(self.arms[request.arm], batch))
            except Exception as failure:  # noqa: BLE001 - every failure is recorded, then retried or stops the run
                evaluator.fail_attempt(attempt, failure)
                where = _where(evaluator, attempt, failure)
                self.last_failure = describe_failure(failure, where)
                if not is_transient(failure) or retry == self.config.max_retries:
                    # An exception of the user's own code, not a classified failure: where it was raised.
                    own_code = not isinstance(failure, ScoringError)
                    self.halt_on(failure, f"{where}, {_raised_at(failure)}" if own_code else where, trace=own_code)
                    return None
                asked = getattr(failure, "retry_after", None)  # a 429's wait, in place of the backoff
                delay = self.config.retry_backoff * 2**retry if asked is None else asked
                log.warning("%s: call %d failed (%s); retrying in %.3g s", where, retry + 1, failure, delay)
                with self.limit_waits.waiting() if asked is not None else contextlib.nullcontext():
                    await asyncio.sleep(delay)
                # A stopping rule lets the calls in flight finish; the budget and a halt do not.
                if (reason := self.blocker()) not in (None, StopReason.POLICY, StopReason.CONFIDENCE):
                    if reason == StopReason.BUDGET:
                        # Asked again once the calls in flight are charged, if the budget is not reached then.
                        log.warning("%s: retry held back: spent plus the calls in flight reach the budget", where)
                        evaluator.hand_out_again(request)
                    return None
                attempt = evaluator.start_attempt(request)
                continue
            try:
                told = evaluator.finish_attempt(attempt, scores, cost, usage)
            except Exception as failure:  # noqa: BLE001 - invalid scores or cost, recorded as a failed call
                self.halt_on(failure, _where(evaluator, attempt, failure))
                return None
            self.after_tell(request, *told)
            return told

    def after_tell(self, request: Request, scores: np.ndarray, cost: float) -> None:
        """Right after a tell: the confidence stop, the logger, the user's callback, the grading's warnings, the
        progress bar."""
        if self.config.stop_when is not None:
            self.confident = self.evaluator.confident(self.config.stop_when)
        shows_certificate = self.config.progress or self.tracker.run is not None
        certificate = self.recent_certificate() if shows_certificate else None
        self.tracker.log(self.evaluator, certificate)
        if self.config.on_tell is not None:
            self.config.on_tell(request, scores, cost)
        warnings = self.grading.update(self.evaluator.posterior, self.evaluator.labels)
        if self.config.progress:
            self.progress(warnings, certificate)

    def recent_certificate(self) -> Certificate | None:
        """The evaluator's certificate, computed again at most every :data:`CERTIFICATE_REFRESH_SECONDS`: the
        progress line and W&B show one at most that old, and a run of cheap calls does not pay for one per tell."""
        now = time.monotonic()
        if self.shown_certificate is None or now - self.shown_certificate[0] >= CERTIFICATE_REFRESH_SECONDS:
            self.shown_certificate = (now, self.evaluator.certificate())
        return self.shown_certificate[1]

    def progress(self, warnings: list[str], certificate: Certificate | None) -> None:
        """The bar at the spend, with the recommendation, its P(eps-best), the stopping signal and the first
        warning."""
        self.bar.update(self.evaluator.spent - self.bar.n)
        rec = self.evaluator.recommend()
        stop = "yes" if self.evaluator.stop_signal else "no"
        sure = "" if certificate is None else f" P(within {certificate.eps:g})={certificate.prob_eps_best:.2f}"
        # Under the value objective the run recommends by the value's LCB, and the certificate is the value's.
        shown = f"LCB={rec.lcb:.3f}" if rec.value is None else f"value={rec.value:.3f} value LCB={rec.value_lcb:.3f}"
        waited = self.limit_wait
        self.bar.set_postfix_str(
            f"best {rec.label} M={rec.mean:.3f} {shown}{sure} stop={stop}"
            + (f" rate-limit wait {waited:.1f}s" if waited else "")
            + (f" WARNING: {warnings[0]}" if warnings else ""),
            refresh=False,
        )

    def result(self, stop_reason: str) -> LiveResult:
        evaluator = self.evaluator
        providers = [self.provider_label(arm) for arm in self.arms] if self.provider_label is not None else []
        spent = evaluator.ledger.spent_by_arm
        return LiveResult(
            recommendation=evaluator.recommend(),
            spent=evaluator.spent,
            budget_usd=self.config.budget_usd,
            stop_reason=stop_reason,
            stop_signal=evaluator.stop_signal,
            trace=evaluator.trace(),
            status=evaluator.status(),
            charged_as_expected=evaluator.charged_as_expected,
            attempts=evaluator.attempt_counts,
            status_unit=evaluator.cost_unit,
            store=evaluator.store.path,
            error=self.error,
            error_where=self.error_where,
            last_failure=self.last_failure,
            calls_charged_as_expected=evaluator.calls_charged_as_expected,
            warnings=evaluator.score_warnings(),
            diagnostics=evaluator.policy.diagnostics(),
            certificate=evaluator.certificate(),
            limit_wait=self.limit_wait,
            spent_by_provider={
                name: sum(spent.get(arm, 0.0) for arm, of in enumerate(providers) if of == name) for name in providers
            },
        )


def _raised_at(failure: BaseException) -> str:
    """``in <function> (<file>:<line>)``: the innermost function of ``failure``'s traceback outside the
    standard library and installed packages (the user's code), else its innermost one."""
    frames = [(frame, line) for frame, line in traceback.walk_tb(failure.__traceback__)
              if frame.f_code.co_name not in COMPREHENSIONS]
    if not frames:
        return "raised where unknown"
    libraries = tuple({sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")})
    own = [(frame, line) for frame, line in frames if not frame.f_code.co_filename.startswith(libraries)]
    frame, line = (own or frames)[-1]
    path = Path(frame.f_code.co_filename)
    with contextlib.suppress(ValueError):
        path = path.relative_to(Path.cwd())
    return f"in {frame.f_code.co_name} ({path}:{line})"


class _SpendBar(tqdm):
    """The spend against the budget: the bar fills up to the budget, its text shows the true spend (past the
    budget by the calls in flight when it was reached)."""

    @property
    def format_dict(self) -> dict[str, Any]:
        shown = super().format_dict
        shown["spent"] = shown["n"]
        if shown["total"] is not None:
            shown["n"] = min(shown["n"], shown["total"])
        return shown


class _CtrlC:
    """A second Ctrl-C of an interrupted run: the first cancels the run's task (asyncio's own handler), after
    which :meth:`cancel_on_ctrl_c` has the next one cancel it again (asyncio's would raise a
    ``KeyboardInterrupt`` wherever the program is) until :meth:`restore`."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None

    def cancel_on_ctrl_c(self, task: asyncio.Task | None) -> None:
        """From now on, Ctrl-C cancels ``task`` (where the loop can handle signals: the main thread)."""
        if task is None or self.loop is not None or threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # no signals on this loop
            loop.add_signal_handler(signal.SIGINT, task.cancel)
            self.loop = loop

    def restore(self) -> None:
        """Ctrl-C raises ``KeyboardInterrupt`` again."""
        if self.loop is not None:
            self.loop.remove_signal_handler(signal.SIGINT)
            self.loop = None


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


def _split_result(result: Any) -> tuple[Any, float | None, Usage | None]:
    """``scores``, ``(scores, cost)`` or ``(scores, usage)`` as ``(scores, cost, usage)``: a pair whose first item
    is a sequence carries a cost, or a :class:`~gittinseval.live.usage.Usage` (whose sum is the cost)."""
    if isinstance(result, tuple) and len(result) == 2 and np.ndim(result[0]) == 1:
        if isinstance(result[1], Usage):
            return result[0], None, result[1]
        return result[0], float(result[1]), None
    return result, None, None
