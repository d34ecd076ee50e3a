"""A store's identity: what a run's store records of its task, policy and settings, and the refusal of a
store made with others.

The identity is the ``settings`` table (:func:`run_settings`) with the arms' names and expected costs:
everything that makes a score or a selection.  A new store is defined with it; an existing one is
resumed only when its recorded identity is the one given (:func:`define_or_check`), so that its scores
and spend carry over; :func:`stored_run` rebuilds the task and the settings from what a store records.

A bundled baseline is recorded by its ``_target_`` from before the baselines moved into the package
(:func:`~gittinseval.core.params.legacy_targets`: ``baselines.ucbe.UCBEPolicy``), and a bundled scorer by its
``_target_`` from before ``gittinseval.live.tasks.scoring`` was split into ``matrix`` and ``chat``
(:data:`LEGACY_SCORER_TARGETS`), so that a store made before either move is resumed, or refused, as it was
then, and a store made since reads the same.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gittinseval.core.cost_learning import CostLearning
from gittinseval.core.params import build, get_params, legacy_targets, target_of
from gittinseval.core.priors import GaussianPrior
from gittinseval.core.protocol import Policy
from gittinseval.live.config import LiveConfig
from gittinseval.live.run_store import STORE_FORMAT, RunStore
from gittinseval.live.task import TaskDefinition, arm_labels_of_names

__all__ = [
    "LEGACY_SCORER_TARGETS",
    "Definition",
    "define_or_check",
    "describe_differences",
    "run_settings",
    "stored_run",
]

Definition = tuple[dict[str, Any], Sequence[str], np.ndarray]
"""What a store records of a run: ``(settings, arm names [K], expected costs [K])``."""

SHOWN_DIFFERENCES = 3
"""Differences a refusal names; the others are counted."""
SHOWN_CHARACTERS = 60
"""Characters of a setting's value a refusal shows."""
DIGESTS = {
    "dataset": "the examples differ from the store's",
    "scores_sha256": "the response matrix differs from the store's",
}
"""What a changed digest (a SHA-256 of content) means, by its setting's name."""
LEGACY_SCORER_TARGETS = {
    "gittinseval.live.tasks.matrix.MatrixScorer": "gittinseval.live.tasks.scoring.MatrixScorer",
    "gittinseval.live.tasks.chat.OpenAIChatScorer": "gittinseval.live.tasks.scoring.OpenAIChatScorer",
}
"""The bundled scorers' ``_target_`` -> the one a store records: their module before issue 51 split it."""


def _jsonable(value: Any) -> Any:
    """``value`` as it reads back from JSON (so that stored and given settings compare equal)."""
    return json.loads(json.dumps(value, default=float))


def run_settings(
    task: TaskDefinition, prior: GaussianPrior, policy: Policy, seed: int, learn_costs: CostLearning | None
) -> dict[str, Any]:
    """The ``settings`` a store records of a run, as they read back from JSON: the store's format, the
    examples (their number and a digest of their content), the scorer, the prior, the policy's ``_target_``
    and hyperparameters (a bundled baseline's or scorer's ``_target_`` by its old name, see the module docstring),
    the cost unit, ``tokens_per_example``, ``binary``, the seed and how the costs are learned (``None``:
    not learned; a store made before costs were learned records none)."""
    return _jsonable(
        {
            "format": STORE_FORMAT,
            "n_examples": task.n_examples,
            "dataset": task.dataset,
            "scorer": _legacy_scorer(task.scorer),
            "prior_mean": float(prior.mean),
            "prior_var": float(prior.var),
            "policy": legacy_targets({"_target_": target_of(policy), **policy.hyperparameters()}),
            "cost_unit": task.cost_unit,
            "tokens_per_example": task.tokens_per_example,
            "binary": task.binary,
            "seed": seed,
            "learn_costs": None if learn_costs is None else get_params(learn_costs),
        }
    )


def _legacy_scorer(scorer: dict[str, Any] | None) -> dict[str, Any] | None:
    """A scorer's identity (:func:`~gittinseval.live.task.scorer_identity`) with a bundled scorer's ``_target_``
    as a store records it (:data:`LEGACY_SCORER_TARGETS`; its nested targets never moved)."""
    if scorer is None or scorer.get("_target_") not in LEGACY_SCORER_TARGETS:
        return scorer
    return {**scorer, "_target_": LEGACY_SCORER_TARGETS[scorer["_target_"]]}


def define_or_check(store: RunStore, stored: Definition | None, given: Definition, meta: dict[str, Any]) -> None:
    """Define a new ``store`` (``stored`` is ``None``) by ``given`` and its first ``meta`` entries, or refuse
    one whose recorded definition ``stored`` differs from ``given``, in one line naming the first
    :data:`SHOWN_DIFFERENCES` differences and how to start afresh."""
    if stored is None:
        store.define(*given, meta=meta)
    elif differences := describe_differences(stored, given):
        more = len(differences) - SHOWN_DIFFERENCES
        shown = differences[:SHOWN_DIFFERENCES] + ([f"and {more} more"] if more > 0 else [])
        raise ValueError(
            f"store {store.path} was made with other settings, so its scores and spend do not carry over: "
            + "; ".join(shown)
            + "; to start afresh, keep it and add fork=NEW_STORE (a new store that reuses nothing of it)"
        )


def describe_differences(stored: Definition, given: Definition) -> list[str]:
    """Human-readable differences between two ``(settings, arm names, costs)`` triples, one line each.

    Nested settings (a policy's or a scorer's parameters, an arm's fields) are compared key by key and
    named by their dotted path; of two objects of different ``_target_``, only the targets are named.
    A changed digest names what it digests (the task file, the examples, the response matrix), and a
    long value is cut to :data:`SHOWN_CHARACTERS`.  The same arms in another order name the first arm
    out of place.
    """
    (stored_settings, stored_names, stored_costs), (settings, names, costs) = stored, given
    stored_names, names = list(stored_names), list(names)
    labels = arm_labels_of_names(names)
    lines = _differences("", stored_settings, settings)
    if stored_names != names:
        if sorted(stored_names) == sorted(names):
            k = next(k for k, (old, new) in enumerate(zip(stored_names, names, strict=True)) if old != new)
            lines.append(
                f"arm {k} ({labels[k]}) is the store's arm {stored_names.index(names[k])}: the same arms "
                "in another order; give them in the store's order"
            )
            return lines
        if len(stored_names) != len(names):
            lines.append(f"arms: the store has {len(stored_names)}, given {len(names)}")
        for k in range(min(len(names), len(stored_names))):
            if stored_names[k] != names[k]:
                lines += _arm_differences(k, stored_names[k], names[k])
    elif not np.array_equal(stored_costs, costs):
        lines += [
            f"cost of arm {k} ({labels[k]}): store has {float(stored_costs[k])!r}, given {float(costs[k])!r}"
            for k in np.flatnonzero(stored_costs != costs)
        ]
    return lines


def _arm_differences(k: int, stored: str, given: str) -> list[str]:
    """The fields in which arm ``k`` differs from the store's, or its names when either is not a mapping."""
    stored_arm, given_arm = _arm_fields(stored), _arm_fields(given)
    if isinstance(stored_arm, dict) and isinstance(given_arm, dict):
        return _differences(f"arm {k}'s", stored_arm, given_arm, separator=" ")
    return [f"arm {k}: store has {_shown(stored)}, given {_shown(given)}"]


def _arm_fields(name: str) -> Any:
    try:
        return json.loads(name)
    except json.JSONDecodeError:
        return name


def _differences(path: str, stored: Any, given: Any, separator: str = ".") -> list[str]:
    if isinstance(stored, dict) and isinstance(given, dict):
        if "_target_" in stored and stored.get("_target_") != given.get("_target_"):
            return [f"{path}: store has {stored.get('_target_')!r}, given {given.get('_target_')!r}"]
        lines = []
        for key in sorted(set(stored) | set(given), key=str):
            if key == "_target_" or stored.get(key) == given.get(key):
                continue
            if key == "file_sha256":
                task_file = str(given.get("spec") or stored.get("spec")).partition("@")[0]
                lines.append(
                    f"the task file {task_file} changed since the store was made (any edit, even of a docstring, "
                    "makes another run)"
                )
                continue
            lines += _differences(f"{path}{separator}{key}" if path else str(key), stored.get(key), given.get(key))
        return lines
    if stored == given:
        return []
    key = path.rpartition(".")[2]
    if key in DIGESTS:
        return [f"{path}: {DIGESTS[key]}"]
    return [f"{path}: store has {_shown(stored)}, given {_shown(given)}"]


def _shown(value: Any) -> str:
    """``repr(value)``, cut to :data:`SHOWN_CHARACTERS`."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARACTERS else text[: SHOWN_CHARACTERS - 3] + "..."


def stored_run(store: str | Path) -> tuple[TaskDefinition, LiveConfig]:
    """The task and the settings an existing store was created with.

    The policy is rebuilt by :func:`~gittinseval.core.params.build` from its ``_target_`` (a
    baseline's old name included) and its recorded parameters
    (:meth:`~gittinseval.core.protocol.Policy.get_params`, nested objects included, with the
    batch size the run resolved), and ``budget_usd`` from the raw budget the policy plans for
    (``None`` when the run had none).  The task has no scoring function: its arms, number of
    examples, costs and identity only.
    """
    if not Path(store).is_file():
        raise FileNotFoundError(f"no store at {store}")
    reader = RunStore(store)
    try:
        definition = reader.load_definition()
        raw_budget = reader.get_meta("policy_budget")
    finally:
        reader.close()
    if definition is None:
        raise ValueError(f"store {store} holds no run")
    settings, names, costs = definition
    policy = dict(settings["policy"])
    unit = settings["cost_unit"]
    task = TaskDefinition(
        tuple(names),
        settings["n_examples"],
        None if unit == "reported" else costs,
        unit,
        settings["tokens_per_example"],
        settings["binary"],
        settings["dataset"],
        settings["scorer"],
    )
    config = LiveConfig(
        budget_usd=None if raw_budget is None else raw_budget * task.dollars_per_raw_unit,
        policy=build(policy.pop("_target_"), policy),
        prior=GaussianPrior(settings["prior_mean"], settings["prior_var"]),
        seed=settings["seed"],
        learn_costs=None if settings.get("learn_costs") is None else CostLearning(**settings["learn_costs"]),
        store=store,
    )
    return task, config
