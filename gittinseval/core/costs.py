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
A simulated policy plans with ``mode(benchmark)`` unless the mode's :meth:`plan` gives
it other costs to start from (a guess, :class:`LearnedCellCost`), which the run learns from
the cells charged by its ``learn_costs`` (:class:`~gittinseval.core.session.RunSettings`).
A mode's ``guesses_costs`` says whether it plans with a guess, and so whether ``learn_costs``
can change its runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from gittinseval.core.cost_learning import CostPlan
from gittinseval.data import Benchmark
from gittinseval.utils.validation import ConfigError, non_negative_float, non_negative_int, positive_float

__all__ = ["CellCost", "LearnedCellCost", "PriceCost", "UnitCost"]


@dataclass(frozen=True)
class UnitCost:
    """Every example of every arm costs 1: spend counts evaluated cells."""

    name: str = "unit"
    guesses_costs: ClassVar[bool] = False

    def __call__(self, benchmark: Benchmark) -> np.ndarray:
        return np.ones(benchmark.n_arms)

    def cell_costs(self, benchmark: Benchmark) -> None:
        """Charged per arm: every cell costs 1."""
        return None

    def live_costs(self, expected_dollars: Sequence[float] | None) -> str:
        """Live: every example costs 1 and the budget counts examples."""
        return "unit"

    def plan(self, benchmark: Benchmark, seed: int) -> None:
        """Policies plan with the expected costs, as known."""
        return None


@dataclass(frozen=True)
class PriceCost:
    """Each example costs the arm's raw price (the benchmark's price table)."""

    name: str = "aware"
    guesses_costs: ClassVar[bool] = False

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

    def plan(self, benchmark: Benchmark, seed: int) -> None:
        """Policies plan with the expected costs, as known."""
        return None


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
    guesses_costs: ClassVar[bool] = False

    def __call__(self, benchmark: Benchmark) -> np.ndarray:
        return PriceCost()(benchmark) if benchmark.cell_costs is None else benchmark.prices

    def cell_costs(self, benchmark: Benchmark) -> np.ndarray:
        """``[K, N]`` raw cost of each cell."""
        if benchmark.cell_costs is None:
            # A benchmark that could have them says why it has none (e.g. a price rule without them).
            reason = benchmark.details.get("no_cell_costs")
            raise ValueError(
                f"benchmark {benchmark.name!r} has no per-cell costs" + (f" ({reason})" if reason else "")
                + "; use cost=aware or cost=unit (benchmark=gsm8k_zeroeval, crux_zeroeval and math_l5_zeroeval "
                "have them)"
            )
        return benchmark.cell_costs

    def live_costs(self, expected_dollars: Sequence[float] | None) -> Sequence[float] | None:
        """Live: the task's expected dollars per example; every call is charged its own usage anyway."""
        return expected_dollars

    def plan(self, benchmark: Benchmark, seed: int) -> CostPlan | None:
        """Policies plan with the expected costs, as known."""
        return None


@dataclass(frozen=True)
class LearnedCellCost(CellCost):
    """:class:`CellCost`, with the policy starting from a guess of each arm's expected cost, which the run learns.

    The budget and the charges are those of ``cost=per_cell`` (the true expected costs and
    each cell's own cost).  The policy starts from a guess: each arm's true expected cost,
    except for a share ``misguessed_share`` of the arms, drawn at random for each run seed
    ``s`` (``numpy.random.default_rng((misguess_seed, s))``), whose guess is their cost
    times ``misguess_factor`` or divided by it (each way with probability 1/2).  The run
    learns every arm's cost from the cells it is charged by its ``learn_costs``
    (:class:`~gittinseval.core.session.RunSettings`; ``learn_costs=null``: the policy keeps the guess).

    Args:
        misguess_factor: ``f >= 1`` (1: the guess is the true expected cost of every arm).
        misguessed_share: the share of the arms guessed wrong, in ``[0, 1]``; rounded to a
            number of arms.
        misguess_seed: with the run's seed, the seed of which arms are misguessed and how.
    """

    misguess_factor: float = 1.0
    misguessed_share: float = 0.5
    misguess_seed: int = 0
    guesses_costs: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if positive_float("misguess_factor", self.misguess_factor) < 1.0:
            raise ConfigError(f"misguess_factor must be at least 1, got {self.misguess_factor!r}")
        if not 0.0 <= non_negative_float("misguessed_share", self.misguessed_share) <= 1.0:
            raise ConfigError(f"misguessed_share must be in [0, 1], got {self.misguessed_share!r}")
        non_negative_int("misguess_seed", self.misguess_seed)

    @property
    def plan_name(self) -> str:
        """How the costs are guessed, as the run's summary records it (``cost_plan``, with ``", learned"`` when the
        run learns them) and curve labels show it."""
        factor, share = self.misguess_factor, self.misguessed_share
        return "true" if factor == 1.0 or share == 0.0 else f"{factor:g}x off for {share:.0%}"

    def guess(self, benchmark: Benchmark, seed: int) -> np.ndarray:
        """``[K]`` the guessed costs per example of a run of seed ``seed``."""
        expected = self(benchmark)
        rng = np.random.default_rng((self.misguess_seed, seed))
        misguessed = rng.permutation(expected.size)[: round(self.misguessed_share * expected.size)]
        factors = np.ones(expected.size)
        factors[misguessed] = self.misguess_factor ** rng.choice((-1.0, 1.0), size=misguessed.size)
        return expected * factors

    def plan(self, benchmark: Benchmark, seed: int) -> CostPlan:
        """The guess of a run of seed ``seed``."""
        return CostPlan(self.plan_name, self.guess(benchmark, seed))
