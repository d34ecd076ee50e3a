"""Quintic Hermite interpolation, from values, slopes and curvatures at the ends of intervals."""

from __future__ import annotations

import numpy as np

from gittinseval.core.roots.grid import differences
from gittinseval.utils.caches import run_shared_cache


def quintic_hermite(ends: np.ndarray, value: np.ndarray, slope: np.ndarray, curvature: np.ndarray,
                    per_cell: int) -> np.ndarray:
    """The quintic Hermite interpolant at ``per_cell`` equal steps across each interval.

    On ``[a, b]``, ``h = b - a``, ``t = (x - a) / h``, it matches value, slope and
    curvature at both ends:
    ``p = f_a H_0 + h f'_a H_1 + h^2 f''_a H_2 + f_b H_3 + h f'_b H_4 + h^2 f''_b H_5`` with
    ``H_0 = 1 - 10t^3 + 15t^4 - 6t^5``, ``H_1 = t - 6t^3 + 8t^4 - 3t^5``,
    ``H_2 = (t^2 - 3t^3 + 3t^4 - t^5) / 2``, ``H_3 = 1 - H_0``,
    ``H_4 = -4t^3 + 7t^4 - 3t^5``, ``H_5 = (t^3 - 2t^4 + t^5) / 2``.
    ``ends`` and the three ``[R, K + 1]``; returns ``[R, K per_cell + 1]``.
    """
    inner = hermite_cells(ends, value, slope, curvature, padded_bases((per_cell,)))  # [R, K, per_cell]
    return np.concatenate([inner.reshape(inner.shape[0], -1), value[:, -1:]], axis=1)


def hermite_cells(ends: np.ndarray, value: np.ndarray, slope: np.ndarray, curvature: np.ndarray,
                  basis: np.ndarray) -> np.ndarray:
    """The quintic Hermite interpolant of :func:`quintic_hermite` on every interval, at the basis's points.

    ``ends`` and the three ``[R, K + 1]``; ``basis`` ``[6, S]`` (or ``[R, 6, S]``, one
    per row, as from :func:`padded_bases`): ``H_0 .. H_5`` at ``S`` fractions of an interval.  Returns ``[R, K, S]``.
    """
    h = differences(ends)
    coefficients = np.stack([value[:, :-1], h * slope[:, :-1], h * h * curvature[:, :-1],
                             value[:, 1:], h * slope[:, 1:], h * h * curvature[:, 1:]], axis=-1)
    return np.matmul(coefficients, basis)


@run_shared_cache(maxsize=256)
def padded_bases(strides: tuple[int, ...]) -> np.ndarray:
    """``[R, 6, S]``: row ``r`` holds ``H_0 .. H_5`` of :func:`quintic_hermite` at ``t = 0, 1 / s, ..., (s - 1) / s``
    for ``s = strides[r]``, padded to ``S = max(strides)``.

    Cached (at most 256, a few MB): a chain's stages repeat the same strides many times.
    """
    stride = np.array(strides)[:, None]
    bases = _hermite_basis_at(np.arange(stride.max())[None, :] / stride).transpose(1, 0, 2)
    bases.setflags(write=False)
    return bases


def _hermite_basis_at(t: np.ndarray) -> np.ndarray:
    """``[6, *t.shape]``: ``H_0 .. H_5`` of :func:`quintic_hermite` at ``t``."""
    t2 = t * t
    t3, t4, t5 = t2 * t, t2 * t2, t2 * t2 * t
    h0 = 1 - 10 * t3 + 15 * t4 - 6 * t5
    return np.stack([h0, t - 6 * t3 + 8 * t4 - 3 * t5, (t2 - 3 * t3 + 3 * t4 - t5) / 2,
                     1 - h0, -4 * t3 + 7 * t4 - 3 * t5, (t3 - 2 * t4 + t5) / 2])
