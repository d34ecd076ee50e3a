"""The real GSM8K matrix (gittinseval/data/zeroeval.py): shape, accuracies, prices and per-cell costs,
and its runs in the results store under each cost mode."""

import csv
import json

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.data import load_gsm8k_zeroeval
from gittinseval.data._files import data_file
from gittinseval.sim.experiment import config_digest, run_experiment
from gittinseval.sim.results_store import RunRow, export_rows
from gittinseval.sim.simulator import RunResult


def rows_of(name):
    with open(data_file(f"gsm8k_zeroeval/{name}"), newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_matrix_is_41_binary_arms_by_the_1319_test_questions():
    bench = load_gsm8k_zeroeval()
    assert bench.scores.shape == (41, 1319) and bench.binary and not bench.stand_in
    assert bench.arm_names[0] == "Athene-70B" and bench.arm_names[-1] == "yi-large"
    assert (bench.row_means > 0.93).sum() == 16  # the data README: 16 of 41 arms above 93 %
    assert bench.features.shape == (41, 4) and len(set(map(tuple, bench.features))) == 41


def test_accuracies_are_those_of_scores_vs_reported():
    published = {row["model"]: float(row["accuracy_pct"]) for row in rows_of("scores_vs_reported.csv")}
    bench = load_gsm8k_zeroeval()
    ours = dict(zip(bench.arm_names, 100 * bench.row_means, strict=True))
    assert ours.keys() == published.keys()
    assert max(abs(ours[model] - published[model]) for model in ours) <= 0.005 + 1e-9


def test_each_cell_costs_its_own_tokens_at_the_models_list_prices():
    bench = load_gsm8k_zeroeval()
    release = np.load(data_file("gsm8k_zeroeval/correct.npz"))
    prices = {row["model"]: (float(row["input_usd_per_1m"]), float(row["output_usd_per_1m"])) for row in
              rows_of("models.csv")}
    per_raw = bench.details["dollars_per_raw_cost"]
    # The mean tokens of a cell, chars / 4, summed by hand over the matrix.
    cells = release["output_chars"].size
    mean_tokens = (release["input_chars"].sum() * 41 + release["output_chars"].sum()) / cells / 4
    assert per_raw == pytest.approx(mean_tokens / 1e6, rel=1e-12)
    for arm in (0, 19, 35):  # Athene-70B, claude-3-opus (the dearest), gpt-4o-mini
        p_in, p_out = prices[bench.arm_names[arm]]
        for example in (0, 700, 1318):
            tokens_in = release["input_chars"][example] / 4
            tokens_out = release["output_chars"][arm, example] / 4
            dollars = (tokens_in * p_in + tokens_out * p_out) / 1e6
            assert bench.cell_costs[arm, example] * per_raw == pytest.approx(dollars, rel=1e-12)
        assert bench.prices[arm] == pytest.approx(bench.cell_costs[arm].mean(), rel=1e-12)
    # Opus costs 15/75 USD per 1M tokens, haiku 0.25/1.25: the same 60x, whatever the reply lengths' ratio.
    assert bench.prices.argmax() == 19


def compose_config(*overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=["benchmark=gsm8k_zeroeval", "logger=none", *overrides])


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
