"""The real ZeroEval matrices (gittinseval/data/zeroeval.py: GSM8K, CRUXEval-O, MATH level 5): shapes,
accuracies, prices, per-cell costs, features, priors and Hydra configs, and the GSM8K runs in the results
store under each cost mode."""

import csv
import json

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.data import (
    load_crux_zeroeval,
    load_gsm8k_zeroeval,
    load_math_l5_zeroeval,
    load_zeroeval,
    specific_prior,
)
from gittinseval.data._files import data_file
from gittinseval.sim.experiment import config_digest, run_experiment
from gittinseval.sim.results_store import RunRow, export_rows
from gittinseval.sim.simulator import RunResult

LOADERS = {
    "gsm8k_zeroeval": load_gsm8k_zeroeval,
    "crux_zeroeval": load_crux_zeroeval,
    "math_l5_zeroeval": load_math_l5_zeroeval,
}
NAMES = list(LOADERS)
# The data README's facts per matrix: shape, last arm, the accuracy threshold and how many arms reach it,
# how many items no model and every model answers.
FACTS = {
    "gsm8k_zeroeval": ((41, 1319), "yi-large", 0.93, 16, 5, 219),
    "crux_zeroeval": ((48, 800), "yi-large", 0.80, 5, 23, 35),
    "math_l5_zeroeval": ((38, 721), "reka-core-20240501", 0.50, 12, 18, 1),
}
# scores_vs_reported.csv against ZeroEval's own table: models it reports, how many agree to 0.1 points, and
# the largest gap (GSM8K: 4.32 points, yi-large-preview; CRUXEval-O and MATH: every count is the same).
# ZeroEval's names of a model that GSM8K's table lists under another name (the data README).
ALIASES = {"Llama-3.1-405B-Inst-fp8": "Llama-3.1-405B-Instruct-Turbo", "deepseek-v2-chat-0628": "deepseek-chat",
           "deepseek-v2-coder-0724": "DeepSeek-Coder-V2-0724", "gemma-2-27b-it": "gemma-2-27b-it@together"}
REPORTED = {"gsm8k_zeroeval": (35, 30, 4.32), "crux_zeroeval": (48, 48, 0.0), "math_l5_zeroeval": (38, 38, 0.0)}


def rows_of(name, file="models.csv"):
    with open(data_file(f"{name}/{file}"), newline="") as handle:
        return list(csv.DictReader(handle))


def release_of(name):
    with np.load(data_file(f"{name}/correct.npz")) as release:
        return {key: release[key] for key in release.files}


@pytest.mark.parametrize("name", NAMES)
def test_each_matrix_has_the_shape_and_facts_of_the_data_readme(name):
    bench = LOADERS[name]()
    shape, last, threshold, n_above, n_unsolved, n_solved = FACTS[name]
    assert bench.name == name and bench is load_zeroeval(name)
    assert bench.scores.shape == shape and bench.binary and not bench.stand_in
    assert bench.arm_names == tuple(release_of(name)["models"])
    assert bench.arm_names[0] == "Athene-70B" and bench.arm_names[-1] == last
    assert (bench.row_means >= threshold).sum() == n_above
    solved_by = bench.scores.sum(axis=0)
    assert (solved_by == 0).sum() == n_unsolved and (solved_by == shape[0]).sum() == n_solved
    assert bench.features.shape == (shape[0], 4) and len(set(map(tuple, bench.features))) == shape[0]
    assert bench.default_batch_size == 8 and "Apache-2.0" in bench.license and "ZeroEval" in bench.source


def test_an_unknown_name_suggests_the_bundled_ones():
    with pytest.raises(ValueError, match="did you mean crux_zeroeval"):
        load_zeroeval("crux_zeroevl")


@pytest.mark.parametrize("name", NAMES)
def test_accuracies_are_those_of_scores_vs_reported(name):
    table = rows_of(name, "scores_vs_reported.csv")
    published = {row["model"]: float(row["accuracy_pct"]) for row in table}
    bench = LOADERS[name]()
    ours = dict(zip(bench.arm_names, 100 * bench.row_means, strict=True))
    assert list(ours) == [row["model"] for row in table]
    # The csv rounds to 0.01 points.
    assert max(abs(ours[model] - published[model]) for model in ours) <= 0.005 + 1e-9
    reported = {row["model"]: float(row["reported_pct"]) for row in table if row["reported_pct"]}
    np.testing.assert_array_equal(bench.details["reported_accuracy_pct"],
                                  [reported.get(model, np.nan) for model in bench.arm_names])
    n_reported, n_close, max_gap = REPORTED[name]
    gaps = {model: abs(ours[model] - reported[model]) for model in reported}
    assert len(gaps) == n_reported and sum(gap <= 0.1 for gap in gaps.values()) == n_close
    assert max(gaps.values()) == pytest.approx(max_gap, abs=0.005 + 1e-9)
    if n_close == n_reported:  # "agree exactly": the same number of correct answers as ZeroEval's table
        n_examples = bench.n_examples
        counts = dict(zip(bench.arm_names, bench.scores.sum(axis=1), strict=True))
        assert all(round(reported[model] * n_examples / 100) == counts[model] for model in reported)


@pytest.mark.parametrize(("name", "dearest"), [("gsm8k_zeroeval", "claude-3-opus-20240229"),
                                               ("crux_zeroeval", "claude-3-opus-20240229"),
                                               ("math_l5_zeroeval", "o1-preview-2024-09-12")])
def test_each_cell_costs_its_own_tokens_at_the_models_list_prices(name, dearest):
    bench = LOADERS[name]()
    release = release_of(name)
    prices = {row["model"]: (float(row["input_usd_per_1m"]), float(row["output_usd_per_1m"])) for row in
              rows_of(name)}
    per_raw = bench.details["dollars_per_raw_cost"]
    # The mean tokens of a cell, chars / 4, summed by hand over the matrix.
    n_arms, n_examples = release["output_chars"].shape
    mean_tokens = (release["input_chars"].sum() * n_arms + release["output_chars"].sum()) / (n_arms * n_examples) / 4
    assert per_raw == pytest.approx(mean_tokens / 1e6, rel=1e-12)
    for model in ("Athene-70B", "claude-3-opus-20240229", "gpt-4o-mini-2024-07-18"):
        arm = bench.arm_names.index(model)
        p_in, p_out = prices[model]
        for example in (0, n_examples // 2, n_examples - 1):
            tokens_in = release["input_chars"][example] / 4
            tokens_out = release["output_chars"][arm, example] / 4
            dollars = (tokens_in * p_in + tokens_out * p_out) / 1e6
            assert bench.cell_costs[arm, example] * per_raw == pytest.approx(dollars, rel=1e-12)
    np.testing.assert_allclose(bench.prices, bench.cell_costs.mean(axis=1), rtol=1e-12, atol=0)
    assert bench.arm_names[bench.prices.argmax()] == dearest


def test_one_crux_cell_costs_what_a_hand_computation_says():
    # claude-3-opus (15 / 75 USD per 1M tokens) on the first question: its prompt and reply lengths in
    # characters, read off the release, and the matrix's mean characters per cell.
    bench = load_crux_zeroeval()
    release = release_of("crux_zeroeval")
    arm = bench.arm_names.index("claude-3-opus-20240229")
    chars_in, chars_out = int(release["input_chars"][0]), int(release["output_chars"][arm, 0])
    mean_chars = float(release["input_chars"].mean() + release["output_chars"].mean())
    dollars = (chars_in / 4 * 15.0 + chars_out / 4 * 75.0) / 1e6
    # A raw cost is in USD per 1M tokens of an example of the mean length (mean_chars / 4 tokens).
    assert bench.cell_costs[arm, 0] == pytest.approx(dollars * 1e6 / (mean_chars / 4), rel=1e-12)
    assert bench.cell_costs[arm, 0] * bench.details["dollars_per_raw_cost"] == pytest.approx(dollars, rel=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_the_features_file_has_one_row_per_model_in_matrix_order(name):
    bench = LOADERS[name]()
    features = rows_of(name, "features.csv")
    assert [row["model"] for row in features] == list(bench.arm_names)
    assert [int(row["row"]) for row in features] == list(range(bench.n_arms))
    assert {row["size_class"] for row in features} <= {"small", "medium", "large"}
    for column, name_ in enumerate(bench.details["feature_names"]):
        values = [row[name_] for row in features]
        # Codes in order of first appearance: equal codes exactly where the annotations are equal.
        assert all((bench.features[i, column] == bench.features[j, column]) == (values[i] == values[j])
                   for i in range(bench.n_arms) for j in range(bench.n_arms))
    # A model that GSM8K's table has too (by name, or by the data README's aliases) carries the same
    # annotation; the models.csv of CRUXEval-O and MATH take 37 and 27 of their prices from GSM8K's.
    gsm8k = {row["model"]: row for row in rows_of("gsm8k_zeroeval", "features.csv")}
    shared = [(row, gsm8k[ALIASES.get(row["model"], row["model"])]) for row in features
              if ALIASES.get(row["model"], row["model"]) in gsm8k]
    assert len(shared) == {"gsm8k_zeroeval": 41, "crux_zeroeval": 37, "math_l5_zeroeval": 27}[name]
    for row, known in shared:
        assert [row[key] for key in ("family", "size_class", "host")] == [
            known[key] for key in ("family", "size_class", "host")]


@pytest.mark.parametrize(("name", "bucket"), [("gsm8k_zeroeval", "easy"), ("crux_zeroeval", "medium"),
                                              ("math_l5_zeroeval", "hard")])
def test_the_specific_prior_is_the_paper_bucket_nearest_the_mean_accuracy(name, bucket):
    bench = LOADERS[name]()
    assert bench.specific_prior == specific_prior(name) == specific_prior("mmlu", bucket)
    means = {group: specific_prior("mmlu", group)[0] for group in ("hard", "medium", "easy")}
    assert min(means, key=lambda group: abs(means[group] - bench.row_means.mean())) == bucket


def compose_config(*overrides, benchmark="gsm8k_zeroeval"):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=[f"benchmark={benchmark}", "logger=none", *overrides])


@pytest.mark.parametrize("name", NAMES)
def test_the_hydra_config_composes_and_instantiates_the_loader(name):
    cfg = compose_config("prior=specific", "cost=per_cell", benchmark=name)
    assert cfg.benchmark._target_ == f"gittinseval.data.load_{name}"
    bench = instantiate(cfg.benchmark)
    assert bench is LOADERS[name]()
    prior = instantiate(cfg.prior).resolve(bench)
    assert (prior.mean, prior.var) == specific_prior(name)


def test_a_stored_run_is_skipped_only_under_its_own_cost_mode(tmp_path):
    store = tmp_path / "gsm8k_zeroeval.parquet"
    per_cell = compose_config("method=ucbe", "cost=per_cell", "budget=0.02", f"results_store={store}")
    first = run_experiment(per_cell, tmp_path / "per_cell")
    assert isinstance(first, RunResult) and first.summary["cost_mode"] == "per_cell"
    export_rows([RunRow.of(RunResult.load(tmp_path / "per_cell"))], store)
    again = run_experiment(per_cell, tmp_path / "again")
    assert isinstance(again, RunRow) and not (tmp_path / "again").exists()
    for mode in ("aware", "unit"):
        other = compose_config("method=ucbe", f"cost={mode}", "budget=0.02", f"results_store={store}")
        assert config_digest(other) != config_digest(per_cell)
        result = run_experiment(other, tmp_path / mode)
        assert isinstance(result, RunResult) and result.summary["cost_mode"] == mode
        assert json.loads((tmp_path / mode / "summary.json").read_text())["config_digest"] == config_digest(other)


@pytest.mark.parametrize("name", NAMES)
def test_the_paper_price_rule_is_input_plus_twice_output_price_of_models_csv(name):
    """benchmark.prices=paper: each arm input + 2 x output price (the paper's GSM8K rule), the same every example."""
    bench = load_zeroeval(name, "paper")
    table = {row["model"]: row for row in rows_of(name)}
    by_hand = [float(table[model]["input_usd_per_1m"]) + 2 * float(table[model]["output_usd_per_1m"])
               for model in bench.arm_names]
    np.testing.assert_array_equal(bench.prices, by_hand)
    assert bench.cell_costs is None and bench.name == f"{name}/paper_prices"
    assert bench.details["prices"] == "paper" and "dollars_per_raw_cost" not in bench.details
    tokens = load_zeroeval(name)
    assert tokens.details["prices"] == "tokens" and tokens is LOADERS[name]("tokens")
    np.testing.assert_array_equal(bench.scores, tokens.scores)
    assert bench.specific_prior == tokens.specific_prior and bench.default_batch_size == tokens.default_batch_size
    # The loader's docstring: one input and two output prices an example price every arm higher, 1.6 to 6 times.
    ratio = bench.prices / tokens.prices
    assert 1.5 < ratio.min() and ratio.max() < 6.1


def test_the_paper_rule_prices_claude_3_opus_at_165_on_gsm8k():
    # claude-3-opus: 15 USD per 1M input tokens, 75 per 1M output tokens: 15 + 2 x 75.
    bench = load_gsm8k_zeroeval("paper")
    assert bench.prices[bench.arm_names.index("claude-3-opus-20240229")] == 165.0


def test_the_paper_rule_has_no_per_cell_costs_and_an_unknown_rule_is_named():
    cfg = compose_config("method=ucbe", "cost=per_cell", "benchmark.prices=paper", "budget=0.01")
    with pytest.raises(ValueError, match=r"benchmark 'gsm8k_zeroeval/paper_prices' has no per-cell costs "
                                         r"\(benchmark.prices=paper prices each arm by the paper's GSM8K rule"):
        run_experiment(cfg, "unused")
    with pytest.raises(ValueError, match="benchmark.prices must be one of tokens, paper .*, got 'papers'"):
        load_zeroeval("gsm8k_zeroeval", "papers")


def test_a_cost_aware_run_under_the_paper_rule_charges_each_arm_its_paper_price(tmp_path):
    cfg = compose_config("method=ucbe", "cost=aware", "benchmark.prices=paper", "budget=0.01",
                         benchmark="crux_zeroeval")
    summary = run_experiment(cfg, tmp_path).summary
    prices = load_crux_zeroeval("paper").prices
    assert summary["benchmark"] == "crux_zeroeval/paper_prices"
    assert summary["exhaustive_cost"] == pytest.approx(800 * prices.sum(), rel=1e-12)
    trace = RunResult.load(tmp_path).trace
    batch_costs = np.diff(trace["cost"], prepend=0.0)
    np.testing.assert_allclose(batch_costs, prices[trace["arm"]] * trace["batch_size"], rtol=1e-12)
