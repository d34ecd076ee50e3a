"""A user's own response matrix: ``.npy``, ``.npz``, ``.csv``, ``.parquet`` or a long table of cells, with optional
costs."""

from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from gittinseval.data.benchmark import Benchmark, validate_matrix, validate_prices
from gittinseval.data.long_table import is_long_table, long_table_matrix

__all__ = ["COST_FORMATS", "MATRIX_FORMATS", "load_matrix", "read_costs", "read_matrix"]


ARM_NAME_COLUMNS = ("arm", "arm_name", "name", "model", "config", "configuration")
"""Headers of a column of arm names, skipped in CSV and parquet matrices alike."""

MATRIX_FORMATS = (".npy", ".npz", ".csv", ".parquet")
"""The file formats of a response matrix (:func:`read_matrix`; a long table of cells is read as well)."""

COST_FORMATS = (".npy", ".json", ".csv")
"""The file formats of per-arm costs (:func:`read_costs`)."""


def _one_of(formats: tuple[str, ...]) -> str:
    return f"{', '.join(formats[:-1])} or {formats[-1]}"


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _read_csv_numbers(path: Path, other_formats: str = ".npy, .npz or .parquet") -> np.ndarray:
    """Numeric CSV, one row per arm, with or without a header row.

    A column of arm names is skipped: one whose header is in
    :data:`ARM_NAME_COLUMNS`, or a first column with no number in it.  Any other
    non-numeric cell is an error naming its row and column.
    """
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            rows = [row for row in csv.reader(handle) if row]
    except UnicodeDecodeError as error:
        # A binary file (an .npy or a spreadsheet renamed .csv) or a CSV saved in another encoding.
        raise ValueError(
            f"{path}: not a UTF-8 text CSV (byte {error.start} is {error.object[error.start:error.start + 1]!r}): "
            f"save it as CSV UTF-8, or give a {other_formats} file"
        ) from None
    except csv.Error as error:
        raise ValueError(f"{path}: not a CSV file ({error}); save it as CSV UTF-8") from None
    if not rows:
        raise ValueError(f"{path}: the file is empty")
    # A first row is a header if it has text beyond an arm-name column, or text
    # where the next row has a number.
    first = rows[0]
    has_header = not all(_is_number(cell) for cell in first[1:]) or (
        len(rows) > 1 and not _is_number(first[0]) and _is_number(rows[1][0])
    )
    header = [cell.strip() for cell in first] if has_header else None
    body = rows[1:] if header else rows
    widths = {len(row) for row in body} | ({len(header)} if header else set())
    if not body or len(widths) != 1:
        raise ValueError(f"{path}: rows have different numbers of columns {sorted(widths)}" if body
                         else f"{path}: no data rows")
    n_columns = widths.pop()
    names = header or [f"column {j + 1}" for j in range(n_columns)]
    skipped = {j for j, name in enumerate(names) if header and name.lower() in ARM_NAME_COLUMNS}
    if not any(_is_number(row[0]) for row in body):
        skipped.add(0)
    kept = [j for j in range(n_columns) if j not in skipped]
    matrix = np.empty((len(body), len(kept)))
    for i, row in enumerate(body):
        for position, j in enumerate(kept):
            try:
                matrix[i, position] = float(row[j])
            except ValueError:
                arm = f" ({row[min(skipped)]})" if skipped else ""
                line = i + 2 if header else i + 1
                raise ValueError(
                    f"{path}: line {line}, arm {i}{arm}, column {names[j]!r}: {row[j]!r} is not a number"
                ) from None
    return matrix


def read_matrix(path: str | Path) -> np.ndarray:
    """Read a ``[K, N]`` matrix from ``.npy``, ``.npz`` (key ``scores`` or the only array),
    ``.csv`` or ``.parquet`` (one row per arm; a column of arm names, see
    :data:`ARM_NAME_COLUMNS`, is skipped in both, as are parquet's text columns)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"response matrix not found: {path}")
    suffix = path.suffix.lower()
    if suffix in (".npy", ".npz"):
        loaded = _load_numpy(path, "the matrix", "a .csv or .parquet file")
        if suffix == ".npy":
            return loaded
        try:
            with loaded as data:
                if "scores" in data.files:
                    return data["scores"]
                if len(data.files) == 1:
                    return data[data.files[0]]
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:  # a damaged member of the archive
            raise ValueError(f"{path}: cannot read the matrix, a NumPy .npz archive that is damaged ({error}); "
                             "write it again with numpy.savez") from None
        raise ValueError(f"{path}: several arrays {data.files} and none is named 'scores'")
    if suffix == ".csv":
        return _read_csv_numbers(path)
    if suffix == ".parquet":
        return _read_parquet_numbers(path)
    raise ValueError(f"{path}: unsupported matrix format {suffix!r}; use {_one_of(MATRIX_FORMATS)}")


# The first bytes of each NumPy format, its name and its writer: np.load reads any other file as a
# pickle and refuses it as "pickled (object) data", with advice to allow pickles that misleads about
# a damaged or renamed file.
_NUMPY_FORMATS = {
    ".npy": ((b"\x93NUMPY",), "a NumPy .npy file", "numpy.save"),
    ".npz": ((b"PK\x03\x04", b"PK\x05\x06"), "a NumPy .npz archive", "numpy.savez"),
}


def _load_numpy(path: Path, what: str, others: str) -> Any:
    """``np.load`` of an ``.npy`` or ``.npz`` file without pickles, or a ``ValueError`` naming the file, what
    is wrong with it and how to write one (or a file of the ``others`` formats)."""
    magic, name, writer = _NUMPY_FORMATS[path.suffix.lower()]
    with open(path, "rb") as handle:
        start = handle.read(6)
    if not start.startswith(magic):
        raise ValueError(
            f"{path}: cannot read {what}: the file is not {name}; write it with {writer}, or give {others}"
        )
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(
            f"{path}: cannot read {what}, {name} that is damaged ({error}); write it again with {writer}"
        ) from None


def _read_parquet_numbers(path: Path) -> np.ndarray:
    import pyarrow.parquet as pq
    import pyarrow.types as pt

    try:
        table = pq.read_table(path)
    except Exception as error:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise ValueError(f"{path}: cannot read the parquet file ({error})") from error
    columns = [
        f.name
        for f in table.schema
        if (pt.is_integer(f.type) or pt.is_floating(f.type) or pt.is_boolean(f.type))
        and f.name.lower() not in ARM_NAME_COLUMNS
    ]
    if not columns:
        raise ValueError(f"{path}: no numeric columns")
    return np.column_stack([table.column(c).to_numpy(zero_copy_only=False) for c in columns]).astype(np.float64)


def read_costs(path: str | Path) -> np.ndarray:
    """Per-arm costs ``[K]`` from ``.npy``, ``.json`` (a list, or ``{"costs": [...]}``) or ``.csv``.

    A CSV has one row per arm, in the matrix's row order, and may have a header and a
    column of arm names (see :data:`ARM_NAME_COLUMNS`); its last numeric column is taken.
    A file that cannot be read is an error naming it.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"cost file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _read_csv_numbers(path, ".npy or .json")[:, -1]
    if suffix not in (".npy", ".json"):
        raise ValueError(f"{path}: unsupported cost format {suffix!r}; use {_one_of(COST_FORMATS)}")
    if suffix == ".npy":
        payload = _load_numpy(path, "the costs", "a .csv or .json file")
    else:
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise ValueError(f"{path}: cannot read the costs ({error})") from error
    if isinstance(payload, dict):
        if "costs" not in payload:
            raise ValueError(f"{path}: a JSON object must have a 'costs' list")
        payload = payload["costs"]
    try:
        return np.asarray(payload, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: the costs must be numbers, one per arm ({error})") from error


def load_matrix(
    path: str,
    costs: str | None = None,
    name: str | None = None,
    complete: str | None = None,
    cost_column: str | None = None,
) -> Benchmark:
    """A :class:`Benchmark` from a matrix file and an optional per-arm cost file.

    Arms get one-hot configuration features (their own id).  A long table of cells
    (:func:`~gittinseval.data.long_table.is_long_table`, e.g. the ``cells`` table of
    ``gittinseval-live export``) is pivoted by
    :func:`~gittinseval.data.long_table.long_table_matrix`: its arm labels name the arms,
    its ``dollars`` column (or the column ``cost_column``, e.g. ``billed_dollars``) gives the
    per-cell costs (``cost=per_cell``; each arm's price is its row mean), and
    ``complete="intersect"`` keeps only the examples every arm has where a missing cell
    would otherwise be an error.
    """
    if is_long_table(path):
        scores, cell_costs, names, examples = long_table_matrix(path, complete, cost_column)
        if cell_costs is not None and costs is not None:
            raise ValueError(f"{path}: the table's dollars are its per-cell costs; drop benchmark.costs={costs}")
        return Benchmark(
            name=name or Path(path).stem,
            scores=validate_matrix(scores, str(path)),
            prices=None if costs is None else validate_prices(read_costs(costs), scores.shape[0], str(costs)),
            cell_costs=cell_costs,
            arm_names=names,
            source=str(path),
            license="user data",
            details={"example_ids": examples},
        )
    for setting, value in (("complete", complete), ("cost_column", cost_column)):
        if value is not None:
            raise ValueError(f"{path}: {setting}= applies to a long table of cells (columns arm, example, score)")
    scores = validate_matrix(read_matrix(path), str(path))
    prices = None if costs is None else validate_prices(read_costs(costs), scores.shape[0], str(costs))
    return Benchmark(
        name=name or Path(path).stem,
        scores=scores,
        prices=prices,
        source=str(path),
        license="user data",
    )
