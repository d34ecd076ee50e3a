"""The ``gittinseval`` command: a thin Hydra entry point around :func:`~gittinseval.sim.experiment.run_trials`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from gittinseval.cli.configs import CONFIG_DIR, register_method_aliases, search_path_dirs
from gittinseval.cli.errors import USAGE_ERROR, one_line_errors, run_app
from gittinseval.data import mmlu_subjects
from gittinseval.sim.experiment import code_commit, run_trials
from gittinseval.sim.launchers import check_launcher, check_ray_cluster, check_slurm
from gittinseval.sim.results_store import RunRow
from gittinseval.utils.errors import UsageError

__all__ = ["CONFIG_DIR", "PROGRAM", "RayClusterCheck", "SlurmCheck", "expand_subject_sweep", "main"]

PROGRAM = "gittinseval"

ALL_SUBJECTS = "benchmark.subject=all"


def expand_subject_sweep(argv: list[str]) -> list[str]:
    """Replace ``benchmark.subject=all`` by the 57 MMLU subjects (a multirun sweep)."""
    if ALL_SUBJECTS not in argv:
        return argv
    if "-m" not in argv and "--multirun" not in argv:
        raise UsageError(f"{ALL_SUBJECTS} sweeps the 57 MMLU subjects: add -m (multirun)")
    return [f"benchmark.subject={','.join(mmlu_subjects())}" if arg == ALL_SUBJECTS else arg for arg in argv]


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="config")
@one_line_errors(PROGRAM)
def _app(cfg: DictConfig) -> dict[str, float | int | None]:
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    results = run_trials(
        cfg,
        hydra_cfg.runtime.output_dir,
        name=hydra_cfg.job.override_dirname or None,
        group=Path(hydra_cfg.sweep.dir).name if multirun else None,
    )
    # Read by the sweep callback (progress and the number of runs skipped as finished).
    return {
        "final_regret": results[0].summary["final_regret"] if len(results) == 1 else None,
        "runs": len(results),
        # A run found in the results store comes back as its stored row.
        "reused": sum(isinstance(result, RunRow) or result.reused for result in results),
    }


def _stop_the_sweep(error: UsageError) -> NoReturn:
    # Hydra turns the exceptions of a callback into warnings and goes on (into a launcher
    # that fails over many lines, or a Ray that waits for ever): only an exit stops the sweep.
    print(f"{PROGRAM}: error: {error}", file=sys.stderr)
    raise SystemExit(USAGE_ERROR) from None


class SlurmCheck(Callback):
    """Before a sweep starts, and before it writes anything, stop it with one line if its launcher submits
    to Slurm and Slurm is not there (:func:`~gittinseval.sim.launchers.check_slurm`)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            check_slurm(config)
        except UsageError as error:
            _stop_the_sweep(error)


class RayClusterCheck(Callback):
    """Before a sweep on a running Ray cluster starts, and before it writes anything, stop it with one
    line if it cannot work (:func:`~gittinseval.sim.launchers.check_ray_cluster`)."""

    def __init__(self, timeout: float = 10.0) -> None:
        self.timeout = float(timeout)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            check_ray_cluster(config, self.timeout)
        except UsageError as error:
            _stop_the_sweep(error)


def _start() -> None:
    sys.argv[1:] = expand_subject_sweep(sys.argv[1:])
    # A baseline kept outside the repository joins `-m method=...` sweeps like the bundled ones.
    register_method_aliases(search_path_dirs(sys.argv[1:]))
    check_launcher(sys.argv[1:])
    # Every run of this process is stamped with the commit of the code it loaded now, not
    # with whatever is checked out when its first run finishes (the answer is cached).
    code_commit()
    _app()


def main() -> None:
    # A wrong setting is one line that names it (exit 2); HYDRA_FULL_ERROR=1 keeps the trace.
    run_app(PROGRAM, _start)
