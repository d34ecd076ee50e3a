"""The chat adapter: a live task on an OpenAI-compatible ``/chat/completions`` endpoint.

An arm is a model with its system prompt and request settings; an example's reply is graded
(:mod:`gittinseval.live.tasks.graders`) and charged from the reply's token usage at the model's
prices (:mod:`gittinseval.live.tasks.prices`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import openai

from gittinseval.live.batch_journal import BatchJournal
from gittinseval.live.failures import NonRetryableError, ScoringError, TransientError, is_transient
from gittinseval.live.rate_limits import RateLimiter, WaitClock
from gittinseval.live.response_cache import (
    CACHE_MODES,
    CachedReply,
    ResponseCache,
    ResponseCacheError,
    SampleNumbers,
    cache_request,
    request_key,
)
from gittinseval.live.task import LiveTask, arm_list, scorer_identity
from gittinseval.live.tasks.batch import MODES, BatchCalls, BatchSettings
from gittinseval.live.tasks.graders import FirstWord, GraderFn, grade
from gittinseval.live.tasks.prices import ModelPrice, Prices, load_prices
from gittinseval.live.tasks.prompts import PromptTemplate, chat_messages, example_field
from gittinseval.live.tasks.providers import ENDPOINT_KEYS, Endpoint, Providers
from gittinseval.live.tasks.replies import outcome_bill, reply_usage, status_failure
from gittinseval.live.tasks.scoring import bundled_prices
from gittinseval.live.usage import Usage
from gittinseval.utils.errors import UsageError

__all__ = ["NO_KEY", "OpenAIChatScorer", "api_key", "chat_task", "expected_chat_costs"]

log = logging.getLogger(__name__)

NO_KEY = "EMPTY"
"""The placeholder key sent to a server that needs none (``api_key_env: null``), as vLLM and llama.cpp expect."""


def api_key(variable: str | None) -> str:
    """The API key held by the environment variable ``variable``, or :data:`NO_KEY` when ``variable`` is ``None``
    (a server that needs no key).

    An unset or empty variable is a :class:`~gittinseval.utils.errors.UsageError` that names it: sent as a
    placeholder, the call would come back as an HTTP 401 that does not say which key is missing.
    """
    if variable is None:
        return NO_KEY
    key = os.environ.get(variable)
    if not key:
        raise UsageError(
            f"the API key's environment variable {variable} (api_key_env) is {'empty' if key == '' else 'unset'}: "
            f"export {variable}=<key>, or for a server that needs no key set api_key_env: null "
            "(on the command line: task.score_fn.api_key_env=null)"
        )
    return key


def chat_task(
    arms: Sequence[Mapping[str, Any]],
    examples: Sequence[Mapping[str, Any]],
    score_fn: OpenAIChatScorer,
    prompt_tokens: float = 100.0,
    completion_tokens: float | None = 20.0,
    binary: bool = True,
    name: str = "chat",
) -> LiveTask:
    """A live task on a chat endpoint: expected costs from ``score_fn.prices`` (its batch prices in ``mode:
    batch``; the task's ``costs_by_mode`` has both, for the dry run, or why not) and the
    expected token counts (see :func:`expected_chat_costs`), and
    ``tokens_per_example = prompt_tokens + completion_tokens`` (with
    ``completion_tokens=None``, the arms' mean ``max_tokens``).  The scorer numbers the examples' samples in
    their order (:meth:`OpenAIChatScorer.number_samples`).

    An arm may set its own endpoint (``base_url``, ``api_key_env``, ``rpm``, ``tpm``: one task, several
    providers); the task's arms are the arms without them (:meth:`OpenAIChatScorer.route`), so that the
    endpoint is not a part of an arm's name in the store."""
    arms = arm_list(arms)
    score_fn.number_samples(examples)
    completion = (
        float(np.mean([arm["max_tokens"] for arm in arms if "max_tokens" in arm] or [0.0]))
        if completion_tokens is None
        else completion_tokens
    )
    arms = score_fn.route(arms, completion)
    by_mode = {"chat": expected_chat_costs(arms, score_fn.prices, prompt_tokens, completion_tokens)}
    try:
        by_mode["batch"] = expected_chat_costs(arms, score_fn.prices, prompt_tokens, completion_tokens, batch=True)
    except ValueError as error:
        if score_fn.mode == "batch":  # a model without a batch price: the error names it
            raise
        by_mode["batch"] = str(error)  # the dry run says why it has no batch estimate
    return LiveTask(
        arms=list(arms),
        examples=list(examples),
        score_fn=score_fn,
        costs=by_mode[score_fn.mode],
        tokens_per_example=float(prompt_tokens + completion),
        binary=binary,
        name=name,
        costs_by_mode=by_mode,
    )


def expected_chat_costs(
    arms: Sequence[Mapping[str, Any]],
    prices: Prices | str | Path | Mapping[str, Mapping[str, Any]],
    prompt_tokens: float = 100.0,
    completion_tokens: float | None = 20.0,
    batch: bool = False,
) -> list[float]:
    """Expected dollars per example of each chat arm from its model's prices per 1M tokens
    (:func:`~gittinseval.live.tasks.prices.load_prices`: a file or a mapping); ``batch``: its batch prices
    (:meth:`~gittinseval.live.tasks.prices.Prices.batch_price`).

    ``completion_tokens=None`` takes each arm's ``max_tokens`` (an upper bound), so
    arms that may answer at length are expected to cost more.
    """
    prices = load_prices(prices)
    if completion_tokens is None and any("max_tokens" not in arm for arm in arms):
        raise ValueError("completion_tokens: null takes each arm's max_tokens, and some arm has none")
    return [
        (prices.batch_price if batch else prices.price)(arm["model"]).dollars(
            prompt_tokens, arm["max_tokens"] if completion_tokens is None else completion_tokens
        )
        for arm in arms
    ]


REQUEST_KEYS = ("model", "system", "name", *ENDPOINT_KEYS)
"""Arm fields that are not sent as request settings: the model, the system prompt, the arm's label and its
endpoint (:data:`~gittinseval.live.tasks.providers.ENDPOINT_KEYS`: where and how fast, never a body field)."""
CHARS_PER_TOKEN = 4
"""Characters of English text per token, OpenAI's rule of thumb: a request's prompt tokens, estimated before it
is sent, as a provider estimates them against its tokens per minute."""


class OpenAIChatScorer:
    """``score_fn`` that asks an OpenAI-compatible ``/chat/completions`` endpoint, with the official
    ``openai`` client (``AsyncOpenAI``).

    An arm is a mapping with ``model``, an optional ``system`` prompt, an optional
    ``name`` (its label, never sent), and any further request fields
    (``temperature``, ``max_tokens``, ...), sent as they are.  An example is a
    mapping of fields; its user message is ``prompt`` rendered with them
    (:class:`~gittinseval.live.tasks.prompts.PromptTemplate`), and its score is
    ``grader(reply, example)`` (:mod:`gittinseval.live.tasks.graders`), checked to lie in
    [0, 1].  The examples of a batch are asked concurrently, one request each.  A
    batch costs ``sum(prompt_tokens * input + completion_tokens * output) / 1e6``
    dollars from each reply's ``usage`` and the model's ``prices`` (dollars per 1M
    tokens): a reasoning model's hidden reasoning tokens
    (``usage.completion_tokens_details.reasoning_tokens``, 0 when absent) are a part of
    its ``completion_tokens``, so they are billed once, at the output price, and
    reported apart as ``tokens_reasoning``.  A call returns ``(scores, usage)``, each
    example's dollars and tokens (:class:`~gittinseval.live.usage.Usage`).

    Failures are classified here, and the client itself never retries
    (``max_retries=0``): the driver retries a :class:`~gittinseval.live.TransientError`
    (a connection error, a timeout, HTTP 429 or 5xx) and stops at once on a
    :class:`~gittinseval.live.NonRetryableError` (an example without a field the
    prompt or the grader needs, any other 4xx, a reply that cannot be parsed, a reply
    without token usage, with a negative token count or with more reasoning tokens
    than completion tokens, a grader that returns anything but a number in [0, 1]).
    Either carries the scores of the examples of the batch that did succeed and the
    usage of every example that was billed, so that only the others are asked again;
    a call that may have been billed at an unreported cost (a timeout, a reply
    without usage) is counted in ``uncosted``.

    Providers and their limits: an arm may set its own ``base_url``, ``api_key_env``,
    ``rpm`` and ``tpm`` over the scorer's (:mod:`gittinseval.live.tasks.providers`; never
    sent as request fields).  The arms of one provider (``base_url`` and key) share its
    client, one per event loop, and its limits (those its arms set, else the scorer's:
    :class:`~gittinseval.live.rate_limits.RateLimiter`), which each request waits for before
    it is sent, counting its expected tokens: its messages' characters over
    :data:`CHARS_PER_TOKEN`, plus the arm's ``max_tokens`` (or ``max_completion_tokens``), else
    the task's expected completion tokens (:meth:`route`).
    :attr:`limit_waits` measures the time waited.  A 429 is free, and a
    :class:`~gittinseval.live.TransientError` whose ``retry_after`` is the wait its headers
    ask for (:func:`~gittinseval.live.rate_limits.retry_after`), which the driver waits
    before the retry; a 429 of an exhausted quota (``insufficient_quota``) stops the run.

    Args:
        base_url: e.g. ``http://localhost:8000/v1``.
        prices: a prices file (YAML or JSON, inspect_ai's model cost config shape) or
            ``{model: {"input": ..., "output": ...}}`` (:func:`~gittinseval.live.tasks.prices.load_prices`);
            ``None``: the bundled ``gittinseval/live/examples/prices.yaml``.
        api_key_env: environment variable holding the API key, which must be set (:func:`api_key`: a
            ``UsageError`` naming it, before any call); ``None``: the server needs no key, and the
            placeholder ``EMPTY`` is sent, as keyless local servers (vLLM, llama.cpp) expect.
        timeout: seconds per request.
        grader: ``grader(reply, example) -> [0, 1]``; ``None``: :class:`~gittinseval.live.tasks.graders.FirstWord`
            on the example's ``answer``.
        prompt: the user message, with ``{field}`` placeholders filled from the example.
        cache: which replies the response cache (:mod:`gittinseval.live.response_cache`) keeps and serves:
            ``auto`` those of requests at ``temperature: 0`` (an arm without a temperature gets the provider's
            default, 1), ``always`` every request's (a sample index in the key above temperature 0),
            ``never`` none.  A hit is charged $0, its stored reply graded with this ``grader``, its usage
            marked ``cached``.
        cache_path: the cache file; ``None``: ``$GITTINSEVAL_RESPONSE_CACHE``, else
            ``$XDG_CACHE_HOME/gittinseval/responses.sqlite`` (``~/.cache/...``).
        rpm: requests per minute of each provider, kept before each request (an arm's ``rpm`` sets its
            provider's); ``None``: no limit.
        tpm: tokens per minute of each provider, kept with each request's expected tokens (an arm's ``tpm``
            sets its provider's); ``None``: no limit.
        mode: ``chat``: a request per example, concurrently; ``batch``: a scoring call's requests not served by
            the cache are one Batch API job, polled until it ends and charged at the models' batch prices
            (:mod:`gittinseval.live.tasks.batch`; its journal, in the ``cache_path`` file whatever ``cache`` says:
            :mod:`gittinseval.live.batch_journal`).  The limits are not kept for batch jobs.
        batch: the settings of ``mode: batch`` (:class:`~gittinseval.live.tasks.batch.BatchSettings`):
            ``poll_seconds``, ``expired`` (``retry`` or ``fail``) and ``completion_window``.
    """

    def __init__(
        self,
        base_url: str,
        prices: Prices | str | Path | Mapping[str, Mapping[str, Any]] | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout: float = 60.0,
        grader: GraderFn | None = None,
        prompt: str = "{prompt}",
        cache: str = "auto",
        cache_path: str | Path | None = None,
        rpm: float | None = None,
        tpm: float | None = None,
        mode: str = "chat",
        batch: Mapping[str, Any] | None = None,
    ) -> None:
        self.providers = Providers(Endpoint(base_url, api_key_env), rpm, tpm)
        self.base_url = self.providers.default.base_url
        self.prices = load_prices(bundled_prices() if prices is None else prices)
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.grader = FirstWord() if grader is None else grader
        if not callable(self.grader):
            raise ValueError(f"grader must be callable as grader(reply, example), got {self.grader!r}")
        self.template = PromptTemplate(prompt)
        if cache not in CACHE_MODES:
            raise ValueError(f"cache must be one of {', '.join(CACHE_MODES)}, got {cache!r}")
        self.cache = cache
        self.response_cache = ResponseCache(cache_path)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        settings = BatchSettings.of(batch)  # checked in either mode: a misspelt setting is an error at once
        self.batch = BatchCalls(settings, BatchJournal(self.response_cache)) if mode == "batch" else None
        self._samples = SampleNumbers()
        self.expected_completion_tokens = 0.0
        """The completion tokens a request of an arm without ``max_tokens`` is expected to count (:meth:`route`)."""
        self.limit_waits = WaitClock()
        """The time the requests waited for their providers' limits (the driver adds its waits after a 429)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connections: dict[Endpoint, tuple[openai.AsyncOpenAI, RateLimiter]] = {}

    def identity(self) -> dict[str, Any]:
        """What makes a score or a cost: the prices, the grader (its ``_target_`` and settings) and
        the prompt template.  Not the endpoint (``base_url``, ``api_key_env``, ``timeout``, ``rpm``, ``tpm``, nor
        an arm's) nor the response cache (``cache``, ``cache_path``): a store resumes across a change of them.  The
        model, system prompt and request settings are the arms'.  In ``mode: batch``, the mode, and the prices
        with the batch prices that it charges."""
        identity = {
            "prices": self.prices.as_dict(),
            "grader": scorer_identity(self.grader),
            "prompt": self.template.template,
        }
        if self.batch is not None:  # only then: a chat-mode store keeps the identity it had before batch mode
            identity.update(prices=self.prices.as_dict(batch=True), mode=self.mode)
        return identity

    def check_ready(self) -> None:
        """Raise the :func:`api_key` error of an unset key variable of any provider of the arms; the driver asks
        before any call."""
        for endpoint in self.providers.endpoints:
            api_key(endpoint.api_key_env)

    def route(self, arms: Sequence[Mapping[str, Any]], completion_tokens: float = 0.0) -> list[dict[str, Any]]:
        """The arms without their endpoint settings, as the task keeps them, each arm's endpoint kept for its
        calls (:meth:`~gittinseval.live.tasks.providers.Providers.route`); ``completion_tokens``: the completion
        tokens a request of an arm without ``max_tokens`` is expected to count against ``tpm``."""
        self.expected_completion_tokens = float(completion_tokens)
        return self.providers.route(arms)

    def provider_label(self, arm: Mapping[str, Any]) -> str:
        """The name of the arm's provider, in the run's spend per provider: its ``base_url``."""
        return self.providers.label(self.providers.endpoint(arm))

    def connection(self, endpoint: Endpoint) -> tuple[openai.AsyncOpenAI, RateLimiter]:
        """The client (a connection pool) and the limiter of the endpoint's provider in the running loop: one of
        each per provider and loop, as a pool cannot outlive the loop it was opened in, nor a limiter's waiters."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self._connections = loop, {}
        if (connection := self._connections.get(endpoint)) is None:
            client = openai.AsyncOpenAI(
                api_key=api_key(endpoint.api_key_env),
                base_url=endpoint.base_url,
                timeout=self.timeout,
                max_retries=0,
            )
            connection = self._connections[endpoint] = (client, self.providers.limiter(endpoint))
        return connection

    def _expected_tokens(self, arm: Mapping[str, Any], messages: list[dict[str, str]]) -> int:
        """The tokens a request is expected to count against its provider's ``tpm``: its messages' characters over
        :data:`CHARS_PER_TOKEN`, plus the most it may answer (``max_completion_tokens``, ``max_tokens``), else the
        task's expected completion tokens."""
        prompt = math.ceil(sum(len(message["content"]) for message in messages) / CHARS_PER_TOKEN)
        limits = (arm.get(key) for key in ("max_completion_tokens", "max_tokens"))
        completion = next((limit for limit in limits if limit is not None), self.expected_completion_tokens)
        return prompt + math.ceil(completion)

    def number_samples(self, examples: Sequence[Mapping[str, Any]]) -> None:
        """Give the examples their sample indexes in this order (:class:`~gittinseval.live.response_cache.
        SampleNumbers`): each one's rank among the examples with its user prompt, the same in every run on them.
        Without it an example gets the next index of its prompt when it is first asked for."""
        for example in examples:
            # An example the template cannot read is refused when it is asked for, before anything is sent.
            with contextlib.suppress(TypeError, ValueError):
                self._samples.number(example, self.template.render(example))

    async def aclose(self) -> None:
        """Close the connection pool of the running loop's client and the response cache (the driver calls it
        when a run ends), logging how many replies the cache served and kept."""
        if self._loop is asyncio.get_running_loop():
            for client, _ in self._connections.values():
                await client.close()
        self._loop, self._connections = None, {}
        cache = self.response_cache
        if cache.hits or cache.stored:
            log.info("response cache %s: %d replies served from it ($0), %d stored", cache.path, cache.hits,
                     cache.stored)
        cache.close()

    def _requests(
        self, arm: Mapping[str, Any], examples: Sequence[Mapping[str, Any]]
    ) -> tuple[list[list[dict[str, str]]], list[int]]:
        """The messages and the sample index of each example's request; an example the prompt or the grader cannot
        read is a :class:`~gittinseval.live.NonRetryableError`, before its call is paid for."""
        answer_field = getattr(self.grader, "field", None)
        messages, samples = [], []
        for position, example in enumerate(examples):
            try:
                messages.append(chat_messages(self.template, example, arm.get("system")))
                samples.append(self._samples.number(example, messages[-1][-1]["content"]))
                if answer_field is not None:
                    example_field(example, answer_field, f"grader {self.grader!r}")
            except (TypeError, ValueError) as error:
                raise NonRetryableError(str(error), example=position, cost=0.0) from None
        return messages, samples

    def unbilled(self, arm: Mapping[str, Any], examples: Sequence[Mapping[str, Any]]) -> int:
        """How many of the examples' requests no batch billed to a call (0 in ``mode: chat``): never submitted, or
        waiting in a batch not yet collected, whose results are charged to the call that collects them.  A store
        that finds a call of them lost charges it nothing for these (:func:`~gittinseval.live.replay.replay`)."""
        if self.batch is None:
            return 0
        try:
            messages, samples = self._requests(arm, examples)
            endpoint = self.providers.endpoint(arm)
            return self.batch.count_unbilled(endpoint, arm["model"], self.request_fields(arm), messages, samples)
        except (NonRetryableError, ValueError):  # an unreadable journal included: charged as expected, money-safe
            return 0

    @staticmethod
    def request_fields(arm: Mapping[str, Any]) -> dict[str, Any]:
        """The arm's request settings, sent as fields of the request's body."""
        return {key: value for key, value in arm.items() if key not in REQUEST_KEYS}

    async def __call__(self, arm: Mapping[str, Any], examples: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, Usage]:
        try:
            price = (self.prices.price if self.batch is None else self.prices.batch_price)(arm["model"])
            endpoint = self.providers.endpoint(arm)
        except ValueError as error:
            raise NonRetryableError(str(error)) from None
        messages, samples = self._requests(arm, examples)
        if self.cache != "never" or self.batch is not None:  # the batch journal is in the cache's file
            try:
                self.response_cache.connect()
            except ResponseCacheError as error:
                raise NonRetryableError(str(error), cost=0.0) from None
        if self.batch is not None:
            outcomes = await self.batch.score(self, endpoint, arm, price, messages, examples, samples)
        else:
            outcomes = await asyncio.gather(
                *(
                    self._score(endpoint, arm, price, chat, example, sample)
                    for chat, example, sample in zip(messages, examples, samples, strict=True)
                )
            )
        failures = [(position, out) for position, out in enumerate(outcomes) if isinstance(out, ScoringError)]
        bills = [outcome_bill(outcome) for outcome in outcomes]
        # A hit is charged $0, and listed at its price for the learned costs.
        listed = [price.dollars(bill[1], bill[2]) if bill[4] else None for bill in bills]
        usage = Usage(*zip(*bills, strict=True), list_dollars=listed)
        if not failures:
            return np.array([outcome[0] for outcome in outcomes]), usage
        # The first deterministic failure, else the first: one stop, or one retry of the failed examples.
        position, failure = next(((p, f) for p, f in failures if not is_transient(f)), failures[0])
        scored = [None if isinstance(outcome, ScoringError) else outcome[0] for outcome in outcomes]
        # The retry waits as long as the longest wait a 429 of the batch asked for.
        wait = max((f.retry_after for _, f in failures if f.retry_after is not None), default=None)
        raise type(failure)(
            str(failure), scores=scored, usage=usage, uncosted=sum(f.uncosted for _, f in failures), example=position,
            retry_after=wait,
        )

    async def _score(
        self,
        endpoint: Endpoint,
        arm: Mapping[str, Any],
        price: ModelPrice,
        messages: list[dict[str, str]],
        example: Mapping[str, Any],
        sample: int,
    ) -> tuple[float, float, int, int, int, bool] | ScoringError:
        """``(score, dollars, prompt tokens, completion tokens, reasoning tokens, cached)`` of one example (the
        reasoning tokens a part of the completion tokens; ``cached``: the reply came from the response cache, at
        $0), or the classified failure of its request (with its usage when it was billed).  ``sample``: the
        example's sample index, in the cache key above temperature 0.  The request waits for its provider's limits
        before it is sent."""
        model = arm["model"]
        fields = self.request_fields(arm)
        where = f"{endpoint.base_url}/chat/completions for model {model!r}"
        request, key, hit = self.cached_request(endpoint, model, messages, fields, example, sample)
        if hit is not None:
            return hit
        client, limiter = self.connection(endpoint)
        # Only a request that is sent waits: a cache hit above costs its provider nothing.
        await limiter.acquire(self._expected_tokens(arm, messages), self.limit_waits)
        try:
            response = await client.chat.completions.create(model=model, messages=messages, extra_body=fields)
        except openai.APIConnectionError as error:
            # Refused before anything was sent: free.  A timeout or a dropped reply may have been billed.
            sent = type(error.__cause__).__name__ not in ("ConnectError", "ConnectTimeout")
            return TransientError(f"{where}: {error} ({error.__cause__!r})", cost=0.0, uncosted=int(sent))
        except openai.APIStatusError as error:
            return status_failure(error, f"{where}: ")
        except (json.JSONDecodeError, openai.APIResponseValidationError) as error:
            return NonRetryableError(f"{where}: unparseable reply ({error})", cost=0.0, uncosted=1)
        return self.answered(response, where, price, example, request, key)

    def cached_request(
        self, endpoint: Endpoint, model: str, messages: list[dict[str, str]], fields: Mapping[str, Any],
        example: Mapping[str, Any], sample: int,
    ) -> tuple[dict[str, Any] | None, str | None, tuple | ScoringError | None]:
        """``(request, key, hit)``: what the response cache keys the request by and its key (``None``, ``None`` when
        the ``cache`` setting leaves it uncached), and its stored reply graded at $0, or ``None`` (a miss)."""
        request = cache_request(self.cache, endpoint.base_url, model, messages, fields, sample)
        key = None if request is None else request_key(request)
        if key is None or (stored := self.response_cache.get(key)) is None:
            return request, key, None
        bill = (0.0, stored.tokens_in, stored.tokens_out, stored.tokens_reasoning, True)
        return request, key, self._graded(stored.reply, example, bill)

    def answered(
        self, response: Any, where: str, price: ModelPrice, example: Mapping[str, Any], request: dict[str, Any] | None,
        key: str | None,
    ) -> tuple[float, float, int, int, int, bool] | ScoringError:
        """The graded outcome of a reply (a ``ChatCompletion``) billed at ``price``, kept in the response cache under
        ``key`` (``None``: not cached); a reply without a valid usage or a message is a failure that may have been
        billed (``uncosted``)."""
        read = reply_usage(response, where)
        if isinstance(read, ScoringError):
            return read
        reply, prompt, completion, reasoning = read
        # Reasoning tokens are a part of completion_tokens: billed once, with them, at the output price.
        dollars = price.dollars(prompt, completion)
        if key is not None:
            # Kept before grading: a reply the grader refuses is paid for, and a new grader may read it.
            self.response_cache.put(key, request, CachedReply(reply, prompt, completion, reasoning, dollars))
        return self._graded(reply, example, (dollars, prompt, completion, reasoning, False))

    def _graded(
        self, reply: str, example: Mapping[str, Any], bill: tuple[float, int, int, int, bool]
    ) -> tuple[float, float, int, int, int, bool] | ScoringError:
        """``(score, *bill)`` of a reply, or the grader's failure carrying the reply's ``bill``, ``(dollars,
        prompt tokens, completion tokens, reasoning tokens, cached)``."""
        try:
            return grade(self.grader, reply, example), *bill
        except ValueError as error:
            return NonRetryableError(f"grading the reply: {error}", usage=Usage(*([value] for value in bill)))
