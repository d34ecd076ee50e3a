"""The low-rank ensemble: ``E`` ridge ALS factorisations of the observed score matrix, fitted at once.

:class:`LowRankEnsemble` fits ``X ~ U_e V_e^T`` (``U [E, K, r]``, ``V [E, N, r]``,
float32) for each member ``e`` on the observed cells it keeps after its dropout,
from standard normal factors (:meth:`~LowRankEnsemble.fit`) or from a previous fit
(:meth:`~LowRankEnsemble.refit`), and returns an :class:`EnsembleFit`, whose
:meth:`~EnsembleFit.moments` are the ensemble mean and standard deviation ``[K, N]``
(float64) of the completed matrices ``U_e V_e^T`` that the policy scores cells by.
The dropout comes from :mod:`~gittinseval.baselines.lrf.dropout`, each ALS half-step from
:mod:`~gittinseval.baselines.lrf.als`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gittinseval.baselines.lrf.als import SideSolver
from gittinseval.baselines.lrf.dropout import FitDraws, draw_stream, observed_dropout
from gittinseval.baselines.lrf.observed import ObservedMatrix
from gittinseval.utils.validation import positive_float, positive_int

PAIRINGS = ("reference", "independent")
DROPOUT_DRAWS = ("stream", "observed")


@dataclass
class EnsembleFit:
    """A fitted ensemble: factors ``u [E, K, r]``, ``v [E, N, r]`` (float32) and its dropout.

    Member ``e`` left out the observed cell ``cells[dropped_positions[i]]`` of the
    :class:`~gittinseval.baselines.lrf.observed.ObservedMatrix` it was fitted on for every ``i`` with
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
    (:class:`~gittinseval.baselines.lrf.als.SideSolver`).  The products run on torch's
    threads; nothing loops over members, rows or columns.

    The factors are float32, as in the reference; scores lie in ``[0, 1]`` and the
    ridge weight keeps every ``r x r`` system well conditioned.  Random draws of
    :meth:`fit`, all from the given ``torch.Generator``: ``U [E, K, r]`` and
    ``V [E, N, r]`` standard normal, then the dropout, which ``dropout_draws`` draws
    in one of two ways:

    * ``"stream"`` (parity with the reference): the uniforms ``[E, K, N]`` of every
      member and cell, observed or not, in the reference's order and dtype, of
      which only the ``E M`` on observed cells are read (a ``4 E K N``-byte draw);
    * ``"observed"``: only for the ``E M`` (member, observed cell) pairs, drawn as
      the gaps between the dropped ones (:func:`~gittinseval.baselines.lrf.dropout.observed_dropout`,
      about ``drop_probability E M`` geometric draws).

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
        dropout = observed_dropout(self.ensemble_size, cells.numel(), self.drop_probability, generator)
        fit = EnsembleFit(u, v, *dropout, cells.numel())
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

    def draw(
        self,
        n_arms: int,
        n_examples: int,
        generator: torch.Generator,
        known_cells: torch.Tensor | None = None,
        words: torch.Tensor | None = None,
    ) -> FitDraws:
        """The draws of one ``"stream"`` fit on a ``[K, N]`` matrix, from ``generator``: the factors
        (:meth:`_initial_factors`), then the uniforms (:func:`~gittinseval.baselines.lrf.dropout.draw_stream`, which
        says what ``known_cells`` and ``words`` are)."""
        u, v = self._initial_factors(n_arms, n_examples, generator)
        return draw_stream(u, v, self.drop_probability, n_arms * n_examples, generator, known_cells, words)

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

        The rounds hold the factors line-major, ``[K, E, r]`` and ``[N, E, r]``
        (:class:`~gittinseval.baselines.lrf.als.SideSolver`).
        """
        rows, columns, scores = matrix.observations(fit.dropped_positions)
        members, negated_scores = fit.dropped_members, scores.neg().numpy()
        shape = (self.ensemble_size, self.rank, self.ridge, self.pairing)
        v_side = SideSolver(*shape, matrix.csr(transposed=True), members, rows, columns, negated_scores)
        u_side = SideSolver(*shape, matrix.csr(transposed=False), members, columns, rows, negated_scores)
        u, v = fit.u.transpose(0, 1).contiguous(), fit.v.transpose(0, 1)
        for _ in range(iterations):
            v = v_side.solve(u)
            u = u_side.solve(v)
        u, v = u.transpose(0, 1).contiguous(), v.transpose(0, 1).contiguous()
        return EnsembleFit(u, v, fit.dropped_members, fit.dropped_positions, fit.n_cells)


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
