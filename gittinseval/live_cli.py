"""The ``gittinseval-live`` command: a thin Hydra entry point around :func:`run_live`.

Config: ``conf/live.yaml`` with the ``task``, ``policy``, ``prior``, ``cost`` and
``logger`` groups of ``conf/``.  Rerunning with the same ``store=`` resumes.
Exits with status 1 when the run ends without a recommendation (nothing was
scored) or stopped on an error.
"""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from gittinseval.cli import CONFIG_DIR
from gittinseval.live.app import run_live

__all__ = ["LIVE_CONFIG_NAME", "main"]

LIVE_CONFIG_NAME = "live"


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name=LIVE_CONFIG_NAME)
def main(cfg: DictConfig) -> float:
    result = run_live(cfg, HydraConfig.get().runtime.output_dir)
    if result.recommendation is None:
        raise SystemExit(f"gittinseval-live: {result.failure}")
    if result.stop_reason == "error":
        raise SystemExit(f"gittinseval-live: stopped on an error after spending {result.spent:.4g}: {result.error!r}")
    return result.spent


if __name__ == "__main__":
    main()
