"""One object for the settings of a live run, validated once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gittinseval.core.certificate import CertificateSettings
from gittinseval.core.confidence_stop import ConfidenceStop
from gittinseval.core.cost_learning import CostLearning
from gittinseval.core.gittins import GittinsPolicy
from gittinseval.core.objective import Objective
from gittinseval.core.priors import GaussianPrior
from gittinseval.core.protocol import Policy, Request
from gittinseval.core.session import RunSettings
from gittinseval.utils.validation import non_negative_float, non_negative_int, positive_float, positive_int

__all__ = ["LiveConfig"]


@dataclass(frozen=True)
class LiveConfig:
    """Everything about a live run but the task: the policy and its prior, the money, the store and the driving.

    Built once, from a composed ``gittinseval-live`` config (:func:`~gittinseval.live.app.run_live`) or
    from Python arguments, and handed unchanged to :func:`~gittinseval.live.evaluate_async`
    and :class:`~gittinseval.live.Evaluator`.  Every value is checked here, when the
    object is built, and nowhere else.

    Attributes:
        budget_usd: the spend limit in dollars, counted over every session of the
            store (with ``costs="unit"``, every example costs 1 and this counts
            examples); ``None``: no limit, the run ends when the policy has nothing
            more to ask.  Budget-planning policies (SySRs, PromptEval, UCB-E-LRF) plan
            for it in their raw cost unit (:class:`~gittinseval.core.protocol.EvaluationProblem`'s
            ``budget``), or for the exhaustive cost without one.
        policy: a fresh live-capable policy (the evaluator resets it); default GittinsEval.
        prior: the Gaussian prior of an arm's mean score (resolve a ``BenchmarkPrior`` first).
        seed: the policy's randomness (example order, tie-breaking); part of the store.
        store: the SQLite file of the run (created, or resumed), or ``None`` to keep
            the run in memory.
        fork: a new store for this run that reuses nothing of ``store`` (an existing
            store made with other settings, which a resume refuses); its ``meta``
            records ``forked_from`` when ``store`` exists.  Once made, rerunning with
            the same ``fork`` resumes it.  A fork that is ``store`` itself is refused.
        concurrency: scoring calls in flight (one per arm; 1 for policies that are
            not concurrent).
        stop_at_signal: also stop when the policy's stopping signal fires.
        certificate: level, eps and Monte Carlo samples of the recommendation's certificate
            (:class:`~gittinseval.core.certificate.CertificateSettings`, or a mapping of them).
        stop_when: a :class:`~gittinseval.core.confidence_stop.ConfidenceStop` (or a mapping, e.g.
            ``{"prob_eps_best": 0.95, "eps": 0.01}``): also stop once the recommended arm is eps-best
            with that posterior probability; ``None``: no confidence stop.
        learn_costs: how each arm's expected cost per example is learned from what its
            told requests were charged (:class:`~gittinseval.core.cost_learning.CostEstimator`;
            the policy re-plans when an estimate moves by more than the refresh share);
            ``None``: the policy keeps the task's expected costs.  Only a task in dollars
            learns: under unit costs every example is charged 1, and with costs reported
            by ``score_fn`` the policy plans with equal costs.  The ledger and the budget
            are the same either way: spend is what the calls were charged.
        max_retries: retries of a failing scoring call before the run stops.
        retry_backoff: seconds before the first retry, doubling after each.
        progress: show a progress bar.
        logger: an object of the ``logger=`` group (``WandbLogger``, ``NullLogger``) or ``None``.
        log_config: the config a W&B run records.
        log_dir: where a W&B run is written (default: the store's folder, else the
            current one).
        on_tell: ``on_tell(request, scores, cost)`` after each tell.
        objective: what the run recommends (:class:`~gittinseval.core.objective.Objective`).
            Live, an arm's deployment price is its expected dollars per example (per
            request), so ``value``'s ``mu`` is in score units per dollar per request;
            a task without expected dollars (``costs="unit"`` or reported costs) has
            no prices, and only ``accuracy`` applies.  A non-default objective is part
            of the store.
    """

    budget_usd: float | None = None
    policy: Policy = field(default_factory=GittinsPolicy)
    prior: GaussianPrior = field(default_factory=GaussianPrior)
    seed: int = 0
    store: Path | None = None
    fork: Path | None = None
    concurrency: int = 1
    stop_at_signal: bool = False
    # Live, the anytime-valid statement is stated beside the posterior certificate (conf/run_settings/live.yaml).
    certificate: CertificateSettings = field(default_factory=lambda: CertificateSettings(anytime=True))
    stop_when: ConfidenceStop | None = None
    learn_costs: CostLearning | None = field(default_factory=CostLearning)
    max_retries: int = 3
    retry_backoff: float = 1.0
    progress: bool = True
    logger: Any = None
    log_config: dict[str, Any] | None = None
    log_dir: Path | None = None
    on_tell: Callable[[Request, np.ndarray, float], None] | None = None
    objective: Objective = field(default_factory=Objective)

    def __post_init__(self) -> None:
        checked = {
            "budget_usd": None if self.budget_usd is None else positive_float("budget_usd", self.budget_usd),
            "seed": non_negative_int("seed", self.seed),
            "store": None if self.store is None else Path(self.store),
            "fork": None if self.fork is None else Path(self.fork),
            "concurrency": positive_int("concurrency", self.concurrency),
            "stop_at_signal": bool(self.stop_at_signal),
            "certificate": CertificateSettings.of(self.certificate),
            "stop_when": ConfidenceStop.of(self.stop_when),
            "max_retries": non_negative_int("max_retries", self.max_retries),
            "retry_backoff": non_negative_float("retry_backoff", self.retry_backoff),
            "progress": bool(self.progress),
            "log_dir": None if self.log_dir is None else Path(self.log_dir),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        if not isinstance(self.policy, Policy):
            raise ValueError(f"policy must be a gittinseval.core.protocol.Policy, got {type(self.policy).__name__}")
        if not isinstance(self.objective, Objective):
            raise ValueError(f"objective must be a gittinseval.core.objective.Objective, got {self.objective!r}")
        if self.learn_costs is not None and not isinstance(self.learn_costs, CostLearning):
            raise ValueError(f"learn_costs must be a CostLearning or None, got {self.learn_costs!r}")
        if not isinstance(self.prior, GaussianPrior):
            raise ValueError(f"prior must be a GaussianPrior (resolve a BenchmarkPrior first), got {self.prior!r}")
        if self.fork is not None and self.store is not None and self.fork.resolve() == self.store.resolve():
            raise ValueError(f"fork={self.fork} is the store it forks: give the fork a path of its own")

    @property
    def run_settings(self) -> RunSettings:
        """What the run states, recommends and learns, as the simulator's runs have it."""
        return RunSettings(self.certificate, self.stop_when, self.objective, self.learn_costs)

    @property
    def run_store(self) -> Path | None:
        """The store this run reads and writes: the fork if there is one, else ``store``."""
        return self.store if self.fork is None else self.fork
