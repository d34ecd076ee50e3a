"""Finished runs found before a sweep launches anything: the job configs composed per choice of config files
equal Hydra's, and a run is skipped only if its digest is stored or finished.  The sweeper that launches the
others in growing batches: tests/hydra_plugins/gittinseval_sweeper/test_skip_finished.py."""

import json
import time

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import OmegaConf, open_dict, read_write

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.sim.experiment import CODE_ROOT, config_digest
from gittinseval.sim.results_store import RunRow, export_rows
from gittinseval.sim.simulator import RunResult
from gittinseval.sim.sweeps import FinishedRuns, JobConfigs


@pytest.fixture
def hydra_loader():
    """Hydra's config loader, as the sweeper gets it, and a function composing a sweep's config."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):

        def sweep_config(*overrides, sweep_dir=None):
            cfg = compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
            if sweep_dir is not None:
                with open_dict(cfg):
                    cfg.hydra.sweep.dir = str(sweep_dir)
            return cfg

        yield GlobalHydra.instance().config_loader(), sweep_config


def jobs(*axes: str) -> list[list[str]]:
    """The override lists of the jobs of a sweep over ``axes`` (``key=a,b``), in the basic sweeper's order."""
    parsed = OverridesParser.create().parse_overrides(list(axes))
    return [list(job) for job in BasicSweeper.split_arguments(parsed, None)[0]]


def hydra_job_config(loader, sweep_config, job):
    """The job's config as Hydra composes it for the job, without the ``hydra`` node."""
    cfg = loader.load_sweep_config(sweep_config, job)
    with read_write(cfg), open_dict(cfg):
        del cfg["hydra"]
    return cfg


def counting_compositions(loader, monkeypatch):
    """The number of configs ``loader`` composes from now on, in a list of one."""
    composed = [0]
    compose_config = loader.load_sweep_config

    def load_sweep_config(master_config, overrides):
        composed[0] += 1
        return compose_config(master_config, overrides)

    monkeypatch.setattr(loader, "load_sweep_config", load_sweep_config)
    return composed


def test_job_configs_are_the_configs_hydra_composes_once_per_choice_of_config_files(hydra_loader, monkeypatch):
    loader, sweep_config = hydra_loader
    master = sweep_config("benchmark.subject=anatomy", "logger=none")
    sweep = jobs("benchmark.subject=anatomy", "logger=none", "method=gittins_s,ucbe", "budget=0.05,0.1", "seed=0,5")
    expected = {tuple(job): OmegaConf.to_container(hydra_job_config(loader, master, job), resolve=True)
                for job in sweep}
    assert len({json.dumps(config, sort_keys=True) for config in expected.values()}) == 8
    composed = counting_compositions(loader, monkeypatch)
    configs = JobConfigs(loader, master)
    # Jobs in the sweep's order (seed fastest), then in an order where each job changes another setting.
    for job in [*sweep, *sorted(sweep, key=lambda job: job[::-1])]:
        assert OmegaConf.to_container(configs.config(job), resolve=True) == expected[tuple(job)], job
    assert composed[0] == 2  # method=gittins_s and method=ucbe


def stored_rows(digests):
    """Rows of runs with these config digests (their curves do not matter here)."""
    cost = np.array([0.5, 1.0])
    trace = {"step": np.arange(1, 3), "arm": np.zeros(2, int), "batch_size": np.full(2, 2), "cost": cost,
             "cost_pct": cost, "recommended": np.zeros(2, int), "regret": np.array([0.2, 0.0])}
    return [RunRow.of(RunResult(trace, {"budget_fraction": 0.1, "config_digest": digest})) for digest in digests]


def test_only_runs_of_a_stored_or_finished_config_count_as_finished(hydra_loader, tmp_path):
    """The store holds the unit-cost runs of seeds 0 and 1, the sweep folder a cost-aware run of seed 2."""
    loader, sweep_config = hydra_loader
    store = tmp_path / "store.parquet"
    common = ["benchmark.subject=anatomy", "logger=none", f"results_store={store}"]
    master = sweep_config(*common, sweep_dir=tmp_path / "sweep")
    unit = [config_digest(hydra_job_config(loader, master, [*common, "cost=unit", f"seed={s}"])) for s in (0, 1)]
    export_rows(stored_rows(unit), store)
    aware_seed_2 = hydra_job_config(loader, master, [*common, "cost=aware", "seed=2"])
    (tmp_path / "sweep" / "elsewhere").mkdir(parents=True)
    (tmp_path / "sweep" / "elsewhere" / "summary.json").write_text(json.dumps({"config_digest":
                                                                               config_digest(aware_seed_2)}))
    finished = FinishedRuns(loader, master)
    counts = {tuple(job[-2:]): finished.count(job) for job in jobs(*common, "cost=unit,aware", "seed=0,1,2")}
    assert counts == {
        ("cost=unit", "seed=0"): (1, 1), ("cost=unit", "seed=1"): (1, 1), ("cost=unit", "seed=2"): (1, 0),
        ("cost=aware", "seed=0"): (1, 0), ("cost=aware", "seed=1"): (1, 0), ("cost=aware", "seed=2"): (1, 1),
    }
    # A job of trials: finished only if every one of its runs is.
    assert finished.count([*common, "cost=unit", "seed=0", "trials=2"]) == (2, 2)
    assert finished.count([*common, "cost=unit", "seed=1", "trials=2"]) == (2, 1)


def test_a_run_held_by_any_of_the_stores_counts_as_finished(hydra_loader, tmp_path):
    """A list of stores: seed 0 is in the first, seed 1 in the second, seed 2 in neither (the second not made yet)."""
    loader, sweep_config = hydra_loader
    first, second = tmp_path / "first.parquet", tmp_path / "second.parquet"
    common = ["benchmark.subject=anatomy", "logger=none", f"results_store=['{first}','{second}']"]
    master = sweep_config(*common, sweep_dir=tmp_path / "sweep")
    digests = [config_digest(hydra_job_config(loader, master, [*common, f"seed={s}"])) for s in range(3)]
    export_rows(stored_rows(digests[:1]), first)
    finished = FinishedRuns(loader, master)
    assert finished.count([*common, "seed=1"]) == (1, 0)
    export_rows(stored_rows(digests[1:2]), second)
    finished = FinishedRuns(loader, master)  # each store is read once, when the first job asks
    assert [finished.count([*common, f"seed={s}"]) for s in range(3)] == [(1, 1), (1, 1), (1, 0)]
    assert finished.count([*common, "seed=0", "trials=3"]) == (3, 2)


def test_the_per_subject_grid_is_all_in_its_two_committed_stores(hydra_loader, tmp_path, monkeypatch):
    """paper/mmlu_subjects sweeps every method on all 57 subjects: 38 are in mmlu_subjects.parquet and the 19 of the
    paper's buckets in mmlu_buckets.parquet.  Against the two, as the sweeper counts them, it makes no run.

    The grid's 20 seeds are counted as jobs of 20 trials (seed=0 trials=20), the same 20520 runs, each job's config
    resolved once for its trials: 19 to 28 s on 2 cores under a load of 4 to 5, against 66 s as 20520 jobs of one
    run."""
    monkeypatch.chdir(CODE_ROOT)  # the stores' paths are relative to the working directory
    loader, sweep_config = hydra_loader
    master = sweep_config("experiment=paper/mmlu_subjects", sweep_dir=tmp_path / "sweep")
    assert list(master.results_store) == ["docs/results/mmlu_subjects.parquet", "docs/results/mmlu_buckets.parquet"]
    params = master.hydra.sweeper.params
    assert params.seed == "range(20)"
    finished = FinishedRuns(loader, master)
    sweep = jobs(*(f"{key}={value}" for key, value in params.items() if key != "seed"), "seed=0", "trials=20")
    counts = [finished.count(["experiment=paper/mmlu_subjects", *job]) for job in sweep]
    assert sum(runs for runs, _ in counts) == 57 * 2 * 9 * 20
    missing = [job for job, (runs, done) in zip(sweep, counts, strict=True) if done < runs]
    assert not missing, f"{len(missing)} jobs would run, e.g. {' '.join(missing[0])}"


def test_a_corrupt_store_is_named_in_one_line(hydra_loader, tmp_path):
    loader, sweep_config = hydra_loader
    store = tmp_path / "store.parquet"
    store.write_bytes(b"not parquet at all")
    master = sweep_config("logger=none", f"results_store={store}", sweep_dir=tmp_path / "sweep")
    with pytest.raises(ValueError, match=f"^{store} is not a readable results store") as error:
        FinishedRuns(loader, master).count(["logger=none", f"results_store={store}", "seed=1"])
    assert "\n" not in str(error.value)


def test_skipping_a_stored_run_takes_a_millisecond_or_so(hydra_loader, tmp_path, monkeypatch):
    loader, sweep_config = hydra_loader
    store = tmp_path / "store.parquet"
    export_rows(stored_rows(["0" * 64]), store)
    common = ["benchmark.subject=anatomy", "logger=none", f"results_store={store}"]
    master = sweep_config(*common, sweep_dir=tmp_path / "sweep")
    sweep = jobs(*common, "method=gittins_s,ucbe", "seed=range(200)")
    composed = counting_compositions(loader, monkeypatch)
    finished = FinishedRuns(loader, master)
    started = time.perf_counter()
    assert {finished.count(job) for job in sweep} == {(1, 0)}
    elapsed = time.perf_counter() - started
    assert composed[0] == 2
    # About 2 ms a job here on a busy machine, two compositions included; Hydra composing each job took 300.
    assert elapsed < 0.010 * len(sweep), elapsed


def test_a_mistyped_option_fails_before_the_first_batch_and_known_options_compose_nothing(hydra_loader, monkeypatch):
    loader, sweep_config = hydra_loader
    master = sweep_config("logger=none")
    composed = counting_compositions(loader, monkeypatch)
    configs = JobConfigs(loader, master)
    configs.check_options(jobs("logger=none", "experiment=paper/main,main", "method=gittins_s,ucbe", "seed=range(50)"))
    assert composed[0] == 0
    with pytest.raises(HydraException, match="Could not find 'method/lfr'"):
        configs.check_options(jobs("logger=none", "method=gittins_s,lfr", "seed=range(50)"))
