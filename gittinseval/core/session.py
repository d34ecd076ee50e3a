"""One run's bookkeeping beside its policy, whichever driver feeds it scores.

A run is the same decision process whether its scores come from a complete matrix (the
simulator, :func:`~gittinseval.sim.simulator.simulate`) or from live scoring calls (the
:class:`~gittinseval.live.evaluator.Evaluator`, from its ledger).  Everything the run
decides or states besides the policy's own choice of the next request is kept here, once:

- the posterior of the arms' full-benchmark means beside the policy
  (:class:`~gittinseval.core.posterior.FiniteBenchmarkPosterior`, under the run's prior and
  the policy's cell variance), and the observed cells (:class:`~gittinseval.core.observations.ObservedCells`);
- learned costs: where the costs the policy plans with are a guess, each batch's charge goes to a
  :class:`~gittinseval.core.cost_learning.CostEstimator`, and the policy re-plans with the estimates
  before it observes the batch when one moves by more than the refresh share;
- the objective: the recommendation is the policy's own, or, for an objective the policy does
  not follow itself, the objective's choice from the posterior; under ``value`` the certificate
  and the confidence stop are of ``Zbar_k + b_k`` (the posterior shifted by the offsets);
- the certificate of the recommendation under the settings' posterior model, the anytime-valid
  eps-best statement of the arms' confidence sequences (:mod:`~gittinseval.core.anytime`), and the
  confidence stop on either.

The drivers differ only in where a batch's scores and charge come from, so two runs fed the
same scores and charges in the same order make the same decisions and statements.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gittinseval.core.anytime import AnytimeCertifier, EpsBestStatement
from gittinseval.core.certificate import Certificate, CertificateSettings, settings_from_mapping
from gittinseval.core.certifiers import Certifier, certifier_for
from gittinseval.core.confidence_stop import ConfidenceStop
from gittinseval.core.cost_learning import CostEstimator, CostLearning
from gittinseval.core.objective import Choice, Objective, shifted_posterior
from gittinseval.core.observations import ObservedCells
from gittinseval.core.posterior import FiniteBenchmarkPosterior
from gittinseval.core.protocol import EvaluationProblem, Policy, Request

__all__ = ["RunSession", "RunSettings"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSettings:
    """What a run states, recommends and learns, for both drivers (config keys ``certificate``, ``stop_when``,
    ``objective`` and ``learn_costs`` of ``conf/run_settings/default.yaml``, shared by ``gittinseval`` and
    ``gittinseval-live``).

    Attributes:
        certificate: the recommendation's certificate: level, eps, Monte Carlo samples, the posterior model
            (:data:`~gittinseval.core.certificate.CERTIFICATE_MODELS`) and the anytime statement.
        stop_when: the confidence stop (``None``: none).
        objective: what the run recommends.
        learn_costs: how the costs the policy plans with are learned from what the run is charged, where they
            are a guess: a live task's expected dollars per example, the simulator's ``cost=per_cell_learned``
            (:class:`~gittinseval.core.cost_learning.CostEstimator`).  ``None``: the policy keeps the guess.  Known
            costs are not learned: the simulator's other cost modes, a live task in examples or with reported costs.
    """

    certificate: CertificateSettings = field(default_factory=CertificateSettings)
    stop_when: ConfidenceStop | None = None
    objective: Objective = field(default_factory=Objective)
    learn_costs: CostLearning | None = field(default_factory=CostLearning)

    def __post_init__(self) -> None:
        object.__setattr__(self, "certificate", CertificateSettings.of(self.certificate))
        object.__setattr__(self, "stop_when", ConfidenceStop.of(self.stop_when))
        if not isinstance(self.objective, Objective):
            object.__setattr__(self, "objective", Objective.from_config(self.objective))
        if self.learn_costs is not None:
            learning = settings_from_mapping(CostLearning, "learn_costs", self.learn_costs)
            object.__setattr__(self, "learn_costs", learning)

    @classmethod
    def from_config(cls, cfg: Any) -> RunSettings:
        """The settings of a composed config (either CLI's): its keys of the same names, absent keys at their
        defaults (a ``null`` ``certificate`` or ``objective`` too; a ``null`` ``stop_when`` or ``learn_costs`` is
        none)."""
        return cls(**{spec.name: cfg.get(spec.name) for spec in fields(cls) if spec.name in cfg})

    @classmethod
    def defaults_as_config(cls) -> dict[str, Any]:
        """The defaults as the config values they are written as (the digest leaves these out)."""
        defaults = cls()
        objective = defaults.objective
        return {
            "certificate": asdict(defaults.certificate),
            "stop_when": None,
            "objective": {"name": objective.name, "mu": objective.mu, "eps": objective.eps, "delta": objective.delta},
            "learn_costs": asdict(defaults.learn_costs),
        }


class RunSession:
    """A policy's run: its posterior, learned costs, recommendation, certificate and confidence stop.

    Building the session resets ``policy`` on ``problem`` with ``np.random.default_rng(seed)``.
    A driver then asks the policy for requests (:meth:`select`), has them scored, and hands
    each scored batch to :meth:`observe` with what it was charged, in the policy's raw cost
    unit.  The policy never sees a request twice and the session checks that no cell is
    observed twice.

    Args:
        policy: any :class:`~gittinseval.core.protocol.Policy` (fresh or not: it is reset).
        problem: what the policy may know; its ``prior_mean`` and ``prior_var`` are the prior of
            the session's posterior, and its ``costs`` the learned costs' starting guess.
        seed: the policy's randomness.
        settings: the run's :class:`RunSettings` (``None``: the defaults).
        prices: ``[K]`` deployment prices, read by an objective other than ``accuracy``.
        guessed_costs: whether ``problem.costs`` are a guess, learned from the charges by ``settings.learn_costs``
            (``False``: they are known, and the policy keeps them).
        attributes: ``[K, D]`` integer codes of the arms' attributes (a model, a prompt) that the certificate's
            prior may share between siblings (``None``: ``problem.features``); the policy does not see them.

    Attributes:
        posterior: the posterior of the full-benchmark means (of the accuracy; see
            :meth:`certified_posterior` for the value's).
        observed: every observed cell.
        learned_costs: the cost estimator, or ``None`` (the costs are known, or ``settings.learn_costs`` is ``None``).
        certifier: the certificate's posterior model (:mod:`~gittinseval.core.certifiers`).  Under the ``value``
            objective it is the Gaussian surrogate's, whatever ``settings.certificate.model`` says: only that
            posterior shifts to the value ``Zbar_k + b_k`` (the certificate's ``model`` says which it is).
        anytime: the arms' confidence sequences (``None`` unless ``settings.certificate.anytime`` or an
            anytime confidence stop asks for them): at the stop's ``delta = 1 - prob_eps_best`` for an
            anytime stop, else at ``settings.certificate.delta``.
        kappa, cell_var: the policy's LCB weight and cell variance.
        value_offsets: ``[K]`` ``b_k`` under the ``value`` objective, else ``None``.
        recommended: the arm recommended after the last batch (``None`` before any).
        choice: the objective's last :class:`~gittinseval.core.objective.Choice` (``None`` when
            the policy's own recommendation stands).
        n_batches: batches observed.
    """

    def __init__(
        self,
        policy: Policy,
        problem: EvaluationProblem,
        *,
        seed: int,
        settings: RunSettings | None = None,
        prices: ArrayLike | None = None,
        guessed_costs: bool = False,
        attributes: ArrayLike | None = None,
    ) -> None:
        self.policy = policy
        self.problem = problem
        self.settings = RunSettings() if settings is None else settings
        objective = self.settings.objective
        n_arms = problem.costs.size
        self.prices = None if prices is None else np.asarray(prices, dtype=np.float64)
        offsets = objective.offsets(self.prices, n_arms)
        self.value_offsets: np.ndarray | None = offsets if objective.name == "value" else None
        self.chooses = objective.name != "accuracy" and not (objective.name == "value" and policy.follows_offsets)
        policy.reset(problem, np.random.default_rng(seed))
        report = policy.posterior_report()
        self.kappa = float(report.kappa)
        self.cell_var = float(report.cell_var)
        self.posterior = FiniteBenchmarkPosterior(
            n_arms, problem.n_examples, problem.prior_mean, problem.prior_var, self.cell_var
        )
        features = problem.features if attributes is None else np.asarray(attributes)
        self.observed = ObservedCells(n_arms, problem.n_examples, binary=problem.binary, features=features)
        learning = self.settings.learn_costs if guessed_costs else None
        self.learned_costs: CostEstimator | None = None if learning is None else learning.start(problem.costs)
        certificate = self.settings.certificate
        model = certificate.model
        if self.value_offsets is not None and model != "gaussian":
            log.info(
                "certificate.model=%s is of the accuracy: the value objective's certificate is the gaussian one", model
            )
            model = "gaussian"
        self.certifier: Certifier = certifier_for(certificate, model)
        stop = self.settings.stop_when
        anytime_stop = stop is not None and stop.mode == "anytime"
        self.anytime: AnytimeCertifier | None = None
        if anytime_stop or self.settings.certificate.anytime:
            delta = 1.0 - stop.prob_eps_best if anytime_stop else self.settings.certificate.delta
            self.anytime = AnytimeCertifier(n_arms, problem.n_examples, delta, offsets=self.value_offsets)
        self.recommended: int | None = None
        self.choice: Choice | None = None
        self.n_batches = 0
        self._confident: tuple[int, ConfidenceStop | None, bool] | None = None

    @property
    def n_arms(self) -> int:
        return self.posterior.mean.size

    @property
    def n_examples(self) -> int:
        return self.posterior.n_examples

    @property
    def seen(self) -> np.ndarray:
        """``[K, N]`` whether each cell is observed."""
        return self.observed.seen

    def select(self, busy: frozenset[int] | None = None) -> Request | None:
        """The policy's next request (``busy``: arms with a request in flight, for a concurrent policy)."""
        return self.policy.select() if busy is None else self.policy.select(busy)

    def observe(self, request: Request, scores: np.ndarray, charge: float) -> int:
        """The ``[size]`` scores of ``request``, charged ``charge`` (raw cost unit, every call of it).

        The charge goes to the learned costs first (the policy re-plans with them when one moved
        enough), then the policy and the posterior observe the scores.  Returns the arm
        recommended afterwards.
        """
        scores = np.asarray(scores, dtype=np.float64)
        self.observed.add(request.arm, request.examples, scores)
        learned = self.learned_costs
        if learned is not None and learned.charge(request.arm, request.size, charge):
            self.policy.update_costs(learned.planned)
        self.policy.observe(request, scores)
        self.posterior.update(request.arm, scores)
        if self.anytime is not None:
            # In the request's order: the arm's random example order, which the confidence sequence's
            # guarantee is about.
            self.anytime.update(request.arm, scores)
        self.n_batches += 1
        self.recommended = self._recommend()
        return self.recommended

    def _recommend(self) -> int:
        """The policy's recommendation, or the objective's choice from the posterior for a policy that does
        not follow the objective itself."""
        arm = int(self.policy.recommend())
        if not self.chooses:
            return arm
        self.choice = self.settings.objective.choose(self.posterior, self.prices, arm, kappa=self.kappa)
        return self.choice.arm

    def certified_posterior(self) -> FiniteBenchmarkPosterior:
        """The posterior the certificate and the confidence stop read: of ``Zbar_k + b_k`` under the ``value``
        objective (so they are of the value the run recommends by), else of the accuracy."""
        if self.value_offsets is None:
            return self.posterior
        return shifted_posterior(self.posterior, self.value_offsets)

    def certificate(self) -> Certificate | None:
        """The certificate of the recommendation (``None`` before any batch)."""
        if self.recommended is None:
            return None
        certificate = self.certifier.certify(self.certified_posterior(), self.observed, self.recommended)
        return certificate if self.anytime is None else replace(certificate, anytime=self.anytime_statement())

    def anytime_statement(self) -> EpsBestStatement | None:
        """The anytime-valid statement about the recommendation at the certificate's ``eps`` (``None`` before
        any batch, or without confidence sequences)."""
        if self.anytime is None or self.recommended is None:
            return None
        return self.anytime.statement(self.recommended, self.settings.certificate.eps)

    def confident(self, stop: ConfidenceStop | None = None) -> bool:
        """Whether ``stop`` (default: the settings' ``stop_when``; none: ``False``) is reached after the last
        batch: the recommended arm is eps-best with the stop's probability, under the certificate's posterior
        or, for an anytime stop, certified by the confidence sequences.  Checked once per batch."""
        stop = self.settings.stop_when if stop is None else stop
        if stop is None or self.recommended is None:
            return False
        cached = self._confident
        if cached is None or cached[:2] != (self.n_batches, stop):
            cached = (self.n_batches, stop, self._reached(stop))
            self._confident = cached
        return cached[2]

    def _reached(self, stop: ConfidenceStop) -> bool:
        if stop.mode == "anytime":
            if self.anytime is None or not math.isclose(self.anytime.delta, 1.0 - stop.prob_eps_best):
                have = "no confidence sequences" if self.anytime is None else f"delta = {self.anytime.delta:g}"
                raise ValueError(
                    f"an anytime stop at prob_eps_best={stop.prob_eps_best:g} needs confidence sequences at delta = "
                    f"{1.0 - stop.prob_eps_best:g}, and this run has {have}: make it the run's stop_when"
                )
            return self.anytime.reached(self.recommended, stop.eps)
        return self.certifier.stop_reached(stop, self.certified_posterior(), self.observed, self.recommended)
