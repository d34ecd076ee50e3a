"""The response cache (issue 50, item 3), against the package's fake server: a request asked again is answered
from the reply already paid for, at $0, marked cached in the ledger and the export; a changed request misses.

Every test has a cache file of its own (``tests/conftest.py`` points ``$GITTINSEVAL_RESPONSE_CACHE`` at one).
"""

import asyncio
import json
import multiprocessing
import os
import shutil
import sqlite3
import sys

import pytest

from gittinseval import GittinsPolicy
from gittinseval.cli import live as live_cli
from gittinseval.live import LiveConfig, NonRetryableError, OpenAIChatScorer, RunStore, chat_task, evaluate_async
from gittinseval.live.export import store_tables
from gittinseval.live.fake_server import COMPLETION_TOKENS, FakeChatServer
from gittinseval.live.response_cache import (
    CACHE_ENV,
    CachedReply,
    ResponseCache,
    ResponseCacheError,
    SampleNumbers,
    cache_request,
    default_cache_path,
    request_key,
)
from gittinseval.live.tasks.graders import ExactMatch
from gittinseval.live.tasks.scoring import read_jsonl
from tests.conftest import RESPONSE_CACHE_ENV
from tests.live.test_ledger import ARMS, PRICES, PROMPT_TOKENS, answers


@pytest.fixture(scope="module")
def examples():
    return read_jsonl()


def scorer(server, **settings):
    return OpenAIChatScorer(server.base_url, PRICES, api_key_env=None, timeout=10, **settings)


def run(examples, server, store, arms=ARMS, **settings):
    """An exhaustive run of the chat task on a new scorer (``settings``: the scorer's)."""
    task = chat_task(arms, examples, scorer(server, **settings), prompt_tokens=PROMPT_TOKENS,
                     completion_tokens=COMPLETION_TOKENS)
    config = LiveConfig(budget_usd=1.0, policy=GittinsPolicy(4), store=store, progress=False)
    return asyncio.run(evaluate_async(task, config))


def cells_of(store):
    """``{(arm, example): score}`` of a store."""
    cells, _ = store_tables(store)
    return {(row["arm"], row["example"]): row["score"] for row in cells.to_pylist()}


@pytest.fixture(scope="module")
def two_runs(examples, tmp_path_factory):
    """Two identical exhaustive runs, in two stores: ``(first, second, stores, bill after each)``."""
    folder = tmp_path_factory.mktemp("two_runs")
    stores = folder / "first.sqlite", folder / "second.sqlite"
    server = FakeChatServer(answers(examples), prompt_tokens=PROMPT_TOKENS)
    try:
        first = run(examples, server, stores[0])
        bill = server.bill()
        second = run(examples, server, stores[1])
        bills = bill, server.bill()
    finally:
        server.close()
    assert first.stop_reason == second.stop_reason == "exhausted"
    return first, second, stores, bills


def test_a_second_identical_run_costs_nothing_and_gives_identical_scores(two_runs, examples):
    first, second, stores, (bill, bill_after) = two_runs
    assert second.spent == 0 and second.charged_as_expected == 0
    assert bill_after == bill  # the server billed no second call
    assert sum(line["calls"] for line in bill.values()) == 2 * len(examples)
    assert first.spent == pytest.approx(sum(line["dollars"] for line in bill.values()), rel=1e-12)
    assert cells_of(stores[1]) == cells_of(stores[0]) and len(cells_of(stores[0])) == 2 * len(examples)
    assert second.recommendation.arm == first.recommendation.arm == 1


def test_the_ledger_and_the_export_mark_the_hits_cached(two_runs):
    _, _, stores, _ = two_runs
    for store, cached in zip(stores, (0, 1), strict=True):
        with sqlite3.connect(store) as db:
            assert db.execute("SELECT DISTINCT cached FROM usage").fetchall() == [(cached,)]
    (first_cells, first_calls), (cells, calls) = store_tables(stores[0]), store_tables(stores[1])
    cells, calls = cells.to_pylist(), calls.to_pylist()
    assert {cell["cached"] for cell in cells} == {True} and not any(first_cells.column("cached").to_pylist())
    assert {cell["billed_dollars"] for cell in cells} == {0.0} and {call["dollars"] for call in calls} == {0.0}
    assert all(call["n_cached"] == call["n_examples"] for call in calls)
    assert first_calls.column("n_cached").to_pylist() == [0] * first_calls.num_rows
    # The stored usage comes back with the reply: the tokens the first run was billed for.
    first_tokens = {(c["arm"], c["example"]): (c["tokens_in"], c["tokens_out"]) for c in first_cells.to_pylist()}
    assert {(c["arm"], c["example"]): (c["tokens_in"], c["tokens_out"]) for c in cells} == first_tokens


def test_a_changed_system_message_prompt_or_setting_misses(examples):
    spaced = {f"{prompt} ": answer for prompt, answer in answers(examples).items()}  # the prompt "{prompt} "
    server = FakeChatServer({**answers(examples), **spaced}, prompt_tokens=PROMPT_TOKENS)
    arm = {"model": "good-model", "temperature": 0.0, "system": "You are a calculator."}
    try:
        asyncio.run(scorer(server)(arm, examples[:3]))
        asyncio.run(scorer(server)(arm, examples[:3]))
        assert server.received == 3
        for changed in ({**arm, "system": "Answer in one word."}, {**arm, "max_tokens": 8}):
            _, usage = asyncio.run(scorer(server)(changed, examples[:3]))
            assert usage.cached == (False,) * 3
        _, usage = asyncio.run(scorer(server, prompt="{prompt} ")(arm, examples[:3]))
        assert usage.cached == (False,) * 3 and server.received == 12
    finally:
        server.close()


def test_above_temperature_0_without_opting_in_nothing_is_stored_or_served(examples):
    server = FakeChatServer(answers(examples), prompt_tokens=PROMPT_TOKENS)
    hot = [{**arm, "temperature": 1.0} for arm in ARMS]
    try:
        for _ in range(2):
            for arm in [*hot, {"model": "good-model"}]:  # no temperature: the provider's default, 1
                _, usage = asyncio.run(scorer(server)(arm, examples[:4]))
                assert usage.cached == (False,) * 4 and usage.cost > 0
    finally:
        server.close()
    assert server.received == 2 * 3 * 4
    assert sum(ResponseCache().info().replies.values()) == 0


def test_cache_always_keeps_each_sample_of_a_repeated_prompt_and_serves_them_back(examples, tmp_path):
    """Three prompts asked twice each at temperature 1: six samples, six entries; a rerun gets them all back."""
    repeated = [dict(example) for example in examples[:3] for _ in range(2)]
    arms = [{"model": "bad-model", "temperature": 1.0}, {"model": "good-model", "temperature": 1.0}]
    server = FakeChatServer(answers(examples), prompt_tokens=PROMPT_TOKENS)
    try:
        first = run(repeated, server, tmp_path / "first.sqlite", arms=arms, cache="always")
        second = run(repeated, server, tmp_path / "second.sqlite", arms=arms, cache="always")
    finally:
        server.close()
    assert server.received == 2 * len(repeated) and first.spent > 0 and second.spent == 0
    with sqlite3.connect(default_cache_path()) as db:
        requests = [json.loads(request) for (request,) in db.execute("SELECT request FROM replies")]
    samples = sorted((r["model"], r["messages"][-1]["content"], r["sample"]) for r in requests)
    assert samples == sorted((arm["model"], e["prompt"], n) for arm in arms for e in examples[:3] for n in (0, 1))


def test_cache_never_neither_reads_nor_writes_the_file(examples):
    server = FakeChatServer(answers(examples), prompt_tokens=PROMPT_TOKENS)
    try:
        for _ in range(2):
            asyncio.run(scorer(server, cache="never")(ARMS[1], examples[:2]))
    finally:
        server.close()
    assert server.received == 4 and not default_cache_path().exists()


def test_a_hit_is_graded_by_the_current_grader(examples):
    """A new grader re-grades the replies paid for: the good model's "4." is right for FirstWord, not ExactMatch."""
    server = FakeChatServer(answers(examples), prompt_tokens=PROMPT_TOKENS)
    try:
        scores, _ = asyncio.run(scorer(server)(ARMS[1], examples[:3]))
        regraded, usage = asyncio.run(scorer(server, grader=ExactMatch())(ARMS[1], examples[:3]))
    finally:
        server.close()
    assert scores.tolist() == [1.0] * 3 and regraded.tolist() == [0.0] * 3
    assert server.received == 3 and usage.cached == (True,) * 3 and usage.cost == 0


@pytest.mark.parametrize(
    ("contents", "message"),
    [
        (b"not an SQLite file at all, but long enough to be read as one" * 20, "cannot be used"),
        (None, r"is not a gittinseval response cache in format 1 \(its tables: runs; its format: 0\)"),
    ],
)
def test_a_file_that_is_not_a_cache_stops_the_call_before_it_is_sent(examples, tmp_path, contents, message):
    path = tmp_path / "cache.sqlite"
    if contents is None:
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE runs (id INTEGER)")
    else:
        path.write_bytes(contents)
    server = FakeChatServer(answers(examples))
    try:
        with pytest.raises(NonRetryableError, match=f"response cache {path} {message}.*delete it") as failure:
            asyncio.run(scorer(server, cache_path=path)(ARMS[1], examples[:2]))
    finally:
        server.close()
    assert server.received == 0 and failure.value.cost == 0
    with pytest.raises(ResponseCacheError, match=message):
        ResponseCache(path).info()


def test_a_folder_or_an_unwritable_place_is_refused_saying_how_to_run_on(tmp_path):
    with pytest.raises(ResponseCacheError, match="is a directory, not an SQLite file; set GITTINSEVAL_RESPONSE_CACHE"):
        ResponseCache(tmp_path).connect()
    (tmp_path / "file").write_text("")
    with pytest.raises(ResponseCacheError, match=r"cannot be opened \(.*\); .*task.score_fn.cache=never"):
        ResponseCache(tmp_path / "file" / "cache.sqlite").connect()  # its folder would be a file


def test_the_key_hashes_the_canonical_json_of_the_whole_request():
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2 + 2?"}]
    request = cache_request("auto", "http://a/v1", "m", messages, {"temperature": 0, "max_tokens": 4}, sample=3)
    assert request == {"format": 1, "endpoint": "http://a/v1", "model": "m", "messages": messages,
                       "settings": {"temperature": 0, "max_tokens": 4}}  # no sample index at temperature 0
    key = request_key(request)
    assert len(key) == 64 and key == request_key(json.loads(json.dumps(request, sort_keys=True)))
    assert key == request_key({**request, "settings": {"max_tokens": 4, "temperature": 0}})  # key order
    changed = [
        {**request, "endpoint": "http://b/v1"},
        {**request, "model": "n"},
        {**request, "messages": [messages[1]]},
        {**request, "messages": [messages[0], {"role": "user", "content": "2 + 3?"}]},
        {**request, "settings": {"temperature": 0, "max_tokens": 5}},
        {**request, "settings": {"temperature": 0, "max_tokens": 4, "seed": 1}},
    ]
    assert len({key, *map(request_key, changed)}) == 1 + len(changed)


def test_the_mode_decides_which_requests_are_cached_and_the_sample_index_which_entry():
    def key(mode, settings, sample=0):
        request = cache_request(mode, "http://a/v1", "m", [{"role": "user", "content": "q"}], settings, sample)
        return None if request is None else request_key(request)

    assert key("auto", {"temperature": 1.0}) is None and key("auto", {}) is None
    assert key("never", {"temperature": 0}) is None
    assert key("auto", {"temperature": 0.0}, 0) == key("auto", {"temperature": 0.0}, 1) == key("always",
                                                                                                {"temperature": 0.0})
    assert key("always", {"temperature": 1.0}, 0) != key("always", {"temperature": 1.0}, 1)
    assert key("always", {}, 0) != key("always", {}, 1)
    with pytest.raises(ValueError, match="cache must be one of auto, always, never, got 'sometimes'"):
        key("sometimes", {})
    with pytest.raises(ValueError, match="cache must be one of auto, always, never, got 'on'"):
        OpenAIChatScorer("http://a/v1", PRICES, cache="on")


def test_sample_numbers_count_the_examples_before_with_the_same_prompt_in_the_order_first_seen():
    numbers = SampleNumbers()
    a, b, a_again, c = {"q": "a"}, {"q": "b"}, {"q": "a"}, {"q": "a", "answer": "x"}
    assert [numbers.number(e, e["q"]) for e in (a, b, a_again, c)] == [0, 0, 1, 2]
    assert [numbers.number(e, e["q"]) for e in (c, a_again, a)] == [2, 1, 0]  # an example keeps its index


def test_chat_task_numbers_the_examples_in_the_tasks_order():
    examples = [{"prompt": "p", "answer": "1"}, {"prompt": "q", "answer": "2"}, {"prompt": "p", "answer": "3"}]
    task = chat_task(ARMS, examples, OpenAIChatScorer("http://a/v1", PRICES))
    samples = task.score_fn._samples
    # Asked in any order, each example has its rank among the task's examples with its prompt.
    assert [samples.number(e, e["prompt"]) for e in reversed(task.examples)] == [1, 0, 0]


def test_the_default_file_is_the_variable_else_under_xdg_cache_home_else_under_home_cache(monkeypatch, tmp_path):
    assert CACHE_ENV == RESPONSE_CACHE_ENV and os.environ[CACHE_ENV]  # the tests never touch the user's cache
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine.sqlite"))
    assert default_cache_path() == tmp_path / "mine.sqlite"
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_path() == tmp_path / "xdg" / "gittinseval" / "responses.sqlite"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_path() == tmp_path / "home" / ".cache" / "gittinseval" / "responses.sqlite"


def fill(path, n, prefix="key"):
    cache = ResponseCache(path)
    for i in range(n):
        request = {"endpoint": "http://a/v1", "model": f"model-{i % 2}"}
        cache.put(f"{prefix}-{i}", request, CachedReply("reply " * 50, 10, 3, 0, 0.001))
    cache.close()


def test_cache_info_reports_the_size_and_clear_empties_the_file(tmp_path, monkeypatch, capsys):
    path = tmp_path / "cache.sqlite"
    monkeypatch.setenv(CACHE_ENV, str(path))
    fill(path, 300)
    monkeypatch.setattr(sys, "argv", ["gittinseval-live", "cache", "info"])
    live_cli.main()
    head, *models = capsys.readouterr().out.splitlines()
    assert head.startswith(f"response cache {path}: 300 replies, ") and head.endswith("$0.3 when paid for")
    assert models == ["  model-0 at http://a/v1: 150", "  model-1 at http://a/v1: 150"]
    size = ResponseCache(path).info().size
    assert size > 300 * 250
    monkeypatch.setattr(sys, "argv", ["gittinseval-live", "cache", "clear", "--path", str(path)])
    live_cli.main()
    removed, head = capsys.readouterr().out.splitlines()
    assert removed == "removed 300 replies from the response cache"
    assert head.startswith(f"response cache {path}: 0 replies, ") and ResponseCache(path).info().size < size / 5
    assert ResponseCache(path).get("key-0") is None


def test_cache_info_of_a_file_that_is_not_a_cache_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE runs (id INTEGER)")
    monkeypatch.setattr(sys, "argv", ["gittinseval-live", "cache", "info", "--path", str(path)])
    with pytest.raises(SystemExit) as exit_:
        live_cli.main()
    error = capsys.readouterr().err
    assert exit_.value.code == 2 and error.count("\n") == 1
    assert error.startswith(f"gittinseval-live cache: error: response cache {path} is not a gittinseval response")


def _write_from_a_process(path, prefix):
    fill(path, 40, prefix)  # keys of its own
    fill(path, 40, "shared")  # keys every process writes at once: the first reply stays
    cache = ResponseCache(path)
    assert cache.get(f"{prefix}-39") is not None and cache.get("shared-0") is not None


def test_several_processes_write_one_file_at_once(tmp_path):
    path = tmp_path / "cache.sqlite"
    context = multiprocessing.get_context("fork")  # the test's own imports: no new interpreter to start
    processes = [context.Process(target=_write_from_a_process, args=(path, f"p{n}")) for n in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [process.exitcode for process in processes] == [0] * 4
    assert sum(ResponseCache(path).info().replies.values()) == 4 * 40 + 40
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_a_store_written_before_the_cached_column_exports_null_and_gets_the_column_when_opened(two_runs, tmp_path):
    _, _, stores, _ = two_runs
    old = tmp_path / "old.sqlite"
    shutil.copy(stores[1], old)
    with sqlite3.connect(old) as db:
        db.execute("ALTER TABLE usage DROP COLUMN cached")
    cells, attempts = store_tables(old)
    assert cells.column("cached").null_count == cells.num_rows == 40
    assert attempts.column("n_cached").null_count == attempts.num_rows
    RunStore(old).close()  # opening it for writing adds the column, NULL in the rows it had
    with sqlite3.connect(old) as db:
        assert db.execute("SELECT COUNT(*), COUNT(cached) FROM usage").fetchone() == (40, 0)
