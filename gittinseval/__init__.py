"""GittinsEval: cost-aware adaptive evaluation of LLM configurations with Gittins indices.

The package is in floors, each importing only the ones below it:
``utils`` -> ``data`` -> ``core`` -> policies (``baselines``) -> ``sim`` -> ``live`` ->
``results`` -> ``cli``.  The names below are the public front door.  The live
evaluator (and with it the OpenAI client) is imported only when one of its names is
first used, so that simulator processes and command-line calls do not pay for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gittinseval.core.certificate import Certificate, CertificateSettings, certify
from gittinseval.core.confidence_stop import ConfidenceStop, StopReason
from gittinseval.core.cost_learning import CostEstimator, CostLearning
from gittinseval.core.costs import CellCost, LearnedCellCost, PriceCost, UnitCost
from gittinseval.core.empirical_prior import EmpiricalPriorEstimator
from gittinseval.core.gittins import GittinsPolicy
from gittinseval.core.objective import Objective
from gittinseval.core.posterior import FiniteBenchmarkPosterior
from gittinseval.core.priors import BenchmarkPrior, EmpiricalPrior, GaussianPrior
from gittinseval.core.protocol import EvaluationProblem, Policy, RandomExampleOrder, Request
from gittinseval.core.roots import EmpiricalTargetChain, root_schedule
from gittinseval.core.session import RunSession, RunSettings
from gittinseval.data import Benchmark
from gittinseval.sim.simulator import RunResult, simulate

if TYPE_CHECKING:
    from gittinseval.live import Evaluator, evaluate

# Public names whose modules are imported on first use: name -> module.
_LAZY = {"Evaluator": "gittinseval.live", "evaluate": "gittinseval.live"}

__all__ = [
    "Benchmark",
    "BenchmarkPrior",
    "CellCost",
    "Certificate",
    "CertificateSettings",
    "ConfidenceStop",
    "CostEstimator",
    "CostLearning",
    "EmpiricalPrior",
    "EmpiricalPriorEstimator",
    "EmpiricalTargetChain",
    "EvaluationProblem",
    "Evaluator",
    "FiniteBenchmarkPosterior",
    "GaussianPrior",
    "GittinsPolicy",
    "LearnedCellCost",
    "Objective",
    "Policy",
    "PriceCost",
    "RandomExampleOrder",
    "Request",
    "RunResult",
    "RunSession",
    "RunSettings",
    "StopReason",
    "UnitCost",
    "certify",
    "evaluate",
    "root_schedule",
    "simulate",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later look-ups skip this hook
        return value
    raise AttributeError(f"module 'gittinseval' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
