"""UCB-E-LRF: UCB-E on a low-rank ensemble completion of the score matrix (BanditEval)."""

from __future__ import annotations

import functools
import math
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np
import torch

from baselines._common import RunningMeans
from gittinseval.core.protocol import (
    EvaluationProblem,
    Policy,
    Request,
    argmax_by_priority,
    check_batch_size,
)
from gittinseval.utils.validation import non_negative_float, positive_float, positive_int

__all__ = ["EnsembleFit", "FitDraws", "LowRankEnsemble", "LRFPolicy", "ObservedMatrix"]

PAIRINGS = ("reference", "independent")
DROPOUT_DRAWS = ("stream", "observed")


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


def _bernoulli_positions(n_trials: int, probability: float, generator: torch.Generator) -> torch.Tensor:
    """Ascending positions in ``[0, n_trials)`` of the successes of independent Bernoulli(``probability``) trials.

    Drawn as their gaps: the trial after a success, or the first, waits a
    Geometric(``probability``) number of trials ``{1, 2, ...}`` for the next success,
    independently of the past (the trials are memoryless), so the cumulative sums of
    i.i.d. geometric gaps are the successes of ``n_trials`` i.i.d. trials: about
    ``n_trials * probability`` float64 draws instead of ``n_trials`` uniforms.  The
    gaps are drawn in chunks (of the expected number still to come plus one standard
    deviation) until one passes the last trial; the positions are those of one long
    sequence of gaps, whatever the chunks.
    """
    chunks, last = [torch.zeros(0, dtype=torch.float64)], -1.0
    while probability > 0 and last < n_trials - 1:
        expected = (n_trials - 1 - last) * probability
        gaps = torch.empty(int(expected + math.sqrt(expected)) + 1, dtype=torch.float64)
        chunks.append(gaps.geometric_(probability, generator=generator).cumsum_(0).add_(last))
        last = float(chunks[-1][-1])
    positions = torch.cat(chunks)
    return positions[: int(torch.searchsorted(positions, float(n_trials)))].long()


@dataclass
class FitDraws:
    """The random draws of one fit from scratch, in the reference's order and dtype.

    ``u [E, K, r]`` and ``v [E, N, r]`` standard normal, then one float32 uniform
    per member and cell, ``torch.rand(E, K, N)``.  Uniform ``i`` is
    ``(w_i mod 2^24) 2^-24`` for the generator's ``i``-th 32-bit word, so ``u_i < p``
    is read as ``(w_i mod 2^24) < threshold = ceil(p_32 2^24)``, exactly (``p_32``:
    ``p`` in float32, as the reference compares).

    The words are kept raw, two to an int64 (``words[j]`` holds word ``2j`` in its
    high and ``2j + 1`` in its low half, as ``random_()`` draws them; ``4 E K N``
    bytes), because the draws are made before the fit knows all its observed cells.
    The dropout of the cells already observed when they were drawn, ``known_cells
    [M0]``, was read while each member's words were in cache (``known_dropped [E, M0]``);
    :meth:`dropout_of` reads only the cells observed since from ``words``.
    """

    u: torch.Tensor
    v: torch.Tensor
    words: torch.Tensor
    threshold: int
    n_cells: int
    known_cells: torch.Tensor
    known_dropped: torch.Tensor

    def dropped_at(self, cells: torch.Tensor, members: torch.Tensor) -> torch.Tensor:
        """``[len(members), M]`` bool: whether each member's uniform at each of ``cells`` fell below ``p``."""
        # Read as int32, word g sits at g ^ 1 (the high half of a little-endian int64 comes second).
        positions = (members[:, None] * self.n_cells + cells).bitwise_xor_(1)
        words = self.words.view(torch.int32)[positions.view(-1)].view(positions.shape)
        return words.bitwise_and_(2**24 - 1) < self.threshold

    def dropout_of(self, cells: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(members, positions)`` of the dropped observed cells ``cells[positions]``, ``cells [M]`` flat ``k N + n``.

        Ordered by member, then as in ``cells``: the order in which the ALS
        subtracts their float32 terms.
        """
        all_members = torch.arange(self.u.shape[0])
        known = self.known_cells.numel()
        if cells.numel() >= known and torch.equal(cells[:known], self.known_cells):
            dropped = torch.cat([self.known_dropped, self.dropped_at(cells[known:], all_members)], dim=1)
        else:
            dropped = self.dropped_at(cells, all_members)
        return dropped.nonzero(as_tuple=True)


@dataclass
class EnsembleFit:
    """A fitted ensemble: factors ``u [E, K, r]``, ``v [E, N, r]`` (float32) and its dropout.

    Member ``e`` left out the observed cell ``cells[dropped_positions[i]]`` of the
    :class:`ObservedMatrix` it was fitted on for every ``i`` with
    ``dropped_members[i] == e``; the dropout covers its first ``n_cells`` cells.
    """

    u: torch.Tensor
    v: torch.Tensor
    dropped_members: torch.Tensor
    dropped_positions: torch.Tensor
    n_cells: int

    def moments(self, out: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Ensemble mean and standard deviation ``[K, N]`` (float64) of ``U_e V_e^T`` (``E - 1`` denominator),
        written into ``out`` if given."""
        return _ensemble_moments(self.u.double(), self.v.double(), out)


class LowRankEnsemble:
    """Ensemble of ridge alternating-least-squares factorisations ``X ~ U_e V_e^T``.

    Member ``e`` sees the observed cells minus its own random 5% dropout ``D_e``,
    ``O_e = O & ~D_e``, and alternates (``V`` first) for ``iterations`` rounds

        V[e, n] = (sum_k O_e[k,n] u u^T + w I)^{-1} sum_k O_e[k,n] X[k,n] u,   u = U[p_V(e,n), k],
        U[e, k] = (sum_n O_e[k,n] v v^T + w I)^{-1} sum_n O_e[k,n] X[k,n] v,   v = V[p_U(e,k), n],

    from ``U, V ~ N(0, 1)``.  ``pairing="independent"`` fits every member against
    its own factors, ``p(e, .) = e``.  ``pairing="reference"`` reproduces the
    reference implementation, which flattens members and columns into one batch
    and tiles the fixed factor member-major, so that column ``n`` of member ``e``
    is fitted against member ``p_V(e, n) = (e N + n) mod E`` and row ``k`` against
    member ``p_U(e, k) = (e K + k) mod E``.  That mixing pulls the members towards
    each other and shrinks the ensemble spread; it is what the paper's LRF ran.

    The normal equations of all members come from two sparse-dense products per
    side over the ``M`` observed cells,

        G = O^T (u u^T)   [N, E r^2],     T = (O * X)^T u   [N, E r]   (V side;
        the U side uses O and v),

    read at the partner member ``p_V(e, n)``, minus the terms of the dropped
    cells, which are few (5% of ``E M``) and subtracted
    (:class:`_SideSolver`).  The products run on torch's threads; nothing loops
    over members, rows or columns.

    The factors are float32, as in the reference; scores lie in ``[0, 1]`` and the
    ridge weight keeps every ``r x r`` system well conditioned.  Random draws of
    :meth:`fit`, all from the given ``torch.Generator``: ``U [E, K, r]`` and
    ``V [E, N, r]`` standard normal, then the dropout, which ``dropout_draws`` draws
    in one of two ways:

    * ``"stream"`` (parity with the reference): the uniforms ``[E, K, N]`` of every
      member and cell, observed or not, in the reference's order and dtype, of
      which only the ``E M`` on observed cells are read (a ``4 E K N``-byte draw);
    * ``"observed"``: only for the ``E M`` (member, observed cell) pairs, drawn as
      the gaps between the dropped ones (:func:`_bernoulli_positions`, about
      ``drop_probability E M`` geometric draws).

    Either way each member drops each observed cell independently with probability
    ``drop_probability``, and the fit from the factors and the dropout is the same
    (:meth:`_alternate`); the two modes differ only in which random numbers
    decide the dropout.  :meth:`refit` instead starts from a previous fit and
    draws only the dropout of the cells observed since, ``[E, new cells]``.
    """

    def __init__(
        self,
        rank: int = 1,
        ensemble_size: int = 64,
        ridge: float = 0.1,
        drop_probability: float = 0.05,
        iterations: int = 10,
        pairing: str = "reference",
        dropout_draws: str = "observed",
    ) -> None:
        for key, value in (("rank", rank), ("ensemble_size", ensemble_size), ("iterations", iterations)):
            positive_int(key, value)
        if ensemble_size < 2:
            raise ValueError(f"ensemble_size must be at least 2 for an ensemble spread, got {ensemble_size}")
        ridge = positive_float("ridge", ridge)
        if not (0 <= drop_probability < 1):
            raise ValueError(f"drop_probability must be in [0, 1), got {drop_probability!r}")
        if pairing not in PAIRINGS:
            raise ValueError(f"pairing must be one of {PAIRINGS}, got {pairing!r}")
        if dropout_draws not in DROPOUT_DRAWS:
            raise ValueError(f"dropout_draws must be one of {DROPOUT_DRAWS}, got {dropout_draws!r}")
        self.rank = int(rank)
        self.ensemble_size = int(ensemble_size)
        self.ridge = float(ridge)
        self.drop_probability = float(drop_probability)
        self.iterations = int(iterations)
        self.pairing = pairing
        self.dropout_draws = dropout_draws

    def fit(self, matrix: ObservedMatrix, generator: torch.Generator) -> EnsembleFit:
        """Fit from random factors and a fresh dropout (drawn as ``dropout_draws`` says), ``iterations`` ALS rounds."""
        if self.dropout_draws == "stream":
            return self.fit_drawn(self.draw(*matrix.shape, generator), matrix)
        u, v = self._initial_factors(*matrix.shape, generator)
        cells = matrix.cells
        fit = EnsembleFit(u, v, *self._dropout(cells.numel(), generator), cells.numel())
        return self._alternate(fit, matrix, self.iterations)

    def fit_drawn(self, draws: FitDraws, matrix: ObservedMatrix) -> EnsembleFit:
        """:meth:`fit` in ``"stream"`` mode with its random draws made beforehand by :meth:`draw`."""
        cells = matrix.cells
        fit = EnsembleFit(draws.u, draws.v, *draws.dropout_of(cells), cells.numel())
        return self._alternate(fit, matrix, self.iterations)

    def _initial_factors(
        self, n_arms: int, n_examples: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``U [E, K, r]``, then ``V [E, N, r]``, standard normal: the first draws of a fit."""
        u = torch.randn(self.ensemble_size, n_arms, self.rank, generator=generator)
        v = torch.randn(self.ensemble_size, n_examples, self.rank, generator=generator)
        return u, v

    def _dropout(self, n_cells: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``(members, positions)`` dropped from ``M = n_cells`` observed cells, each of the ``E M`` pairs
        with ``drop_probability``.

        The pairs are the trials ``e M + i`` (member ``e``, ``i``-th cell), drawn by
        :func:`_bernoulli_positions`; they come by member, then by position.
        """
        positions = _bernoulli_positions(self.ensemble_size * n_cells, self.drop_probability, generator)
        # The positions ascend, so each member's are one run: cut them at e M (no int64 division).
        starts = torch.searchsorted(positions, torch.arange(self.ensemble_size + 1) * n_cells)
        members = torch.repeat_interleave(torch.arange(self.ensemble_size), starts.diff())
        return members, positions.sub_(members * n_cells)

    def draw(
        self,
        n_arms: int,
        n_examples: int,
        generator: torch.Generator,
        known_cells: torch.Tensor | None = None,
        words: torch.Tensor | None = None,
    ) -> FitDraws:
        """The draws of one fit on a ``[K, N]`` matrix, from ``generator``.

        ``known_cells`` (flat, in observation order): cells whose dropout is read at
        once, member by member, while the member's words are in cache.  ``words``: an
        int64 buffer of ``ceil(E K N / 2)`` to draw into (a fresh one costs page faults).
        """
        members = self.ensemble_size
        u, v = self._initial_factors(n_arms, n_examples, generator)
        n_cells = n_arms * n_examples
        known_cells = torch.zeros(0, dtype=torch.long) if known_cells is None else known_cells
        pairs, odd_word = divmod(members * n_cells, 2)
        threshold = math.ceil(float(np.float32(self.drop_probability)) * 2**24)
        if words is None:
            words = torch.empty(pairs + odd_word, dtype=torch.int64)
        elif words.shape != (pairs + odd_word,) or words.dtype != torch.int64:
            raise ValueError(f"words must be an int64 buffer of {pairs + odd_word}, got {words.dtype} {words.shape}")
        known_dropped = torch.empty(members, known_cells.numel(), dtype=torch.bool)
        draws = FitDraws(u, v, words, threshold, n_cells, known_cells, known_dropped)
        for member in range(members):
            # Member e's words end at (e + 1) K N: draw the int64 pairs up to there, in stream order.
            start, stop = -(-member * n_cells // 2), min(-(-(member + 1) * n_cells // 2), pairs)
            draws.words[start:stop].random_(generator=generator)
            if odd_word and member == members - 1:  # the last word alone, in the high half of its pair
                draws.words[pairs] = int(torch.empty(1, dtype=torch.int32).random_(generator=generator)) << 32
            draws.known_dropped[member] = draws.dropped_at(known_cells, torch.tensor([member]))[0]
        return draws

    def refit(
        self, previous: EnsembleFit, matrix: ObservedMatrix, generator: torch.Generator, iterations: int
    ) -> EnsembleFit:
        """Warm start: ``iterations`` ALS rounds from ``previous``'s factors.

        Each member keeps its dropout of the cells ``previous`` saw; the cells
        observed since get a fresh dropout, ``E x (new cells)`` uniforms.
        """
        new_cells = matrix.cells[previous.n_cells :]
        uniforms = torch.rand(self.ensemble_size, new_cells.numel(), generator=generator)
        members, positions = (uniforms < self.drop_probability).nonzero(as_tuple=True)
        fit = EnsembleFit(
            previous.u,
            previous.v,
            torch.cat([previous.dropped_members, members]),
            torch.cat([previous.dropped_positions, positions.add_(previous.n_cells)]),
            previous.n_cells + new_cells.numel(),
        )
        return self._alternate(fit, matrix, iterations)

    def _alternate(self, fit: EnsembleFit, matrix: ObservedMatrix, iterations: int) -> EnsembleFit:
        """``iterations`` ALS rounds (``V`` then ``U``) from ``fit``'s factors, with its dropout.

        The rounds hold the factors line-major, ``[K, E, r]`` and ``[N, E, r]`` (:class:`_SideSolver`).
        """
        rows, columns, scores = matrix.observations(fit.dropped_positions)
        members, negated_scores = fit.dropped_members, scores.neg().numpy()
        v_side = _SideSolver(self, matrix.csr(transposed=True), members, rows, columns, negated_scores)
        u_side = _SideSolver(self, matrix.csr(transposed=False), members, columns, rows, negated_scores)
        u, v = fit.u.transpose(0, 1).contiguous(), fit.v.transpose(0, 1)
        for _ in range(iterations):
            v = v_side.solve(u)
            u = u_side.solve(v)
        u, v = u.transpose(0, 1).contiguous(), v.transpose(0, 1).contiguous()
        return EnsembleFit(u, v, fit.dropped_members, fit.dropped_positions, fit.n_cells)


class _SideSolver:
    """Ridge solutions of one side of the ALS, ``[L, E, r]`` given the fixed factor ``[J, E, r]``.

    For the V side (``L = N`` columns, ``J = K`` rows) with the partner member
    ``p(e, l)`` of :class:`LowRankEnsemble`,

        gram[l, e]   = sum_j O[j, l] f f^T - sum_{(j, l) in D_e} f f^T,      f = fixed[j, p(e, l)],
        target[l, e] = sum_j (O X)[j, l] f - sum_{(j, l) in D_e} X[j, l] f,

    and the U side is the same with ``O^T``.  The factors are line-major (line,
    member, rank), the layout in which the sparse-dense products read them: the
    full sums, for every member at once, are ``O^T [L, J] x [J, E r^2]`` (``M E r^2``
    multiply-adds), read at the partners; the dropped terms (``D r^2``, ``D`` the
    dropped pairs) are subtracted in one compiled pass over the pairs
    (:func:`_subtract_dropped_terms`).  What does not change across the ALS rounds
    (the partner indices, each dropped pair's line and fixed-factor row, all flat) is
    computed once here.

    Args:
        sparse: CSR ``O^T`` and ``(O X)^T``, ``[L, J]``.
        dropped_members, fixed_index, solved_index: ``[D]`` member, fixed-side
            index ``j`` and solved-side index ``l`` of each dropped (member, cell).
        negated_scores: ``[D]`` float32 (numpy), minus each dropped cell's score.
    """

    def __init__(
        self,
        ensemble: LowRankEnsemble,
        sparse: tuple[torch.Tensor, torch.Tensor],
        dropped_members: torch.Tensor,
        fixed_index: torch.Tensor,
        solved_index: torch.Tensor,
        negated_scores: np.ndarray,
    ) -> None:
        members, rank = ensemble.ensemble_size, ensemble.rank
        self.mask, self.masked_scores = sparse
        solved_length = self.mask.shape[0]
        self.members, self.rank, self.solved_length = members, rank, solved_length
        self.eye = ensemble.ridge * torch.eye(rank)
        partner_rows, self.partner_elements = _partner_indices(ensemble.pairing, members, rank, solved_length)
        # int32 when the lines and rows fit: the pass over the pairs is bound by reading these.
        index_dtype = np.int32 if max(self.mask.shape) * members < 2**31 else np.int64
        self.dropped_rows, self.dropped_lines = (np.empty(dropped_members.numel(), index_dtype) for _ in range(2))
        _dropped_rows_and_lines(
            self.dropped_rows,
            self.dropped_lines,
            dropped_members.numpy(),
            fixed_index.numpy(),
            solved_index.numpy(),
            partner_rows.numpy(),
            members,
        )
        self.negated_scores = negated_scores

    def solve(self, fixed: torch.Tensor) -> torch.Tensor:
        members, rank, length = self.members, self.rank, self.solved_length
        outer = (fixed[..., :, None] * fixed[..., None, :]).flatten(-2)  # [J, E, r^2]
        gram = self._at_partners(outer, self.mask)
        target = self._at_partners(fixed, self.masked_scores)
        _subtract_dropped_terms(
            gram.numpy(),
            target.numpy(),
            fixed.view(-1).numpy(),
            self.dropped_rows,
            self.dropped_lines,
            self.negated_scores,
            rank,
        )
        if rank == 1:
            return target.div_(gram.add_(self.eye[0])).view(length, members, 1)
        gram = gram.view(-1, rank, rank) + self.eye
        return torch.linalg.solve(gram, target.view(-1, rank, 1))[..., 0].view(length, members, rank)

    def _at_partners(self, factor: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        """Flat ``[L E c]``: ``(l, e, i)`` is ``sum_j sparse[l, j] factor[j, p(e, l), i]``, ``factor [J, E, c]``."""
        product = sparse @ factor.view(factor.shape[0], -1)  # [L, E c]
        return product.view(-1).index_select(0, self.partner_elements[factor.shape[-1]])


@numba.njit(cache=True, nogil=True)
def _dropped_rows_and_lines(
    rows: np.ndarray,
    lines: np.ndarray,
    members: np.ndarray,
    fixed_index: np.ndarray,
    solved_index: np.ndarray,
    partner_rows: np.ndarray,
    n_members: int,
) -> None:
    """Write into ``lines [D]`` each dropped pair's line ``l E + e`` (``l = solved_index``, ``e = members``)
    and into ``rows [D]`` the row ``j E + p(e, l)`` of the fixed factor viewed ``[J E, r]`` that it reads:
    line ``l``'s partner row ``partner_rows[l E + e]``, shifted from ``l`` to ``j = fixed_index`` (one pass,
    no int64 temporaries)."""
    for i in range(members.size):
        line = solved_index[i] * n_members + members[i]
        lines[i] = line
        rows[i] = partner_rows[line] + (fixed_index[i] - solved_index[i]) * n_members


@numba.njit(cache=True, nogil=True)
def _subtract_dropped_terms(
    gram: np.ndarray,
    target: np.ndarray,
    fixed: np.ndarray,
    fixed_rows: np.ndarray,
    solved_lines: np.ndarray,
    negated_scores: np.ndarray,
    rank: int,
) -> None:
    """In place, for each dropped pair ``i`` in turn, with ``f = fixed[fixed_rows[i]]`` (``fixed`` flat
    ``[J E r]``): ``gram[solved_lines[i]] -= f f^T`` (flat ``[L E r^2]``) and
    ``target[solved_lines[i]] += negated_scores[i] f`` (flat ``[L E r]``).

    One pass over the pairs instead of five torch ops over them (a gather, two
    products, two scatter-adds).  Each element gets the same float32 operations in
    the same order as from those ops, so the sums are the same to the bit.
    """
    if rank == 1:  # the paper's ensemble; the loops over the rank cost 60 % more at rank 1
        for i in range(fixed_rows.size):
            factor = fixed[fixed_rows[i]]
            gram[solved_lines[i]] += -(factor * factor)
            target[solved_lines[i]] += factor * negated_scores[i]
        return
    for i in range(fixed_rows.size):
        source = fixed_rows[i] * rank
        gram_at = solved_lines[i] * rank * rank
        target_at = solved_lines[i] * rank
        for a in range(rank):
            factor = fixed[source + a]
            for b in range(rank):
                gram[gram_at + a * rank + b] += -(factor * fixed[source + b])
            target[target_at + a] += factor * negated_scores[i]


@functools.lru_cache(maxsize=8)
def _partner_indices(
    pairing: str, members: int, rank: int, solved_length: int
) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
    """Where the partners' terms sit in a side's ``[L, E c]`` product (they depend on the shapes only,
    so each run computes them once per side, not at every fit).

    Returns ``partner_rows [L E]``, member ``e``'s line ``l`` at row ``l E + p(e, l)`` of
    the product viewed ``[L E, c]``, and its flat element indices for ``c = r`` and
    ``c = r^2``.  Read-only: every fit of the run shares them.
    """
    member_index = torch.arange(members)
    if pairing == "independent":
        partner = member_index.expand(solved_length, -1)
    else:
        partner = (member_index * solved_length + torch.arange(solved_length)[:, None]) % members
    partner_rows = (partner + torch.arange(0, solved_length * members, members)[:, None]).view(-1)
    return partner_rows, {width: _elements(partner_rows, width) for width in {rank, rank * rank}}


def _elements(rows: torch.Tensor, width: int) -> torch.Tensor:
    """Flat indices ``[R width]`` of the elements of ``rows [R]`` in a row-major ``[., width]`` tensor."""
    if width == 1:
        return rows.reshape(-1)
    return (rows.reshape(-1, 1) * width + torch.arange(width)).reshape(-1)


# One thread, shared by every policy in the process: it only draws random numbers, each
# policy from its own generator, in the order the policy asked.
_DRAW_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lrf-draws")


class _DrawsAhead:
    """The :class:`FitDraws` of the next fit, drawn on :data:`_DRAW_THREAD` ahead of time.

    Each :meth:`take` returns the draws of the next fit and starts drawing the one
    after it, which then overlaps the ALS of this fit (a second core's work).  The
    cells observed at that moment are all the next fit will see but one request's,
    so their dropout is read as the words are drawn.  Two word buffers take turns:
    a fit has read its draws before the one after next is drawn into its buffer.
    """

    def __init__(self, ensemble: LowRankEnsemble, matrix: ObservedMatrix, generator: torch.Generator) -> None:
        size = -(-ensemble.ensemble_size * matrix.shape[0] * matrix.shape[1] // 2)
        self._buffers = [torch.empty(size, dtype=torch.int64) for _ in range(2)]
        self._draw = lambda cells, words: ensemble.draw(*matrix.shape, generator, cells, words)
        self._matrix = matrix
        self._next: Future[FitDraws] = self._submit()

    def _submit(self) -> Future[FitDraws]:
        self._buffers.reverse()
        return _DRAW_THREAD.submit(self._draw, self._matrix.cells, self._buffers[0])

    def take(self) -> FitDraws:
        draws = self._next.result()
        self._next = self._submit()
        return draws

    def settle(self) -> None:
        """Wait until the draws made ahead are done (for timing a fixed number of steps)."""
        self._next.result()


def _ensemble_moments(
    u: torch.Tensor, v: torch.Tensor, out: tuple[torch.Tensor, torch.Tensor] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and sd ``[K, N]`` over members of ``U_e V_e^T``, via ``[K, E r^2] x [E r^2, N]`` products.

    ``sd^2 = (sum_e (U_e V_e^T)^2 - E mean^2) / (E - 1)``, clipped at 0.  Written into
    ``out`` (two float64 ``[K, N]``) if given: a fresh ``[K, N]`` table is freed to the
    system after use and page-faults in again at the next fit, which costs more than a pass.
    """
    members = u.shape[0]
    total, squares = out if out is not None else (None, None)
    # Line-major [K, E r] and [N, E r]: two plain matrix products (an einsum over (e, r) is slower).
    u_lines, v_lines = u.transpose(0, 1), v.transpose(0, 1)
    total = torch.mm(u_lines.flatten(1), v_lines.flatten(1).T, out=total)
    u_outer = (u_lines[..., :, None] * u_lines[..., None, :]).flatten(1)  # [K, E r^2]
    v_outer = (v_lines[..., :, None] * v_lines[..., None, :]).flatten(1)
    squares = torch.mm(u_outer, v_outer.T, out=squares)
    mean = total.div_(members)
    variance = squares.addcmul_(mean, mean, value=-members).div_(members - 1).clamp_min_(0.0)
    return mean, variance.sqrt_()


class LRFPolicy(Policy):
    """UCB-E-LRF: optimism on a completed matrix, evaluating its most uncertain cells.

    Warm-up: ``T0 = ceil(w K N)`` cells drawn uniformly without replacement,
    counted in the budget and issued as one request per arm that received any
    (arms in a random order).  After the warm-up, each ``select`` refits a
    :class:`LowRankEnsemble` on the observed matrix and scores

        cell:  s[k, n] = X[k, n] if observed, else mean[k, n] + eta * sd[k, n],
        arm:   S_k = (1/N) sum_n s[k, n]   (+inf if unobserved, -inf if completed),

    then evaluates ``argmax_k S_k`` on its ``B`` unseen examples of largest ``sd``.
    ``recommend`` returns the arm of largest imputed mean: observed cells at their
    values, the others at the latest fit's ensemble mean (the fit made by the last
    ``select``, so recommending costs no refit).  Before the first fit (during the
    warm-up and after its last request) it returns the best empirical mean.
    Ties go to a per-run random ranking of the arms.  Costs play no part in the
    allocation.

    By default every step refits from scratch, as the reference does, drawing the
    dropout as the ensemble's ``dropout_draws`` says (:class:`LowRankEnsemble`).
    With ``"stream"`` (parity: the reference's random stream, same batches) the
    random draws of the next fit are made on a second thread while this one fits,
    into two buffers of ``4 E K N`` bytes (210 MB each at 1500 x 545, 590 MB at
    1500 x 1534); ``"observed"`` draws the dropout of the ``M`` observed
    cells in turn.  With ``warm_start`` each fit after the first starts from the previous
    fit's factors, keeps each member's dropout of the cells it already saw, and
    runs ``warm_start_iterations`` ALS rounds instead of the ensemble's
    ``iterations`` (see :meth:`LowRankEnsemble.refit`).

    Args:
        batch_size: ``B``, examples per pull after the warm-up (32 in the paper).
        eta: weight of the ensemble sd in the cell score.
        warmup_fraction: ``w``, the warm-up's share of the ``K N`` cells.
        ensemble: the :class:`LowRankEnsemble` refitted each step (default: the
            reference's rank 1, 64 members, ``dropout_draws="observed"``).
        warm_start: refit from the previous step's fit (not the reference's method).
        warm_start_iterations: ALS rounds of a warm-started refit.
    """

    name = "lrf"
    label = "UCB-E-LRF"
    uses_prior = False

    def __init__(
        self,
        batch_size: int = 32,
        eta: float = 5.0,
        warmup_fraction: float = 0.05,
        ensemble: LowRankEnsemble | None = None,
        warm_start: bool = False,
        warm_start_iterations: int = 2,
    ) -> None:
        eta = non_negative_float("eta", eta)
        if not (0 < warmup_fraction < 1):
            raise ValueError(f"warmup_fraction must be in (0, 1), got {warmup_fraction!r}")
        if not isinstance(warm_start, bool):
            raise ValueError(f"warm_start must be true or false, got {warm_start!r}")
        self.batch_size = check_batch_size(batch_size)
        self.eta = float(eta)
        self.warmup_fraction = float(warmup_fraction)
        self.ensemble = LowRankEnsemble() if ensemble is None else ensemble
        self.warm_start = warm_start
        self.warm_start_iterations = positive_int("warm_start_iterations", warm_start_iterations)

    def reset(self, problem: EvaluationProblem, rng: np.random.Generator) -> None:
        n_arms, n_examples = problem.n_arms, problem.n_examples
        self.matrix = ObservedMatrix(n_arms, n_examples)  # first: it refuses a matrix too large to index
        warmup_cells = math.ceil(self.warmup_fraction * n_arms * n_examples - 1e-9)
        cells = np.sort(rng.choice(n_arms * n_examples, size=warmup_cells, replace=False))
        arms, first = np.unique(cells // n_examples, return_index=True)
        per_arm = np.split(cells % n_examples, first[1:])
        self.warmup = [Request(int(arms[i]), per_arm[i]) for i in rng.permutation(arms.size)]
        self.priority = rng.permutation(n_arms)
        self.generator = torch.Generator().manual_seed(int(rng.integers(2**63 - 1)))
        self.draws_ahead: _DrawsAhead | None = None
        self.stats = RunningMeans(n_arms)
        self.all_arms = np.ones(n_arms, dtype=bool)
        self.fit: EnsembleFit | None = None
        self.fit_mean: np.ndarray | None = None
        self.moment_tables = tuple(torch.empty(n_arms, n_examples, dtype=torch.float64) for _ in range(2))
        self.imputed_sums = np.zeros(n_arms)

    def refit(self) -> EnsembleFit:
        """The fit for this step: from scratch, or warm-started from the last one."""
        if self.warm_start:
            if self.fit is None:
                return self.ensemble.fit(self.matrix, self.generator)
            return self.ensemble.refit(self.fit, self.matrix, self.generator, self.warm_start_iterations)
        if self.ensemble.dropout_draws == "observed":
            return self.ensemble.fit(self.matrix, self.generator)
        # A stream fit uses the generator for its draws only, so the next fit's draws
        # can be made on another thread while this one fits: the same stream, earlier.
        if self.draws_ahead is None:
            self.draws_ahead = _DrawsAhead(self.ensemble, self.matrix, self.generator)
        return self.ensemble.fit_drawn(self.draws_ahead.take(), self.matrix)

    def arm_scores(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Refit; return the arm scores ``S [K]``, the ensemble mean and sd ``[K, N]``.

        The mean and sd are views of :attr:`moment_tables`, which the next fit overwrites.

        Also sets the imputed sums ``sum_n s0[k, n]`` (``s0``: observed values, the
        mean elsewhere) that :meth:`recommend` reads.  Both row sums are taken over
        all cells and corrected at the ``M`` observed ones,
        ``sum_n (1 - O) A = sum_n A - sum_n O A``, instead of masking every cell.
        """
        self.fit = self.refit()
        mean, sd = self.fit.moments(out=self.moment_tables)
        observed_mean, observed_sd = self.matrix.observed_row_sums(mean, sd)
        self.imputed_sums = (mean.sum(1) - observed_mean).numpy() + self.stats.sums
        unobserved_sd = (sd.sum(1) - observed_sd).numpy()
        scores = (self.imputed_sums + self.eta * unobserved_sd) / self.matrix.shape[1]
        counts = self.stats.counts
        # A completed arm's two sums of the mean cancel only up to rounding; its exact sum keeps
        # equal arms tied, so that the per-run priority decides between them.
        completed = counts == self.matrix.shape[1]
        self.imputed_sums[completed] = self.stats.sums[completed]
        scores[counts == 0] = np.inf
        scores[completed] = -np.inf
        return scores, mean.numpy(), sd.numpy()

    def select(self) -> Request | None:
        if self.warmup:
            return self.warmup.pop()
        scores, mean, sd = self.arm_scores()
        self.fit_mean = mean
        arm = argmax_by_priority(scores, self.priority)
        if arm < 0:
            return None
        unseen = np.flatnonzero(~self.matrix.observed[arm])
        spread = sd[arm, unseen]
        size = min(self.batch_size, unseen.size)
        return Request(arm, unseen[np.argsort(-spread, kind="stable")[:size]])

    def observe(self, request: Request, scores: np.ndarray) -> None:
        arm, examples = request.arm, request.examples
        self.matrix.add(arm, examples, scores)
        self.stats.update(arm, scores)
        if self.fit_mean is not None:
            self.imputed_sums[arm] += (scores - self.fit_mean[arm, examples]).sum()
            if self.stats.counts[arm] == self.matrix.shape[1]:
                self.imputed_sums[arm] = self.stats.sums[arm]  # exact, as in arm_scores

    def recommend(self) -> int:
        if self.fit_mean is None:
            return self.stats.best(self.all_arms, self.priority)
        return argmax_by_priority(self.imputed_sums, self.priority)
