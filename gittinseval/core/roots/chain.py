"""The empirical-target chain of one arm: its stages, batch sizes and step sds."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gittinseval.utils.validation import positive_float, positive_int


@dataclass(frozen=True)
class EmpiricalTargetChain:
    """Batch schedule of one arm's empirical-target Markov chain.

    For ``N`` examples evaluated in batches of ``B`` the chain has ``H = ceil(N / B)``
    stages with batch sizes ``b_n = min(B, N - n B)`` (the last one may be partial).
    The latent mean has prior ``N(mu_0, v_0)`` and every cell has working variance
    ``tau_cell^2``, so the latent variance before stage ``n`` is

        v_{n+1} = (1 / v_n + b_n / tau_cell^2)^{-1},

    and the posterior mean ``M`` of the empirical target moves by a centred Gaussian
    step of standard deviation

        sigma_n = a v_n / sqrt(v_n + tau_cell^2 / b_n),   a = 1 + tau_cell^2 / (N v_0).

    Attributes are NumPy float64 arrays of shape ``[H]``.
    """

    n_examples: int
    batch_size: int
    prior_var: float
    cell_var: float = 0.25

    def __post_init__(self) -> None:
        positive_int("n_examples", self.n_examples)
        positive_int("batch_size", self.batch_size)
        if self.batch_size > self.n_examples:
            raise ValueError(
                f"batch_size ({self.batch_size}) is larger than the number of examples "
                f"N = {self.n_examples}"
            )
        positive_float("prior_var", self.prior_var)
        positive_float("cell_var", self.cell_var)

    @property
    def horizon(self) -> int:
        return -(-self.n_examples // self.batch_size)

    @property
    def batch_sizes(self) -> np.ndarray:
        starts = np.arange(self.horizon) * self.batch_size
        return np.minimum(self.batch_size, self.n_examples - starts).astype(np.float64)

    @property
    def latent_vars(self) -> np.ndarray:
        """Latent posterior variance ``v_n`` before stage ``n``, shape ``[H]``."""
        precisions = 1.0 / self.prior_var + np.concatenate(
            ([0.0], np.cumsum(self.batch_sizes)[:-1])
        ) / self.cell_var
        return 1.0 / precisions

    @property
    def target_scale(self) -> float:
        """``a = 1 + tau_cell^2 / (N v_0)``, with ``M = a mu + (1 - a) mu_0``."""
        return 1.0 + self.cell_var / (self.n_examples * self.prior_var)

    @property
    def step_sds(self) -> np.ndarray:
        """Transition standard deviations ``sigma_n`` of ``M``, shape ``[H]``."""
        v = self.latent_vars
        return self.target_scale * v / np.sqrt(v + self.cell_var / self.batch_sizes)
