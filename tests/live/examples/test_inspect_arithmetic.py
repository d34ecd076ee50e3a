"""The bundled inspect task (gittinseval.live.examples.inspect_arithmetic): the twenty arithmetic questions as
inspect samples, and the scripted replies that answer a given share of them right, offline."""

import json
import math

import pytest

from gittinseval.live.examples import inspect_arithmetic
from gittinseval.live.examples.inspect_arithmetic import QUESTIONS, arithmetic, scripted_replies

ROWS = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]


def test_the_task_holds_the_twenty_questions_with_their_answers_as_targets():
    task = arithmetic()
    assert task.name == "arithmetic" and len(ROWS) == 20
    samples = list(task.dataset)
    assert [sample.id for sample in samples] == list(range(1, 21))
    assert [sample.input for sample in samples] == [row["prompt"] for row in ROWS]
    assert [sample.target for sample in samples] == [row["answer"] for row in ROWS]


@pytest.fixture
def captured(monkeypatch):
    """The arguments that ``scripted_replies`` hands to mockllm's script of replies by sample id."""
    calls = []
    monkeypatch.setattr(inspect_arithmetic, "replies_by_sample", lambda **kwargs: calls.append(kwargs) or "script")
    return calls


@pytest.mark.parametrize(("accuracy", "n_right"), [(0.0, 0), (0.25, 5), (0.33, 6), (0.9, 18), (1.0, 20)])
def test_a_share_of_the_questions_spread_over_the_file_is_answered_right(captured, accuracy, n_right):
    assert scripted_replies(accuracy, input_tokens=40, output_tokens=6, latency=0.5) == "script"
    (call,) = captured
    assert (call["input_tokens"], call["output_tokens"], call["latency"]) == (40, 6, 0.5)
    replies = call["replies"]
    assert sorted(replies) == list(range(1, 21))
    right = [replies[i + 1] == f"The answer is {row['answer']}." for i, row in enumerate(ROWS)]
    assert sum(right) == n_right
    for i, row in enumerate(ROWS):  # right by the stated rule; a wrong answer is the right one plus 1
        expected = math.floor((i + 1) * accuracy) > math.floor(i * accuracy)
        assert right[i] == expected
        if not right[i]:
            assert replies[i + 1] == f"The answer is {int(row['answer']) + 1}."
    if 0 < n_right < 20:  # spread over the file, not bunched at its start
        assert right.index(True) < 10 and right[::-1].index(True) < 10


@pytest.mark.parametrize(("accuracy", "message"), [(1.5, r"accuracy must lie in \[0, 1\], got 1.5"),
                                                   (-0.1, "accuracy must be non-negative")])
def test_an_accuracy_outside_the_unit_interval_is_refused(captured, accuracy, message):
    with pytest.raises(ValueError, match=message):
        scripted_replies(accuracy, input_tokens=1, output_tokens=1)
    assert captured == []
