"""Long tables of scored cells, one row per (arm, example): read, and turned into a response matrix.

A long table is a Parquet, CSV or JSON-lines file with at least the columns ``arm``,
``example`` and ``score``; ``gittinseval-live export`` writes one (its ``cells`` table),
with an ``arm_label``, the ``dollars`` each cell cost (its request's charge over its size)
and the ``billed_dollars`` its own call billed for it where the scorer reported them.
:func:`long_table_matrix` pivots it into the ``[K, N]`` matrix of
:class:`~gittinseval.data.Benchmark`: rows are the arms (sorted by their ``arm`` value),
columns the example ids (sorted), and, with a ``dollars`` column (or the one named by
``cost_column``), the per-cell costs of ``cost=per_cell``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pyarrow as pa

from gittinseval.utils.text import count

__all__ = ["LONG_FORMATS", "LONG_TABLE_COLUMNS", "is_long_table", "long_table_matrix", "read_long_table"]

LONG_FORMATS = {"parquet": ".parquet", "csv": ".csv", "jsonl": ".jsonl"}
"""The long tables' formats and their file suffixes."""
LONG_TABLE_COLUMNS = ("arm", "example", "score")
"""The columns that make a table a long table."""
COMPLETE_MODES = (None, "intersect")


def read_long_table(path: str | Path) -> pa.Table:
    """The table in a ``.parquet``, ``.csv`` or ``.jsonl`` file (a CSV's empty cells are nulls)."""
    import pyarrow.csv
    import pyarrow.json
    import pyarrow.parquet

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"table not found: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            return pyarrow.parquet.read_table(path)
        if suffix == ".csv":
            return pyarrow.csv.read_csv(path, convert_options=pyarrow.csv.ConvertOptions(strings_can_be_null=True))
        if suffix == ".jsonl":
            return pyarrow.json.read_json(path)
    except pa.ArrowException as error:
        raise ValueError(f"{path}: cannot read the table ({str(error).splitlines()[0]})") from None
    raise ValueError(f"{path}: unsupported table format {suffix!r}; use .parquet, .csv or .jsonl")


def is_long_table(path: str | Path) -> bool:
    """Whether ``path`` holds a long table: a ``.jsonl`` file, or a Parquet or CSV file whose
    columns include :data:`LONG_TABLE_COLUMNS`."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return True
    if suffix == ".parquet":
        import pyarrow.parquet

        try:
            names = pyarrow.parquet.read_schema(path).names
        except (OSError, pa.ArrowException):
            return False  # not a readable parquet file: the matrix reader names the problem
    elif suffix == ".csv":
        try:
            with open(path, newline="", encoding="utf-8-sig") as handle:
                names = [name.strip() for name in next(csv.reader(handle), [])]
        except (OSError, UnicodeDecodeError, csv.Error):
            return False  # missing, binary or not UTF-8: the matrix reader names the problem
    else:
        return False
    return set(LONG_TABLE_COLUMNS) <= set(names)


def long_table_matrix(
    path: str | Path, complete: str | None = None, cost_column: str | None = None
) -> tuple[np.ndarray, np.ndarray | None, tuple[str, ...], np.ndarray]:
    """``(scores [K, N], cell costs [K, N] or None, K arm names, N example ids)`` of a long table.

    Rows are the distinct ``arm`` values in sorted order, named by their ``arm_label``
    (else the value itself); columns the distinct ``example`` ids in sorted order.  The
    costs are the column ``cost_column`` (an error if it is absent or has an empty cell
    that is kept), by default the ``dollars`` column if there is one.  A cell given twice
    is an error, and so is a missing cell, unless ``complete="intersect"``: then only the
    examples that every arm has are kept.
    """
    if complete not in COMPLETE_MODES:
        raise ValueError(f"complete must be null (every cell is needed) or 'intersect', got {complete!r}")
    table = read_long_table(path)
    needed = LONG_TABLE_COLUMNS if cost_column is None else (*LONG_TABLE_COLUMNS, cost_column)
    absent = [name for name in needed if name not in table.column_names]
    if absent:
        raise ValueError(f"{path}: a long table needs the columns {list(needed)}; {absent} are missing")
    if table.num_rows == 0:
        raise ValueError(f"{path}: the table has no rows")
    column = {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}
    arms, arm_rows = np.unique(column["arm"], return_inverse=True)
    examples, example_columns = np.unique(column["example"], return_inverse=True)
    filled = np.zeros((arms.size, examples.size), dtype=np.int64)
    np.add.at(filled, (arm_rows, example_columns), 1)
    if (filled > 1).any():
        k, n = np.argwhere(filled > 1)[0]
        raise ValueError(f"{path}: arm {arms[k]} has {filled[k, n]} rows for example {examples[n]}; a cell is one row")
    labels = column.get("arm_label")
    names = tuple(str(arms[k] if labels is None else labels[np.argmax(arm_rows == k)]) for k in range(arms.size))
    scores = np.full(filled.shape, np.nan)
    scores[arm_rows, example_columns] = column["score"].astype(np.float64)
    costs = None
    cost_column = "dollars" if cost_column is None and "dollars" in column else cost_column
    if cost_column is not None:
        costs = np.full(filled.shape, np.nan)
        dollars = table.column(cost_column).cast(pa.float64())  # an all-empty column is read as nulls
        costs[arm_rows, example_columns] = dollars.to_numpy(zero_copy_only=False)
    kept = filled.all(axis=0)
    if not kept.all():
        if complete is None:
            missing = (filled == 0).sum(axis=1)
            short = np.flatnonzero(missing)
            per_arm = ", ".join(f"{names[k]}: {missing[k]}" for k in short[:5])
            per_arm += f", and {count(short.size - 5, 'more arm')}" if short.size > 5 else ""
            raise ValueError(
                f"{path}: {count(int(missing.sum()), 'cell')} of {filled.size} missing ({per_arm}); give "
                f"+benchmark.complete=intersect to keep the {int(kept.sum())} examples every arm has"
            )
        if not kept.any():
            raise ValueError(f"{path}: no example is scored for every arm; there is nothing to intersect")
    if costs is not None and np.isnan(costs[:, kept]).any():
        empty = int(np.isnan(costs[:, kept]).sum())
        raise ValueError(
            f"{path}: {count(empty, 'cell')} of {costs[:, kept].size} have no {cost_column} (a scorer that reports one "
            "cost per call, or a store made before per-example usage); use the dollars column"
        )
    return scores[:, kept], None if costs is None else costs[:, kept], names, examples[kept]
