"""The Hydra callbacks of a sweep (gittinseval.results.callbacks): its size, its progress counted by every job, and
what its end says about the runs, the skipped ones and where everything is."""

import os
from types import SimpleNamespace

import numpy as np
from hydra.core.utils import JobStatus
from omegaconf import OmegaConf

from gittinseval import Benchmark, GaussianPrior, GittinsPolicy, simulate
from gittinseval.results.callbacks import DONE_FILE, SIZE_FILE, SWEEP_ID_VARIABLE, PlotSweep, record_runs, sweep_size
from tests.sim.test_experiment import compose_config


def test_sweep_size_counts_the_product_of_the_axes():
    cfg = compose_config("experiment=paper/main", return_hydra_config=True)
    OmegaConf.set_struct(cfg, False)
    cfg.hydra.overrides.task = ["seed=range(3)", "cost=aware"]
    # benchmark 2 x matrix seeds 5 x methods 9, with seed and cost narrowed on the command line
    assert sweep_size(cfg) == 2 * 5 * 9 * 3 * 1


def test_the_sweep_summary_names_wandb_runs_only_if_there_are_some(tmp_path, capsys):
    from omegaconf import OmegaConf

    from gittinseval.results.callbacks import PlotSweep

    benchmark = Benchmark("toy", np.random.default_rng(0).uniform(size=(4, 12)))
    simulate(benchmark, GittinsPolicy(batch_size=4), np.ones(4), GaussianPrior(), seed=0).save(tmp_path / "seed=0")
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}, "results_store": None})
    PlotSweep().on_multirun_end(config)  # a sweep with logger=none
    assert "W&B" not in capsys.readouterr().out
    (tmp_path / "seed=0" / "wandb" / "offline-run-1").mkdir(parents=True)
    PlotSweep().on_multirun_end(config)
    out = capsys.readouterr().out
    assert "(trace.csv.gz, summary.json, W&B offline runs)" in out and "Upload the offline W&B runs" in out


def test_a_sweep_whose_runs_were_all_stored_points_at_the_store(tmp_path, capsys):
    from omegaconf import OmegaConf

    from gittinseval.results.callbacks import DONE_FILE, PlotSweep

    (tmp_path / DONE_FILE).write_text("1 1\n1 1\n")
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}, "results_store": "docs/results/x.parquet"})
    PlotSweep().on_multirun_end(config)
    out = capsys.readouterr().out
    assert "Skipped 2 runs finished earlier with the same config; ran 0." in out
    assert "No runs in the sweep folder; report the results store: gittinseval-report docs/results/x.parquet" in out
    config.results_store = ["docs/results/x.parquet", "docs/results/y.parquet"]
    PlotSweep().on_multirun_end(config)
    out = capsys.readouterr().out
    assert ("No runs in the sweep folder; report the results stores: gittinseval-report docs/results/x.parquet "
            "docs/results/y.parquet") in out


def sweep_config(sweep_dir, trials=1):
    """A multirun's config: ``x`` swept on the command line, ``seed`` by the sweeper's params (``lr`` there too,
    but fixed on the command line, which wins), each job running ``trials`` seeds."""
    return OmegaConf.create({
        "hydra": {"sweep": {"dir": str(sweep_dir)}, "overrides": {"task": ["lr=5", "x=a,b"]},
                  "sweeper": {"params": {"seed": "range(3)", "lr": "1,2"}}},
        "trials": trials, "results_store": None,
    })


def test_the_size_counts_the_command_lines_axes_over_the_sweepers_params(tmp_path):
    assert sweep_size(sweep_config(tmp_path)) == 1 * 2 * 3


def test_each_job_counts_its_runs_in_its_own_sweeps_progress_and_the_end_sums_them(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(SWEEP_ID_VARIABLE, raising=False)
    config = sweep_config(tmp_path, trials=2)
    callback = PlotSweep()
    callback.on_multirun_start(config)
    sweep_id = os.environ[SWEEP_ID_VARIABLE]
    own_size, own_done = tmp_path / f"{SIZE_FILE}.{sweep_id}", tmp_path / f"{DONE_FILE}.{sweep_id}"
    assert own_size.read_text() == "12\n" and (tmp_path / SIZE_FILE).read_text() == "12\n"  # 6 jobs x 2 trials
    finished = SimpleNamespace(status=JobStatus.COMPLETED, return_value={"runs": 2, "reused": 1})
    callback.on_job_end(config, job_return=finished)
    callback.on_job_end(config, job_return=SimpleNamespace(status=JobStatus.FAILED, return_value=None))
    record_runs(tmp_path, 3, 3)  # the sweeper's count of the jobs it left out
    assert own_done.read_text() == "2 1\n0 0\n3 3\n" and (tmp_path / DONE_FILE).read_text() == ""
    callback.on_multirun_end(config)
    out = capsys.readouterr().out
    assert "Skipped 4 runs finished earlier with the same config; ran 1." in out
    assert "No runs in the sweep folder." in out  # no summary.json: every run was reused or failed
    assert not own_size.exists() and not own_done.exists() and SWEEP_ID_VARIABLE not in os.environ


def test_a_single_run_counts_nothing(tmp_path):
    record_runs(tmp_path, 1, 0)
    assert list(tmp_path.iterdir()) == []
