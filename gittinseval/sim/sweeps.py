"""A sweep's finished runs, found before any of its jobs is launched.

A run is finished if a results store of its config (``results_store``, one or a list) holds a run of
its :func:`~gittinseval.sim.experiment.config_digest`, or if the sweep folder does (a
``summary.json`` with that digest).  Its digest needs its config, which Hydra composes
job by job; :class:`JobConfigs` composes the configs of a whole sweep at about a
millisecond a job, so that ``gittinseval -m`` leaves out the jobs it need not launch
(the sweeper ``hydra/sweeper=skip_finished``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.config_loader import ConfigLoader
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from omegaconf import DictConfig, open_dict, read_write

from gittinseval.sim.experiment import results_stores, trial_digests
from gittinseval.sim.results_store import stored_digests

__all__ = ["FinishedRuns", "JobConfigs", "finished_digests"]

SEED_KEY = "seed"


class JobConfigs:
    """The configs that the jobs of a sweep get, from their override lists, as Hydra composes them.

    Hydra composes a job in two steps (``ConfigLoaderImpl._load_configuration_impl``): the
    overrides that choose options of config groups (``method=ucbe``, ``cost=unit``) select
    and merge config files, a good fraction of a second; then the others set values
    (``benchmark.subject=anatomy``, ``seed=3``), in their order, on the merged config.
    Here the first step is done by Hydra once per distinct choice of options, and the second,
    with Hydra's own function, on a copy of it; jobs that differ only in ``seed`` (a
    top-level value) share one copy and set their seed on it.  An override counts as a
    choice of options as Hydra decides it: its key names a config group of the search path
    and its value is not a dict; ``hydra.*`` overrides and those with a package go to Hydra too.
    """

    def __init__(self, config_loader: ConfigLoader, sweep_config: DictConfig) -> None:
        self._loader = config_loader
        self._sweep_config = sweep_config
        self._parser = OverridesParser.create()
        self._parsed: dict[str, Override] = {}
        self._groups: dict[str, bool] = {}
        self._composed: dict[tuple[str, ...], DictConfig] = {}
        self._last: tuple[tuple[object, ...], DictConfig] | None = None

    def config(self, overrides: Sequence[str]) -> DictConfig:
        """The config of the job ``overrides`` without its ``hydra`` node, as the job's task function gets it.

        Valid until the next call (jobs share it): read it, do not keep it.
        """
        parsed = [self._parse(line) for line in overrides]
        choices = tuple(override.input_line for override in parsed if not self._sets_value(override))
        values = [override for override in parsed if self._sets_value(override)]
        seeds = [override for override in values if _sets_the_seed(override)]
        others = [override for override in values if not _sets_the_seed(override)]
        key = (choices, tuple(override.input_line for override in others), bool(seeds))
        if self._last is None or self._last[0] != key:
            cfg = copy.deepcopy(self._compose(choices))
            ConfigLoaderImpl._apply_overrides_to_config(others, cfg)
            self._last = (key, cfg)
        cfg = self._last[1]
        ConfigLoaderImpl._apply_overrides_to_config(seeds, cfg)
        return cfg

    def check_options(self, jobs: Iterable[Sequence[str]]) -> None:
        """Compose the first of ``jobs`` that chooses an option its config group lacks, for Hydra's error.

        The configs of a sweep are composed batch by batch; this makes a mistyped option among
        the swept ones (``method=gittins_s,lfr``) fail the sweep before anything is launched.
        """
        checked: set[str] = set()
        for job in jobs:
            for line in set(job) - checked:
                checked.add(line)
                override = self._parse(line)
                chooses = not (override.is_hydra_override() or self._sets_value(override))
                if chooses and override.type == OverrideType.CHANGE and isinstance(override.value(), str):
                    option = f"{override.key_or_group}/{override.value()}"
                    if not any(source.is_config(option) for source in self._loader.get_sources()):
                        self._loader.load_sweep_config(self._sweep_config, list(job))

    def _parse(self, line: str) -> Override:
        if line not in self._parsed:
            (self._parsed[line],) = self._parser.parse_overrides([line])
        return self._parsed[line]

    def _sets_value(self, override: Override) -> bool:
        """Whether Hydra applies ``override`` to the merged config (rather than composing with it)."""
        if override.is_hydra_override() or override.package is not None:
            return False
        key = override.key_or_group
        if key not in self._groups:
            self._groups[key] = any(source.is_group(key) for source in self._loader.get_sources())
        return isinstance(override.value(), dict) or not self._groups[key]

    def _compose(self, choices: tuple[str, ...]) -> DictConfig:
        if choices not in self._composed:
            cfg = self._loader.load_sweep_config(self._sweep_config, list(choices))
            # As Hydra's run_job hands the config to the task function.
            with read_write(cfg), open_dict(cfg):
                del cfg["hydra"]
            self._composed[choices] = cfg
        return self._composed[choices]


def _sets_the_seed(override: Override) -> bool:
    """``seed=<scalar>``: setting it last, on a config shared by jobs, is what setting it in order does."""
    return (
        override.key_or_group == SEED_KEY
        and override.type == OverrideType.CHANGE
        and not isinstance(override.value(), (dict, list))
    )


def finished_digests(sweep_dir: Path) -> frozenset[str]:
    """The config digests of the finished runs (their ``summary.json``) under ``sweep_dir``."""
    digests = {json.loads(path.read_text()).get("config_digest") for path in sweep_dir.rglob("summary.json")}
    digests.discard(None)
    return frozenset(digests)


class FinishedRuns:
    """How many runs of a sweep's jobs are finished: stored in one of the job's results stores, or in the sweep
    folder.

    The sweep folder and each job's stores are read once, when the first job asks; a job that is
    launched checks its runs again (:func:`~gittinseval.sim.experiment.run_experiment`).
    """

    def __init__(self, config_loader: ConfigLoader, sweep_config: DictConfig) -> None:
        self.sweep_dir = Path(sweep_config.hydra.sweep.dir)
        self._configs = JobConfigs(config_loader, sweep_config)
        self._in_sweep_dir: frozenset[str] | None = None
        # The digests held by each job's stores, pooled: a job of a sweep looks up one set.
        self._stores: dict[tuple[Path, ...], frozenset[str]] = {}

    def check_options(self, jobs: Iterable[Sequence[str]]) -> None:
        """See :meth:`JobConfigs.check_options`."""
        self._configs.check_options(jobs)

    def count(self, overrides: Sequence[str]) -> tuple[int, int]:
        """``(runs, finished)``: the number of runs of the job ``overrides`` (its ``trials``), and of them finished."""
        cfg = self._configs.config(overrides)
        if self._in_sweep_dir is None:
            self._in_sweep_dir = finished_digests(self.sweep_dir)
        stores = results_stores(cfg)
        if stores not in self._stores:
            self._stores[stores] = frozenset().union(*(stored_digests(store) for store in stores))
        stored = self._stores[stores]
        digests = trial_digests(cfg)
        return len(digests), sum(digest in stored or digest in self._in_sweep_dir for digest in digests)
