"""Build a live run from a composed ``gittinseval-live`` config and execute it."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

from gittinseval.core.protocol import FALLBACK_BATCH_SIZE
from gittinseval.core.session import RunSettings
from gittinseval.live.config import LiveConfig
from gittinseval.live.driver import evaluate_async
from gittinseval.live.dry_run import dry_run_report
from gittinseval.live.result import LiveResult
from gittinseval.live.status import Recommendation, status_text
from gittinseval.live.task import UNIT, LiveTask
from gittinseval.utils.errors import UsageError

__all__ = ["DEFAULT_STORE", "default_store", "dry_run", "run_live"]

log = logging.getLogger(__name__)


DEFAULT_STORE = "outputs/live/{task}_{policy}_{cost}_seed{seed}.sqlite"
"""The store of ``store: null`` (conf/live.yaml), filled in from the built task's name and the choices of the
``policy`` and ``cost`` groups (:func:`default_store`)."""


def _task_config(cfg: DictConfig) -> DictConfig:
    """``cfg.task``, refused in one line when it has no ``_target_`` (nothing would build it)."""
    if "_target_" not in cfg.task:
        raise UsageError(
            f"task{_choice('task')} has no _target_, so nothing builds the task: begin its file with "
            "_target_: gittinseval.live.chat_task (or gittinseval.live.matrix_task, "
            "gittinseval.live.tasks.inspect_task.inspect_task), or extend a bundled task with "
            "defaults: [openai_chat, _self_]"
        )
    return cfg.task


def _name_run(cfg: DictConfig, task: Any) -> None:
    """Check that ``cfg.task`` built a :class:`LiveTask`, and write its name to ``cfg.task.name`` and a
    ``store`` left to the task (``null``) as its :func:`default_store`.

    The default store is named after the task, whose name a task config may leave to the task
    (``name: null``: an inspect task's own name) and so is known only now: written back here, it
    gives every task a default store of its own, and the config that W&B records shows it.
    """
    if not isinstance(task, LiveTask):
        raise ValueError(f"task must instantiate a gittinseval.live.LiveTask, got {type(task).__name__}")
    with open_dict(cfg), open_dict(cfg.task):
        cfg.task.name = task.name
        if cfg.get("store") is None and HydraConfig.initialized():  # a dry run needs no store: composed alone, none
            cfg.store = default_store(cfg)


def default_store(cfg: DictConfig) -> str:
    """``outputs/live/<task name>_<policy>_<cost>_seed<seed>.sqlite``: the store of ``store: null``, by the
    choices of the ``policy`` and ``cost`` groups on the command line (``cfg.task.name`` set)."""
    if not HydraConfig.initialized():
        raise UsageError("store: null names the store after the command line's policy= and cost=: give store=PATH")
    choices = HydraConfig.get().runtime.choices
    return DEFAULT_STORE.format(task=cfg.task.name, policy=choices.policy, cost=choices.cost, seed=cfg.seed)


def _choice(group: str) -> str:
    """``=<option>`` of ``group`` on the command line, for a message; empty outside a Hydra app."""
    return f"={HydraConfig.get().runtime.choices.get(group)}" if HydraConfig.initialized() else ""


def dry_run(cfg: DictConfig) -> str:
    """``dry_run=true``: the arms with their labels, the expected dollars, the exhaustive cost and what the
    budget buys (:func:`~gittinseval.live.dry_run.dry_run_report`), without any call, store or log."""
    task = instantiate(_task_config(cfg))
    _name_run(cfg, task)
    task = replace(task, costs=instantiate(cfg.cost).live_costs(task.costs))
    if isinstance(task.costs, str) and task.costs == UNIT:
        raise ValueError("dry_run=true estimates dollars, and cost=unit counts examples: use cost=aware")
    # The default batch is cut to a task of fewer examples, as the run cuts it (resolve_batch_size).
    batch_size = getattr(instantiate(cfg.policy), "batch_size", None) or min(FALLBACK_BATCH_SIZE, len(task.examples))
    return dry_run_report(task, cfg.budget_usd, batch_size)


def run_live(cfg: DictConfig, output_dir: str | Path) -> LiveResult:
    """Instantiate ``cfg.task`` with the costs of ``cfg.cost``, build the :class:`LiveConfig` of
    the rest once, and evaluate to ``cfg.budget_usd``.

    This is where a composed config becomes the typed task and settings: the modules below get
    those, never the config.  Resumes from ``cfg.store`` when it exists.  Writes ``summary.json``
    and ``status.txt`` (the top arms) to ``output_dir``; a W&B logger writes its run there too.
    """
    task = instantiate(_task_config(cfg))
    _name_run(cfg, task)
    task = replace(task, costs=instantiate(cfg.cost).live_costs(task.costs))
    if cfg.get("store") is None:
        default_store(cfg)  # outside a Hydra app: its error says to give store=
    output_dir = Path(output_dir)
    settings = RunSettings.from_config(cfg)
    config = LiveConfig(
        budget_usd=cfg.budget_usd,
        policy=instantiate(cfg.policy),
        prior=instantiate(cfg.prior).resolve(task.benchmark),  # prior=specific reads the task's benchmark
        seed=cfg.seed,
        store=cfg.store,
        fork=cfg.fork,
        concurrency=cfg.concurrency,
        stop_at_signal=cfg.stop_at_signal,
        certificate=settings.certificate,
        stop_when=settings.stop_when,
        learn_costs=settings.learn_costs,
        max_retries=cfg.max_retries,
        retry_backoff=cfg.retry_backoff,
        progress=cfg.progress,
        logger=instantiate(cfg.logger),
        log_config=OmegaConf.to_container(cfg, resolve=True),
        log_dir=output_dir,
        objective=settings.objective,
    )
    output_dir.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(evaluate_async(task, config))
    _write_outcome(task.name, config, result, output_dir)
    return result


def _write_outcome(task_name: str, config: LiveConfig, result: LiveResult, output_dir: Path) -> None:
    """Write ``summary.json`` and ``status.txt`` of a finished run to ``output_dir``, and log its warnings and
    its one-line outcome: the stop, the spend, the recommendation (or the failure) and the store."""
    summary = {"task": task_name, **result.summary()}
    (output_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (output_dir / "status.txt").write_text(status_text(result.ledger_line(), result.warnings, result.status))
    for warning in result.warnings:
        log.warning("%s", warning)
    rec = result.recommendation
    log.info(
        "%s; %s; %s; stop signal %s; store %s",
        # Without a recommendation, the failure says the stop line's failures.
        f"stopped ({result.stop_reason})" if rec is None else result.stop_line,
        result.ledger_line(),
        result.failure if rec is None else f"recommended {rec.label} ({_recommendation_figures(rec)})",
        "fired" if result.stop_signal else "not fired",
        config.run_store,
    )
    if result.certificate is not None:
        log.info("certificate of %s: %s", rec.label, result.certificate.format())


def _recommendation_figures(rec: Recommendation) -> str:
    """``M=..., LCB=...`` of the recommended arm's accuracy; under the ``value`` objective its accuracy ``M`` and
    the value it was recommended by, with the value's LCB."""
    if rec.value is None:
        return f"M={rec.mean:.3f}, LCB={rec.lcb:.3f}"
    return f"M={rec.mean:.3f}, value={rec.value:.3f}, value LCB={rec.value_lcb:.3f}"
