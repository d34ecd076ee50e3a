"""The protocol every evaluation policy implements.

A policy is evaluated on an :class:`EvaluationProblem` (shapes, costs, budget and
prior, never the scores).  The loop that drives it, whether the simulator or a
live evaluator, is

    policy.reset(problem, rng)
    while budget left:
        request = policy.select()          # which arm, on which examples
        if request is None: break          # the policy has nothing more to ask
        scores = evaluate(request)         # one score in [0, 1] per example
        policy.observe(request, scores)
        policy.recommend()                 # anytime recommendation (an arm id)
        policy.stop_signal                 # the policy's own stopping signal

Costs learned during a run (:mod:`gittinseval.core.cost_learning`): before observing a
batch, a driver may hand the policy new expected costs per example,
``policy.update_costs(costs)``; a policy that plans with costs plans with these from then
on, and one that ignores costs needs no code for it.

Bandit policies pull a few examples of one arm per request; configuration-level
policies request every example of an arm at once.  Both are a :class:`Request`.

Requests in flight.  A live driver may select again before earlier requests are
observed.  It then calls ``select(busy)`` with the arms that have a request in
flight, and the policy must not choose one of them; a request the driver will
not complete goes back with ``cancel(request)``, after which the policy is as
if it had never selected it.  Only policies that declare ``concurrent = True``
are asked with a non-empty ``busy``; the others are driven one request at a
time, so ``select()`` without arguments is all they implement.  The simulator
always calls ``select()``.  Policies that cannot run on live scores at all say
why in ``live_limitation`` (see :func:`check_live_support`).
"""

from __future__ import annotations

import functools
import logging
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from gittinseval.core.params import get_params
from gittinseval.utils.validation import positive_finite_values, positive_float, positive_int

__all__ = [
    "FALLBACK_BATCH_SIZE",
    "argmax_by_priority",
    "argmax_in_priority_order",
    "EvaluationProblem",
    "Policy",
    "PosteriorReport",
    "RandomExampleOrder",
    "Request",
    "check_batch_size",
    "check_live_support",
    "excluding",
    "optional_batch_size",
    "resolve_batch_size",
    "validate_scores",
]

log = logging.getLogger(__name__)

FALLBACK_BATCH_SIZE = 8
"""Batch size of a policy configured without one on a benchmark without a default."""


@dataclass(frozen=True)
class EvaluationProblem:
    """What a policy may know about the evaluation before it starts.

    Attributes:
        n_examples: ``N``, examples per arm.
        costs: ``[K]`` raw cost of evaluating one example of each arm (all ones
            under unit cost).
        budget: spend limit, in the units of ``costs``.
        prior_mean: ``mu_0``, the benchmark-level prior mean of an arm's score.
        prior_var: ``v_0 > 0``, the prior variance.
        binary: whether every score is 0 or 1 (keyword-only and required: a
            policy for binary scores must not run on continuous ones by default).
        features: ``[K, D]`` integer categorical codes of each arm's configuration,
            or ``None``.
        default_batch_size: the benchmark's default batch size, for policies
            configured without one (see :func:`resolve_batch_size`).
        offsets: ``[K]`` known amount ``b_k`` added to each arm's score in what the run
            optimises (the ``value`` objective's ``-mu p_k``, see
            :mod:`~gittinseval.core.objective`), or ``None`` (zeros).  Read only by a
            policy with ``follows_offsets = True``.
    """

    n_examples: int
    costs: np.ndarray
    budget: float
    prior_mean: float = 0.5
    prior_var: float = 0.04
    binary: bool = field(kw_only=True)
    features: np.ndarray | None = None
    default_batch_size: int | None = None
    offsets: np.ndarray | None = None

    def __post_init__(self) -> None:
        costs = np.asarray(self.costs, dtype=np.float64)
        if costs.ndim != 1 or costs.size == 0:
            raise ValueError(f"costs must be a non-empty 1-D array, got shape {costs.shape}")
        costs = positive_finite_values(costs, "costs", item="arms")
        positive_int("n_examples", self.n_examples)
        positive_float("budget", self.budget)
        if not math.isfinite(self.prior_mean):
            raise ValueError(f"prior_mean must be finite, got {self.prior_mean!r}")
        positive_float("prior_var", self.prior_var)
        if self.features is not None and len(self.features) != costs.size:
            raise ValueError(f"features has {len(self.features)} rows for {costs.size} arms")
        object.__setattr__(self, "costs", costs)
        if self.offsets is not None:
            offsets = np.asarray(self.offsets, dtype=np.float64)
            if offsets.shape != costs.shape or not np.all(np.isfinite(offsets)):
                raise ValueError(f"offsets must be {costs.size} finite numbers, one per arm, got {self.offsets!r}")
            object.__setattr__(self, "offsets", offsets)

    @property
    def n_arms(self) -> int:
        return self.costs.size

    @property
    def exhaustive_cost(self) -> float:
        """Cost of evaluating every arm on every example, ``N * sum_k c_k``."""
        return float(self.n_examples * self.costs.sum())


@dataclass(frozen=True)
class Request:
    """Evaluate arm ``arm`` on the example ids ``examples`` (distinct, unseen)."""

    arm: int
    examples: np.ndarray = field(repr=False)

    @property
    def size(self) -> int:
        return len(self.examples)


def check_batch_size(batch_size: int) -> int:
    """A batch size as an int, or a ``ValueError`` unless it is a positive integer.

    Policies call it on their configured batch size so that a bad config fails when
    the policy is built; :func:`resolve_batch_size` also checks it against ``N``.
    """
    positive_int("batch_size", batch_size)
    return int(batch_size)


def optional_batch_size(batch_size: int | None) -> int | None:
    """A batch size that may be ``None`` (the benchmark's default), checked as in :func:`check_batch_size`."""
    return None if batch_size is None else check_batch_size(batch_size)


def resolve_batch_size(configured: int | None, problem: EvaluationProblem) -> int:
    """The batch size to use: the configured one, else the benchmark's default, else 8.

    A configured size must be an integer in ``[1, N]`` (a ``ValueError`` names ``policy.batch_size``
    and the largest that fits).  The default is cut to ``N`` on a task of fewer examples, with a
    log line: a small task, or the examples every arm has of a live run's export, runs without a
    setting.  A run whose default fits is as it was, and no run had a default larger than ``N``
    (it failed), so no run changes.
    """
    n_examples = problem.n_examples
    if configured is None:
        default = check_batch_size(problem.default_batch_size or FALLBACK_BATCH_SIZE)
        if default > n_examples:
            _say_default_batch_cut(default, n_examples)
            return n_examples
        return default
    size = check_batch_size(configured)
    if size > n_examples:
        raise ValueError(
            f"policy.batch_size ({size}) is larger than the number of examples N = {n_examples}; "
            f"give policy.batch_size={n_examples} or less"
        )
    return size


@functools.cache
def _say_default_batch_cut(default: int, n_examples: int) -> None:
    # Once a process for each size: a sweep's trials and a live run's resumes would repeat it.
    log.info("the default batch size %d is larger than the task's N = %d examples: batches of %d "
             "(policy.batch_size sets another)", default, n_examples, n_examples)


def validate_scores(request: Request, scores: Any) -> np.ndarray:
    """Scores of a request as float64, or a ``ValueError`` that says what is wrong.

    Drivers call it once, before :meth:`Policy.observe`: the live evaluator on every
    told batch; the simulator's scores come from a :class:`~gittinseval.data.Benchmark`,
    whose whole matrix was checked when it was built.  Policies do not check again.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != (request.size,):
        raise ValueError(
            f"arm {request.arm}: expected {request.size} scores for the requested examples, got shape {scores.shape}"
        )
    # min and max propagate NaN, which fails both comparisons: two passes in the common case.
    if scores.size and not (scores.min() >= 0 and scores.max() <= 1):
        bad = ~np.isfinite(scores) | (scores < 0) | (scores > 1)
        raise ValueError(
            f"arm {request.arm}: scores must be finite and in [0, 1]; got "
            f"{scores[bad][:5].tolist()} for examples {request.examples[bad][:5].tolist()}"
        )
    return scores


@dataclass(frozen=True)
class PosteriorReport:
    """How a driver reports a policy's arms under the run's finite-benchmark posterior (the same for every policy).

    ``cell_var`` is the working variance of one score, tau_cell^2, and ``kappa`` the
    width of the lower confidence bound ``M - kappa sqrt(V)``.  The defaults hold for
    any policy: 0.25 is the largest variance of a score in [0, 1], and kappa = 1 the LCB.
    """

    cell_var: float = 0.25
    kappa: float = 1.0


class Policy(ABC):
    """Adaptive evaluation policy: select / observe / recommend / stop signal.

    Subclasses set the class attributes ``name`` (the ``policy=`` config name),
    ``label`` (its name in figures) and, if they ignore the prior,
    ``uses_prior = False``.  As in scikit-learn, they take their hyperparameters
    in ``__init__``, keep each under its own name (``self.lam = lam``), so that
    :meth:`get_params` reads them from the signature, and keep all run state in
    attributes created by :meth:`reset`.  ``observe`` receives scores already
    checked by the driver (:func:`validate_scores`).  A policy with an optional
    ``batch_size`` resolves it with :meth:`batch_size_for`.

    Capabilities (class attributes, read by live drivers):

    - ``concurrent``: ``select(busy)`` never returns an arm in ``busy``, so a
      driver may keep one request per arm in flight.  ``False``: the driver keeps
      at most one request in flight.
    - ``live_limitation``: why the policy cannot evaluate live, or ``None``.
    - ``requires_binary``: the policy models 0/1 scores only.
    - ``follows_offsets``: the policy allocates, recommends and stops on each arm's score
      plus the problem's known ``offsets`` (GittinsEval).  A driver recommends for the
      other policies from the run's posterior (:mod:`~gittinseval.core.objective`).

    A policy that draws its examples from a :class:`RandomExampleOrder` keeps it
    in ``self.order``; :meth:`cancel` then needs no code of its own.
    """

    name: str = "policy"
    label: str = "Policy"
    uses_prior: ClassVar[bool] = True
    """Whether the policy reads ``prior_mean``/``prior_var``; a run of one that does
    not never asks the benchmark for a data-specific prior."""
    concurrent: ClassVar[bool] = False
    live_limitation: ClassVar[str | None] = None
    requires_binary: ClassVar[bool] = False
    follows_offsets: ClassVar[bool] = False
    order: RandomExampleOrder | None = None

    @abstractmethod
    def reset(self, problem: EvaluationProblem, rng: np.random.Generator) -> None:
        """Start a new run on ``problem``; all randomness comes from ``rng``."""

    @abstractmethod
    def select(self, busy: frozenset[int] = frozenset()) -> Request | None:
        """Next request, or ``None`` when the policy has nothing more to evaluate.

        ``busy``: arms with a request in flight, never chosen (non-empty only for
        ``concurrent`` policies; ``None`` may then also mean every candidate is busy).
        """

    @property
    def cancellable(self) -> bool:
        """Whether :meth:`cancel` can take a request back (it has an example order or its own ``cancel``)."""
        return self.order is not None or type(self).cancel is not Policy.cancel

    def cancel(self, request: Request) -> None:
        """Take back a selected, unobserved request: afterwards the policy is as if it
        had never selected it.  The default gives the examples back to ``self.order``."""
        if self.order is None:
            raise NotImplementedError(f"policy {self.name!r} cannot take back a request it selected")
        self.order.give_back(request.arm, request.examples)

    @abstractmethod
    def observe(self, request: Request, scores: np.ndarray) -> None:
        """Record the ``[request.size]`` scores of a request made by :meth:`select`."""

    @abstractmethod
    def recommend(self) -> int:
        """The arm the policy would recommend now."""

    @property
    def stop_signal(self) -> bool:
        """True from the first time the policy's own stopping rule fires."""
        return False

    def update_costs(self, costs: np.ndarray) -> None:  # noqa: B027 - deliberately empty: a cost-unaware policy
        """Plan with the ``[K]`` expected costs per example ``costs`` (raw units, as ``problem.costs``) from now on.

        A driver that learns the costs (:class:`~gittinseval.core.cost_learning.CostEstimator`)
        calls it when an estimate has moved; the problem's ``costs`` and ``budget`` stay those
        of :meth:`reset`, and nothing observed is replayed.  The default does nothing: a
        policy whose allocation ignores costs.  A cost-aware policy overrides it.
        """

    resolved_batch_size: int | None = None
    """The batch size of the current run, set by :meth:`batch_size_for` in :meth:`reset`."""

    def get_params(self) -> dict[str, Any]:
        """The constructor's arguments by name (nested objects as ``_target_`` dicts): they rebuild the policy."""
        return get_params(self)

    def batch_size_for(self, problem: EvaluationProblem) -> int:
        """This run's batch size: ``self.batch_size`` if set, else the benchmark's default, else 8."""
        self.resolved_batch_size = resolve_batch_size(self.batch_size, problem)
        return self.resolved_batch_size

    def hyperparameters(self) -> dict[str, Any]:
        """What each run's summary records: :meth:`get_params` with the batch size this run resolved.

        A subclass adds facts recorded beside the parameters by extending this dict.
        """
        params = self.get_params()
        if "batch_size" in params and self.resolved_batch_size is not None:
            params["batch_size"] = self.resolved_batch_size
        return params

    def posterior_report(self) -> PosteriorReport:
        """The working variance and LCB width a driver reports this policy's arms with; a policy
        whose recommendation uses its own (GittinsEval) returns them."""
        return PosteriorReport()

    def display_label(self, prior_name: str | None = None) -> str:
        """Name of this configured policy in figures and summaries."""
        return self.label

    def diagnostics(self) -> dict[str, Any]:
        """Facts about the finished run recorded in its summary (JSON values)."""
        return {}


def argmax_by_priority(values: np.ndarray, priority: np.ndarray) -> int:
    """Index of the largest value; among exact ties, the one with the lowest priority.

    ``priority`` is a per-run random ranking of the arms, so ties are broken at
    random but the same way whenever they recur.  Returns -1 if every value is
    ``-inf``.
    """
    best = values.max()
    if best == -np.inf:
        return -1
    return int(np.argmin(np.where(values == best, priority, priority.size)))


def argmax_in_priority_order(values: np.ndarray, order: np.ndarray) -> int:
    """:func:`argmax_by_priority` with ``order = np.argsort(priority)`` given: the first
    largest value in that order (``argmax`` returns the first of equal maxima).

    Two passes over ``values`` instead of four, for the policies that call it every step.
    """
    arm = int(order[values[order].argmax()])
    return -1 if values[arm] == -np.inf else arm


def excluding(values: np.ndarray, busy: frozenset[int]) -> np.ndarray:
    """``[K]`` ``values`` with the ``busy`` arms set to ``-inf`` (a copy only if any is busy)."""
    if not busy:
        return values
    values = values.copy()
    values[list(busy)] = -np.inf
    return values


def check_live_support(policy: Policy, problem: EvaluationProblem) -> None:
    """Raise a ``ValueError`` naming the reason if ``policy`` cannot evaluate ``problem`` live."""
    if policy.live_limitation is not None:
        raise ValueError(f"policy {policy.name!r} cannot run a live evaluation: {policy.live_limitation}")
    if policy.requires_binary and not problem.binary:
        raise ValueError(
            f"policy {policy.name!r} needs binary (0/1) scores, and this live task does not declare them; "
            "declare binary=True (LiveTask.binary) if score_fn returns only 0 and 1, or choose another policy"
        )


class RandomExampleOrder:
    """Independent uniformly random order of the ``N`` examples for each arm.

    ``take(arm, b)`` hands out the next ``b`` unseen examples of ``arm``, so an
    example is never evaluated twice.  Shapes: ``order [K, N]``, ``n_taken [K]``.
    """

    def __init__(self, n_arms: int, n_examples: int, rng: np.random.Generator) -> None:
        base = np.broadcast_to(np.arange(n_examples, dtype=np.int64), (n_arms, n_examples))
        self.order = rng.permuted(base, axis=1)
        self.n_taken = np.zeros(n_arms, dtype=np.int64)

    def remaining(self, arm: int) -> int:
        return self.order.shape[1] - int(self.n_taken[arm])

    def take(self, arm: int, size: int) -> np.ndarray:
        start = int(self.n_taken[arm])
        if size < 1 or start + size > self.order.shape[1]:
            raise ValueError(f"arm {arm} has {self.remaining(arm)} unseen examples, {size} requested")
        self.n_taken[arm] = start + size
        return self.order[arm, start : start + size]

    def give_back(self, arm: int, examples: np.ndarray) -> None:
        """Undo the latest ``take(arm, len(examples))``, which must have returned ``examples``."""
        start = int(self.n_taken[arm]) - len(examples)
        if start < 0 or not np.array_equal(self.order[arm, start : int(self.n_taken[arm])], examples):
            raise ValueError(f"arm {arm}: examples {np.asarray(examples)[:5].tolist()} are not its latest batch")
        self.n_taken[arm] = start
