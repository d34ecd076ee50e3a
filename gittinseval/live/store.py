"""Crash-safe SQLite record of a live evaluation run.

Tables (all written by the evaluator, readable by any SQLite client):

- ``settings(key, value)``: the run's settings as JSON values (prior, the
  policy's ``_target_`` under ``policy`` and each hyperparameter under
  ``policy.<name>``, cost unit, seed, number of examples, dataset digest); a
  store is resumed only with the same settings.
- ``meta(key, value)``: facts about the run that are not settings (the W&B run
  id), as JSON values.
- ``arms(arm, name, cost)``: the ``K`` arms and their expected cost per example.
- ``requests(id, arm, examples, issued_seq, issued_at, closed_seq, closed_at,
  outcome, cost)``: every issued request.  ``examples`` is a JSON list of example
  ids.  ``issued_seq`` and ``closed_seq`` number the run's events (issue, tell,
  cancel) in one sequence, so that a resumed run replays them in the order they
  happened; ``outcome`` is ``'told'`` or ``'cancelled'`` once closed (NULL while
  outstanding) and ``cost`` the money a told request actually cost.
- ``cells(arm, example, score, cost, time, request)``: every scored cell, with
  primary key ``(arm, example)`` so that no example of an arm is stored twice.

The database is in WAL mode with ``synchronous=FULL``: a tell is one
transaction that is on disk when :meth:`RunStore.tell` returns, so a crash or
SIGKILL never loses a told score.  One process at a time may hold a store for
writing: it takes an exclusive ``flock`` on ``<store>.lock`` (released when it
closes the store or exits); a second writer gets a :class:`StoreLockedError`.
A path of ``None`` keeps the run in memory.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["RunStore", "StoreLockedError", "StoredEvent", "StoredRequest", "describe_differences"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS arms (arm INTEGER PRIMARY KEY, name TEXT NOT NULL, cost REAL NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,
    arm INTEGER NOT NULL REFERENCES arms(arm),
    examples TEXT NOT NULL,
    issued_seq INTEGER NOT NULL UNIQUE,
    issued_at REAL NOT NULL,
    closed_seq INTEGER UNIQUE,
    closed_at REAL,
    outcome TEXT CHECK (outcome IN ('told', 'cancelled')),
    cost REAL
);
CREATE TABLE IF NOT EXISTS cells (
    arm INTEGER NOT NULL REFERENCES arms(arm),
    example INTEGER NOT NULL,
    score REAL NOT NULL,
    cost REAL NOT NULL,
    time REAL NOT NULL,
    request INTEGER NOT NULL REFERENCES requests(id),
    PRIMARY KEY (arm, example)
);
"""


class StoreLockedError(RuntimeError):
    """The store is open for writing in another process (or another evaluator)."""


@dataclass(frozen=True)
class StoredRequest:
    """One row of ``requests``; ``scores`` ``[size]`` and ``cost`` are set once told."""

    id: int
    arm: int
    examples: np.ndarray
    scores: np.ndarray | None = None
    cost: float | None = None


@dataclass(frozen=True)
class StoredEvent:
    """``kind`` (``"issue"``, ``"tell"`` or ``"cancel"``) of ``request``, in event order."""

    kind: str
    request: StoredRequest


def describe_differences(
    stored: tuple[dict[str, Any], Sequence[str], np.ndarray],
    given: tuple[dict[str, Any], Sequence[str], np.ndarray],
) -> list[str]:
    """Human-readable differences between two ``(settings, arm names, costs)`` triples."""
    (stored_settings, stored_names, stored_costs), (settings, names, costs) = stored, given
    lines = [
        f"{key}: store has {stored_settings.get(key)!r}, given {settings.get(key)!r}"
        for key in sorted(set(stored_settings) | set(settings))
        if stored_settings.get(key) != settings.get(key)
    ]
    if list(stored_names) != list(names):
        lines.append(f"arms: store has {len(stored_names)}, given {len(names)}")
        changed = [k for k in range(min(len(names), len(stored_names))) if stored_names[k] != names[k]]
        lines += [f"arm {k}: store has {stored_names[k]!r}, given {names[k]!r}" for k in changed[:5]]
    elif not np.array_equal(stored_costs, costs):
        changed = np.flatnonzero(stored_costs != costs)
        lines.append(f"costs differ for {changed.size} arms")
        lines += [
            f"cost of arm {k} ({names[k]!r}): store has {stored_costs[k]!r}, given {costs[k]!r}" for k in changed[:5]
        ]
    return lines


class RunStore:
    """The SQLite file of one run (see the module docstring for the tables and the lock)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else Path(path)
        self.lock_file = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.lock_file = _lock(self.path.with_name(self.path.name + ".lock"), self.path)
        # Autocommit mode: every write below opens its own explicit transaction.
        self.connection = sqlite3.connect(":memory:" if path is None else str(path), isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.execute("PRAGMA foreign_keys=ON")
        self.connection.executescript(SCHEMA)
        self.last_seq = self.connection.execute(
            "SELECT MAX(COALESCE(MAX(issued_seq), 0), COALESCE(MAX(closed_seq), 0)) FROM requests"
        ).fetchone()[0]

    def close(self) -> None:
        self.connection.close()
        if self.lock_file is not None:
            self.lock_file.close()  # closing the descriptor releases the flock
            self.lock_file = None

    def load_definition(self) -> tuple[dict[str, Any], list[str], np.ndarray] | None:
        """``(settings, arm names, costs)`` of the run, or ``None`` for a new store."""
        rows = self.connection.execute("SELECT key, value FROM settings").fetchall()
        if not rows:
            return None
        settings = {key: json.loads(value) for key, value in rows}
        arms = self.connection.execute("SELECT name, cost FROM arms ORDER BY arm").fetchall()
        return settings, [name for name, _ in arms], np.array([cost for _, cost in arms], dtype=np.float64)

    def define(
        self, settings: dict[str, Any], names: Sequence[str], costs: np.ndarray, meta: dict[str, Any] | None = None
    ) -> None:
        """Write the run's definition (and its first ``meta`` entries) into a new store."""
        with self._transaction() as cursor:
            cursor.executemany(
                "INSERT INTO meta VALUES (?, ?)", [(key, json.dumps(value)) for key, value in (meta or {}).items()]
            )
            cursor.executemany(
                "INSERT INTO settings VALUES (?, ?)", [(key, json.dumps(value)) for key, value in settings.items()]
            )
            cursor.executemany(
                "INSERT INTO arms VALUES (?, ?, ?)",
                [(k, name, float(c)) for k, (name, c) in enumerate(zip(names, costs, strict=True))],
            )

    def get_meta(self, key: str) -> Any:
        row = self.connection.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_meta(self, key: str, value: Any) -> None:
        with self._transaction() as cursor:
            cursor.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def issue(self, arm: int, examples: np.ndarray) -> int:
        """Record an issued request; returns its id."""
        with self._transaction() as cursor:
            cursor.execute(
                "INSERT INTO requests (arm, examples, issued_seq, issued_at) VALUES (?, ?, ?, ?)",
                (arm, json.dumps(examples.tolist()), self.last_seq + 1, time.time()),
            )
            request_id = int(cursor.lastrowid)
        self.last_seq += 1
        return request_id

    def tell(self, request_id: int, arm: int, examples: np.ndarray, scores: np.ndarray, cost: float) -> None:
        """Record the scores of an issued request and its cost, in one transaction."""
        now = time.time()
        cell_cost = cost / len(examples)
        with self._transaction() as cursor:
            self._close(cursor, request_id, "told", now, cost)
            cursor.executemany(
                "INSERT INTO cells VALUES (?, ?, ?, ?, ?, ?)",
                [(arm, int(e), float(s), cell_cost, now, request_id) for e, s in zip(examples, scores, strict=True)],
            )
        self.last_seq += 1

    def cancel(self, request_id: int) -> None:
        """Record that an issued request will not be told."""
        with self._transaction() as cursor:
            self._close(cursor, request_id, "cancelled", time.time(), None)
        self.last_seq += 1

    def _close(self, cursor: sqlite3.Cursor, request_id: int, outcome: str, now: float, cost: float | None) -> None:
        cursor.execute(
            "UPDATE requests SET closed_seq = ?, closed_at = ?, outcome = ?, cost = ? "
            "WHERE id = ? AND closed_seq IS NULL",
            (self.last_seq + 1, now, outcome, cost, request_id),
        )
        if cursor.rowcount != 1:
            raise ValueError(f"request {request_id} is not outstanding in the store")

    def events(self) -> list[StoredEvent]:
        """Every issue, tell and cancel of the run, in the order they happened."""
        scores = {
            (arm, example): score
            for arm, example, score in self.connection.execute("SELECT arm, example, score FROM cells")
        }
        rows = self.connection.execute(
            "SELECT id, arm, examples, issued_seq, closed_seq, outcome, cost FROM requests"
        ).fetchall()
        timeline = []
        for request_id, arm, examples_json, issued_seq, closed_seq, outcome, cost in rows:
            examples = np.array(json.loads(examples_json), dtype=np.int64)
            issued = StoredRequest(request_id, arm, examples)
            timeline.append((issued_seq, StoredEvent("issue", issued)))
            if outcome == "told":
                missing = [int(e) for e in examples if (arm, int(e)) not in scores]
                if missing:
                    raise ValueError(
                        f"store {self.path}: request {request_id} is told but cells {missing[:5]} are missing"
                    )
                values = np.array([scores[arm, int(e)] for e in examples], dtype=np.float64)
                timeline.append(
                    (closed_seq, StoredEvent("tell", StoredRequest(request_id, arm, examples, values, cost)))
                )
            elif outcome == "cancelled":
                timeline.append((closed_seq, StoredEvent("cancel", issued)))
        return [event for _, event in sorted(timeline, key=lambda item: item[0])]

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``, or ``ROLLBACK`` if the block raises."""
        cursor = self.connection.cursor()
        cursor.execute("BEGIN IMMEDIATE")
        try:
            yield cursor
        except BaseException:
            cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")


def _lock(lock_path: Path, store: Path):
    """An open file holding an exclusive ``flock`` on ``lock_path``, or a :class:`StoreLockedError`."""
    handle = open(lock_path, "a+")  # noqa: SIM115 - held open for the store's lifetime
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise StoreLockedError(
            f"store {store} is open for writing by another process ({holder}); wait for it to finish "
            "or stop it: two writers on one store would interleave their runs"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}\n")
    handle.flush()
    return handle
