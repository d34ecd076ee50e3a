"""A user's own response matrix: ``.npy``, ``.npz`` or ``.csv``, with optional costs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from gittinseval.data.benchmark import Benchmark, validate_matrix, validate_prices

__all__ = ["load_matrix", "read_costs", "read_matrix"]


def _read_csv_numbers(path: Path) -> np.ndarray:
    """Numeric CSV, with or without a header row and an arm-name first column."""
    with open(path, newline="") as handle:
        rows = [row for row in csv.reader(handle) if row]
    if not rows:
        raise ValueError(f"{path}: the file is empty")

    def numeric(cells: list[str]) -> bool:
        try:
            [float(c) for c in cells]
        except ValueError:
            return False
        return True

    if not numeric(rows[0]):
        rows = rows[1:]
    if rows and not numeric(rows[0]) and numeric(rows[0][1:]):
        rows = [row[1:] for row in rows]
    widths = {len(row) for row in rows}
    if len(widths) != 1:
        raise ValueError(f"{path}: rows have different numbers of columns {sorted(widths)}")
    try:
        return np.array([[float(c) for c in row] for row in rows], dtype=np.float64)
    except ValueError as error:
        raise ValueError(f"{path}: non-numeric cell ({error})") from error


def read_matrix(path: str | Path) -> np.ndarray:
    """Read a ``[K, N]`` matrix from ``.npy``, ``.npz`` (key ``scores`` or the only array),
    ``.csv`` or ``.parquet`` (one row per arm; non-numeric columns such as arm names
    are ignored)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"response matrix not found: {path}")
    suffix = path.suffix.lower()
    if suffix in (".npy", ".npz"):
        try:
            loaded = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as error:
            raise ValueError(f"{path}: cannot read the matrix ({error})") from error
        if suffix == ".npy":
            return loaded
        with loaded as data:
            if "scores" in data.files:
                return data["scores"]
            if len(data.files) == 1:
                return data[data.files[0]]
            raise ValueError(f"{path}: several arrays {data.files} and none is named 'scores'")
    if suffix == ".csv":
        return _read_csv_numbers(path)
    if suffix == ".parquet":
        return _read_parquet_numbers(path)
    raise ValueError(f"{path}: unsupported matrix format {suffix!r}; use .npy, .npz, .csv or .parquet")


def _read_parquet_numbers(path: Path) -> np.ndarray:
    import pyarrow.parquet as pq
    import pyarrow.types as pt

    try:
        table = pq.read_table(path)
    except Exception as error:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise ValueError(f"{path}: cannot read the parquet file ({error})") from error
    columns = [f.name for f in table.schema if pt.is_integer(f.type) or pt.is_floating(f.type) or pt.is_boolean(f.type)]
    if not columns:
        raise ValueError(f"{path}: no numeric columns")
    return np.column_stack([table.column(c).to_numpy(zero_copy_only=False) for c in columns]).astype(np.float64)


def read_costs(path: str | Path) -> np.ndarray:
    """Per-arm costs from ``.npy``, ``.json`` (a list, or ``{"costs": [...]}``) or ``.csv``.

    A CSV may have a header; its last numeric column is taken.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"cost file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return np.load(path, allow_pickle=False).reshape(-1)
    if suffix == ".json":
        payload = json.loads(path.read_text())
        if isinstance(payload, dict):
            if "costs" not in payload:
                raise ValueError(f"{path}: a JSON object must have a 'costs' list")
            payload = payload["costs"]
        return np.asarray(payload, dtype=np.float64).reshape(-1)
    if suffix == ".csv":
        table = _read_csv_numbers(path)
        return table[:, -1]
    raise ValueError(f"{path}: unsupported cost format {suffix!r}; use .npy, .json or .csv")


def load_matrix(path: str, costs: str | None = None, name: str | None = None) -> Benchmark:
    """A :class:`Benchmark` from a matrix file and an optional per-arm cost file.

    Arms get one-hot configuration features (their own id).
    """
    scores = validate_matrix(read_matrix(path), str(path))
    prices = None if costs is None else validate_prices(read_costs(costs), scores.shape[0], str(costs))
    return Benchmark(
        name=name or Path(path).stem,
        scores=scores,
        prices=prices,
        source=str(path),
        license="user data",
    )
