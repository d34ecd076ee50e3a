"""The ``gittinseval`` command: a thin Hydra entry point around :func:`run_experiment`."""

from __future__ import annotations

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from gittinseval.experiment import run_experiment

__all__ = ["CONFIG_DIR", "main"]


def _config_dir() -> Path:
    """``conf/`` inside an installed wheel, else the repository's top-level ``conf/``."""
    packaged = Path(__file__).resolve().parent / "conf"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parent.parent / "conf"


CONFIG_DIR = _config_dir()


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="config")
def main(cfg: DictConfig) -> float | None:
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    result = run_experiment(
        cfg,
        hydra_cfg.runtime.output_dir,
        name=hydra_cfg.job.override_dirname or None,
        group=Path(hydra_cfg.sweep.dir).name if multirun else None,
    )
    return result.summary["final_regret"]
