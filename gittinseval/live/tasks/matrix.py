"""The matrix adapter: a live task that replays a complete response matrix, with a latency per call.

A stand-in for an LLM endpoint with known answers: the policy sees what it would live (costs in dollars,
calls that take time), and a run's scores are the matrix's, so it can be checked against the simulator.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from gittinseval.data import Benchmark
from gittinseval.live.task import TOKENS_PER_MILLION, LiveTask

__all__ = ["MatrixScorer", "matrix_task"]


class MatrixScorer:
    """``score_fn`` that reads a complete ``[K, N]`` response matrix.

    ``scorer(arm, example_ids)`` sleeps ``latency`` seconds (a stand-in for an
    LLM call) and returns ``scores[row, example_ids]``, where ``row`` is ``arm``
    itself for an integer arm, or its position in ``arm_names``.
    """

    def __init__(self, scores: np.ndarray, latency: float = 0.0, arm_names: Sequence[str] = ()) -> None:
        if not latency >= 0:
            raise ValueError(f"latency must be non-negative seconds, got {latency!r}")
        self.scores = np.asarray(scores, dtype=np.float64)
        self.latency = float(latency)
        self.rows = {name: row for row, name in enumerate(arm_names)}

    def identity(self) -> dict[str, Any]:
        """What makes a score: the matrix (by its SHA-256) and the arms' rows; not the latency."""
        digest = hashlib.sha256(str(self.scores.shape).encode() + self.scores.tobytes()).hexdigest()
        return {"scores_sha256": digest, "arm_names": list(self.rows)}

    def __call__(self, arm: int | str, examples: Sequence[int]) -> np.ndarray:
        if self.latency:
            time.sleep(self.latency)
        row = self.rows[arm] if isinstance(arm, str) else int(arm)
        return self.scores[row, np.asarray(examples, dtype=np.int64)]


def matrix_task(
    benchmark: Benchmark, latency: float = 0.0, tokens_per_example: float = 1000.0, name: str | None = None
) -> LiveTask:
    """A live task that replays ``benchmark``: arms are its arm names, examples its ids.

    An example of arm ``k`` costs ``price_k * tokens_per_example / 1e6`` dollars
    (the bundled prices are USD per 1M tokens), so the policy's raw cost
    ``dollars * 1e6 / tokens_per_example`` is the price again; without prices
    the task has no costs.
    """
    if not tokens_per_example > 0:
        raise ValueError(f"tokens_per_example must be positive, got {tokens_per_example!r}")
    # Dollars per raw unit, then the product: the evaluator divides by the same
    # factor, so the policy sees the prices bit for bit (for 1000 tokens).
    dollars_per_unit = tokens_per_example / TOKENS_PER_MILLION
    costs = None if benchmark.prices is None else benchmark.prices * dollars_per_unit
    return LiveTask(
        arms=list(benchmark.arm_names),
        examples=list(range(benchmark.n_examples)),
        score_fn=MatrixScorer(benchmark.scores, latency, benchmark.arm_names),
        costs=None if costs is None else costs.tolist(),
        tokens_per_example=float(tokens_per_example),
        binary=benchmark.binary,
        benchmark=benchmark,
        name=benchmark.name.replace("/", "_") if name is None else name,
    )
