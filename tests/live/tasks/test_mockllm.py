"""Scripted mockllm replies for any inspect task, as a task config's yaml gives them: an accuracy or a reply per
sample id, with the usage every reply reports charged at the prices."""

import asyncio
import hashlib
import math
import re
import sys

import numpy as np
import pytest
from inspect_ai import Task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import GenerateConfig, get_model
from inspect_ai.scorer import choice, includes
from inspect_ai.solver import generate, multiple_choice

from gittinseval.live import NonRetryableError
from gittinseval.live.tasks.inspect_task import inspect_task
from gittinseval.live.tasks.mockllm import scripted_replies

CAPITALS = {
    "fr": ("France", "Paris"),
    "de": ("Germany", "Berlin"),
    "it": ("Italy", "Rome"),
    "es": ("Spain", "Madrid"),
    "pt": ("Portugal", "Lisbon"),
    "at": ("Austria", "Vienna"),
    "pl": ("Poland", "Warsaw"),
    "gr": ("Greece", "Athens"),
    "ie": ("Ireland", "Dublin"),
    "no": ("Norway", "Oslo"),
    "se": ("Sweden", "Stockholm"),
    "fi": ("Finland", "Helsinki"),
}
PRICES = {"mockllm/small": {"input": 0.5, "output": 2.0}, "mockllm/large": {"input": 3.0, "output": 12.0}}
SCRIPT = "gittinseval.live.tasks.mockllm.scripted_replies"


def quiz(ids=tuple(CAPITALS)):
    """A task of the user's own: capitals by country code, graded by inspect's includes()."""
    samples = [Sample(id=i, input=f"What is the capital of {CAPITALS[i][0]}?", target=CAPITALS[i][1]) for i in ids]
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=includes(), name="quiz")


def arm(model, **script):
    """An arm whose replies are scripted as a task config's yaml scripts them: a ``_target_`` mapping."""
    return {"model": model, "model_args": {"custom_outputs": {"_target_": SCRIPT, **script}}}


def live_quiz(arms, tmp_path, task=None, prices=PRICES):
    return inspect_task(task or quiz(), arms, prices, tokens={"input": 1, "output": 1}, log_dir=tmp_path / "logs")


def score(task, index, ids):
    """``(scores, usage)`` of arm ``index`` on the samples ``ids``."""
    examples = {example["id"]: example for example in task.examples}
    return asyncio.run(task.score_fn(task.arms[index], [examples[i] for i in ids]))


def right_by_the_documented_rule(accuracy, seed, sample_id):
    """u < accuracy, u the first 8 bytes of SHA-256("{seed}:{sample_id}") over 2**64 (counted here from the docs)."""
    digest = hashlib.sha256(f"{seed}:{sample_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < accuracy


def test_an_accuracy_answers_the_samples_its_seed_draws_and_each_reply_is_charged_its_usage(tmp_path):
    arms = [
        arm("mockllm/small", accuracy=0.5, input_tokens=30, output_tokens=5),
        arm("mockllm/small", accuracy=0.5, seed=7, input_tokens=30, output_tokens=5),
        arm("mockllm/large", accuracy=1.0, input_tokens=30, output_tokens=5),
        arm("mockllm/large", accuracy=0.0, input_tokens=30, output_tokens=5),
    ]
    task = live_quiz(arms, tmp_path)
    ids = list(CAPITALS)
    for index, (accuracy, seed) in enumerate([(0.5, 0), (0.5, 7), (1.0, 0), (0.0, 0)]):
        scores, usage = score(task, index, ids)
        expected = [float(right_by_the_documented_rule(accuracy, seed, i)) for i in ids]
        np.testing.assert_array_equal(scores, expected)
        price = PRICES[arms[index]["model"]]
        assert math.isclose(usage.cost, len(ids) * (30 * price["input"] + 5 * price["output"]) / 1e6, rel_tol=1e-12)
        assert usage.tokens_in == (30,) * len(ids) and usage.tokens_out == (5,) * len(ids)
    # The two seeds draw other samples, each a mix of right and wrong: the draw is tested, not a constant.
    first, second = score(task, 0, ids)[0], score(task, 1, ids)[0]
    assert 0 < first.sum() < len(ids) and 0 < second.sum() < len(ids) and (first != second).any()
    # The same samples again, in another order: a sample's reply is its own, not its position's.
    np.testing.assert_array_equal(score(task, 0, ids[::-1])[0], first[::-1])


def test_a_reply_per_sample_id_is_that_sample_s_reply(tmp_path):
    replies = {"fr": "Paris, of course.", "de": "Bonn", "it": "It is Rome."}
    numbered = Task(
        dataset=MemoryDataset([Sample(id=n, input=f"{n} + {n}?", target=str(2 * n)) for n in (1, 2, 3)]),
        scorer=includes(),
    )
    task = live_quiz([arm("mockllm/small", replies=replies, input_tokens=10, output_tokens=2)], tmp_path)
    assert score(task, 0, ["it", "de", "fr"])[0].tolist() == [1.0, 0.0, 1.0]
    # yaml reads `1:` as a number and `"1":` as text, and inspect numbers samples: the ids meet either way.
    by_number = arm("mockllm/small", replies={1: "2", 2: "5", 3: "6"}, input_tokens=1, output_tokens=1)
    by_text = arm("mockllm/small", replies={"1": "0", "2": "4", "3": "6"}, input_tokens=1, output_tokens=1)
    task = live_quiz([by_number, by_text], tmp_path, numbered)
    assert score(task, 0, [1, 2, 3])[0].tolist() == [1.0, 0.0, 1.0]
    assert score(task, 1, [1, 2, 3])[0].tolist() == [0.0, 1.0, 1.0]


def test_a_sample_without_a_reply_stops_the_run_naming_it(tmp_path):
    task = live_quiz([arm("mockllm/small", replies={"fr": "Paris"}, input_tokens=10, output_tokens=2)], tmp_path)
    with pytest.raises(NonRetryableError, match=r"sample 'de' failed: .*no reply for sample 'de'; .*samples fr") as e:
        score(task, 0, ["fr", "de"])
    assert e.value.scores == [1.0, None] and "\n" not in str(e.value)


def test_right_and_wrong_reply_templates_serve_a_multiple_choice_scorer(tmp_path):
    """inspect's choice() reads "ANSWER: X": the template writes the target there."""
    samples = [
        Sample(id=i, input=f"Capital of {country}?", choices=[city, "Nowhere"], target="A")
        for i, (country, city) in CAPITALS.items()
    ]
    task = Task(dataset=MemoryDataset(samples), solver=multiple_choice(), scorer=choice(), name="choices")
    script = {"accuracy": 0.5, "right": "ANSWER: {target}", "wrong": "ANSWER: B", "input_tokens": 1, "output_tokens": 1}
    live = live_quiz([arm("mockllm/small", **script)], tmp_path, task)
    ids = list(CAPITALS)
    expected = [float(right_by_the_documented_rule(0.5, 0, i)) for i in ids]
    np.testing.assert_array_equal(score(live, 0, ids)[0], expected)


@pytest.mark.parametrize(
    ("script", "error"),
    [
        ({}, "give accuracy .* or replies .*, not both or neither"),
        ({"accuracy": 0.5, "replies": {"fr": "Paris"}}, "not both or neither"),
        ({"replies": {"fr": "Paris"}, "seed": 3}, "seed, right and wrong go with accuracy"),
        ({"accuracy": 1.5}, r"accuracy must lie in \[0, 1\], got 1.5"),
        ({"accuracy": 0.5, "right": "{answer}"}, r"right '\{answer\}' is not a reply template .*\{target\}"),
        ({"accuracy": 0.5, "wrong": "{target"}, r"wrong '\{target' is not a reply template"),
        ({"replies": {"fr": ["Paris"]}}, r"the reply of sample 'fr' must be text, got \['Paris'\]"),
        ({"replies": []}, "replies must map sample ids to replies"),
        ({"accuracy": 0.5, "input_tokens": -1}, "input_tokens must be a non-negative integer, got -1"),
        ({"accuracy": 0.5, "input_tokens_cache_read": 2.5}, "input_tokens_cache_read must be a non-negative"),
        ({"acuracy": 0.5}, r"scripted_replies: TypeError: .*unexpected keyword argument 'acuracy'"),
        ({"accuracy": 0.5, "input_tokens": None}, "input_tokens must be a non-negative integer, got None"),
    ],
)
def test_a_bad_script_is_refused_on_one_line_naming_the_arm_and_the_setting(tmp_path, script, error):
    script = {"input_tokens": 1, "output_tokens": 1, **script}
    arms = [{"name": "small", **arm("mockllm/small", **script)}]
    with pytest.raises(ValueError, match=r"inspect arm 0 'small' \(mockllm/small\): model_args.custom_outputs: ") as e:
        live_quiz(arms, tmp_path)
    assert re.search(error, str(e.value)) and "\n" not in str(e.value)


def test_a_reply_script_that_cannot_be_imported_names_the_arm_and_the_search_path(tmp_path, monkeypatch):
    replies = {"accuracy": 0.5, "input_tokens": 1, "output_tokens": 1}
    missing = [{"name": "mine", "model": "mockllm/small", "model_args": {"custom_outputs": {
        "_target_": "my_replies.script", **replies}}}]
    with pytest.raises(ValueError) as e:
        live_quiz(missing, tmp_path)
    message = str(e.value)
    assert message.startswith(
        "inspect arm 0 'mine' (mockllm/small): model_args.custom_outputs: cannot import 'my_replies.script': "
        "no module 'my_replies' on the search path ("
    )
    assert sys.path[-1] in message and "PYTHONPATH" in message and "\n" not in message
    # On the search path now, but without that name, or failing on its own import: each said so.
    (tmp_path / "my_replies.py").write_text("def other():\n    pass\n")
    (tmp_path / "broken_replies.py").write_text("import no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"cannot import 'my_replies.script': 'my_replies' has no 'script'$"):
        live_quiz(missing, tmp_path)
    missing[0]["model_args"]["custom_outputs"]["_target_"] = "broken_replies.script"
    with pytest.raises(
        ValueError, match=r"importing 'broken_replies' failed: ModuleNotFoundError: No module named 'no_such_depen"
    ):
        live_quiz(missing, tmp_path)


def test_an_unimportable_solver_is_named_by_its_position_in_the_arm(tmp_path):
    arms = [{"model": "mockllm/small", "solver": ["generate", {"_target_": "nowhere_pkg.solver"}]}]
    with pytest.raises(
        ValueError, match=r"inspect arm 0 \(mockllm/small\): solver\[1\]: cannot import 'nowhere_pkg.solver': no mod"
    ):
        live_quiz(arms, tmp_path)


def test_scripted_replies_answer_inside_an_inspect_sample_only():
    model = get_model("mockllm/small", custom_outputs=scripted_replies(accuracy=1, input_tokens=1, output_tokens=1),
                      memoize=False)
    with pytest.raises(RuntimeError, match="mockllm was called outside an inspect sample"):
        asyncio.run(model.generate("What is the capital of France?", config=GenerateConfig(max_retries=0)))

