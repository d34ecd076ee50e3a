"""The ``gittinseval-live`` command: a thin Hydra entry point around :func:`run_live`.

Config: ``conf/live/live.yaml``.  Rerunning with the same ``store=`` resumes.
"""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from gittinseval.cli import CONFIG_DIR
from gittinseval.live.app import run_live

__all__ = ["LIVE_CONFIG_DIR", "main"]

LIVE_CONFIG_DIR = CONFIG_DIR / "live"


@hydra.main(version_base="1.3", config_path=str(LIVE_CONFIG_DIR), config_name="live")
def main(cfg: DictConfig) -> float:
    return run_live(cfg, HydraConfig.get().runtime.output_dir).spent


if __name__ == "__main__":
    main()
