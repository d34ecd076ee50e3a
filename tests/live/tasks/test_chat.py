"""The chat adapter (gittinseval.live.tasks.chat): the OpenAI-compatible chat scorer, its costs and its failures.

The chat scorer is tested against a local HTTP server on 127.0.0.1 started by the test.
"""

import asyncio
import json
import subprocess
import sys

import numpy as np
import pytest

from gittinseval import GittinsPolicy
from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.live import (
    NonRetryableError,
    OpenAIChatScorer,
    TransientError,
    evaluate,
)
from gittinseval.live.fake_server import COMPLETION_TOKENS, PRICES, FakeChatServer
from gittinseval.live.tasks.chat import NO_KEY, chat_task, expected_chat_costs
from gittinseval.live.tasks.graders import ContainsAnswer, LastNumber
from gittinseval.live.tasks.scoring import read_jsonl


@pytest.fixture
def examples():
    return read_jsonl()


@pytest.fixture
def server(examples):
    fake = FakeChatServer({e["prompt"]: e["answer"] for e in examples})
    yield fake
    fake.close()


ARMS = [
    {"model": "bad-model", "temperature": 0.0},
    {"model": "good-model", "temperature": 0.0, "system": "You are a calculator."},
]


def test_chat_scorer_scores_and_costs_from_token_usage(server, examples, monkeypatch):
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    scorer = OpenAIChatScorer(server.base_url, PRICES, api_key_env="FAKE_KEY", timeout=5)
    scores, usage = asyncio.run(scorer(ARMS[1], examples[:3]))
    np.testing.assert_array_equal(scores, [1.0, 1.0, 1.0])
    assert usage.cost == pytest.approx(server.cost_of_calls())
    # Each example's bill: its own prompt's tokens at the model's prices.
    prompt_tokens = {call[0]["messages"][1]["content"]: call[2] for call in server.calls}
    assert list(usage.tokens_in) == [prompt_tokens[e["prompt"]] for e in examples[:3]]
    assert list(usage.tokens_out) == [COMPLETION_TOKENS] * 3
    assert list(usage.dollars) == pytest.approx([(t * 2.0 + COMPLETION_TOKENS * 8.0) / 1e6 for t in usage.tokens_in])
    body, auth, _ = server.calls[0]
    assert auth == "Bearer sk-test" and body["model"] == "good-model" and body["temperature"] == 0.0
    assert body["messages"][0] == {"role": "system", "content": "You are a calculator."}
    assert {call[0]["messages"][1]["content"] for call in server.calls} == {e["prompt"] for e in examples[:3]}
    scores, _ = asyncio.run(scorer(ARMS[0], examples[:2]))
    np.testing.assert_array_equal(scores, [0.0, 0.0])


def test_a_server_that_needs_no_key_is_sent_the_placeholder(server, examples):
    asyncio.run(OpenAIChatScorer(server.base_url, PRICES, api_key_env=None, timeout=5)(ARMS[1], examples[:1]))
    assert server.calls[0][1] == f"Bearer {NO_KEY}" == "Bearer EMPTY"


@pytest.mark.parametrize(
    ("action", "kind", "message", "uncosted"),
    [
        (503, TransientError, "HTTP 503", 0),
        (429, TransientError, "HTTP 429", 0),
        (401, NonRetryableError, "HTTP 401", 0),
        (400, NonRetryableError, "HTTP 400", 0),
        ("no_usage", NonRetryableError, "the reply has no usage.prompt_tokens", 1),
        ("negative_usage", NonRetryableError, r"a negative or non-integer \(-\d+\) usage.prompt_tokens", 1),
        ("malformed", NonRetryableError, "unparseable reply", 1),
        ("excess_reasoning", NonRetryableError, r"reasoning_tokens 4, not a count within its 3 completion tokens", 1),
    ],
)
def test_a_failed_call_is_classified_and_the_rest_of_its_batch_kept(server, examples, action, kind, message, uncosted):
    """One of three calls fails: the failure says how, and carries the other two scores and their cost."""
    scorer = OpenAIChatScorer(server.base_url, PRICES, api_key_env=None, timeout=5)
    server.plan = ["ok", action, "ok"]
    with pytest.raises(kind, match=f"/chat/completions for model 'good-model': .*{message}") as info:
        asyncio.run(scorer(ARMS[1], examples[:3]))
    failure = info.value
    assert sorted(failure.scores, key=lambda s: s is None) == [1.0, 1.0, None]
    assert failure.scores[failure.example] is None
    ok_cost = sum((tokens * 2.0 + COMPLETION_TOKENS * 8.0) / 1e6 for _, _, tokens in server.calls)
    assert len(server.calls) == 2 and failure.cost == pytest.approx(ok_cost) and failure.uncosted == uncosted
    # The failed example billed nothing reported: no tokens where its bill is unknown, else none at all.
    unbilled = None if uncosted else 0
    assert failure.usage.dollars[failure.example] == 0
    assert (failure.usage.tokens_in[failure.example], failure.usage.tokens_out[failure.example]) == (unbilled, unbilled)
    assert sorted(
        failure.usage.tokens_in[: failure.example] + failure.usage.tokens_in[failure.example + 1 :]
    ) == sorted(tokens for _, _, tokens in server.calls)


def test_a_refused_connection_costs_nothing_and_a_timeout_may_have(examples):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    with pytest.raises(TransientError, match="Connection error") as refused:
        closed = OpenAIChatScorer(f"http://127.0.0.1:{closed_port}/v1", PRICES, api_key_env=None, timeout=5)
        asyncio.run(closed(ARMS[1], examples[:2]))
    assert refused.value.cost == 0 and refused.value.uncosted == 0 and refused.value.scores == [None, None]
    assert refused.value.usage.tokens_in == (0, 0)  # never sent: nothing billed
    slow = FakeChatServer({e["prompt"]: e["answer"] for e in examples}, latency=2.0)
    try:
        with pytest.raises(TransientError, match="timed out") as timed_out:
            asyncio.run(OpenAIChatScorer(slow.base_url, PRICES, api_key_env=None, timeout=0.2)(ARMS[1], examples[:2]))
    finally:
        slow.close()
    assert timed_out.value.cost == 0 and timed_out.value.uncosted == 2
    assert timed_out.value.usage.tokens_in == (None, None)  # sent: billed or not, nobody knows


def test_bad_examples_and_unpriced_models_are_refused_before_any_call(server, examples):
    scorer = OpenAIChatScorer(server.base_url, PRICES, api_key_env=None, timeout=5)
    with pytest.raises(NonRetryableError, match="needs field 'answer', missing from example") as info:
        asyncio.run(scorer(ARMS[1], [examples[0], {"prompt": "2 + 2?"}]))
    assert info.value.example == 1 and info.value.cost == 0
    with pytest.raises(NonRetryableError, match="no price for model 'other'"):
        asyncio.run(scorer({"model": "other"}, examples[:1]))
    assert server.received == 0
    with pytest.raises(ValueError, match="model 'm': missing output"):
        OpenAIChatScorer(server.base_url, {"m": {"input": 1.0}})


def test_live_run_against_the_chat_endpoint_pays_what_the_usage_says(server, examples):
    server.plan = [503] * 8  # an outage: every call of the first two batches fails, and is retried
    costs = expected_chat_costs(ARMS, PRICES, prompt_tokens=15, completion_tokens=COMPLETION_TOKENS)
    result = evaluate(
        ARMS,
        examples,
        OpenAIChatScorer(server.base_url, PRICES, api_key_env=None, timeout=5),
        budget_usd=1.0,
        costs=costs,
        policy=GittinsPolicy(4),
        concurrency=2,
        retry_backoff=0.001,
        progress=False,
    )
    assert result.stop_reason == "exhausted" and result.error is None
    assert len(server.calls) == 2 * len(examples)
    assert result.spent == pytest.approx(server.cost_of_calls())
    assert result.recommendation.name == json.dumps(ARMS[1], sort_keys=True)
    assert result.recommendation.mean == 1.0


@pytest.mark.parametrize("action", [400, "no_usage", "malformed"])
def test_a_deterministic_failure_is_sent_once_and_stops_the_run(server, examples, action):
    server.plan = [action]
    result = evaluate(
        ARMS,
        examples,
        OpenAIChatScorer(server.base_url, PRICES, api_key_env=None, timeout=5),
        budget_usd=1.0,
        costs=[1e-5, 1e-5],
        policy=GittinsPolicy(1),
        max_retries=3,
        retry_backoff=0.001,
        progress=False,
    )
    assert server.received == 1 and result.stop_reason == "error" and isinstance(result.error, NonRetryableError)


def grader_failing_on(prompt, failure):
    """A grader that scores 1 but fails on the example whose prompt is ``prompt``: it raises, or returns a non-score."""

    def grader(reply, example):
        if example["prompt"] != prompt:
            return 1.0
        return 1 / 0 if failure == "raises" else "maybe"

    return grader


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        (
            "raises",
            r"grader tests.live.tasks.test_chat.grader_failing_on.<locals>.grader raised ZeroDivisionError: "
            r"division by zero at .*test_chat.py, line \d+, on the reply '72.' to example \{\"answer\": ",
        ),
        ("not_a_score", r"grader .*<locals>.grader returned 'maybe' for the reply '72.' to example .*must return a n"),
    ],
)
def test_a_billed_reply_that_cannot_be_graded_is_charged(server, examples, failure, message):
    """The reply was paid for whatever its grader did: its cost is charged with the others', and the failure is one
    line naming the grader (where it raised), the reply and the example (a whole run's spend against the server's
    bill: tests/live/test_ledger.py)."""
    grader = grader_failing_on(examples[1]["prompt"], failure)
    scorer = OpenAIChatScorer(server.base_url, PRICES, api_key_env=None, timeout=5, grader=grader)
    with pytest.raises(NonRetryableError, match=f"grading the reply: {message}") as info:
        asyncio.run(scorer(ARMS[1], examples[:3]))
    assert len(server.calls) == 3 and info.value.scores == [1.0, None, 1.0] and info.value.example == 1
    assert info.value.cost == pytest.approx(server.cost_of_calls(), rel=1e-12) and info.value.uncosted == 0
    # The reply that could not be graded keeps its bill, tokens included.
    prompt_tokens = {call[0]["messages"][1]["content"]: call[2] for call in server.calls}
    assert info.value.usage.tokens_in[1] == prompt_tokens[examples[1]["prompt"]] and info.value.usage.dollars[1] > 0
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("grader", "warned"), [(None, True), (ContainsAnswer(), False), (LastNumber(), False)])
def test_a_grading_that_never_matches_is_a_warning_you_cannot_miss(examples, capsys, caplog, grader, warned):
    """Replies like "The answer is 12." under first-word grading: every score is 0, and the run says so."""
    server = FakeChatServer({e["prompt"]: e["answer"] for e in examples}, reply="The answer is {answer}.")
    try:
        result = evaluate(
            ARMS,
            examples,
            OpenAIChatScorer(server.base_url, PRICES, api_key_env=None, timeout=5, grader=grader),
            budget_usd=1.0,
            costs=[1e-5, 1e-5],
            policy=GittinsPolicy(4),
            progress=True,
        )
    finally:
        server.close()
    run_wide = f"every one of the {2 * len(examples)} scores so far is 0: check the grading against the replies"
    # With a grading that matches, only the arms are named: one model never answers, the other always right.
    per_arm = [
        f"1 arm ({arm}) scored {arm} on every one of 20 or more examples: check the grading against the replies"
        for arm in (0, 1)
    ]
    assert result.summary()["warnings"] == ([run_wide] if warned else per_arm)
    assert ("WARNING: every one of the" in capsys.readouterr().err) == warned
    logged = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert any(line.endswith("scores so far is 0: check the grading against the replies") for line in logged) == warned
    assert any(line.startswith("arm 0 (") and "scored 0 on each of its" in line for line in logged) != warned


def test_expected_chat_costs_and_grading():
    costs = expected_chat_costs(ARMS, PRICES, prompt_tokens=100, completion_tokens=10)
    assert costs == pytest.approx([(100 * 0.5 + 10 * 1.0) / 1e6, (100 * 2.0 + 10 * 8.0) / 1e6])
    with pytest.raises(ValueError, match="no price for model 'x'"):
        expected_chat_costs([{"model": "x"}], PRICES)


def test_cli_chat_example_runs_against_a_local_endpoint(examples, tmp_path):
    """``gittinseval-live task=openai_chat`` end to end, only the base URL overridden (and no key needed)."""
    from omegaconf import OmegaConf

    prices = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "task" / "openai_chat.yaml").score_fn.prices)
    fake = FakeChatServer({e["prompt"]: e["answer"] for e in examples}, good_model="gpt-4o", prices=prices)
    try:
        command = [
            sys.executable,
            "-m",
            "gittinseval.cli.live",
            "task=openai_chat",
            f"task.score_fn.base_url={fake.base_url}",
            "task.score_fn.api_key_env=null",
            "budget_usd=1.0",
            "progress=false",
            "policy.batch_size=5",
            f"store={tmp_path / 'chat.sqlite'}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ]
        subprocess.run(command, check=True, timeout=120, capture_output=True)
    finally:
        fake.close()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stop_reason"] == "exhausted" and summary["n_cells"] == 3 * len(examples)
    assert json.loads(summary["recommended_name"])["model"] == "gpt-4o"
    assert summary["spent"] == pytest.approx(fake.cost_of_calls())


def test_the_prompt_template_fills_fields_and_the_grader_scores_the_reply(examples):
    """A template with {field} placeholders, a per-arm system prompt and a named label never sent; LastNumber
    grades "The answer is 12." as 12."""
    template = "Question: {prompt}\nEnd with the number."
    rendered = {template.format(prompt=e["prompt"]): e["answer"] for e in examples}
    server = FakeChatServer(rendered, reply="The answer is {answer}.")
    arm = {"name": "calc", "model": "good-model", "system": "You are a calculator.", "temperature": 0.0}
    try:
        scorer = OpenAIChatScorer(
            server.base_url, PRICES, api_key_env=None, timeout=5, grader=LastNumber(), prompt=template
        )
        scores, _ = asyncio.run(scorer(arm, examples[:4]))
        np.testing.assert_array_equal(scores, [1.0] * 4)
        body = server.calls[0][0]
        assert "name" not in body and body["messages"][0] == {"role": "system", "content": "You are a calculator."}
        assert {call[0]["messages"][1]["content"] for call in server.calls} == set(list(rendered)[:4])
        with pytest.raises(NonRetryableError, match="needs field 'question', missing from example"):
            unreadable = OpenAIChatScorer(server.base_url, PRICES, api_key_env=None, prompt="{question}")
            asyncio.run(unreadable(arm, examples[:1]))
        assert server.received == 4  # the example without the field was never sent
    finally:
        server.close()


def test_the_scorer_identity_names_prices_grader_and_template(tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("openai/good-model: {input: 2.0, output: 8.0}\n")
    scorer = OpenAIChatScorer("http://127.0.0.1:9/v1", str(prices), grader=LastNumber(tolerance=0.5), prompt="{q}")
    assert scorer.identity() == {
        "prices": {"openai/good-model": {"input": 2.0, "output": 8.0}},
        "grader": {
            "_target_": "gittinseval.live.tasks.graders.LastNumber",
            "field": "answer",
            "tolerance": 0.5,
            "relative": 0.0,
        },
        "prompt": "{q}",
    }
    assert scorer.prices.price("good-model").output == 8.0
    bundled = OpenAIChatScorer("http://127.0.0.1:9/v1").identity()
    assert bundled["grader"] == {
        "_target_": "gittinseval.live.tasks.graders.FirstWord",
        "field": "answer",
        "ignore_case": True,
    }
    assert "openai/gpt-4o-mini" in bundled["prices"]


def test_a_chat_task_expects_each_arm_to_cost_its_tokens_at_its_models_prices(server, examples):
    scorer = OpenAIChatScorer(server.base_url, PRICES, api_key_env=None, timeout=5)
    arms = [{"model": "bad-model", "max_tokens": 10}, {"model": "good-model", "max_tokens": 30}]
    task = chat_task(arms, examples, scorer, prompt_tokens=50, completion_tokens=None, name="quiz")
    # bad-model: 0.5 in, 1 out; good-model: 2 in, 8 out (USD per 1M tokens); completion: each arm's max_tokens.
    np.testing.assert_allclose(task.costs, [(50 * 0.5 + 10 * 1.0) / 1e6, (50 * 2.0 + 30 * 8.0) / 1e6], rtol=1e-12)
    assert task.tokens_per_example == 50 + 20  # the arms' mean max_tokens
    assert (task.name, task.binary, task.score_fn, task.examples) == ("quiz", True, scorer, examples)
    fixed = chat_task(arms, examples, scorer, prompt_tokens=50, completion_tokens=4)
    np.testing.assert_allclose(fixed.costs, [(50 * 0.5 + 4) / 1e6, (50 * 2.0 + 4 * 8.0) / 1e6], rtol=1e-12)
    assert fixed.tokens_per_example == 54
    with pytest.raises(ValueError, match="completion_tokens: null takes each arm's max_tokens, and some arm has none"):
        chat_task([{"model": "bad-model"}, arms[1]], examples, scorer, completion_tokens=None)
    with pytest.raises(ValueError, match="task.arms is a mapping"):
        chat_task({"small": {"model": "bad-model"}}, examples, scorer)
