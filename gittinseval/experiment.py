"""Build one run from a composed config and execute it (used by the Hydra app)."""

from __future__ import annotations

import logging
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from gittinseval.priors import GaussianPrior
from gittinseval.simulator import RunResult, simulate
from gittinseval.validation import fraction_in_unit_interval, non_negative_int

__all__ = ["run_experiment"]

log = logging.getLogger(__name__)


def run_experiment(
    cfg: DictConfig, output_dir: str | Path, name: str | None = None, group: str | None = None
) -> RunResult:
    """Instantiate benchmark, cost, prior, policy and logger from ``cfg``; simulate; save.

    Writes ``trace.csv`` and ``summary.json`` to ``output_dir`` and hands the run
    to the configured logger.
    """
    output_dir = Path(output_dir)
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
