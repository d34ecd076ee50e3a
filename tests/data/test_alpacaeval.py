"""AlpacaEval: the real rows, the paper's 152-arm matrix, and the results-tree reader."""

import csv
import json

import numpy as np
import pytest

from gittinseval.data import load_alpacaeval, load_alpacaeval_paper, read_alpaca_eval_results
from gittinseval.data._files import data_file


def published():
    with open(data_file("alpacaeval/models.csv")) as handle:
        return {row["model"]: row for row in csv.DictReader(handle)}


def test_real_matrix_and_prices():
    benchmark = load_alpacaeval()
    table = published()
    assert benchmark.scores.shape == (57, 805) and not benchmark.binary and not benchmark.stand_in
    priced = [k for k, name in enumerate(benchmark.arm_names) if name in table]
    assert len(priced) == 50
    for k in priced:
        assert benchmark.prices[k] == float(table[benchmark.arm_names[k]]["cost_usd_per_1m_tokens_in_plus_8_out"])
    assert len(benchmark.details["unpriced_arms"]) == 7
    assert benchmark.specific_prior == (0.2, 0.01) and benchmark.default_batch_size == 8


def test_paper_matrix_row_means_equal_the_published_means():
    benchmark = load_alpacaeval_paper()
    table = published()
    in_paper = [m for m, row in table.items() if row["in_paper_matrix"] == "1"]
    assert list(benchmark.arm_names) == in_paper and benchmark.scores.shape == (152, 805)
    assert benchmark.stand_in and len(benchmark.details["synthesized_arms"]) == 102
    assert benchmark.source.startswith("stand-in")
    means = dict(zip(benchmark.arm_names, benchmark.row_means, strict=True))
    for model in benchmark.details["synthesized_arms"]:
        assert means[model] == pytest.approx(float(table[model]["mean_preference"]), abs=1e-12)
    # Real rows are the shipped data as released: their means match the published
    # ones up to a few instructions' worth (0.5 / 805 each), see the data README.
    real = [m for m in in_paper if m not in benchmark.details["synthesized_arms"]]
    gaps = np.array([abs(means[m] - float(table[m]["mean_preference"])) for m in real])
    assert gaps.max() < 2 / 805 and np.sum(gaps > 1e-9) <= 6
    np.testing.assert_array_equal(
        benchmark.scores[list(benchmark.arm_names).index(real[0])],
        load_alpacaeval().scores[list(load_alpacaeval().arm_names).index(real[0])],
    )
    for model in in_paper:
        expected = float(table[model]["cost_usd_per_1m_tokens_in_plus_8_out"])
        assert benchmark.prices[list(benchmark.arm_names).index(model)] == expected


def test_synthesized_rows_have_the_shape_of_real_rows():
    benchmark = load_alpacaeval_paper()
    real = load_alpacaeval().scores
    fake = benchmark.scores[[list(benchmark.arm_names).index(m) for m in benchmark.details["synthesized_arms"]]]
    assert 0 <= fake.min() and fake.max() <= 1 and len(np.unique(fake)) > 1000  # continuous
    extreme = lambda s: np.mean((s < 0.1) | (s > 0.9))  # noqa: E731
    assert extreme(fake) > 0.75 and abs(extreme(fake) - extreme(real)) < 0.1
    # Instructions hard for the real models are hard for the synthesized ones.
    assert np.corrcoef(fake.mean(axis=0), real.mean(axis=0))[0, 1] > 0.7


def write_results_tree(root, models, instructions, preferences):
    for model, row in zip(models, preferences, strict=True):
        folder = root / model / "weighted_alpaca_eval_gpt4_turbo"
        folder.mkdir(parents=True)
        records = [
            {"instruction": text, "output_1": "...", "output_2": "...", "generator_1": "gpt4_1106_preview",
             "generator_2": model, "preference": None if p is None else p + 1.0}
            for text, p in zip(instructions, row, strict=True)
        ]
        # Each annotations file lists the instructions in its own order.
        (folder / "annotations.json").write_text(json.dumps(records[::-1] if model.endswith("b") else records))


def test_results_tree_reader_aligns_on_instructions(tmp_path):
    rng = np.random.default_rng(0)
    instructions = [f"instruction {j}" for j in range(6)]
    preferences = rng.uniform(size=(3, 6))
    write_results_tree(tmp_path, ["model_a", "model_b", "model_c"], instructions, preferences)
    scores, models = read_alpaca_eval_results(tmp_path)
    assert models == ["model_a", "model_b", "model_c"]
    np.testing.assert_allclose(scores, preferences, atol=1e-15)
    benchmark = load_alpacaeval(path=str(tmp_path))
    assert benchmark.arm_names == ("model_a", "model_b", "model_c")
    assert benchmark.details["unpriced_arms"] == ["model_a", "model_b", "model_c"]


def test_results_tree_errors_name_the_problem(tmp_path):
    write_results_tree(tmp_path, ["m1", "m2"], ["x", "y"], [[0.2, None], [0.5, 0.5]])
    with pytest.raises(ValueError, match="annotations without a preference for models \\['m1'\\]"):
        read_alpaca_eval_results(tmp_path)
    with pytest.raises(FileNotFoundError, match="missing annotations for model 'm3'"):
        read_alpaca_eval_results(tmp_path, models=["m2", "m3"])
    (tmp_path / "m2" / "weighted_alpaca_eval_gpt4_turbo" / "annotations.json").write_text("{not json")
    with pytest.raises(ValueError, match="m2/weighted_alpaca_eval_gpt4_turbo/annotations.json: not a list"):
        read_alpaca_eval_results(tmp_path, models=["m2"])
    with pytest.raises(FileNotFoundError, match="results directory not found"):
        read_alpaca_eval_results(tmp_path / "nowhere")
