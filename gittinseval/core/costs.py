"""Per-example evaluation costs of the arms (``cost=`` config group).

The unit of cost is the unit of lambda.  A policy's cost scale ``lam`` (e.g.
``policy.lam``) is in score units per unit of raw cost, as in the paper: under
``cost=aware`` the raw cost of an example is its arm's price in USD per 1M
tokens (the benchmark's price table), under ``cost=unit`` it is 1.  A live
run's costs are dollars per example; it converts them to the same raw unit,
``c_k = dollars_k * 1e6 / tokens_per_example`` (see
:class:`gittinseval.live.Evaluator`), so ``lam = 1e-4`` means the same in both
modes.

Every cost mode gives each arm's expected raw cost per example (``mode(benchmark)``,
``[K]``), with which the policy plans, and the costs a simulation charges
(:meth:`cell_costs`): ``None`` charges each example its arm's expected cost, a
``[K, N]`` matrix charges each cell its own, as a live run charges each call's usage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gittinseval.data import Benchmark

__all__ = ["CellCost", "PriceCost", "UnitCost"]


@dataclass(frozen=True)
class UnitCost:
    """Every example of every arm costs 1: spend counts evaluated cells."""

    name: str = "unit"

    def __call__(self, benchmark: Benchmark) -> np.ndarray:
        return np.ones(benchmark.n_arms)

    def cell_costs(self, benchmark: Benchmark) -> None:
        """Charged per arm: every cell costs 1."""
        return None

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
                f"benchmark {benchmark.name!r} has no per-arm prices; use cost=unit or give "
                "benchmark.costs=<prices file>"
            )
        return benchmark.prices

    def cell_costs(self, benchmark: Benchmark) -> None:
        """Charged per arm: every cell of arm ``k`` costs ``prices[k]``."""
        return None

    def live_costs(self, expected_dollars: Sequence[float] | None) -> Sequence[float] | None:
        """Live: the task's expected dollars per example (``None``: ``score_fn`` reports them)."""
        return expected_dollars


@dataclass(frozen=True)
class CellCost:
    """Each cell costs its own raw cost (the benchmark's ``cell_costs``); policies plan with each arm's mean.

    A simulation charges ``sum_n cell_costs[k, n]`` over the examples ``n`` of a batch
    of arm ``k``, while the policy is told ``prices[k] = mean_n cell_costs[k, n]``: it
    plans with the expected cost, as a live run does before a reply's length is known.
    The exhaustive cost ``N * sum_k prices[k]`` is the sum of all cells, so budgets are
    the same fractions as under ``cost=aware``.
    """

    name: str = "per_cell"

    def __call__(self, benchmark: Benchmark) -> np.ndarray:
        return PriceCost()(benchmark) if benchmark.cell_costs is None else benchmark.prices

    def cell_costs(self, benchmark: Benchmark) -> np.ndarray:
        """``[K, N]`` raw cost of each cell."""
        if benchmark.cell_costs is None:
            raise ValueError(
                f"benchmark {benchmark.name!r} has no per-cell costs; use cost=aware or cost=unit "
                "(benchmark=gsm8k_zeroeval has them)"
            )
        return benchmark.cell_costs

    def live_costs(self, expected_dollars: Sequence[float] | None) -> Sequence[float] | None:
        """Live: the task's expected dollars per example; every call is charged its own usage anyway."""
        return expected_dollars
