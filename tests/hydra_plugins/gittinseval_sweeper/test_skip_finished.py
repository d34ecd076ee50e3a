"""The sweeper of ``gittinseval -m`` (hydra_plugins.gittinseval_sweeper.skip_finished): Hydra's basic sweeper that
launches only the jobs with a run to do, in growing batches, and counts the ones it leaves out."""

import importlib
import itertools

import pytest
from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from omegaconf import OmegaConf

from gittinseval.cli.configs import CONFIG_DIR

SLURM = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"


@pytest.fixture(scope="module")
def skip_finished():
    """The sweeper's module, imported after Hydra's plugin scan (which runs every plugin module again)."""
    Plugins.instance()
    return importlib.import_module("hydra_plugins.gittinseval_sweeper.skip_finished")


class FakeFinishedRuns:
    """Jobs ``seed=<s>`` of ``trials`` runs each (seeds ``s, s + 1, ...``): a run is finished if its seed is in
    ``finished``."""

    sweep_dir = "sweep"

    def __init__(self, finished, trials=1):
        self.finished = set(finished)
        self.trials = trials

    def check_options(self, jobs):
        """Every option exists."""

    def count(self, job):
        first = int(job[0].split("=")[1])
        return self.trials, sum(seed in self.finished for seed in range(first, first + self.trials))


def sweeper(module, n_jobs, finished, max_batch_size=50, launcher="hydra_plugins.hydra_joblib_launcher.Joblib",
            trials=1):
    """The sweeper over ``seed=range(n_jobs)`` (``trials`` runs a job), set up as Hydra would, with the runs of
    ``finished`` finished."""
    sweeper = module.SkipFinishedSweeper(max_batch_size, launch_at_once=[SLURM])
    sweeper.config = OmegaConf.create({"hydra": {"launcher": {"_target_": launcher}}, "results_store": None})
    sweeper.overrides = BasicSweeper.split_arguments(
        OverridesParser.create().parse_overrides([f"seed=range(0,{n_jobs * trials},{trials})"]), max_batch_size
    )
    sweeper._finished = FakeFinishedRuns(finished, trials)
    return sweeper


def launched_batches(sweeper):
    batches = []
    while not sweeper.is_done():
        batches.append([int(job[0].split("=")[1]) for job in sweeper.get_job_batch()])
    return batches


def test_the_sweeper_launches_only_jobs_with_a_run_to_do_in_growing_batches(skip_finished, monkeypatch):
    recorded = []
    monkeypatch.setattr(skip_finished, "record_runs", lambda sweep_dir, runs, reused: recorded.append((runs, reused)))
    finished = set(range(30, 1290))
    batches = launched_batches(sweeper(skip_finished, 1400, finished))
    assert [len(batch) for batch in batches] == [20, 40, 50, 30]  # doubling from 20 up to max_batch_size=50
    assert sorted(itertools.chain(*batches)) == sorted(set(range(1400)) - finished)
    assert batches[1][9:11] == [29, 1290]
    # The skipped runs are counted in the sweep's progress, at least every thousand.
    assert recorded == [(1000, 1000), (260, 260)]
    assert sum(runs for runs, _ in recorded) == len(finished)


def test_a_sweep_of_finished_runs_launches_nothing_and_a_slurm_sweep_launches_at_once(skip_finished, monkeypatch):
    monkeypatch.setattr(skip_finished, "record_runs", lambda *args: None)
    assert launched_batches(sweeper(skip_finished, 300, range(300))) == []
    at_once = sweeper(skip_finished, 300, range(100, 200), launcher=SLURM)
    assert [len(batch) for batch in launched_batches(at_once)] == [200]
    assert [len(batch) for batch in launched_batches(sweeper(skip_finished, 300, (), max_batch_size=None))] == [300]


def test_a_job_of_several_runs_is_skipped_only_when_all_of_its_runs_are_finished(skip_finished, monkeypatch):
    """Jobs of three runs (seeds 0-2, 3-5, ...): every run of the jobs at seeds 0 and 9 is finished, one run of the
    job at seed 3 and two of the job at seed 6.  Only the jobs whose runs are all finished are left out, and only
    their runs are counted as skipped (a launched job skips its finished runs itself)."""
    recorded = []
    monkeypatch.setattr(skip_finished, "record_runs", lambda sweep_dir, runs, reused: recorded.append((runs, reused)))
    finished = {0, 1, 2, 4, 6, 8, 9, 10, 11}
    assert launched_batches(sweeper(skip_finished, 5, finished, trials=3)) == [[3, 6, 12]]
    assert recorded == [(6, 6)]


def test_gittinseval_sweeps_with_the_skipping_sweeper(skip_finished):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=paper/mmlu_buckets"], return_hydra_config=True)
    assert cfg.hydra.sweeper._target_ == f"{skip_finished.__name__}.SkipFinishedSweeper"
    assert cfg.hydra.sweeper.max_batch_size == 1000 and SLURM in cfg.hydra.sweeper.launch_at_once
    assert cfg.hydra.sweeper.params.seed == "range(20)"
