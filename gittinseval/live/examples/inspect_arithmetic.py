"""An inspect_ai task on the twenty bundled arithmetic questions, and scripted replies to run it offline.

    from gittinseval.live.tasks.inspect_task import inspect_task
    task = inspect_task("gittinseval/live/examples/inspect_arithmetic.py@arithmetic", arms=[...], prices=...)

Each question asks for a number only; inspect's ``match(numeric=True)`` scorer reads
the number at the end of the reply and compares it with the target.

:func:`scripted_replies` makes inspect's ``mockllm`` answer these questions with a
given accuracy and a given token usage, so that a run needs no server, no key and no
download (``conf/task/inspect_offline.yaml``).
"""

import json
import math
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import FieldSpec, json_dataset
from inspect_ai.scorer import match
from inspect_ai.solver import generate

from gittinseval.live.tasks.mockllm import ScriptedOutputs
from gittinseval.live.tasks.mockllm import scripted_replies as replies_by_sample
from gittinseval.utils.validation import non_negative_float

QUESTIONS = Path(__file__).with_name("arithmetic.jsonl")


@task
def arithmetic() -> Task:
    dataset = json_dataset(str(QUESTIONS), FieldSpec(input="prompt", target="answer"), auto_id=True)
    return Task(dataset=dataset, solver=generate(), scorer=match(numeric=True), name="arithmetic")


def scripted_replies(accuracy: float, input_tokens: int, output_tokens: int, latency: float = 0.0) -> ScriptedOutputs:
    """mockllm's ``custom_outputs`` for the arithmetic questions: right on a share ``accuracy`` of them.

    Question ``i`` of the file (from 0, sample id ``i + 1``) is answered right when
    ``floor((i + 1) * accuracy) > floor(i * accuracy)``, so exactly ``floor(20 * accuracy)``
    of the 20 are, spread over the file; a wrong answer is the right one plus 1.  The
    reply is "The answer is N." after ``latency`` seconds, and reports ``input_tokens``
    and ``output_tokens`` as its usage, so that a batch of ``n`` samples is charged
    ``n * (input_tokens * input price + output_tokens * output price) / 1e6``.  These are
    replies per sample id of :func:`gittinseval.live.tasks.mockllm.scripted_replies`,
    which scripts any task.

    From yaml, as an arm's model argument::

        model_args:
          custom_outputs:
            {_target_: gittinseval.live.examples.inspect_arithmetic.scripted_replies,
             accuracy: 0.9, input_tokens: 40, output_tokens: 6}
    """
    share = non_negative_float("accuracy", accuracy)
    if share > 1:
        raise ValueError(f"accuracy must lie in [0, 1], got {accuracy!r}")
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    replies = {}
    for i, row in enumerate(rows):
        right = math.floor((i + 1) * share) > math.floor(i * share)
        replies[i + 1] = f"The answer is {row['answer'] if right else int(row['answer']) + 1}."
    return replies_by_sample(replies=replies, input_tokens=input_tokens, output_tokens=output_tokens, latency=latency)
