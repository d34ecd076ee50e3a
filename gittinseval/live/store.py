"""Crash-safe SQLite record of a live evaluation run.

Tables (all written by the evaluator, readable by any SQLite client):

- ``settings(key, value)``: the run's settings as JSON values (prior, policy
  hyperparameters, seed, number of examples, dataset digest).
- ``arms(arm, name, cost)``: the ``K`` arms and their expected cost per example.
- ``requests(id, arm, examples, issued_at, told_seq, told_at, cost)``: every
  issued request; ``examples`` is a JSON list of example ids, ``told_seq`` the
  1-based order in which requests were told (NULL while outstanding) and
  ``cost`` the money the request actually cost.
- ``cells(arm, example, score, cost, time, request)``: every scored cell, with
  primary key ``(arm, example)`` so that no example of an arm is stored twice.

The database is in WAL mode with ``synchronous=FULL``: a tell is one
transaction that is on disk when :meth:`RunStore.tell` returns, so a crash or
SIGKILL never loses a told score.  A path of ``None`` keeps the run in memory.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["RunStore", "StoredRequest", "describe_differences"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS arms (arm INTEGER PRIMARY KEY, name TEXT NOT NULL, cost REAL NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,
    arm INTEGER NOT NULL REFERENCES arms(arm),
    examples TEXT NOT NULL,
    issued_at REAL NOT NULL,
    told_seq INTEGER UNIQUE,
    told_at REAL,
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


@dataclass(frozen=True)
class StoredRequest:
    """One row of ``requests``; ``scores`` ``[size]`` and ``cost`` are set once told."""

    id: int
    arm: int
    examples: np.ndarray
    scores: np.ndarray | None = None
    cost: float | None = None


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
    """The SQLite file of one run (see the module docstring for the tables)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else Path(path)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode: every write below opens its own explicit transaction.
        self.connection = sqlite3.connect(":memory:" if path is None else str(path), isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.execute("PRAGMA foreign_keys=ON")
        self.connection.executescript(SCHEMA)

    def close(self) -> None:
        self.connection.close()

    def load_definition(self) -> tuple[dict[str, Any], list[str], np.ndarray] | None:
        """``(settings, arm names, costs)`` of the run, or ``None`` for a new store."""
        rows = self.connection.execute("SELECT key, value FROM settings").fetchall()
        if not rows:
            return None
        settings = {key: json.loads(value) for key, value in rows}
        arms = self.connection.execute("SELECT name, cost FROM arms ORDER BY arm").fetchall()
        return settings, [name for name, _ in arms], np.array([cost for _, cost in arms], dtype=np.float64)

    def define(self, settings: dict[str, Any], names: Sequence[str], costs: np.ndarray) -> None:
        """Write the run's definition into a new store."""
        with self._transaction() as cursor:
            cursor.executemany(
                "INSERT INTO settings VALUES (?, ?)", [(key, json.dumps(value)) for key, value in settings.items()]
            )
            cursor.executemany(
                "INSERT INTO arms VALUES (?, ?, ?)",
                [(k, name, float(c)) for k, (name, c) in enumerate(zip(names, costs, strict=True))],
            )

    def issue(self, arm: int, examples: np.ndarray) -> int:
        """Record an issued request; returns its id."""
        with self._transaction() as cursor:
            cursor.execute(
                "INSERT INTO requests (arm, examples, issued_at) VALUES (?, ?, ?)",
                (arm, json.dumps(examples.tolist()), time.time()),
            )
            return int(cursor.lastrowid)

    def tell(self, request_id: int, arm: int, examples: np.ndarray, scores: np.ndarray, cost: float) -> None:
        """Record the scores of an issued request and its cost, in one transaction."""
        now = time.time()
        cell_cost = cost / len(examples)
        with self._transaction() as cursor:
            cursor.execute(
                "UPDATE requests SET told_seq = (SELECT COALESCE(MAX(told_seq), 0) + 1 FROM requests), "
                "told_at = ?, cost = ? WHERE id = ? AND told_seq IS NULL",
                (now, cost, request_id),
            )
            if cursor.rowcount != 1:
                raise ValueError(f"request {request_id} is not outstanding in the store")
            cursor.executemany(
                "INSERT INTO cells VALUES (?, ?, ?, ?, ?, ?)",
                [(arm, int(e), float(s), cell_cost, now, request_id) for e, s in zip(examples, scores, strict=True)],
            )

    def told_requests(self) -> list[StoredRequest]:
        """Told requests with their scores, in the order they were told."""
        scores = {
            (arm, example): score
            for arm, example, score in self.connection.execute("SELECT arm, example, score FROM cells")
        }
        requests = self.connection.execute(
            "SELECT id, arm, examples, cost FROM requests WHERE told_seq IS NOT NULL ORDER BY told_seq"
        )
        told = []
        for request_id, arm, examples_json, cost in requests:
            examples = np.array(json.loads(examples_json), dtype=np.int64)
            values = np.array([scores[arm, int(e)] for e in examples], dtype=np.float64)
            told.append(StoredRequest(request_id, arm, examples, values, cost))
        return told

    def outstanding_requests(self) -> list[StoredRequest]:
        """Issued but untold requests, in the order they were issued."""
        rows = self.connection.execute(
            "SELECT id, arm, examples FROM requests WHERE told_seq IS NULL ORDER BY id"
        ).fetchall()
        return [StoredRequest(i, arm, np.array(json.loads(e), dtype=np.int64)) for i, arm, e in rows]

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
