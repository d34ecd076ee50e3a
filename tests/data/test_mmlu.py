"""MMLU: shipped row sums for all 57 subjects, metadata, and the PromptEval reader."""

import csv
import sys
import types

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gittinseval.data import load_mmlu, mmlu_batch_size, mmlu_subjects, read_prompteval_mmlu
from gittinseval.data._files import data_file
from gittinseval.data.mmlu import PROMPTEVAL_REPO

# SHA-256 of the synthesized abstract_algebra matrix at the default data_seed (float64
# bytes): a change to the synthesis changes every MMLU result, so it must be deliberate.
ABSTRACT_ALGEBRA_SHA256 = "8e69fe19eadc8fd85dcb28b3205d6d1370d9edf952694fda09a03c34a5a430ef"


def shipped():
    with np.load(data_file("mmlu/arm_correct_counts.npz")) as data:
        return data["correct"], [str(s) for s in data["subjects"]], data["n_examples"]


def model_ids():
    with open(data_file("mmlu/models.csv")) as handle:
        return [row["source_id"] for row in csv.DictReader(handle)]


@pytest.mark.parametrize("subject", mmlu_subjects())
def test_row_sums_are_the_shipped_counts(subject):
    correct, subjects, n_examples = shipped()
    column = subjects.index(subject)
    benchmark = load_mmlu(subject)
    assert benchmark.scores.shape == (1500, n_examples[column])
    assert benchmark.binary
    np.testing.assert_array_equal(benchmark.scores.sum(axis=1), correct[:, column])


def test_metadata_prices_priors_and_batch_sizes():
    benchmark = load_mmlu("professional_law")
    with open(data_file("mmlu/models.csv")) as handle:
        prices = [float(row["input_usd_per_1m_tokens"]) for row in csv.DictReader(handle)]
    np.testing.assert_array_equal(benchmark.prices[::100], prices)
    assert benchmark.prices[199] == prices[1] and benchmark.prices[200] == prices[2]
    assert benchmark.arm_names[101] == "Llama-3-8B-Instruct/template_1"
    np.testing.assert_array_equal(benchmark.features[101], [1, 1])
    assert benchmark.details["difficulty"] == "hard" and benchmark.details["size"] == "large"
    assert benchmark.specific_prior == (0.4, 0.02)
    assert load_mmlu("high_school_psychology").specific_prior == (0.75, 0.01)
    assert load_mmlu("anatomy").specific_prior == (0.6, 0.02)
    # Size buckets: small <= 150, medium 151-400, large > 400 examples -> B = 2 / 4 / 8.
    with open(data_file("mmlu/subjects.csv")) as handle:
        for row in csv.DictReader(handle):
            n = int(row["n_examples"])
            expected = 2 if n <= 150 else 4 if n <= 400 else 8
            assert mmlu_batch_size(row["subject"]) == expected, row["subject"]
    assert load_mmlu("anatomy").default_batch_size == 2


def test_item_assignment_is_deterministic_and_seeded():
    first = load_mmlu("anatomy", data_seed=1).scores
    load_mmlu.cache_clear()
    assert np.array_equal(first, load_mmlu("anatomy", data_seed=1).scores)
    assert not np.array_equal(first, load_mmlu("anatomy", data_seed=2).scores)


def test_one_data_seed_gives_each_subject_its_own_independent_assignment():
    # abstract_algebra and business_ethics both have 100 questions.  Questions that many arms get
    # right in one subject tell nothing about the same question index in the other.
    load_mmlu.cache_clear()
    first = load_mmlu("abstract_algebra", data_seed=3).scores.copy()
    load_mmlu.cache_clear()
    load_mmlu("business_ethics", data_seed=3)  # another subject first: the assignment must not depend on it
    again = load_mmlu("abstract_algebra", data_seed=3).scores
    np.testing.assert_array_equal(first, again)
    other = load_mmlu("business_ethics", data_seed=3).scores
    a, b = first.sum(axis=0), other.sum(axis=0)
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.3  # sd of r is 0.1 at n = 100
    # The same subject's two halves of arms agree on which questions are easy, so the check can fail.
    assert np.corrcoef(first[::2].sum(axis=0), first[1::2].sum(axis=0))[0, 1] > 0.5


def test_items_have_a_shared_difficulty():
    # An item easy for one half of the arms is easy for the other half.
    scores = load_mmlu("high_school_psychology").scores
    first, second = scores[::2].mean(axis=0), scores[1::2].mean(axis=0)
    assert np.corrcoef(first, second)[0, 1] > 0.8


def test_unknown_subject_names_the_closest():
    with pytest.raises(ValueError, match="unknown MMLU subject 'moral_scenario'; did you mean moral_scenarios"):
        load_mmlu("moral_scenario")


def write_prompteval_fixture(root, subject, n_examples, rng):
    """The release's layout: <subject>/<model>-00000-of-00001.parquet, 100 template rows."""
    (root / subject).mkdir(parents=True)
    blocks = []
    for model in model_ids():
        block = (rng.uniform(size=(100, n_examples)) < 0.5).astype(np.int64)
        table = pa.table({f"example_{j}": block[:, j] for j in range(n_examples)})
        pq.write_table(table, root / subject / f"{model}-00000-of-00001.parquet")
        blocks.append(block)
    return np.vstack(blocks).astype(float)


def test_prompteval_reader_round_trips_the_release_layout(tmp_path):
    expected = write_prompteval_fixture(tmp_path, "anatomy", 12, np.random.default_rng(0))
    np.testing.assert_array_equal(read_prompteval_mmlu(tmp_path, "anatomy"), expected)
    benchmark = load_mmlu("anatomy", path=str(tmp_path))
    np.testing.assert_array_equal(benchmark.scores, expected)
    assert benchmark.details["item_assignment"] == "real" and not benchmark.stand_in


def test_prompteval_reader_orders_example_columns_numerically(tmp_path):
    (tmp_path / "anatomy").mkdir()
    for model in model_ids():
        columns = {f"example_{j}": np.full(100, j % 2) for j in (10, 2, 1, 0, 3, 4, 5, 6, 7, 8, 9)}
        pq.write_table(pa.table(columns), tmp_path / "anatomy" / f"{model}-00000-of-00001.parquet")
    np.testing.assert_array_equal(read_prompteval_mmlu(tmp_path, "anatomy")[0], np.arange(11) % 2)


def test_prompteval_reader_errors(tmp_path):
    write_prompteval_fixture(tmp_path, "anatomy", 5, np.random.default_rng(1))
    (tmp_path / "anatomy" / f"{model_ids()[3]}-00000-of-00001.parquet").unlink()
    with pytest.raises(FileNotFoundError, match="no parquet file for model 'codellama_codellama_34b_instruct'"):
        read_prompteval_mmlu(tmp_path, "anatomy")
    with pytest.raises(FileNotFoundError, match="not a directory"):
        read_prompteval_mmlu(tmp_path / "nowhere", "anatomy")
    with pytest.raises(ValueError, match="unknown MMLU subject"):
        read_prompteval_mmlu(tmp_path, "anatomie")


def test_prompteval_reader_from_the_hub_goes_through_datasets(monkeypatch):
    # The hub is unreachable here; a stand-in `datasets` module checks the call and
    # the conversion of its splits (one per model, 100 template rows each).
    rng = np.random.default_rng(2)
    blocks = {m: (rng.uniform(size=(100, 4)) < 0.5).astype(float) for m in model_ids()}

    class Split:
        """The two parts of the datasets.Dataset API the reader uses."""

        def __init__(self, block):
            self.block = block
            self.column_names = [f"example_{j}" for j in (3, 0, 2, 1)]

        def __getitem__(self, column):
            return list(self.block[:, int(column.split("_")[1])])

    calls = []
    fake = types.ModuleType("datasets")
    fake.load_dataset = lambda repo, subject: calls.append((repo, subject)) or {m: Split(b) for m, b in blocks.items()}
    monkeypatch.setitem(sys.modules, "datasets", fake)
    scores = read_prompteval_mmlu(PROMPTEVAL_REPO, "virology")
    assert calls == [(PROMPTEVAL_REPO, "virology")]
    np.testing.assert_array_equal(scores, np.vstack(list(blocks.values())))


def test_synthesized_matrix_is_pinned_and_differs_between_subjects():
    import hashlib

    first = load_mmlu("abstract_algebra")
    digest = hashlib.sha256(np.ascontiguousarray(first.scores, dtype=np.float64).tobytes()).hexdigest()
    assert digest == ABSTRACT_ALGEBRA_SHA256
    # Two subjects of the same size: different item assignments, not a relabelling.
    second = load_mmlu("business_ethics")
    assert first.n_examples == second.n_examples == 100
    assert not np.array_equal(np.sort(first.scores.sum(axis=0)), np.sort(second.scores.sum(axis=0)))


def test_arm_features_are_model_and_template_codes():
    features = load_mmlu("abstract_algebra").features
    np.testing.assert_array_equal(features[237], [2, 37])  # arm = model * 100 + template
    np.testing.assert_array_equal(features[1499], [14, 99])
