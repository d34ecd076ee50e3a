"""What a live run evaluates: the arms, the examples, how a batch is scored and what it is expected to cost."""

from __future__ import annotations

import hashlib
import inspect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gittinseval.core.params import get_params, target_of
from gittinseval.data import Benchmark, validate_prices
from gittinseval.live.labels import arm_attributes, arm_labels

__all__ = [
    "DOLLARS",
    "TOKENS_PER_MILLION",
    "UNIT",
    "LiveTask",
    "TaskDefinition",
    "arm_list",
    "arm_name",
    "arm_labels_of_names",
    "dataset_digest",
    "scorer_identity",
]

TOKENS_PER_MILLION = 1e6
UNIT = "unit"
DOLLARS = "dollars"


def arm_name(arm: Any) -> str:
    """Stable name of an arm: a string as is, anything else as sorted-key JSON."""
    return arm if isinstance(arm, str) else json.dumps(arm, sort_keys=True, default=str)


def arm_list(arms: Any) -> list[Any]:
    """``arms`` as a list, or a ``ValueError`` for arms given as a mapping of names to settings.

    A mapping reads naturally in YAML (``arms: {small: {model: ...}}``) but its arms would be its
    keys, the bare names; the message shows the list it should be, each key as the arm's ``name``.
    """
    if isinstance(arms, Mapping):
        names = [str(name) for name in arms]
        example = f"- {{name: {names[0]}, model: ...}}" if names else "- {name: ..., model: ...}"
        raise ValueError(
            f"task.arms is a mapping ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}), and the arms are a "
            f"list: write each as a list item with its key as its name, {example}"
        )
    return list(arms)


def arms_of_names(names: Sequence[str]) -> list[str | dict]:
    """The arms from their names (:func:`arm_name`), as a store keeps them: a mapping arm is read back from its
    JSON, any other name stays a string."""
    arms = []
    for name in names:
        try:
            arm = json.loads(name) if name.startswith("{") else name
        except json.JSONDecodeError:
            arm = name
        arms.append(arm if isinstance(arm, str | dict) else name)
    return arms


def arm_labels_of_names(names: Sequence[str]) -> tuple[str, ...]:
    """The arms' labels (:func:`~gittinseval.live.labels.arm_labels`) from their names (:func:`arm_name`): a
    resumed run shows the same labels."""
    return tuple(arm_labels(arms_of_names(names)))


def scorer_identity(score_fn: Callable[..., Any] | None) -> dict[str, Any] | None:
    """What turns a reply into a score and a cost, as a store records it (``None``: no scorer).

    A scorer with an ``identity()`` method gives its own (its ``_target_`` added); any
    other object its ``_target_`` and constructor parameters (:func:`~gittinseval.core.params.get_params`),
    or its ``_target_`` alone when they cannot be read; a plain function its qualified
    name.  A change of a function's body goes unseen: give it a new name, or use a
    new store.
    """
    if score_fn is None:
        return None
    if inspect.isfunction(score_fn) or inspect.ismethod(score_fn):
        return {"_target_": f"{score_fn.__module__}.{score_fn.__qualname__}"}
    if (identity := getattr(score_fn, "identity", None)) is not None:
        return {"_target_": target_of(score_fn), **identity()}
    try:
        return {"_target_": target_of(score_fn), **get_params(score_fn)}
    except TypeError:
        return {"_target_": target_of(score_fn)}


def dataset_digest(examples: Sequence[Any]) -> str:
    """SHA-256 of the examples' content as JSON: a store refuses to resume on another dataset."""
    text = json.dumps(list(examples), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class LiveTask:
    """What a live run evaluates.

    Attributes:
        arms: the ``K`` arms handed to ``score_fn``.
        examples: the ``N`` examples handed to ``score_fn``.
        score_fn: ``score_fn(arm, batch)`` -> scores, ``(scores, dollars)``, or ``(scores, usage)``
            with each example's bill (:class:`~gittinseval.live.usage.Usage`); ``None`` when the
            caller scores the requests itself (:class:`~gittinseval.live.Evaluator`'s ask/tell).
        costs: ``[K]`` expected dollars per example of each arm; ``"unit"``: every
            example costs 1 and the budget counts examples; ``None``: ``score_fn``
            reports what each call cost.
        tokens_per_example: expected tokens of one example (prompt and reply):
            converts dollars to the policy's raw cost unit (USD per 1M tokens).
        binary: whether every score is 0 or 1.
        benchmark: the response matrix the task replays, if any (its
            data-specific prior serves ``prior=specific``).
        name: names the default store.
        costs_by_mode: expected dollars per example of each arm in each way a task can call its model, e.g.
            a chat task's ``{"chat": [...], "batch": [...]}`` (the second at batch prices; when its prices have
            none, the error that names the model without one); ``costs`` is the run's own.  The dry run states the
            estimate of each, or why it has none.
    """

    arms: Sequence[Any]
    examples: Sequence[Any]
    score_fn: Callable[[Any, list[Any]], Any] | None = None
    costs: Sequence[float] | np.ndarray | str | None = None
    tokens_per_example: float = 1000.0
    binary: bool = False
    benchmark: Benchmark | None = None
    name: str = "task"
    costs_by_mode: dict[str, list[float] | str] | None = None


@dataclass(frozen=True)
class TaskDefinition:
    """What the evaluator and its store know of a task: no scoring function, no examples, only what defines them.

    Attributes:
        names: the ``K`` arm names (:func:`arm_name`), distinct: what the store keys the arms by.
        n_examples: ``N``.
        costs: ``[K]`` expected cost per example in the run's money: dollars, or ones
            under unit costs; ``None`` when every call reports its own cost.
        cost_unit: ``"dollars"``, ``"unit"`` or ``"reported"`` (``costs`` is ``None``).
        tokens_per_example: the conversion of dollars to the policy's raw cost unit.
        binary: whether every score is 0 or 1.
        dataset: :func:`dataset_digest` of the examples.
        scorer: :func:`scorer_identity` of the scoring function (``None`` without one).
        labels: the ``K`` short labels shown in the progress line, logs, ``status.txt``,
            ``summary.json`` and W&B (:func:`arm_labels_of_names`; ``None``: the names).
    """

    names: tuple[str, ...]
    n_examples: int
    costs: np.ndarray | None
    cost_unit: str
    tokens_per_example: float
    binary: bool
    dataset: str
    scorer: dict[str, Any] | None = None
    labels: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.labels is None:
            object.__setattr__(self, "labels", arm_labels_of_names(self.names))

    @property
    def attributes(self) -> np.ndarray | None:
        """``[K, D]`` codes of the settings that the arms share (:func:`~gittinseval.live.labels.arm_attributes`),
        read from their names, so that a resumed run's certificate learns from the same siblings; ``None``."""
        return arm_attributes(arms_of_names(self.names))

    @classmethod
    def of(cls, task: LiveTask) -> TaskDefinition:
        names = tuple(arm_name(arm) for arm in arm_list(task.arms))
        if not names:
            raise ValueError("at least one arm is needed")
        if len(set(names)) != len(names):
            repeated = sorted({name for name in names if names.count(name) > 1})
            raise ValueError(f"arm names must be distinct; repeated: {repeated[:5]}")
        tokens = float(task.tokens_per_example)
        if not (math.isfinite(tokens) and tokens > 0):
            raise ValueError(f"tokens_per_example must be positive and finite, got {task.tokens_per_example!r}")
        if isinstance(task.costs, str):
            if task.costs != UNIT:
                raise ValueError(f"costs must be dollars per example, 'unit' or None, got {task.costs!r}")
            costs, unit = np.ones(len(names)), UNIT
        elif task.costs is None:
            costs, unit = None, "reported"
        else:
            costs, unit = validate_prices(task.costs, len(names), "costs"), DOLLARS
        if not task.examples:
            raise ValueError("the task has no examples: there is nothing to evaluate")
        if len(names) == 1:
            raise ValueError(f"the task has one arm ({names[0]}): there is nothing to compare; give two arms or more")
        return cls(
            names,
            len(task.examples),
            costs,
            unit,
            tokens,
            bool(task.binary),
            dataset_digest(task.examples),
            scorer_identity(task.score_fn),
        )

    @property
    def n_arms(self) -> int:
        return len(self.names)

    @property
    def dollars_per_raw_unit(self) -> float:
        """Money per unit of the policy's raw cost: ``tokens_per_example / 1e6`` dollars, or 1 under unit costs."""
        return 1.0 if self.cost_unit == UNIT else self.tokens_per_example / TOKENS_PER_MILLION

    def raw_costs(self) -> np.ndarray:
        """``[K]`` costs as the policy sees them: ``c_k = dollars_k / dollars_per_raw_unit``; ones when
        calls report their own costs (no expectation to plan with)."""
        if self.costs is None:
            return np.ones(self.n_arms)
        return self.costs / self.dollars_per_raw_unit
