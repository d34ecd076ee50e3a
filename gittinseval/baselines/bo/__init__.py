"""Configuration-level Bayesian optimisation: the policy and the surrogate shared by PBGI, LogEI and LogEIPC.

- :mod:`~gittinseval.baselines.bo.policy`: the policy (initial design, one whole configuration
  per step by the subclass's acquisition, the budget rule, the stopping signal, fit failures);
- :mod:`~gittinseval.baselines.bo.surrogate`: the all-categorical GP, its closed-form posterior
  and fit objective, and BoTorch's fit of it.

The names below are importable from here; the acquisitions are :mod:`~gittinseval.baselines.pbgi`,
:mod:`~gittinseval.baselines.logei` and :mod:`~gittinseval.baselines.logeipc`.
"""

from gittinseval.baselines.bo.policy import ConfigurationBOPolicy, initial_design_size
from gittinseval.baselines.bo.surrogate import (
    DTYPE,
    FIT_ERRORS,
    CategoricalGP,
    CategoricalLossClosure,
    categorical_correlation,
    fit_mixed_gp,
    hyperparameters_of,
    mismatch_of,
    mixed_gp,
)

__all__ = [
    "DTYPE",
    "FIT_ERRORS",
    "CategoricalGP",
    "CategoricalLossClosure",
    "ConfigurationBOPolicy",
    "categorical_correlation",
    "fit_mixed_gp",
    "hyperparameters_of",
    "initial_design_size",
    "mismatch_of",
    "mixed_gp",
]
