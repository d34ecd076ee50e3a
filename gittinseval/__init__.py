"""GittinsEval: cost-aware adaptive evaluation of LLM configurations with Gittins indices."""

from gittinseval.costs import PriceCost, UnitCost
from gittinseval.data import Benchmark
from gittinseval.empirical_prior import EmpiricalPriorEstimator
from gittinseval.gittins import GittinsPolicy
from gittinseval.live import Evaluator, evaluate
from gittinseval.posterior import FiniteBenchmarkPosterior
from gittinseval.priors import BenchmarkPrior, EmpiricalPrior, GaussianPrior
from gittinseval.protocol import EvaluationProblem, Policy, RandomExampleOrder, Request
from gittinseval.roots import EmpiricalTargetChain, root_schedule
from gittinseval.simulator import RunResult, simulate

__all__ = [
    "Benchmark",
    "BenchmarkPrior",
    "EmpiricalPrior",
    "EmpiricalPriorEstimator",
    "EmpiricalTargetChain",
    "EvaluationProblem",
    "Evaluator",
    "FiniteBenchmarkPosterior",
    "GaussianPrior",
    "GittinsPolicy",
    "Policy",
    "PriceCost",
    "RandomExampleOrder",
    "Request",
    "RunResult",
    "UnitCost",
    "evaluate",
    "root_schedule",
    "simulate",
]

__version__ = "0.1.0"
