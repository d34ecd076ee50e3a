"""The :class:`Benchmark` container: a response matrix with its arms' metadata."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from gittinseval.utils.validation import positive_finite_values

__all__ = ["Benchmark", "validate_matrix", "validate_prices"]


def validate_matrix(scores: Any, source: str) -> np.ndarray:
    """A ``[K, N]`` float64 score matrix in [0, 1], or an error naming ``source``."""
    try:
        matrix = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{source}: scores are not numeric ({error})") from error
    if matrix.ndim != 2 or matrix.shape[0] < 1 or matrix.shape[1] < 1:
        raise ValueError(f"{source}: expected a non-empty 2-D arms x examples matrix, got shape {matrix.shape}")
    finite = np.isfinite(matrix)
    if not finite.all():
        rows = np.flatnonzero(~finite.all(axis=1))
        raise ValueError(
            f"{source}: the matrix has NaN or infinite scores in {rows.size} rows "
            f"(rows {rows[:20].tolist()}{' ...' if rows.size > 20 else ''})"
        )
    outside = (matrix < 0) | (matrix > 1)
    if outside.any():
        rows = np.flatnonzero(outside.any(axis=1))
        raise ValueError(
            f"{source}: scores must lie in [0, 1]; rows {rows[:20].tolist()} have values in "
            f"[{matrix.min():g}, {matrix.max():g}]"
        )
    return matrix


def validate_prices(prices: Any, n_arms: int, source: str) -> np.ndarray:
    """A ``[K]`` float64 vector of positive finite per-example prices."""
    vector = np.asarray(prices, dtype=np.float64).reshape(-1)
    if vector.size != n_arms:
        raise ValueError(
            f"{source}: {vector.size} {'price' if vector.size == 1 else 'prices'} for {n_arms} arms; "
            "give one price per arm, in the arms' order"
        )
    return positive_finite_values(vector, f"{source}: costs", item="arms")


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only copy of ``array`` (the caller's array is left as it is)."""
    frozen = np.array(array, copy=True)
    frozen.setflags(write=False)
    return frozen


@dataclass(frozen=True)
class Benchmark:
    """A complete response matrix and what is known about its arms.

    Attributes:
        name: identifier used in summaries, e.g. ``"mmlu/moral_scenarios"``.
        scores: ``[K, N]`` float64 scores in [0, 1].
        prices: ``[K]`` raw per-example price of each arm (USD per 1M tokens for
            the bundled data), or ``None`` if the benchmark has no prices.
        cell_costs: ``[K, N]`` raw cost of each cell, where each example of an arm
            costs its own (``cost=per_cell``), or ``None``.  Its row means are the
            arms' expected costs: ``prices`` defaults to them, and must equal them
            if both are given.
        arm_names: ``K`` readable arm names.
        features: ``[K, D]`` int64 categorical configuration codes.
        specific_prior: ``(mean, var)`` of the benchmark's data-specific prior,
            or ``None``.
        default_batch_size: the paper's batch size for this benchmark, used by
            policies configured with ``batch_size=None``; ``None`` if it has none.
        source, license: provenance of the data.
        stand_in: true when the matrix is synthesised rather than released data.
        details: further facts (subject, difficulty, size bucket, ...).
    """

    name: str
    scores: np.ndarray = field(repr=False)
    prices: np.ndarray | None = field(default=None, repr=False)
    cell_costs: np.ndarray | None = field(default=None, repr=False)
    arm_names: tuple[str, ...] = field(default=(), repr=False)
    features: np.ndarray | None = field(default=None, repr=False)
    specific_prior: tuple[float, float] | None = None
    default_batch_size: int | None = None
    source: str = ""
    license: str = ""
    stand_in: bool = False
    details: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        # Loaders cache benchmarks, so one in-place change would corrupt every later
        # run in the process: the arrays are private read-only copies.
        scores = _read_only(validate_matrix(self.scores, self.name))
        object.__setattr__(self, "scores", scores)
        n_arms = scores.shape[0]
        if self.cell_costs is not None:
            cells = np.asarray(self.cell_costs, dtype=np.float64)
            if cells.shape != scores.shape:
                raise ValueError(f"{self.name}: cell costs have shape {cells.shape}, the scores {scores.shape}")
            cells = positive_finite_values(cells.reshape(-1), f"{self.name}: cell costs", item="cells")
            cells = _read_only(cells.reshape(scores.shape))
            object.__setattr__(self, "cell_costs", cells)
            expected = cells.mean(axis=1)
            if self.prices is None:
                object.__setattr__(self, "prices", expected)
            elif not np.allclose(np.asarray(self.prices, dtype=np.float64), expected, rtol=1e-9, atol=0):
                raise ValueError(f"{self.name}: prices must be the row means of the cell costs (each arm's "
                                 "expected cost per example)")
        if self.prices is not None:
            prices = validate_prices(self.prices, n_arms, f"{self.name} costs")
            object.__setattr__(self, "prices", _read_only(prices))
        names = tuple(self.arm_names) or tuple(f"arm_{k}" for k in range(n_arms))
        if len(names) != n_arms:
            raise ValueError(f"{self.name}: {len(names)} arm names for {n_arms} arms")
        object.__setattr__(self, "arm_names", names)
        features = np.arange(n_arms)[:, None] if self.features is None else np.asarray(self.features)
        if features.ndim != 2 or features.shape[0] != n_arms:
            raise ValueError(f"{self.name}: features must have shape [{n_arms}, D], got {features.shape}")
        object.__setattr__(self, "features", _read_only(features.astype(np.int64)))
        size = self.default_batch_size
        if size is not None and (isinstance(size, bool) or int(size) != size or not 1 <= size <= self.n_examples):
            raise ValueError(f"{self.name}: default_batch_size must be an integer in [1, N], got {size!r}")

    @property
    def n_arms(self) -> int:
        return self.scores.shape[0]

    @property
    def n_examples(self) -> int:
        return self.scores.shape[1]

    @cached_property
    def row_means(self) -> np.ndarray:
        return _read_only(self.scores.mean(axis=1))

    @cached_property
    def binary(self) -> bool:
        return bool(np.all((self.scores == 0) | (self.scores == 1)))
