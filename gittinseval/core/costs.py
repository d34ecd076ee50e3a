"""Per-example evaluation costs of the arms (``cost=`` config group).

The unit of cost is the unit of lambda.  A policy's cost scale ``lam`` (e.g.
``policy.lam``) is in score units per unit of raw cost, as in the paper: under
``cost=aware`` the raw cost of an example is its arm's price in USD per 1M
tokens (the benchmark's price table), under ``cost=unit`` it is 1.  A live
run's costs are dollars per example; it converts them to the same raw unit,
``c_k = dollars_k * 1e6 / tokens_per_example`` (see
:class:`gittinseval.live.Evaluator`), so ``lam = 1e-4`` means the same in both
modes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gittinseval.data import Benchmark

__all__ = ["PriceCost", "UnitCost"]


@dataclass(frozen=True)
class UnitCost:
    """Every example of every arm costs 1: spend counts evaluated cells."""

    name: str = "unit"

    def __call__(self, benchmark: Benchmark) -> np.ndarray:
        return np.ones(benchmark.n_arms)

    def live_costs(self, expected_dollars: Sequence[float] | None) -> str:
        """Live: every example costs 1 and the budget counts examples."""
        return "unit"


@dataclass(frozen=True)
class PriceCost:
    """Each example costs the arm's raw price (the benchmark's price table)."""

    name: str = "aware"

    def __call__(self, benchmark: Benchmark) -> np.ndarray:
        if benchmark.prices is None:
            raise ValueError(
                f"benchmark {benchmark.name!r} has no per-arm prices; use cost=unit or give benchmark.costs=<file>"
            )
        return benchmark.prices

    def live_costs(self, expected_dollars: Sequence[float] | None) -> Sequence[float] | None:
        """Live: the task's expected dollars per example (``None``: ``score_fn`` reports them)."""
        return expected_dollars
