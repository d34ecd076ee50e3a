"""The results store: every finished run reduced to one row, and Parquet files of rows kept with the code.

A run's *row* (:class:`RunRow`) holds what ``gittinseval-report`` needs from the run:
its summary (``summary.json``) and its regret curve on fixed grids of its budget.
Reports reduce every run to its row first, so a report from a store and one from the
sweep folders it was exported from go through the same code and agree number for number.

A *store* is one Parquet file (for example ``docs/results/mmlu_buckets.parquet``) with
one row per run, keyed by the run's ``config_digest``.  Summary fields whose values are
all of one scalar type (bool, int, float or str) are typed columns; nested values
(``benchmark_details``, ``hyperparameters``, ``diagnostics``) and columns that mix types
(``kappa`` given as ``1`` in one run and ``1.0`` in another) are JSON strings, so every
value reads back as the same Python value.  The curve is in the ``curve_*`` columns.
Runs are added to a store by :func:`export` (the command ``gittinseval-store export``).
"""

from __future__ import annotations

import functools
import json
import os
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock

from gittinseval.sim.simulator import REPORT_PERCENTS, RunResult, regret_at
from gittinseval.utils.text import count

__all__ = [
    "LOG_GRID_FLOOR",
    "RUN_GRID_POINTS",
    "RunRow",
    "export",
    "export_rows",
    "find_runs",
    "interpolate",
    "load_rows",
    "read_store",
    "run_grid",
    "stored_digests",
    "stored_run",
]

RUN_GRID_POINTS = 350
# The log grid's first node as a share of the budget: MMLU's first batches cost down to
# about 1e-6 of a 10 % budget (1500 arms, cost-aware prices).
LOG_GRID_FLOOR = 1e-7
# RunRow fields other than the summary, stored as curve_<name>.
CURVE_ARRAYS = ("linear", "log")
CURVE_POINTS = ("start_pct", "start_regret", "end_pct", "end_regret", "init_pct", "init_regret")
CURVE_PREFIX = "curve_"
FORMAT_KEY = b"gittinseval.results_store"
FORMAT_VERSION = "1"
JSON_COLUMNS_KEY = b"gittinseval.json_columns"
SCALAR_TYPES = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}


def run_grid(budget_fraction: float, grid_points: int = RUN_GRID_POINTS, log_grid: bool = False) -> np.ndarray:
    """``[G]`` nodes (cost in % of the exhaustive cost) of a run's curve.

    Linear: ``G`` points evenly spaced over ``[0, budget]`` (the paper's grid, its MMLU
    aggregate normalised to the budget); log: evenly spaced in log cost over
    ``[LOG_GRID_FLOOR * budget, budget]``, for figures on a log cost axis.
    """
    budget_pct = 100.0 * budget_fraction
    shares = np.geomspace(LOG_GRID_FLOOR, 1.0, grid_points) if log_grid else np.linspace(0.0, 1.0, grid_points)
    return budget_pct * shares


def interpolate(x: np.ndarray, y: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``y(x)`` linearly interpolated at ``grid``; NaN outside ``[x[0], x[-1]]`` (no extrapolation)."""
    values = np.interp(grid, x, y)
    values[(grid < x[0]) | (grid > x[-1])] = np.nan
    return values


@dataclass
class RunRow:
    """One run as reports see it: its summary and its regret curve.

    ``summary`` is the run's ``summary.json``, with ``n_steps`` and ``regret_at_<p>pct``
    (for every ``p`` of :data:`~gittinseval.sim.simulator.REPORT_PERCENTS`) taken from its trace.

    The curve, in cost % of the exhaustive cost: ``linear`` and ``log`` (``[G]`` each) are
    the regret linearly interpolated between batches at the nodes of :func:`run_grid`
    (NaN at nodes outside the run's cost range); ``start_*`` and ``end_*`` are the first
    and last batch, so the range is exact.  A configuration-level BO run (its
    hyperparameters name ``n_initial``) also has ``init_*``, the last batch of its random
    initial design, where its aggregated curve begins.  A run with no batch has ``None``
    points and NaN curves.
    """

    summary: dict[str, Any]
    linear: np.ndarray
    log: np.ndarray
    start_pct: float | None
    start_regret: float | None
    end_pct: float | None
    end_regret: float | None
    init_pct: float | None = None
    init_regret: float | None = None

    @classmethod
    def of(cls, run: RunResult, grid_points: int = RUN_GRID_POINTS) -> RunRow:
        """The row of ``run`` (its summary must name ``budget_fraction``)."""
        # Through JSON, as summary.json and the store hold it: a run in memory and the
        # same run read back give equal rows.
        summary = json.loads(json.dumps(run.summary))
        cost_pct, regret = run.trace["cost_pct"], run.trace["regret"]
        summary["n_steps"] = len(cost_pct)
        summary.update({f"regret_at_{p}pct": regret_at(cost_pct, regret, p) for p in REPORT_PERCENTS})
        if not len(cost_pct):
            nothing = np.full(grid_points, np.nan)
            return cls(summary, nothing, nothing.copy(), None, None, None, None)
        curves = {
            name: interpolate(cost_pct, regret, run_grid(summary["budget_fraction"], grid_points, name == "log"))
            for name in CURVE_ARRAYS
        }
        points = {
            "start_pct": float(cost_pct[0]), "start_regret": float(regret[0]),
            "end_pct": float(cost_pct[-1]), "end_regret": float(regret[-1]),
        }
        n_initial = (summary.get("hyperparameters") or {}).get("n_initial")
        if n_initial is not None:
            last_initial = min(int(n_initial), len(cost_pct)) - 1
            points |= {"init_pct": float(cost_pct[last_initial]), "init_regret": float(regret[last_initial])}
        return cls(summary, **curves, **points)

    @property
    def has_steps(self) -> bool:
        return self.start_pct is not None

    def grid(self, log_grid: bool) -> np.ndarray:
        """The nodes of :attr:`log` (``log_grid``) or :attr:`linear`."""
        return run_grid(self.summary["budget_fraction"], len(self.linear), log_grid)

    def points(self, log_grid: bool) -> tuple[np.ndarray, np.ndarray]:
        """The curve as ``(cost %, regret)``: the first batch, the nodes inside the run's range, the last batch."""
        nodes = self.grid(log_grid)
        inside = (nodes > self.start_pct) & (nodes < self.end_pct)
        values = (self.log if log_grid else self.linear)[inside]
        return (
            np.concatenate([[self.start_pct], nodes[inside], [self.end_pct]]),
            np.concatenate([[self.start_regret], values, [self.end_regret]]),
        )


def find_runs(sweep_dir: str | Path) -> list[RunResult]:
    """Every run (a directory with ``summary.json`` and its trace) under ``sweep_dir``."""
    sweep_dir = Path(sweep_dir)
    runs = [RunResult.load(p.parent) for p in sorted(sweep_dir.rglob("summary.json"))
            if RunResult.trace_path(p.parent) is not None]
    if not runs:
        raise FileNotFoundError(f"no runs (summary.json + trace.csv.gz) under {sweep_dir}")
    return runs


def _check_store_path(path: Path) -> None:
    if path.suffix != ".parquet":
        raise ValueError(f"a results store is a .parquet file, got {path}")


def load_rows(source: str | Path) -> list[RunRow]:
    """The rows of a sweep folder (every run under it) or of a results store (a ``.parquet`` file)."""
    source = Path(source)
    if source.suffix == ".parquet":
        if not source.is_file():
            raise FileNotFoundError(f"no results store at {source}")
        return read_store(source)
    if not source.is_dir():
        raise FileNotFoundError(f"{source} is neither a sweep folder nor a results store (.parquet)")
    return [RunRow.of(run) for run in find_runs(source)]


def _summary_column(values: list[Any]) -> tuple[pa.Array, bool]:
    """One summary field over the rows: a typed column if its values share a scalar type, else JSON."""
    kinds = {type(value) for value in values if value is not None}
    if len(kinds) == 1 and (kind := next(iter(kinds))) in SCALAR_TYPES:
        return pa.array(values, SCALAR_TYPES[kind]), False
    if not kinds:
        return pa.nulls(len(values), pa.null()), False
    return pa.array([None if value is None else json.dumps(value) for value in values], pa.string()), True


def _table(rows: list[RunRow]) -> pa.Table:
    names = list(dict.fromkeys(name for row in rows for name in row.summary))
    clashing = [name for name in names if name.startswith(CURVE_PREFIX)]
    if clashing:
        raise ValueError(f"summary fields {clashing} clash with the store's {CURVE_PREFIX}* columns")
    columns, json_columns = {}, []
    for name in names:
        columns[name], as_json = _summary_column([row.summary.get(name) for row in rows])
        if as_json:
            json_columns.append(name)
    sizes = {len(getattr(row, name)) for row in rows for name in CURVE_ARRAYS}
    if len(sizes) != 1:
        raise ValueError(f"curves of different sizes {sorted(sizes)} cannot share a store")
    (grid_points,) = sizes
    for name in CURVE_ARRAYS:
        values = pa.array(np.concatenate([getattr(row, name) for row in rows]), pa.float64())
        columns[CURVE_PREFIX + name] = pa.FixedSizeListArray.from_arrays(values, grid_points)
    for name in CURVE_POINTS:
        columns[CURVE_PREFIX + name] = pa.array([getattr(row, name) for row in rows], pa.float64())
    metadata = {FORMAT_KEY: FORMAT_VERSION.encode(), JSON_COLUMNS_KEY: json.dumps(json_columns).encode()}
    return pa.table(columns, metadata=metadata)


def _read_table(path: Path, columns: list[str] | None = None) -> pa.Table:
    """The table of the store at ``path`` (only ``columns``, if given); a file that is not a store is refused."""
    try:
        # One open file: an export that replaces the store meanwhile cannot mix two versions
        # (pyarrow reading by path may open it again after the footer).
        with open(path, "rb") as file:
            table = pq.read_table(file, columns=columns)
    except pa.ArrowException as error:
        reason = str(error).strip().splitlines()[0].rstrip(".")
        message = f"{path} is not a readable results store (a corrupt or truncated Parquet file: {reason})"
        raise ValueError(message) from None
    if (table.schema.metadata or {}).get(FORMAT_KEY) != FORMAT_VERSION.encode():
        raise ValueError(f"{path} is not a GittinsEval results store (format {FORMAT_VERSION})")
    return table


def read_store(path: str | Path) -> list[RunRow]:
    """Every row of the store at ``path``, in the order they were exported."""
    table = _read_table(Path(path))
    json_columns = set(json.loads(table.schema.metadata[JSON_COLUMNS_KEY]))
    names = [name for name in table.column_names if not name.startswith(CURVE_PREFIX)]
    fields = {}
    for name in names:
        values = table.column(name).to_pylist()
        fields[name] = [json.loads(v) if v is not None else None for v in values] if name in json_columns else values
    arrays = {
        name: table.column(CURVE_PREFIX + name).combine_chunks().flatten().to_numpy().reshape(table.num_rows, -1)
        for name in CURVE_ARRAYS
    }
    points = {name: table.column(CURVE_PREFIX + name).to_pylist() for name in CURVE_POINTS}
    return [
        RunRow(
            summary={name: fields[name][i] for name in names},
            **{name: arrays[name][i] for name in CURVE_ARRAYS},
            **{name: points[name][i] for name in CURVE_POINTS},
        )
        for i in range(table.num_rows)
    ]


def _write_atomic(rows: list[RunRow], path: Path) -> None:
    """Write the store to a temporary file beside ``path`` and rename it: readers see the old or the new file."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp's file is private (0600); a store is shared like any file of the repository.
        os.chmod(temporary, stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644)
        with os.fdopen(handle, "wb") as file:
            pq.write_table(_table(rows), file, compression="zstd")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def export_rows(rows: Iterable[RunRow], store: str | Path, *, replace: bool = False) -> tuple[int, int]:
    """Add to ``store`` every row whose ``config_digest`` it does not hold yet; ``(added, already stored)``.

    A run already stored is kept as it is, unless ``replace``: then every row is added and replaces the stored
    run of its digest (the same configs rerun with changed code), and the second number counts the stored runs
    replaced.  Of several rows with one digest the first counts.  Exports into one store from several processes
    at once are serialised by a lock file beside it (``<store>.lock``); the store is
    replaced whole, so a reader never sees half a file.
    """
    rows, store = list(rows), Path(store)
    _check_store_path(store)
    undigested = [row for row in rows if not row.summary.get("config_digest")]
    if undigested:
        first = undigested[0].summary
        raise ValueError(
            f"{count(len(undigested), 'run')} without a config_digest cannot be stored (saved by an older version; "
            f"the first: {first.get('label')} on {first.get('benchmark')}, seed {first.get('seed')})"
        )
    store.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{store}.lock"):
        stored = read_store(store) if store.exists() else []
        digests = set() if replace else {row.summary["config_digest"] for row in stored}
        added = []
        for row in rows:
            if row.summary["config_digest"] not in digests:
                digests.add(row.summary["config_digest"])
                added.append(row)
        if replace:
            kept = [row for row in stored if row.summary["config_digest"] not in digests]
            if added:
                _write_atomic(kept + added, store)
            return len(added), len(stored) - len(kept)
        if added:
            _write_atomic(stored + added, store)
    return len(added), len(rows) - len(added)


def export(sources: Iterable[str | Path], store: str | Path, *, replace: bool = False) -> tuple[int, int]:
    """Add the runs of ``sources`` (sweep folders and stores, read by :func:`load_rows`) to the store
    ``store`` (created if need be); ``(added, already stored)``, or with ``replace`` ``(added, replaced)``: see
    :func:`export_rows`."""
    return export_rows((row for source in sources for row in load_rows(source)), store, replace=replace)


def _file_version(path: Path) -> tuple[str, int, int, int] | None:
    """``path`` resolved, with the inode, mtime and size of the file there (``None`` if there is none)."""
    try:
        version = path.stat()
    except FileNotFoundError:
        return None
    return str(path.resolve()), version.st_ino, version.st_mtime_ns, version.st_size


@functools.lru_cache(maxsize=4)
def _store_index(path: str, inode: int, mtime_ns: int, size: int) -> dict[str, RunRow]:
    """The rows of a store by config digest; cached per version of the file (its inode, mtime and size)."""
    return {row.summary["config_digest"]: row for row in read_store(path)}


@functools.lru_cache(maxsize=4)
def _store_digests(path: str, inode: int, mtime_ns: int, size: int) -> frozenset[str]:
    """The config digests of a store, read from that column alone; cached per version of the file."""
    return frozenset(_read_table(Path(path), ["config_digest"]).column("config_digest").to_pylist())


def stored_run(store: str | Path, digest: str) -> RunRow | None:
    """The row of the run of config ``digest`` in ``store`` (``None`` if absent, or if there is no store yet).

    The store is read once per process and again only when the file changes.
    """
    path = Path(store)
    _check_store_path(path)
    version = _file_version(path)
    return None if version is None else _store_index(*version).get(digest)


def stored_digests(store: str | Path) -> frozenset[str]:
    """The config digests of the runs in ``store`` (none if there is no store yet).

    Reads only the digest column (a sweep asks before it launches anything), once per
    process and again only when the file changes.
    """
    path = Path(store)
    _check_store_path(path)
    version = _file_version(path)
    return frozenset() if version is None else _store_digests(*version)
