"""What the plain and the refined path share: the piecewise-linear ``W`` on a uniform grid.

Both paths keep ``W_n`` by its values ``w_j`` at grid points ``xi_j`` of spacing
``delta`` and extend it with slope 0 left of the grid and slope 1 right of it, so
``W(x) = w_0 + sum_i d_i (x - xi_i)_+`` with the slope changes ("kinks") ``d_i``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import brentq
from scipy.special import ndtr

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


def convolve_rows(signal: np.ndarray, kernel: np.ndarray | torch.Tensor, length: int) -> np.ndarray:
    """Each row of ``signal`` ``[C, n]`` convolved with its row of ``kernel`` ``[C, m]`` by a real FFT.

    Both are zero-padded to ``length >= n + m - 1``; the first ``n + m - 1`` of the
    returned ``[C, length]`` are the linear convolution.  torch's FFT, on every core.
    """
    spectrum = torch.fft.rfft(torch.as_tensor(signal), n=length)
    spectrum *= torch.fft.rfft(torch.as_tensor(kernel), n=length)
    return torch.fft.irfft(spectrum, n=length).numpy()


def first_kinks(kinks: np.ndarray) -> np.ndarray:
    """``[C]`` index of each row's first non-zero kink: ``W = max(q, 0)`` has none below the last stage's root."""
    return np.argmax(kinks != 0, axis=1)


_EI_AT_MINUS_5 = math.exp(-12.5) / SQRT_2PI - 5.0 * float(ndtr(-5.0))
"""``EI_1(-5) = phi(5) - 5 Phi(-5)``, about ``5.35e-8``."""


def grid_bottom(sd: np.ndarray | float, cost: np.ndarray | float) -> np.ndarray:
    """``min(-5 sd, x)`` with ``EI_sd(x) = cost``: the lower end of a grid that holds every root.

    Every ``W_{n+1}`` lies below the full-information value ``EI_{S_{n+1}}`` (the
    value of seeing the terminal state for free), hence ``q_n(x) <= EI_S(x) - c_n``:
    no root of a chain with total sd ``S = sd`` lies below the ``x`` of its cheapest stage.
    ``EI`` is increasing, so ``x < -5 sd`` exactly where ``EI_sd(-5 sd) > cost``
    (costs below ``5.3e-8 sd``); only there is ``x`` solved, by Brent's method to
    ``1e-14 sd``.  ``sd`` and ``cost`` broadcast.
    """
    sd, cost = np.broadcast_arrays(np.asarray(sd, dtype=np.float64), np.asarray(cost, dtype=np.float64))
    bottom = -5.0 * sd
    # The margin takes in every x that Brent's tolerance could put at or below -5 sd.
    for index in zip(*np.nonzero(cost < (1.0 + 1e-9) * _EI_AT_MINUS_5 * sd), strict=True):
        bottom[index] = min(bottom[index], _full_information_root(float(sd[index]), float(cost[index])))
    return bottom


def _full_information_root(sd: float, cost: float) -> float:
    """Root of ``EI_sd(x) = cost``, by Brent's method from a bracket doubled down from ``-sd``."""
    def excess(x: float) -> float:
        # On a 1-element array, as scipy.stats.norm takes them: NumPy's exp of a scalar can
        # differ in the last bit, and the plain grid's origin must keep its bits.
        u = np.array([x / sd])
        return float(sd * (np.exp(-u**2 / 2.0) / SQRT_2PI)[0] + x * ndtr(u)[0] - cost)

    lo = -sd
    while excess(lo) > 0:
        lo *= 2.0
    return brentq(excess, lo, max(cost, sd), xtol=1e-14 * sd)


def chain_grids(sds: np.ndarray, stage_costs: np.ndarray, n_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Origin and spacing (``[C]``) of each table's grid of ``n_points`` over the whole chain.

    From ``min(-5 S, x_lb)`` to ``1.01 sum_n c_n + 5 S`` with the chain's total sd
    ``S = sqrt(sum_n sigma_n^2)`` and ``EI_S(x_lb) = min_n c_n`` (:func:`grid_bottom`);
    ``sds`` ``[H]``, ``stage_costs`` ``[C, H]``.
    """
    total_sd = float(np.sqrt(np.sum(sds**2)))
    lower = grid_bottom(total_sd, stage_costs.min(axis=1))
    upper = 1.01 * stage_costs.sum(axis=1) + 5.0 * total_sd
    return lower, (upper - lower) / (n_points - 1)


def check_bracket(left_the_grid: bool, stage: int) -> None:
    """Refuse a stage whose continuation value does not change sign on the grid."""
    if left_the_grid:
        raise RuntimeError(f"Gittins root left the grid at stage {stage}; this indicates a numerical problem")
