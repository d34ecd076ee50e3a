"""A persistent cache of chat replies, shared by every run and store of a user: a request asked again is
answered from the reply already paid for.

The chat scorer (:class:`~gittinseval.live.tasks.chat.OpenAIChatScorer`) looks each request up before it
sends it.  Its key (:func:`request_key`) is the SHA-256 of the canonical JSON (sorted keys, no spaces) of
the whole request: the endpoint, the model, the messages (the arm's system prompt and the rendered user
prompt), every generation setting sent and, for a request at a temperature other than 0, its sample index
(:class:`SampleNumbers`).  A changed prompt, system message, setting or endpoint therefore misses, and the
n samples of one prompt at temperature 1 are n entries.  A hit's stored reply is graded with the scorer's
current grader, so a new grader re-grades the replies already paid for; it is charged $0, and the store's
``usage`` table and the export mark it ``cached``.

Which requests are cached (the scorer's ``cache``, one of :data:`CACHE_MODES`):

- ``auto`` (the default): requests at ``temperature: 0``, whose reply a second call would repeat;
- ``always``: every request, also above temperature 0 (or without a temperature: the provider's default,
  1): a rerun then gets back the samples drawn before, sample index by sample index;
- ``never``: none; the cache file is neither read nor written.

The file (:func:`default_cache_path`): ``$GITTINSEVAL_RESPONSE_CACHE`` if set, else
``$XDG_CACHE_HOME/gittinseval/responses.sqlite`` (``~/.cache`` when ``XDG_CACHE_HOME`` is unset).  It is
SQLite in WAL mode with a busy timeout, so that several runs, in several processes, read and write it at
once.  ``gittinseval-live cache info`` reports its size and ``gittinseval-live cache clear`` empties it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gittinseval.utils.errors import UsageError

__all__ = [
    "CACHE_ENV",
    "CACHE_MODES",
    "CacheInfo",
    "CachedReply",
    "ResponseCache",
    "ResponseCacheError",
    "SampleNumbers",
    "cache_request",
    "default_cache_path",
    "request_key",
]

log = logging.getLogger(__name__)

CACHE_ENV = "GITTINSEVAL_RESPONSE_CACHE"
"""The environment variable naming the cache file, over the default under the user's cache directory."""
CACHE_MODES = ("auto", "always", "never")
KEY_FORMAT = 1
"""Part of every key: a change of what a key covers makes every older entry miss rather than match wrongly."""
FILE_FORMAT = 1
"""The file's ``PRAGMA user_version``: a file of another format, or another SQLite file, is refused."""
BUSY_TIMEOUT = 30.0
"""Seconds a write waits for another process's write to the same file to finish."""
ELSEWHERE = (
    f"set {CACHE_ENV} (or the scorer's cache_path, task.score_fn.cache_path) to another file, or turn the cache off "
    "(task.score_fn.cache=never)"
)
"""How to run on without the file, in the errors that refuse it."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY,
    endpoint TEXT NOT NULL,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    reply TEXT NOT NULL,
    tokens_in INTEGER NOT NULL,
    tokens_out INTEGER NOT NULL,
    tokens_reasoning INTEGER NOT NULL,
    dollars REAL NOT NULL,
    stored_at REAL NOT NULL
);
"""


class ResponseCacheError(UsageError):
    """The cache file cannot be used (not a response cache, or SQLite cannot open it)."""


def default_cache_path() -> Path:
    """``$GITTINSEVAL_RESPONSE_CACHE`` if set, else ``$XDG_CACHE_HOME/gittinseval/responses.sqlite``, with
    ``~/.cache`` for an unset or empty ``XDG_CACHE_HOME`` (as the XDG base directory specification says)."""
    if path := os.environ.get(CACHE_ENV):
        return Path(path).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "gittinseval" / "responses.sqlite"


def cache_request(
    mode: str,
    endpoint: str,
    model: str,
    messages: Sequence[Mapping[str, str]],
    settings: Mapping[str, Any],
    sample: int,
) -> dict[str, Any] | None:
    """What a request's key covers: the endpoint, the model, the messages, the generation ``settings`` sent,
    and ``sample`` (its sample index) unless ``settings`` has ``temperature: 0``.  ``None`` when ``mode``
    leaves the request uncached: ``never``, or ``auto`` at another temperature."""
    if mode not in CACHE_MODES:
        raise ValueError(f"cache must be one of {', '.join(CACHE_MODES)}, got {mode!r}")
    deterministic = settings.get("temperature") == 0
    if mode == "never" or (mode == "auto" and not deterministic):
        return None
    request = {
        "format": KEY_FORMAT,
        "endpoint": endpoint,
        "model": model,
        "messages": [dict(message) for message in messages],
        "settings": dict(settings),
    }
    if not deterministic:
        request["sample"] = sample
    return request


def _canonical(request: Mapping[str, Any]) -> str:
    # A setting that is not JSON (a NumPy integer from Python code) is keyed by its text, as the store keys arms.
    return json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def request_key(request: Mapping[str, Any]) -> str:
    """The hex SHA-256 of the request's canonical JSON (sorted keys, no spaces, UTF-8)."""
    return hashlib.sha256(_canonical(request).encode()).hexdigest()


class SampleNumbers:
    """The sample index of each example's request: how many examples, in the order first seen, came before it
    with the same user prompt.

    Within one run a cell (an arm and an example) is scored once (a retry asks again only for a call that
    failed, which stored nothing), so one request is asked twice only when two examples render the same user
    prompt: at a temperature above 0 they are two samples and get two entries.  :func:`~gittinseval.live.
    tasks.chat.chat_task` shows the scorer the task's examples in their order, so the index is the example's
    rank among the task's examples with its prompt: the same in every run and fork on the same examples.
    Examples are told apart by identity (the driver hands the scorer the task's own objects), and kept
    referenced so that an identity is never reused.
    """

    def __init__(self) -> None:
        self._numbers: dict[int, tuple[Any, int]] = {}
        self._seen: Counter[str] = Counter()

    def number(self, example: Any, prompt: str) -> int:
        """The example's sample index (a new one, the next for ``prompt``, the first time it is seen)."""
        if (entry := self._numbers.get(id(example))) is None:
            entry = self._numbers[id(example)] = (example, self._seen[prompt])
            self._seen[prompt] += 1
        return entry[1]


@dataclass(frozen=True)
class CachedReply:
    """A stored reply: its text, its token usage (reasoning tokens a part of ``tokens_out``) and the dollars it
    cost when it was paid for."""

    reply: str
    tokens_in: int
    tokens_out: int
    tokens_reasoning: int
    dollars: float


@dataclass(frozen=True)
class CacheInfo:
    """What a cache file holds: ``replies`` per ``(endpoint, model)``, its ``size`` in bytes on disk (with its
    write-ahead log) and the ``dollars`` its replies cost when they were paid for."""

    path: Path
    replies: dict[tuple[str, str], int]
    size: int
    dollars: float

    def lines(self) -> list[str]:
        """The report of ``gittinseval-live cache info``: a line for the file, one per endpoint and model."""
        total = sum(self.replies.values())
        head = (
            f"response cache {self.path}: {total} repl{'y' if total == 1 else 'ies'}, {_size(self.size)} on disk, "
            f"${self.dollars:.6g} when paid for"
        )
        return [head, *(f"  {model} at {endpoint}: {n}" for (endpoint, model), n in sorted(self.replies.items()))]


def _size(size: int) -> str:
    """Bytes in decimal units: ``48.0 kB``."""
    for unit in ("bytes", "kB", "MB"):
        if size < 1000:
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


class ResponseCache:
    """The cache file at ``path`` (``None``: :func:`default_cache_path`), opened at its first use.

    ``hits`` and ``stored`` count the replies :meth:`get` found and :meth:`put` stored since the connection was
    opened.  One connection serves every thread of the process, one operation at a time; other processes wait
    for a write at most ``timeout`` seconds.
    """

    def __init__(self, path: str | Path | None = None, timeout: float = BUSY_TIMEOUT) -> None:
        self.path = default_cache_path() if path is None else Path(path).expanduser()
        self.timeout = float(timeout)
        self.hits = 0
        self.stored = 0
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.RLock()

    @property
    def lock(self) -> threading.RLock:
        """The lock of the connection: one operation at a time, whichever thread (the batch journal takes it too)."""
        return self._lock

    def connect(self) -> sqlite3.Connection:
        """The connection, opened (and the file created, in WAL mode) at the first call."""
        with self._lock:
            if self._connection is None:
                self._connection = self._open()
                self.hits = self.stored = 0
            return self._connection

    def _open(self) -> sqlite3.Connection:
        """A new connection to the file, checked to be a response cache of this format (created if new)."""
        if self.path.is_dir():
            raise ResponseCacheError(f"response cache {self.path} is a directory, not an SQLite file; {ELSEWHERE}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(
                str(self.path), timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as error:
            raise ResponseCacheError(f"response cache {self.path} cannot be opened ({error}); {ELSEWHERE}") from None
        elsewhere = f"delete it, or {ELSEWHERE}"
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("BEGIN IMMEDIATE")  # two processes creating the file: one creates, one checks
            tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            foreign = bool(tables) and (version != FILE_FORMAT or "replies" not in tables)
            if not tables:
                connection.execute(SCHEMA)
                connection.execute(f"PRAGMA user_version = {FILE_FORMAT}")
            connection.execute("COMMIT")
        except sqlite3.Error as error:
            connection.close()
            message = f"response cache {self.path} cannot be used (SQLite says: {error}); {elsewhere}"
            raise ResponseCacheError(message) from None
        if foreign:
            connection.close()
            raise ResponseCacheError(
                f"response cache {self.path} is not a gittinseval response cache in format {FILE_FORMAT} (its "
                f"tables: {', '.join(sorted(tables))}; its format: {version}); {elsewhere}"
            )
        return connection

    def get(self, key: str) -> CachedReply | None:
        """The reply stored under ``key``, or ``None`` (also, with a warning, when the file cannot be read now:
        the request is then sent, which costs what it would have without a cache)."""
        with self._lock:
            connection = self.connect()
            try:
                row = connection.execute(
                    "SELECT reply, tokens_in, tokens_out, tokens_reasoning, dollars FROM replies WHERE key = ?", (key,)
                ).fetchone()
            except sqlite3.Error as error:
                log.warning("response cache %s: not read (%s); the request is sent", self.path, error)
                return None
            if row is None:
                return None
            self.hits += 1
            return CachedReply(*row)

    def put(self, key: str, request: Mapping[str, Any], reply: CachedReply) -> None:
        """Store ``reply`` under ``key`` with the ``request`` it answers (:func:`cache_request`); a key already
        stored, by another process asking at the same time, keeps its first reply.  A write that fails (a disk
        full, another process holding the file past the timeout) is a warning: the reply is paid for and scored
        all the same, only not kept for the next run."""
        row = (key, request["endpoint"], request["model"], _canonical(request), reply.reply, reply.tokens_in,
               reply.tokens_out, reply.tokens_reasoning, reply.dollars, time.time())
        with self._lock:
            connection = self.connect()
            try:
                cursor = connection.execute("INSERT OR IGNORE INTO replies VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
            except sqlite3.Error as error:
                log.warning("response cache %s: a reply was not stored (%s)", self.path, error)
                return
            self.stored += cursor.rowcount

    def info(self) -> CacheInfo:
        """What the file holds (nothing, without creating it, when there is no file)."""
        if not self.path.exists():
            return CacheInfo(self.path, {}, 0, 0.0)
        with self._lock:
            connection = self.connect()
            counts = connection.execute("SELECT endpoint, model, COUNT(*) FROM replies GROUP BY endpoint, model")
            replies = {(endpoint, model): n for endpoint, model, n in counts}
            (dollars,) = connection.execute("SELECT COALESCE(SUM(dollars), 0) FROM replies").fetchone()
        return CacheInfo(self.path, replies, self._disk_size(), dollars)

    def clear(self) -> int:
        """Delete every stored reply and give the file's space back; returns how many replies there were."""
        if not self.path.exists():
            return 0
        with self._lock:
            connection = self.connect()
            removed = connection.execute("DELETE FROM replies").rowcount
            connection.execute("VACUUM")
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return removed

    def _disk_size(self) -> int:
        """Bytes of the file and its write-ahead log."""
        files = (self.path, self.path.with_name(self.path.name + "-wal"))
        return sum(file.stat().st_size for file in files if file.exists())

    def close(self) -> None:
        """Close the connection (the next use opens it again)."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
