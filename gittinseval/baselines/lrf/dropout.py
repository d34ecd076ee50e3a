"""The dropout of each fit: which observed cells each member of the ensemble leaves out.

Member ``e`` of the :class:`~gittinseval.baselines.lrf.ensemble.LowRankEnsemble` leaves out each
of the ``M`` observed cells independently with probability ``p``
(``drop_probability``).  A dropout is ``(members, positions)``, two ``[D]`` int64
tensors: member ``members[i]`` drops the observed cell ``cells[positions[i]]``
(``cells [M]`` flat ``k N + n`` in observation order), ordered by member, then by
position.  The ensemble's ``dropout_draws`` says which random numbers decide it:

* ``"observed"``: :func:`observed_dropout` draws only the ``E M`` (member, observed
  cell) trials, as the gaps between the dropped ones (:func:`_bernoulli_positions`,
  about ``p E M`` float64 geometric draws);
* ``"stream"`` (parity with BanditEval): :func:`draw_stream` draws the reference's
  ``torch.rand(E, K, N)`` after the factors, one float32 uniform per member and cell,
  observed or not, kept as raw words in a :class:`FitDraws` (``4 E K N`` bytes), of
  which only the ``E M`` at observed cells are read.

A stream fit uses its generator for its draws only, so :class:`DrawsAhead` draws the
next fit's on a thread of its own while this fit runs its ALS.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from gittinseval.baselines.lrf.observed import ObservedMatrix


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


def observed_dropout(
    members: int, n_cells: int, probability: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(members, positions)`` dropped from ``M = n_cells`` observed cells, each of the ``E M`` pairs
    with ``probability`` (``E = members``).

    The pairs are the trials ``e M + i`` (member ``e``, ``i``-th cell), drawn by
    :func:`_bernoulli_positions`; they come by member, then by position.
    """
    positions = _bernoulli_positions(members * n_cells, probability, generator)
    # The positions ascend, so each member's are one run: cut them at e M (no int64 division).
    starts = torch.searchsorted(positions, torch.arange(members + 1) * n_cells)
    member_of = torch.repeat_interleave(torch.arange(members), starts.diff())
    return member_of, positions.sub_(member_of * n_cells)


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


def draw_stream(
    u: torch.Tensor,
    v: torch.Tensor,
    drop_probability: float,
    n_cells: int,
    generator: torch.Generator,
    known_cells: torch.Tensor | None = None,
    words: torch.Tensor | None = None,
) -> FitDraws:
    """The :class:`FitDraws` of one stream fit whose factors ``u [E, K, r]``, ``v [E, N, r]`` were just
    drawn from ``generator``: the ``E K N`` uniforms that follow them, ``n_cells = K N``.

    ``known_cells`` (flat, in observation order): cells whose dropout is read at
    once, member by member, while the member's words are in cache.  ``words``: an
    int64 buffer of ``ceil(E K N / 2)`` to draw into (a fresh one costs page faults).
    """
    members = u.shape[0]
    known_cells = torch.zeros(0, dtype=torch.long) if known_cells is None else known_cells
    pairs, odd_word = divmod(members * n_cells, 2)
    threshold = math.ceil(float(np.float32(drop_probability)) * 2**24)
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


# One thread, shared by every policy in the process: it only draws random numbers, each
# policy from its own generator, in the order the policy asked.
_DRAW_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lrf-draws")


class DrawsAhead:
    """The :class:`FitDraws` of the next fit, drawn on :data:`_DRAW_THREAD` ahead of time.

    Each :meth:`take` returns the draws of the next fit and starts drawing the one
    after it, which then overlaps the ALS of this fit (a second core's work).  The
    cells observed at that moment are all the next fit will see but one request's,
    so their dropout is read as the words are drawn.  Two word buffers take turns:
    a fit has read its draws before the one after next is drawn into its buffer.
    """

    def __init__(
        self, draw: Callable[..., FitDraws], members: int, matrix: ObservedMatrix, generator: torch.Generator
    ) -> None:
        """``draw``: the ensemble's :meth:`~gittinseval.baselines.lrf.ensemble.LowRankEnsemble.draw`
        for its ``members``."""
        size = -(-members * matrix.shape[0] * matrix.shape[1] // 2)
        self._buffers = [torch.empty(size, dtype=torch.int64) for _ in range(2)]
        self._draw = lambda cells, words: draw(*matrix.shape, generator, cells, words)
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
