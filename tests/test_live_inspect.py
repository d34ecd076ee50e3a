"""The inspect_ai adapter end to end, offline: mockllm models with scripted outputs that carry their own usage."""

import asyncio
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from inspect_ai import Task
from inspect_ai._util.config import resolve_args
from inspect_ai.dataset import json_dataset
from inspect_ai.model import ChatMessageSystem, ModelCost, ModelOutput, ModelUsage
from inspect_ai.scorer import Score, Target, accuracy, match, scorer
from inspect_ai.solver import TaskState, generate

from gittinseval import evaluate
from gittinseval.live import NonRetryableError, dataset_digest
from gittinseval.live.inspect_task import InspectScorer, inspect_task, load_inspect_task
from gittinseval.live.prices import load_prices

EXAMPLES = Path(__file__).resolve().parent.parent / "gittinseval" / "live" / "examples"
BUNDLED_TASK = f"{EXAMPLES / 'inspect_arithmetic.py'}@arithmetic"
ANSWERS = {json.loads(line)["prompt"]: json.loads(line)["answer"] for line in open(EXAMPLES / "arithmetic.jsonl")}
QUESTIONS = list(ANSWERS)

# USD per 1M tokens; the usage of every scripted reply is fixed per model below.
PRICES = {
    "mockllm/strong": {"input": 1.0, "output": 4.0},
    "mockllm/weak": {"input": 0.5, "output": 2.0},
    "mockllm/careful": {"input": 3.0, "output": 9.0},
}
USAGE = {"mockllm/strong": (40, 6), "mockllm/weak": (25, 3), "mockllm/careful": (55, 12)}


def per_example_dollars(model):
    input_tokens, output_tokens = USAGE[model]
    return (input_tokens * PRICES[model]["input"] + output_tokens * PRICES[model]["output"]) / 1e6


def scripted(model, right):
    """mockllm outputs: the right answer when ``right(question index, messages, config)``, else a wrong one."""
    input_tokens, output_tokens = USAGE[model]

    def output(messages, tools, tool_choice, config):
        question = messages[-1].text
        answer = ANSWERS[question]
        reply = f"The answer is {answer}." if right(QUESTIONS.index(question), messages, config) else "It is 1000."
        result = ModelOutput.from_content(model=model, content=reply)
        # Usage given here: without it mockllm counts tokens with tiktoken, which downloads its encoding.
        result.usage = ModelUsage(
            input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens
        )
        return result

    return output


def has_system(messages, text):
    return any(isinstance(m, ChatMessageSystem) and m.text == text for m in messages)


# strong: right on 18 of 20 at temperature 0, always wrong otherwise; weak: right on 8 of 20;
# careful: right on every question, but only with its system message.
MODEL_ARGS = {
    "mockllm/strong": {"custom_outputs": scripted("mockllm/strong", lambda i, m, c: i % 10 < 9 and c.temperature == 0)},
    "mockllm/weak": {"custom_outputs": scripted("mockllm/weak", lambda i, m, c: i % 5 < 2)},
    "mockllm/careful": {"custom_outputs": scripted("mockllm/careful", lambda i, m, c: has_system(m, "Be careful."))},
}


def make_task(arms, tmp_path, **options):
    options.setdefault("tokens", {"input": 40, "output": 6})
    return inspect_task(
        BUNDLED_TASK, arms, PRICES, model_args=MODEL_ARGS, log_dir=tmp_path / "logs", binary=True, **options
    )


def score(task, arm, ids):
    batch = [task.examples[i] for i in ids]
    return asyncio.run(task.score_fn(task.arms[arm], batch))


def test_examples_are_the_task_samples(tmp_path):
    task = make_task([{"model": "mockllm/strong"}], tmp_path)
    assert task.name == "arithmetic" and len(task.examples) == 20
    assert task.examples[0] == {"id": 1, "input": QUESTIONS[0], "target": ANSWERS[QUESTIONS[0]], "choices": None}
    again = make_task([{"model": "mockllm/strong"}], tmp_path)
    assert dataset_digest(again.examples) == dataset_digest(task.examples)


def test_scores_follow_each_arm_settings_and_system_message(tmp_path):
    arms = [
        {"model": "mockllm/strong", "temperature": 0.0},
        {"model": "mockllm/strong", "temperature": 1.0},
        {"model": "mockllm/careful", "system": "Be careful."},
        {"model": "mockllm/careful"},
    ]
    task = make_task(arms, tmp_path)
    ids = list(range(20))
    expected_strong = [1.0 if i % 10 < 9 else 0.0 for i in ids]
    np.testing.assert_array_equal(score(task, 0, ids)[0], expected_strong)
    np.testing.assert_array_equal(score(task, 1, ids)[0], np.zeros(20))  # temperature reached the model
    np.testing.assert_array_equal(score(task, 2, ids)[0], np.ones(20))  # the system message too
    np.testing.assert_array_equal(score(task, 3, ids)[0], np.zeros(20))
    # A batch comes back in the order asked for.
    np.testing.assert_array_equal(score(task, 0, [19, 3, 9])[0], [0.0, 1.0, 0.0])


def test_charges_are_usage_times_prices(tmp_path):
    arms = [{"model": "mockllm/strong"}, {"model": "mockllm/weak"}, {"model": "mockllm/careful"}]
    task = make_task(arms, tmp_path)
    for arm, model in enumerate(PRICES):
        _, dollars = score(task, arm, [0, 1, 2, 5, 7])
        assert math.isclose(dollars, 5 * per_example_dollars(model), rel_tol=1e-12)
    # Expected costs from the token estimates at each arm's model price.
    expected = [(40 * PRICES[m]["input"] + 6 * PRICES[m]["output"]) / 1e6 for m in PRICES]
    np.testing.assert_allclose(task.costs, expected, rtol=1e-12)
    assert task.tokens_per_example == 46


def test_a_pilot_measures_the_expected_costs(tmp_path, caplog):
    arms = [{"model": "mockllm/strong"}, {"model": "mockllm/careful", "system": "Be careful."}]
    with caplog.at_level("INFO", logger="gittinseval.live.inspect_task"):
        task = make_task(arms, tmp_path, tokens=None, pilot=3)
    np.testing.assert_allclose(
        task.costs, [per_example_dollars("mockllm/strong"), per_example_dollars("mockllm/careful")], rtol=1e-12
    )
    assert task.tokens_per_example == (sum(USAGE["mockllm/strong"]) + sum(USAGE["mockllm/careful"])) / 2
    spent = 3 * (per_example_dollars("mockllm/strong") + per_example_dollars("mockllm/careful"))
    logged = re.search(r"pilot of 3 samples per arm: spent \$(\S+) outside the budget", caplog.text)
    assert logged and math.isclose(float(logged.group(1)), spent, rel_tol=1e-5)


def test_a_pilot_file_keeps_the_estimate_for_a_resume(tmp_path, monkeypatch):
    arms = [{"model": "mockllm/strong"}, {"model": "mockllm/weak"}]
    pilot_file = tmp_path / "pilot.json"
    first = make_task(arms, tmp_path, tokens=None, pilot=2, pilot_file=pilot_file)
    assert json.loads(pilot_file.read_text())["costs"] == first.costs

    def no_pilot(self, n_samples):
        raise AssertionError("the pilot ran again")

    monkeypatch.setattr(InspectScorer, "pilot", no_pilot)
    again = make_task(arms, tmp_path, tokens=None, pilot=2, pilot_file=pilot_file)
    assert (again.costs, again.tokens_per_example) == (first.costs, first.tokens_per_example)
    # Other arms, pilot samples or prices: measured again.
    for changed in ({"pilot": 3}, {"arms": arms[:1]}):
        options = {"tokens": None, "pilot": 2, "pilot_file": pilot_file, **changed}
        with pytest.raises(AssertionError, match="the pilot ran again"):
            make_task(options.pop("arms", arms), tmp_path, **options)


def test_a_rebuilt_task_resumes_its_store(tmp_path):
    arms = [{"model": "mockllm/strong"}, {"model": "mockllm/weak", "system": "Be brief."}]
    store = tmp_path / "run.sqlite"

    def run(budget):
        task = make_task(arms, tmp_path)  # built anew, as a resumed run builds it
        options = {"costs": task.costs, "tokens_per_example": task.tokens_per_example, "binary": True}
        return evaluate(task.arms, task.examples, task.score_fn, budget, store=store, progress=False, **options)

    first = run(budget=4e-4)
    second = run(budget=8e-4)
    assert first.error is None and second.error is None
    assert len(second.trace["step"]) > len(first.trace["step"])
    np.testing.assert_array_equal(second.trace["cost"][: len(first.trace["cost"])], first.trace["cost"])


def test_the_policy_finds_the_arm_whose_outputs_score_best(tmp_path):
    arms = [
        {"model": "mockllm/weak"},
        {"model": "mockllm/strong", "temperature": 0.0},
        {"model": "mockllm/strong", "temperature": 1.0},
    ]
    task = make_task(arms, tmp_path)
    told = []
    result = evaluate(
        task.arms,
        task.examples,
        task.score_fn,
        budget_usd=0.8 * len(task.examples) * sum(task.costs),
        costs=task.costs,
        tokens_per_example=task.tokens_per_example,
        binary=task.binary,
        concurrency=3,
        progress=False,
        on_tell=lambda request, scores, cost: told.append((request.arm, request.examples.copy(), scores, cost)),
    )
    assert result.error is None, result.error
    assert result.recommendation.arm == 1
    models = [arm["model"] for arm in arms]
    right = [lambda i: i % 5 < 2, lambda i: i % 10 < 9, lambda i: False]
    for arm, examples, scores, cost in told:
        # Every charge is the arm's usage at its prices ...
        assert math.isclose(cost, len(examples) * per_example_dollars(models[arm]), rel_tol=1e-12)
        # ... and every score the arm's scripted correctness on that example.
        np.testing.assert_array_equal(scores, [float(right[arm](i)) for i in examples])
    assert math.isclose(result.spent, sum(cost for *_, cost in told), rel_tol=1e-12)
    assert {arm for arm, *_ in told} == {0, 1, 2}


@scorer(metrics=[accuracy()])
def fixed_value(value):
    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=value)

    return score


def value_task(tmp_path, value, **scorers):
    path = tmp_path / "data.json"
    path.write_text(json.dumps([{"id": "a", "input": QUESTIONS[0], "target": "12"}]))
    return Task(dataset=json_dataset(str(path)), solver=generate(), scorer=scorers.get("scorers", fixed_value(value)))


@pytest.mark.parametrize(
    ("value", "expected"), [("C", 1.0), ("P", 0.5), ("I", 0.0), ("yes", 1.0), (0.25, 0.25), (True, 1.0)]
)
def test_scorer_values_become_unit_scores(tmp_path, value, expected):
    task = inspect_task(
        value_task(tmp_path, value), [{"model": "mockllm/strong"}], PRICES, tokens={"input": 1, "output": 1},
        model_args=MODEL_ARGS, log_dir=tmp_path / "logs",
    )
    assert score(task, 0, [0])[0].tolist() == [expected]


@pytest.mark.parametrize("value", ["maybe", 1.5, -1, {"a": 1}, [1, 0]])
def test_a_scorer_whose_values_are_not_scores_is_a_clear_error(tmp_path, value):
    task = inspect_task(
        value_task(tmp_path, value), [{"model": "mockllm/strong"}], PRICES, tokens={"input": 1, "output": 1},
        model_args=MODEL_ARGS, log_dir=tmp_path / "logs",
    )
    with pytest.raises(NonRetryableError, match=r"inspect scorer 'fixed_value' gave .* for sample 'a', which is not"):
        score(task, 0, [0])


def test_several_scorers_need_a_choice(tmp_path):
    both = value_task(tmp_path, None, scorers=[fixed_value("C"), match(numeric=True)])
    options = {"tokens": {"input": 1, "output": 1}, "model_args": MODEL_ARGS, "log_dir": tmp_path / "logs"}
    task = inspect_task(both, [{"model": "mockllm/strong"}], PRICES, **options)
    with pytest.raises(NonRetryableError, match=r"has scorers \['fixed_value', 'match'\]; choose one with scorer="):
        score(task, 0, [0])
    chosen = inspect_task(
        value_task(tmp_path, None, scorers=[fixed_value("I"), match(numeric=True)]),
        [{"model": "mockllm/strong"}], PRICES, scorer="fixed_value", **options,
    )
    assert score(chosen, 0, [0])[0].tolist() == [0.0]


def test_bad_configurations_are_refused_before_any_call(tmp_path):
    with pytest.raises(ValueError, match="no price for model 'mockllm/other'"):
        make_task([{"model": "mockllm/other"}], tmp_path)
    with pytest.raises(ValueError, match=r"arm 0 \(mockllm/strong\): bad generate settings: .*temprature"):
        make_task([{"model": "mockllm/strong", "temprature": 0}], tmp_path)
    with pytest.raises(ValueError, match="has no model"):
        make_task([{"temperature": 0}], tmp_path)
    with pytest.raises(FileNotFoundError, match="inspect task file nowhere.py does not exist"):
        load_inspect_task("nowhere.py@task")
    with pytest.raises(ValueError, match=r"tokens must be \{input: ..., output: ...\}"):
        make_task([{"model": "mockllm/strong"}], tmp_path, tokens={"input": 5})
    task = make_task([{"model": "mockllm/strong"}], tmp_path)
    with pytest.raises(NonRetryableError, match="is not one of this inspect task's arms"):
        asyncio.run(task.score_fn({"model": "mockllm/weak"}, task.examples[:1]))


def test_loading_a_task_by_spec_object_or_function():
    loaded = load_inspect_task(BUNDLED_TASK)
    assert isinstance(loaded, Task) and loaded.name == "arithmetic"
    assert load_inspect_task(loaded) is loaded
    assert load_inspect_task(lambda: loaded) is loaded


def test_concurrent_batches_run_together_in_one_eval(tmp_path, monkeypatch):
    arms = [{"model": "mockllm/strong"}, {"model": "mockllm/weak"}, {"model": "mockllm/careful"}]
    task = make_task(arms, tmp_path)
    groups = []
    original = InspectScorer.evaluate

    async def recording(self, jobs):
        groups.append(len(jobs))
        return await original(self, jobs)

    monkeypatch.setattr(InspectScorer, "evaluate", recording)

    async def three_at_once():
        return await asyncio.gather(*(task.score_fn(task.arms[k], task.examples[:4]) for k in range(3)))

    outcomes = asyncio.run(three_at_once())
    assert groups == [3]
    for arm, model in enumerate(PRICES):
        assert math.isclose(outcomes[arm][1], 4 * per_example_dollars(model), rel_tol=1e-12)


def test_the_bundled_prices_file_serves_inspect_ai_too():
    path = EXAMPLES / "prices.yaml"
    prices = load_prices(path)
    entries = resolve_args(str(path))  # inspect_ai's reader of --model-cost-config
    assert entries == yaml.safe_load(path.read_text())
    for model, entry in entries.items():
        cost = ModelCost(**entry)
        price = prices[model]
        assert (cost.input, cost.output, cost.input_cache_write, cost.input_cache_read) == (
            price.input, price.output, price.input_cache_write, price.input_cache_read,
        )
