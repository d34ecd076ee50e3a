"""The journal of the Batch API jobs a chat task submitted and has not collected: what makes batch mode resume-safe.

A chat task in ``mode: batch`` (:mod:`gittinseval.live.tasks.batch`) submits each scoring call's requests as one
Batch API job.  Before the job can be paid for, the journal holds it: the uploaded file's id is written right
after the upload and before the batch is created, and the batch's id right after its creation, before it is
polled.  A request is journaled by its key (:func:`~gittinseval.live.response_cache.request_key` of the whole
request, the sample index included above temperature 0, whatever the cache setting) with the job and the line
(``custom_id``) that carry it.  A line is pending until its result is handed to a scoring call
(:meth:`BatchJournal.take`), which charges it; it is then kept as taken (its ids and the time), so that a store
whose call was lost after the take knows that the line was billed.  A line that expired or failed, or whose
batch was refused, is dropped (it was not billed), so that a retry submits it anew.  A file is journaled only if
none of its requests has a pending line, checked in the same transaction (:meth:`BatchJournal.record_file`): of two
calls or processes asking a request at once, the second finds the first's line instead of submitting it again.

So a run killed between submitting and collecting (SIGKILL included) loses nothing: the resumed run, or any
run that asks the same request, finds its line pending and polls the same batch instead of submitting it again
(a job whose batch id was not recorded yet is looked up among the provider's batches by its file id, and created
only when none has it), and the provider's bill counts the request once.  Its store charged the call that was
in flight nothing for its requests that no batch billed (:meth:`BatchJournal.count_unbilled`: pending here, or
never journaled, so never in a batch; :func:`~gittinseval.live.replay.replay`): the pending ones are charged
their batch price by the call that collects them.  A resumed run that stops before it asks them again (its
budget spent) leaves them pending: the provider bills them, and the run that collects them is charged them.

The journal is two tables of the response cache's SQLite file (:mod:`gittinseval.live.response_cache`: a file per
user, in WAL mode, shared by every run and process), kept apart from its replies: it is used with every cache
setting, ``never`` included, and ``gittinseval-live cache clear`` leaves it.  Only ids are kept, never a key.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gittinseval.live.response_cache import ELSEWHERE, ResponseCache, ResponseCacheError

__all__ = ["BatchJournal", "PendingLine"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS batch_jobs (
    id INTEGER PRIMARY KEY,
    endpoint TEXT NOT NULL,
    file_id TEXT NOT NULL,
    batch_id TEXT,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS batch_lines (
    key TEXT PRIMARY KEY,
    job INTEGER NOT NULL REFERENCES batch_jobs(id),
    custom_id TEXT NOT NULL,
    taken REAL
);
"""


@dataclass(frozen=True)
class PendingLine:
    """A submitted request not yet collected: its ``job`` (a row of ``batch_jobs``), the job's uploaded
    ``file_id`` and ``batch_id`` (``None`` until the batch is created), and its line's ``custom_id``."""

    job: int
    file_id: str
    batch_id: str | None
    custom_id: str


class BatchJournal:
    """The ``batch_jobs`` and ``batch_lines`` tables of the file of ``cache`` (its connection and lock).

    Every method is one transaction, on disk when it returns (an error naming the file when it cannot be written:
    a job that cannot be journaled is not submitted)."""

    def __init__(self, cache: ResponseCache) -> None:
        self.cache = cache
        self._ready = False

    def _connection(self) -> sqlite3.Connection:
        """The cache file's connection, with the journal's tables (created at the first use)."""
        connection = self.cache.connect()
        if not self._ready:
            # Each table in its own statement: executescript would commit a transaction of the caller's.
            self._write(lambda db: [db.execute(table) for table in SCHEMA.split(";") if table.strip()], ready=True)
            self._ready = True
        return connection

    def _write(self, change, ready: bool = False):
        """``change(connection)`` in one transaction; its result."""
        with self.cache.lock:
            connection = self.cache.connect() if ready else self._connection()
            try:
                connection.execute("BEGIN IMMEDIATE")
                try:
                    result = change(connection)
                except BaseException:
                    connection.execute("ROLLBACK")
                    raise
                connection.execute("COMMIT")
            except sqlite3.Error as error:
                raise ResponseCacheError(
                    f"the batch journal in {self.cache.path} cannot be written ({error}); {ELSEWHERE}"
                ) from None
            return result

    def pending(self, keys: Iterable[str]) -> dict[str, PendingLine]:
        """The pending line of each of ``keys`` that has one."""
        connection = self._connection()
        with self.cache.lock:
            return self._pending(connection, keys)

    @staticmethod
    def _pending(db: sqlite3.Connection, keys: Iterable[str]) -> dict[str, PendingLine]:
        found = {}
        for key in set(keys):
            row = db.execute(
                "SELECT j.id, j.file_id, j.batch_id, l.custom_id FROM batch_lines l JOIN batch_jobs j "
                "ON j.id = l.job WHERE l.key = ? AND l.taken IS NULL", (key,)
            ).fetchone()
            if row is not None:
                found[key] = PendingLine(*row)
        return found

    def count_unbilled(self, keys: Sequence[str]) -> int:
        """How many of ``keys`` no batch billed to a call: those without a line (never in a batch: a line is
        journaled before its batch is created, and dropped only when it was not billed) or with a pending one."""
        connection = self._connection()
        with self.cache.lock:
            taken = [connection.execute("SELECT 1 FROM batch_lines WHERE key = ? AND taken IS NOT NULL",
                                        (key,)).fetchone() for key in keys]
        return sum(row is None for row in taken)

    def record_file(self, endpoint: str, file_id: str,
                    lines: Sequence[tuple[str, str]]) -> tuple[int | None, dict[str, PendingLine]]:
        """Journal an uploaded file of ``lines`` (``(key, custom_id)``) for ``endpoint``, before its batch is created,
        unless some of its keys have a pending line: ``(job's row, {})``, else ``(None, those pending lines)`` and
        nothing is journaled (the file's batch must not be created)."""

        def insert(db: sqlite3.Connection) -> tuple[int | None, dict[str, PendingLine]]:
            # Checked in the write's own transaction (BEGIN IMMEDIATE): of two processes asking the same request,
            # the second waits for the first's write and finds its pending line, so no request is submitted twice.
            if pending := self._pending(db, [key for key, _ in lines]):
                return None, pending
            job = db.execute(
                "INSERT INTO batch_jobs (endpoint, file_id, created_at) VALUES (?, ?, ?)",
                (endpoint, file_id, time.time()),
            ).lastrowid
            db.executemany("INSERT OR REPLACE INTO batch_lines VALUES (?, ?, ?, NULL)",
                           [(key, job, custom_id) for key, custom_id in lines])
            return int(job), {}

        return self._write(insert)

    def record_batch(self, job: int, batch_id: str) -> None:
        """Journal the batch created from the job's file, before it is polled."""
        self._write(lambda db: db.execute("UPDATE batch_jobs SET batch_id = ? WHERE id = ?", (batch_id, job)))

    def take(self, key: str, job: int) -> bool:
        """Mark the line of ``key`` in ``job`` taken as its result is handed to a scoring call: ``True`` when this
        call took it (and charges it), ``False`` when another call, of this process or another, did."""
        taken = "UPDATE batch_lines SET taken = ? WHERE key = ? AND job = ? AND taken IS NULL"
        return self._write(lambda db: db.execute(taken, (time.time(), key, job)).rowcount) == 1

    def drop(self, lines: Sequence[tuple[str, int]]) -> None:
        """Take lines ``(key, job)`` that expired or failed out of the journal: a retry submits them anew."""
        self._write(lambda db: self._remove(db, lines))

    def drop_job(self, job: int) -> None:
        """Take every line of ``job`` out of the journal: its batch was refused, and a retry submits them anew."""
        self._write(lambda db: self._remove(db, db.execute("SELECT key, job FROM batch_lines WHERE job = ?",
                                                           (job,)).fetchall()))

    @staticmethod
    def _remove(db: sqlite3.Connection, lines: Sequence[tuple[str, int]]) -> int:
        """Delete the lines, and the jobs left without one; how many lines were deleted."""
        removed = sum(db.execute("DELETE FROM batch_lines WHERE key = ? AND job = ?", line).rowcount for line in lines)
        db.execute("DELETE FROM batch_jobs WHERE id NOT IN (SELECT DISTINCT job FROM batch_lines)")
        return removed
