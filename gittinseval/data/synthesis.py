"""Synthesized response matrices with prescribed row totals and shared item structure.

Used where the public release is not bundled: the item assignment of MMLU rows
(real row sums), the AlpacaEval rows the drop lacks (published row means) and the
GSM8K/PIQA stand-ins (calibrated row accuracies).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit

__all__ = ["binary_with_row_sums", "continuous_with_row_means"]


def binary_with_row_sums(row_sums: np.ndarray, easiness: np.ndarray, gumbel: np.ndarray) -> np.ndarray:
    """A binary ``[K, N]`` matrix with exactly ``row_sums`` ones per row.

    Row ``k`` is correct on the ``row_sums[k]`` items with the largest
    ``easiness_j + gumbel_kj``: with ``gumbel`` i.i.d. standard Gumbel this is a draw
    of ``row_sums[k]`` items without replacement with probabilities proportional to
    ``exp(easiness_j)`` (the Gumbel top-k trick), so easy items are correct for most
    arms and the arms' errors are correlated through the items.

    Args:
        row_sums: ``[K]`` integers in ``[0, N]``.
        easiness: ``[N]`` item easiness on the logit scale.
        gumbel: ``[K, N]`` standard Gumbel draws.
    """
    row_sums = np.asarray(row_sums, dtype=np.int64)
    n_examples = easiness.size
    if np.any(row_sums < 0) or np.any(row_sums > n_examples):
        raise ValueError(f"row sums must lie in [0, {n_examples}]")
    if gumbel.shape != (row_sums.size, n_examples):
        raise ValueError(f"gumbel must have shape {(row_sums.size, n_examples)}, got {gumbel.shape}")
    ranks = np.argsort(np.argsort(-(easiness[None, :] + gumbel), axis=1), axis=1)
    return (ranks < row_sums[:, None]).astype(np.float64)


def continuous_with_row_means(
    targets: np.ndarray, item_effects: np.ndarray, spread: float, rng: np.random.Generator
) -> np.ndarray:
    """Continuous ``[K, N]`` scores in (0, 1) whose row means equal ``targets``.

    ``Z_kj = sigmoid(a_k + d_j + spread * e_kj)`` with ``d_j = item_effects`` and
    ``e_kj`` i.i.d. standard normal; each arm's level ``a_k`` is the root of
    ``mean_j Z_kj = targets[k]`` (the mean is increasing in ``a_k``), found by Brent's
    method to machine precision.  A large ``spread`` puts most mass near 0 and 1.
    """
    targets = np.asarray(targets, dtype=np.float64)
    if np.any((targets <= 0) | (targets >= 1)):
        raise ValueError("target row means must lie strictly inside (0, 1)")
    noise = item_effects[None, :] + spread * rng.standard_normal((targets.size, item_effects.size))
    scores = np.empty_like(noise)
    for k, (target, row) in enumerate(zip(targets, noise, strict=True)):
        level = brentq(lambda a, row=row, target=target: expit(a + row).mean() - target, -60.0, 60.0, xtol=1e-14)
        scores[k] = expit(level + row)
    return scores
