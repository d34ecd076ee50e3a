"""Per-example evaluation costs of the arms (``cost=`` config group)."""

from __future__ import annotations

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


@dataclass(frozen=True)
class PriceCost:
    """Each example costs the arm's raw price (the benchmark's price table)."""

    name: str = "aware"

    def __call__(self, benchmark: Benchmark) -> np.ndarray:
        if benchmark.prices is None:
            raise ValueError(
                f"benchmark {benchmark.name!r} has no per-arm prices; use cost=unit or give "
                "benchmark.costs=<file>"
            )
        return benchmark.prices
