"""Build a live run from a composed ``gittinseval-live`` config and execute it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig

from gittinseval.gittins import GittinsPolicy
from gittinseval.live.driver import LiveResult, evaluate
from gittinseval.live.scoring import LiveTask

__all__ = ["run_live"]

log = logging.getLogger(__name__)


def run_live(cfg: DictConfig, output_dir: str | Path) -> LiveResult:
    """Instantiate ``cfg.task`` and ``cfg.prior``, evaluate to ``cfg.budget`` dollars.

    Resumes from ``cfg.store`` when it exists.  Writes ``summary.json`` and
    ``status.txt`` (the top arms) to ``output_dir``.
    """
    task = instantiate(cfg.task)
    if not isinstance(task, LiveTask):
        raise ValueError(f"task must instantiate a gittinseval.live.LiveTask, got {type(task).__name__}")
    store = Path(cfg.store)
    log.info("%s %s", "resuming from" if store.exists() else "new store", store)
    result = evaluate(
        task.arms,
        task.examples,
        task.score_fn,
        float(cfg.budget),
        costs=task.costs,
        prior=instantiate(cfg.prior),
        concurrency=int(cfg.concurrency),
        store=store,
        stop_at_signal=bool(cfg.stop_at_signal),
        seed=int(cfg.seed),
        max_retries=int(cfg.max_retries),
        retry_backoff=float(cfg.retry_backoff),
        progress=bool(cfg.progress),
        policy=GittinsPolicy(**cfg.policy),
    )
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    summary = {"task": task.name, **result.summary()}
    (output_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (output_dir / "status.txt").write_text(result.status.format(top=20) + "\n")
    log.info(
        "stopped (%s) after $%.4g of $%.4g; recommended %s (M=%.3f, LCB=%.3f); stop signal %s; store %s",
        result.stop_reason,
        result.spent,
        result.budget,
        result.recommendation.name,
        result.recommendation.mean,
        result.recommendation.lcb,
        "fired" if result.stop_signal else "not fired",
        store,
    )
    return result
