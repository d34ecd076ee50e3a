"""Build a live run from a composed ``gittinseval-live`` config and execute it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from gittinseval.live.driver import LiveResult, evaluate
from gittinseval.live.scoring import LiveTask

__all__ = ["run_live"]

log = logging.getLogger(__name__)


def run_live(cfg: DictConfig, output_dir: str | Path) -> LiveResult:
    """Instantiate ``cfg.task``, ``cfg.policy``, ``cfg.prior``, ``cfg.cost`` and ``cfg.logger``;
    evaluate to ``cfg.budget``.

    Resumes from ``cfg.store`` when it exists.  Writes ``summary.json`` and
    ``status.txt`` (the top arms) to ``output_dir``; a W&B logger writes its
    run there too.
    """
    task = instantiate(cfg.task)
    if not isinstance(task, LiveTask):
        raise ValueError(f"task must instantiate a gittinseval.live.LiveTask, got {type(task).__name__}")
    prior = instantiate(cfg.prior).resolve(task.benchmark)
    store = Path(cfg.store)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    log.info("%s %s", "resuming from" if store.exists() else "new store", store)
    result = evaluate(
        task.arms,
        task.examples,
        task.score_fn,
        float(cfg.budget),
        costs=instantiate(cfg.cost).live_costs(task.costs),
        policy=instantiate(cfg.policy),
        prior=prior,
        tokens_per_example=task.tokens_per_example,
        binary=task.binary,
        concurrency=int(cfg.concurrency),
        store=store,
        stop_at_signal=bool(cfg.stop_at_signal),
        seed=int(cfg.seed),
        max_retries=int(cfg.max_retries),
        retry_backoff=float(cfg.retry_backoff),
        progress=bool(cfg.progress),
        logger=instantiate(cfg.logger),
        log_config=OmegaConf.to_container(cfg, resolve=True),
        log_dir=output_dir,
    )
    summary = {"task": task.name, **result.summary()}
    (output_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (output_dir / "status.txt").write_text(result.status.format(top=20) + "\n")
    rec = result.recommendation
    log.info(
        "stopped (%s) after %.4g of %.4g; %s; stop signal %s; store %s",
        result.stop_reason,
        result.spent,
        result.budget,
        result.failure if rec is None else f"recommended {rec.name} (M={rec.mean:.3f}, LCB={rec.lcb:.3f})",
        "fired" if result.stop_signal else "not fired",
        store,
    )
    return result
