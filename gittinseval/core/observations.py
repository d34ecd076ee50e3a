"""What a run has observed, cell by cell: the data every certificate model reads."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from gittinseval.utils.validation import positive_int

__all__ = ["ObservedCells"]


class ObservedCells:
    """The scores a run has seen, kept by cell, with each arm's running sums.

    A certificate about the full-benchmark means ``Zbar_k = (1/N) sum_j Z_kj`` may need
    more than each arm's sum and count: which examples were scored (two arms scored on
    the same examples are compared on them), the spread of continuous scores, and the
    arms' configuration attributes.  This object holds all of it; the drivers (the
    simulator from a matrix, the live evaluator from its ledger) feed it one told batch at
    a time through :meth:`add`.

    Attributes (shapes ``[K, N]`` or ``[K]``):
        values: each scored cell's score, ``0`` where unseen (read with ``seen``).
        seen: whether the cell is scored.
        batch: the 0-based batch in which the cell was scored, ``-1`` where unseen: what the run had seen
            after any earlier batch is :meth:`up_to` that batch.
        score_sum: ``R_k = sum_j seen_kj Z_kj``.
        score_sq_sum: ``Q_k = sum_j seen_kj Z_kj^2`` (the spread of continuous scores).
        n_seen: ``n_k = sum_j seen_kj``.
        binary: whether every score is 0 or 1.
        features: ``[K, D]`` integer codes of each arm's configuration attributes (model,
            template, ...), or ``None`` (the arms are exchangeable).
    """

    def __init__(self, n_arms: int, n_examples: int, *, binary: bool, features: ArrayLike | None = None) -> None:
        n_arms = positive_int("n_arms", n_arms)
        self.n_examples = positive_int("n_examples", n_examples)
        self.binary = bool(binary)
        self.values = np.zeros((n_arms, self.n_examples))
        self.seen = np.zeros((n_arms, self.n_examples), dtype=bool)
        self.batch = np.full((n_arms, self.n_examples), -1, dtype=np.int32)
        self.n_batches = 0
        self.score_sum = np.zeros(n_arms)
        self.score_sq_sum = np.zeros(n_arms)
        self.n_seen = np.zeros(n_arms, dtype=np.int64)
        if features is not None:
            features = np.asarray(features, dtype=np.int64)
            if features.ndim != 2 or features.shape[0] != n_arms:
                raise ValueError(f"features has {features.shape[0] if features.ndim else 0} rows for {n_arms} arms")
        self.features = features

    @property
    def n_arms(self) -> int:
        return self.score_sum.size

    def add(self, arm: int, examples: ArrayLike, scores: ArrayLike) -> None:
        """Record the ``[b]`` ``scores`` of arm ``arm`` on ``examples`` (none of them seen before)."""
        examples = np.asarray(examples, dtype=np.int64)
        scores = np.asarray(scores, dtype=np.float64)
        if examples.shape != scores.shape or examples.ndim != 1:
            raise ValueError(f"arm {arm}: {scores.size} scores for {examples.size} examples")
        if self.seen[arm, examples].any():
            raise ValueError(f"arm {arm}: examples {examples[self.seen[arm, examples]][:5].tolist()} are seen already")
        self.values[arm, examples] = scores
        self.seen[arm, examples] = True
        self.batch[arm, examples] = self.n_batches
        self.n_batches += 1
        self.score_sum[arm] += float(scores.sum())
        self.score_sq_sum[arm] += float(scores @ scores)
        self.n_seen[arm] += examples.size

    def up_to(self, n_batches: int) -> ObservedCells:
        """What the run had observed after its first ``n_batches`` batches (a new object; ``O(K N)``)."""
        if not 0 <= n_batches <= self.n_batches:
            raise ValueError(f"n_batches must be in [0, {self.n_batches}], got {n_batches}")
        earlier = ObservedCells(self.n_arms, self.n_examples, binary=self.binary, features=self.features)
        earlier.seen = self.seen & (self.batch < n_batches)
        earlier.batch = np.where(earlier.seen, self.batch, -1).astype(np.int32)
        earlier.values = np.where(earlier.seen, self.values, 0.0)
        earlier.score_sum = earlier.values.sum(axis=1)
        earlier.score_sq_sum = (earlier.values**2).sum(axis=1)
        earlier.n_seen = earlier.seen.sum(axis=1).astype(np.int64)
        earlier.n_batches = n_batches
        return earlier
