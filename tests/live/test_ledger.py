"""The ledger: every scoring call that may have reached the provider is charged, against a local fake server.

Each test but the first compares the run's ``spent`` with the server's own bill (every call it answered
with a usage, at the task's prices), through crashes, failures part-way through a batch and concurrency.
"""

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest
from omegaconf import OmegaConf

from gittinseval import GittinsPolicy
from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.core.protocol import Request
from gittinseval.live import OpenAIChatScorer, RunStore, evaluate
from gittinseval.live.fake_server import COMPLETION_TOKENS, FakeChatServer
from gittinseval.live.ledger import Ledger, OpenRequest
from gittinseval.live.tasks.chat import expected_chat_costs
from gittinseval.live.tasks.scoring import read_jsonl

ARMS = [{"model": "bad-model", "temperature": 0.0}, {"model": "good-model", "temperature": 0.0}]
PRICES = {"good-model": {"input": 2.0, "output": 8.0}, "bad-model": {"input": 0.5, "output": 1.0}}
PROMPT_TOKENS = 40


@pytest.fixture(scope="module")
def examples():
    return read_jsonl()


def answers(examples):
    return {e["prompt"]: e["answer"] for e in examples}


def answered_twice(server):
    """(model, temperature, prompt) of the cells the server answered more than once."""
    asked = Counter((b["model"], b.get("temperature"), b["messages"][-1]["content"]) for b, _, _ in server.calls)
    return [cell for cell, count in asked.items() if count > 1]


def ledger(store):
    with sqlite3.connect(store) as db:
        return db.execute(
            "SELECT started_seq, finished_seq, outcome, expected, charged, charged_as_expected FROM attempts"
        ).fetchall()


def run(examples, server, store=None, **settings):
    costs = expected_chat_costs(ARMS, PRICES, PROMPT_TOKENS, COMPLETION_TOKENS)
    options = {"costs": costs, "policy": GittinsPolicy(4), "retry_backoff": 0.001, "progress": False, **settings}
    scorer = OpenAIChatScorer(server.base_url, PRICES, api_key_env=None, timeout=10)
    return evaluate(ARMS, examples, scorer, 1.0, store=store, **options)


def test_a_call_is_charged_by_its_outcome_and_the_call_that_completes_a_request_tells_it():
    """Of a call of m examples expected to cost e: a failure reporting r with u examples of unknown cost
    is charged r + u e / m, one reporting nothing e, both that much as expected; a scored call what it
    reported, else e; a lost call e, all as expected."""
    store = RunStore(None)
    store.define({"format": 3}, ["a", "b"], np.array([0.5, 0.25]))
    ledger = Ledger(store, np.array([0.5, 0.25]))
    entry = OpenRequest(store.issue(0, np.arange(4)), Request(0, np.arange(4)))
    first = ledger.start(entry)
    assert first.expected == 2.0 and ledger.expected_in_flight == 2.0
    assert ledger.settle(entry, first.outcome(entry.id), "failed", {0: 1.0}, 0.3, 2, "timeout") == 1.3
    second = ledger.start(entry)
    assert second.examples.tolist() == [1, 2, 3] and second.expected == 1.5
    assert ledger.settle(entry, second.outcome(entry.id), "failed", {}, None, 0, "refused") == 1.5
    third = ledger.start(entry)
    assert ledger.settle(entry, third.outcome(entry.id), "scored", {1: 0.0, 2: 1.0, 3: 1.0}, None, 0, None) == 1.5
    assert entry.complete and entry.scores().tolist() == [1.0, 0.0, 1.0, 1.0] and entry.charged == 4.3
    other = OpenRequest(store.issue(1, np.arange(2)), Request(1, np.arange(2)))
    lost = ledger.start(other)
    assert ledger.settle(other, lost.outcome(other.id), "lost", {}, None, 0, "the run ended") == 0.5
    assert (ledger.spent, ledger.charged_as_expected) == (4.8, 3.0)
    assert ledger.counts == {"scored": 1, "failed": 2, "lost": 1} and ledger.expected_in_flight == 0
    assert store.connection.execute("SELECT outcome, cost FROM requests").fetchall() == [("told", 4.3), (None, None)]
    store.close()


def test_a_batch_that_fails_half_way_is_charged_what_was_billed_and_asks_only_the_rest(examples, tmp_path):
    server = FakeChatServer(answers(examples), prompt_tokens=PROMPT_TOKENS)
    try:
        server.plan = ["ok", "ok", 503, 503]  # the first batch: two answers, then an outage
        result = run(examples, server)
        assert result.stop_reason == "exhausted" and result.error is None
        assert server.received == 2 * len(examples) + 2 and not answered_twice(server)
        assert result.spent == pytest.approx(server.cost_of_calls(), rel=1e-12)
        assert result.attempts == {"scored": 10, "failed": 1, "lost": 0} and result.charged_as_expected == 0
    finally:
        server.close()

    # A deterministic failure part-way: the run stops at once, keeping (and charging) the three cells.
    server = FakeChatServer(answers(examples), prompt_tokens=PROMPT_TOKENS)
    store = tmp_path / "run.sqlite"
    try:
        server.plan = ["ok", "ok", 400, "ok"]
        stopped = run(examples, server, store)
        assert stopped.stop_reason == "error" and "HTTP 400" in stopped.error_message
        assert server.received == 4 and stopped.spent == pytest.approx(server.cost_of_calls(), rel=1e-12)
        with sqlite3.connect(store) as db:
            assert db.execute("SELECT COUNT(*) FROM cells").fetchone()[0] == 3
        resumed = run(examples, server, store)
        assert resumed.stop_reason == "exhausted" and server.received == 2 * len(examples) + 1
        assert not answered_twice(server)
        assert resumed.spent == pytest.approx(server.cost_of_calls(), rel=1e-12)
    finally:
        server.close()


def test_a_told_requests_cost_counts_every_attempt_so_the_requests_table_sums_to_spent(examples, tmp_path):
    """After a batch that failed half-way and was retried, each told request's ``requests.cost`` is the charge
    of all its calls: the table sums to ``spent``, which is the server's bill."""
    server = FakeChatServer(answers(examples), prompt_tokens=PROMPT_TOKENS)
    store = tmp_path / "run.sqlite"
    try:
        server.plan = ["ok", "ok", 503, 503]
        result = run(examples, server, store)
    finally:
        server.close()
    assert result.stop_reason == "exhausted" and result.attempts["failed"] == 1
    with sqlite3.connect(store) as db:
        told = db.execute("SELECT id, cost FROM requests WHERE outcome = 'told'").fetchall()
        calls = dict(db.execute("SELECT request, SUM(charged) FROM attempts GROUP BY request").fetchall())
        retried = db.execute("SELECT request FROM attempts WHERE outcome = 'failed'").fetchone()[0]
    assert len(told) == 10 and all(cost == pytest.approx(calls[request], rel=1e-12) for request, cost in told)
    assert sum(cost for _, cost in told) == pytest.approx(result.spent, rel=1e-12)
    assert result.spent == pytest.approx(server.cost_of_calls(), rel=1e-12)
    with sqlite3.connect(store) as db:
        last_call = db.execute("SELECT charged FROM attempts WHERE request = ? AND outcome = 'scored'", (retried,))
        assert dict(told)[retried] > last_call.fetchone()[0]  # the failed call's two answers are in its cost


def grade_or_fail(reply, example):
    """Grades the good model's replies; the bad model's "0" cannot be graded."""
    if reply == "0":
        raise ZeroDivisionError("this grader cannot grade '0'")
    return float(reply.rstrip(".") == example["answer"])


def grade_or_nonsense(reply, example):
    return None if reply == "0" else float(reply.rstrip(".") == example["answer"])


@pytest.mark.parametrize("grader", [grade_or_fail, grade_or_nonsense])
def test_a_billed_reply_that_cannot_be_graded_is_charged_what_the_server_billed(examples, grader):
    server = FakeChatServer(answers(examples), prompt_tokens=PROMPT_TOKENS)
    costs = expected_chat_costs(ARMS, PRICES, PROMPT_TOKENS, COMPLETION_TOKENS)
    try:
        scorer = OpenAIChatScorer(server.base_url, PRICES, api_key_env=None, timeout=10, grader=grader)
        result = evaluate(ARMS, examples, scorer, 1.0, costs=costs, policy=GittinsPolicy(4), progress=False)
    finally:
        server.close()
    assert result.stop_reason == "error" and "grading the reply" in result.error_message
    assert server.billed and result.spent == pytest.approx(server.cost_of_calls(), rel=1e-12)
    assert result.charged_as_expected == 0  # each billed reply is charged its reported usage


def test_a_negative_token_count_stops_the_run_naming_the_arm_the_example_and_the_field(examples):
    server = FakeChatServer(answers(examples), prompt_tokens=PROMPT_TOKENS)
    try:
        server.plan = ["negative_usage"]
        result = run(examples, server, policy=GittinsPolicy(1))
    finally:
        server.close()
    assert result.stop_reason == "error" and server.received == 1
    arm = int(result.error_where.split()[1])
    assert result.error_message.startswith(f"arm {arm} ({['bad-model', 'good-model'][arm]}), example ")
    assert ", example " in result.error_where and "usage.prompt_tokens" in result.error_message
    # The call was billed at a cost the reply misreports: charged as expected.
    assert result.charged_as_expected == result.spent > 0


def test_at_concurrency_8_no_call_starts_once_spent_and_calls_in_flight_reach_the_budget(examples, tmp_path):
    prices = {"cheap": {"input": 0.1, "output": 0.1}, "dear": {"input": 10.0, "output": 10.0}}  # 100x
    arms = [{"model": model, "temperature": t / 10} for model in prices for t in range(5)]
    costs = expected_chat_costs(arms, prices, prompt_tokens=12, completion_tokens=COMPLETION_TOKENS)
    budget = 0.3 * len(examples) * sum(costs)
    store = tmp_path / "run.sqlite"
    server = FakeChatServer(answers(examples), good_model="dear", prices=prices, latency=0.02)
    try:
        result = evaluate(
            arms,
            examples,
            OpenAIChatScorer(server.base_url, prices, api_key_env=None, timeout=10),
            budget,
            costs=costs,
            policy=GittinsPolicy(2),
            concurrency=8,
            store=store,
            progress=False,
        )
    finally:
        server.close()
    assert result.stop_reason == "budget" and result.error is None
    assert result.spent == pytest.approx(server.cost_of_calls(), rel=1e-12)
    rows = ledger(store)
    peak = 0
    for started, *_ in rows:
        spent_before = sum(charged for _, finished, _, _, charged, _ in rows if finished < started)
        flying = [expected for begun, finished, _, expected, _, _ in rows if begun < started < finished]
        assert spent_before + sum(flying) < budget
        peak = max(peak, len(flying) + 1)
    assert peak >= 4  # calls really were in flight together, so the rule was exercised
    largest = max(charged for *_, charged, _ in rows)
    assert budget <= result.spent <= budget + 8 * largest


def wait_until_quiet(server, at_least, seconds=1.0, deadline=60.0):
    """Wait until the server has received more than ``at_least`` calls and no new one for ``seconds``."""
    end = time.monotonic() + deadline
    last = -1
    while time.monotonic() < end:
        now = server.received
        if now == last and now > at_least:
            return now
        last = now
        time.sleep(seconds)
    raise AssertionError(f"the server received {server.received} calls, expected more than {at_least}")



def chat_run_command(server, store, run_dir, concurrency):
    """``gittinseval-live task=openai_chat`` against ``server``, storing into ``store``: its whole command line."""
    return [
        sys.executable,
        "-m",
        "gittinseval.cli.live",
        "task=openai_chat",
        f"task.score_fn.base_url={server.base_url}",
        "task.score_fn.api_key_env=null",
        f"task.prompt_tokens={PROMPT_TOKENS}",
        f"task.completion_tokens={COMPLETION_TOKENS}",
        "budget_usd=1.0",
        "policy.batch_size=4",
        f"concurrency={concurrency}",
        "progress=false",
        "logger=none",
        f"store={store}",
        f"hydra.run.dir={run_dir}",
    ]


def test_a_run_killed_with_calls_in_flight_is_charged_every_billed_call_after_resuming(examples, tmp_path):
    """SIGKILL while the server holds answers; they are billed all the same, and charged as expected."""
    prices = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "task" / "openai_chat.yaml").score_fn.prices)
    server = FakeChatServer(answers(examples), good_model="gpt-4o", prices=prices, prompt_tokens=PROMPT_TOKENS)
    store = tmp_path / "chat.sqlite"
    server.block_after = 20

    def command(run_dir):
        return chat_run_command(server, store, tmp_path / run_dir, concurrency=4)

    try:
        killed = subprocess.Popen(command("killed"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            held = wait_until_quiet(server, server.block_after)
        finally:
            killed.send_signal(signal.SIGKILL)
            killed.wait(timeout=30)
        server.release.set()  # the held calls are answered to a dead client, and billed
        deadline = time.monotonic() + 30
        while len(server.billed) < held and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(server.billed) == held
        server.block_after = None
        subprocess.run(command("resumed"), check=True, timeout=180, capture_output=True)
    finally:
        server.close()
    summary = json.loads((tmp_path / "resumed" / "summary.json").read_text())
    assert summary["stop_reason"] == "exhausted" and summary["n_cells"] == 3 * len(examples)
    assert summary["spent"] == pytest.approx(server.cost_of_calls(), rel=1e-12)
    lost = [row for row in ledger(store) if row[2] == "lost"]
    assert lost and summary["attempts"]["lost"] == len(lost)
    assert summary["charged_as_expected"] == pytest.approx(sum(row[3] for row in lost), rel=1e-12)
    assert held > 20  # the kill came with calls in flight
    status = (tmp_path / "resumed" / "status.txt").read_text().splitlines()[0]
    assert status.endswith(f"charged as expected (calls of unknown cost): ${summary['charged_as_expected']:.6g}")


def test_ctrl_c_exits_130_a_second_abandons_the_calls_at_once_and_a_resume_is_charged_the_bill(examples, tmp_path):
    """gittinseval-live: the first SIGINT waits for the calls in flight (the server holds them), the second
    abandons them: exit 130, one stopped line, no traceback.  The held calls are billed all the same; the
    resumed run charges them as lost and its spend is the server's bill."""
    prices = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "task" / "openai_chat.yaml").score_fn.prices)
    server = FakeChatServer(answers(examples), good_model="gpt-4o", prices=prices, prompt_tokens=PROMPT_TOKENS)
    store = tmp_path / "chat.sqlite"
    server.block_after = 12

    def command(run_dir):
        return chat_run_command(server, store, tmp_path / run_dir, concurrency=3)

    def default_ctrl_c():  # as in a terminal: a shell may start a background job with SIGINT ignored
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    try:
        interrupted = subprocess.Popen(
            command("interrupted"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=default_ctrl_c,
        )
        held = wait_until_quiet(server, server.block_after)
        interrupted.send_signal(signal.SIGINT)
        time.sleep(1.0)
        assert interrupted.poll() is None  # waiting for the calls the server holds
        interrupted.send_signal(signal.SIGINT)
        output, _ = interrupted.communicate(timeout=30)
        assert interrupted.returncode == 130, output
        server.release.set()
        deadline = time.monotonic() + 30
        while len(server.billed) < held and time.monotonic() < deadline:
            time.sleep(0.05)
        server.block_after = None
        subprocess.run(command("resumed"), check=True, timeout=180, capture_output=True)
    finally:
        server.close()
    assert "Traceback" not in output and "KeyboardInterrupt" not in output
    assert "interrupted: waiting for 3 requests in flight (Ctrl-C again abandons them)" in output
    assert "abandoned 3 calls in flight" in output
    (stop_line,) = [line for line in output.splitlines() if "stopped (interrupted); spent $" in line]
    summary = json.loads((tmp_path / "resumed" / "summary.json").read_text())
    assert summary["stop_reason"] == "exhausted" and summary["n_cells"] == 3 * len(examples)
    assert summary["attempts"]["lost"] == 3 and summary["spent"] == pytest.approx(server.cost_of_calls(), rel=1e-12)
    # The stop line counted the abandoned calls as the resume charges them: lost, at their expected cost.
    stopped = json.loads((tmp_path / "interrupted" / "summary.json").read_text())
    lost = [row for row in ledger(store) if row[2] == "lost"]
    assert stopped["attempts"]["lost"] == len(lost) == 3 and ", 3 lost); " in stop_line
    assert stopped["charged_as_expected"] > 0
    for charged in (summary["charged_as_expected"], sum(row[4] for row in lost)):
        assert stopped["charged_as_expected"] == pytest.approx(charged, rel=1e-12)
    assert f"charged as expected (calls of unknown cost): ${stopped['charged_as_expected']:.6g}; " in stop_line
