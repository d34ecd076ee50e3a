"""The crash-safe SQLite record of a live run (gittinseval.live.run_store), driven directly: its definition, its
events in the order they happened, the ledger's rows, the lock and the refusals, read back with plain SQL."""

import json
import os
import sqlite3

import numpy as np
import pytest

from gittinseval.live.run_store import STORE_FORMAT, AttemptOutcome, RunStore, StoreLockedError
from gittinseval.live.usage import Usage

SETTINGS = {"format": STORE_FORMAT, "seed": 3, "policy": {"_target_": "x.Y", "batch_size": 2}}


@pytest.fixture
def store(tmp_path):
    opened = RunStore(tmp_path / "run.sqlite")
    opened.define(SETTINGS, ["a", "b", "c"], np.array([0.5, 0.25, 1.0]), meta={"wandb_id": "w1"})
    yield opened
    opened.close()


def scored(attempt, request, arm, cells, charged, **fields):
    """The outcome of a call that scored ``cells`` ({example: score}) and was charged ``charged``."""
    examples = np.array(list(cells), dtype=np.int64)
    return AttemptOutcome(attempt, request, arm, examples, 0.0, "scored", dict(cells), charged=charged, **fields)


def test_a_new_store_has_no_definition_and_a_defined_one_reads_it_back(tmp_path):
    fresh = RunStore(tmp_path / "new.sqlite")
    assert fresh.load_definition() is None and fresh.events() == [] and fresh.last_seq == 0
    fresh.define(SETTINGS, ["a", "b"], np.array([0.5, 2.0]), meta={"forked_from": "old.sqlite"})
    settings, names, costs = fresh.load_definition()
    assert settings == SETTINGS and names == ["a", "b"] and costs.tolist() == [0.5, 2.0]
    assert fresh.get_meta("forked_from") == "old.sqlite" and fresh.get_meta("absent") is None
    fresh.set_meta("forked_from", {"path": "other"})  # replaced, as JSON
    assert fresh.get_meta("forked_from") == {"path": "other"}
    fresh.close()


def test_the_events_come_back_in_the_order_they_happened(store):
    first = store.issue(0, np.array([4, 1]))
    second = store.issue(2, np.array([0, 3]))
    attempt = store.start_attempt(first, np.array([4, 1]), expected=1.0)
    store.finish_attempt(scored(attempt, first, 0, {4: 1.0, 1: 0.0}, 0.9), told_cost=0.9)
    store.cancel(second)
    kinds = [(event.kind, event.request.id) for event in store.events()]
    assert kinds == [("issue", first), ("issue", second), ("attempt", attempt), ("tell", first), ("cancel", second)]
    tell = store.events()[3].request
    assert tell.examples.tolist() == [4, 1] and tell.scores.tolist() == [1.0, 0.0] and tell.cost == 0.9
    recorded = store.events()[2].request
    assert recorded.outcome == "scored" and recorded.scored == {4: 1.0, 1: 0.0} and recorded.charged == 0.9
    assert store.last_seq == 6  # issue, issue, start, finish, its tell, cancel: one number each
    with sqlite3.connect(store.path) as db:  # what any SQLite client reads
        assert db.execute("SELECT id, outcome, cost FROM requests ORDER BY id").fetchall() == [
            (first, "told", 0.9), (second, "cancelled", None)]
        assert sorted(db.execute("SELECT arm, example, score, attempt FROM cells")) == [
            (0, 1, 0.0, attempt), (0, 4, 1.0, attempt)]


def test_a_tell_without_a_started_call_and_a_call_with_each_examples_bill(store):
    request = store.issue(1, np.array([2, 5]))
    usage = Usage(dollars=(0.1, 0.3), tokens_in=(10, None), tokens_out=(2, None), tokens_reasoning=(1, None))
    attempt = store.finish_attempt(scored(-1, request, 1, {2: 1.0, 5: 1.0}, 0.4, usage=usage), told_cost=0.4)
    assert attempt > 0 and store.open_attempts() == []
    with sqlite3.connect(store.path) as db:
        assert db.execute("SELECT request, outcome, charged FROM attempts").fetchall() == [(request, "scored", 0.4)]
        assert db.execute(
            "SELECT example, dollars, tokens_in, tokens_out, tokens_reasoning FROM usage ORDER BY example"
        ).fetchall() == [(2, 0.1, 10, 2, 1), (5, 0.3, None, None, None)]


def test_calls_in_flight_are_listed_oldest_first_and_a_call_finishes_once(store):
    request = store.issue(0, np.array([0, 1, 2]))
    older = store.start_attempt(request, np.array([0, 1, 2]), expected=1.5)
    newer = store.start_attempt(request, np.array([2]), expected=0.5)
    assert [(a.id, a.arm, a.examples.tolist(), a.expected) for a in store.open_attempts()] == [
        (older, 0, [0, 1, 2], 1.5), (newer, 0, [2], 0.5)]
    failed = AttemptOutcome(older, request, 0, np.array([0, 1, 2]), 1.5, "failed", {0: 1.0}, charged=0.2,
                            error="HTTP 500")
    store.finish_attempt(failed)
    assert [a.id for a in store.open_attempts()] == [newer]
    seq = store.last_seq
    with pytest.raises(ValueError, match=f"attempt {older} is not in flight in the store"):
        store.finish_attempt(failed)
    assert store.last_seq == seq  # the failed write gave its sequence number back
    store.cancel(request)
    with pytest.raises(ValueError, match=f"request {request} is not outstanding in the store"):
        store.cancel(request)
    assert store.last_seq == seq + 1


def test_a_reopened_store_keeps_every_write_and_numbers_on(tmp_path, store):
    request = store.issue(0, np.array([0]))
    store.finish_attempt(scored(-1, request, 0, {0: 1.0}, 0.5), told_cost=0.5)
    seq = store.last_seq
    store.close()
    reopened = RunStore(store.path)
    assert reopened.last_seq == seq and reopened.load_definition()[1] == ["a", "b", "c"]
    assert [event.kind for event in reopened.events()] == ["issue", "attempt", "tell"]
    assert reopened.issue(1, np.array([0])) == request + 1 and reopened.last_seq == seq + 1
    reopened.close()


def test_a_told_request_whose_cells_are_gone_is_refused(store):
    request = store.issue(0, np.array([0, 1]))
    store.finish_attempt(scored(-1, request, 0, {0: 1.0, 1: 0.0}, 0.5), told_cost=0.5)
    store.connection.execute("DELETE FROM cells WHERE example = 1")
    with pytest.raises(ValueError, match=rf"store {store.path}: request {request} is told but cells \[1\] are missing"):
        store.events()


def test_one_writer_at_a_time_and_the_lock_names_its_holder(store):
    lock = store.path.with_name(store.path.name + ".lock")
    assert lock.read_text() == f"pid {os.getpid()}\n"
    with pytest.raises(StoreLockedError, match=rf"store {store.path} is open for writing by another process "
                                               rf"\(pid {os.getpid()}\)"):
        RunStore(store.path)
    store.close()
    RunStore(store.path).close()  # released on close


def test_what_is_not_a_store_of_this_format_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="is a directory; store= takes the path of an SQLite file"):
        RunStore(tmp_path)
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database, " * 200)
    with pytest.raises(ValueError, match=f"store {text} is not a gittinseval store"):
        RunStore(text)
    assert text.read_text() == "not a database, " * 200
    old = tmp_path / "old.sqlite"
    with sqlite3.connect(old) as db:
        db.execute("CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO settings VALUES ('format', ?)", (json.dumps(2),))
    with pytest.raises(ValueError, match=f"store {old} is in format 2, this gittinseval writes format {STORE_FORMAT}"):
        RunStore(old)
    with sqlite3.connect(old) as db:  # nothing was added to it
        assert [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["settings"]
    RunStore(old.with_name("after.sqlite")).close()  # and the refusals released their locks


def test_a_store_of_none_is_kept_in_memory():
    memory = RunStore(None)
    memory.define(SETTINGS, ["a", "b"], np.array([1.0, 1.0]))
    request = memory.issue(0, np.array([3]))
    assert memory.path is None and memory.lock_file is None and [e.kind for e in memory.events()] == ["issue"]
    assert request == 1
    memory.close()
