"""What the plain and the refined path share: the piecewise-linear ``W`` on a uniform grid.

Both paths keep ``W_n`` by its values ``w_j`` at grid points ``xi_j`` of spacing
``delta`` and extend it with slope 0 left of the grid and slope 1 right of it, so
``W(x) = w_0 + sum_i d_i (x - xi_i)_+`` with the slope changes ("kinks") ``d_i``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

SQRT_2PI = math.sqrt(2.0 * math.pi)


def differences(rows: np.ndarray) -> np.ndarray:
    """``np.diff(rows, axis=1)`` without its per-call overhead, which shows on these small arrays."""
    return rows[:, 1:] - rows[:, :-1]


def slope_changes(values: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Slope changes ``d_i = m_{i+1} - m_i`` of the extended interpolant, ``[C, P]`` from values ``[C, P]``.

    ``m_0 = 0`` (left extension), ``m_i = (w_i - w_{i-1}) / delta`` and ``m_P = 1``
    (right extension), so ``W(x) = w_0 + sum_i d_i (x - xi_i)_+``.
    """
    slopes = np.empty((values.shape[0], values.shape[1] + 1))
    slopes[:, 0], slopes[:, -1] = 0.0, 1.0
    np.divide(differences(values), delta[:, None], out=slopes[:, 1:-1])
    return differences(slopes)


def first_kinks(kinks: np.ndarray) -> np.ndarray:
    """``[C]`` index of each row's first non-zero kink: ``W = max(q, 0)`` has none below the last stage's root."""
    return np.argmax(kinks != 0, axis=1)


def full_information_lower_bound(total_sd: float, cost: float) -> float:
    """Root of ``EI_S(x) = cost``: no stage root of a chain with total sd ``S`` is lower.

    Every ``W_{n+1}`` lies below the full-information value ``EI_{S_{n+1}}`` (the
    value of seeing the terminal state for free), hence ``q_n(x) <= EI_S(x) - c_n``.
    """
    def value(x: float) -> float:
        return total_sd * norm.pdf(x / total_sd) + x * norm.cdf(x / total_sd) - cost

    lo = -total_sd
    while value(lo) > 0:
        lo *= 2.0
    return brentq(value, lo, max(cost, total_sd), xtol=1e-14 * total_sd)


def check_bracket(left_the_grid: bool, stage: int) -> None:
    if left_the_grid:
        raise RuntimeError(f"Gittins root left the grid at stage {stage}; this indicates a numerical problem")
