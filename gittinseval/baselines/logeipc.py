"""LogEIPC: log expected improvement per unit cost, and its configuration-level BO policy."""

from __future__ import annotations

import math

import torch
from botorch.acquisition.analytic import LogExpectedImprovement
from botorch.models.model import Model
from botorch.utils.transforms import t_batch_mode_transform
from torch import Tensor

from gittinseval.baselines.bo import ConfigurationBOPolicy
from gittinseval.utils.validation import positive_finite_values

__all__ = ["LogEIPCPolicy", "LogExpectedImprovementPerCost"]


class LogExpectedImprovementPerCost(LogExpectedImprovement):
    r"""``log(EI(x) / c(x)) = LogEI(x) - log c(x)`` (analytic, ``q = 1``).

    Args:
        model: a fitted single-outcome model.
        best_f: the best observed value.
        cost: ``c(x) > 0``, a float or a tensor broadcastable to the ``(b1 x ... x bk)``
            batch shape of the ``X`` passed to :meth:`forward` (one cost per candidate).
    """

    def __init__(self, model: Model, best_f: float | Tensor, cost: float | Tensor) -> None:
        # As a Python float, BoTorch would store best_f in float32 (an error of ~1e-8).
        super().__init__(model=model, best_f=torch.as_tensor(best_f, dtype=torch.float64))
        cost = torch.from_numpy(positive_finite_values(torch.as_tensor(cost, dtype=torch.float64).numpy(), "costs"))
        self.register_buffer("cost", cost)

    @t_batch_mode_transform(expected_q=1)
    def forward(self, X: Tensor) -> Tensor:
        """``LogEI - log c`` of each ``(b1 x ... x bk) x 1 x d`` point: a ``(b1 x ... x bk)`` tensor."""
        return super().forward(X) - self.cost.log()


class LogEIPCPolicy(ConfigurationBOPolicy):
    """Selects the affordable unevaluated configuration of largest ``LogEI(x) - log c(x)``.

    ``c(x)`` is the acquisition cost of :mod:`gittinseval.baselines.bo.policy` (``N c_k``, or 1 under
    unit cost, where LogEIPC coincides with LogEI).  Stopping signal (Xie et al.
    2025): ``max_x LogEI(x) - log c(x) <= log lambda``.
    """

    name = "logeipc"
    label = "LogEIPC"

    def acquisition_values(self, model: Model, candidates: Tensor, best_f: float, costs: Tensor) -> Tensor:
        return LogExpectedImprovementPerCost(model, best_f, costs)(candidates)

    def stop_rule_fires(self, values: Tensor, best_f: float, costs: Tensor) -> bool:
        return bool(values.max() <= math.log(self.lam))
