"""PBGI: the Pandora's-box Gittins index acquisition (Xie et al. 2024) and its BO policy."""

from __future__ import annotations

import math

import torch
from botorch.acquisition.analytic import AnalyticAcquisitionFunction, _log_ei_helper
from botorch.models.model import Model
from botorch.utils.transforms import t_batch_mode_transform
from torch import Tensor

from gittinseval.baselines.bo import ConfigurationBOPolicy
from gittinseval.utils.validation import positive_finite_values, positive_float

__all__ = ["PandoraBoxGittinsIndex", "PBGIPolicy", "solve_log_ei_equation"]


def solve_log_ei_equation(log_target: Tensor, max_iterations: int = 2000) -> Tensor:
    """The ``u`` solving ``log h(u) = log_target`` elementwise, ``h(u) = u Phi(u) + phi(u)``.

    ``h`` is increasing from 0 to infinity, so the root is unique.  Bracket (for
    each element): ``hi = exp(t)`` since ``h(u) > u``; ``lo = -max(1, sqrt(-2t))``
    since ``h(u) <= phi(u) / u^2 < exp(-u^2/2)`` for ``u <= -1`` and
    ``log h(-1) < -2 <= t`` otherwise.  Vectorised bisection then halves every
    bracket until it can no longer shrink in floating point (at most
    ``max_iterations`` halvings).

    Args:
        log_target: ``[...]`` float64 values of ``t``.

    Returns:
        ``[...]`` roots ``u``.
    """
    if log_target.dtype != torch.float64:
        raise ValueError(f"solve the index equation in float64, got {log_target.dtype}")
    if not torch.isfinite(log_target).all():
        raise ValueError("the log target of the index equation must be finite")
    lo = -torch.sqrt((-2.0 * log_target).clamp_min(1.0))
    hi = torch.exp(log_target)
    for _ in range(max_iterations):
        mid = 0.5 * (lo + hi)
        if bool(((mid == lo) | (mid == hi)).all()):
            break
        above = _log_ei_helper(mid) >= log_target
        hi = torch.where(above, mid, hi)
        lo = torch.where(above, lo, mid)
    return 0.5 * (lo + hi)


class PandoraBoxGittinsIndex(AnalyticAcquisitionFunction):
    r"""Pandora's-box Gittins index (analytic, ``q = 1``, maximisation).

    The index ``g(x)`` of a candidate with Gaussian posterior ``N(mu, sigma^2)``
    and cost ``c(x)`` is the reservation value at which opening the box breaks even:

        EI_g(x) = E[max(f(x) - g, 0)] = sigma h((mu - g) / sigma) = lambda c(x),

    solved in log space, ``log h(u) = log(lambda c(x)) - log sigma``, by
    :func:`solve_log_ei_equation`, then ``g = mu - sigma u``.  ``g`` decreases in
    ``c(x)``.  The index is computed without gradients (the candidate sets here
    are discrete).  Pass float64 ``X``: BoTorch casts the model and the ``cost``
    buffer to the dtype of ``X``.

    Args:
        model: a fitted single-outcome model.
        lam: ``lambda > 0``, the cost scale.
        cost: ``c(x) > 0``, a float or a tensor broadcastable to the ``(b1 x ... x bk)``
            batch shape of the ``X`` passed to :meth:`forward` (one cost per candidate).
    """

    def __init__(self, model: Model, lam: float, cost: float | Tensor = 1.0) -> None:
        super().__init__(model=model)
        lam = positive_float("lam", lam)
        cost = torch.from_numpy(positive_finite_values(torch.as_tensor(cost, dtype=torch.float64).numpy(), "costs"))
        self.lam = float(lam)
        self.register_buffer("cost", cost)

    @t_batch_mode_transform(expected_q=1)
    def forward(self, X: Tensor) -> Tensor:
        """Index ``g`` of each of the ``(b1 x ... x bk) x 1 x d`` points: a ``(b1 x ... x bk)`` tensor."""
        mean, sigma = self._mean_and_sigma(X)  # (b1 x ... x bk) x 1: the trailing output dim
        mean, sigma = mean.squeeze(-1).double(), sigma.squeeze(-1).double()
        log_target = math.log(self.lam) + self.cost.log() - sigma.log()
        return mean - sigma * solve_log_ei_equation(log_target.expand_as(sigma))


class PBGIPolicy(ConfigurationBOPolicy):
    """Configuration-level BO with the Pandora's-box Gittins index (cost-aware under priced costs).

    Selects the affordable unevaluated configuration of largest index ``g(x)``
    (``c(x)``: the acquisition cost of :mod:`gittinseval.baselines.bo.policy`, ``N c_k`` or 1 under unit
    cost).  Stopping signal (Xie et al. 2025): no unevaluated configuration has an
    index above the best observed value.
    """

    name = "pbgi"
    label = "PBGI"

    def acquisition_values(self, model: Model, candidates: Tensor, best_f: float, costs: Tensor) -> Tensor:
        return PandoraBoxGittinsIndex(model, self.lam, costs)(candidates)

    def stop_rule_fires(self, values: Tensor, best_f: float, costs: Tensor) -> bool:
        return bool(values.max() <= best_f)
