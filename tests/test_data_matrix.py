"""Bundled benchmarks and the generic matrix reader."""

import csv
import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from gittinseval.data import Benchmark, load_alpacaeval, load_matrix, load_mmlu, mmlu_subjects, read_costs
from gittinseval.data.bundled import synthesize_binary_matrix

DATA = Path(str(resources.files("gittinseval.data") / "files"))


def shipped_counts():
    with np.load(DATA / "mmlu" / "arm_correct_counts.npz") as data:
        return data["correct"], [str(s) for s in data["subjects"]], data["n_examples"]


@pytest.mark.parametrize("subject", mmlu_subjects())
def test_mmlu_row_sums_are_the_shipped_counts(subject):
    correct, subjects, n_examples = shipped_counts()
    column = subjects.index(subject)
    benchmark = load_mmlu(subject)
    assert benchmark.scores.shape == (1500, n_examples[column])
    assert benchmark.binary
    np.testing.assert_array_equal(benchmark.scores.sum(axis=1), correct[:, column])


def test_mmlu_metadata_prices_and_priors():
    benchmark = load_mmlu("professional_law")
    with open(DATA / "mmlu" / "models.csv") as handle:
        prices = [float(row["input_usd_per_1m_tokens"]) for row in csv.DictReader(handle)]
    np.testing.assert_array_equal(benchmark.prices[::100], prices)
    assert benchmark.prices[199] == prices[1] and benchmark.prices[200] == prices[2]
    assert benchmark.arm_names[101] == "Llama-3-8B-Instruct/template_1"
    np.testing.assert_array_equal(benchmark.features[101], [1, 1])
    assert benchmark.details["difficulty"] == "hard" and benchmark.details["size"] == "large"
    assert benchmark.specific_prior == (0.4, 0.02)
    assert load_mmlu("high_school_psychology").specific_prior == (0.75, 0.01)


def test_mmlu_item_assignment_is_deterministic_and_seeded():
    first = load_mmlu("anatomy", data_seed=1).scores
    load_mmlu.cache_clear()
    assert np.array_equal(first, load_mmlu("anatomy", data_seed=1).scores)
    assert not np.array_equal(first, load_mmlu("anatomy", data_seed=2).scores)


def test_synthesized_items_have_shared_difficulty():
    # Items that are easy for one half of the arms are easy for the other half.
    rng = np.random.default_rng(0)
    matrix = synthesize_binary_matrix(np.full(400, 50), 100, rng)
    np.testing.assert_array_equal(matrix.sum(axis=1), 50)
    first, second = matrix[:200].mean(axis=0), matrix[200:].mean(axis=0)
    assert np.corrcoef(first, second)[0, 1] > 0.8


def test_unknown_subject_names_the_closest():
    with pytest.raises(ValueError, match="unknown MMLU subject 'moral_scenario'; did you mean moral_scenarios"):
        load_mmlu("moral_scenario")


def test_alpacaeval_is_the_real_matrix_with_prices():
    benchmark = load_alpacaeval()
    assert benchmark.scores.shape == (57, 805)
    assert not benchmark.binary
    with open(DATA / "alpacaeval" / "models.csv") as handle:
        table = {r["model"]: float(r["cost_usd_per_1m_tokens_in_plus_8_out"]) for r in csv.DictReader(handle)}
    priced = [k for k, name in enumerate(benchmark.arm_names) if name in table]
    assert len(priced) == 50
    for k in priced:
        assert benchmark.prices[k] == table[benchmark.arm_names[k]]
    assert len(benchmark.details["unpriced_arms"]) == 7
    assert benchmark.specific_prior == (0.2, 0.01)


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".csv"])
def test_matrix_reader_round_trips(tmp_path, suffix):
    rng = np.random.default_rng(1)
    matrix = rng.uniform(size=(5, 9)).round(6)
    path = tmp_path / f"m{suffix}"
    if suffix == ".npy":
        np.save(path, matrix)
    elif suffix == ".npz":
        np.savez(path, scores=matrix, other=np.zeros(2))
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
    with pytest.raises(ValueError, match="unsupported matrix format '.txt'"):
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
    with pytest.raises(ValueError, match="short.npy: expected one cost per arm \\(3\\), got 2"):
        load_matrix(str(tmp_path / "m.npy"), costs=str(tmp_path / "short.npy"))
    np.save(tmp_path / "zero.npy", np.array([1.0, 0.0, 2.0]))
    with pytest.raises(ValueError, match="zero.npy: costs must be positive and finite; arms \\[1\\]"):
        load_matrix(str(tmp_path / "m.npy"), costs=str(tmp_path / "zero.npy"))


def test_benchmark_validates_its_fields():
    with pytest.raises(ValueError, match="2 arm names for 3 arms"):
        Benchmark("b", np.zeros((3, 2)), arm_names=("a", "b"))
    with pytest.raises(ValueError, match="features must have shape"):
        Benchmark("b", np.zeros((3, 2)), features=np.zeros((2, 1)))
