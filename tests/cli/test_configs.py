"""The Hydra app: every config group composes and instantiates; bad keys fail clearly."""

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException, InstantiationException
from hydra.utils import instantiate
from omegaconf import OmegaConf

from gittinseval import (
    BenchmarkPrior,
    EmpiricalPrior,
    EmpiricalPriorEstimator,
    GaussianPrior,
    GittinsPolicy,
    PriceCost,
    UnitCost,
)
from gittinseval.cli.simulate import CONFIG_DIR, expand_subject_sweep
from gittinseval.data import Benchmark, mmlu_subjects
from gittinseval.sim.experiment import run_experiment
from gittinseval.sim.loggers import NullLogger, WandbLogger
from gittinseval.utils.errors import UsageError

GROUPS = {
    group: sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))
    for group in ("benchmark", "policy", "prior", "cost", "logger", "experiment")
}


def compose_config(*overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@pytest.fixture
def matrix_path(tmp_path):
    rng = np.random.default_rng(0)
    scores = (rng.uniform(size=(12, 40)) < rng.uniform(0.2, 0.8, size=(12, 1))).astype(float)
    np.save(tmp_path / "scores.npy", scores)
    np.save(tmp_path / "costs.npy", rng.choice([0.5, 1.0, 4.0], size=12))
    return tmp_path


def test_expected_options_exist():
    assert {"mmlu", "alpacaeval", "alpacaeval_paper", "gsm8k", "piqa", "matrix"} <= set(GROUPS["benchmark"])
    assert "gittins" in GROUPS["policy"]
    assert GROUPS["prior"] == ["empirical", "general", "specific"]
    assert GROUPS["cost"] == ["aware", "per_cell", "per_cell_learned", "unit"]
    assert GROUPS["logger"] == ["none", "wandb"]
    assert "main" in GROUPS["experiment"]


@pytest.mark.parametrize("name", [g for g in GROUPS["benchmark"] if g != "matrix"])
def test_bundled_benchmarks_instantiate(name):
    benchmark = instantiate(compose_config(f"benchmark={name}").benchmark)
    assert isinstance(benchmark, Benchmark) and benchmark.prices is not None
    assert benchmark.specific_prior is not None and benchmark.default_batch_size is not None


def test_stand_in_benchmarks_take_a_matrix_seed_or_the_release():
    cfg = compose_config("benchmark=piqa", "benchmark.matrix_seed=3")
    assert instantiate(cfg.benchmark).name == "piqa_standin/m3"


def test_policy_batch_size_defaults_to_the_benchmark(tmp_path):
    cfg = compose_config("benchmark.subject=anatomy", "logger=none", "budget=0.01")
    assert cfg.policy.batch_size is None
    result = run_experiment(cfg, tmp_path)
    assert result.summary["batch_size"] == 2 and set(result.trace["batch_size"]) == {2}


def test_subject_all_expands_to_a_sweep_of_57_subjects():
    argv = expand_subject_sweep(["-m", "benchmark.subject=all", "seed=0,1"])
    assert argv[0] == "-m" and argv[2] == "seed=0,1"
    assert argv[1].split("=")[1].split(",") == mmlu_subjects()
    assert expand_subject_sweep(["seed=1"]) == ["seed=1"]
    with pytest.raises(UsageError, match="add -m"):
        expand_subject_sweep(["benchmark.subject=all"])


def test_matrix_benchmark_instantiates(matrix_path):
    cfg = compose_config(
        "benchmark=matrix",
        f"benchmark.path={matrix_path / 'scores.npy'}",
        f"benchmark.costs={matrix_path / 'costs.npy'}",
    )
    benchmark = instantiate(cfg.benchmark)
    assert benchmark.scores.shape == (12, 40) and benchmark.prices.shape == (12,)


def test_policy_prior_cost_logger_groups_instantiate():
    cfg = compose_config("policy=gittins", "policy.batch_size=4", "policy.kappa=0")
    policy = instantiate(cfg.policy)
    assert isinstance(policy, GittinsPolicy) and policy.batch_size == 4 and policy.kappa == 0
    assert instantiate(compose_config("prior=general").prior) == GaussianPrior(0.5, 0.04, "general")
    specific = instantiate(compose_config("prior=specific", "prior.var=0.05").prior)
    assert isinstance(specific, BenchmarkPrior) and specific.var == 0.05
    assert isinstance(instantiate(compose_config("cost=unit").cost), UnitCost)
    assert isinstance(instantiate(compose_config("cost=aware").cost), PriceCost)
    assert isinstance(instantiate(compose_config("logger=none").logger), NullLogger)
    wandb_logger = instantiate(compose_config("logger=wandb").logger)
    assert isinstance(wandb_logger, WandbLogger)
    assert wandb_logger.mode == os.environ.get("WANDB_MODE", "offline")


def test_specific_prior_resolves_from_the_benchmark():
    cfg = compose_config("benchmark=mmlu", "benchmark.subject=high_school_psychology", "prior=specific")
    prior = instantiate(cfg.prior).resolve(instantiate(cfg.benchmark))
    assert (prior.mean, prior.var) == (0.75, 0.01)
    cfg = compose_config("benchmark=mmlu", "prior=specific", "prior.mean=0.3")
    prior = instantiate(cfg.prior).resolve(instantiate(cfg.benchmark))
    assert (prior.mean, prior.var) == (0.3, 0.02)


def test_main_experiment_sweeps_both_priors_over_20_seeds():
    cfg = compose_config("experiment=main")
    assert cfg.benchmark.subject == "moral_scenarios"
    assert cfg.cost._target_ == "gittinseval.PriceCost"


def test_wrong_config_key_is_an_error():
    with pytest.raises(ConfigCompositionException, match="batchsize"):
        compose_config("policy.batchsize=4")
    with pytest.raises(ConfigCompositionException, match="nonexistent"):
        compose_config("policy=nonexistent")


def test_unknown_subject_is_an_error():
    cfg = compose_config("benchmark.subject=astrology")
    with pytest.raises(InstantiationException, match="unknown MMLU subject 'astrology'"):
        instantiate(cfg.benchmark)


def test_specific_prior_needs_a_benchmark_prior(matrix_path):
    cfg = compose_config("benchmark=matrix", f"benchmark.path={matrix_path / 'scores.npy'}", "prior=specific")
    with pytest.raises(ValueError, match="benchmark .* has none; set prior.mean and prior.var"):
        instantiate(cfg.prior).resolve(instantiate(cfg.benchmark))


def test_cost_aware_needs_prices(matrix_path):
    cfg = compose_config("benchmark=matrix", f"benchmark.path={matrix_path / 'scores.npy'}", "cost=aware")
    with pytest.raises(ValueError, match="has no per-arm prices; use cost=unit"):
        instantiate(cfg.cost)(instantiate(cfg.benchmark))


def test_run_experiment_writes_the_public_format(matrix_path, tmp_path):
    cfg = compose_config(
        "benchmark=matrix",
        f"benchmark.path={matrix_path / 'scores.npy'}",
        f"benchmark.costs={matrix_path / 'costs.npy'}",
        "prior=general",
        "cost=aware",
        "logger=none",
        "policy.batch_size=4",
        "seed=7",
    )
    out = tmp_path / "run"
    result = run_experiment(cfg, out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary == json.loads(json.dumps(result.summary))
    assert summary["seed"] == 7 and summary["cost_mode"] == "aware" and summary["prior"] == "general"
    assert summary["label"] == "GittinsEval-G" and summary["batch_size"] == 4
    trace_csv = gzip.decompress((out / "trace.csv.gz").read_bytes()).decode()
    assert trace_csv.startswith("step,arm,batch_size,cost,cost_pct,recommended,regret\n")


def test_wandb_logger_writes_an_offline_run_inside_the_run_directory(matrix_path, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    cfg = compose_config(
        "benchmark=matrix", f"benchmark.path={matrix_path / 'scores.npy'}", "prior=general", "cost=unit", "logger=wandb"
    )
    out = tmp_path / "run"
    run_experiment(cfg, out, name="seed=0", group="sweep")
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    # One stored trace: the W&B run's file is a relative link to the run's own.
    linked = runs[0] / "files" / "trace.csv.gz"
    assert linked.is_symlink() and not Path(os.readlink(linked)).is_absolute()
    assert linked.resolve() == (out / "trace.csv.gz").resolve()


def test_cli_multirun_with_joblib_launcher(matrix_path, tmp_path):
    sweep = tmp_path / "sweep"
    command = [
        sys.executable, "-m", "gittinseval", "-m",
        "benchmark=matrix", f"benchmark.path={matrix_path / 'scores.npy'}",
        "cost=unit", "logger=none", "prior.mean=0.5", "prior.var=0.04",
        "seed=0,1", "policy.kappa=0,1", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
        f"hydra.sweep.dir={sweep}",
    ]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    summaries = [json.loads(p.read_text()) for p in sorted(sweep.glob("*/summary.json"))]
    assert sorted((s["seed"], s["kappa"]) for s in summaries) == [(0, 0.0), (0, 1.0), (1, 0.0), (1, 1.0)]
    assert [s["threads"] for s in summaries] == [1] * 4  # one torch thread per joblib job
    assert "wandb sync" not in completed.stdout  # no W&B runs to upload


def test_resolved_config_is_plain_data():
    cfg = compose_config("logger=none")
    container = OmegaConf.to_container(cfg, resolve=True)
    assert container["seed"] == 0 and container["budget"] == 0.1
    assert Path(CONFIG_DIR / "config.yaml").is_file()


def test_documented_baseline_is_one_module_and_one_yaml(matrix_path, example_baseline, tmp_path):
    # The example baseline of docs/baselines.md, kept outside the repository and found through
    # hydra.searchpath, runs end to end with no edit to the package.
    cfg = compose_config(
        f"hydra.searchpath=[file://{example_baseline / 'my_conf'}]",
        "policy=greedy",
        "benchmark=matrix",
        f"benchmark.path={matrix_path / 'scores.npy'}",
        "prior=general",
        "cost=unit",
        "logger=none",
    )
    result = run_experiment(cfg, tmp_path / "run")
    assert result.summary["policy"] == "greedy" and result.summary["label"] == "Greedy"
    assert result.summary["total_cost"] >= 48  # 10% of 12 arms x 40 examples


def test_run_log_says_when_the_stopping_signal_never_fired(matrix_path, tmp_path, caplog):
    cfg = compose_config("policy=ucbe", "benchmark=matrix", f"benchmark.path={matrix_path / 'scores.npy'}",
                         "prior=general", "cost=unit", "logger=none")
    with caplog.at_level("INFO", logger="gittinseval.sim.experiment"):
        result = run_experiment(cfg, tmp_path / "run")
    assert result.summary["stop_cost_pct"] is None
    assert "the stopping signal did not fire" in caplog.text and "n/a" not in caplog.text


@pytest.mark.parametrize("policy", ["ucbe", "uniform", "sysrs"])
def test_prior_free_policies_run_on_a_benchmark_without_a_specific_prior(policy, matrix_path, tmp_path):
    # prior=specific is the default; the user's matrix has none.
    cfg = compose_config(f"policy={policy}", "benchmark=matrix", f"benchmark.path={matrix_path / 'scores.npy'}",
                         "cost=unit", "logger=none")
    assert run_experiment(cfg, tmp_path / "run").summary["prior"] == "unused"


def test_a_policy_that_uses_the_prior_still_needs_one(matrix_path, tmp_path):
    cfg = compose_config("policy=gittins", "benchmark=matrix", f"benchmark.path={matrix_path / 'scores.npy'}",
                         "cost=unit", "logger=none")
    with pytest.raises(ValueError, match="has none; set prior.mean"):
        run_experiment(cfg, tmp_path / "run")


def test_main_experiment_sweeps_both_priors_and_twenty_seeds():
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=main"], return_hydra_config=True)
    params = cfg.hydra.sweeper.params
    assert sorted(params.prior.split(",")) == ["general", "specific"]
    assert params.seed == "range(20)"
    assert set(params) == {"prior", "seed"}


def test_every_multirun_ends_with_the_sweep_summary():
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True)
    assert cfg.hydra.callbacks.plot_sweep._target_ == "gittinseval.results.callbacks.PlotSweep"


def test_empirical_prior_hands_its_estimator_to_gittins_only():
    cfg = compose_config("prior=empirical", "prior.estimator.tolerance=0.3")
    prior = instantiate(cfg.prior)
    assert isinstance(prior, EmpiricalPrior) and prior.estimator == EmpiricalPriorEstimator(tolerance=0.3)
    assert prior.resolve(None) == GaussianPrior(0.5, 0.04, "empirical")
    assert instantiate(cfg.policy).prior_estimator == prior.estimator
    for other in ("general", "specific"):
        assert instantiate(compose_config(f"prior={other}").policy).prior_estimator is None


@pytest.mark.parametrize("override", ["prior.estimator.var_floor=0", "prior.estimator.tolerance=-1"])
def test_empirical_prior_bad_setting_names_the_key(override):
    key = override.split(".")[-1].split("=")[0]
    with pytest.raises(InstantiationException, match=f"{key} must be positive and finite"):
        instantiate(compose_config("prior=empirical", override).prior)


@pytest.mark.parametrize("policy, label", [("gittins", "GittinsEval-EB"), ("ucbe", "UCB-E")])
def test_run_with_empirical_prior_records_its_diagnostics(matrix_path, tmp_path, policy, label):
    cfg = compose_config(
        "benchmark=matrix", f"benchmark.path={matrix_path / 'scores.npy'}", "prior=empirical",
        f"policy={policy}", "cost=unit", "logger=none", "policy.batch_size=4",
    )
    summary = json.loads(json.dumps(run_experiment(cfg, tmp_path / "run").summary))
    # A policy that ignores the prior records none.
    assert summary["label"] == label and summary["prior"] == ("empirical" if policy == "gittins" else "unused")
    assert (summary["prior_mean"], summary["prior_var"]) == (0.5, 0.04)
    if policy == "gittins":
        diagnostics = summary["diagnostics"]
        assert diagnostics["prior_fits"] >= 1 and diagnostics["tables_computed"] >= 1
        assert 0 < diagnostics["final_prior_mean"] < 1 and diagnostics["final_prior_var"] >= 1e-4
    else:
        assert summary["diagnostics"] == {}


def test_cli_multirun_over_the_three_priors(tmp_path):
    sweep = tmp_path / "sweep"
    command = [
        sys.executable, "-m", "gittinseval", "-m", "benchmark.subject=abstract_algebra", "budget=0.01",
        "prior=general,specific,empirical", "cost=unit", "logger=none", f"hydra.sweep.dir={sweep}",
    ]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    summaries = [json.loads(p.read_text()) for p in sorted(sweep.glob("*/summary.json"))]
    assert sorted(s["label"] for s in summaries) == ["GittinsEval-EB", "GittinsEval-G", "GittinsEval-S"]
