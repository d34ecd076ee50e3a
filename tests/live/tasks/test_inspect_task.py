"""The inspect_ai adapter end to end, offline: mockllm models with scripted outputs that carry their own usage."""

import asyncio
import json
import logging
import math
import re
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import yaml
from inspect_ai import Task
from inspect_ai._util import logger as inspect_logging
from inspect_ai._util.config import resolve_args
from inspect_ai.dataset import json_dataset
from inspect_ai.model import ChatMessageSystem, GenerateConfig, ModelCost, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Score, Target, accuracy, match, scorer
from inspect_ai.solver import TaskState, generate

from gittinseval import evaluate
from gittinseval.live import NonRetryableError, dataset_digest
from gittinseval.live.labels import arm_labels
from gittinseval.live.tasks.inspect_loader import load_inspect_task
from gittinseval.live.tasks.inspect_task import InspectScorer, inspect_task
from gittinseval.live.tasks.prices import load_prices

EXAMPLES = Path(__file__).resolve().parents[3] / "gittinseval" / "live" / "examples"
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
    price = MORE_PRICES[model]
    return (input_tokens * price["input"] + output_tokens * price["output"]) / 1e6


def scripted(model, right):
    """mockllm outputs: the right answer when ``right(question index, messages, config)``, else a wrong one."""
    input_tokens, output_tokens = USAGE[model]

    def output(messages, tools, tool_choice, config):
        index = question_index(messages)
        reply = f"The answer is {ANSWERS[QUESTIONS[index]]}." if right(index, messages, config) else "It is 1000."
        result = ModelOutput.from_content(model=model, content=reply)
        # Usage given here: without it mockllm counts tokens with tiktoken, which downloads its encoding.
        result.usage = ModelUsage(
            input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens
        )
        return result

    return output


def question_index(messages):
    """The index of the one question the last message holds (a solver's template may wrap it)."""
    (index,) = [i for i, question in enumerate(QUESTIONS) if question in messages[-1].text]
    return index


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
        _, usage = score(task, arm, [0, 1, 2, 5, 7])
        assert math.isclose(usage.cost, 5 * per_example_dollars(model), rel_tol=1e-12)
        # Each sample's own bill: its reply's scripted usage at the model's prices.
        assert usage.tokens_in == (USAGE[model][0],) * 5 and usage.tokens_out == (USAGE[model][1],) * 5
        np.testing.assert_allclose(usage.dollars, [per_example_dollars(model)] * 5, rtol=1e-12)
    # Expected costs from the token estimates at each arm's model price.
    expected = [(40 * PRICES[m]["input"] + 6 * PRICES[m]["output"]) / 1e6 for m in PRICES]
    np.testing.assert_allclose(task.costs, expected, rtol=1e-12)
    assert task.tokens_per_example == 46


def test_a_pilot_measures_the_expected_costs(tmp_path, caplog):
    arms = [{"model": "mockllm/strong"}, {"model": "mockllm/careful", "system": "Be careful."}]
    with caplog.at_level("INFO", logger="gittinseval.live.tasks.inspect_task"):
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


def value_live_task(tmp_path, value):
    """A one-arm live task on :func:`value_task`."""
    arms = [{"model": "mockllm/strong"}]
    tokens = {"input": 1, "output": 1}
    return inspect_task(
        value_task(tmp_path, value), arms, PRICES, tokens=tokens, model_args=MODEL_ARGS, log_dir=tmp_path / "logs"
    )


@pytest.mark.parametrize(
    ("value", "expected"), [("C", 1.0), ("P", 0.5), ("I", 0.0), ("yes", 1.0), (0.25, 0.25), (True, 1.0)]
)
def test_scorer_values_become_unit_scores(tmp_path, value, expected):
    task = value_live_task(tmp_path, value)
    assert score(task, 0, [0])[0].tolist() == [expected]


@pytest.mark.parametrize("value", ["maybe", 1.5, -1, {"a": 1}, [1, 0]])
def test_a_scorer_whose_values_are_not_scores_is_a_clear_error(tmp_path, value):
    task = value_live_task(tmp_path, value)
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
        [{"model": "mockllm/strong"}],
        PRICES,
        scorer="fixed_value",
        **options,
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
        assert math.isclose(outcomes[arm][1].cost, 4 * per_example_dollars(model), rel_tol=1e-12)


def test_the_bundled_prices_file_serves_inspect_ai_too():
    path = EXAMPLES / "prices.yaml"
    prices = load_prices(path)
    entries = resolve_args(str(path))  # inspect_ai's reader of --model-cost-config
    assert entries == yaml.safe_load(path.read_text())
    for model, entry in entries.items():
        cost = ModelCost(**entry)
        price = prices[model]
        assert (cost.input, cost.output, cost.input_cache_write, cost.input_cache_read) == (
            price.input,
            price.output,
            price.input_cache_write,
            price.input_cache_read,
        )


# Models of the tests below, beside those of PRICES: `broken` fails on the questions of odd index, after
# recording the call; `prompted` is right when the question comes after "Careful now." (a solver's template).
MORE_PRICES = {
    **PRICES,
    "mockllm/broken": {"input": 2.0, "output": 5.0},
    "mockllm/prompted": {"input": 1.0, "output": 1.0},
}
USAGE.update({"mockllm/broken": (30, 4), "mockllm/prompted": (20, 2)})


def more_model_args(calls):
    """MODEL_ARGS with `broken` (each question it is asked recorded in ``calls``) and `prompted`."""
    answer = scripted("mockllm/broken", lambda i, m, c: True)

    def broken(messages, tools, tool_choice, config):
        calls.append(question_index(messages))
        if calls[-1] % 2:
            raise RuntimeError(f"the provider failed on question {calls[-1]}")
        return answer(messages, tools, tool_choice, config)

    prompted = scripted("mockllm/prompted", lambda i, m, c: m[-1].text.startswith("Careful now."))
    more = {"mockllm/broken": {"custom_outputs": broken}, "mockllm/prompted": {"custom_outputs": prompted}}
    return {**MODEL_ARGS, **more}


def more_task(arms, tmp_path, calls=None, **options):
    options.setdefault("tokens", {"input": 40, "output": 6})
    return inspect_task(
        BUNDLED_TASK,
        arms,
        MORE_PRICES,
        model_args=more_model_args([] if calls is None else calls),
        log_dir=tmp_path / "logs",
        binary=True,
        **options,
    )


def test_a_failed_eval_keeps_what_finished_and_charges_the_usage_inspect_reports(tmp_path):
    calls = []
    task = more_task([{"model": "mockllm/broken"}, {"model": "mockllm/strong"}], tmp_path, calls)
    failure = r"inspect eval of arm 0 \(mockllm/broken\) ended error: sample 2 failed: RuntimeError"
    with pytest.raises(NonRetryableError, match=failure) as failed:
        score(task, 0, [0, 1, 2, 3, 4, 5])
    # Samples 2, 4 and 6 (questions 1, 3, 5) failed; the other three were scored and their usage is charged.
    assert failed.value.scores == [1.0, None, 1.0, None, 1.0, None]
    assert math.isclose(failed.value.cost, 3 * per_example_dollars("mockllm/broken"), rel_tol=1e-12)
    assert failed.value.uncosted == 3 and failed.value.example == 1
    # The samples that finished keep their bills; those that failed logged none, and their tokens are unknown.
    billed = per_example_dollars("mockllm/broken")
    np.testing.assert_allclose(failed.value.usage.dollars, [billed, 0, billed, 0, billed, 0], rtol=1e-12)
    assert failed.value.usage.tokens_out == (4, None, 4, None, 4, None)
    assert sorted(calls) == [0, 1, 2, 3, 4, 5]  # each sample asked once: inspect ran no failed sample again


def test_a_failed_batch_stops_the_run_at_once_charged_its_usage_and_its_unfinished_samples(tmp_path):
    """The driver never sends an inspect batch again (max_retries=3 is inspect's, per request): the failed
    call is charged what inspect reported plus one expected example per sample that did not finish."""
    calls = []
    task = more_task([{"model": "mockllm/strong"}, {"model": "mockllm/broken"}], tmp_path, calls)
    store = tmp_path / "run.sqlite"
    result = evaluate(
        task.arms,
        task.examples,
        task.score_fn,
        budget_usd=1.0,
        costs=task.costs,
        binary=True,
        concurrency=2,
        tokens_per_example=task.tokens_per_example,
        store=store,
        max_retries=3,
        retry_backoff=0.001,
        progress=False,
    )
    assert result.stop_reason == "error" and isinstance(result.error, NonRetryableError)
    assert result.attempts["failed"] == 1
    with sqlite3.connect(store) as db:
        rows = db.execute(
            "SELECT requests.arm, attempts.examples, attempts.charged, attempts.outcome "
            "FROM attempts JOIN requests ON attempts.request = requests.id"
        ).fetchall()
        kept = dict(db.execute("SELECT example, score FROM cells WHERE arm = 1").fetchall())
    ((examples, charged),) = [(json.loads(e), c) for arm, e, c, outcome in rows if outcome == "failed"]
    assert sorted(calls) == sorted(examples)  # one call per sample: no retry by inspect or by the driver
    bad = [e for e in examples if e % 2]
    expected = (len(examples) - len(bad)) * per_example_dollars("mockllm/broken") + len(bad) * task.costs[1]
    assert bad and math.isclose(charged, expected, rel_tol=1e-12)
    assert kept == {e: 1.0 for e in examples if e % 2 == 0}  # the scores of the samples that finished
    assert math.isclose(result.spent, sum(c for *_, c, _ in rows), rel_tol=1e-12)


def test_a_failed_pilot_logs_what_it_spent_and_stops(tmp_path, caplog):
    arms = [{"model": "mockllm/strong"}, {"model": "mockllm/broken"}]
    with caplog.at_level("ERROR", logger="gittinseval.live.tasks.inspect_task"):
        with pytest.raises(NonRetryableError, match=r"arm 1 \(mockllm/broken\) ended error"):
            more_task(arms, tmp_path, tokens=None, pilot=2)
    # Questions 0 and 1: both answered by strong, only question 0 by broken.
    spent = 2 * per_example_dollars("mockllm/strong") + per_example_dollars("mockllm/broken")
    logged = re.search(r"pilot of 2 samples per arm failed after spending \$(\S+) outside the budget", caplog.text)
    assert logged and math.isclose(float(logged.group(1)), spent, rel_tol=1e-5)


def test_retries_are_inspect_s_per_request_with_the_arm_or_task_setting_first(tmp_path):
    seen = {}

    def recording(model):
        answer = scripted(model, lambda i, m, c: True)

        def output(messages, tools, tool_choice, config):
            seen[model] = config.max_retries
            return answer(messages, tools, tool_choice, config)

        return {"custom_outputs": output}

    models = ["mockllm/strong", "mockllm/weak", "mockllm/careful"]
    arms = [{"model": "mockllm/strong"}, {"model": "mockllm/weak", "max_retries": 0}, {"model": "mockllm/careful"}]
    args = {model: recording(model) for model in models}

    def max_retries_seen(task_config=None, **options):
        seen.clear()
        task = load_inspect_task(BUNDLED_TASK)
        if task_config is not None:
            task.config = task_config
        built = inspect_task(
            task, arms, PRICES, tokens={"input": 1, "output": 1}, model_args=args, log_dir=tmp_path / "logs", **options
        )
        for arm in range(3):
            score(built, arm, [0])
        return [seen[model] for model in models]

    assert max_retries_seen() == [3, 0, 3]
    assert max_retries_seen(max_retries=None) == [None, 0, None]  # inspect's own default: until `timeout`
    assert max_retries_seen(GenerateConfig(max_retries=5)) == [5, 0, 5]


def test_an_arm_solver_replaces_the_task_solver(tmp_path):
    careful = [{"_target_": "inspect_ai.solver.prompt_template", "template": "Careful now. {prompt}"}, "generate"]
    arms = [
        {"model": "mockllm/prompted", "solver": careful},
        {"model": "mockllm/prompted"},
        {"model": "mockllm/prompted", "solver": "generate"},
        {"model": "mockllm/careful", "solver": careful, "system": "Be careful."},
    ]
    task = more_task(arms, tmp_path)
    ids = [0, 4, 9]
    assert score(task, 0, ids)[0].tolist() == [1.0, 1.0, 1.0]  # the template reached the model
    assert score(task, 1, ids)[0].tolist() == [0.0, 0.0, 0.0]  # the task's own solver: generate
    assert score(task, 2, ids)[0].tolist() == [0.0, 0.0, 0.0]
    assert score(task, 3, ids)[0].tolist() == [1.0, 1.0, 1.0]  # the system message comes before the arm's solver
    # The solver is part of the arm: its label and its name in the store.
    assert arm_labels(task.arms) == [
        "prompted nosys solver1",
        "prompted nosys",
        "prompted nosys solver=generate",
        "careful sys1 solver1",
    ]


@pytest.mark.parametrize(
    ("solver", "error"),
    [
        ("no_such_solver", r"inspect arm 0 \(mockllm/strong\): solver: no inspect solver 'no_such_solver'"),
        ([{"_target_": "builtins.dict"}], r"solver\[0\]: builtins.dict built dict, not an inspect solver"),
        (generate(), r"solver must be an inspect solver's registry name, a \{_target_: ...\} mapping or a list"),
        ({"template": "{prompt}"}, r"solver must be .* got \{'template': '\{prompt\}'\}"),
    ],
)
def test_a_bad_arm_solver_is_refused_before_any_call(tmp_path, solver, error):
    with pytest.raises(ValueError, match=error):
        make_task([{"model": "mockllm/strong", "solver": solver}], tmp_path)


def test_a_dry_run_builds_no_model_and_a_model_inspect_cannot_build_fails_free(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    task = inspect_task(
        BUNDLED_TASK,
        [{"model": "openai/gpt-4o-mini"}],
        load_prices(EXAMPLES / "prices.yaml"),
        tokens={"input": 40, "output": 8},
        log_dir=tmp_path / "logs",
    )
    with pytest.raises(
        NonRetryableError, match="inspect could not build model 'openai/gpt-4o-mini': .*OPENAI_API_KEY"
    ) as failed:
        score(task, 0, [0])
    assert failed.value.cost == 0.0 and failed.value.uncosted == 0 and "\n" not in str(failed.value)


def test_inspect_leaves_the_root_logger_as_it_was(tmp_path, monkeypatch):
    """inspect's first eval in a process sets up its logging; the run's own info lines must still show."""
    monkeypatch.setitem(inspect_logging._logHandler, "handler", None)  # as in a fresh process
    root = logging.getLogger()
    monkeypatch.setattr(root, "level", logging.INFO)
    handlers = list(root.handlers)
    score(make_task([{"model": "mockllm/strong"}], tmp_path), 0, [0])
    assert root.level == logging.INFO and root.handlers == handlers


def test_an_edited_task_file_changes_the_store_identity(tmp_path):
    """A resumed store must not mix scores of two scorers: the task file's text is part of its identity."""
    folder = tmp_path / "task"
    folder.mkdir()
    for name in ("inspect_arithmetic.py", "arithmetic.jsonl"):
        (folder / name).write_text((EXAMPLES / name).read_text())
    spec = f"{folder / 'inspect_arithmetic.py'}@arithmetic"

    def identity():
        arms = [{"model": "mockllm/strong"}]
        task = inspect_task(
            spec, arms, PRICES, model_args=MODEL_ARGS, log_dir=tmp_path / "logs", tokens={"input": 1, "output": 1}
        )
        return task.score_fn.identity()

    before = identity()
    assert before["task_scorers"] == ["inspect_ai/match"] and before["source"]["spec"] == spec
    text = (folder / "inspect_arithmetic.py").read_text()
    assert "match(numeric=True)" in text
    (folder / "inspect_arithmetic.py").write_text(text.replace("match(numeric=True)", "match()"))
    after = identity()
    assert after["source"]["file_sha256"] != before["source"]["file_sha256"]
    assert {k: v for k, v in after.items() if k != "source"} == {k: v for k, v in before.items() if k != "source"}


def test_a_grader_model_without_a_price_keeps_the_scores_and_charges_the_batch_as_expected(tmp_path):
    """The grader's usage is known only after the eval was paid: the scores stand, the run stops on one line."""
    grader_usage = ModelUsage(input_tokens=30, output_tokens=2, total_tokens=32)

    @scorer(metrics=[accuracy()])
    def graded():
        async def score(state: TaskState, target: Target) -> Score:
            output = ModelOutput.from_content(model="mockllm/grader", content="GRADE: C")
            output.usage = grader_usage
            grader = get_model("mockllm/grader", custom_outputs=[output], memoize=False)
            await grader.generate("Is it right?")
            return Score(value=1.0)

        return score

    samples = load_inspect_task(BUNDLED_TASK).dataset
    task = inspect_task(
        Task(dataset=samples, solver=generate(), scorer=graded(), name="graded"),
        [{"model": "mockllm/strong"}],
        PRICES,
        model_args=MODEL_ARGS,
        log_dir=tmp_path / "logs",
        tokens={"input": 40, "output": 6},
    )
    with pytest.raises(
        NonRetryableError, match=r"no price for the usage of model 'mockllm/grader' \(90 input, 6 output"
    ) as failed:
        score(task, 0, [0, 1, 2])
    assert failed.value.scores == [1.0, 1.0, 1.0] and failed.value.uncosted == 3
    strong = (USAGE["mockllm/strong"][0] * 1.0 + USAGE["mockllm/strong"][1] * 4.0) / 1e6
    assert math.isclose(failed.value.cost, 3 * strong, rel_tol=1e-12)


def test_eval_options_that_drop_the_samples_are_refused(tmp_path):
    with pytest.raises(ValueError, match="log_samples=false"):
        make_task([{"model": "mockllm/strong"}], tmp_path, eval_options={"log_samples": False})


# Scores that differ by epoch: sample 1 scores 1, 0 and 0.5 in its three epochs, and so on.
EPOCH_SCORES = {1: [1.0, 0.0, 0.5], 2: [1.0, 1.0, 0.0], 3: [0.0, 0.0, 0.25]}


@scorer(metrics=[accuracy()])
def by_epoch():
    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=EPOCH_SCORES[state.sample_id][state.epoch - 1])

    return score


def test_a_sample_scored_over_several_epochs_gets_the_mean_over_its_epochs_and_each_epoch_is_charged(tmp_path):
    samples = load_inspect_task(BUNDLED_TASK).dataset[:3]
    epochs = Task(dataset=samples, solver=generate(), scorer=by_epoch(), epochs=3, name="epochs")
    task = inspect_task(
        epochs, [{"model": "mockllm/strong"}], PRICES, model_args=MODEL_ARGS, log_dir=tmp_path / "logs",
        tokens={"input": 40, "output": 6},
    )
    scores, usage = score(task, 0, [2, 0, 1])
    np.testing.assert_allclose(scores, [np.mean(EPOCH_SCORES[3]), np.mean(EPOCH_SCORES[1]), np.mean(EPOCH_SCORES[2])])
    assert math.isclose(usage.cost, 3 * 3 * per_example_dollars("mockllm/strong"), rel_tol=1e-12)
    assert usage.tokens_out == (3 * USAGE["mockllm/strong"][1],) * 3  # a sample's bill sums its epochs


CACHED_USAGE = {
    "input_tokens": 40, "output_tokens": 6, "input_tokens_cache_write": 200, "input_tokens_cache_read": 1000
}


def cached_arm(model):
    script = {"_target_": "gittinseval.live.tasks.mockllm.scripted_replies", "accuracy": 1.0, **CACHED_USAGE}
    return {"model": model, "model_args": {"custom_outputs": script}}


def test_cache_tokens_are_charged_at_the_prices_file_cache_rates(tmp_path):
    """inspect's input_tokens exclude the cached ones, which it reports as input_tokens_cache_write/_read:
    each count at its own price of the file (four prices that differ, so that no two can be swapped)."""
    prices = tmp_path / "prices.yaml"
    prices.write_text("mockllm/cached: {input: 1.0, output: 4.0, input_cache_write: 3.0, input_cache_read: 0.5}\n")
    task = inspect_task(
        BUNDLED_TASK, [cached_arm("mockllm/cached")], prices, tokens={"input": 1, "output": 1},
        log_dir=tmp_path / "logs",
    )
    (outcome,) = asyncio.run(task.score_fn.evaluate([(0, [1, 2, 3, 4])]))
    per_reply = (40 * 1.0 + 6 * 4.0 + 200 * 3.0 + 1000 * 0.5) / 1e6
    assert math.isclose(outcome.dollars, 4 * per_reply, rel_tol=1e-12)
    assert outcome.tokens == 4 * sum(CACHED_USAGE.values())
    assert outcome.scores.tolist() == [1.0] * 4
    # mockllm's scripted usage per sample: every token read is an input token, cached or not.
    read = sum(CACHED_USAGE[key] for key in ("input_tokens", "input_tokens_cache_write", "input_tokens_cache_read"))
    assert outcome.usage.tokens_in == (read,) * 4 and outcome.usage.tokens_out == (6,) * 4
    np.testing.assert_allclose(outcome.usage.dollars, [per_reply] * 4, rtol=1e-12)


def test_cache_tokens_without_a_cache_price_stop_the_run_naming_the_model_and_the_prices_file(tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("mockllm/uncached: {input: 1.0, output: 4.0}\n")
    task = inspect_task(
        BUNDLED_TASK, [cached_arm("mockllm/uncached")], prices, tokens={"input": 1, "output": 1},
        log_dir=tmp_path / "logs",
    )
    with pytest.raises(NonRetryableError) as failed:
        score(task, 0, [0, 1])
    assert str(failed.value) == (
        "arm 0 (mockllm/uncached): no price for the usage of model 'mockllm/uncached' (80 input, 12 output tokens: "
        f"400 cache tokens were used but the price has no input_cache_write); add its price to {prices}"
    )
    assert failed.value.scores == [1.0, 1.0] and failed.value.uncosted == 2


def test_a_pilot_file_that_is_not_a_pilot_estimate_is_named(tmp_path):
    pilot_file = tmp_path / "pilot.json"
    pilot_file.write_text("{not json")
    with pytest.raises(ValueError, match=rf"pilot_file {pilot_file}, line 1, column 2: not JSON .*delete it to run"):
        make_task([{"model": "mockllm/strong"}], tmp_path, tokens=None, pilot_file=pilot_file)
    pilot_file.write_text("[1, 2]")
    with pytest.raises(ValueError, match=rf"pilot_file {pilot_file} holds no pilot estimate; delete it"):
        make_task([{"model": "mockllm/strong"}], tmp_path, tokens=None, pilot_file=pilot_file)
