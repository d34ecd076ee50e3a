"""Batch mode (issue 50, item 2), against the package's fake server and its Batch API: each request of the policy is
one Batch API job, charged at batch prices; a run killed between submitting and collecting resumes by polling the
same batches, submits nothing twice and spends the bill; expired lines are retried or stop the run as configured.

Every test has a response cache file of its own, and so a batch journal of its own (``tests/conftest.py``).
"""

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import pytest

from gittinseval import GittinsPolicy
from gittinseval.live import LiveConfig, OpenAIChatScorer, chat_task, evaluate_async
from gittinseval.live.app import dry_run
from gittinseval.live.fake_server import COMPLETION_TOKENS, FakeChatServer
from gittinseval.live.tasks.prices import Prices
from gittinseval.live.tasks.scoring import read_jsonl
from tests.cli.test_live import compose_live
from tests.conftest import ROOT
from tests.live.test_kill import read_store
from tests.live.test_ledger import PROMPT_TOKENS, answers

PRICES = {
    "good-model": {"input": 2.0, "output": 8.0, "batch_input": 1.0, "batch_output": 4.0},
    "bad-model": {"input": 0.5, "output": 1.0, "batch_input": 0.25, "batch_output": 0.5},
}
ARMS = [
    {"model": "bad-model", "temperature": 0.0},
    {"model": "good-model", "temperature": 0.0},
    {"model": "good-model", "temperature": 0.0, "system": "Answer with the number only."},
]
DELAY, POLL = 0.05, 0.02


@pytest.fixture(scope="module")
def examples():
    return read_jsonl()


def server_of(examples, delay=DELAY):
    return FakeChatServer(answers(examples), prices=PRICES, prompt_tokens=PROMPT_TOKENS, batch_delay=delay)


def batch_task(base_url, examples, arms=ARMS, mode="batch", cache="auto", **batch):
    """The chat task of ``arms`` on ``base_url`` in ``mode`` (``batch``: the scorer's batch settings)."""
    scorer = OpenAIChatScorer(base_url, PRICES, api_key_env=None, timeout=10, mode=mode, cache=cache,
                              batch={"poll_seconds": POLL, **batch})
    return chat_task(arms, examples, scorer, prompt_tokens=PROMPT_TOKENS, completion_tokens=COMPLETION_TOKENS)


def run(task, store=None, **settings):
    config = LiveConfig(**{"budget_usd": 1.0, "policy": GittinsPolicy(4), "store": store, "progress": False,
                           "concurrency": 4, "retry_backoff": 0.001, **settings})
    return asyncio.run(evaluate_async(task, config))


def submitted(server):
    """How often each request was submitted in a batch line, by its body."""
    return Counter(json.dumps(body, sort_keys=True) for _, body in server.batches.lines)


def test_a_batch_run_spends_the_bill_at_batch_prices_one_job_per_request(examples, tmp_path):
    server = server_of(examples)
    try:
        task = batch_task(server.base_url, examples)
        result = run(task, tmp_path / "run.sqlite")
    finally:
        server.close()
    assert result.stop_reason == "exhausted" and result.recommendation.arm in (1, 2)
    assert task.costs == task.costs_by_mode["batch"] == pytest.approx([c / 2 for c in task.costs_by_mode["chat"]])
    assert server.billed == [] and server.batches.created == len(result.trace["step"])  # no chat call; a job each
    cells = len(ARMS) * len(examples)
    assert sum(submitted(server).values()) == cells and set(submitted(server).values()) == {1}
    by_hand = sum((PROMPT_TOKENS * PRICES[m]["batch_input"] + COMPLETION_TOKENS * PRICES[m]["batch_output"]) / 1e6
                  for m, *_ in server.batch_billed)
    assert result.spent == pytest.approx(server.cost_of_calls(), rel=1e-12) == pytest.approx(by_hand, rel=1e-12)
    assert set(server.bill()) == {"bad-model (batch)", "good-model (batch)"}
    with sqlite3.connect(tmp_path / "run.sqlite") as db:
        assert db.execute("SELECT COUNT(*), SUM(dollars) FROM usage").fetchone() == (cells, pytest.approx(result.spent))


KILLED_RUN = """
import asyncio, sys
from tests.live.test_batch import batch_task, run
from gittinseval.live.tasks.scoring import read_jsonl
run(batch_task(sys.argv[1], read_jsonl()), sys.argv[2])
"""


def test_a_run_killed_between_submitting_and_collecting_resumes_by_polling_the_same_batches(examples, tmp_path):
    server = server_of(examples, delay=0.6)  # long enough that no batch ends before the kill
    store = tmp_path / "run.sqlite"
    try:
        killed = subprocess.Popen([sys.executable, "-c", KILLED_RUN, server.base_url, str(store)], cwd=ROOT,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
        deadline, first = time.monotonic() + 60, None
        # Killed once two jobs are in flight, or one for 0.2 s: well before the first batch can end.
        while server.batches.created < 2 and killed.poll() is None and time.monotonic() < deadline:
            if first is None and server.batches.created:
                first = time.monotonic()
            if first is not None and time.monotonic() > first + 0.2:
                break
            time.sleep(0.005)
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        assert killed.returncode == -signal.SIGKILL
        at_kill = dict(server.batches.batches)
        polled_at_kill = Counter(server.batches.retrieved)
        assert at_kill and all(batch["status"] == "in_progress" for batch in at_kill.values())
        assert server.batch_billed == []  # nothing billed yet: every submitted line waits in its batch
        result = run(batch_task(server.base_url, examples), store)
    finally:
        server.close()
    assert result.stop_reason == "exhausted"
    # The same batch ids are polled again, and no request is submitted twice.
    assert all(server.batches.retrieved[batch] > polled_at_kill[batch] for batch in at_kill)
    assert set(submitted(server).values()) == {1} and sum(submitted(server).values()) == len(ARMS) * len(examples)
    assert result.spent == pytest.approx(server.cost_of_calls(), rel=1e-12)
    cells, _ = read_store(store)
    assert len(cells) == len({(arm, example) for arm, example, _ in cells}) == len(ARMS) * len(examples)
    with sqlite3.connect(store) as db:
        lost = db.execute("SELECT COUNT(*), SUM(charged) FROM attempts WHERE outcome = 'lost'").fetchone()
    assert lost[0] >= len(at_kill) and lost[1] == 0  # the calls in flight, charged when their batches were collected
    assert result.attempts["lost"] == lost[0]


@pytest.mark.parametrize("expired", ["retry", "fail"])
def test_an_expired_line_is_retried_in_a_new_job_or_stops_the_run_as_configured(examples, tmp_path, expired):
    server = server_of(examples)
    server.batches.line_plan = ["ok", "expired"]  # the second line of the first batch to end expires
    try:
        result = run(batch_task(server.base_url, examples, expired=expired), tmp_path / "run.sqlite", concurrency=1)
    finally:
        server.close()
    assert "expired" in {batch["status"] for batch in server.batches.batches.values()}
    assert result.spent == pytest.approx(server.cost_of_calls(), rel=1e-12)  # an expired line is not billed
    if expired == "retry":
        assert result.stop_reason == "exhausted" and result.error is None
        again = [body for body, count in submitted(server).items() if count == 2]
        assert len(again) == 1 and sum(submitted(server).values()) == len(ARMS) * len(examples) + 1
        assert result.attempts["failed"] == 1
    else:
        assert result.error is not None and "expired before it ran (batch.expired: fail)" in str(result.error)
        assert type(result.error).__name__ == "NonRetryableError" and result.stop_reason == "error"
        assert len(read_store(tmp_path / "run.sqlite")[0]) == 3  # the other lines of its job ran: kept, scored


def test_failed_lines_are_classified_as_failed_calls_and_a_failed_batch_stops_the_run(examples):
    server = server_of(examples)
    arm = ARMS[1]
    try:
        task = batch_task(server.base_url, examples)
        server.batches.line_plan = [500, "ok", 400]
        with pytest.raises(Exception) as failure:
            asyncio.run(task.score_fn(arm, examples[:3]))
        assert type(failure.value).__name__ == "NonRetryableError" and "HTTP 400" in str(failure.value)
        assert failure.value.scores[1] == 1.0 and failure.value.scores[0] is None
        assert failure.value.cost == pytest.approx(server.cost_of_calls(), rel=1e-12)  # the line that ran
        server.batches.line_plan = [503]
        with pytest.raises(Exception, match="HTTP 503") as transient:
            asyncio.run(task.score_fn(arm, examples[:1]))
        assert type(transient.value).__name__ == "TransientError"
        server.batches.fail_batches = 1
        with pytest.raises(Exception, match=r"the batch failed \(invalid_request: planned failure"):
            asyncio.run(task.score_fn(arm, examples[3:5]))
        created = server.batches.created
        scores, usage = asyncio.run(task.score_fn(arm, examples[3:5]))  # refused lines are submitted anew
        assert server.batches.created == created + 1 and list(scores) == [1.0, 1.0]
    finally:
        server.close()


def test_a_cancelled_batch_charges_the_lines_that_ran_and_a_batch_over_the_token_limit_is_retried(examples):
    """The lines of a cancelled batch answered before its cancellation are scored and charged at the batch price, the
    others fail the call; a batch failed on the enqueued-token limit is a transient failure, free."""
    server = server_of(examples)
    arm = ARMS[1]
    try:
        task = batch_task(server.base_url, examples)
        server.batches.line_plan = ["ok", "cancelled"]
        with pytest.raises(Exception, match="the batch cancelled") as cancelled:
            asyncio.run(task.score_fn(arm, examples[:2]))
        assert type(cancelled.value).__name__ == "NonRetryableError" and cancelled.value.scores == [1.0, None]
        assert server.batch_billed and cancelled.value.cost == pytest.approx(server.cost_of_calls(), rel=1e-12)
        server.batches.fail_batches, server.batches.fail_code = 1, "token_limit_exceeded"
        with pytest.raises(Exception, match=r"the batch failed \(token_limit_exceeded") as queued:
            asyncio.run(task.score_fn(arm, examples[2:3]))
        assert type(queued.value).__name__ == "TransientError" and queued.value.cost == 0
    finally:
        server.close()


def test_a_batch_the_provider_no_longer_knows_is_dropped_with_a_warning_and_submitted_again(examples, caplog):
    server = server_of(examples, delay=60)  # the first job never ends: its call is abandoned while it polls
    arm = ARMS[1]
    try:
        task = batch_task(server.base_url, examples)
        with pytest.raises(asyncio.TimeoutError):
            asyncio.run(asyncio.wait_for(task.score_fn(arm, examples[:2]), 0.5))
        (gone,) = server.batches.batches
        del server.batches.batches[gone]  # the provider forgot it: its poll answers 404
        server.batches.delay = DELAY
        with caplog.at_level("WARNING"), pytest.raises(Exception, match="not found") as forgotten:
            asyncio.run(task.score_fn(arm, examples[:2]))
        assert type(forgotten.value).__name__ == "TransientError" and forgotten.value.cost == 0
        assert f"batch {gone}: the provider no longer knows it (HTTP 404)" in caplog.text
        scores, _ = asyncio.run(task.score_fn(arm, examples[:2]))  # the retry submits its requests again
        assert list(scores) == [1.0, 1.0] and server.batches.created == 2
    finally:
        server.close()


def test_two_calls_asking_the_same_requests_at_once_submit_them_once(examples):
    """Both find nothing pending and upload a file; journaling it checks again in the same transaction, so the second
    finds the first's lines, creates no batch, and collects them from the first's: the bill counts each request once."""
    server = server_of(examples)
    try:
        task = batch_task(server.base_url, examples)

        async def both():
            return await asyncio.gather(*(task.score_fn(ARMS[1], examples[:2]) for _ in range(2)))

        (first, first_usage), (second, second_usage) = asyncio.run(both())
    finally:
        server.close()
    assert list(first) == list(second) == [1.0, 1.0]
    assert server.batches.created == 1 and set(submitted(server).values()) == {1}
    assert first_usage.cost + second_usage.cost == pytest.approx(server.cost_of_calls(), rel=1e-12)


def test_a_call_that_finds_a_batch_still_being_created_waits_for_it_instead_of_creating_another(examples):
    """The provider is slow to create the first call's batch: the second call finds the lines journaled with no batch
    yet, and must wait for the creation in flight, not take the job for one whose run died and create a second batch
    of the same file (two bills)."""
    server = server_of(examples)
    server.batches.creation_seconds = 0.5
    try:
        task = batch_task(server.base_url, examples)

        async def both():
            first = asyncio.ensure_future(task.score_fn(ARMS[1], examples[:2]))
            while not server.batches.files:  # the first call's file is uploaded; its batch is being created
                await asyncio.sleep(0.01)
            second = await task.score_fn(ARMS[1], examples[:2])
            return await first, second

        (first, first_usage), (second, second_usage) = asyncio.run(both())
    finally:
        server.close()
    assert list(first) == list(second) == [1.0, 1.0]
    assert server.batches.created == 1
    assert first_usage.cost + second_usage.cost == pytest.approx(server.cost_of_calls(), rel=1e-12)


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"mode": "batchh"}, r"mode must be one of chat, batch, got 'batchh'"),
        ({"batch": {"expird": "retry"}}, r"batch\.expird: no such batch setting"),
        ({"batch": {"expired": "skip"}}, r"batch\.expired must be one of retry, fail, got 'skip'"),
        ({"batch": {"poll_seconds": 0}}, r"batch\.poll_seconds must be a positive number of seconds, got 0"),
        ({"batch": {"poll_seconds": -1.0}}, r"batch\.poll_seconds must be a positive"),
    ],
)
def test_a_bad_setting_is_an_error_that_names_it(settings, match):
    with pytest.raises(ValueError, match=match):
        OpenAIChatScorer("http://127.0.0.1:1/v1", PRICES, api_key_env=None, **settings)


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"input": 1, "output": 2, "batch_input": -0.5, "batch_output": 1}, r"batch_input must be non-negative"),
        ({"input": 1, "output": 2, "batch_output": 1}, r"batch_output without batch_input"),
        ({"input": 1, "output": 2, "batch_discount": 0.5}, r"unknown price field\(s\) \['batch_discount'\]"),
    ],
)
def test_a_bad_batch_price_is_an_error_that_names_it(entry, match):
    with pytest.raises(ValueError, match=match):
        Prices({"m": entry})


def test_batch_mode_needs_a_batch_price_of_each_model_and_the_chat_mode_identity_is_unchanged(examples):
    unpriced = {"good-model": {"input": 2.0, "output": 8.0}, "bad-model": PRICES["bad-model"]}
    scorer = OpenAIChatScorer("http://127.0.0.1:1/v1", unpriced, api_key_env=None, mode="batch")
    with pytest.raises(ValueError, match="model 'good-model' has no batch price: give it batch_input and batch_out"):
        chat_task(ARMS, examples, scorer)
    chat = OpenAIChatScorer("http://127.0.0.1:1/v1", PRICES, api_key_env=None)
    assert chat.identity()["prices"] == {m: {"input": p["input"], "output": p["output"]} for m, p in PRICES.items()}
    batch = OpenAIChatScorer("http://127.0.0.1:1/v1", PRICES, api_key_env=None, mode="batch")
    assert batch.identity()["prices"] == PRICES and batch.identity()["mode"] == "batch"


def test_the_config_names_a_bad_mode_and_the_dry_run_states_both_estimates():
    with pytest.raises(Exception, match="mode must be one of chat, batch, got 'batchh'"):
        dry_run(compose_live("task=gsm8k_chat", "task.score_fn.mode=batchh", "budget_usd=0.05"))
    report = dry_run(compose_live("task=gsm8k_chat", "task.score_fn.mode=batch", "budget_usd=0.05"))
    by_mode = report.split("estimates by mode (task.score_fn.mode):\n")[1].splitlines()
    assert by_mode[0].startswith("  chat: exhaustive cost $") and by_mode[1].startswith("  batch (this run): ")
    chat, batch = (float(line.split("$")[1].split(",")[0]) for line in by_mode)
    assert batch == pytest.approx(chat / 2, rel=1e-3)
    assert f"exhaustive cost (every arm on every example): ${batch:.4g}" in report
    chat_report = dry_run(compose_live("task=gsm8k_chat", "budget_usd=0.05"))
    assert "  chat (this run): " in chat_report and "  batch: exhaustive cost" in chat_report


def test_the_documented_costs_are_the_measured_ones():
    """docs/providers.md quotes ``scripts/batch_prices.py``'s report, as measured on the fake server's bill."""
    import runpy

    script = runpy.run_path(str(ROOT / "scripts" / "batch_prices.py"))
    measured = script["measure"]()
    for mode, (spent, bill, _) in measured.items():
        assert spent == pytest.approx(bill, rel=1e-12), mode
    assert measured["batch"][0] == pytest.approx(measured["chat"][0] / 2, rel=1e-12)  # the bundled batch prices
    page = (ROOT / "docs" / "providers.md").read_text()
    for line in script["lines"](measured):
        assert line in page
