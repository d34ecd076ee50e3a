"""inspect_ai tasks as live tasks: any policy, a dollar budget and the store, on an inspect ``Task``.

Needs the ``[inspect]`` extra (``pip install gittinseval[inspect]``).

:func:`inspect_task` loads an inspect task (``"path/to/file.py@name"``, a task name an
installed package registers, or a ``Task``) and a list of arms.  An arm is a JSON mapping::

    {model: openai/gpt-4o-mini,          # any inspect model string
     name: mini-terse,                   # optional label
     system: "Answer with a number.",    # optional system message (inspect's system_message)
     solver: [{_target_: inspect_ai.solver.chain_of_thought}, generate],   # optional, replaces the task's solver
     model_args: {...},                  # optional, passed to inspect's get_model
     temperature: 0.0, max_tokens: 64}   # any inspect GenerateConfig field

An arm's ``solver`` is an inspect registry name (``generate``, ``mypackage/my_solver``),
a mapping with a Hydra ``_target_`` and its arguments, or a list of these, chained; a
``_target_`` mapping inside ``model_args`` is built the same way (e.g. mockllm's
``custom_outputs``).  Both stay JSON in the arm, so that the store records them with the
rest of the arm and refuses to resume on a changed one
(:mod:`gittinseval.live.tasks.inspect_loader` builds tasks, solvers and arms).

- The examples are the task's samples: one JSON mapping per sample (``id``,
  ``input``, ``target``, ``choices``), so that a store refuses to resume on a changed
  dataset.
- Scoring a batch runs the arm's solver (else the task's), after the arm's system
  message, and the task's scorer on those samples for that arm, with
  ``inspect_ai.eval_async``.  Batches asked for while an eval is running wait and then
  run together, one inspect task per batch in a single eval, since inspect runs one eval
  at a time per process.
- A sample's score is its scorer's value through inspect's ``value_to_float``
  ("C" 1, "P" 0.5, "I" and "N" 0, yes/no, true/false, numbers), the mean over epochs;
  a value that is none of these, or a number outside [0, 1], stops the run with an
  error naming the scorer and the sample (:mod:`gittinseval.live.tasks.inspect_outcome`
  reads the scores and the charge from the eval's log).
- A batch's charge is the token usage inspect reports for the eval
  (``log.stats.model_usage``, every model the task called, graders included) at
  each model's price from the prices file (:mod:`gittinseval.live.tasks.prices`), also when
  the eval failed: a failed batch keeps the scores of its samples that finished, and
  each sample that did not is charged besides one example at the arm's expected cost,
  since the request it failed on may have been billed without a reported usage.  Each
  sample's own usage is kept in the store too (tokens and dollars per example, which
  ``gittinseval-live export`` writes per cell).
- Retries are inspect's alone: a model request that fails transiently (as the model's
  provider classifies its errors) is retried by inspect up to ``max_retries`` times with
  inspect's backoff (the arms' ``GenerateConfig.max_retries`` where they set one), a
  failed sample is not run again (``retry_on_error=0``), and every failure this adapter
  reports is a :class:`~gittinseval.live.NonRetryableError`, so that the live driver's
  own retries never send a batch again.
- Models are built at an arm's first batch, not before: a dry run needs no API key.  A
  model inspect cannot build (an unknown provider, a missing key) fails that batch before
  any request, charging nothing.
- The expected dollars per example of each arm come from the user's token estimates
  (``tokens={"input": ..., "output": ...}``) at the arm model's price, or else from
  a pilot: ``pilot`` samples per arm scored once before the run, whose spend is
  outside the budget and is logged with its scores.

Offline runs use inspect's ``mockllm`` with scripted outputs that carry their own
``usage`` (:func:`gittinseval.live.tasks.mockllm.scripted_replies` scripts any task from
yaml): without it mockllm counts tokens with tiktoken, which downloads its encoding.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from inspect_ai import Task, eval_async, task_with
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import GenerateConfig, Model, get_model
from inspect_ai.solver import Solver
from inspect_ai.util import display_type

from gittinseval.live.failures import NonRetryableError, ScoringError
from gittinseval.live.task import LiveTask, arm_list
from gittinseval.live.tasks.inspect_loader import (
    build_arm,
    load_inspect_task,
    registry_name,
    task_source,
)
from gittinseval.live.tasks.inspect_outcome import BatchOutcome, EvalLogReader
from gittinseval.live.tasks.prices import Prices, load_prices
from gittinseval.live.tasks.targets import build_targets
from gittinseval.live.usage import Usage
from gittinseval.utils.validation import non_negative_float, non_negative_int, positive_int

__all__ = ["InspectScorer", "inspect_task"]

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _environment(name: str, value: str) -> Any:
    """``os.environ[name] = value`` for the block, unless the user set ``name`` already."""
    if name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        del os.environ[name]


def _one_line(error: BaseException) -> str:
    """An inspect error's message on one line, without its console markup (``[bold]...[/bold]``)."""
    return " ".join(re.sub(r"\[/?[a-z ]+\]", "", str(error)).split())


@contextlib.contextmanager
def _root_logging_kept() -> Any:
    """The root logger's level and handlers as they were before the block.

    inspect's first eval in a process sets the root logger's level to its own log level
    (warning) and adds its console handler to it: the run's own info lines (the pilot's
    spend, the final "stopped" line) would vanish and its warnings show twice.
    """
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        yield
    finally:
        root.setLevel(level)
        for handler in [handler for handler in root.handlers if handler not in handlers]:
            root.removeHandler(handler)


def _quiet_display() -> None:
    """inspect's console display off for the adapter's evals, unless ``INSPECT_DISPLAY`` says otherwise.

    ``eval_async`` has no ``display=``, and shows each eval ("plain") unless the display
    type is already set; ``display_type()`` sets it from ``INSPECT_DISPLAY`` the first time
    it is asked (after that, it keeps what was set, by this or by the user's own evals).
    """
    with _environment("INSPECT_DISPLAY", "none"):
        display_type()


def _json_input(sample: Sample) -> Any:
    """The sample's input as JSON (chat messages without their random ids)."""
    if isinstance(sample.input, str):
        return sample.input
    return [message.model_dump(mode="json", exclude={"id"}, exclude_none=True) for message in sample.input]


class InspectScorer:
    """``score_fn`` of a live run on an inspect task: ``await scorer(arm, batch) -> (scores, usage)``, each
    sample's bill (:class:`~gittinseval.live.usage.Usage`), or ``(scores, dollars)`` when the samples' usage does
    not add up to the eval's (:meth:`~gittinseval.live.tasks.inspect_outcome.EvalLogReader.usage`).

    Args:
        task: the inspect task; its dataset's samples are the examples.
        arms: the arm mappings (see the module's docstring).
        prices: model -> USD per 1M tokens.
        scorer: the name of the task's scorer to read; ``None``: its only one.
        model_args: extra ``get_model`` arguments by model string, for what cannot be
            JSON in an arm (a client, scripted outputs as Python functions); not part of the
            arms' identity in the store.
        log_dir: where inspect writes its logs (``None``: inspect's default, ``./logs``
            or ``INSPECT_LOG_DIR``).
        eval_options: further keyword arguments of ``inspect_ai.eval_async``
            (``max_connections``, ``fail_on_error``, ``time_limit``, ...).
        max_retries: inspect's retries of a model request that failed transiently, for the
            arms whose generate settings (and the task's) set none; ``None``: inspect's
            default, retrying until the request's ``timeout`` (forever without one).
        source: where the task came from (:func:`~gittinseval.live.tasks.inspect_loader.task_source`), part of
            the store's identity.
    """

    def __init__(
        self,
        task: Task,
        arms: Sequence[Mapping[str, Any]],
        prices: Prices,
        scorer: str | None = None,
        model_args: Mapping[str, Mapping[str, Any]] | None = None,
        log_dir: str | Path | None = None,
        eval_options: Mapping[str, Any] | None = None,
        max_retries: int | None = 3,
        source: Mapping[str, Any] | None = None,
    ) -> None:
        self.task = task
        self.source = dict(source or {"spec": task.name})
        self.prices = prices
        self.scorer = scorer
        self.log_dir = None if log_dir is None else str(log_dir)
        self.eval_options = dict(eval_options or {})
        if self.eval_options.get("log_samples") is False:
            raise ValueError("eval_options.log_samples=false: the scores and usage are read from the log's samples")
        self.max_retries = None if max_retries is None else non_negative_int("max_retries", max_retries)
        self.samples: dict[Any, Sample] = {}
        for position, sample in enumerate(task.dataset, start=1):
            # inspect numbers samples without an id from 1, as here.
            sample_id = position if sample.id is None else sample.id
            if sample_id in self.samples:
                raise ValueError(f"inspect task {task.name!r}: sample id {sample_id!r} appears twice")
            self.samples[sample_id] = sample if sample.id is not None else sample.model_copy(update={"id": sample_id})
        if not self.samples:
            raise ValueError(f"inspect task {task.name!r} has no samples")
        extra_args = build_targets(dict(model_args or {}), "model_args")
        self.arms = [dict(arm) for arm in arms]
        self._keys = {self._key(arm): index for index, arm in enumerate(self.arms)}
        # Generate settings: the arm's over the task's, and the task's over this max_retries.
        defaults = GenerateConfig(max_retries=self.max_retries)
        built = [build_arm(arm, index, task, defaults, prices, extra_args) for index, arm in enumerate(self.arms)]
        self.configs: list[GenerateConfig] = [arm.config for arm in built]
        self.solvers: list[Solver] = [arm.solver for arm in built]
        self._model_args: list[dict[str, Any]] = [arm.model_args for arm in built]
        self.reader = EvalLogReader(task.name, scorer, prices)
        # A model is made at its arm's first batch (a dry run builds none, and needs no API key), and again
        # for each event loop that runs evals: a provider's HTTP client belongs to the loop that first used
        # it (the pilot's loop ends before the run's starts).
        self._models: dict[int, Model] = {}
        self._models_loop: asyncio.AbstractEventLoop | None = None
        self._queue: list[tuple[int, list[Any], asyncio.Future]] = []
        self._runner: asyncio.Task | None = None

    def identity(self) -> dict[str, Any]:
        """What makes a score or a charge besides the arms (which the store records with their models,
        settings, system messages, solvers and model arguments): the inspect task's name and source (a task
        file's SHA-256), the registry names of its scorers and solver, the scorer read, and the whole prices
        file (a grader model's price is charged too).  Not ``log_dir``, ``eval_options``, ``max_retries`` nor
        the ``model_args`` given apart from the arms."""
        scorers = self.task.scorer if isinstance(self.task.scorer, list) else [self.task.scorer]
        return {
            "task": self.task.name,
            "source": self.source,
            "task_scorers": [registry_name(scorer) for scorer in scorers if scorer is not None],
            "task_solver": registry_name(self.task.solver),
            "scorer": self.scorer,
            "prices": self.prices.as_dict(),
        }

    def _model(self, index: int) -> Model:
        """Arm ``index``'s model for the running event loop; one inspect cannot build fails before any request."""
        loop = asyncio.get_running_loop()
        if self._models_loop is not loop:
            self._models, self._models_loop = {}, loop
        if index not in self._models:
            arm = self.arms[index]["model"]
            try:
                self._models[index] = get_model(arm, memoize=False, **self._model_args[index])
            except Exception as error:  # noqa: BLE001 - any failure to build a model is this arm's, and free
                message = f"inspect could not build model {arm!r}: {_one_line(error)}"
                raise NonRetryableError(message, cost=0.0) from None
        return self._models[index]

    @staticmethod
    def _key(arm: Mapping[str, Any]) -> str:
        return json.dumps(arm, sort_keys=True, default=str)

    @property
    def sample_ids(self) -> list[Any]:
        return list(self.samples)

    def example(self, sample_id: Any) -> dict[str, Any]:
        """The JSON example of a sample: what the live run hands to this scorer and hashes for the store."""
        sample = self.samples[sample_id]
        return {"id": sample_id, "input": _json_input(sample), "target": sample.target, "choices": sample.choices}

    async def __call__(
        self, arm: Mapping[str, Any], batch: Sequence[Mapping[str, Any]]
    ) -> tuple[np.ndarray, Usage | float]:
        index = self._keys.get(self._key(arm))
        if index is None:
            raise NonRetryableError(f"arm {dict(arm)} is not one of this inspect task's arms", cost=0.0)
        future = asyncio.get_running_loop().create_future()
        self._queue.append((index, [example["id"] for example in batch], future))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.ensure_future(self._drain())
        outcome = await future
        return outcome.scores, outcome.dollars if outcome.usage is None else outcome.usage

    async def _drain(self) -> None:
        """Run the queued batches, all queued ones together in one eval, until none is left."""
        while self._queue:
            jobs, self._queue = self._queue, []
            try:
                outcomes = await self.evaluate([(index, ids) for index, ids, _ in jobs])
            except Exception as failure:  # noqa: BLE001 - handed to every waiting caller
                outcomes = [failure] * len(jobs)
            for (_, _, future), outcome in zip(jobs, outcomes, strict=True):
                if future.done():  # the caller was cancelled
                    continue
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)

    async def evaluate(self, jobs: Sequence[tuple[int, Sequence[Any]]]) -> list[BatchOutcome | Exception]:
        """Score each ``(arm index, sample ids)`` job, all in one ``eval_async``; a failed job gives its error
        (a :class:`~gittinseval.live.NonRetryableError` with the scores and the charge of what finished)."""
        _quiet_display()
        outcomes: list[BatchOutcome | Exception | None] = [None] * len(jobs)
        tasks, running = [], []
        for position, (index, ids) in enumerate(jobs):
            try:
                tasks.append(self._arm_task(index, ids))
            except NonRetryableError as failure:
                outcomes[position] = failure
            else:
                running.append(position)
        if tasks:
            # Realtime logging serves inspect's live viewer of long evals and cost a fifth of a batch's overhead
            # here (scripts/benchmark_inspect.py); a failed sample is not run again (retries are the model's).
            options = {
                "max_tasks": len(tasks),
                "score_display": False,
                "log_realtime": False,
                "retry_on_error": 0,
                **self.eval_options,
            }
            try:
                with _root_logging_kept():
                    logs = await eval_async(tasks, model=None, log_dir=self.log_dir, **options)
            except Exception as error:  # noqa: BLE001 - what was sent is unknown: charged as expected
                raise NonRetryableError(f"inspect's eval failed: {type(error).__name__}: {_one_line(error)}") from error
            for position, eval_log in zip(running, logs, strict=True):
                try:
                    index, ids = jobs[position]
                    outcomes[position] = self.reader.outcome(index, self.arms[index]["model"], ids, eval_log)
                except Exception as failure:  # noqa: BLE001 - one arm's failure is that arm's
                    outcomes[position] = failure
        return outcomes

    def _arm_task(self, index: int, ids: Sequence[Any]) -> Task:
        unknown = [sample_id for sample_id in ids if sample_id not in self.samples]
        if unknown:
            raise NonRetryableError(f"inspect task {self.task.name!r} has no samples {unknown[:5]}", cost=0.0)
        # task_with changes the task it is given: a shallow copy per batch keeps the loaded one intact.
        return task_with(
            copy.copy(self.task),
            dataset=MemoryDataset([self.samples[sample_id] for sample_id in ids], name=self.task.dataset.name),
            solver=self.solvers[index],
            model=self._model(index),
            config=self.configs[index],
        )

    def pilot(self, n_samples: int) -> tuple[list[float], float]:
        """Score the first ``n_samples`` samples once on every arm: ``([K]`` dollars per example, tokens per example).

        The spend is outside any budget; it and the scores are logged, also when an arm's batch fails.
        """
        ids = self.sample_ids[: positive_int("pilot", n_samples)]
        outcomes = asyncio.run(self.evaluate([(index, ids) for index in range(len(self.arms))]))
        spent = 0.0  # what inspect reported, failed batches included
        for outcome in outcomes:
            if isinstance(outcome, BatchOutcome):
                spent += outcome.dollars
            elif isinstance(outcome, ScoringError) and outcome.cost is not None:
                spent += outcome.cost
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                log.error("pilot of %d samples per arm failed after spending $%.6g outside the budget", len(ids), spent)
                raise outcome
        costs = [outcome.dollars / len(ids) for outcome in outcomes]
        tokens = sum(outcome.tokens for outcome in outcomes) / (len(ids) * len(outcomes))
        log.info(
            "pilot of %d samples per arm: spent $%.6g outside the budget; dollars per example %s; mean scores %s",
            len(ids),
            spent,
            [round(cost, 9) for cost in costs],
            [round(float(outcome.scores.mean()), 3) for outcome in outcomes],
        )
        return costs, tokens


def inspect_task(
    task: str | Task | Callable[..., Task],
    arms: Sequence[Mapping[str, Any]],
    prices: str | Path | Mapping[str, Mapping[str, float]] | Prices,
    tokens: Mapping[str, float] | None = None,
    pilot: int = 2,
    pilot_file: str | Path | None = None,
    scorer: str | None = None,
    task_args: Mapping[str, Any] | None = None,
    model_args: Mapping[str, Mapping[str, Any]] | None = None,
    log_dir: str | Path | None = None,
    eval_options: Mapping[str, Any] | None = None,
    max_retries: int | None = 3,
    binary: bool = False,
    name: str | None = None,
) -> LiveTask:
    """A live task that evaluates ``arms`` on an inspect task's samples (see the module's docstring).

    Args:
        task: ``"path/to/file.py@name"``, a registered task name, a ``Task``, or a
            function returning one.
        arms: the arm mappings: ``model`` and optionally ``name``, ``system``,
            ``solver``, ``model_args`` and generate settings.
        prices: a prices file or mapping (:func:`~gittinseval.live.tasks.prices.load_prices`);
            every model an arm uses must have a price.
        tokens: expected tokens of one example, ``{"input": ..., "output": ...}``;
            ``None``: measured by a pilot.
        pilot: samples per arm of the pilot (used when ``tokens`` is ``None``).
        pilot_file: a JSON file keeping the pilot's estimate: a rerun (a resumed store)
            with the same arms, pilot samples and prices reads it instead of paying for
            the pilot again and getting other costs, which the store would refuse.
        scorer: which of the task's scorers to read (``None``: its only one).
        task_args: arguments of the task function, for a task given by name.
        model_args, log_dir, eval_options, max_retries: see :class:`InspectScorer`.
        binary: whether every score is 0 or 1 (e.g. ``match``, ``choice``, ``includes``).
        name: names the default store; ``None``: the inspect task's name.
    """
    arms = arm_list(arms)
    loaded = load_inspect_task(task, task_args)
    table = load_prices(prices)
    score_fn = InspectScorer(
        loaded, arms, table, scorer, model_args, log_dir, eval_options, max_retries, task_source(task, task_args)
    )
    if tokens is None:
        costs, tokens_per_example = _pilot_estimate(score_fn, pilot, pilot_file)
    else:
        unknown = sorted(set(tokens) - {"input", "output"})
        if unknown or not {"input", "output"} <= set(tokens):
            raise ValueError(f"tokens must be {{input: ..., output: ...}} per example, got {dict(tokens)}")
        expected = {key: non_negative_float(f"tokens.{key}", tokens[key]) for key in ("input", "output")}
        costs = [table.price(str(arm["model"])).dollars(expected["input"], expected["output"]) for arm in arms]
        tokens_per_example = expected["input"] + expected["output"]
    return _live_task(score_fn, costs, tokens_per_example, binary, name or loaded.name)


def _pilot_estimate(score_fn: InspectScorer, n_samples: int, path: str | Path | None) -> tuple[list[float], float]:
    """The pilot's ``(costs, tokens_per_example)``: read from ``path`` if it was measured there for the same arms,
    pilot samples and prices, else measured (and written to ``path``)."""
    measured_for = json.loads(
        json.dumps(
            {
                "arms": score_fn.arms,
                "samples": score_fn.sample_ids[: positive_int("pilot", n_samples)],
                "prices": score_fn.prices.as_dict(),
            },
            default=str,
        )
    )
    path = None if path is None else Path(path)
    if path is not None and path.is_file():
        try:
            saved = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(
                f"pilot_file {path}, line {error.lineno}, column {error.colno}: not JSON ({error.msg}); "
                "delete it to run the pilot again"
            ) from None
        if not isinstance(saved, dict) or not {"costs", "tokens_per_example"} <= set(saved):
            raise ValueError(f"pilot_file {path} holds no pilot estimate; delete it to run the pilot again")
        if saved.get("measured_for") == measured_for:
            log.info("pilot estimate read from %s", path)
            return saved["costs"], saved["tokens_per_example"]
        log.warning("%s holds a pilot of other arms, samples or prices: running the pilot again", path)
    costs, tokens_per_example = score_fn.pilot(n_samples)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"measured_for": measured_for, "costs": costs, "tokens_per_example": tokens_per_example}
        path.write_text(json.dumps(record, indent=1) + "\n")
    return costs, tokens_per_example


def _live_task(
    score_fn: InspectScorer, costs: list[float], tokens_per_example: float, binary: bool, name: str
) -> LiveTask:
    """The one place that fills :class:`~gittinseval.live.task.LiveTask`'s fields."""
    return LiveTask(
        arms=score_fn.arms,
        examples=[score_fn.example(sample_id) for sample_id in score_fn.sample_ids],
        score_fn=score_fn,
        costs=costs,
        tokens_per_example=tokens_per_example,
        binary=binary,
        name=name,
    )
