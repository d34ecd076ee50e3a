"""One side of the ensemble's ALS: the ridge solutions of every member's rows, or columns, at once.

:class:`SideSolver` solves the ``[L, E, r]`` side (``L`` lines: the ``N`` columns
for ``V``, the ``K`` rows for ``U``) given the fixed factor ``[J, E, r]``,

    solved[l, e] = (gram[l, e] + w I)^{-1} target[l, e],    gram [r, r], target [r],

whose sums run over the line's observed cells minus member ``e``'s dropped ones and
read the fixed factor at the partner member ``p(e, l)`` of
:class:`~gittinseval.baselines.lrf.ensemble.LowRankEnsemble`.  :func:`_partner_indices` says where
the partners' terms sit in the all-member sparse products; the dropped terms are
subtracted by the compiled pass of :mod:`~gittinseval.baselines.lrf.compiled`.
"""

from __future__ import annotations

import numpy as np
import torch

from gittinseval.baselines.lrf.compiled import dropped_rows_and_lines, subtract_dropped_terms
from gittinseval.utils.caches import run_shared_cache


class SideSolver:
    """Ridge solutions of one side of the ALS, ``[L, E, r]`` given the fixed factor ``[J, E, r]``.

    For the V side (``L = N`` columns, ``J = K`` rows) with the partner member
    ``p(e, l)`` of :class:`~gittinseval.baselines.lrf.ensemble.LowRankEnsemble`,

        gram[l, e]   = sum_j O[j, l] f f^T - sum_{(j, l) in D_e} f f^T,      f = fixed[j, p(e, l)],
        target[l, e] = sum_j (O X)[j, l] f - sum_{(j, l) in D_e} X[j, l] f,

    and the U side is the same with ``O^T``.  The factors are line-major (line,
    member, rank), the layout in which the sparse-dense products read them: the
    full sums, for every member at once, are ``O^T [L, J] x [J, E r^2]`` (``M E r^2``
    multiply-adds), read at the partners; the dropped terms (``D r^2``, ``D`` the
    dropped pairs) are subtracted in one compiled pass over the pairs
    (:func:`~gittinseval.baselines.lrf.compiled.subtract_dropped_terms`).  What does not change across the ALS rounds
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
        members: int,
        rank: int,
        ridge: float,
        pairing: str,
        sparse: tuple[torch.Tensor, torch.Tensor],
        dropped_members: torch.Tensor,
        fixed_index: torch.Tensor,
        solved_index: torch.Tensor,
        negated_scores: np.ndarray,
    ) -> None:
        self.mask, self.masked_scores = sparse
        solved_length = self.mask.shape[0]
        self.members, self.rank, self.solved_length = members, rank, solved_length
        self.eye = ridge * torch.eye(rank)
        partner_rows, self.partner_elements = _partner_indices(pairing, members, rank, solved_length)
        # int32 when the lines and rows fit: the pass over the pairs is bound by reading these.
        index_dtype = np.int32 if max(self.mask.shape) * members < 2**31 else np.int64
        self.dropped_rows, self.dropped_lines = (np.empty(dropped_members.numel(), index_dtype) for _ in range(2))
        dropped_rows_and_lines(
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
        subtract_dropped_terms(
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


@run_shared_cache(maxsize=8)
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
