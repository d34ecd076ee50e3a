"""Batch mode of the chat scorer: a scoring call's requests as one OpenAI-compatible Batch API job.

With ``mode: batch`` (:class:`~gittinseval.live.tasks.chat.OpenAIChatScorer`), a scoring call (one arm and a
batch of examples, one request of the policy) sends the requests that the response cache does not serve as one
job, with the ``openai`` client's own calls: one JSONL file (a line per request: its ``custom_id``, ``POST
/v1/chat/completions`` and the body the chat mode would send) uploaded by ``client.files.create(purpose="batch")``,
a batch of it created by ``client.batches.create``, polled by ``client.batches.retrieve`` every
``batch.poll_seconds`` until it ends, and its results read by ``client.files.content`` (the output file, and the
error file).  The driver runs several scoring calls at once, so several jobs are in flight.

Each reply is read and graded as in chat mode and charged at the model's batch price
(:meth:`~gittinseval.live.tasks.prices.Prices.batch_price`).  The ids are journaled before anything can be paid
for (:mod:`gittinseval.live.batch_journal`): a request whose line is pending in a job (this run's, or one killed
before it collected it) is collected from that job, never submitted again.

Failed lines are classified as failed calls are in chat mode, unbilled: a line whose response is HTTP 429 (not of a
spent quota, ``insufficient_quota``) or 5xx is a :class:`~gittinseval.live.TransientError` (the driver retries it: a
new job), any other status a :class:`~gittinseval.live.NonRetryableError`; a line that expired (the batch ended
``expired`` before it ran) is retried or stops the run as ``batch.expired`` says; a batch that failed on the
provider's limit of enqueued tokens (``token_limit_exceeded``) is retried, one that failed otherwise (its
validation) stops the run; of a cancelled batch, the lines answered before the cancellation are charged and
graded as a completed batch's, and the others stop the run; a line missing from a completed batch's files, or
whose reply cannot be read, stops it too, charged as expected once (it may have been billed), however many
examples asked its request.  An upload, creation or poll that fails is classified as the chat request
would be, at no charge, and its lines stay journaled: the retry polls the same batch; but a batch the provider no
longer knows (its poll answers HTTP 404) is dropped from the journal, with a warning naming it, and its lines are
submitted again by the retry.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol

import openai
from openai.types.chat import ChatCompletion

from gittinseval.live.batch_journal import BatchJournal, PendingLine
from gittinseval.live.failures import NonRetryableError, ScoringError, TransientError
from gittinseval.live.response_cache import ResponseCacheError, cache_request, request_key
from gittinseval.live.tasks.prices import ModelPrice
from gittinseval.live.tasks.replies import Outcome, status_failure

if TYPE_CHECKING:
    from gittinseval.live.rate_limits import RateLimiter
    from gittinseval.live.tasks.providers import Endpoint

__all__ = ["EXPIRED_ACTIONS", "MODES", "BatchCalls", "BatchSettings", "ChatRequests"]

log = logging.getLogger(__name__)

MODES = ("chat", "batch")
"""The chat scorer's modes: a request per example, or a Batch API job per scoring call."""
EXPIRED_ACTIONS = ("retry", "fail")
"""What becomes of an expired line (``batch.expired``): a transient failure, retried in a new job; or one that
stops the run."""
ENDED = ("completed", "expired", "failed", "cancelled")
"""The statuses of a batch that will not change again."""
CHAT_URL = "/v1/chat/completions"
FREE = ModelPrice(0.0, 0.0)
"""The price of a reply served again: paid for by another example or call."""


@dataclass(frozen=True)
class BatchSettings:
    """The ``batch`` settings of a chat scorer (used in ``mode: batch``).

    Attributes:
        poll_seconds: seconds between two retrievals of a batch in flight.
        expired: ``retry`` (a line that expired is a transient failure: the driver retries it, up to its
            ``max_retries``) or ``fail`` (it stops the run).
        completion_window: the window the batch is created with (OpenAI's only one: ``24h``).
    """

    poll_seconds: float = 30.0
    expired: str = "retry"
    completion_window: str = "24h"

    @classmethod
    def of(cls, settings: Mapping[str, Any] | None) -> BatchSettings:
        """The settings of a mapping (``None``: the defaults); an unknown or invalid one is a ``ValueError`` that
        names it (``batch.<name>``)."""
        settings = dict(settings or {})
        names = [field.name for field in fields(cls)]
        if unknown := sorted(set(settings) - set(names)):
            raise ValueError(f"batch.{unknown[0]}: no such batch setting; the settings are {', '.join(names)}")
        made = cls(**settings)
        poll = made.poll_seconds
        if isinstance(poll, bool) or not isinstance(poll, int | float) or not (math.isfinite(poll) and poll > 0):
            raise ValueError(f"batch.poll_seconds must be a positive number of seconds, got {poll!r}")
        if made.expired not in EXPIRED_ACTIONS:
            raise ValueError(f"batch.expired must be one of {', '.join(EXPIRED_ACTIONS)}, got {made.expired!r}")
        if not isinstance(made.completion_window, str) or not made.completion_window:
            raise ValueError(f"batch.completion_window must be a window such as '24h', got {made.completion_window!r}")
        return made


def journal_key(endpoint: Endpoint, model: str, messages: list[dict[str, str]], settings: Mapping[str, Any],
                sample: int) -> str:
    """The key a request is journaled by: the response cache's key of the whole request, with its sample index
    above temperature 0, whatever the cache setting (the journal is not the cache)."""
    return request_key(cache_request("always", endpoint.base_url, model, messages, settings, sample))


class ChatRequests(Protocol):
    """The request-level steps of the chat scorer (:class:`~gittinseval.live.tasks.chat.OpenAIChatScorer`) that
    batch mode shares with a request per example: what a request sends, the response cache, the provider's
    client, and the graded and cached outcome of a reply."""

    def request_fields(self, arm: Mapping[str, Any]) -> dict[str, Any]: ...

    def cached_request(
        self, endpoint: Endpoint, model: str, messages: list[dict[str, str]], fields: Mapping[str, Any],
        example: Mapping[str, Any], sample: int,
    ) -> tuple[dict[str, Any] | None, str | None, tuple | ScoringError | None]: ...

    def connection(self, endpoint: Endpoint) -> tuple[openai.AsyncOpenAI, RateLimiter]: ...

    def answered(
        self, response: Any, where: str, price: ModelPrice, example: Mapping[str, Any], request: dict[str, Any] | None,
        key: str | None,
    ) -> tuple[float, float, int, int, int, bool] | ScoringError: ...


class BatchCalls:
    """The scoring calls of a chat scorer in batch mode: jobs submitted, journaled, polled and collected."""

    def __init__(self, settings: BatchSettings, journal: BatchJournal) -> None:
        self.settings = settings
        self.journal = journal
        # Jobs whose batch a call of this process is creating: another call that finds their lines pending with no
        # batch journaled yet awaits that creation instead of creating a second batch of the same file.
        self._creating: dict[int, asyncio.Future[str]] = {}

    def count_unbilled(self, endpoint: Endpoint, model: str, settings: Mapping[str, Any],
                       messages: Sequence[list[dict[str, str]]], samples: Sequence[int]) -> int:
        """How many of the requests (the examples' ``messages`` and ``samples``) no batch billed to a call
        (:meth:`~gittinseval.live.batch_journal.BatchJournal.count_unbilled`)."""
        pairs = zip(messages, samples, strict=True)
        return self.journal.count_unbilled([journal_key(endpoint, model, chat, settings, sample) for chat, sample in
                                            pairs])

    async def score(
        self,
        scorer: ChatRequests,
        endpoint: Endpoint,
        arm: Mapping[str, Any],
        price: ModelPrice,
        messages: Sequence[list[dict[str, str]]],
        examples: Sequence[Mapping[str, Any]],
        samples: Sequence[int],
    ) -> list[Outcome | ScoringError]:
        """The outcome of each example: a cache hit, else its line's reply (of a new job, or of the job that has
        it pending), graded and billed at ``price``, or its classified failure."""
        model, settings = arm["model"], scorer.request_fields(arm)
        where = f"{endpoint.base_url}/batches for model {model!r}"
        outcomes: list[Outcome | ScoringError | None] = [None] * len(examples)
        asked: dict[str, list[int]] = {}  # journal key -> positions: a request asked twice is one line
        cached = {}
        for position, (chat, example, sample) in enumerate(zip(messages, examples, samples, strict=True)):
            request, key, hit = scorer.cached_request(endpoint, model, chat, settings, example, sample)
            if hit is not None:
                outcomes[position] = hit
                continue
            line_key = journal_key(endpoint, model, chat, settings, sample)
            asked.setdefault(line_key, []).append(position)
            cached[line_key] = (request, key)
        client = scorer.connection(endpoint)[0]
        try:
            pending = self.journal.pending(asked)
            new = [key for key in asked if key not in pending]
            if new:
                bodies = {key: {"model": model, "messages": messages[asked[key][0]], **settings} for key in new}
                pending.update(await self._submit(client, endpoint, bodies))
            results = await self._collect(client, {line.job: line for line in pending.values()})
        except (ScoringError, ResponseCacheError) as error:
            kind = TransientError if isinstance(error, TransientError) else NonRetryableError
            failure = kind(f"{where}: {error}", cost=0.0, retry_after=getattr(error, "retry_after", None))
            return [failure if outcome is None else outcome for outcome in outcomes]
        for key, positions in asked.items():
            line = pending[key]
            batch, result = results[line.job]
            answered = self._outcomes(scorer, key, line, batch, result.get(line.custom_id), where, price,
                                      [examples[position] for position in positions], *cached[key])
            for position, outcome in zip(positions, answered, strict=True):
                outcomes[position] = outcome
        return outcomes

    async def _submit(self, client: openai.AsyncOpenAI, endpoint: Endpoint,
                      bodies: dict[str, dict[str, Any]]) -> dict[str, PendingLine]:
        """Upload the bodies as one file, journal it, create its batch and journal that: the pending lines of the
        bodies, new, or journaled meanwhile by another call or process (then the others are uploaded again)."""
        found: dict[str, PendingLine] = {}
        while bodies:
            lines = [(key, f"request-{number}") for number, key in enumerate(bodies)]
            content = "".join(json.dumps({"custom_id": custom_id, "method": "POST", "url": CHAT_URL,
                                          "body": bodies[key]}) + "\n" for key, custom_id in lines)
            uploaded = await _call(client.files.create(file=("gittinseval-batch.jsonl", content.encode()),
                                                       purpose="batch"))
            # Journaled before the batch exists: a run killed from here on finds the file, and its batch if created.
            job, elsewhere = self.journal.record_file(endpoint.base_url, uploaded.id, lines)
            if job is None:  # its file, never made a batch, is left unused (an upload is not billed)
                found.update(elsewhere)
                bodies = {key: body for key, body in bodies.items() if key not in elsewhere}
                continue
            batch_id = await self._create(client, job, uploaded.id)
            return found | {key: PendingLine(job, uploaded.id, batch_id, custom_id) for key, custom_id in lines}
        return found

    async def _create(self, client: openai.AsyncOpenAI, job: int, file_id: str) -> str:
        """The batch of the job's file, created and journaled; a refused creation takes the job out of the journal
        (its file would be refused again)."""
        creating = self._creating[job] = asyncio.get_running_loop().create_future()
        try:
            batch = await _call(client.batches.create(input_file_id=file_id, endpoint=CHAT_URL,
                                                      completion_window=self.settings.completion_window))
        except asyncio.CancelledError:
            creating.cancel()
            raise
        except Exception as error:
            if isinstance(error, NonRetryableError):
                self.journal.drop_job(job)
            creating.set_exception(error)  # a call awaiting this creation fails as this one does
            creating.exception()  # retrieved here, so that a future no call awaited is not logged as unretrieved
            raise
        finally:
            del self._creating[job]
        # Journaled before it is polled: a run killed from here on polls the same batch.
        self.journal.record_batch(job, batch.id)
        creating.set_result(batch.id)
        return batch.id

    async def _collect(self, client: openai.AsyncOpenAI, jobs: dict[int, PendingLine]) -> dict[int, tuple[Any, dict]]:
        """Of each job: its ended batch and its results by ``custom_id`` (output and error files)."""
        polls = [asyncio.ensure_future(self._ended(client, job, line)) for job, line in jobs.items()]
        try:
            ended = await asyncio.gather(*polls)
        finally:
            for poll in polls:  # a failed poll ends the others: the retry polls every job again
                poll.cancel()
        return dict(zip(jobs, ended, strict=True))

    async def _ended(self, client: openai.AsyncOpenAI, job: int, line: PendingLine) -> tuple[Any, dict[str, dict]]:
        """The job's batch once ended, and its results by ``custom_id``."""
        batch_id = line.batch_id
        if batch_id is None and job in self._creating:  # another call of this run is creating it
            batch_id = await asyncio.shield(self._creating[job])
        if batch_id is None:
            # The run that uploaded the file ended before it journaled a batch: it may have created one.
            if (batch_id := await self._batch_of(client, line.file_id)) is None:
                batch_id = await self._create(client, job, line.file_id)
            else:
                self.journal.record_batch(job, batch_id)
        while (batch := await self._retrieved(client, job, batch_id)).status not in ENDED:
            await asyncio.sleep(self.settings.poll_seconds)
        results = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                content = await _call(client.files.content(file_id))
                try:
                    lines = [json.loads(text) for text in content.text.splitlines() if text.strip()]
                except ValueError as error:
                    raise NonRetryableError(f"batch {batch_id}: its file {file_id} is not JSONL ({error})") from None
                results.update((result.get("custom_id"), result) for result in lines if isinstance(result, dict))
        return batch, results

    async def _retrieved(self, client: openai.AsyncOpenAI, job: int, batch_id: str) -> Any:
        """The job's batch as the provider has it now; one it no longer knows (HTTP 404) is dropped from the journal,
        with a warning, and is a free transient failure: the retry submits its lines again."""
        try:
            return await client.batches.retrieve(batch_id)
        except openai.NotFoundError:
            self.journal.drop_job(job)
            log.warning("batch %s: the provider no longer knows it (HTTP 404); its requests are submitted again",
                        batch_id)
            raise TransientError(f"batch {batch_id}: not found (HTTP 404); its requests are submitted again",
                                 cost=0.0) from None
        except openai.APIError as error:
            raise _classified(error) from None

    @staticmethod
    async def _batch_of(client: openai.AsyncOpenAI, file_id: str) -> str | None:
        """The id of the provider's batch of the uploaded file, if one was created."""
        try:
            async for batch in client.batches.list(limit=100):
                if batch.input_file_id == file_id:
                    return batch.id
        except openai.APIError as error:
            raise _classified(error, "listing the batches: ") from None
        return None

    def _outcomes(self, scorer: ChatRequests, key: str, line: PendingLine, batch: Any, result: dict | None,
                  where: str, price: ModelPrice, examples: list[Mapping[str, Any]], request: dict | None,
                  cache_key: str | None) -> list[Outcome | ScoringError]:
        """The outcome of one line of an ended batch for each of the ``examples`` that asked its request (the first
        charged for it, the others served it again at $0); see the module docstring for the classes of failure."""
        where = f"{where}, batch {batch.id} line {line.custom_id}"
        response = (result or {}).get("response") or {}
        # A cancelled batch's lines that ran before the cancellation are answered and billed as a completed one's.
        if batch.status in ("completed", "expired", "cancelled") and response.get("status_code") == 200:
            try:
                reply = ChatCompletion.model_construct(**response["body"])
            except (TypeError, KeyError) as error:
                taken = self.journal.take(key, line.job)
                failure = NonRetryableError(f"{where}: unparseable reply ({error!r})", cost=0.0, uncosted=int(taken))
                return _charged_once(failure, len(examples))
            # Taken once: a line another call collected first was charged there.
            taken = self.journal.take(key, line.job)
            first = scorer.answered(reply, where, price, examples[0], request, cache_key) if taken else None
            return [first] * (first is not None) + [
                _again(scorer.answered(reply, where, FREE, example, None, None)) for example in examples[taken:]
            ]
        self.journal.drop([(key, line.job)])  # a failed line is submitted anew by a retry
        return _charged_once(self._failure(batch, response, (result or {}).get("error") or {}, where), len(examples))

    def _failure(self, batch: Any, response: dict, error: dict, where: str) -> ScoringError:
        """The classified failure of a line without a reply."""
        errors = getattr(getattr(batch, "errors", None), "data", None) or []
        why = "; ".join(f"{e.code}: {e.message}" for e in errors) or "no reason given"
        if batch.status == "failed":
            # The provider's limit of tokens enqueued at once frees up as other batches end: worth a retry.
            queued = any(getattr(e, "code", None) == "token_limit_exceeded" for e in errors)
            return (TransientError if queued else NonRetryableError)(f"{where}: the batch failed ({why})", cost=0.0)
        if error.get("code") == "batch_expired":
            kind = TransientError if self.settings.expired == "retry" else NonRetryableError
            return kind(f"{where}: expired before it ran (batch.expired: {self.settings.expired})", cost=0.0)
        if status := response.get("status_code"):
            body_error = (response.get("body") or {}).get("error") or {}
            # As in chat mode: a 429 of a spent quota would only come again.
            rate_limited = status == 429 and body_error.get("code") != "insufficient_quota"
            kind = TransientError if rate_limited or status >= 500 else NonRetryableError
            return kind(f"{where}: HTTP {status}: {body_error.get('message', '')}", cost=0.0)
        if batch.status == "cancelled":  # a line that did not run before the cancellation
            return NonRetryableError(f"{where}: the batch cancelled ({why})", cost=0.0)
        if error:
            return NonRetryableError(f"{where}: {error.get('code')}: {error.get('message')}", cost=0.0)
        return NonRetryableError(f"{where}: no result in the batch's files", cost=0.0, uncosted=1)


def _charged_once(failure: ScoringError, positions: int) -> list[ScoringError]:
    """The failure of one line for each of the ``positions`` that asked its request: the calls it may have cost
    (``uncosted``) counted at the first only, as the line is billed once."""
    again = copy.copy(failure)
    again.uncosted = 0
    return [failure] + [again] * (positions - 1)


def _again(outcome: Outcome | ScoringError) -> Outcome | ScoringError:
    """An outcome of a reply served again ($0), marked cached."""
    return outcome if isinstance(outcome, ScoringError) else (*outcome[:5], True)


async def _call(awaitable: Any) -> Any:
    """An upload, creation, retrieval or download, its failure classified (:func:`_classified`)."""
    try:
        return await awaitable
    except openai.APIError as error:
        raise _classified(error) from None


def _classified(error: openai.APIError, doing: str = "") -> ScoringError:
    """A failed upload, creation, retrieval, listing or download classified as a chat request's failure is, free
    (none of them is billed): a connection error, HTTP 429 (not of a spent quota) or 5xx is transient."""
    if not isinstance(error, openai.APIStatusError):
        return TransientError(f"{doing}{error} ({error.__cause__!r})", cost=0.0)
    return status_failure(error, doing)
