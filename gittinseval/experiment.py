"""Build one run from a composed config and execute it (used by the Hydra app)."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from gittinseval.priors import GaussianPrior
from gittinseval.simulator import RunResult, simulate
from gittinseval.validation import ConfigError, fraction_in_unit_interval, non_negative_int, positive_int

__all__ = ["config_digest", "finished_run", "run_experiment", "run_trials"]

# Settings that do not change a run's result: a finished run is reused across them.
RESULT_NEUTRAL_KEYS = ("logger", "progress", "trials")

log = logging.getLogger(__name__)


def config_digest(cfg: DictConfig) -> str:
    """SHA-256 of the resolved config without :data:`RESULT_NEUTRAL_KEYS`: equal digests, equal runs."""
    settings = OmegaConf.to_container(cfg, resolve=True)
    for key in RESULT_NEUTRAL_KEYS:
        settings.pop(key, None)
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def finished_run(output_dir: str | Path, digest: str) -> RunResult | None:
    """The run saved in ``output_dir`` if it is complete and of the config ``digest``.

    A complete run of another config there is an error rather than something to
    overwrite: re-running a sweep must never lose a finished run.
    """
    output_dir = Path(output_dir)
    if not (output_dir / "summary.json").is_file():
        return None
    saved = RunResult.load(output_dir)
    if saved.summary.get("config_digest") != digest:
        raise ConfigError(
            f"{output_dir} holds a finished run of another config; choose another hydra.sweep.dir "
            "(or hydra.run.dir), or move that run away"
        )
    return saved


def run_trials(
    cfg: DictConfig, output_dir: str | Path, name: str | None = None, group: str | None = None
) -> list[RunResult]:
    """``cfg.trials`` runs of ``cfg`` with seeds ``cfg.seed, cfg.seed + 1, ...`` in this process.

    One trial is :func:`run_experiment` into ``output_dir``; several go into
    ``output_dir/seed=<s>``, each the same run (same trace, same ``config_digest``)
    as a single run with ``seed=<s>``.  In one process the benchmark and the root
    tables are built once for all trials, so a sweep of cheap runs spends its time
    on the runs rather than on starting jobs: ``-m seed=0,20,40 trials=20``.
    """
    trials = positive_int("trials (runs per job)", cfg.get("trials", 1))
    if trials == 1:
        return [run_experiment(cfg, output_dir, name, group)]
    first = non_negative_int("seed", cfg.seed)
    results = []
    for seed in range(first, first + trials):
        trial = cfg.copy()
        trial.seed = seed
        label = f"seed={seed}"
        results.append(run_experiment(trial, Path(output_dir) / label, f"{name},{label}" if name else label, group))
    return results


def run_experiment(
    cfg: DictConfig, output_dir: str | Path, name: str | None = None, group: str | None = None
) -> RunResult:
    """Instantiate benchmark, cost, prior, policy and logger from ``cfg``; simulate; save.

    Writes ``trace.csv.gz`` and ``summary.json`` (with the config's :func:`config_digest`)
    to ``output_dir`` and hands the run to the configured logger.  If ``output_dir``
    already holds the finished run of the same config, it is returned unchanged and
    nothing is run or logged again.
    """
    output_dir = Path(output_dir)
    digest = config_digest(cfg)
    saved = finished_run(output_dir, digest)
    if saved is not None:
        log.info("skipped %s: finished earlier with the same config", output_dir)
        saved.reused = True
        return saved
    budget = fraction_in_unit_interval("budget", cfg.budget)
    seed = non_negative_int("seed", cfg.seed)
    benchmark = instantiate(cfg.benchmark)
    cost_model = instantiate(cfg.cost)
    policy = instantiate(cfg.policy)
    # A policy that ignores the prior must not need one the benchmark lacks.
    prior = instantiate(cfg.prior).resolve(benchmark) if policy.uses_prior else GaussianPrior(name="unused")
    logger = instantiate(cfg.logger)
    result = simulate(
        benchmark,
        policy,
        cost_model(benchmark),
        prior,
        budget_fraction=budget,
        seed=seed,
        cost_mode=cost_model.name,
        prior_name=prior.name,
        progress=bool(cfg.progress),
    )
    result.summary["config_digest"] = digest
    result.save(output_dir)
    logger.log_run(result, OmegaConf.to_container(cfg, resolve=True), output_dir, name=name, group=group)
    summary = result.summary
    stop = (
        "the stopping signal did not fire"
        if summary["stop_cost_pct"] is None
        else f"stopping signal at {summary['stop_cost_pct']:.3g}% of exhaustive"
    )
    log.info(
        "%s on %s (%s cost, seed %d): final regret %.4g, %s; %s",
        summary["label"],
        summary["benchmark"],
        summary["cost_mode"],
        summary["seed"],
        summary["final_regret"],
        stop,
        output_dir,
    )
    return result
