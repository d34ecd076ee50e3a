"""LogEI: configuration-level BO with BoTorch's analytic log expected improvement."""

from __future__ import annotations

import math

import torch
from botorch.acquisition.analytic import LogExpectedImprovement
from botorch.models.model import Model
from torch import Tensor

from gittinseval.baselines.bo import ConfigurationBOPolicy

__all__ = ["LogEIPolicy"]


class LogEIPolicy(ConfigurationBOPolicy):
    """Selects the affordable unevaluated configuration of largest ``log EI(x)``, ``best_f`` the best observed.

    The acquisition ignores costs.  Stopping signal (Xie et al. 2025):
    ``max_x log EI(x) - log c(x) <= log lambda`` over the unevaluated
    configurations (``c(x)``: the acquisition cost of :mod:`gittinseval.baselines.bo.policy`).
    """

    name = "logei"
    label = "LogEI"

    def acquisition_values(self, model: Model, candidates: Tensor, best_f: float, costs: Tensor) -> Tensor:
        # As a Python float, BoTorch would store best_f in float32 (an error of ~1e-8).
        return LogExpectedImprovement(model, best_f=torch.tensor(best_f, dtype=torch.float64))(candidates)

    def stop_rule_fires(self, values: Tensor, best_f: float, costs: Tensor) -> bool:
        return bool((values - costs.log()).max() <= math.log(self.lam))
