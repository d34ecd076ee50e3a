"""Build one run from a composed config and execute it (used by the Hydra app)."""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import json
import logging
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, ListConfig, OmegaConf

from gittinseval.core.certificate import format_certificate
from gittinseval.core.params import legacy_targets
from gittinseval.core.priors import GaussianPrior
from gittinseval.core.session import RunSettings
from gittinseval.sim.results_store import RunRow, stored_run
from gittinseval.sim.simulator import RunResult, simulate
from gittinseval.utils.caches import clear_run_shared_caches
from gittinseval.utils.threads import job_threads, torch_threads
from gittinseval.utils.validation import ConfigError, boolean, non_negative_int, positive_int

__all__ = [
    "code_commit",
    "config_digest",
    "finished_run",
    "results_stores",
    "run_experiment",
    "run_trials",
    "simulate_config",
    "store_paths",
    "trial_configs",
    "trial_digests",
]

# Settings that do not change a run's result: a finished run is reused across them.
RESULT_NEUTRAL_KEYS = ("logger", "progress", "trials", "results_store", "threads")
# Settings added after runs were stored, with their defaults.  At its default a setting is left out of
# the digest, so the digests of the stored runs (docs/results/*.parquet) stay theirs; any other value
# changes the summary (another certificate, a recorded confidence stop, another recommendation) and
# so the digest.  A dotted key is a setting inside a group (benchmark.prices: the ZeroEval matrices' price rule,
# given as benchmark.prices=paper).
LATER_SETTINGS = {
    **RunSettings.defaults_as_config(),
    "checkpoint_certificates": False,
    "cold_start": False,
    "compare_certificates": [],
    "record_arm_spend": False,
    "benchmark.prices": "tokens",
}
# The repository of a clone (or an editable install), and the paths whose changes change results.
CODE_ROOT = Path(__file__).resolve().parents[2]
CODE_PATHS = ("gittinseval", "conf", "pyproject.toml")

RECORDED_PACKAGES = ("torch", "botorch", "gpytorch", "numpy", "scipy")
"""The packages whose versions a run records beside its commit: a run's numbers depend on them too (a BO
baseline's fitted GPs, the roots' FFTs), so one commit run on two machines can differ."""

log = logging.getLogger(__name__)


def config_digest(cfg: DictConfig) -> str:
    """SHA-256 of the resolved config without :data:`RESULT_NEUTRAL_KEYS`, nor the :data:`LATER_SETTINGS`
    at their defaults: equal digests, equal runs.

    The bundled baselines' ``_target_``s are hashed by their names from before they moved into the
    package (:func:`~gittinseval.core.params.legacy_targets`: ``gittinseval.baselines.ucbe.UCBEPolicy``
    as ``baselines.ucbe.UCBEPolicy``), and ``learn_costs`` where it was set before it became a run
    setting (:func:`_cost_learning_as_stored`), so the stored runs keep their digests.
    """
    # Each setting resolved on its own, the neutral ones not at all: `OmegaConf.to_container(cfg, resolve=True)`
    # without them, but a sweep's check of its finished runs no longer parses the logger's interpolation per run.
    return _digest({key: _resolved(cfg, key) for key in cfg if key not in RESULT_NEUTRAL_KEYS})


def trial_digests(cfg: DictConfig) -> list[str]:
    """``[config_digest(trial) for trial in trial_configs(cfg)]``, with ``cfg`` resolved once rather than copied
    and resolved for each trial (a sweep's check of its finished runs, :class:`~gittinseval.sim.sweeps.FinishedRuns`).

    A trial differs from ``cfg`` in its seed alone, so only the seed and the interpolations (any of which
    may read it) can resolve differently: for each trial the seed is set on ``cfg`` and those are resolved
    again.  ``cfg``'s own seed is set back at the end.
    """
    seeds = _trial_seeds(cfg)
    if seeds is None:
        return [config_digest(cfg)]
    raw = OmegaConf.to_container(cfg, resolve=False)
    settings = {key: _resolved(cfg, key) for key in cfg if key not in RESULT_NEUTRAL_KEYS}
    # Every value written as an interpolation (a string with "${"; an escaped one is merely resolved again).
    interpolated = [path for path in _string_paths(raw) if "${" in _at(raw, path) and path[0] in settings]
    digests = []
    try:
        for seed in seeds:
            cfg.seed = seed
            settings["seed"] = seed
            for *parents, key in interpolated:
                node = cfg
                for parent in parents:
                    node = node[parent]
                _at(settings, parents)[key] = _resolved(node, key)
            digests.append(_digest(settings))
    finally:
        cfg.seed = raw["seed"]
    return digests


def _digest(settings: dict) -> str:
    """The digest of a config's resolved settings without :data:`RESULT_NEUTRAL_KEYS` (left as they are)."""
    settings = _cost_learning_as_stored(legacy_targets(settings))
    for key, default in LATER_SETTINGS.items():
        *groups, name = key.split(".")
        node = settings
        for group in groups:
            node = node.get(group) if isinstance(node, dict) else None
        if isinstance(node, dict) and name in node and node[name] == default:
            del node[name]
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def _cost_learning_as_stored(settings: dict) -> dict:
    """``settings`` (a copy) with ``learn_costs`` where the digests of the stored runs have it.

    Before it was a run setting, a simulation learned costs only under ``cost=per_cell_learned``,
    whose group held ``learn``, ``pseudo_count`` and ``refresh_share``: for a cost mode that plans
    with a guess (its class's ``guesses_costs``), ``learn_costs`` goes back there.  A mode of known
    costs learns nothing whatever ``learn_costs`` says, so it is left out of the digest.
    """
    settings = dict(settings)
    learning = settings.pop("learn_costs", LATER_SETTINGS["learn_costs"])
    cost = settings.get("cost")
    if isinstance(cost, dict) and _guesses_costs(cost.get("_target_")):
        written = LATER_SETTINGS["learn_costs"] if learning is None else learning
        settings["cost"] = {**cost, "learn": learning is not None, **written}
    return settings


@functools.cache
def _guesses_costs(target: str | None) -> bool:
    # A target that does not import is no guessing mode here: building the run names it in one line.
    module, _, name = (target or "").rpartition(".")
    try:
        return bool(getattr(getattr(importlib.import_module(module), name), "guesses_costs", False))
    except (ImportError, AttributeError, ValueError):
        return False


def _resolved(cfg: DictConfig | ListConfig, key: str | int) -> object:
    """``cfg[key]`` resolved as ``OmegaConf.to_container(cfg, resolve=True)[key]`` gives it (``"???"`` if missing)."""
    if OmegaConf.is_missing(cfg, key):
        return "???"
    value = cfg[key]
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def _string_paths(value: object, path: tuple = ()) -> Iterator[tuple]:
    """The paths (keys and list indices) of the strings in the nested dicts and lists ``value``."""
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict | list):
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            yield from _string_paths(item, (*path, key))


def _at(value: Any, path: Sequence) -> Any:
    """The item of the nested dicts and lists ``value`` at ``path``."""
    for key in path:
        value = value[key]
    return value


@functools.cache
def code_commit(root: Path = CODE_ROOT) -> str | None:
    """The git commit of the code in ``root``, with ``-dirty`` if :data:`CODE_PATHS` differ from it there.

    ``None`` if ``root`` is not the top of a git work tree (an installed wheel) or git is
    missing.  Asked once per process.
    """
    def git(*args: str) -> str:
        # --no-optional-locks: `git status` must not take the index lock of a clone in use.
        command = ["git", "--no-optional-locks", "-C", str(root), *args]
        return subprocess.run(command, capture_output=True, text=True, check=True, timeout=30).stdout.strip()

    try:
        if Path(git("rev-parse", "--show-toplevel")).resolve() != Path(root).resolve():
            return None  # e.g. site-packages inside some other repository
        sha = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", *CODE_PATHS)
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha


@functools.cache
def package_versions() -> dict[str, str | None]:
    """The installed version of each of :data:`RECORDED_PACKAGES` (``None`` for one not installed)."""
    versions: dict[str, str | None] = {}
    for name in RECORDED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


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


def trial_configs(cfg: DictConfig) -> list[DictConfig]:
    """The configs of the ``cfg.trials`` runs of the job ``cfg``: seeds ``cfg.seed, cfg.seed + 1, ...``.

    One trial is ``cfg`` itself; each of several is a copy of ``cfg`` with its own seed,
    the config (and so the :func:`config_digest`) of a single run with that seed.
    """
    seeds = _trial_seeds(cfg)
    if seeds is None:
        return [cfg]
    configs = []
    for seed in seeds:
        trial = cfg.copy()
        trial.seed = seed
        configs.append(trial)
    return configs


def _trial_seeds(cfg: DictConfig) -> list[int] | None:
    """The seeds of the trials of the job ``cfg``; ``None`` for one trial (``cfg`` itself, its seed as it is)."""
    trials = positive_int("trials (runs per job)", cfg.get("trials", 1))
    if trials == 1:
        return None
    first = non_negative_int("seed", cfg.seed)
    return list(range(first, first + trials))


def run_trials(
    cfg: DictConfig, output_dir: str | Path, name: str | None = None, group: str | None = None
) -> list[RunResult | RunRow]:
    """``cfg.trials`` runs of ``cfg`` with seeds ``cfg.seed, cfg.seed + 1, ...`` in this process.

    One trial is :func:`run_experiment` into ``output_dir``; several go into
    ``output_dir/seed=<s>``, each the same run (same trace, same ``config_digest``)
    as a single run with ``seed=<s>`` (see :func:`trial_configs`).  In one process the
    benchmark and the root tables are built once for all trials, so a sweep of cheap runs
    spends its time on the runs rather than on starting jobs: ``-m seed=0,20,40 trials=20``.
    """
    trials = trial_configs(cfg)
    if len(trials) == 1:
        return [run_experiment(cfg, output_dir, name, group)]
    results = []
    for trial in trials:
        label = f"seed={trial.seed}"
        results.append(run_experiment(trial, Path(output_dir) / label, f"{name},{label}" if name else label, group))
    return results


def store_paths(value: object) -> tuple[Path, ...]:
    """The results stores of a config's ``results_store``: a ``.parquet`` path, a list of them, or null (none).

    Anything else, or a list entry that is not a ``.parquet`` path, is a :class:`ConfigError` naming it.
    """
    if value is None:
        return ()
    entries = OmegaConf.to_container(value) if OmegaConf.is_list(value) else value
    listed = isinstance(entries, list | tuple)
    for position, entry in enumerate(entries if listed else [entries], start=1):
        if not isinstance(entry, str | Path) or not str(entry).endswith(".parquet"):
            where = f"entry {position} of the list is {entry!r}" if listed else f"got {entry!r}"
            raise ConfigError(f"results_store must be a .parquet file, a list of them, or null; {where}")
    return tuple(Path(entry) for entry in (entries if listed else [entries]))


def results_stores(cfg: DictConfig) -> tuple[Path, ...]:
    """The results stores ``cfg.results_store`` whose runs are not run again (:func:`store_paths`; none: ``()``).

    A run that any of them holds is skipped; the first is the one a sweep's runs are exported to
    (the others hold runs of the same grid made by other sweeps).  A store that does not exist yet
    is said once, when it is first asked for: its runs would all be run, as if it were not given,
    which is right for a store being started and wrong for a mistyped path.
    """
    stores = store_paths(cfg.get("results_store"))
    for store in stores:
        _say_if_missing(store)
    return stores


@functools.cache
def _say_if_missing(store: Path) -> None:
    # Once a process for each store: a sweep asks for it once a job, and a run once a trial.
    if not store.exists():
        log.warning("results_store=%s does not exist yet: no run is skipped as stored; "
                    "gittinseval-store export <sweep folder> --to %s creates it from finished runs", store, store)


def simulate_config(cfg: DictConfig) -> RunResult:
    """The run of ``cfg``: benchmark, cost, prior and policy built from their ``_target_``, then simulated.

    Runs on ``cfg.threads`` torch threads (``null``: the job's CPUs, see
    :func:`~gittinseval.utils.threads.job_threads`), which the summary records.  With
    ``cfg.cold_start`` the caches that a process's runs share are cleared first
    (:mod:`~gittinseval.utils.caches`), so that the run builds (and its wall time includes)
    its own root tables and the like.  Saves and
    logs nothing (:func:`run_experiment` does).
    """
    seed = non_negative_int("seed", cfg.seed)
    if boolean("cold_start", cfg.get("cold_start", False)):
        clear_run_shared_caches()
    with torch_threads(job_threads(cfg.get("threads"))) as threads:
        benchmark = instantiate(cfg.benchmark)
        cost_model = instantiate(cfg.cost)
        policy = instantiate(cfg.policy)
        # A policy that ignores the prior must not need one the benchmark lacks.
        prior = instantiate(cfg.prior).resolve(benchmark) if policy.uses_prior else GaussianPrior(name="unused")
        result = simulate(
            benchmark,
            policy,
            cost_model(benchmark),
            prior,
            budget_fraction=cfg.budget,
            seed=seed,
            cost_mode=cost_model.name,
            prior_name=prior.name,
            progress=bool(cfg.progress),
            cell_costs=cost_model.cell_costs(benchmark),
            settings=RunSettings.from_config(cfg),
            cost_plan=cost_model.plan(benchmark, seed),
            checkpoint_certificates=boolean("checkpoint_certificates", cfg.get("checkpoint_certificates", False)),
            compare_certificates=_model_names("compare_certificates", cfg.get("compare_certificates")),
            record_arm_spend=boolean("record_arm_spend", cfg.get("record_arm_spend", False)),
        )
    result.summary["threads"] = threads
    return result


def run_experiment(
    cfg: DictConfig, output_dir: str | Path, name: str | None = None, group: str | None = None
) -> RunResult | RunRow:
    """Instantiate benchmark, cost, prior, policy and logger from ``cfg``; simulate; save.

    Writes ``trace.csv.gz`` and ``summary.json`` (with the config's :func:`config_digest`
    and the :func:`code_commit` it ran on) to ``output_dir`` and hands the run to the
    configured logger.  Nothing is run or logged again if ``output_dir`` already holds
    the finished run of the same config (it is returned, marked ``reused``), or if the
    results stores ``cfg.results_store`` holds it (its stored row is returned, and
    ``output_dir`` is left alone).
    """
    output_dir = Path(output_dir)
    stores = results_stores(cfg)
    digest = config_digest(cfg)
    saved = finished_run(output_dir, digest)
    if saved is not None:
        log.info("skipped %s: finished earlier with the same config", output_dir)
        saved.reused = True
        return saved
    for store in stores:
        stored = stored_run(store, digest)
        if stored is not None:
            log.info("skipped %s: the results store %s holds a run of the same config", output_dir, store)
            return stored
    # Read before the run builds its policy: the baselines are imported then, and a commit
    # made while the run goes on must not be stamped on code loaded before it.
    commit = code_commit()
    logger = instantiate(cfg.logger)
    result = simulate_config(cfg)
    result.summary["config_digest"] = digest
    result.summary["commit"] = commit
    result.summary["packages"] = package_versions()
    result.save(output_dir)
    logger.log_run(result, OmegaConf.to_container(cfg, resolve=True), output_dir, name=name, group=group)
    summary = result.summary
    stop = (
        "the stopping signal did not fire"
        if summary["stop_cost_pct"] is None
        else f"stopping signal at {summary['stop_cost_pct']:.3g}% of exhaustive"
    )
    confidence = summary["confidence_stop"]
    if confidence is not None:
        stop += (
            "; the confidence stop did not fire"
            if confidence["step"] is None
            else f"; confidence stop at {confidence['cost_pct']:.3g}% (regret {confidence['regret']:.4g})"
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
    if summary["certificate"] is not None:
        log.info(
            "%s's certificate of arm %d: %s",
            summary["label"], summary["final_recommended"], format_certificate(summary["certificate"]),
        )
    return result


def _model_names(key: str, value: object) -> tuple[str, ...]:
    """A config list of names (``None``: none) as a tuple; anything else is a :class:`ConfigError` naming ``key``."""
    if value is None:
        return ()
    names = OmegaConf.to_container(value) if OmegaConf.is_list(value) else value
    if not isinstance(names, list | tuple) or not all(isinstance(name, str) for name in names):
        raise ConfigError(f"{key} must be a list of names, e.g. [gaussian, eb], got {value!r}")
    return tuple(names)
