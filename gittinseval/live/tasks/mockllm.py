"""Scripted replies of inspect_ai's ``mockllm`` for any inspect task: offline runs whose charges are real.

An arm on ``mockllm/<name>`` replies as its ``custom_outputs`` script says, built by
:func:`scripted_replies` from the task config's yaml, per arm either an accuracy or a
reply per sample id, and the token usage every reply reports::

    arms:
      - name: small
        model: mockllm/small
        model_args:
          custom_outputs:
            _target_: gittinseval.live.tasks.mockllm.scripted_replies
            accuracy: 0.6          # the target on a share 0.6 of the samples (in expectation), drawn by seed
            right: "It is {target}."
            input_tokens: 30       # the usage of every reply: what it is charged at the prices
            output_tokens: 5
      - name: listed
        model: mockllm/large
        model_args:
          custom_outputs:
            _target_: gittinseval.live.tasks.mockllm.scripted_replies
            replies: {q1: "It is Paris.", q2: "It is Lyon."}   # a reply per sample id
            input_tokens: 30
            output_tokens: 5

A reply is chosen by the sample inspect is running (its id and its target), never by
the wording of the messages, so that any task, dataset and solver can be scripted.  The
script is part of the arm, so that a store records it and refuses to resume on a
changed one.  Every reply reports the scripted usage, so that mockllm counts no tokens
itself (it would download tiktoken's encoding) and a batch of ``n`` samples, one model
call each, is charged ``n * (input_tokens * input + output_tokens * output +
input_tokens_cache_write * input_cache_write + input_tokens_cache_read *
input_cache_read) / 1e6`` at the model's prices.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from inspect_ai.model import ChatMessage, GenerateConfig, ModelOutput, ModelUsage
from inspect_ai.solver import TaskState

# inspect keeps the running sample's state in a context variable; its model code reads it the same way.
from inspect_ai.solver._task_state import sample_state

from gittinseval.utils.validation import non_negative_float, non_negative_int

__all__ = ["ScriptedOutputs", "answered_right", "scripted_replies"]

ScriptedOutputs = Callable[[list[ChatMessage], list[Any], Any, GenerateConfig], Awaitable[ModelOutput]]
"""mockllm's ``custom_outputs`` callable: ``await outputs(messages, tools, tool_choice, config) -> ModelOutput``."""

WRONG = "I do not know."
"""The reply of a sample answered wrong, unless ``wrong`` says otherwise."""


def answered_right(accuracy: float, seed: int, sample_id: Any) -> bool:
    """Whether the sample ``sample_id`` is answered right: ``u < accuracy``, where ``u`` in [0, 1) is the first
    8 bytes of the SHA-256 of ``"{seed}:{sample_id}"`` over ``2**64``.

    Each sample is thus right with probability ``accuracy``, independently of the others,
    and the same samples are right in every run, epoch and process for a given seed.
    """
    digest = hashlib.sha256(f"{seed}:{sample_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < accuracy


def _template(setting: str, text: Any) -> str:
    """``text`` as a reply template whose only placeholder is ``{target}``, else a ``ValueError`` naming ``setting``."""
    if not isinstance(text, str):
        raise ValueError(f"scripted_replies: {setting} must be text, got {text!r}")
    try:
        text.format(target="")
    except (KeyError, IndexError, ValueError) as error:
        raise ValueError(
            f"scripted_replies: {setting} {text!r} is not a reply template ({error!r}); its only placeholder is "
            "{target}, and a literal brace is written twice"
        ) from None
    return text


def _replies_by_id(replies: Any) -> dict[str, str]:
    """``{str(sample id): reply}``: yaml reads ``1:`` as a number and ``q1:`` as text, inspect ids are both."""
    if not isinstance(replies, Mapping) or not replies:
        raise ValueError(f"scripted_replies: replies must map sample ids to replies, got {replies!r}")
    by_id = {}
    for sample_id, reply in replies.items():
        if isinstance(reply, bool) or not isinstance(reply, str | int | float):
            raise ValueError(f"scripted_replies: the reply of sample {sample_id!r} must be text, got {reply!r}")
        by_id[str(sample_id)] = str(reply)
    return by_id


def scripted_replies(
    *,
    input_tokens: int,
    output_tokens: int,
    accuracy: float | None = None,
    replies: Mapping[Any, str] | None = None,
    seed: int | None = None,
    right: str | None = None,
    wrong: str | None = None,
    input_tokens_cache_write: int = 0,
    input_tokens_cache_read: int = 0,
    latency: float = 0.0,
) -> ScriptedOutputs:
    """mockllm's ``custom_outputs`` for any inspect task: an accuracy, or a reply per sample id.

    Args:
        input_tokens, output_tokens: the usage every reply reports (inspect's
            ``ModelUsage``; ``input_tokens`` are those charged at the full input price).
        accuracy: the share of samples answered right, in [0, 1]: sample ``s`` is when
            :func:`answered_right` ``(accuracy, seed, s)``, which holds for each sample
            with probability ``accuracy``, the same samples in every run and epoch.
        replies: instead of ``accuracy``, the reply to each sample, by sample id; a
            sample without one fails (the run stops on one line naming it).
        seed: draws which samples are right (default 0); with ``accuracy`` only.
        right: a right reply, ``{target}`` standing for the sample's (first) target
            (default ``"{target}"``; ``"ANSWER: {target}"`` for inspect's ``choice()``).
        wrong: a wrong reply, which may hold ``{target}`` too (default ``"I do not know."``).
        input_tokens_cache_write, input_tokens_cache_read: prompt cache tokens every
            reply reports, charged at the prices file's cache prices.
        latency: seconds each reply takes.

    Returns:
        ``await outputs(messages, tools, tool_choice, config) -> ModelOutput`` for the
        sample inspect is running; called outside an inspect sample, it raises.
    """
    if (accuracy is None) == (replies is None):
        raise ValueError(
            "scripted_replies: give accuracy (the share of samples answered right) or replies (a reply per "
            "sample id), not both or neither"
        )
    if replies is not None and (seed, right, wrong) != (None, None, None):
        raise ValueError("scripted_replies: seed, right and wrong go with accuracy; replies are given as they are")
    usage = {
        field: non_negative_int(f"scripted_replies: {field}", value)
        for field, value in (
            ("input_tokens", input_tokens),
            ("output_tokens", output_tokens),
            ("input_tokens_cache_write", input_tokens_cache_write),
            ("input_tokens_cache_read", input_tokens_cache_read),
        )
    }
    wait = non_negative_float("scripted_replies: latency", latency)
    if accuracy is not None:
        share = non_negative_float("scripted_replies: accuracy", accuracy)
        if share > 1:
            raise ValueError(f"scripted_replies: accuracy must lie in [0, 1], got {accuracy!r}")
        draw = non_negative_int("scripted_replies: seed", 0 if seed is None else seed)
        right_text = _template("right", "{target}" if right is None else right)
        wrong_text = _template("wrong", WRONG if wrong is None else wrong)

        def text_for(state: TaskState) -> str:
            targets = list(state.target)
            template = right_text if answered_right(share, draw, state.sample_id) else wrong_text
            return template.format(target=targets[0] if targets else "")

    else:
        by_id = _replies_by_id(replies)

        def text_for(state: TaskState) -> str:
            if str(state.sample_id) not in by_id:
                raise ValueError(
                    f"scripted_replies: no reply for sample {state.sample_id!r}; replies are given for samples "
                    f"{', '.join(list(by_id)[:10])}{' ...' if len(by_id) > 10 else ''}"
                )
            return by_id[str(state.sample_id)]

    async def reply(
        messages: list[ChatMessage], tools: list[Any], tool_choice: Any, config: GenerateConfig
    ) -> ModelOutput:
        state = sample_state()
        if state is None:
            raise RuntimeError("scripted_replies: mockllm was called outside an inspect sample; there is no sample")
        if wait:
            await asyncio.sleep(wait)
        output = ModelOutput.from_content(model="mockllm", content=text_for(state))
        output.usage = ModelUsage(
            input_tokens=usage["input_tokens"],
            output_tokens=usage["output_tokens"],
            total_tokens=sum(usage.values()),
            # None, as a provider without a prompt cache reports it, when no cache token is scripted.
            input_tokens_cache_write=usage["input_tokens_cache_write"] or None,
            input_tokens_cache_read=usage["input_tokens_cache_read"] or None,
        )
        return output

    return reply
