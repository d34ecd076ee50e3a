"""A live run's store as two long tables, for the simulator (``benchmark=matrix``), a notebook or another tool.

:func:`export_store` reads a store (:mod:`gittinseval.live.run_store`) in one read-only
SQLite transaction, so the tables are one consistent snapshot even while a run writes to
the store, and writes

- ``<out>.cells.<format>``, one row per scored cell: ``arm`` (its index), ``arm_label``,
  ``arm_name`` (the arm as the store keys it: the name, or the settings as JSON), one
  column ``arm.<key>`` per setting of a mapping arm (``arm.model``, ``arm.temperature``,
  ...; a setting that is not a number, string or boolean as JSON text), ``example`` (its
  position in the task's examples), ``score``, ``dollars``, ``billed_dollars``,
  ``tokens_in``, ``tokens_out``, ``tokens_reasoning``, ``cached``, ``request``, ``attempt`` (the ledger row
  that scored it), ``attempt_number`` (1 for its request's first call) and ``time`` (Unix seconds
  when it was recorded);
- ``<out>.attempts.<format>``, the ledger, one row per scoring call: ``attempt``,
  ``request``, ``arm``, ``arm_label``, ``attempt_number``, ``examples`` (the ids it asked
  for, as a JSON list), ``n_examples``, ``status`` (``scored``, ``failed``, ``lost``, or
  null while in flight), ``expected_dollars``, ``reported_dollars`` (null: the call
  reported none), ``dollars`` (what the run charged), ``charged_as_expected``,
  ``billed_dollars``, ``tokens_in``, ``tokens_out``, ``tokens_reasoning`` and ``n_cached`` (the sums
  of the call's usage over its examples, failed calls included: null where it reported
  no usage, and a sum null where one example's count is unknown), ``started_at``, ``finished_at`` (Unix
  seconds) and ``error``.

Money is in the run's unit: dollars, or examples under ``cost=unit``.  The ledger's
``dollars`` sum to the run's spend.  A cell's ``dollars`` is its share of what its
request cost: the charges of all the request's calls (failed ones and retries included)
divided by its number of examples, so the cells of a complete request sum to its cost,
and the simulator replays a live request at what it cost.  ``billed_dollars``,
``tokens_in``, ``tokens_out`` and ``tokens_reasoning`` are what the call that scored the
cell reported for that example alone (:class:`~gittinseval.live.usage.Usage`: the chat
scorer and inspect tasks report it; input tokens count cached ones): null where it
reported one cost for the whole call, in a store made before the store kept usage, and,
for the tokens, where a count is unknown.  ``tokens_reasoning`` are a reasoning model's
hidden tokens, a part of ``tokens_out`` and of its dollars at the output price (counted
once: ``tokens_out`` already includes them); the chat scorer reports 0 for a reply
without them, inspect tasks and stores made before the column null.  Where every cell
has one, the ``billed_dollars`` of a run whose calls all succeeded sum to its spend; a
failed call's bill is in the cells' ``dollars`` (their request's share), not in the
``billed_dollars`` of the cells a retry scored.

``cached`` marks a cell whose reply the response cache served
(:mod:`gittinseval.live.response_cache`): its call billed it nothing (``billed_dollars`` 0),
and its tokens are those of the stored reply, billed to the run that first paid for it; a
call's ``n_cached`` counts its examples served so.  Both are null where the scorer does not
say (inspect tasks, a plain ``score_fn``) and in a store made before the column.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa

from gittinseval.data.long_table import LONG_FORMATS
from gittinseval.live.run_store import ADDED_COLUMNS, STORE_FORMAT, table_columns
from gittinseval.live.task import arm_labels_of_names
from gittinseval.utils.errors import UsageError

__all__ = ["export_store", "export_paths", "store_tables"]


def export_paths(out: str | Path, file_format: str) -> tuple[Path, Path]:
    """The ``(cells, attempts)`` files of an export to ``out``: ``<out>.cells.<ext>`` and ``<out>.attempts.<ext>``."""
    suffix = LONG_FORMATS[file_format]
    return Path(f"{out}.cells{suffix}"), Path(f"{out}.attempts{suffix}")


def _snapshot(path: Path) -> dict[str, list[tuple]]:
    """The rows of the store's tables, read in one transaction of a read-only connection."""
    if not path.is_file():
        raise FileNotFoundError(f"store not found: {path}")
    queries = {
        "arms": "SELECT arm, name FROM arms ORDER BY arm",
        "format": "SELECT value FROM settings WHERE key = 'format'",
        "attempts": "SELECT a.id, a.request, r.arm, a.examples, a.expected, a.started_at, a.finished_at, a.outcome, "
        "a.reported_cost, a.charged, a.charged_as_expected, a.error FROM attempts a "
        "JOIN requests r ON r.id = a.request ORDER BY a.started_seq",
        "requests": "SELECT id, examples FROM requests",
        "cells": "SELECT arm, example, score, time, request, attempt FROM cells ORDER BY arm, example",
        # A store made before the usage table has none (opening it for writing adds it, empty).
        "usage": "SELECT attempt, example, dollars, tokens_in, tokens_out, {tokens_reasoning}, {cached} FROM usage "
        "ORDER BY attempt, example",
    }
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error as error:
        raise UsageError(f"store {path} cannot be opened ({error})") from None
    try:
        connection.execute("BEGIN")  # deferred: one snapshot from the first read to the COMMIT, writers go on
        rows = {name: connection.execute(query).fetchall() for name, query in queries.items() if name != "usage"}
        columns = table_columns(connection, "usage")
        # A store made before an added column, not opened for writing since, lacks it: unknown values.
        added = {column: column if column in columns else "NULL" for table, column in ADDED_COLUMNS if table == "usage"}
        usage = queries["usage"].format(**added)
        rows["usage"] = connection.execute(usage).fetchall() if columns else []
        connection.execute("COMMIT")
    except sqlite3.Error as error:
        raise UsageError(f"store {path} is not a gittinseval store (SQLite says: {error})") from None
    finally:
        connection.close()
    found = json.loads(rows["format"][0][0]) if rows["format"] else None
    if found != STORE_FORMAT:
        raise UsageError(f"store {path} is in format {found}, this gittinseval reads format {STORE_FORMAT}")
    return rows


def _settings_columns(names: list[str]) -> dict[str, list[Any]]:
    """``arm.<key>`` columns ``[K]`` of the arms' settings (null where an arm lacks the key)."""
    settings = []
    for name in names:
        try:
            arm = json.loads(name) if name.startswith("{") else {}
        except json.JSONDecodeError:
            arm = {}
        settings.append(arm)
    keys = list(dict.fromkeys(key for arm in settings for key in arm))
    columns = {}
    for key in keys:
        values = [arm.get(key) for arm in settings]
        scalar = all(value is None or isinstance(value, str | int | float | bool) for value in values)
        kinds = {bool if isinstance(value, bool) else str if isinstance(value, str) else float
                 for value in values if value is not None}
        if not scalar or len(kinds) > 1:  # a column of one type in every format: the rest as JSON text
            values = [None if value is None else json.dumps(value, sort_keys=True) for value in values]
        columns[f"arm.{key}"] = values
    return columns


# (dollars, tokens_in, tokens_out, tokens_reasoning, cached) of a cell or call without usage rows.
_NO_BILL = (None, None, None, None, None)


def _sum_of_known(counts: tuple[int | None, ...]) -> int | None:
    """The sum, or ``None`` if one count is unknown: a partial sum would pass for the whole."""
    return None if None in counts else sum(counts)


def _call_bills(usage: list[tuple]) -> dict[int, tuple[float, int | None, int | None, int | None, int | None]]:
    """Per attempt with usage rows, ``(dollars, tokens_in, tokens_out, tokens_reasoning, n_cached)`` summed over
    its examples."""
    examples_bills: dict[int, list[tuple]] = defaultdict(list)
    for attempt, _, *bill in usage:
        examples_bills[attempt].append(bill)
    calls = {attempt: tuple(zip(*bills, strict=True)) for attempt, bills in examples_bills.items()}
    return {
        attempt: (sum(dollars), *(_sum_of_known(tokens) for tokens in counts))
        for attempt, (dollars, *counts) in calls.items()
    }


def store_tables(store: str | Path) -> tuple[pa.Table, pa.Table]:
    """The ``(cells, attempts)`` tables of a store (columns in the module docstring), from one snapshot."""
    rows = _snapshot(Path(store))
    names = [name for _, name in rows["arms"]]
    labels = arm_labels_of_names(names)
    size = {request: len(json.loads(examples)) for request, examples in rows["requests"]}
    charged: dict[int, float] = defaultdict(float)
    number: dict[int, int] = {}
    seen: dict[int, int] = defaultdict(int)
    for attempt, request, *_, cost, _, _ in rows["attempts"]:
        charged[request] += cost or 0.0
        seen[request] += 1
        number[attempt] = seen[request]
    ledger = rows["attempts"]
    call_bills = _call_bills(rows["usage"])
    ledger_bills = [call_bills.get(row[0], _NO_BILL) for row in ledger]
    attempts = pa.table({
        "attempt": pa.array([row[0] for row in ledger], pa.int64()),
        "request": pa.array([row[1] for row in ledger], pa.int64()),
        "arm": pa.array([row[2] for row in ledger], pa.int64()),
        "arm_label": pa.array([labels[row[2]] for row in ledger], pa.string()),
        "attempt_number": pa.array([number[row[0]] for row in ledger], pa.int64()),
        "examples": pa.array([row[3] for row in ledger], pa.string()),
        "n_examples": pa.array([len(json.loads(row[3])) for row in ledger], pa.int64()),
        "status": pa.array([row[7] for row in ledger], pa.string()),
        "expected_dollars": pa.array([row[4] for row in ledger], pa.float64()),
        "reported_dollars": pa.array([row[8] for row in ledger], pa.float64()),
        "dollars": pa.array([row[9] for row in ledger], pa.float64()),
        "charged_as_expected": pa.array([row[10] for row in ledger], pa.float64()),
        "billed_dollars": pa.array([bill[0] for bill in ledger_bills], pa.float64()),
        "tokens_in": pa.array([bill[1] for bill in ledger_bills], pa.int64()),
        "tokens_out": pa.array([bill[2] for bill in ledger_bills], pa.int64()),
        "tokens_reasoning": pa.array([bill[3] for bill in ledger_bills], pa.int64()),
        "n_cached": pa.array([bill[4] for bill in ledger_bills], pa.int64()),
        "started_at": pa.array([row[5] for row in ledger], pa.float64()),
        "finished_at": pa.array([row[6] for row in ledger], pa.float64()),
        "error": pa.array([row[11] for row in ledger], pa.string()),
    })
    cells = rows["cells"]
    bills = {(attempt, example): bill for attempt, example, *bill in rows["usage"]}
    cell_bills = [bills.get((row[5], row[1]), _NO_BILL) for row in cells]
    settings = _settings_columns(names)
    cells_table = pa.table({
        "arm": pa.array([row[0] for row in cells], pa.int64()),
        "arm_label": pa.array([labels[row[0]] for row in cells], pa.string()),
        "arm_name": pa.array([names[row[0]] for row in cells], pa.string()),
        **{key: pa.array([values[row[0]] for row in cells]) for key, values in settings.items()},
        "example": pa.array([row[1] for row in cells], pa.int64()),
        "score": pa.array([row[2] for row in cells], pa.float64()),
        "dollars": pa.array([charged[row[4]] / size[row[4]] for row in cells], pa.float64()),
        "billed_dollars": pa.array([bill[0] for bill in cell_bills], pa.float64()),
        "tokens_in": pa.array([bill[1] for bill in cell_bills], pa.int64()),
        "tokens_out": pa.array([bill[2] for bill in cell_bills], pa.int64()),
        "tokens_reasoning": pa.array([bill[3] for bill in cell_bills], pa.int64()),
        "cached": pa.array([None if bill[4] is None else bool(bill[4]) for bill in cell_bills], pa.bool_()),
        "request": pa.array([row[4] for row in cells], pa.int64()),
        "attempt": pa.array([row[5] for row in cells], pa.int64()),
        "attempt_number": pa.array([number[row[5]] for row in cells], pa.int64()),
        "time": pa.array([row[3] for row in cells], pa.float64()),
    })
    return cells_table, attempts


def _write(table: pa.Table, path: Path, file_format: str) -> None:
    import pyarrow.csv
    import pyarrow.parquet

    path.parent.mkdir(parents=True, exist_ok=True)
    if file_format == "parquet":
        pyarrow.parquet.write_table(table, path)
    elif file_format == "csv":
        pyarrow.csv.write_csv(table, path)
    else:
        with open(path, "w") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in table.to_pylist())


def export_store(store: str | Path, file_format: str, out: str | Path | None = None) -> tuple[Path, Path]:
    """Write the store's cells and attempts tables (:func:`store_tables`) as ``file_format`` (``parquet``,
    ``csv`` or ``jsonl``) to :func:`export_paths` of ``out`` (default: the store's path without its suffix);
    returns the two paths."""
    if file_format not in LONG_FORMATS:
        raise UsageError(f"format must be one of {', '.join(LONG_FORMATS)}, got {file_format!r}")
    store = Path(store)
    tables = store_tables(store)
    paths = export_paths(store.with_suffix("") if out is None else out, file_format)
    for table, path in zip(tables, paths, strict=True):
        _write(table, path, file_format)
    return paths
