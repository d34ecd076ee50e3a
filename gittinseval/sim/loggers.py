"""Experiment loggers (``logger=`` config group)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from gittinseval.sim.simulator import RunResult

__all__ = ["NullLogger", "RunLogger", "WandbLogger"]

log = logging.getLogger(__name__)

WEAVE_SWITCH = "WANDB_DISABLE_WEAVE"


def logged_steps(recommended: np.ndarray, max_points: int) -> np.ndarray:
    """Rows of a trace to log: ``max_points`` evenly spaced ones, the last one and
    every row where the recommendation changes, in order."""
    n_rows = len(recommended)
    if n_rows == 0:
        return np.zeros(0, dtype=np.int64)
    even = np.linspace(0, n_rows - 1, min(max_points, n_rows)).round().astype(np.int64)
    changes = np.flatnonzero(np.diff(recommended)) + 1
    return np.union1d(np.union1d(even, changes), [0, n_rows - 1])


@contextlib.contextmanager
def _no_weave_suggestion() -> Iterator[None]:
    """Keep ``wandb.init`` from printing its three-line advert for W&B Weave.

    W&B suggests Weave whenever an LLM client (``openai``) has been imported, and the
    live tasks import one; a run logged here traces no LLM call.  Weave is turned off
    (``WANDB_DISABLE_WEAVE``) only while the run starts, and only if the user has not
    imported ``weave`` nor set the variable: then wandb would do nothing but print.
    """
    if "weave" in sys.modules or WEAVE_SWITCH in os.environ:
        yield
        return
    os.environ[WEAVE_SWITCH] = "true"
    try:
        yield
    finally:
        os.environ.pop(WEAVE_SWITCH, None)


class RunLogger(Protocol):
    def log_run(
        self,
        result: RunResult,
        config: dict[str, Any],
        directory: Path,
        name: str | None = None,
        group: str | None = None,
    ) -> None:
        """Record one finished run."""


class NullLogger:
    """Logs nothing: the run's ``trace.csv.gz`` and ``summary.json`` are the record."""

    def log_run(self, result, config, directory, name=None, group=None) -> None:  # noqa: D102
        return None


class WandbLogger:
    """Weights & Biases: the resolved config, the regret curve against cost % and the summary.

    The W&B run directory is created inside the run's own output directory.  The
    curve is logged at no more than ``max_points`` batches (evenly spaced, plus
    every batch at which the recommendation changes); the full trace is stored once,
    in the run's output directory, and the W&B run's files link to it (``wandb sync``
    uploads it).  The
    default mode is ``offline`` (upload later with ``wandb sync``); an online run
    that cannot reach the server within ``init_timeout`` seconds falls back to
    offline with a warning instead of failing the experiment.
    """

    def __init__(
        self,
        project: str = "gittinseval",
        entity: str | None = None,
        mode: str = "offline",
        group: str | None = None,
        tags: list[str] | tuple[str, ...] = (),
        init_timeout: float = 30.0,
        max_points: int = 1000,
    ) -> None:
        if mode not in ("online", "offline", "disabled", "shared"):
            raise ValueError(f"logger.mode must be online, offline, disabled or shared, got {mode!r}")
        self.project = project
        self.entity = entity
        self.mode = mode
        self.group = group
        self.tags = list(tags)
        self.init_timeout = float(init_timeout)
        self.max_points = int(max_points)

    def _init(self, mode: str, directory: Path, **kwargs: Any):
        import wandb

        settings = wandb.Settings(silent=True, init_timeout=self.init_timeout, x_disable_stats=True)
        with _no_weave_suggestion():
            return wandb.init(
                project=self.project,
                entity=self.entity,
                mode=mode,
                dir=str(directory),
                tags=self.tags,
                reinit="create_new",
                settings=settings,
                **kwargs,
            )

    def start_run(self, directory: Path, **kwargs: Any):
        """A W&B run in ``directory`` (``kwargs`` go to ``wandb.init``), offline if the server is unreachable."""
        try:
            return self._init(self.mode, directory, **kwargs)
        except Exception as error:  # noqa: BLE001 - any failure to reach W&B
            if self.mode == "offline":
                raise
            log.warning("W&B %s run could not start (%s); logging offline instead", self.mode, error)
            return self._init("offline", directory, **kwargs)

    def log_run(self, result, config, directory, name=None, group=None) -> None:
        directory = Path(directory)
        run = self.start_run(
            directory, name=name, group=self.group or group, job_type=result.summary.get("label"), config=config
        )
        run.define_metric("cost_pct")
        for metric in ("regret", "recommended", "arm"):
            run.define_metric(metric, step_metric="cost_pct")
        trace = result.trace
        for i in logged_steps(trace["recommended"], self.max_points):
            run.log(
                {
                    "cost_pct": float(trace["cost_pct"][i]),
                    "regret": float(trace["regret"][i]),
                    "recommended": int(trace["recommended"][i]),
                    "arm": int(trace["arm"][i]),
                },
                step=int(trace["step"][i]),
            )
        run.summary.update({k: v for k, v in result.summary.items() if v is not None})
        trace_path = RunResult.trace_path(directory)
        if trace_path is not None:
            # A relative link, not a copy: one stored trace per run, and the sweep folder
            # can be moved.  Saved from inside run.dir, W&B records it without re-linking.
            link = Path(run.dir) / trace_path.name
            link.symlink_to(os.path.relpath(trace_path.resolve(), link.parent.resolve()))
            run.save(str(link), base_path=run.dir, policy="now")
        run.finish()
