"""The anytime-valid eps-best statement of a run: per-arm confidence sequences joined by a union bound.

Each arm's full-benchmark mean ``Zbar_k`` has a betting confidence sequence under sampling without
replacement (:mod:`gittinseval.core.confidence_sequences`, whose docstring states the maths and exactly
what the guarantee covers).  Run at ``alpha = delta / K`` each, with probability at least ``1 - delta``
every arm's interval ``[L_k, U_k]`` contains ``Zbar_k`` at every one of its sample counts at once
(union bound over arms; no independence between arms is needed).  On that event, for the recommended
arm ``a`` and any ``eps >= 0``,

    L_a >= max_{j != a} U_j - eps   implies   Zbar_a >= max_j Zbar_j - eps,

so the smallest certified ``eps`` is ``max(0, max_{j != a} U_j - L_a)``, valid at every batch of the run
at once, whichever arms the policy chose to sample, as long as each arm's examples are scored in its
uniformly random order (:class:`~gittinseval.core.protocol.RandomExampleOrder`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gittinseval.core.confidence_sequences import (
    DEFAULT_GRID_SIZE,
    ArmSequence,
    check_level,
    check_scores,
    make_grid,
)
from gittinseval.utils.validation import non_negative_float, positive_int

__all__ = ["AnytimeCertifier", "EpsBestStatement"]


@dataclass(frozen=True)
class EpsBestStatement:
    """The anytime statement about a recommended arm ``a``, valid with probability ``>= 1 - delta``.

    Attributes:
        arm: ``a``, the recommended arm.
        n_seen: the arm's sample count ``n_a``.
        lower: ``L_a``, lower end of the arm's confidence interval for ``Zbar_a``.
        upper: ``U_a``, its upper end.
        rival: the other arm with the largest upper bound, or ``None`` when ``K = 1``.
        rival_upper: ``max_{j != a} U_j``, or ``None`` when ``K = 1`` (nothing to beat).
        certified_eps: ``max(0, rival_upper - L_a)``, the smallest certified ``eps`` (0 when ``K = 1``).
        eps: the tolerance asked about.
        delta: the run's total error level (each arm's sequence runs at ``delta / K``).
        eps_best: whether ``certified_eps <= eps``: then ``Zbar_a >= max_j Zbar_j - eps`` on the
            coverage event.
    """

    arm: int
    n_seen: int
    lower: float
    upper: float
    rival: int | None
    rival_upper: float | None
    certified_eps: float
    eps: float
    delta: float
    eps_best: bool

    def as_dict(self) -> dict[str, Any]:
        """The statement as JSON values (``None`` for the missing rival of a single arm)."""
        return asdict(self)


class AnytimeCertifier:
    """Per-arm confidence sequences for ``Zbar_k`` under sampling without replacement, and eps-best statements.

    Each arm runs the betting confidence sequence of the module docstring at ``alpha = delta / K``, so
    with probability ``>= 1 - delta`` every arm's ``[L_k, U_k]`` contains ``Zbar_k`` at all times.  Unseen
    arms have ``[0, 1]``; completed arms (``n_k = N``) have ``L_k = U_k = Zbar_k``.

    Cost: :meth:`update` with ``b`` scores is ``O(b W)`` for the arm's live window of ``W <= G`` grid
    points and changes only that arm's cached bounds; :meth:`bounds` and :meth:`statement` are ``O(K)``.
    Memory: ``2 * 8 * W`` bytes per sampled arm (at most 32 kB at ``G = 2001``, so about 45 MiB for
    1500 arms after their first batch, shrinking with the windows).

    Args:
        n_arms: ``K``.
        n_examples: ``N``, examples per arm.
        delta: the total error level in ``(0, 1)``.
        grid_size: ``G``, grid points for the candidate means (outward rounding ``<= 1 / (G - 1)``).
        offsets: ``[K]`` known amounts ``b_k``: the statements are then about ``Zbar_k + b_k`` (the
            ``value`` objective, :mod:`~gittinseval.core.objective`), whose intervals are the arms'
            shifted by ``b_k`` (``None``: zeros).  :meth:`bounds` stays of ``Zbar_k``.
    """

    def __init__(
        self,
        n_arms: int,
        n_examples: int,
        delta: float,
        grid_size: int = DEFAULT_GRID_SIZE,
        offsets: ArrayLike | None = None,
    ) -> None:
        self.n_arms = positive_int("n_arms", n_arms)
        self.n_examples = positive_int("n_examples", n_examples)
        self.delta = check_level("delta", delta)
        self.alpha = self.delta / self.n_arms
        """Each arm's error level, ``delta / K`` (union bound over arms)."""
        self._grid = make_grid(grid_size)
        self._arms = [ArmSequence(self._grid.size) for _ in range(self.n_arms)]
        self._lower = np.zeros(self.n_arms)
        self._upper = np.ones(self.n_arms)
        self._n_seen = np.zeros(self.n_arms, dtype=np.int64)
        self._offsets = np.zeros(self.n_arms) if offsets is None else np.asarray(offsets, dtype=np.float64)
        # The last statement, kept until the next update: a run asks for the same one several times a batch (its
        # record, its stop, the stop of a comparison).
        self._updates = 0
        self._last_statement: tuple[tuple[int, float, int], EpsBestStatement] | None = None
        if self._offsets.shape != (self.n_arms,) or not np.isfinite(self._offsets).all():
            raise ValueError(f"offsets must be {self.n_arms} finite numbers, got shape {self._offsets.shape}")

    @property
    def grid_size(self) -> int:
        return self._grid.size

    def _arm(self, arm: Any) -> int:
        if isinstance(arm, bool) or not isinstance(arm, int | np.integer) or not 0 <= arm < self.n_arms:
            raise ValueError(f"arm must be an integer in [0, {self.n_arms}), got {arm!r}")
        return int(arm)

    def update(self, arm: int, scores: Any) -> None:
        """Take a batch of scores of ``arm``, in the order its random permutation drew them.

        Args:
            arm: the arm index in ``[0, K)``.
            scores: ``[b]`` its next ``b`` scores, each in ``[0, 1]`` (``b = 0`` is a no-op).

        Raises:
            ValueError: on a bad arm, scores that are NaN, outside ``[0, 1]`` or not 1-D, or more
                scores in total than the ``N`` examples of the arm.
        """
        arm = self._arm(arm)
        x = check_scores(scores, f"arm {arm}")
        state = self._arms[arm]
        if state.n + x.size > self.n_examples:
            raise ValueError(
                f"arm {arm}: {x.size} more scores after {state.n} would exceed its N = {self.n_examples} examples"
            )
        if x.size == 0:
            return
        state.advance(x, self.n_examples, self.alpha, self._grid)
        self._lower[arm], self._upper[arm] = state.interval(self.n_examples, self._grid)
        self._n_seen[arm] = state.n
        self._updates += 1

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """``([K] lower, [K] upper)``: each arm's current ``L_k`` and ``U_k`` (read-only copies)."""
        lower, upper = self._lower.copy(), self._upper.copy()
        lower.flags.writeable = False
        upper.flags.writeable = False
        return lower, upper

    @property
    def n_seen(self) -> np.ndarray:
        """``[K]`` each arm's sample count ``n_k`` (a read-only copy)."""
        counts = self._n_seen.copy()
        counts.flags.writeable = False
        return counts

    def _rival(self, arm: int) -> tuple[int | None, float | None]:
        if self.n_arms == 1:
            return None, None
        upper = self._upper + self._offsets
        best = int(upper.argmax())
        if best != arm:
            return best, float(upper[best])
        before = int(np.argmax(upper[:arm])) if arm > 0 else None
        after = arm + 1 + int(np.argmax(upper[arm + 1 :])) if arm + 1 < self.n_arms else None
        if before is None or (after is not None and upper[after] > upper[before]):
            return after, float(upper[after])
        return before, float(upper[before])

    def certified_eps(self, recommended: int) -> float:
        """The smallest certified tolerance ``max(0, max_{j != a} U_j - L_a)`` for ``a = recommended`` (``O(K)``)."""
        arm = self._arm(recommended)
        _, rival_upper = self._rival(arm)
        return 0.0 if rival_upper is None else max(0.0, rival_upper - float(self._lower[arm] + self._offsets[arm]))

    def statement(self, recommended: int, eps: float = 0.0) -> EpsBestStatement:
        """Whether ``recommended`` is certified eps-best now: ``L_a >= max_{j != a} U_j - eps``.

        Args:
            recommended: the arm ``a``.
            eps: the tolerance, ``>= 0``.

        Returns:
            The :class:`EpsBestStatement`; ``eps_best`` holds with probability ``>= 1 - delta`` jointly
            over every call of the run.
        """
        arm = self._arm(recommended)
        eps = non_negative_float("eps", eps)
        key = (arm, eps, self._updates)
        if self._last_statement is not None and self._last_statement[0] == key:
            return self._last_statement[1]
        rival, rival_upper = self._rival(arm)
        lower = float(self._lower[arm] + self._offsets[arm])
        certified = 0.0 if rival_upper is None else max(0.0, rival_upper - lower)
        statement = EpsBestStatement(
            arm=arm,
            n_seen=int(self._n_seen[arm]),
            lower=lower,
            upper=float(self._upper[arm] + self._offsets[arm]),
            rival=rival,
            rival_upper=rival_upper,
            certified_eps=certified,
            eps=eps,
            delta=self.delta,
            eps_best=bool(certified <= eps),
        )
        self._last_statement = (key, statement)
        return statement

    def reached(self, recommended: int, eps: float = 0.0) -> bool:
        """The confidence stop: whether ``recommended`` is certified eps-best now (see :meth:`statement`)."""
        return self.statement(recommended, eps).eps_best
