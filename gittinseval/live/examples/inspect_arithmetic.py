"""An inspect_ai task on the twenty bundled arithmetic questions, and scripted replies to run it offline.

    from gittinseval.live.tasks.inspect_task import inspect_task
    task = inspect_task("gittinseval/live/examples/inspect_arithmetic.py@arithmetic", arms=[...], prices=...)

Each question asks for a number only; inspect's ``match(numeric=True)`` scorer reads
the number at the end of the reply and compares it with the target.

:func:`scripted_replies` makes inspect's ``mockllm`` answer these questions with a
given accuracy and a given token usage, so that a run needs no server, no key and no
download (``conf/task/inspect_offline.yaml``).
"""

import asyncio
import json
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import FieldSpec, json_dataset
from inspect_ai.model import ChatMessage, GenerateConfig, ModelOutput, ModelUsage
from inspect_ai.scorer import match
from inspect_ai.solver import generate

from gittinseval.utils.validation import non_negative_float, non_negative_int

QUESTIONS = Path(__file__).with_name("arithmetic.jsonl")

ScriptedOutputs = Callable[[list[ChatMessage], list[Any], Any, GenerateConfig], Awaitable[ModelOutput]]


@task
def arithmetic() -> Task:
    dataset = json_dataset(str(QUESTIONS), FieldSpec(input="prompt", target="answer"), auto_id=True)
    return Task(dataset=dataset, solver=generate(), scorer=match(numeric=True), name="arithmetic")


def scripted_replies(
    accuracy: float, input_tokens: int, output_tokens: int, latency: float = 0.0
) -> ScriptedOutputs:
    """mockllm's ``custom_outputs`` for the arithmetic questions: right on a share ``accuracy`` of them.

    Question ``i`` of the file (from 0) is answered right when
    ``floor((i + 1) * accuracy) > floor(i * accuracy)``, so ``floor(20 * accuracy)`` of
    the 20 are, spread over the file; a wrong answer is the right one plus 1.  The reply
    is "The answer is N." after ``latency`` seconds.  The question is found in the last
    message, which may wrap it (a solver's template).  Every reply reports
    ``input_tokens`` and ``output_tokens`` as its usage, so that mockllm does not count
    tokens itself (it would download tiktoken's encoding) and a batch of ``n`` samples is
    charged ``n * (input_tokens * input price + output_tokens * output price) / 1e6``.

    From yaml, as an arm's model argument::

        model_args:
          custom_outputs:
            {_target_: gittinseval.live.examples.inspect_arithmetic.scripted_replies,
             accuracy: 0.9, input_tokens: 40, output_tokens: 6}
    """
    share = non_negative_float("accuracy", accuracy)
    if share > 1:
        raise ValueError(f"accuracy must lie in [0, 1], got {accuracy!r}")
    usage = {"input_tokens": non_negative_int("input_tokens", input_tokens),
             "output_tokens": non_negative_int("output_tokens", output_tokens)}
    wait = non_negative_float("latency", latency)
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    answers = {}
    for i, row in enumerate(rows):
        right = math.floor((i + 1) * share) > math.floor(i * share)
        answers[row["prompt"]] = row["answer"] if right else str(int(row["answer"]) + 1)
    # The longest question a message holds: no question is then mistaken for one it contains.
    by_length = sorted(answers, key=len, reverse=True)

    async def reply(
        messages: list[ChatMessage], tools: list[Any], tool_choice: Any, config: GenerateConfig
    ) -> ModelOutput:
        if wait:
            await asyncio.sleep(wait)
        text = messages[-1].text
        question = next((q for q in by_length if q in text), None)
        if question is None:
            raise ValueError(f"scripted_replies: the message holds none of the arithmetic questions: {text[:80]!r}")
        output = ModelOutput.from_content(model="mockllm", content=f"The answer is {answers[question]}.")
        output.usage = ModelUsage(**usage, total_tokens=usage["input_tokens"] + usage["output_tokens"])
        return output

    return reply
