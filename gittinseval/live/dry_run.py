"""The cost of a live run before any call: ``dry_run=true``.

With ``c_k`` the expected dollars per example of arm ``k``, ``N`` examples, a
budget ``B`` and batches of ``b`` examples:

- the exhaustive cost, every arm on every example, is ``E = N * sum_k c_k``;
- the budget is ``B / E`` of it;
- spread evenly, every arm gets the same examples, ``n = min(N, B / sum_k c_k)``
  of them (what a uniform allocation would do);
- one batch of every arm costs ``min(b, N) * sum_k c_k``; a budget below that
  cannot look at every arm even once, which the report warns about.

A task that can call its models in several ways at several prices (a chat task: ``chat``, and ``batch`` at
batch prices; its ``costs_by_mode``) gets the exhaustive cost and the examples per arm spread evenly of each
mode, the run's own (its ``score_fn.mode``) marked, so that the batch-price estimate stands beside the normal
one; a mode without an estimate (a model without a batch price) is stated with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gittinseval.live.labels import arm_labels
from gittinseval.utils.validation import non_negative_float, positive_float, positive_int

__all__ = ["dry_run_report"]


def _dollars(amount: float) -> str:
    return f"${amount:.4g}"


def _by_mode(by_mode: dict[str, list[float] | str], run_mode: str | None, n_examples: int, budget: float) -> list[str]:
    """A line per mode of a task with several (none for one): its exhaustive cost and what the budget buys, or why
    it has no estimate; the line of ``run_mode`` marked (two modes may have equal prices)."""
    if len(by_mode) < 2:
        return []
    lines = ["estimates by mode (task.score_fn.mode):"]
    for mode, mode_costs in by_mode.items():
        own = " (this run)" if mode == run_mode else ""
        if isinstance(mode_costs, str):
            lines.append(f"  {mode}{own}: no estimate ({mode_costs})")
            continue
        per_round = float(np.sum(mode_costs))
        even = min(float(n_examples), budget / per_round) if per_round else float(n_examples)
        lines.append(
            f"  {mode}{own}: exhaustive cost {_dollars(n_examples * per_round)}, about {even:.3g} of the "
            f"{n_examples} examples per arm spread evenly"
        )
    return lines


def dry_run_report(task: Any, budget_usd: float, batch_size: int, labels: Sequence[str] | None = None) -> str:
    """What a run of ``task`` to ``budget_usd`` would cost, as text; makes no call.

    Args:
        task: a :class:`~gittinseval.live.task.LiveTask` (its ``arms``,
            ``examples``, ``costs`` in expected dollars per example, and ``name``).
        budget_usd: the run's budget in dollars.
        batch_size: examples per request of the policy.
        labels: the arms' labels; ``None``: :func:`~gittinseval.live.labels.arm_labels`.
    """
    budget = positive_float("budget", budget_usd)
    batch = positive_int("batch_size", batch_size)
    labels = arm_labels(task.arms) if labels is None else list(labels)
    n_arms, n_examples = len(task.arms), len(task.examples)
    if len(labels) != n_arms:
        raise ValueError(f"{len(labels)} labels for {n_arms} arms")
    lines = [
        f"dry run of task {task.name!r}: no call is made",
        f"{n_arms} arms, {n_examples} examples, batches of {batch}, budget {_dollars(budget)}",
    ]
    width = max(len("name"), *map(len, labels))
    if task.costs is None:
        lines += ["", f"  {'arm':>4}  name", *(f"  {k:>4}  {label}" for k, label in enumerate(labels))]
        lines += ["", "the task has no expected costs (its scoring reports what each call cost): no estimate"]
        return "\n".join(lines)
    costs = np.array([non_negative_float(f"expected cost of arm {k}", c) for k, c in enumerate(task.costs)])
    if costs.size != n_arms:
        raise ValueError(f"task has {costs.size} expected costs for {n_arms} arms")
    lines += ["", f"  {'arm':>4}  {'name':<{width}}  {'$/example':>10}  {f'$ all {n_examples}':>12}"]
    lines += [
        f"  {k:>4}  {label:<{width}}  {cost:>10.4g}  {cost * n_examples:>12.4g}"
        for k, (label, cost) in enumerate(zip(labels, costs, strict=True))
    ]
    per_round = float(costs.sum())
    exhaustive = n_examples * per_round
    lines += ["", f"exhaustive cost (every arm on every example): {_dollars(exhaustive)}"]
    if per_round == 0:
        lines.append("every arm is free: the budget covers every example of every arm")
        return "\n".join(lines)
    lines.append(f"budget: {_dollars(budget)} = {100 * budget / exhaustive:.3g}% of the exhaustive cost")
    even = min(float(n_examples), budget / per_round)
    lines.append(
        f"spread evenly: about {even:.3g} of the {n_examples} examples per arm"
        + (" (the budget covers every example)" if even == n_examples else "")
    )
    run_mode = getattr(task.score_fn, "mode", None)
    lines += _by_mode(getattr(task, "costs_by_mode", None) or {}, run_mode, n_examples, budget)
    first_round = min(batch, n_examples) * per_round
    if budget < first_round:
        lines.append(
            f"WARNING: the budget {_dollars(budget)} cannot cover one batch of every arm "
            f"({min(batch, n_examples)} examples each: {_dollars(first_round)}); "
            "some arms would never be scored. Raise the budget, or lower the batch size or the number of arms."
        )
    return "\n".join(lines)
