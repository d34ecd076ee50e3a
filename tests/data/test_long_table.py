"""Long tables of scored cells (gittinseval.data.long_table): read in each format, recognised by their columns, and
pivoted into the response matrix, against the cells written by hand."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet
import pytest

from gittinseval.data.long_table import LONG_FORMATS, is_long_table, long_table_matrix, read_long_table

# Three arms (written out of order) on examples 10, 20, 30: arm "b" misses example 20.
CELLS = [
    {"arm": "c", "example": 30, "score": 1.0, "arm_label": "gamma", "dollars": 0.3},
    {"arm": "a", "example": 20, "score": 0.0, "arm_label": "alpha", "dollars": 0.2},
    {"arm": "a", "example": 10, "score": 1.0, "arm_label": "alpha", "dollars": 0.1},
    {"arm": "b", "example": 10, "score": 0.5, "arm_label": "beta", "dollars": 0.4},
    {"arm": "c", "example": 10, "score": 0.0, "arm_label": "gamma", "dollars": 0.6},
    {"arm": "b", "example": 30, "score": 0.25, "arm_label": "beta", "dollars": 0.5},
    {"arm": "a", "example": 30, "score": 1.0, "arm_label": "alpha", "dollars": 0.7},
    {"arm": "c", "example": 20, "score": 1.0, "arm_label": "gamma", "dollars": 0.8},
]


def write(rows, path):
    """``rows`` (dicts) as a long table at ``path``, in the format of its suffix."""
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    elif path.suffix == ".csv":
        columns = list(rows[0])
        lines = [",".join(columns)] + [",".join("" if row[c] is None else str(row[c]) for c in columns) for row in rows]
        path.write_text("\n".join(lines) + "\n")
    else:
        pyarrow.parquet.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.mark.parametrize("suffix", list(LONG_FORMATS.values()))
def test_every_format_reads_back_the_cells_it_was_written_with(tmp_path, suffix):
    table = read_long_table(write(CELLS, tmp_path / f"cells{suffix}"))
    assert table.num_rows == len(CELLS)
    assert table.to_pylist() == [{key: pytest.approx(value) if isinstance(value, float) else value
                                  for key, value in row.items()} for row in CELLS]


def test_the_matrix_keeps_the_examples_every_arm_has_in_sorted_order(tmp_path):
    scores, costs, names, examples = long_table_matrix(write(CELLS, tmp_path / "cells.parquet"), complete="intersect")
    # Arms a, b, c (sorted values, named by their labels) on examples 10 and 30 (b has no 20).
    assert names == ("alpha", "beta", "gamma") and examples.tolist() == [10, 30]
    np.testing.assert_array_equal(scores, [[1.0, 1.0], [0.5, 0.25], [0.0, 1.0]])
    np.testing.assert_allclose(costs, [[0.1, 0.7], [0.4, 0.5], [0.6, 0.3]])


def test_a_missing_cell_is_refused_with_a_count_per_arm_unless_asked_to_intersect(tmp_path):
    path = write(CELLS, tmp_path / "cells.csv")
    with pytest.raises(ValueError, match=r"1 cell of 9 missing \(beta: 1\); give \+benchmark.complete=intersect "
                                         r"to keep the 2 examples every arm has"):
        long_table_matrix(path)
    with pytest.raises(ValueError, match="complete must be null"):
        long_table_matrix(path, complete="union")


def test_a_complete_table_without_costs_or_labels_is_named_by_its_arms(tmp_path):
    rows = [{"arm": arm, "example": example, "score": float(arm * example % 2)} for arm in (2, 0) for example in (5, 1)]
    scores, costs, names, examples = long_table_matrix(write(rows, tmp_path / "plain.jsonl"))
    assert costs is None and names == ("0", "2") and examples.tolist() == [1, 5]
    np.testing.assert_array_equal(scores, [[0.0, 0.0], [0.0, 0.0]])
    rows[0]["score"] = 0.75  # arm 2, example 5
    scores, *_ = long_table_matrix(write(rows, tmp_path / "plain.jsonl"))
    assert scores[1, 1] == 0.75


def test_a_cell_given_twice_an_absent_column_or_an_empty_cost_is_named(tmp_path):
    doubled = write([*CELLS, CELLS[0]], tmp_path / "twice.jsonl")
    with pytest.raises(ValueError, match="arm c has 2 rows for example 30; a cell is one row"):
        long_table_matrix(doubled, complete="intersect")
    scoreless = write([{k: v for k, v in row.items() if k != "score"} for row in CELLS], tmp_path / "noscore.jsonl")
    with pytest.raises(ValueError, match=r"a long table needs the columns \['arm', 'example', 'score'\]; \['score'\]"):
        long_table_matrix(scoreless)
    with pytest.raises(ValueError, match=r"\['billed_dollars'\] are missing"):
        long_table_matrix(write(CELLS, tmp_path / "cells.csv"), complete="intersect", cost_column="billed_dollars")
    unbilled = [dict(row, billed=None if row["arm"] == "c" else 1.0) for row in CELLS]
    with pytest.raises(ValueError, match="2 cells of 6 have no billed"):
        long_table_matrix(write(unbilled, tmp_path / "unbilled.csv"), complete="intersect", cost_column="billed")


def test_a_long_table_is_recognised_by_its_columns(tmp_path):
    assert is_long_table(write(CELLS, tmp_path / "cells.csv"))
    assert is_long_table(write(CELLS, tmp_path / "cells.parquet"))
    assert is_long_table(tmp_path / "anything.jsonl")  # JSON lines are only ever long tables
    matrix = tmp_path / "matrix.csv"
    matrix.write_text("q1,q2\n1,0\n0,1\n")
    assert not is_long_table(matrix)
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00arm")
    assert not is_long_table(binary) and not is_long_table(tmp_path / "missing.parquet")
    assert not is_long_table(tmp_path / "cells.npz")


def test_unreadable_tables_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="table not found"):
        read_long_table(tmp_path / "nowhere.csv")
    other = tmp_path / "cells.xlsx"
    other.write_text("x")
    with pytest.raises(ValueError, match=r"unsupported table format '.xlsx'; use .parquet, .csv or .jsonl"):
        read_long_table(other)
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet")
    with pytest.raises(ValueError, match=rf"{broken}: cannot read the table"):
        read_long_table(broken)
