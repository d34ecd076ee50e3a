"""The observed cells of the score matrix, kept in the forms the ALS and the policy read.

:class:`ObservedMatrix` holds the ``M`` observed cells of a ``[K, N]`` score matrix
``X`` (``O [K, N]`` their 0/1 mask), updated one request at a time: their flat
indices ``k N + n`` in observation order (``[M]``, the order the dropout positions
refer to), the sparse CSR matrices ``O`` and ``O * X`` (``[K, N]``) and their
transposes (``[N, K]``) for the ALS's sparse-dense products, and dense ``values``
and ``observed`` tables (``[K, N]``) for the policy's cell scores.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch


class ObservedMatrix:
    """The observed cells of a ``[K, N]`` score matrix, in the forms the ALS reads.

    Kept up to date one request at a time (only the new cells are written or
    merged in, never the whole matrix rebuilt):

    * ``cells`` ``[M]`` flat indices ``k N + n`` in the order they were observed
      (so a warm-started fit can tell which cells are new), and the same cells'
      rows, columns and float32 scores (:meth:`observations`);
    * the cells sorted row-major and column-major with their scores, from which
      :meth:`csr` builds the sparse ``O``, ``O * X`` and their transposes;
    * ``values`` ``[K, N]`` float64 and ``observed`` ``[K, N]`` bool (numpy), for
      the policy's cell scores.
    """

    def __init__(self, n_arms: int, n_examples: int) -> None:
        if n_arms * n_examples >= 2**31:
            raise ValueError(
                f"UCB-E-LRF indexes cells in int32: K x N must be below 2**31, got {n_arms} x {n_examples}"
            )
        self.shape = (n_arms, n_examples)
        self.values = np.zeros((n_arms, n_examples))
        self.observed = np.zeros((n_arms, n_examples), dtype=bool)
        self._cells: list[torch.Tensor] = []
        self._lines: list[torch.Tensor] = []  # [2, b] rows and columns, one part per request
        self._scores: list[torch.Tensor] = []  # [b] float32
        self._row_major = _SortedCells(n_arms, n_examples)
        self._column_major = _SortedCells(n_examples, n_arms)

    def add(self, arm: int, examples: np.ndarray, scores: np.ndarray) -> None:
        """Record ``scores`` of ``arm`` on the unseen ``examples``."""
        seen = self.observed[arm, examples]
        if seen.any() or np.unique(examples).size != len(examples):
            repeated = np.asarray(examples)[seen] if seen.any() else examples
            raise ValueError(f"arm {arm}: examples observed twice ({np.asarray(repeated)[:10].tolist()})")
        self.values[arm, examples] = scores
        self.observed[arm, examples] = True
        columns = torch.as_tensor(examples, dtype=torch.long)
        rows = torch.full_like(columns, arm)
        scores32 = torch.tensor(scores, dtype=torch.float32)  # a copy: the caller may reuse its array
        self._cells.append(arm * self.shape[1] + columns)
        self._lines.append(torch.stack([rows, columns]))
        self._scores.append(scores32)
        self._row_major.add(rows, columns, scores32)
        self._column_major.add(columns, rows, scores32)

    @property
    def cells(self) -> torch.Tensor:
        """``[M]`` flat indices of the observed cells, oldest first."""
        return _joined(self._cells, torch.zeros(0, dtype=torch.long))

    def observations(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rows, columns (int64) and scores (float32) of the observed cells ``cells[positions]``.

        Read by position, not from the flat index: its int64 division is the slower op.
        """
        rows, columns = _joined(self._lines, torch.zeros(2, 0, dtype=torch.long)).index_select(1, positions)
        return rows, columns, _joined(self._scores, torch.zeros(0)).index_select(0, positions)

    def csr(self, transposed: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Sparse CSR ``O`` and ``O * X`` (``[K, N]``; ``[N, K]`` if ``transposed``)."""
        return (self._column_major if transposed else self._row_major).csr()

    def observed_row_sums(self, *tables: torch.Tensor) -> list[torch.Tensor]:
        """``[K]`` sums ``sum_n O[k, n] A[k, n]`` of each ``[K, N]`` table ``A``, read at the observed cells only."""
        cells = self._row_major
        rows = torch.repeat_interleave(torch.arange(self.shape[0]), cells.row_counts)
        sums = [torch.zeros(self.shape[0], dtype=table.dtype) for table in tables]
        return [
            row_sums.index_add_(0, rows, table.view(-1).index_select(0, cells.keys))
            for row_sums, table in zip(sums, tables, strict=True)
        ]


def _joined(parts: list[torch.Tensor], empty: torch.Tensor) -> torch.Tensor:
    """``parts`` concatenated along their last dimension, kept as the one part for the next call."""
    if len(parts) > 1:
        parts[:] = [torch.cat(parts, dim=-1)]
    return parts[0] if parts else empty


class _SortedCells:
    """Cells of an ``[R, C]`` matrix sorted by ``r C + c``, with their scores, merged in batch by batch.

    The columns and row starts are int32 (:class:`ObservedMatrix` has fewer than
    ``2^31`` cells): torch's sparse CSR product converts int64 indices to int32 at
    every call.
    """

    def __init__(self, n_rows: int, n_columns: int) -> None:
        self.shape = (n_rows, n_columns)
        self.keys = torch.zeros(0, dtype=torch.long)
        self.columns = torch.zeros(0, dtype=torch.int32)
        self.scores = torch.zeros(0)
        self.row_counts = torch.zeros(n_rows, dtype=torch.long)

    def add(self, rows: torch.Tensor, columns: torch.Tensor, scores: torch.Tensor) -> None:
        keys, order = (rows * self.shape[1] + columns).sort()
        # Position of each key in the merged order: its rank among the old keys plus among the new
        # (integer positions for both, not a mask of the old ones: a boolean index costs a nonzero).
        at = torch.searchsorted(self.keys, keys) + torch.arange(keys.numel())
        old_at = torch.searchsorted(keys, self.keys) + torch.arange(self.keys.numel())
        size = self.keys.numel() + keys.numel()
        # The columns are merged too: an int64 remainder of every key at each fit costs more.
        merged_keys, merged_columns, merged_scores = (
            torch.empty(size, dtype=old.dtype) for old in (self.keys, self.columns, self.scores)
        )
        merged_keys.index_copy_(0, old_at, self.keys).index_copy_(0, at, keys)
        merged_columns.index_copy_(0, old_at, self.columns).index_copy_(0, at, columns[order].int())
        merged_scores.index_copy_(0, old_at, self.scores).index_copy_(0, at, scores[order])
        self.keys, self.columns, self.scores = merged_keys, merged_columns, merged_scores
        self.row_counts.index_add_(0, rows, torch.ones_like(rows))

    def csr(self) -> tuple[torch.Tensor, torch.Tensor]:
        row_starts = torch.zeros(self.shape[0] + 1, dtype=torch.int32)
        torch.cumsum(self.row_counts, 0, out=row_starts[1:])
        ones = torch.ones(self.keys.numel())
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
            return tuple(
                torch.sparse_csr_tensor(row_starts, self.columns, data, self.shape, check_invariants=False)
                for data in (ones, self.scores)
            )
