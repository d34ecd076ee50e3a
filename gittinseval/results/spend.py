"""Where the money went: spend shares of the runs that record each arm's spend (``record_arm_spend``).

For a run with ``arm_spend`` ``s [K]`` up to ``p`` % of the exhaustive cost, the share of
its spend on a group ``G`` of arms is ``sum_{k in G} s_k / sum_k s_k``.  Three groups:

- *guessed cheap* / *guessed dear*: the arms whose planned cost started below / above their
  true expected cost (``arm_planned_over_true`` < 1 / > 1) in the misguessed plan of the
  run's seed.  Every run of that seed is measured on the same arms, whatever its own plan,
  so that a run planned at the true costs shows what those arms get when the guess is right;
- *the T best*: the ``T`` arms of the largest ``arm_means``.

One row per benchmark, cost mode and curve (label and cost plan): the mean share over its runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["TOP_ARMS", "SpendRow", "SpendShare", "spend_rows"]

TOP_ARMS = 6


@dataclass(frozen=True)
class SpendShare:
    """The mean share of the spend on a group of arms over the ``runs`` runs that have one (``nan``: none)."""

    mean: float
    runs: int


@dataclass(frozen=True)
class SpendRow:
    """One benchmark, cost mode and ``curve`` (label and cost plan) of ``runs`` runs: the mean share of their
    spend up to ``percent`` % of the exhaustive cost on the arms guessed ``cheap``, on those guessed ``dear``,
    and on the ``top`` ``best`` arms (the module docstring)."""

    benchmark: str
    cost_mode: str
    curve: str
    runs: int
    percent: int
    top: int
    cheap: SpendShare
    dear: SpendShare
    best: SpendShare


def _misguessed_arms(summaries: Sequence[dict]) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
    """Per benchmark and seed, the (cheap, dear) arm ids of its misguessed plans, which must agree."""
    groups: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}
    for summary in summaries:
        ratio = np.asarray(summary.get("arm_planned_over_true") or [], dtype=np.float64)
        if not np.any(ratio != 1.0):
            continue
        found = (np.flatnonzero(ratio < 1.0), np.flatnonzero(ratio > 1.0))
        key = (summary["benchmark"], summary["seed"])
        if key in groups and not all(np.array_equal(a, b) for a, b in zip(groups[key], found, strict=True)):
            raise ValueError(f"the runs of seed {key[1]} on {key[0]} misguess different arms: their spend shares "
                             "do not compare")
        groups[key] = found
    return groups


def _share(spend: np.ndarray, group: np.ndarray | None) -> float:
    """The share of ``spend`` on the arms of ``group`` (NaN without a group or without spend)."""
    total = spend.sum()
    return np.nan if group is None or total <= 0 else float(spend[group].sum() / total)


def _mean_share(shares: np.ndarray) -> SpendShare:
    """The mean of the ``shares`` that are set (not ``nan``)."""
    valid = shares[~np.isnan(shares)]
    return SpendShare(float(valid.mean()) if valid.size else float("nan"), int(valid.size))


def spend_rows(summaries: Sequence[dict], percent: int = 10, top: int = TOP_ARMS) -> list[SpendRow]:
    """The spend shares of the ``summaries`` that have ``arm_spend`` (none: ``[]``), one row per benchmark,
    cost mode and curve, in that order.

    Each share is the mean over the runs that have it: a run without spend up to ``percent`` %, or
    whose seed has no misguessed plan, has none."""
    recorded = [summary for summary in summaries if summary.get("arm_spend")]
    misguessed = _misguessed_arms(recorded)
    shares: dict[tuple[str, str, str], list[list[float]]] = defaultdict(list)
    for summary in recorded:
        spend = np.asarray(summary["arm_spend"][f"{percent}pct"], dtype=np.float64)
        best = np.argsort(-np.asarray(summary["arm_means"]), kind="stable")[:top]
        cheap, dear = misguessed.get((summary["benchmark"], summary["seed"]), (None, None))
        plan = summary.get("cost_plan")
        curve = summary["label"] + (f", costs {plan}" if plan else "")
        key = (summary["benchmark"], summary["cost_mode"], curve)
        shares[key].append([_share(spend, cheap), _share(spend, dear), _share(spend, best)])
    rows = []
    for (benchmark, cost_mode, curve), values in sorted(shares.items()):
        cheap, dear, best = (_mean_share(column) for column in np.asarray(values).T)
        rows.append(SpendRow(benchmark, cost_mode, curve, len(values), percent, top, cheap, dear, best))
    return rows
