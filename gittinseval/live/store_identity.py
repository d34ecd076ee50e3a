"""A store's identity: what a run's store records of its task, policy and settings, and the refusal of a
store made with others.

The identity is the ``settings`` table (:func:`run_settings`) with the arms' names and expected costs:
everything that makes a score or a selection.  A new store is defined with it; an existing one is
resumed only when its recorded identity is the one given (:func:`define_or_check`), so that its scores
and spend carry over; :func:`stored_run` rebuilds the task and the settings from what a store records.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gittinseval.core.params import build, target_of
from gittinseval.core.priors import GaussianPrior
from gittinseval.core.protocol import Policy
from gittinseval.live.config import LiveConfig
from gittinseval.live.run_store import STORE_FORMAT, RunStore
from gittinseval.live.task import TaskDefinition

__all__ = ["Definition", "define_or_check", "describe_differences", "run_settings", "stored_run"]

Definition = tuple[dict[str, Any], Sequence[str], np.ndarray]
"""What a store records of a run: ``(settings, arm names [K], expected costs [K])``."""


def _jsonable(value: Any) -> Any:
    """``value`` as it reads back from JSON (so that stored and given settings compare equal)."""
    return json.loads(json.dumps(value, default=float))


def run_settings(task: TaskDefinition, prior: GaussianPrior, policy: Policy, seed: int) -> dict[str, Any]:
    """The ``settings`` a store records of a run, as they read back from JSON: the store's format, the
    examples (their number and a digest of their content), the scorer, the prior, the policy's ``_target_``
    and hyperparameters, the cost unit, ``tokens_per_example``, ``binary`` and the seed."""
    return _jsonable(
        {
            "format": STORE_FORMAT,
            "n_examples": task.n_examples,
            "dataset": task.dataset,
            "scorer": task.scorer,
            "prior_mean": float(prior.mean),
            "prior_var": float(prior.var),
            "policy": {"_target_": target_of(policy), **policy.hyperparameters()},
            "cost_unit": task.cost_unit,
            "tokens_per_example": task.tokens_per_example,
            "binary": task.binary,
            "seed": seed,
        }
    )


def define_or_check(store: RunStore, stored: Definition | None, given: Definition, meta: dict[str, Any]) -> None:
    """Define a new ``store`` (``stored`` is ``None``) by ``given`` and its first ``meta`` entries, or refuse
    one whose recorded definition ``stored`` differs from ``given``, listing the differences."""
    if stored is None:
        store.define(*given, meta=meta)
    elif differences := describe_differences(stored, given):
        raise ValueError(
            f"store {store.path} was made with other settings, so its scores and spend do not carry over: "
            + "; ".join(differences)
            + " (to start afresh, keep it and add fork=NEW_STORE: a new store that reuses nothing of it)"
        )


def describe_differences(stored: Definition, given: Definition) -> list[str]:
    """Human-readable differences between two ``(settings, arm names, costs)`` triples.

    Nested settings (a policy's or a scorer's parameters) are compared key by key and
    named by their dotted path; of two objects of different ``_target_``, only the
    targets are named.
    """
    (stored_settings, stored_names, stored_costs), (settings, names, costs) = stored, given
    lines = _differences("", stored_settings, settings)
    if list(stored_names) != list(names):
        lines.append(f"arms: store has {len(stored_names)}, given {len(names)}")
        changed = [k for k in range(min(len(names), len(stored_names))) if stored_names[k] != names[k]]
        lines += [f"arm {k}: store has {stored_names[k]!r}, given {names[k]!r}" for k in changed[:5]]
    elif not np.array_equal(stored_costs, costs):
        changed = np.flatnonzero(stored_costs != costs)
        lines.append(f"costs differ for {changed.size} arms")
        lines += [
            f"cost of arm {k} ({names[k]!r}): store has {float(stored_costs[k])!r}, given {float(costs[k])!r}"
            for k in changed[:5]
        ]
    return lines


def _differences(path: str, stored: Any, given: Any) -> list[str]:
    if isinstance(stored, dict) and isinstance(given, dict):
        if "_target_" in stored and stored.get("_target_") != given.get("_target_"):
            return [f"{path}: store has {stored.get('_target_')!r}, given {given.get('_target_')!r}"]
        return [
            line
            for key in sorted(set(stored) | set(given), key=str)
            if key != "_target_"
            for line in _differences(f"{path}.{key}" if path else str(key), stored.get(key), given.get(key))
        ]
    return [] if stored == given else [f"{path}: store has {stored!r}, given {given!r}"]


def stored_run(store: str | Path) -> tuple[TaskDefinition, LiveConfig]:
    """The task and the settings an existing store was created with.

    The policy is rebuilt by :func:`~gittinseval.core.params.build` from its ``_target_``
    and its recorded parameters (:meth:`~gittinseval.core.protocol.Policy.get_params`,
    nested objects included, with the batch size the run resolved).  The task has no
    scoring function: its arms, number of examples, costs and identity only.
    """
    if not Path(store).is_file():
        raise FileNotFoundError(f"no store at {store}")
    reader = RunStore(store)
    try:
        definition = reader.load_definition()
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
        policy=build(policy.pop("_target_"), policy),
        prior=GaussianPrior(settings["prior_mean"], settings["prior_var"]),
        seed=settings["seed"],
        store=store,
    )
    return task, config
