"""inspect_ai tasks as live tasks: any policy, a dollar budget and the store, on an inspect ``Task``.

Needs the ``[inspect]`` extra (``pip install gittinseval[inspect]``).

:func:`inspect_task` loads an inspect task (``"path/to/file.py@name"``, a registered
task name, or a ``Task``) and a list of arms.  An arm is a mapping::

    {model: openai/gpt-4o-mini,          # any inspect model string
     name: mini-terse,                   # optional label
     system: "Answer with a number.",    # optional system message (inspect's system_message)
     model_args: {...},                  # optional, JSON: passed to inspect's get_model
     temperature: 0.0, max_tokens: 64}   # any inspect GenerateConfig field

- The examples are the task's samples: one JSON mapping per sample (``id``,
  ``input``, ``target``, ``choices``), so that a store refuses to resume on a changed
  dataset.
- Scoring a batch runs the task's own solver (after the arm's system message) and
  scorer on those samples for that arm, with ``inspect_ai.eval_async``.  Batches
  asked for while an eval is running wait and then run together, one inspect task
  per batch in a single eval, since inspect runs one eval at a time per process.
- A sample's score is its scorer's value through inspect's ``value_to_float``
  ("C" 1, "P" 0.5, "I" and "N" 0, yes/no, true/false, numbers), the mean over epochs;
  a value that is none of these, or a number outside [0, 1], stops the run with an
  error naming the scorer and the sample.
- A batch's charge is the token usage inspect reports for the eval
  (``log.stats.model_usage``, every model the task called, graders included) at
  each model's price from the prices file (:mod:`gittinseval.live.prices`).
- The expected dollars per example of each arm come from the user's token estimates
  (``tokens={"input": ..., "output": ...}``) at the arm model's price, or else from
  a pilot: ``pilot`` samples per arm scored once before the run, whose spend is
  outside the budget and is logged with its scores.

Offline tests use inspect's ``mockllm/model`` with scripted outputs that carry their own
``usage``: without it mockllm counts tokens with tiktoken, which downloads its encoding.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from inspect_ai import Task, eval_async, task_with
from inspect_ai._eval.loader import load_tasks  # private: what `inspect eval` loads "file.py@name" with
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.log import EvalLog
from inspect_ai.model import GenerateConfig, Model, get_model
from inspect_ai.scorer import CORRECT, INCORRECT, NOANSWER, PARTIAL, value_to_float
from inspect_ai.solver import chain, system_message
from inspect_ai.util._display import display_type_initialized, init_display_type  # private: eval_async has no display=
from pydantic import ValidationError

from gittinseval.live.failures import NonRetryableError
from gittinseval.live.prices import Prices, load_prices
from gittinseval.live.task import LiveTask
from gittinseval.validation import non_negative_float, positive_int

__all__ = ["BatchOutcome", "InspectScorer", "inspect_task", "load_inspect_task"]

log = logging.getLogger(__name__)

ARM_FIELDS = ("model", "name", "system", "model_args")
_BOOLEAN_WORDS = ("yes", "no", "true", "false")  # value_to_float reads these, in any case


def load_inspect_task(task: str | Task | Callable[..., Task], task_args: Mapping[str, Any] | None = None) -> Task:
    """An inspect ``Task`` from a ``"file.py@name"`` spec or registered name, a ``Task``, or a function making one."""
    if isinstance(task, Task):
        if task_args:
            raise ValueError("task_args apply to a task loaded by name; this task is already built")
        return task
    if callable(task):
        made = task(**(task_args or {}))
        if not isinstance(made, Task):
            raise ValueError(f"{task!r} returned {type(made).__name__}, not an inspect_ai Task")
        return made
    spec = str(task)
    path = spec.split("@", 1)[0]
    if path.endswith(".py") and not Path(path).is_file():
        raise FileNotFoundError(f"inspect task file {path} does not exist (relative to {Path.cwd()})")
    tasks = load_tasks([spec], dict(task_args or {}))
    if len(tasks) != 1:
        names = ", ".join(t.name for t in tasks) or "none"
        raise ValueError(f"inspect task {spec!r} names {len(tasks)} tasks ({names}); name one as file.py@task_name")
    return tasks[0]


def _json_input(sample: Sample) -> Any:
    """The sample's input as JSON (chat messages without their random ids)."""
    if isinstance(sample.input, str):
        return sample.input
    return [message.model_dump(mode="json", exclude={"id"}, exclude_none=True) for message in sample.input]


def _score_value(value: Any, scorer: str, sample_id: Any) -> float:
    """A scorer's value as a float in [0, 1] through inspect's ``value_to_float``, else a named error."""
    convertible = isinstance(value, int | float) or (
        isinstance(value, str)
        and (value in (CORRECT, INCORRECT, PARTIAL, NOANSWER) or value.lower() in _BOOLEAN_WORDS or _is_number(value))
    )
    number = value_to_float()(value) if convertible else math.nan
    if not 0.0 <= number <= 1.0:
        raise NonRetryableError(
            f"inspect scorer {scorer!r} gave {value!r} for sample {sample_id!r}, which is not a score in [0, 1]; "
            "gittinseval reads C/P/I/N, yes/no, true/false and numbers in [0, 1] (choose another scorer with scorer=)"
        )
    return number


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


@dataclass(frozen=True)
class BatchOutcome:
    """One arm's batch, scored by inspect.

    Attributes:
        scores: ``[B]`` scores in [0, 1], in the order of the batch's sample ids.
        dollars: the eval's usage at the prices.
        tokens: total tokens of the batch (input, output and cache, every model).
    """

    scores: np.ndarray
    dollars: float
    tokens: int


class InspectScorer:
    """``score_fn`` of a live run on an inspect task: ``await scorer(arm, batch) -> (scores, dollars)``.

    Args:
        task: the inspect task; its dataset's samples are the examples.
        arms: the arm mappings (see the module's docstring).
        prices: model -> USD per 1M tokens.
        scorer: the name of the task's scorer to read; ``None``: its only one.
        model_args: extra ``get_model`` arguments by model string, for what cannot be
            JSON in an arm (a client, mockllm's scripted outputs); not part of the arms'
            identity in the store.
        log_dir: where inspect writes its logs (``None``: inspect's default, ``./logs``
            or ``INSPECT_LOG_DIR``).
        eval_options: further keyword arguments of ``inspect_ai.eval_async``
            (``max_connections``, ``fail_on_error``, ``time_limit``, ...).
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
    ) -> None:
        self.task = task
        self.prices = prices
        self.scorer = scorer
        self.log_dir = None if log_dir is None else str(log_dir)
        self.eval_options = dict(eval_options or {})
        self.samples: dict[Any, Sample] = {}
        for position, sample in enumerate(task.dataset, start=1):
            # inspect numbers samples without an id from 1, as here.
            sample_id = position if sample.id is None else sample.id
            if sample_id in self.samples:
                raise ValueError(f"inspect task {task.name!r}: sample id {sample_id!r} appears twice")
            self.samples[sample_id] = sample if sample.id is not None else sample.model_copy(update={"id": sample_id})
        if not self.samples:
            raise ValueError(f"inspect task {task.name!r} has no samples")
        extra_args = dict(model_args or {})
        self.arms = [dict(arm) for arm in arms]
        self._keys = {self._key(arm): index for index, arm in enumerate(self.arms)}
        self.configs: list[GenerateConfig] = []
        self.systems: list[str | None] = []
        self._model_args: list[dict[str, Any]] = []
        for index, arm in enumerate(self.arms):
            if "model" not in arm:
                raise ValueError(f"inspect arm {index} has no model: {arm}")
            settings = {key: value for key, value in arm.items() if key not in ARM_FIELDS}
            try:
                config = GenerateConfig(**settings)
            except ValidationError as error:
                problems = "; ".join(problem["msg"] for problem in error.errors())
                raise ValueError(f"inspect arm {index} ({arm['model']}): bad generate settings: {problems}") from None
            self.configs.append(task.config.merge(config))
            prices.price(str(arm["model"]))  # an arm without a price is refused before any call
            self._model_args.append({**arm.get("model_args", {}), **extra_args.get(arm["model"], {})})
            self.systems.append(arm.get("system"))
        # Models are made here, so that an unknown one is refused before any call, and
        # again for each event loop that runs evals: a provider's HTTP client belongs to
        # the loop that first used it (the pilot's loop ends before the run's starts).
        self.models = self._make_models()
        self._models_loop: asyncio.AbstractEventLoop | None = None
        self._queue: list[tuple[int, list[Any], asyncio.Future]] = []
        self._runner: asyncio.Task | None = None

    def _make_models(self) -> list[Model]:
        return [
            get_model(arm["model"], memoize=False, **args)
            for arm, args in zip(self.arms, self._model_args, strict=True)
        ]

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

    async def __call__(self, arm: Mapping[str, Any], batch: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, float]:
        index = self._keys.get(self._key(arm))
        if index is None:
            raise NonRetryableError(f"arm {dict(arm)} is not one of this inspect task's arms")
        future = asyncio.get_running_loop().create_future()
        self._queue.append((index, [example["id"] for example in batch], future))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.ensure_future(self._drain())
        outcome = await future
        return outcome.scores, outcome.dollars

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
        """Score each ``(arm index, sample ids)`` job, all in one ``eval_async``; a failed job gives its error."""
        if not display_type_initialized():
            init_display_type("none")
        loop = asyncio.get_running_loop()
        if self._models_loop is not None and self._models_loop is not loop:
            self.models = self._make_models()
        self._models_loop = loop
        tasks = [self._arm_task(index, ids) for index, ids in jobs]
        # Realtime logging serves inspect's live viewer of long evals and cost a fifth of a
        # batch's overhead here (scripts/benchmark_inspect.py); eval_options may turn it back on.
        options = {"max_tasks": len(tasks), "score_display": False, "log_realtime": False, **self.eval_options}
        logs = await eval_async(tasks, model=None, log_dir=self.log_dir, **options)
        outcomes: list[BatchOutcome | Exception] = []
        for (index, ids), eval_log in zip(jobs, logs, strict=True):
            try:
                outcomes.append(self._outcome(index, ids, eval_log))
            except Exception as failure:  # noqa: BLE001 - one arm's failure is that arm's
                outcomes.append(failure)
        return outcomes

    def _arm_task(self, index: int, ids: Sequence[Any]) -> Task:
        unknown = [sample_id for sample_id in ids if sample_id not in self.samples]
        if unknown:
            raise NonRetryableError(f"inspect task {self.task.name!r} has no samples {unknown[:5]}")
        solver = self.task.solver
        if self.systems[index]:
            solver = chain(system_message(self.systems[index]), solver)
        # task_with changes the task it is given: a shallow copy per batch keeps the loaded one intact.
        return task_with(
            copy.copy(self.task),
            dataset=MemoryDataset([self.samples[sample_id] for sample_id in ids], name=self.task.dataset.name),
            solver=solver,
            model=self.models[index],
            config=self.configs[index],
        )

    def _outcome(self, index: int, ids: Sequence[Any], eval_log: EvalLog) -> BatchOutcome:
        arm = self.arms[index]["model"]
        if eval_log.status != "success":
            error = eval_log.error.message if eval_log.error else eval_log.status
            raise RuntimeError(f"inspect eval of arm {index} ({arm}) ended {eval_log.status}: {error}")
        scores: dict[Any, list[float]] = {}
        for sample in eval_log.samples or []:
            if sample.error is not None:
                raise RuntimeError(f"inspect eval of arm {index} ({arm}): sample {sample.id!r} failed: {sample.error}")
            named = sample.scores or {}
            name = self.scorer if self.scorer is not None else next(iter(named), None)
            if self.scorer is None and len(named) > 1:
                raise NonRetryableError(
                    f"inspect task {self.task.name!r} has scorers {sorted(named)}; choose one with scorer="
                )
            if name not in named:
                raise NonRetryableError(
                    f"inspect task {self.task.name!r}: sample {sample.id!r} has no score {name!r} "
                    f"(its scores: {sorted(named) or 'none'})"
                )
            scores.setdefault(sample.id, []).append(_score_value(named[name].value, name, sample.id))
        missing = [sample_id for sample_id in ids if sample_id not in scores]
        if missing:
            raise RuntimeError(f"inspect eval of arm {index} ({arm}) returned no scores for samples {missing[:5]}")
        dollars, tokens = 0.0, 0
        for model, usage in eval_log.stats.model_usage.items():
            cache_write, cache_read = usage.input_tokens_cache_write or 0, usage.input_tokens_cache_read or 0
            try:
                dollars += self.prices.price(model).dollars(
                    usage.input_tokens, usage.output_tokens, cache_write, cache_read
                )
            except ValueError as error:
                raise NonRetryableError(
                    f"arm {index} ({arm}): cannot charge the usage of model {model!r} ({usage}): {error}"
                ) from None
            tokens += usage.input_tokens + usage.output_tokens + cache_write + cache_read
        return BatchOutcome(
            np.array([np.mean(scores[sample_id]) for sample_id in ids]),
            dollars,
            tokens,
        )

    def pilot(self, n_samples: int) -> tuple[list[float], float]:
        """Score the first ``n_samples`` samples once on every arm: ``([K]`` dollars per example, tokens per example).

        The spend is outside any budget; it and the scores are logged.
        """
        ids = self.sample_ids[: positive_int("pilot", n_samples)]
        outcomes = asyncio.run(self.evaluate([(index, ids) for index in range(len(self.arms))]))
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                raise outcome
        costs = [outcome.dollars / len(ids) for outcome in outcomes]
        tokens = sum(outcome.tokens for outcome in outcomes) / (len(ids) * len(outcomes))
        log.info(
            "pilot of %d samples per arm: spent $%.6g outside the budget; dollars per example %s; mean scores %s",
            len(ids),
            sum(outcome.dollars for outcome in outcomes),
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
    binary: bool = False,
    name: str | None = None,
) -> LiveTask:
    """A live task that evaluates ``arms`` on an inspect task's samples (see the module's docstring).

    Args:
        task: ``"path/to/file.py@name"``, a registered task name, a ``Task``, or a
            function returning one.
        arms: the arm mappings: ``model`` and optionally ``name``, ``system``,
            ``model_args`` and generate settings.
        prices: a prices file or mapping (:func:`~gittinseval.live.prices.load_prices`);
            every model an arm uses must have a price.
        tokens: expected tokens of one example, ``{"input": ..., "output": ...}``;
            ``None``: measured by a pilot.
        pilot: samples per arm of the pilot (used when ``tokens`` is ``None``).
        pilot_file: a JSON file keeping the pilot's estimate: a rerun (a resumed store)
            with the same arms, pilot samples and prices reads it instead of paying for
            the pilot again and getting other costs, which the store would refuse.
        scorer: which of the task's scorers to read (``None``: its only one).
        task_args: arguments of the task function, for a task given by name.
        model_args, log_dir, eval_options: see :class:`InspectScorer`.
        binary: whether every score is 0 or 1 (e.g. ``match``, ``choice``, ``includes``).
        name: names the default store; ``None``: the inspect task's name.
    """
    loaded = load_inspect_task(task, task_args)
    table = load_prices(prices)
    score_fn = InspectScorer(loaded, arms, table, scorer, model_args, log_dir, eval_options)
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
        saved = json.loads(path.read_text())
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
