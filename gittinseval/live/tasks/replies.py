"""What a chat reply says it cost: its text and token usage, read and checked, and each example's bill."""

from __future__ import annotations

from typing import Any

import openai

from gittinseval.live.failures import NonRetryableError, ScoringError, TransientError
from gittinseval.live.rate_limits import retry_after

__all__ = ["outcome_bill", "reply_usage", "status_failure"]

Outcome = tuple[float, float, int, int, int, bool]
"""A scored example: ``(score, dollars, prompt tokens, completion tokens, reasoning tokens, cached)``."""


def reply_usage(response: Any, where: str) -> tuple[str, int, int, int] | ScoringError:
    """``(reply, prompt tokens, completion tokens, reasoning tokens)`` of a chat completion (the reasoning tokens
    a part of the completion tokens), or the failure of a reply that was billed but says wrongly what for: no
    usage, a negative or non-integer count, more reasoning than completion tokens, no ``choices[0].message``
    (a :class:`~gittinseval.live.NonRetryableError` with ``uncosted=1``).  ``where``: the endpoint and model, for
    the message."""
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
    return response.choices[0].message.content or "", prompt, completion, reasoning


def _reasoning_tokens(usage: Any) -> Any:
    """The reply's hidden reasoning tokens, ``usage.completion_tokens_details.reasoning_tokens``: 0 for a reply
    without them (a model that does not reason, a server that does not break its completion tokens down)."""
    details = getattr(usage, "completion_tokens_details", None)
    reasoning = getattr(details, "reasoning_tokens", None)
    return 0 if reasoning is None else reasoning


def outcome_bill(
    outcome: Outcome | ScoringError,
) -> tuple[float, int | None, int | None, int | None, bool]:
    """``(dollars, prompt tokens, completion tokens, reasoning tokens, cached)`` of one example's request: a
    failure's own usage if it was billed; else what it reported (nothing), with no tokens where a bill is unknown
    (``uncosted``), and not cached (a failed call's reply, if any, was never stored)."""
    if not isinstance(outcome, ScoringError):
        return outcome[1:]
    if (usage := outcome.usage) is not None:
        return usage.dollars[0], usage.tokens_in[0], usage.tokens_out[0], usage.tokens_reasoning[0], usage.cached[0]
    tokens = None if outcome.uncosted else 0
    return outcome.cost, tokens, tokens, tokens, False


def status_failure(error: openai.APIStatusError, where: str) -> ScoringError:
    """An HTTP error answer classified, free (nothing was billed): a 429 (not of a spent quota,
    ``insufficient_quota``, which would only come again) or a 5xx is transient, retried after the wait the 429 asks
    for; any other status stops the run.  ``where`` prefixes the message."""
    rate_limited = error.status_code == 429 and error.code != "insufficient_quota"
    kind = TransientError if rate_limited or error.status_code >= 500 else NonRetryableError
    wait = retry_after(error.response.headers) if rate_limited else None
    return kind(f"{where}HTTP {error.status_code}: {error.message}", cost=0.0, retry_after=wait)
