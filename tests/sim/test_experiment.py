"""Every experiment file composes and runs end to end on a narrowed sweep and a tiny budget;
re-running a sweep skips its finished runs."""

import hashlib
import json
import subprocess
import sys
import time

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from gittinseval import RunResult
from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.core.params import legacy_targets
from gittinseval.sim.experiment import (
    CODE_ROOT,
    RESULT_NEUTRAL_KEYS,
    config_digest,
    run_experiment,
    run_trials,
    trial_configs,
    trial_digests,
)
from gittinseval.sim.results_store import stored_digests
from gittinseval.sim.sweeps import JobConfigs
from gittinseval.utils.validation import ConfigError

EXPERIMENTS = sorted(
    p.relative_to(CONFIG_DIR / "experiment").with_suffix("").as_posix()
    for p in (CONFIG_DIR / "experiment").rglob("*.yaml")
)


def compose_config(*overrides, return_hydra_config=False):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=return_hydra_config)


def first_values(experiment: str) -> list[str]:
    """The experiment's sweep narrowed to the first value of every axis."""
    params = compose_config(f"experiment={experiment}", return_hydra_config=True).hydra.sweeper.params
    parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()])
    return [
        f"{o.get_key_element()}={next(iter(o.sweep_string_iterator()))}" if o.is_sweep_override() else o.input_line
        for o in parsed
    ]


def test_the_paper_experiments_are_all_there():
    assert {f"paper/{name}" for name in ("main", "mmlu_buckets", "mmlu_subjects", "batch_size", "lambda")} <= set(
        EXPERIMENTS
    )
    assert "paper/ablation_recommendation" in EXPERIMENTS and "main" in EXPERIMENTS


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_runs_its_first_sweep_point(experiment, tmp_path):
    overrides = first_values(experiment)
    cfg = compose_config(f"experiment={experiment}", *overrides, "budget=0.003", "logger=none")
    result = run_experiment(cfg, tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["config_digest"] == config_digest(cfg) and summary["n_steps"] == len(result.trace["step"]) > 0
    assert summary["total_cost"] >= 0.003 * summary["exhaustive_cost"] or summary["policy"] in ("pbgi", "logei")


def test_every_experiment_but_the_main_job_names_committed_stores_whose_runs_a_rerun_skips():
    for experiment in EXPERIMENTS:
        stores = compose_config(f"experiment={experiment}").get("results_store")
        if experiment == "main":  # make run's job, which no store keeps
            assert stores is None
            continue
        stores = [stores] if isinstance(stores, str) else list(stores or [])
        assert stores and all((CODE_ROOT / store).is_file() for store in stores), (experiment, stores)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_axis_can_be_narrowed_from_the_command_line(experiment):
    """Hydra composes the command line alone before it sweeps: each axis narrowed to one value must compose."""
    for override in first_values(experiment):
        compose_config(f"experiment={experiment}", override)


def test_methods_set_policy_and_prior():
    g = compose_config("method=gittins_g")
    s = compose_config("method=gittins_s", "benchmark=gsm8k")
    assert g.policy._target_ == s.policy._target_ == "gittinseval.GittinsPolicy"
    assert (g.prior.name, s.prior.name) == ("general", "specific")
    assert compose_config("method=lrf").policy._target_ == "gittinseval.baselines.lrf.LRFPolicy"
    # Every policy yaml is also a method (no alias file needed): one class + one yaml.
    for policy in (p.stem for p in (CONFIG_DIR / "policy").glob("*.yaml")):
        assert compose_config(f"method={policy}").policy == compose_config(f"policy={policy}").policy


def test_a_finished_run_of_another_config_is_never_overwritten(tmp_path):
    run_experiment(compose_config("benchmark.subject=abstract_algebra", "budget=0.003", "logger=none"), tmp_path)
    with pytest.raises(ConfigError, match="holds a finished run of another config"):
        run_experiment(compose_config("benchmark.subject=abstract_algebra", "budget=0.004", "logger=none"), tmp_path)


def test_a_rerun_sweep_skips_its_finished_runs_and_leaves_them_untouched(tmp_path):
    command = [
        sys.executable, "-m", "gittinseval", "-m", "benchmark.subject=abstract_algebra", "budget=0.003",
        "logger=none", f"hydra.sweep.dir={tmp_path / 'sweep'}", "hydra/launcher=basic",
    ]
    subprocess.run([*command, "seed=0,1"], check=True, capture_output=True, text=True, timeout=300)
    finished = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in (tmp_path / "sweep").rglob("trace.csv.gz")}
    finished |= {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in (tmp_path / "sweep").rglob("summary.json")}
    assert len(finished) == 4
    rerun = subprocess.run([*command, "seed=0,1,2"], check=True, capture_output=True, text=True, timeout=300)
    assert "Skipped 2 runs finished earlier with the same config; ran 1." in rerun.stdout
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in finished} == finished
    assert len(list((tmp_path / "sweep").rglob("summary.json"))) == 3
    assert "sweep progress: 3 of 3 runs finished" in rerun.stderr + rerun.stdout


def test_sweeps_run_at_the_same_time_into_one_folder_count_their_own_runs(tmp_path):
    """Chunks of a grid run side by side into its fixed folder: each reports its own progress and skips."""
    sweep = tmp_path / "sweep"
    command = [
        sys.executable, "-m", "gittinseval", "-m", "benchmark.subject=abstract_algebra", "budget=0.003",
        "logger=none", f"hydra.sweep.dir={sweep}", "hydra/launcher=basic",
    ]
    subprocess.run([*command, "seed=100"], check=True, capture_output=True, text=True, timeout=300)
    with open(tmp_path / "first.log", "w") as log:
        first = subprocess.Popen([*command, "seed=range(100)"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not list(sweep.glob("*seed=0/summary.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    second = subprocess.run([*command, "seed=100,101"], capture_output=True, text=True, timeout=300)
    finished_by_first = sum(json.loads(p.read_text())["seed"] < 100 for p in sweep.glob("*/summary.json"))
    first.wait(timeout=300)
    first_output = (tmp_path / "first.log").read_text()
    assert first.returncode == 0 and second.returncode == 0, first_output + second.stderr
    # The second sweep started and ended while the first went on (its start-up takes a few seconds).
    assert 0 < finished_by_first < 100, first_output
    assert "sweep progress: 100 of 100 runs finished (100%)" in first_output, first_output
    assert "sweep progress: 2 of 2 runs finished (100%)" in second.stderr + second.stdout, second.stderr
    assert "Skipped 1 run finished earlier with the same config; ran 1." in second.stdout
    assert "Skipped" not in first_output
    assert [p.name for p in sweep.glob(".sweep_*.*")] == []  # each sweep removes its own progress files


def test_trials_in_one_job_are_the_single_runs_of_their_seeds(tmp_path):
    settings = ["benchmark.subject=abstract_algebra", "budget=0.01", "logger=none"]
    batched = run_trials(compose_config(*settings, "seed=4", "trials=3"), tmp_path / "batched")
    assert [r.summary["seed"] for r in batched] == [4, 5, 6]
    for result in batched:
        seed = result.summary["seed"]
        single_cfg = compose_config(*settings, f"seed={seed}")
        single = run_experiment(single_cfg, tmp_path / f"single{seed}")
        saved = json.loads((tmp_path / "batched" / f"seed={seed}" / "summary.json").read_text())
        assert saved["config_digest"] == config_digest(single_cfg)
        for column in ("arm", "batch_size", "recommended", "regret", "cost"):
            np.testing.assert_array_equal(result.trace[column], single.trace[column])
        assert result.summary["stop_step"] == single.summary["stop_step"]
    with pytest.raises(ConfigError, match="trials \\(runs per job\\) must be a positive integer"):
        run_trials(compose_config(*settings, "trials=0"), tmp_path / "none")


@pytest.mark.parametrize("overrides", [
    ["method=ucbe", "seed=3", "trials=4"],
    ["method=gittins_s", "trials=3"],  # an interpolation (policy.prior_estimator), resolved for each trial
    # Settings that read the seed, in a list and a nested dict.
    ["method=gittins_eb", "trials=3", "+policy.extra=[1,'${seed}',{a: '${benchmark.subject}_${seed}'}]",
     "+tag='s${seed}'"],
    ["method=ucbe", "seed=2"],
])
def test_the_digests_of_a_jobs_trials_are_those_of_its_trial_configs(overrides):
    cfg = compose_config(*overrides)
    digest = config_digest(cfg)
    digests = trial_digests(cfg)
    assert digests == [config_digest(trial) for trial in trial_configs(cfg)]
    assert len(set(digests)) == len(digests) and config_digest(cfg) == digest  # the job's seed is set back


def test_a_digest_is_that_of_the_whole_resolved_config_without_the_neutral_keys():
    """config_digest resolves setting by setting: the same SHA-256 as of the whole config resolved at once."""
    for overrides, recorded in ((["method=gittins_eb", "benchmark=matrix"], ()),
                                (["experiment=learned_costs", "method=lrf"], ("record_arm_spend",))):
        cfg = compose_config(*overrides, "+policy.extra=['${seed}', '${logger.mode}']")
        settings = OmegaConf.to_container(cfg, resolve=True)
        for key in RESULT_NEUTRAL_KEYS:
            settings.pop(key, None)
        for key in ("certificate", "stop_when", "objective", "checkpoint_certificates", "cold_start",
                    "compare_certificates", "record_arm_spend"):  # the later settings, left out at their defaults
            if key not in recorded:
                del settings[key]
        if settings["benchmark"].get("prices") == "tokens":  # a later setting inside a group, at its default
            del settings["benchmark"]["prices"]
        # Learned costs: where they were set before they became a run setting (in cost=per_cell_learned's group),
        # and out of the digest of known costs.
        learning = settings.pop("learn_costs")
        if settings["cost"]["_target_"] == "gittinseval.LearnedCellCost":
            settings["cost"] |= {"learn": True, **learning}
        expected = hashlib.sha256(json.dumps(legacy_targets(settings), sort_keys=True).encode()).hexdigest()
        assert config_digest(cfg) == expected


def test_the_zeroeval_price_rule_is_left_out_of_the_digest_at_its_default():
    plain = compose_config("benchmark=gsm8k_zeroeval", "method=gittins_s")
    assert config_digest(compose_config("benchmark=gsm8k_zeroeval", "benchmark.prices=tokens", "method=gittins_s")) \
        == config_digest(plain)
    assert config_digest(compose_config("benchmark=gsm8k_zeroeval", "benchmark.prices=paper", "method=gittins_s")) \
        != config_digest(plain)


def test_the_certificate_settings_at_their_defaults_keep_the_digests_of_the_stored_runs():
    """The committed stores are keyed by digests computed before `certificate` and `stop_when` existed."""
    from gittinseval.sim.results_store import stored_digests

    job = ["experiment=paper/main_gsm8k_zeroeval", "benchmark=gsm8k_zeroeval", "cost=per_cell", "method=gittins_g",
           "seed=0"]
    cfg = compose_config(*job)
    assert cfg.certificate == {"level": 0.95, "eps": 0.01, "samples": 4096, "model": "eb", "anytime": False,
                               "delta": 0.05} and cfg.stop_when is None
    stored = stored_digests(CONFIG_DIR.parent / "docs/results/main_gsm8k_zeroeval.parquet")
    assert config_digest(cfg) in stored
    for setting in ("certificate.level=0.9", "certificate.eps=0.02", "+stop_when.prob_eps_best=0.9",
                    "certificate.anytime=true", "certificate.delta=0.1", "certificate.model=gaussian",
                    "compare_certificates=[eb]"):
        assert config_digest(compose_config(*job, setting)) not in stored, setting


def test_record_arm_spend_puts_each_arms_spend_in_the_summary_and_stays_out_of_the_digest_at_its_default(tmp_path):
    job = ["benchmark=gsm8k_zeroeval", "cost=per_cell", "method=gittins_s", "logger=none", "budget=0.02", "seed=1"]
    run_experiment(compose_config(*job, "record_arm_spend=true"), tmp_path / "recorded")
    summary = json.loads((tmp_path / "recorded" / "summary.json").read_text())
    spend = summary["arm_spend"]
    assert set(spend) == {"1pct", "2pct", "5pct", "10pct"} and len(spend["2pct"]) == summary["n_arms"]
    # The run ends at its 2 % budget: its last batch crosses it, so the 2 % account is the
    # total less that batch, and the 5 and 10 % accounts are the whole spend.
    trace = RunResult.load(tmp_path / "recorded").trace
    last_batch = trace["cost"][-1] - trace["cost"][-2]
    assert sum(spend["2pct"]) == pytest.approx(summary["total_cost"] - last_batch)
    assert sum(spend["10pct"]) == pytest.approx(summary["total_cost"]) and spend["5pct"] == spend["10pct"]
    assert config_digest(compose_config(*job, "record_arm_spend=false")) == config_digest(compose_config(*job))
    assert config_digest(compose_config(*job, "record_arm_spend=true")) != config_digest(compose_config(*job))


def test_a_simulated_run_logs_its_certificate_and_records_the_confidence_stop(tmp_path, caplog):
    cfg = compose_config("benchmark=gsm8k", "logger=none", "budget=0.05", "certificate.eps=0.05",
                         "+stop_when={prob_eps_best: 0.5, eps: 0.05}")
    with caplog.at_level("INFO", logger="gittinseval.sim.experiment"):
        run_experiment(cfg, tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    certificate, stop = summary["certificate"], summary["confidence_stop"]
    assert certificate["eps"] == 0.05 and certificate["arm"] == summary["final_recommended"]
    assert stop["prob_eps_best"] == 0.5 and stop["step"] is not None and stop["cost_pct"] <= 100 * 0.05 + 1
    assert any(f"P(within 0.05) {certificate['prob_eps_best']:.2f}" in r.getMessage() for r in caplog.records)
    assert any(f"confidence stop at {stop['cost_pct']:.3g}%" in r.getMessage() for r in caplog.records)


def test_the_default_objective_keeps_the_digests_of_the_stored_runs():
    """The committed stores are keyed by digests computed before `objective` existed."""
    from gittinseval.sim.results_store import stored_digests

    job = ["experiment=paper/main_gsm8k_zeroeval", "benchmark=gsm8k_zeroeval", "cost=per_cell", "method=gittins_g",
           "seed=0"]
    cfg = compose_config(*job)
    assert cfg.objective.name == "accuracy"
    stored = stored_digests(CONFIG_DIR.parent / "docs/results/main_gsm8k_zeroeval.parquet")
    assert config_digest(cfg) in stored
    for setting in ("objective.name=value", "objective.mu=0.1"):
        assert config_digest(compose_config(*job, setting)) not in stored, setting


def test_a_value_run_recommends_by_value_and_records_its_objective(tmp_path):
    example = CONFIG_DIR.parent / "gittinseval/data/files/examples"
    job = ["benchmark=matrix", f"benchmark.path={example / 'scores.csv'}", f"benchmark.costs={example / 'prices.csv'}",
           "prior=general", "logger=none", "budget=1", "seed=0"]
    accuracy = run_experiment(compose_config(*job), tmp_path / "accuracy").summary
    value_cfg = compose_config(*job, "objective.name=value", "objective.mu=0.05")
    value = run_experiment(value_cfg, tmp_path / "value").summary
    assert "objective" not in accuracy
    assert value["objective"] == {"name": "value", "mu": 0.05, "qualified": None}
    # The whole budget: both end on the best arm of their objective, at zero regret.
    assert accuracy["final_regret"] == value["final_regret"] == 0
    # xlarge/steps (0.800 at 10 per 1M tokens) against large/steps (0.755 at 2.5): 0.300 < 0.630 in value.
    assert accuracy["final_recommended"] == 7 and value["final_recommended"] == 5
@pytest.mark.parametrize("cost", ["unit", "aware", "per_cell"])
def test_committed_runs_keep_their_config_digest(cost):
    """The cost modes' configs are those the committed GSM8K store was run with: its runs are found by digest."""
    cfg = compose_config("experiment=paper/main_gsm8k_zeroeval", "benchmark=gsm8k_zeroeval", f"cost={cost}",
                         "method=gittins_s", "seed=3")
    assert config_digest(cfg) in stored_digests(CODE_ROOT / "docs" / "results" / "main_gsm8k_zeroeval.parquet")


def test_every_stored_learned_costs_run_keeps_its_digest_with_learn_costs_a_run_setting():
    """The learned-costs store was run with `cost.learn`, `cost.pseudo_count` and `cost.refresh_share` in the cost
    group: each of its runs is found by the digest of the same run with `learn_costs` a run setting."""
    stored = stored_digests(CODE_ROOT / "docs" / "results" / "learned_costs.parquet")
    digests = set()
    for factor in (1, 5):
        for learning in ("", "learn_costs=null"):
            job = ["experiment=learned_costs", f"cost.misguess_factor={factor}", "seed=0", "trials=20"]
            digests.update(trial_digests(compose_config(*job, *[learning] * bool(learning))))
    ucbe = ["experiment=learned_costs", "method=ucbe", "cost.misguess_factor=1", "learn_costs=null", "seed=0"]
    digests.update(trial_digests(compose_config(*ucbe, "trials=20")))
    assert len(digests) == len(stored) == 100 and digests == stored
    # Another learning is another run under a guess, and no other run where the costs are known.
    job = ["experiment=learned_costs", "cost.misguess_factor=5", "seed=0"]
    assert config_digest(compose_config(*job, "learn_costs.pseudo_count=2.0")) not in stored
    known = ["benchmark=gsm8k_zeroeval", "cost=per_cell", "seed=0"]
    assert config_digest(compose_config(*known, "learn_costs=null")) == config_digest(compose_config(*known))


# Sweeps of committed stores with runs of the bundled baselines, narrowed to stay quick: (experiment, narrowed
# axes, the baselines swept, their runs).  Together they run every baseline of conf/policy/.
STORED_BASELINE_SWEEPS = [
    ("paper/main_gsm8k_zeroeval", {}, "UCBE LRF SySRs PromptEval PBGI LogEI LogEIPC", 7 * 3 * 20),
    ("paper/main_alpacaeval", {}, "UCBE LRF SySRs PBGI LogEI LogEIPC", 6 * 2 * 20),
    ("paper/mmlu_buckets", {"benchmark.subject": "abstract_algebra,us_foreign_policy"},
     "UCBE LRF SySRs PromptEval PBGI LogEI LogEIPC", 7 * 2 * 2 * 20),
    ("lrf_warm_start", {}, "LRF", 2 * 2 * 20),  # LRF's nested ensemble `_target_` too
    ("certificate_calibration", {"benchmark.subject": "anatomy,virology"}, "UCBE Uniform", 2 * 2 * 20),
]


@pytest.mark.parametrize(("experiment", "narrowed", "baselines", "runs"), STORED_BASELINE_SWEEPS,
                         ids=[sweep[0] for sweep in STORED_BASELINE_SWEEPS])
def test_the_stored_runs_of_the_baselines_keep_their_digests_after_the_move_into_the_package(
    experiment, narrowed, baselines, runs
):
    """The baselines' `_target_`s are now `gittinseval.baselines.*`; their committed runs were digested as
    `baselines.*`, and a sweep still finds every one of them by digest (so it skips them), as the sweeper
    composes them."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        master = compose(config_name="config", overrides=[f"experiment={experiment}"], return_hydra_config=True)
        axes = {**master.hydra.sweeper.params, **narrowed}
        if "method" in axes:  # the baselines' jobs only
            axes["method"] = ",".join(m for m in axes["method"].split(",") if not m.startswith("gittins"))
        parsed = OverridesParser.create().parse_overrides([f"{key}={value}" for key, value in axes.items()])
        jobs = BasicSweeper.split_arguments(parsed, None)[0]
        configs = JobConfigs(GlobalHydra.instance().config_loader(), master)
        stored = stored_digests(CODE_ROOT / master.results_store)
        targets, missing = set(), []
        for job in jobs:
            cfg = configs.config([f"experiment={experiment}", *job])
            targets.add(cfg.policy._target_)
            if config_digest(cfg) not in stored:
                missing.append(job)
    assert len(jobs) == runs
    assert targets == {t for t in targets if t.startswith("gittinseval.baselines.")}
    assert {t.rpartition(".")[2].removesuffix("Policy") for t in targets} == set(baselines.split())
    assert not missing, f"{len(missing)} of {runs} stored runs would run again, e.g. {' '.join(missing[0])}"


def test_the_stored_baseline_sweeps_run_every_bundled_baseline():
    policies = [OmegaConf.load(path)._target_ for path in (CONFIG_DIR / "policy").glob("*.yaml")]
    bundled = {t.rpartition(".")[2].removesuffix("Policy") for t in policies if t.startswith("gittinseval.baselines.")}
    assert len(bundled) == 8 and bundled == {name for sweep in STORED_BASELINE_SWEEPS for name in sweep[2].split()}


def test_a_learned_cost_run_records_its_plan_and_its_refreshes(tmp_path):
    cfg = compose_config("experiment=learned_costs", "method=ucbe", "budget=0.01", "logger=none")
    summary = run_experiment(cfg, tmp_path).summary
    assert summary["cost_plan"] == "5x off for 50%, learned" and summary["cost_refreshes"] > 0
    assert summary["cost_mode"] == "per_cell" and summary["total_cost"] >= 0.01 * summary["exhaustive_cost"]


def test_a_cold_start_run_builds_its_own_root_tables_and_stays_out_of_the_digest_at_its_default(tmp_path):
    from gittinseval.core.roots import completed_root_table

    job = ["benchmark=gsm8k", "cost=aware", "method=gittins_s", "logger=none", "budget=0.01", "seed=0"]
    run_experiment(compose_config(*job), tmp_path / "first")
    built = completed_root_table.cache_info().misses
    run_experiment(compose_config(*job, "seed=1"), tmp_path / "warm")
    warm = completed_root_table.cache_info()
    assert warm.misses == built and warm.hits >= 1  # the same setting: the tables are reused
    run_experiment(compose_config(*job, "seed=2", "cold_start=true"), tmp_path / "cold")
    cold = completed_root_table.cache_info()  # cleared before the run (statistics too), then built anew
    assert cold.hits == 0 and cold.misses >= 1 and cold.currsize == cold.misses
    assert config_digest(compose_config(*job, "cold_start=false")) == config_digest(compose_config(*job))
    assert config_digest(compose_config(*job, "cold_start=true")) != config_digest(compose_config(*job))
