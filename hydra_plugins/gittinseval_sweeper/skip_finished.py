"""The sweeper of ``gittinseval -m``: Hydra's basic sweeper that launches only the jobs with a run to do."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator, Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from gittinseval.results.callbacks import record_runs
from gittinseval.sim.experiment import store_paths
from gittinseval.sim.sweeps import FinishedRuns
from gittinseval.utils.text import count

log = logging.getLogger(__name__)

# Skipped runs are logged (and counted in the sweep's progress) at least this often.
REPORT_EVERY = 1000
# Jobs of the first batch; each batch doubles, up to max_batch_size.
FIRST_BATCH_SIZE = 20


class SkipFinishedSweeper(BasicSweeper):
    """Hydra's basic sweeper (the same jobs in the same order, launched in batches) that leaves out the jobs
    whose runs are all finished, before it launches anything.

    A run is finished if its results store or the sweep folder holds a run of its config
    digest (:class:`~gittinseval.sim.sweeps.FinishedRuns`); finding out costs about a
    millisecond a job, where launching it cost a job's start-up and its composition.  The
    skipped runs are counted in the sweep's progress and summary like runs that a job
    found finished (:class:`~gittinseval.results.callbacks.PlotSweep`).  The config of
    every job is composed to find its digest, which is the check that the basic sweeper
    makes before it launches a batch; an option that no config group has fails the sweep
    before the first batch.

    Each batch is filled with jobs to run.  The first holds :data:`FIRST_BATCH_SIZE` jobs and
    each next one twice as many, up to ``max_batch_size``: the first job starts as soon as a
    few configs are composed, and later batches are long enough that waiting for the slowest
    job of each costs little.  ``max_batch_size: null``, or a launcher (its ``_target_``)
    among ``launch_at_once``, launches every job at once: a launcher that queues the jobs
    on a cluster would wait for the queue once a batch.
    """

    def __init__(
        self, max_batch_size: int | None, params: dict[str, str] | None = None, launch_at_once: Sequence[str] = ()
    ) -> None:
        super().__init__(max_batch_size, params)
        self.launch_at_once = tuple(launch_at_once)
        self._finished: FinishedRuns | None = None
        self._jobs: Iterator[Sequence[str]] | None = None
        self._batch: list[Sequence[str]] | None = None
        self._batch_size = FIRST_BATCH_SIZE

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        self._finished = FinishedRuns(hydra_context.config_loader, config)

    def is_done(self) -> bool:
        if self._batch is None:
            self._batch = self._next_batch()
        return not self._batch

    def get_job_batch(self) -> Sequence[Sequence[str]]:
        batch, self._batch = self._batch, None
        return batch

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        """Nothing to do: :meth:`is_done` composed the config of every job of ``batch``."""

    def _next_batch(self) -> list[Sequence[str]]:
        """The next jobs with a run to do, up to ``max_batch_size``; the finished ones before them are counted."""
        assert self.config is not None and self.overrides is not None and self._finished is not None
        if self._jobs is None:
            stores = store_paths(self.config.get("results_store"))
            log.info("Checking %s for runs %sfinished in %s: those are skipped",
                     count(sum(len(batch) for batch in self.overrides), "job"),
                     f"stored in {', '.join(map(str, stores))} or " if stores else "", self._finished.sweep_dir)
            self._finished.check_options(itertools.chain.from_iterable(self.overrides))
            self._jobs = itertools.chain.from_iterable(self.overrides)
        at_once = not self.max_batch_size or self.config.hydra.launcher.get("_target_") in self.launch_at_once
        size = None if at_once else min(self._batch_size, self.max_batch_size)
        batch, skipped = [], 0
        for overrides in self._jobs:
            runs, finished = self._finished.count(overrides)
            if finished == runs:
                skipped += runs
                if skipped >= REPORT_EVERY:
                    self._report_skipped(skipped)
                    skipped = 0
            else:
                batch.append(overrides)
                if len(batch) == size:
                    break
        self._report_skipped(skipped)
        if batch:
            self._batch_size *= 2
        return batch

    def _report_skipped(self, runs: int) -> None:
        if runs:
            log.info("Skipped %s finished earlier (stored, or in the sweep folder)", count(runs, "run"))
            record_runs(self._finished.sweep_dir, runs, runs)
