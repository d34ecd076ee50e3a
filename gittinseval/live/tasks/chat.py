"""The chat adapter: a live task on an OpenAI-compatible ``/chat/completions`` endpoint.

An arm is a model with its system prompt and request settings; an example's reply is graded
(:mod:`gittinseval.live.tasks.graders`) and charged from the reply's token usage at the model's
prices (:mod:`gittinseval.live.tasks.prices`).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import openai

from gittinseval.live.failures import NonRetryableError, ScoringError, TransientError, is_transient
from gittinseval.live.task import LiveTask, arm_list, scorer_identity
from gittinseval.live.tasks.graders import FirstWord, GraderFn, grade
from gittinseval.live.tasks.prices import ModelPrice, Prices, load_prices
from gittinseval.live.tasks.prompts import PromptTemplate, chat_messages, example_field
from gittinseval.live.tasks.scoring import bundled_prices
from gittinseval.live.usage import Usage

__all__ = ["OpenAIChatScorer", "chat_task", "expected_chat_costs"]


def chat_task(
    arms: Sequence[Mapping[str, Any]],
    examples: Sequence[Mapping[str, Any]],
    score_fn: OpenAIChatScorer,
    prompt_tokens: float = 100.0,
    completion_tokens: float | None = 20.0,
    binary: bool = True,
    name: str = "chat",
) -> LiveTask:
    """A live task on a chat endpoint: expected costs from ``score_fn.prices`` and the
    expected token counts (see :func:`expected_chat_costs`), and
    ``tokens_per_example = prompt_tokens + completion_tokens`` (with
    ``completion_tokens=None``, the arms' mean ``max_tokens``)."""
    arms = arm_list(arms)
    completion = (
        float(np.mean([arm["max_tokens"] for arm in arms if "max_tokens" in arm] or [0.0]))
        if completion_tokens is None
        else completion_tokens
    )
    return LiveTask(
        arms=list(arms),
        examples=list(examples),
        score_fn=score_fn,
        costs=expected_chat_costs(arms, score_fn.prices, prompt_tokens, completion_tokens),
        tokens_per_example=float(prompt_tokens + completion),
        binary=binary,
        name=name,
    )


def expected_chat_costs(
    arms: Sequence[Mapping[str, Any]],
    prices: Prices | str | Path | Mapping[str, Mapping[str, Any]],
    prompt_tokens: float = 100.0,
    completion_tokens: float | None = 20.0,
) -> list[float]:
    """Expected dollars per example of each chat arm from its model's prices per 1M tokens
    (:func:`~gittinseval.live.tasks.prices.load_prices`: a file or a mapping).

    ``completion_tokens=None`` takes each arm's ``max_tokens`` (an upper bound), so
    arms that may answer at length are expected to cost more.
    """
    prices = load_prices(prices)
    if completion_tokens is None and any("max_tokens" not in arm for arm in arms):
        raise ValueError("completion_tokens: null takes each arm's max_tokens, and some arm has none")
    return [
        prices.price(arm["model"]).dollars(
            prompt_tokens, arm["max_tokens"] if completion_tokens is None else completion_tokens
        )
        for arm in arms
    ]


REQUEST_KEYS = ("model", "system", "name")
"""Arm fields that are not sent as request settings: the model, the system prompt and the arm's label."""


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

    Args:
        base_url: e.g. ``http://localhost:8000/v1``.
        prices: a prices file (YAML or JSON, inspect_ai's model cost config shape) or
            ``{model: {"input": ..., "output": ...}}`` (:func:`~gittinseval.live.tasks.prices.load_prices`);
            ``None``: the bundled ``gittinseval/live/examples/prices.yaml``.
        api_key_env: environment variable holding the API key; unset: the placeholder
            key ``EMPTY`` is sent, as keyless local servers (vLLM, llama.cpp) expect.
        timeout: seconds per request.
        grader: ``grader(reply, example) -> [0, 1]``; ``None``: :class:`~gittinseval.live.tasks.graders.FirstWord`
            on the example's ``answer``.
        prompt: the user message, with ``{field}`` placeholders filled from the example.
    """

    def __init__(
        self,
        base_url: str,
        prices: Prices | str | Path | Mapping[str, Mapping[str, Any]] | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        grader: GraderFn | None = None,
        prompt: str = "{prompt}",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.prices = load_prices(bundled_prices() if prices is None else prices)
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.grader = FirstWord() if grader is None else grader
        if not callable(self.grader):
            raise ValueError(f"grader must be callable as grader(reply, example), got {self.grader!r}")
        self.template = PromptTemplate(prompt)
        self._client: openai.AsyncOpenAI | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def identity(self) -> dict[str, Any]:
        """What makes a score or a cost: the prices, the grader (its ``_target_`` and settings) and
        the prompt template.  Not the endpoint (``base_url``, ``api_key_env``, ``timeout``): a store
        resumes across a change of them.  The model, system prompt and request settings are the arms'."""
        return {
            "prices": self.prices.as_dict(),
            "grader": scorer_identity(self.grader),
            "prompt": self.template.template,
        }

    def _client_of_this_loop(self) -> openai.AsyncOpenAI:
        """One client (one connection pool) per event loop: a pool cannot outlive the loop it was opened in."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = openai.AsyncOpenAI(
                api_key=os.environ.get(self.api_key_env) or "EMPTY",
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=0,
            )
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the connection pool of the running loop's client (the driver calls it when a run ends)."""
        if self._client is not None and self._client_loop is asyncio.get_running_loop():
            await self._client.close()
        self._client = self._client_loop = None

    async def __call__(self, arm: Mapping[str, Any], examples: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, Usage]:
        try:
            price = self.prices.price(arm["model"])
        except ValueError as error:
            raise NonRetryableError(str(error)) from None
        # An example the prompt or the grader cannot read is refused before its call is paid for.
        answer_field = getattr(self.grader, "field", None)
        messages = []
        for position, example in enumerate(examples):
            try:
                messages.append(chat_messages(self.template, example, arm.get("system")))
                if answer_field is not None:
                    example_field(example, answer_field, f"grader {self.grader!r}")
            except (TypeError, ValueError) as error:
                raise NonRetryableError(str(error), example=position, cost=0.0) from None
        client = self._client_of_this_loop()
        outcomes = await asyncio.gather(
            *(self._score(client, arm, price, chat, example) for chat, example in zip(messages, examples, strict=True))
        )
        failures = [(position, out) for position, out in enumerate(outcomes) if isinstance(out, ScoringError)]
        bills = [_bill(outcome) for outcome in outcomes]
        usage = Usage(*zip(*bills, strict=True))
        if not failures:
            return np.array([outcome[0] for outcome in outcomes]), usage
        # The first deterministic failure, else the first: one stop, or one retry of the failed examples.
        position, failure = next(((p, f) for p, f in failures if not is_transient(f)), failures[0])
        scored = [None if isinstance(outcome, ScoringError) else outcome[0] for outcome in outcomes]
        raise type(failure)(
            str(failure), scores=scored, usage=usage, uncosted=sum(f.uncosted for _, f in failures), example=position
        )

    async def _score(
        self,
        client: openai.AsyncOpenAI,
        arm: Mapping[str, Any],
        price: ModelPrice,
        messages: list[dict[str, str]],
        example: Mapping[str, Any],
    ) -> tuple[float, float, int, int, int] | ScoringError:
        """``(score, dollars, prompt tokens, completion tokens, reasoning tokens)`` of one example (the reasoning
        tokens a part of the completion tokens), or the classified failure of its request (with its usage when it
        was billed)."""
        model = arm["model"]
        fields = {key: value for key, value in arm.items() if key not in REQUEST_KEYS}
        where = f"{self.base_url}/chat/completions for model {model!r}"
        try:
            response = await client.chat.completions.create(model=model, messages=messages, extra_body=fields)
        except openai.APIConnectionError as error:
            # Refused before anything was sent: free.  A timeout or a dropped reply may have been billed.
            sent = type(error.__cause__).__name__ not in ("ConnectError", "ConnectTimeout")
            return TransientError(f"{where}: {error} ({error.__cause__!r})", cost=0.0, uncosted=int(sent))
        except openai.APIStatusError as error:
            kind = TransientError if error.status_code == 429 or error.status_code >= 500 else NonRetryableError
            return kind(f"{where}: HTTP {error.status_code}: {error.message}", cost=0.0)
        except (json.JSONDecodeError, openai.APIResponseValidationError) as error:
            return NonRetryableError(f"{where}: unparseable reply ({error})", cost=0.0, uncosted=1)
        usage = response.usage
        tokens = {
            "prompt_tokens": getattr(usage, "prompt_tokens", None),
            "completion_tokens": getattr(usage, "completion_tokens", None),
        }
        for field, count in tokens.items():
            if not isinstance(count, int) or count < 0:
                problem = "no" if count is None else f"a negative or non-integer ({count!r})"
                return NonRetryableError(f"{where}: the reply has {problem} usage.{field}", cost=0.0, uncosted=1)
        if not response.choices or response.choices[0].message is None:
            return NonRetryableError(f"{where}: the reply has no choices[0].message", cost=0.0, uncosted=1)
        prompt, completion = tokens["prompt_tokens"], tokens["completion_tokens"]
        reasoning = _reasoning_tokens(usage)
        if not isinstance(reasoning, int) or not 0 <= reasoning <= completion:
            problem = f"usage.completion_tokens_details.reasoning_tokens {reasoning!r}"
            return NonRetryableError(
                f"{where}: the reply has {problem}, not a count within its {completion} completion tokens",
                cost=0.0,
                uncosted=1,
            )
        # Reasoning tokens are a part of completion_tokens: billed once, with them, at the output price.
        dollars = price.dollars(prompt, completion)
        reply = response.choices[0].message.content or ""
        try:
            return grade(self.grader, reply, example), dollars, prompt, completion, reasoning
        except ValueError as error:
            return NonRetryableError(
                f"grading the reply: {error}", usage=Usage([dollars], [prompt], [completion], [reasoning])
            )


def _reasoning_tokens(usage: Any) -> Any:
    """The reply's hidden reasoning tokens, ``usage.completion_tokens_details.reasoning_tokens``: 0 for a reply
    without them (a model that does not reason, a server that does not break its completion tokens down)."""
    details = getattr(usage, "completion_tokens_details", None)
    reasoning = getattr(details, "reasoning_tokens", None)
    return 0 if reasoning is None else reasoning


def _bill(
    outcome: tuple[float, float, int, int, int] | ScoringError,
) -> tuple[float, int | None, int | None, int | None]:
    """``(dollars, prompt tokens, completion tokens, reasoning tokens)`` of one example's request: a failure's own
    usage if it was billed; else what it reported (nothing), with no tokens where a bill is unknown (``uncosted``)."""
    if not isinstance(outcome, ScoringError):
        return outcome[1:]
    if (usage := outcome.usage) is not None:
        return usage.dollars[0], usage.tokens_in[0], usage.tokens_out[0], usage.tokens_reasoning[0]
    tokens = None if outcome.uncosted else 0
    return outcome.cost, tokens, tokens, tokens
