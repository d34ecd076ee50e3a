"""The ``gittinseval`` command: a thin Hydra entry point around :func:`~gittinseval.sim.experiment.run_trials`."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from gittinseval.cli.configs import CONFIG_DIR, register_method_aliases, search_path_dirs
from gittinseval.cli.errors import one_line_errors, run_app
from gittinseval.data import mmlu_subjects
from gittinseval.sim.experiment import code_commit, run_trials
from gittinseval.sim.launchers import check_launcher
from gittinseval.sim.results_store import RunRow

__all__ = ["CONFIG_DIR", "expand_subject_sweep", "main"]

ALL_SUBJECTS = "benchmark.subject=all"


def expand_subject_sweep(argv: list[str]) -> list[str]:
    """Replace ``benchmark.subject=all`` by the 57 MMLU subjects (a multirun sweep)."""
    if ALL_SUBJECTS not in argv:
        return argv
    if "-m" not in argv and "--multirun" not in argv:
        raise SystemExit(f"{ALL_SUBJECTS} sweeps the 57 MMLU subjects: add -m (multirun)")
    return [f"benchmark.subject={','.join(mmlu_subjects())}" if arg == ALL_SUBJECTS else arg for arg in argv]


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="config")
@one_line_errors("gittinseval")
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


def main() -> None:
    sys.argv[1:] = expand_subject_sweep(sys.argv[1:])
    # A baseline kept outside the repository joins `-m method=...` sweeps like the bundled ones.
    register_method_aliases(search_path_dirs(sys.argv[1:]))
    check_launcher(sys.argv[1:])
    # Every run of this process is stamped with the commit of the code it loaded now, not
    # with whatever is checked out when its first run finishes (the answer is cached).
    code_commit()
    # A wrong setting is one line that names it (exit 2); HYDRA_FULL_ERROR=1 keeps the trace.
    run_app("gittinseval", _app)
