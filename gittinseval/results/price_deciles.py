"""Where the money went by price: the share of a run's spend on each tenth of its arms, cheapest to dearest.

For the runs that record each arm's spend and price (``record_arm_spend``: ``arm_spend`` and
``arm_prices``), an arm ``k`` of ``K`` is in price decile ``d_k = ceil(10 F(p_k))``, with
``F(p) = #{j : p_j <= p} / K`` the share of the arms priced at most ``p``: decile 1 holds the
cheapest tenth of the arms, decile 10 the dearest, and arms of one price share a decile (so a
decile may hold none).  The share of a run's spend up to ``p`` % of the exhaustive cost on decile
``d`` is ``sum_{d_k = d} s_k / sum_k s_k``.  Whether the dear arms are bought is then read off
the last deciles, and the decile of the best arm (the largest ``arm_means``) says whether they
had to be.

One row per benchmark, cost mode, curve label and ``lam`` (the sensitivity study's setting): the
mean share over its runs, per decile.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["DECILES", "PriceDecileRow", "price_decile_rows", "price_deciles"]

DECILES = 10


@dataclass(frozen=True)
class PriceDecileRow:
    """One benchmark, cost mode, curve ``label`` and ``lam`` (``None``: the policy has none) over ``runs`` runs:
    ``arms[d]`` arms in price decile ``d + 1`` with prices from ``lowest[d]`` to ``highest[d]`` (``nan``: no arm),
    and ``shares[d]``, the mean share of the spend up to ``percent`` % of the exhaustive cost on them (``nan``: no
    arm, or no run spent anything).  ``best_decile`` is the decile of the best arm."""

    benchmark: str
    cost_mode: str
    label: str
    lam: float | None
    runs: int
    percent: int
    arms: tuple[int, ...]
    lowest: tuple[float, ...]
    highest: tuple[float, ...]
    shares: tuple[float, ...]
    best_decile: int


def price_deciles(prices: Sequence[float]) -> np.ndarray:
    """``[K]`` the price decile (1 to 10) of each arm: ``ceil(10 F(p_k))`` (module docstring)."""
    prices = np.asarray(prices, dtype=np.float64)
    at_most = np.searchsorted(np.sort(prices), prices, side="right")
    return -(-DECILES * at_most // prices.size)  # the ceiling in integers, exact


def price_decile_rows(summaries: Sequence[dict], percent: int = 10) -> list[PriceDecileRow]:
    """The rows of the ``summaries`` that record each arm's spend and price (none: ``[]``), one per benchmark,
    cost mode, curve label and ``lam``, in that order.  The runs of one row must share their arms' prices."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for summary in summaries:
        if summary.get("arm_spend") and summary.get("arm_prices"):
            groups[(summary["benchmark"], summary["cost_mode"], summary["label"], summary.get("lam"))].append(summary)
    rows = []
    for (benchmark, cost_mode, label, lam), members in sorted(groups.items(), key=_order):
        prices = np.asarray(members[0]["arm_prices"], dtype=np.float64)
        if any(not np.array_equal(summary["arm_prices"], prices) for summary in members):
            raise ValueError(f"the runs of {label} on {benchmark} ({cost_mode} cost) have different arm prices: "
                             "their price deciles do not compare")
        deciles = price_deciles(prices)
        shares = []
        for summary in members:
            spend = np.asarray(summary["arm_spend"][f"{percent}pct"], dtype=np.float64)
            total = spend.sum()
            if total > 0:
                shares.append([spend[deciles == d].sum() / total for d in range(1, DECILES + 1)])
        means = np.mean(shares, axis=0) if shares else np.full(DECILES, np.nan)
        members_of = [prices[deciles == d] for d in range(1, DECILES + 1)]
        rows.append(PriceDecileRow(
            benchmark=benchmark,
            cost_mode=cost_mode,
            label=label,
            lam=lam,
            runs=len(members),
            percent=percent,
            arms=tuple(int(group.size) for group in members_of),
            lowest=tuple(float(group.min()) if group.size else math.nan for group in members_of),
            highest=tuple(float(group.max()) if group.size else math.nan for group in members_of),
            shares=tuple(float(mean) if group.size else math.nan for mean, group in zip(means, members_of,
                                                                                         strict=True)),
            best_decile=int(deciles[int(np.argmax(members[0]["arm_means"]))]),
        ))
    return rows


def _order(item: tuple[tuple, list[dict]]) -> tuple:
    """Benchmark, cost mode and label in order, then ``lam`` from the smallest (a policy without one first)."""
    benchmark, cost_mode, label, lam = item[0]
    return benchmark, cost_mode, label, -math.inf if lam is None else lam
