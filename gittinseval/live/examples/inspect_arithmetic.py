"""An inspect_ai task on the twenty bundled arithmetic questions, for gittinseval's inspect adapter.

    from gittinseval.live.inspect_task import inspect_task
    task = inspect_task("gittinseval/live/examples/inspect_arithmetic.py@arithmetic", arms=[...], prices=...)

Each question asks for a number only; inspect's ``match(numeric=True)`` scorer reads
the number at the end of the reply and compares it with the target.
"""

from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import FieldSpec, json_dataset
from inspect_ai.scorer import match
from inspect_ai.solver import generate


@task
def arithmetic() -> Task:
    dataset = json_dataset(
        str(Path(__file__).with_name("arithmetic.jsonl")),
        FieldSpec(input="prompt", target="answer"),
        auto_id=True,
    )
    return Task(dataset=dataset, solver=generate(), scorer=match(numeric=True), name="arithmetic")
