"""The generic matrix and cost readers (gittinseval/data/matrix.py)."""

import json
import re

import numpy as np
import pytest

from gittinseval.data import load_matrix, read_costs
from gittinseval.data.matrix import read_matrix


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".csv", ".parquet"])
def test_matrix_reader_round_trips(tmp_path, suffix):
    rng = np.random.default_rng(1)
    matrix = rng.uniform(size=(5, 9)).round(6)
    path = tmp_path / f"m{suffix}"
    if suffix == ".npy":
        np.save(path, matrix)
    elif suffix == ".npz":
        np.savez(path, scores=matrix, other=np.zeros(2))
    elif suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        columns = {"arm": [f"arm{k}" for k in range(5)]} | {f"q{j}": matrix[:, j] for j in range(9)}
        pq.write_table(pa.table(columns), path)
    else:
        lines = ["arm," + ",".join(f"q{j}" for j in range(9))]
        lines += [f"arm{k}," + ",".join(map(str, row)) for k, row in enumerate(matrix)]
        path.write_text("\n".join(lines) + "\n")
    benchmark = load_matrix(str(path))
    np.testing.assert_array_equal(benchmark.scores, matrix)
    assert benchmark.prices is None
    np.testing.assert_array_equal(benchmark.features[:, 0], np.arange(5))


@pytest.mark.parametrize("suffix", [".npy", ".json", ".csv"])
def test_cost_reader_round_trips(tmp_path, suffix):
    costs = np.array([0.5, 1.25, 3.0])
    path = tmp_path / f"c{suffix}"
    if suffix == ".npy":
        np.save(path, costs)
    elif suffix == ".json":
        path.write_text(json.dumps({"costs": costs.tolist()}))
    else:
        path.write_text("arm,price\na,0.5\nb,1.25\nc,3.0\n")
    np.testing.assert_array_equal(read_costs(path), costs)


def test_nan_rows_are_named(tmp_path):
    matrix = np.full((6, 4), 0.5)
    matrix[2, 1] = np.nan
    matrix[5, 0] = np.inf
    np.save(tmp_path / "bad.npy", matrix)
    with pytest.raises(ValueError, match=r"bad.npy: the matrix has NaN or infinite scores in 2 rows \(rows \[2, 5\]\)"):
        load_matrix(str(tmp_path / "bad.npy"))


@pytest.mark.parametrize(
    "matrix, message",
    [
        (np.full((2, 3), 1.5), "scores must lie in \\[0, 1\\]; rows \\[0, 1\\]"),
        (np.zeros(4), "expected a non-empty 2-D arms x examples matrix, got shape \\(4,\\)"),
        (np.zeros((0, 3)), "non-empty 2-D"),
    ],
)
def test_malformed_matrices_are_rejected(tmp_path, matrix, message):
    path = tmp_path / "m.npy"
    np.save(path, matrix)
    with pytest.raises(ValueError, match=message):
        load_matrix(str(path))


def test_bad_files_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="response matrix not found"):
        load_matrix(str(tmp_path / "missing.npy"))
    (tmp_path / "m.txt").write_text("1,2")
    with pytest.raises(ValueError, match="unsupported matrix format '.txt'; use .npy, .npz, .csv or .parquet"):
        load_matrix(str(tmp_path / "m.txt"))
    (tmp_path / "ragged.csv").write_text("0,1,0\n1,0\n")
    with pytest.raises(ValueError, match="ragged.csv: rows have different numbers of columns"):
        load_matrix(str(tmp_path / "ragged.csv"))
    (tmp_path / "junk.npy").write_bytes(b"not a numpy file")
    with pytest.raises(ValueError, match="junk.npy: cannot read the matrix"):
        load_matrix(str(tmp_path / "junk.npy"))


def test_bad_costs_are_rejected(tmp_path):
    np.save(tmp_path / "m.npy", np.full((3, 4), 0.5))
    np.save(tmp_path / "short.npy", np.ones(2))
    with pytest.raises(ValueError, match="short.npy: 2 prices for 3 arms; give one price per arm"):
        load_matrix(str(tmp_path / "m.npy"), costs=str(tmp_path / "short.npy"))
    np.save(tmp_path / "zero.npy", np.array([1.0, 0.0, 2.0]))
    with pytest.raises(ValueError, match="zero.npy: costs must be positive and finite; bad arms \\[1\\]"):
        load_matrix(str(tmp_path / "m.npy"), costs=str(tmp_path / "zero.npy"))


@pytest.mark.parametrize(
    "text",
    [
        "arm,q1,q2,q3\narm0,1,0,1\narm1,0,0,1\n",  # named first column of text
        "q1,q2,q3,name\n1,0,1,arm0\n0,0,1,arm1\n",  # named last column
        "model,q1,q2,q3\n0,1,0,1\n1,0,0,1\n",  # numeric arm ids under a name header
        "x0,1,0,1\nx1,0,0,1\n",  # no header, unnamed text column
    ],
)
def test_csv_arm_name_columns_are_skipped(tmp_path, text):
    path = tmp_path / "m.csv"
    path.write_text(text)
    np.testing.assert_array_equal(read_matrix(path), [[1, 0, 1], [0, 0, 1]])


def test_parquet_skips_the_same_arm_name_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "m.parquet"
    pq.write_table(pa.table({"arm": [0, 1], "label": ["a", "b"], "q1": [1.0, 0.0], "q2": [0.0, 1.0]}), path)
    np.testing.assert_array_equal(read_matrix(path), [[1, 0], [0, 1]])


def test_a_non_numeric_cell_names_its_row_and_column(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("arm,q1,q2,q3\narm0,1,0,1\narm1,0,NA,1\n")
    with pytest.raises(ValueError, match=r"line 3, arm 1 \(arm1\), column 'q2': 'NA' is not a number"):
        read_matrix(path)


@pytest.mark.parametrize(
    "name, content, problem",
    [
        ("truncated.json", b"[1, 2,", "cannot read the costs \\(Expecting value"),
        ("words.json", b'{"costs": [1, "cheap"]}', "the costs must be numbers, one per arm"),
        ("ragged.json", b"[[1, 2], [3]]", "the costs must be numbers, one per arm"),
        ("junk.npy", b"not a numpy file", "cannot read the costs"),
    ],
)
def test_a_malformed_cost_file_is_named(tmp_path, name, content, problem):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(ValueError, match=f"^{re.escape(str(tmp_path / name))}: {problem}") as raised:
        read_costs(tmp_path / name)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("setting", [{"complete": "intersect"}, {"cost_column": "billed_dollars"}])
def test_the_long_table_settings_are_refused_for_a_matrix_file(tmp_path, setting):
    path = tmp_path / "scores.npy"
    np.save(path, np.array([[1.0, 0.0], [0.0, 1.0]]))
    (name,) = setting
    with pytest.raises(ValueError, match=rf"{name}= applies to a long table of cells"):
        load_matrix(str(path), **setting)
