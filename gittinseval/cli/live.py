"""The ``gittinseval-live`` command: a thin Hydra entry point around :func:`run_live`.

Config: ``conf/live.yaml`` with the ``task``, ``policy``, ``prior``, ``cost`` and
``logger`` groups of ``conf/``.  Rerunning with the same ``store=`` resumes;
``dry_run=true`` prints the expected cost and exits without any call.
Every error is one line on stderr: exit status 2 for a usage error (a wrong
override, bad input data, a store that is refused or in use), 1 when the run
ends on a failed scoring call or without a recommendation (nothing was scored),
130 when it was interrupted (Ctrl-C: the run's one-line stopped message, and the
store closed; a second Ctrl-C abandons the calls in flight).
"""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.cli.errors import INTERRUPTED, RunFailure, one_line_errors, run_app
from gittinseval.live.app import dry_run, run_live

__all__ = ["LIVE_CONFIG_NAME", "main"]

LIVE_CONFIG_NAME = "live"


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name=LIVE_CONFIG_NAME)
@one_line_errors("gittinseval-live")
def _app(cfg: DictConfig) -> float:
    if cfg.dry_run:
        print(dry_run(cfg))
        return 0.0
    result = run_live(cfg, HydraConfig.get().runtime.output_dir)
    if result.stop_reason == "interrupted":
        raise SystemExit(INTERRUPTED)  # after run_live's line: stopped (interrupted), the spend, the store
    if result.recommendation is None:
        raise RunFailure(result.failure)
    if result.stop_reason == "error":
        raise RunFailure(f"stopped on an error, {result.ledger_line()}: {result.error_message}")
    return result.spent


def main() -> None:
    run_app("gittinseval-live", _app)


if __name__ == "__main__":
    main()
