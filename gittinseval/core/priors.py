"""Benchmark-level Gaussian priors on an arm's mean score (``prior=`` config group)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gittinseval.core.empirical_prior import EmpiricalPriorEstimator
from gittinseval.data import Benchmark
from gittinseval.utils.validation import positive_float

__all__ = ["BenchmarkPrior", "EmpiricalPrior", "GaussianPrior"]


@dataclass(frozen=True)
class GaussianPrior:
    """``N(mean, var)`` shared by every arm; ``var`` must be positive."""

    mean: float = 0.5
    var: float = 0.04
    name: str = "general"

    def __post_init__(self) -> None:
        # Every benchmark's scores lie in [0, 1], and so does an arm's mean.
        if not (math.isfinite(self.mean) and 0 <= self.mean <= 1):
            raise ValueError(f"prior.mean must lie in [0, 1] (scores are in [0, 1]), got {self.mean!r}")
        positive_float("prior variance", self.var)

    def resolve(self, benchmark: Benchmark | None) -> GaussianPrior:
        return self


@dataclass(frozen=True)
class BenchmarkPrior:
    """The benchmark's data-specific prior (paper Table "prior settings").

    ``mean`` or ``var``, when given, override the benchmark's value; with no
    benchmark (a live task that replays none) both must be given.
    """

    mean: float | None = None
    var: float | None = None
    name: str = "specific"

    def resolve(self, benchmark: Benchmark | None) -> GaussianPrior:
        specific = None if benchmark is None else benchmark.specific_prior
        if specific is None and (self.mean is None or self.var is None):
            source = "no benchmark is replayed" if benchmark is None else f"benchmark {benchmark.name!r}"
            fixes = "set prior.mean and prior.var, or use prior=general"
            if benchmark is not None and benchmark.prices is None:
                # A user's own matrix often lacks both defaults (prior=specific, cost=aware): name both
                # fixes at once, rather than have the cost fail next, once the prior is fixed.
                fixes += ("; it has no prices either: with cost=aware (the default) give "
                          "benchmark.costs=<prices file>, or use cost=unit")
            raise ValueError(f"prior={self.name} needs a data-specific prior and {source} has none; {fixes}")
        default_mean, default_var = specific or (self.mean, self.var)
        return GaussianPrior(
            mean=default_mean if self.mean is None else self.mean,
            var=default_var if self.var is None else self.var,
            name=self.name,
        )


@dataclass(frozen=True)
class EmpiricalPrior:
    """A shared prior learned from the evaluation itself (GittinsEval-EB).

    The problem's prior is the starting prior ``N(mean, var)`` (default: the general
    prior), which is also the target of the estimator's shrinkage.  The policy
    learns from there with ``estimator``: in the ``gittinseval`` config,
    ``conf/policy/gittins.yaml`` takes ``prior.estimator`` when this prior is
    chosen; in Python pass ``GittinsPolicy(prior_estimator=prior.estimator)``.
    Policies that use no prior ignore it.
    """

    mean: float = 0.5
    var: float = 0.04
    estimator: EmpiricalPriorEstimator = field(default_factory=EmpiricalPriorEstimator)
    name: str = "empirical"

    def resolve(self, benchmark: Benchmark | None) -> GaussianPrior:
        return GaussianPrior(mean=self.mean, var=self.var, name=self.name)
