"""Crash-safe SQLite record of a live evaluation run: what was asked, what was scored, what was paid.

Tables (all written by the evaluator, readable by any SQLite client):

- ``settings(key, value)``: the run's identity as JSON values: everything that
  makes a score or a selection (the scorer's ``_target_`` and settings, a digest
  of the examples' content, the policy's ``_target_`` and parameters, the prior,
  cost unit, seed, ...); a store is resumed only with the same settings
  (:mod:`gittinseval.live.store_identity`).
- ``meta(key, value)``: facts about the run that are not settings (the W&B run
  id, the raw budget a budget-planning policy plans for, the store it was forked
  from), as JSON values.
- ``arms(arm, name, cost)``: the ``K`` arms and their expected cost per example.
- ``requests(id, arm, examples, issued_seq, issued_at, closed_seq, closed_at,
  outcome, cost)``: every request the policy made.  ``examples`` is a JSON list of
  example ids; ``outcome`` is ``'told'`` or ``'cancelled'`` once closed (NULL while
  outstanding) and ``cost`` what a told request's attempts were charged.
- ``attempts(id, request, examples, expected, started_seq, started_at,
  finished_seq, finished_at, outcome, reported_cost, charged, charged_as_expected,
  error)``: the ledger, one row per scoring call, written *before* the call is
  sent (``examples``: the cells it asks for; ``expected``: their expected cost)
  and completed after it: ``outcome`` ``'scored'``, ``'failed'`` (with ``error``),
  or ``'lost'`` (the process ended before the outcome was recorded: marked when
  the store is next opened).  ``reported_cost`` is what the call reported (NULL:
  unknown), ``charged`` what the run counts (every attempt that may have reached
  the provider counts), and ``charged_as_expected`` the part of it charged at the
  expected cost because no cost was reported for calls that may have been billed.
  ``list_cost`` is what the call would have been charged had the response cache served none of its
  examples (its charge, plus its hits at their list price: :attr:`~gittinseval.live.usage.Usage.list_cost`),
  which the learned costs learn from; NULL (in a store written before it) reads as ``charged``.
- ``cells(arm, example, score, time, request, attempt)``: every scored cell, with
  primary key ``(arm, example)`` so that no example of an arm is stored twice.
  A batch that failed part-way keeps the cells it scored; the policy sees them
  when its request is complete.
- ``usage(attempt, example, dollars, tokens_in, tokens_out, tokens_reasoning, cached)``: what
  each example of a call was billed, for calls whose scorer reports it example by
  example (:class:`~gittinseval.live.usage.Usage`; token counts NULL where unknown;
  ``tokens_reasoning`` are a part of ``tokens_out``; ``cached`` 1 for a reply the
  response cache served, at 0 dollars, 0 for one the provider billed, NULL where the
  scorer does not say).  A store made before this table existed gets it, empty, when it
  is next opened, and one made before ``tokens_reasoning`` or ``cached`` gets the column,
  NULL in its rows: additions like these leave the format as it is, since an older store
  reads as one whose scorer reported less.

``issued_seq``, ``closed_seq``, ``started_seq`` and ``finished_seq`` number the
run's events in one sequence, so that a resumed run replays them in the order
they happened.  The database is in WAL mode with ``synchronous=FULL``: each
write is one transaction that is on disk when the method returns, so a crash or
SIGKILL never loses a scored cell or a charge.  One process at a time may hold
a store for writing: it takes an exclusive ``flock`` on ``<store>.lock``
(released when it closes the store or exits); a second writer gets a
:class:`StoreLockedError`.  A path of ``None`` keeps the run in memory.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gittinseval.live.usage import Usage
from gittinseval.utils.errors import UsageError

__all__ = [
    "STORE_FORMAT",
    "AttemptOutcome",
    "RunStore",
    "StoreLockedError",
    "StoredEvent",
    "StoredRequest",
]

STORE_FORMAT = 3

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
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY,
    request INTEGER NOT NULL REFERENCES requests(id),
    examples TEXT NOT NULL,
    expected REAL NOT NULL,
    started_seq INTEGER NOT NULL UNIQUE,
    started_at REAL NOT NULL,
    finished_seq INTEGER UNIQUE,
    finished_at REAL,
    outcome TEXT CHECK (outcome IN ('scored', 'failed', 'lost')),
    reported_cost REAL,
    charged REAL,
    charged_as_expected REAL,
    error TEXT,
    list_cost REAL
);
CREATE TABLE IF NOT EXISTS cells (
    arm INTEGER NOT NULL REFERENCES arms(arm),
    example INTEGER NOT NULL,
    score REAL NOT NULL,
    time REAL NOT NULL,
    request INTEGER NOT NULL REFERENCES requests(id),
    attempt INTEGER NOT NULL REFERENCES attempts(id),
    PRIMARY KEY (arm, example)
);
CREATE TABLE IF NOT EXISTS usage (
    attempt INTEGER NOT NULL REFERENCES attempts(id),
    example INTEGER NOT NULL,
    dollars REAL NOT NULL,
    tokens_in INTEGER,
    tokens_out INTEGER,
    tokens_reasoning INTEGER,
    cached INTEGER,
    PRIMARY KEY (attempt, example)
);
"""

ADDED_COLUMNS = {
    ("usage", "tokens_reasoning"): "INTEGER", ("usage", "cached"): "INTEGER", ("attempts", "list_cost"): "REAL",
}
"""Columns added to a table of :data:`SCHEMA` after stores of this format were written: ``(table, column)`` ->
type.  Opening an older store adds them (NULL in its rows); a reader of a store opened read-only finds them
missing (:func:`table_columns`)."""


def table_columns(connection: sqlite3.Connection, table: str) -> set[str]:
    """The columns of ``table`` in the connection's database (empty: no such table)."""
    return {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}


class StoreLockedError(UsageError, RuntimeError):
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
class AttemptOutcome:
    """A finished row of ``attempts``: its request, the cells it scored, what it was charged and, if its
    scorer reported it, what each of its ``examples`` was billed (``usage``)."""

    id: int
    request: int
    arm: int
    examples: np.ndarray
    expected: float
    outcome: str | None = None
    scored: dict[int, float] = field(default_factory=dict)
    reported_cost: float | None = None
    charged: float = 0.0
    charged_as_expected: float = 0.0
    error: str | None = None
    usage: Usage | None = None
    list_cost: float | None = None
    """What it would have been charged had the response cache served none of its examples; ``None``: ``charged``."""


@dataclass(frozen=True)
class StoredEvent:
    """``kind`` (``"issue"``, ``"attempt"``, ``"tell"`` or ``"cancel"``) of ``request`` (an
    :class:`AttemptOutcome` for ``"attempt"``), in event order."""

    kind: str
    request: StoredRequest | AttemptOutcome


class RunStore:
    """The SQLite file of one run (see the module docstring for the tables and the lock)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else Path(path)
        self.lock_file = None
        if self.path is not None:
            if self.path.is_dir():
                raise ValueError(f"store {self.path} is a directory; store= takes the path of an SQLite file")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.lock_file = _lock(self.path.with_name(self.path.name + ".lock"), self.path)
        try:
            # Autocommit mode: every write below opens its own explicit transaction.
            self.connection = sqlite3.connect(":memory:" if path is None else str(path), isolation_level=None)
            self.connection.execute("PRAGMA journal_mode=WAL")
        except sqlite3.DatabaseError as error:
            self._release_lock()
            raise ValueError(f"store {self.path} is not a gittinseval store (SQLite says: {error})") from None
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.execute("PRAGMA foreign_keys=ON")
        self._check_format()
        self.connection.executescript(SCHEMA)
        self._add_columns()
        self.last_seq = self.connection.execute(
            "SELECT MAX(COALESCE(MAX(issued_seq), 0), COALESCE(MAX(closed_seq), 0)) FROM requests"
        ).fetchone()[0]
        self.last_seq = max(
            self.last_seq,
            self.connection.execute(
                "SELECT MAX(COALESCE(MAX(started_seq), 0), COALESCE(MAX(finished_seq), 0)) FROM attempts"
            ).fetchone()[0],
        )

    def _check_format(self) -> None:
        """Refuse a store written in another format before anything is written to it."""
        tables = {name for (name,) in self.connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "settings" not in tables:
            return
        row = self.connection.execute("SELECT value FROM settings WHERE key = 'format'").fetchone()
        found = None if row is None else json.loads(row[0])
        if found != STORE_FORMAT:
            self.close()
            raise ValueError(
                f"store {self.path} is in format {found}, this gittinseval writes format {STORE_FORMAT} "
                "(an attempt ledger); start a new store (store=...)"
            )

    def _add_columns(self) -> None:
        """Add the :data:`ADDED_COLUMNS` a store written before them lacks (``CREATE TABLE IF NOT EXISTS`` does
        not)."""
        for (table, column), kind in ADDED_COLUMNS.items():
            if column not in table_columns(self.connection, table):
                self.connection.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

    def close(self) -> None:
        self.connection.close()
        self._release_lock()

    def _release_lock(self) -> None:
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

    def _next_seq(self) -> int:
        self.last_seq += 1
        return self.last_seq

    @contextmanager
    def _sequenced(self) -> Iterator[sqlite3.Cursor]:
        """A transaction whose sequence numbers are given back if it rolls back."""
        first = self.last_seq
        try:
            with self._transaction() as cursor:
                yield cursor
        except BaseException:
            self.last_seq = first
            raise

    def issue(self, arm: int, examples: np.ndarray) -> int:
        """Record an issued request; returns its id."""
        with self._sequenced() as cursor:
            cursor.execute(
                "INSERT INTO requests (arm, examples, issued_seq, issued_at) VALUES (?, ?, ?, ?)",
                (arm, json.dumps(examples.tolist()), self._next_seq(), time.time()),
            )
            return int(cursor.lastrowid)

    def start_attempt(self, request_id: int, examples: np.ndarray, expected: float) -> int:
        """Record a scoring call about to be sent for ``examples`` of a request; returns its id."""
        with self._sequenced() as cursor:
            return self._insert_attempt(cursor, request_id, examples, expected)

    def _insert_attempt(self, cursor: sqlite3.Cursor, request_id: int, examples: np.ndarray, expected: float) -> int:
        cursor.execute(
            "INSERT INTO attempts (request, examples, expected, started_seq, started_at) VALUES (?, ?, ?, ?, ?)",
            (request_id, json.dumps(examples.tolist()), float(expected), self._next_seq(), time.time()),
        )
        return int(cursor.lastrowid)

    def finish_attempt(self, outcome: AttemptOutcome, told_cost: float | None = None) -> int:
        """Record the outcome of an attempt, the cells it scored and its usage, in one transaction; with
        ``told_cost``, also close its request as told (it is complete) at that cost.

        An outcome whose ``id`` is ``-1`` was never started: its row is inserted with
        it (a tell of the ask/tell API, one call recorded at once).  Returns the attempt id.
        """
        now = time.time()
        with self._sequenced() as cursor:
            attempt_id = outcome.id
            if attempt_id == -1:
                attempt_id = self._insert_attempt(cursor, outcome.request, outcome.examples, outcome.expected)
            cursor.execute(
                "UPDATE attempts SET finished_seq = ?, finished_at = ?, outcome = ?, reported_cost = ?, charged = ?, "
                "charged_as_expected = ?, error = ?, list_cost = ? WHERE id = ? AND finished_seq IS NULL",
                (
                    self._next_seq(),
                    now,
                    outcome.outcome,
                    outcome.reported_cost,
                    outcome.charged,
                    outcome.charged_as_expected,
                    outcome.error,
                    outcome.list_cost,
                    attempt_id,
                ),
            )
            if cursor.rowcount != 1:
                raise ValueError(f"attempt {attempt_id} is not in flight in the store")
            cursor.executemany(
                "INSERT INTO cells VALUES (?, ?, ?, ?, ?, ?)",
                [(outcome.arm, e, s, now, outcome.request, attempt_id) for e, s in outcome.scored.items()],
            )
            if (usage := outcome.usage) is not None:
                bills = zip(
                    outcome.examples.tolist(),
                    usage.dollars,
                    usage.tokens_in,
                    usage.tokens_out,
                    usage.tokens_reasoning,
                    usage.cached,
                    strict=True,
                )
                cursor.executemany(
                    "INSERT INTO usage (attempt, example, dollars, tokens_in, tokens_out, tokens_reasoning, cached) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(attempt_id, *bill) for bill in bills],
                )
            if told_cost is not None:
                self._close(cursor, outcome.request, "told", now, told_cost)
        return attempt_id

    def cancel(self, request_id: int) -> None:
        """Record that an issued request will not be told."""
        with self._sequenced() as cursor:
            self._close(cursor, request_id, "cancelled", time.time(), None)

    def _close(self, cursor: sqlite3.Cursor, request_id: int, outcome: str, now: float, cost: float | None) -> None:
        cursor.execute(
            "UPDATE requests SET closed_seq = ?, closed_at = ?, outcome = ?, cost = ? "
            "WHERE id = ? AND closed_seq IS NULL",
            (self._next_seq(), now, outcome, cost, request_id),
        )
        if cursor.rowcount != 1:
            raise ValueError(f"request {request_id} is not outstanding in the store")

    def open_attempts(self) -> list[AttemptOutcome]:
        """The attempts started and never finished (the process ended in flight), oldest first."""
        rows = self.connection.execute(
            "SELECT a.id, a.request, r.arm, a.examples, a.expected FROM attempts a JOIN requests r ON r.id = a.request "
            "WHERE a.finished_seq IS NULL ORDER BY a.started_seq"
        ).fetchall()
        return [
            AttemptOutcome(attempt, request, arm, np.array(json.loads(examples), dtype=np.int64), expected)
            for attempt, request, arm, examples, expected in rows
        ]

    def events(self) -> list[StoredEvent]:
        """Every issue, finished attempt, tell and cancel of the run, in the order they happened."""
        cells: dict[int, dict[int, float]] = {}
        scores = {}
        for arm, example, score, attempt in self.connection.execute("SELECT arm, example, score, attempt FROM cells"):
            cells.setdefault(attempt, {})[example] = score
            scores[arm, example] = score
        timeline = []
        attempts = self.connection.execute(
            "SELECT a.id, a.request, r.arm, a.examples, a.expected, a.finished_seq, a.outcome, a.reported_cost, "
            "a.charged, a.charged_as_expected, a.error, a.list_cost FROM attempts a "
            "JOIN requests r ON r.id = a.request WHERE a.finished_seq IS NOT NULL"
        ).fetchall()
        for attempt, request, arm, examples, expected, seq, outcome, reported, charged, as_expected, error, listed in (
            attempts
        ):
            examples = np.array(json.loads(examples), dtype=np.int64)
            record = AttemptOutcome(
                attempt, request, arm, examples, expected, outcome, cells.get(attempt, {}), reported, charged,
                as_expected, error, list_cost=listed,
            )
            timeline.append((seq, StoredEvent("attempt", record)))
        rows = self.connection.execute(
            "SELECT id, arm, examples, issued_seq, closed_seq, outcome, cost FROM requests"
        ).fetchall()
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
