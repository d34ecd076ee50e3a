"""Build a live run from a composed ``gittinseval-live`` config and execute it."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import replace
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, open_dict

from gittinseval.core.protocol import FALLBACK_BATCH_SIZE
from gittinseval.live.config import LiveConfig
from gittinseval.live.driver import LiveResult, evaluate_async
from gittinseval.live.dry_run import dry_run_report
from gittinseval.live.status import Recommendation, status_text
from gittinseval.live.task import UNIT, LiveTask

__all__ = ["dry_run", "run_live"]

log = logging.getLogger(__name__)


def _build_task(cfg: DictConfig) -> LiveTask:
    """``cfg.task`` with the costs of ``cfg.cost``; ``cfg.task.name`` becomes the built task's name.

    The default ``store`` is named after ``${task.name}``, which a task config may leave to the task
    (``name: null``: an inspect task's own name): written back here, before the store is resolved,
    it gives every task a default store of its own.
    """
    task = instantiate(cfg.task)
    if not isinstance(task, LiveTask):
        raise ValueError(f"task must instantiate a gittinseval.live.LiveTask, got {type(task).__name__}")
    with open_dict(cfg.task):
        cfg.task.name = task.name
    return replace(task, costs=instantiate(cfg.cost).live_costs(task.costs))


def dry_run(cfg: DictConfig) -> str:
    """``dry_run=true``: the arms with their labels, the expected dollars, the exhaustive cost and what the
    budget buys (:func:`~gittinseval.live.dry_run.dry_run_report`), without any call, store or log."""
    task = _build_task(cfg)
    if isinstance(task.costs, str) and task.costs == UNIT:
        raise ValueError("dry_run=true estimates dollars, and cost=unit counts examples: use cost=aware")
    batch_size = getattr(instantiate(cfg.policy), "batch_size", None) or FALLBACK_BATCH_SIZE
    return dry_run_report(task, cfg.budget_usd, batch_size)


def run_live(cfg: DictConfig, output_dir: str | Path) -> LiveResult:
    """Instantiate ``cfg.task`` with the costs of ``cfg.cost``, build the :class:`LiveConfig` of
    the rest once, and evaluate to ``cfg.budget_usd``.

    Resumes from ``cfg.store`` when it exists.  Writes ``summary.json`` and
    ``status.txt`` (the top arms) to ``output_dir``; a W&B logger writes its
    run there too.
    """
    task = _build_task(cfg)
    output_dir = Path(output_dir)
    config = LiveConfig.from_hydra(cfg, task.benchmark, output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(evaluate_async(task, config))
    summary = {"task": task.name, **result.summary()}
    (output_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (output_dir / "status.txt").write_text(status_text(result.ledger_line(), result.warnings, result.status))
    for warning in result.warnings:
        log.warning("%s", warning)
    rec = result.recommendation
    log.info(
        "stopped (%s); %s; %s; stop signal %s; store %s",
        result.stop_reason,
        result.ledger_line(),
        result.failure if rec is None else f"recommended {rec.label} ({_recommendation_figures(rec)})",
        "fired" if result.stop_signal else "not fired",
        config.run_store,
    )
    if result.certificate is not None:
        log.info("certificate of %s: %s", rec.label, result.certificate.format())
    return result


def _recommendation_figures(rec: Recommendation) -> str:
    """``M=..., LCB=...`` of the recommended arm's accuracy; under the ``value`` objective its accuracy ``M`` and
    the value it was recommended by, with the value's LCB."""
    if rec.value is None:
        return f"M={rec.mean:.3f}, LCB={rec.lcb:.3f}"
    return f"M={rec.mean:.3f}, value={rec.value:.3f}, value LCB={rec.value_lcb:.3f}"
