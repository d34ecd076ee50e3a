"""Failures told plainly (issue 50): a run against a server that hangs, times out or answers garbage says the
failure (its class and the last error) in its final line and in ``summary.json``, and what timed-out calls
charged as expected spent of the budget; an unset API key is an error, naming its variable, before any call."""

import json
import logging
import re

import pytest

from gittinseval.live import OpenAIChatScorer, evaluate
from gittinseval.live.app import run_live
from gittinseval.live.fake_server import PRICES, FakeChatServer
from gittinseval.live.tasks.chat import NO_KEY, api_key
from gittinseval.live.tasks.prices import load_prices
from gittinseval.live.tasks.scoring import bundled_prices, read_jsonl
from gittinseval.utils.errors import UsageError
from tests.cli.test_live import compose_live

TIMEOUT = 5.0  # seconds the client waits for a reply; a call the server holds times out after it


def misbehave(server, behaviour):
    """Set the fake ``server`` to misbehave as ``behaviour`` says, from its first call on (``hangs``) or its
    ninth (``hangs after answering``: the first call of eight examples is answered)."""
    if behaviour in ("hangs", "hangs after answering"):
        server.block_after = 8 if behaviour == "hangs after answering" else 0
    else:
        server.plan = [behaviour] * 1000


@pytest.mark.parametrize(
    ("behaviour", "stop_reason", "failure"),
    [
        # Each timeout may have been billed: charged as expected, the timeouts spend the budget.
        ("hangs", "budget", r"TransientError: .*/chat/completions for model '[\w-]+': Request timed out"),
        ("hangs after answering", "budget", r"TransientError: .*Request timed out"),
        ("malformed", "error", r"NonRetryableError: .*unparseable reply"),
        ("no_usage", "error", r"NonRetryableError: .*the reply has no usage.prompt_tokens"),
        (503, "error", r"TransientError: .*HTTP 503"),
    ],
    ids=["hangs", "hangs after answering", "answers garbage", "answers without usage", "answers 503"],
)
def test_a_run_that_ends_on_failures_says_the_last_one_and_what_the_unknown_costs_spent(
    tmp_path, caplog, behaviour, stop_reason, failure
):
    examples = read_jsonl(bundled="gsm8k_style.jsonl")
    server = FakeChatServer({e["question"]: e["answer"] for e in examples}, good_model="gpt-4o",
                            prices=load_prices(bundled_prices()))
    misbehave(server, behaviour)
    cfg = compose_live(
        "task=gsm8k_chat", f"task.score_fn.base_url={server.base_url}", "task.score_fn.api_key_env=null",
        f"task.score_fn.timeout={TIMEOUT}", "budget_usd=0.002", "concurrency=1", "max_retries=5",
        "retry_backoff=0.01", "progress=false", "logger=none", f"store={tmp_path / 'run.sqlite'}",
    )
    try:
        with caplog.at_level(logging.INFO, logger="gittinseval.live.app"):
            result = run_live(cfg, tmp_path / "run")
    finally:
        server.close()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    (final,) = [record.getMessage() for record in caplog.records if record.getMessage().startswith("stopped (")]
    assert result.stop_reason == summary["stop_reason"] == stop_reason
    # The failure told: the error that stopped the run, else the last failed call.
    told = result.error_message if stop_reason == "error" else result.last_failure
    assert re.search(failure, told), told
    assert re.search(failure, summary["last_failure"]), summary["last_failure"]
    if behaviour == "hangs after answering":  # a recommendation, and the budget spent on timeouts after it
        assert result.recommendation is not None and final.startswith(result.stop_line + "; spent $")
    else:  # nothing scored: the failure is the error line of the command (exit 1) and summary.json's
        assert result.recommendation is None and summary["failure"] == result.failure and result.failure in final
        assert re.search(failure, result.failure)
    if stop_reason == "budget":
        # How many calls charged as expected spent the budget, and how much: the timeouts'.
        n_calls, charged = result.calls_charged_as_expected, result.charged_as_expected
        assert n_calls == result.attempts["failed"] >= 1 and summary["calls_charged_as_expected"] == n_calls
        assert result.spent >= cfg.budget_usd and charged > 0
        assert (f"{n_calls} call{'' if n_calls == 1 else 's'} of unknown cost (timed out, lost or without usage) "
                f"charged as expected: ${charged:.6g} of the ${result.spent:.6g} spent") in final
        assert f"the last failed call: {result.last_failure}" in final


@pytest.mark.parametrize(
    ("variable", "value", "key"),
    [(None, None, NO_KEY), ("GITTINSEVAL_TEST_KEY", "sk-test", "sk-test"),
     ("GITTINSEVAL_TEST_KEY", None, "is unset"), ("GITTINSEVAL_TEST_KEY", "", "is empty")],
    ids=["no key needed", "set", "unset", "empty"],
)
def test_the_key_is_its_variable_s_value_or_an_error_naming_the_variable(monkeypatch, variable, value, key):
    monkeypatch.delenv("GITTINSEVAL_TEST_KEY", raising=False)
    if value is not None:
        monkeypatch.setenv(variable, value)
    if key.startswith("is "):
        with pytest.raises(UsageError, match=f"the API key's environment variable {variable} \\(api_key_env\\) {key}: "
                           f"export {variable}=<key>, or for a server that needs no key set api_key_env: null"):
            api_key(variable)
    else:
        assert api_key(variable) == key


def test_an_unset_key_stops_the_run_before_a_store_is_made_or_a_call_sent(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    examples = read_jsonl()
    server = FakeChatServer({e["prompt"]: e["answer"] for e in examples})
    try:
        arms = [{"model": "bad-model"}, {"model": "good-model"}]
        with pytest.raises(UsageError, match="OPENAI_API_KEY"):
            evaluate(arms, examples, OpenAIChatScorer(server.base_url, PRICES), 1.0, costs=[1e-4, 1e-4],
                     store=tmp_path / "run.sqlite", progress=False)
        keyless = OpenAIChatScorer(server.base_url, PRICES, api_key_env=None)
        assert server.received == 0 and not (tmp_path / "run.sqlite").exists()
        result = evaluate(arms, examples, keyless, 1e-3, costs=[1e-4, 1e-4], progress=False)
    finally:
        server.close()
    assert result.recommendation is not None and {auth for _, auth, _ in server.calls} == {f"Bearer {NO_KEY}"}
