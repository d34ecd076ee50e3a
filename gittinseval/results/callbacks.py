"""Hydra callbacks: sweep progress, skipped-run accounting, the regret figure and where the runs go."""

from __future__ import annotations

import logging
import math
import os
import socket
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from gittinseval.results.plotting import plot_sweep
from gittinseval.sim.experiment import store_paths
from gittinseval.utils.text import count

__all__ = ["PlotSweep", "record_runs", "sweep_size"]

log = logging.getLogger(__name__)

# Written into the sweep directory at its start: the number of runs of the sweep, read
# by every job (jobs may run in other processes or on other machines), and a file to
# which each job appends one line when it ends.
SIZE_FILE = ".sweep_size"
MAX_SWEEP_FIGURES = 12
DONE_FILE = ".sweep_done"
# Names the sweep's own pair of those files, so that sweeps run at the same time into one
# folder (chunks of a grid) count their own runs.  Jobs inherit it from the process that
# launched the sweep; a job that does not (a remote Ray cluster) uses the folder's shared pair.
SWEEP_ID_VARIABLE = "GITTINSEVAL_SWEEP_ID"


def sweep_size(config: DictConfig) -> int:
    """Number of runs of the multirun: the product of the sizes of its swept values.

    Counts the command-line overrides and ``hydra.sweeper.params`` as the basic
    sweeper does (a key given in both is swept as on the command line).
    """
    params = dict(config.hydra.sweeper.get("params") or {})
    task = list(config.hydra.overrides.task)
    given = {override.split("=", 1)[0].lstrip("+~") for override in task}
    overrides = task + [f"{key}={value}" for key, value in params.items() if key not in given]
    parsed = OverridesParser.create().parse_overrides(overrides)
    return math.prod(len(list(o.sweep_string_iterator())) if o.is_sweep_override() else 1 for o in parsed)


def _finished_runs(sweep_dir: Path) -> list[Path]:
    return list(sweep_dir.rglob("summary.json"))


def _progress_files(sweep_dir: Path, sweep_id: str | None) -> tuple[Path, Path]:
    """The size and done files of the sweep ``sweep_id`` (``None``: the folder's shared pair)."""
    suffix = f".{sweep_id}" if sweep_id else ""
    return sweep_dir / f"{SIZE_FILE}{suffix}", sweep_dir / f"{DONE_FILE}{suffix}"


def _job_progress_files(sweep_dir: Path) -> tuple[Path, Path]:
    """The progress files of the sweep this job belongs to, as far as the job can tell."""
    own = _progress_files(sweep_dir, os.environ.get(SWEEP_ID_VARIABLE))
    return own if own[0].is_file() else _progress_files(sweep_dir, None)


def _done_counts(done_file: Path) -> tuple[int, int]:
    """(runs ended, runs of them reused as finished earlier) in a done file (0, 0 if there is none)."""
    if not done_file.is_file():
        return 0, 0
    rows = [line.split() for line in done_file.read_text().splitlines() if line.strip()]
    return sum(int(runs) for runs, _ in rows), sum(int(reused) for _, reused in rows)


def record_runs(sweep_dir: Path, runs: int, reused: int) -> None:
    """Count ``runs`` more runs as ended in the progress of the sweep in ``sweep_dir`` (``reused`` of them
    skipped as finished earlier), and log the progress; nothing outside a multirun that :class:`PlotSweep` follows.

    Called by each job when it ends, and by the sweeper for the jobs it leaves out.
    """
    size_file, done_file = _job_progress_files(sweep_dir)
    if not size_file.is_file():  # a single run, not a multirun
        return
    total = int(size_file.read_text())
    # One short append per job is atomic on a local file opened for appending, so
    # jobs in parallel processes count without a lock.
    with open(done_file, "a") as handle:
        handle.write(f"{runs} {reused}\n")
    done = _done_counts(done_file)[0]
    log.info("sweep progress: %d of %s finished (%.0f%%)", done, count(total, "run"), 100 * done / max(total, 1))


class PlotSweep(Callback):
    """Around a multirun: progress after every run; at the end, how many runs were
    skipped as finished earlier, the regret figure and where everything is."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        total = sweep_size(config) * int(config.get("trials", 1))  # every job runs `trials` seeds
        sweep_id = f"{socket.gethostname()}-{os.getpid()}"  # one multirun per process at a time
        os.environ[SWEEP_ID_VARIABLE] = sweep_id
        for size_file, done_file in (_progress_files(sweep_dir, sweep_id), _progress_files(sweep_dir, None)):
            size_file.write_text(f"{total}\n")
            done_file.write_text("")
        finished = len(_finished_runs(sweep_dir))
        if finished:
            log.info("%s already holds %s; runs of the same config are skipped", sweep_dir,
                     count(finished, "finished run"))

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        completed = job_return is not None and job_return.status == JobStatus.COMPLETED
        outcome = job_return.return_value if completed else None
        runs, reused = (outcome["runs"], outcome["reused"]) if isinstance(outcome, dict) else (0, 0)
        record_runs(Path(config.hydra.sweep.dir), runs, reused)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        offline_run = next(sweep_dir.glob("**/wandb/offline-run-*"), None)  # none with logger=none
        saved = "trace.csv.gz, summary.json" + (", W&B offline runs" if offline_run is not None else "")
        print(f"\nRuns ({saved}): {sweep_dir.resolve()}/*/")
        sweep_id = os.environ.pop(SWEEP_ID_VARIABLE, None)
        own_size, own_done = _progress_files(sweep_dir, sweep_id)
        runs, reused = _done_counts(own_done)
        if not runs:  # jobs that could not see the sweep's id (a remote Ray cluster) counted in the shared file
            runs, reused = _done_counts(_progress_files(sweep_dir, None)[1])
        if sweep_id:
            own_size.unlink(missing_ok=True)
            own_done.unlink(missing_ok=True)
        if reused:
            print(f"Skipped {count(reused, 'run')} finished earlier with the same config; ran {runs - reused}.")
        # Runs are exported to the first store; the others hold runs of the same grid from other sweeps.
        stores = store_paths(config.get("results_store"))
        if not _finished_runs(sweep_dir):  # e.g. every run was found in the results stores
            print("No runs in the sweep folder" + (
                f"; report the results {'stores' if len(stores) > 1 else 'store'}: gittinseval-report "
                + " ".join(map(str, stores)) if stores else "."))
            return
        # A sweep over many benchmarks (all MMLU subjects) would take minutes to draw one
        # figure each; gittinseval-report pools them into the paper's panels instead.
        figures, curves = plot_sweep(sweep_dir, max_figures=MAX_SWEEP_FIGURES)
        if figures:
            for curve in curves:
                stop = "no signal" if curve.stop_pct is None else f"mean stop at {curve.stop_pct:.3g}%"
                print(f"  {curve.label:<24} {count(curve.n_runs, 'run')}, final mean regret {curve.mean[-1]:.4g}, "
                      f"{stop} ({curve.n_stopped}/{count(curve.n_runs, 'run')})")
            for figure in figures:
                print(f"Regret figure: {figure.resolve()}")
        else:
            print(f"More than {MAX_SWEEP_FIGURES} benchmark x cost panels: no figure or summary here; "
                  "gittinseval-report pools them into the paper's panels (MMLU by bucket).")
        print(f"Summary tables: gittinseval-report {sweep_dir}")
        if stores:
            print(f"Add the runs to the results store: gittinseval-store export {sweep_dir} --to {stores[0]}")
        if offline_run is not None:
            # Run folders sit one level down, or two with trials= (seed=<s>/ inside the job's).
            run_folders = "/".join("*" * (len(offline_run.relative_to(sweep_dir).parts) - 2))
            print(f"Upload the offline W&B runs with: wandb sync {sweep_dir}/{run_folders}/wandb/offline-run-*")
