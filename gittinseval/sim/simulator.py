"""Replay a policy on a complete response matrix (the paper's offline protocol)."""

from __future__ import annotations

import gzip
import io
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow
import pyarrow.csv
from tqdm.auto import tqdm

from gittinseval.core.cost_learning import CostPlan
from gittinseval.core.priors import GaussianPrior
from gittinseval.core.protocol import EvaluationProblem, Policy, Request
from gittinseval.core.session import RunSession, RunSettings
from gittinseval.data import Benchmark
from gittinseval.sim.certificate_record import CertificateRecord, stop_record
from gittinseval.utils.validation import fraction_in_unit_interval, positive_finite_values

__all__ = ["REPORT_PERCENTS", "TRACE_COLUMNS", "TRACE_FILE", "RunResult", "regret_at", "simulate"]

TRACE_COLUMNS = ("step", "arm", "batch_size", "cost", "cost_pct", "recommended", "regret")
TRACE_FILE = "trace.csv.gz"
# Runs saved before traces were compressed; still read, so old sweeps stay reportable.
LEGACY_TRACE_FILE = "trace.csv"
REPORT_PERCENTS = (1, 2, 5, 10)
# Benchmark facts that reports group by (MMLU subject, difficulty and size buckets; matrix seed).
BENCHMARK_FACTS = ("subject", "difficulty", "size", "matrix_seed")


@dataclass
class RunResult:
    """One run: its per-batch trace and its summary.

    ``trace`` maps each name of :data:`TRACE_COLUMNS` to an array of one entry per
    batch: the 1-based step, the arm evaluated, the batch size, the cumulative raw
    cost after the batch, that cost as a % of the exhaustive cost, the recommended
    arm after the batch and its simple regret ``max_k Zbar_k - Zbar_rec``.
    """

    trace: dict[str, np.ndarray] = field(repr=False)
    summary: dict[str, Any]
    reused: bool = False
    """True for a finished run read back instead of run again (a re-run sweep skipped it)."""

    def save(self, directory: str | Path) -> None:
        """Write ``trace.csv.gz`` (gzipped CSV, header :data:`TRACE_COLUMNS`) and ``summary.json``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        formats = {"cost": "%.10g", "cost_pct": "%.10g", "regret": "%.10g"}
        columns = [self.trace[name] for name in TRACE_COLUMNS]
        # mtime=0: the same run gives the same bytes.
        with gzip.GzipFile(directory / TRACE_FILE, "wb", compresslevel=6, mtime=0) as raw:
            with io.TextIOWrapper(raw, encoding="ascii") as handle:
                handle.write(",".join(TRACE_COLUMNS) + "\n")
                if len(columns[0]):
                    # np.savetxt's text, row by row with one format, written at once (savetxt
                    # writes each row through its own file call, several times slower).
                    row_format = ",".join(formats.get(name, "%d") for name in TRACE_COLUMNS)
                    table = np.column_stack([c.astype(np.float64) for c in columns])
                    handle.write("".join(row_format % tuple(row) + "\n" for row in table.tolist()))
        # summary.json marks a finished run (sweeps skip it on a re-run), so it is written
        # last and whole: a run killed mid-save leaves no summary.json at all.
        partial = directory / "summary.json.partial"
        partial.write_text(json.dumps(self.summary, indent=2) + "\n")
        partial.replace(directory / "summary.json")

    @staticmethod
    def trace_path(directory: str | Path) -> Path | None:
        """The trace file of the run saved in ``directory`` (``None`` if it has none)."""
        for name in (TRACE_FILE, LEGACY_TRACE_FILE):
            if (Path(directory) / name).is_file():
                return Path(directory) / name
        return None

    @classmethod
    def load(cls, directory: str | Path) -> RunResult:
        directory = Path(directory)
        summary = json.loads((directory / "summary.json").read_text())
        trace_path = cls.trace_path(directory)
        if trace_path is None:
            raise FileNotFoundError(f"{directory} has summary.json but no {TRACE_FILE}")
        # Arrow's CSV reader (gzip by the file name) is several times faster than np.loadtxt,
        # which matters when a report reads thousands of runs.
        as_float = pyarrow.csv.ConvertOptions(column_types=dict.fromkeys(TRACE_COLUMNS, pyarrow.float64()))
        table = pyarrow.csv.read_csv(trace_path, convert_options=as_float)
        trace = {name: table.column(name).to_numpy() for name in TRACE_COLUMNS}
        for name in ("step", "arm", "batch_size", "recommended"):
            trace[name] = trace[name].astype(np.int64)
        return cls(trace=trace, summary=summary)


def regret_at(cost_pct: np.ndarray, regret: np.ndarray, percent: float) -> float | None:
    """Regret after the last batch whose cumulative cost is at most ``percent`` %."""
    position = _last_position(cost_pct, percent)
    return None if position is None else float(regret[position])


def simulate(
    benchmark: Benchmark,
    policy: Policy,
    costs: np.ndarray,
    prior: GaussianPrior,
    *,
    budget_fraction: float = 0.10,
    seed: int = 0,
    settings: RunSettings | None = None,
    cell_costs: np.ndarray | None = None,
    cost_plan: CostPlan | None = None,
    cost_mode: str = "custom",
    prior_name: str | None = None,
    progress: bool = False,
    checkpoint_certificates: bool = False,
    compare_certificates: tuple[str, ...] = (),
    record_arm_spend: bool = False,
) -> RunResult:
    """Run ``policy`` on ``benchmark`` until its spend reaches the budget.

    The budget is ``budget_fraction`` of the exhaustive cost ``N * sum_k c_k``; it
    is checked after each batch, so the last batch may cross it.  The run goes on
    past the policy's stopping signal and records the cost and the wall time at which it fired, and
    likewise past the confidence stop ``settings.stop_when`` (``confidence_stop`` in the
    summary: the step, cost and regret at which the recommended arm was first
    eps-best with the required posterior probability).  It ends early only if the
    policy has nothing left to request.  A benchmark of one arm is refused: there is
    nothing to compare.  The run's bookkeeping (posterior, learned costs, recommendation
    under the objective, certificate, confidence stop) is a
    :class:`~gittinseval.core.session.RunSession`, the live evaluator's too.

    The summary's ``certificate`` is the final recommendation's
    (:func:`~gittinseval.core.certificate.certify`, with the run's prior and the policy's
    cell variance, whichever policy ran), with ``true_mean``, the recommended arm's
    full-benchmark mean, which only a simulation knows: it says whether the interval
    covered it.  With ``checkpoint_certificates`` the summary's ``certificates`` adds the
    certificate of the recommendation after the last batch at or below each reported share
    of the exhaustive cost (``"1pct"``, ..., as ``regret_at_*``) and at the policy's stopping
    signal (``"stop"``), each with ``true_mean`` and the recommendation's ``regret``: what a
    calibration study of the certificate needs (``None`` where there is no such batch).
    With ``compare_certificates`` (posterior models, :data:`~gittinseval.core.certificate.CERTIFICATE_MODELS`)
    the summary's ``model_certificates`` maps each model to the same checkpoint certificates under it,
    and, with a confidence stop, ``model_stops`` maps each model (and ``"anytime"``, when the run keeps
    confidence sequences at the stop's ``delta``) to where that stop would have fired, as
    ``confidence_stop``: every model's statements from one run, side by side
    (:class:`~gittinseval.sim.certificate_record.CertificateRecord`).
    With ``record_arm_spend`` the summary's ``arm_spend`` maps each reported share
    (``"1pct"``, ...) to the ``[K]`` spend on each arm over the batches at or below it, with
    ``arm_means`` (``[K]`` the full-benchmark means the regret is of), ``arm_prices`` (``[K]`` the
    benchmark's price of each arm, whatever the cost mode; ``None`` without prices) and, under a ``cost_plan``,
    ``arm_planned_over_true`` (``[K]`` the plan's starting guess over the true expected costs):
    where the money went and on which arms, which a results store (it keeps no traces) can show.

    Args:
        benchmark: the complete response matrix.
        policy: any :class:`~gittinseval.core.protocol.Policy`.
        costs: ``[K]`` raw per-example cost of each arm.
        prior: the benchmark-level prior handed to the policy.
        budget_fraction: budget as a fraction of the exhaustive cost, in (0, 1].
        seed: seed of the run; all of the policy's randomness derives from it.
        settings: the certificate, the confidence stop to record (the run never ends at it) and
            the objective (:class:`~gittinseval.core.session.RunSettings`; ``None``: the defaults).
            ``value`` and ``cheapest_within`` read the benchmark's prices as deployment prices.  Under
            ``value`` GittinsEval allocates by ``Zbar_k + b_k`` (the problem's ``offsets``),
            every other policy's recommendation after each batch is the objective's choice
            from the run's posterior, and the regret is that of the value,
            ``max_k (Zbar_k + b_k) - (Zbar_rec + b_rec)``.  Under ``cheapest_within`` the
            recommendation after each batch is the cheapest arm that qualifies (a
            Monte Carlo certificate per batch: slow for many arms), and the regret stays that
            of accuracy.  The summary's ``objective`` records the settings and whether the
            final recommendation qualified.
        cell_costs: ``[K, N]`` raw cost of each cell, charged instead of ``costs``
            (which the policy still plans with); their row sums must equal
            ``N * costs``, so that the budget is the same fraction of all cells.
        cost_plan: the guessed costs the policy plans with instead of ``costs`` (which still set
            the budget and are charged), learned from the charges by ``settings.learn_costs``
            (:class:`~gittinseval.core.cost_learning.CostEstimator`; ``None``: it keeps the guess).  The
            summary records the plan's name, with ``", learned"`` when it learns (``cost_plan``), and the
            re-plans (``cost_refreshes``).
        cost_mode, prior_name: names recorded in the summary.
        progress: show a progress bar.
        checkpoint_certificates: add the summary's ``certificates`` (above).
        compare_certificates: add the summary's ``model_certificates`` and ``model_stops`` (above).
        record_arm_spend: add the summary's ``arm_spend`` (above).
    """
    settings = RunSettings() if settings is None else settings
    if not isinstance(settings, RunSettings):
        raise TypeError(f"settings must be a RunSettings, got {type(settings).__name__}")
    # The one check of the budget fraction (the config key `budget` of gittinseval).
    budget_fraction = fraction_in_unit_interval("budget", budget_fraction)
    if not isinstance(benchmark, Benchmark):
        raise TypeError(f"benchmark must be a gittinseval.data.Benchmark, got {type(benchmark).__name__}")
    if not isinstance(policy, Policy):
        raise TypeError(
            f"policy must be a gittinseval.core.protocol.Policy (e.g. GittinsPolicy()), got {type(policy).__name__}"
        )
    scores = benchmark.scores
    n_arms, n_examples = scores.shape
    if n_arms < 2:
        # One arm is its own recommendation at zero regret: the run would measure nothing.
        raise ValueError(
            f"benchmark {benchmark.name!r} has one arm: there is nothing to compare; give a matrix of two arms or more"
        )
    objective = settings.objective
    prices = benchmark.prices if objective.needs_prices else None
    offsets = objective.offsets(prices, n_arms)
    # Without a plan the problem checks the costs; with one, it checks the guess.
    costs = np.asarray(costs, dtype=np.float64) if cost_plan is None else positive_finite_values(costs, "costs", "arms")
    problem = EvaluationProblem(
        n_examples=n_examples,
        costs=costs if cost_plan is None else cost_plan.guess,
        budget=budget_fraction * n_examples * float(np.sum(costs)),
        prior_mean=prior.mean,
        prior_var=prior.var,
        binary=benchmark.binary,
        features=benchmark.features,
        default_batch_size=benchmark.default_batch_size,
        offsets=offsets if objective.name == "value" else None,
    )
    for name, given in (("costs", costs), ("guessed costs", problem.costs)):
        if given.shape != (n_arms,):
            raise ValueError(f"{given.size} {name} for {n_arms} arms")
    if cell_costs is not None:
        cell_costs = np.asarray(cell_costs, dtype=np.float64)
        if cell_costs.shape != scores.shape:
            raise ValueError(f"cell costs have shape {cell_costs.shape}, the scores {scores.shape}")
        if not np.allclose(cell_costs.mean(axis=1), costs, rtol=1e-9, atol=0):
            raise ValueError("the arms' costs must be the row means of the cell costs")
    row_means = benchmark.row_means + offsets
    best = float(row_means.max())
    exhaustive = n_examples * float(np.sum(costs))
    rows: list[tuple[int, int, float, int]] = []
    spent = 0.0
    stop_step = None
    stop_wall_time = None
    confidence_step = None

    started = time.perf_counter()
    guessed = cost_plan is not None
    session = RunSession(policy, problem, seed=seed, settings=settings, prices=prices, guessed_costs=guessed)
    record = CertificateRecord(session, prior, compare_certificates)
    # The bar counts percent of the budget: raw costs are long floats.
    bar_format = "{desc}: {percentage:3.0f}% of budget |{bar}| {elapsed}<{remaining}"
    with tqdm(total=problem.budget, disable=not progress, desc=policy.name, bar_format=bar_format) as bar:
        while spent < problem.budget:
            request = session.select()
            if request is None:
                break
            size = _check_request(request, session.seen, n_arms)
            if cell_costs is None:
                batch_cost = size * float(costs[request.arm])
            else:
                batch_cost = float(cell_costs[request.arm, request.examples].sum())
            batch_scores = scores[request.arm, request.examples]
            recommended = session.observe(request, batch_scores, batch_cost)
            spent += batch_cost
            rows.append((request.arm, request.size, spent, recommended))
            record.after_batch()
            if stop_step is None and policy.stop_signal:
                stop_step = len(rows)
                stop_wall_time = time.perf_counter() - started
            if confidence_step is None and session.confident():
                confidence_step = len(rows)
            bar.update(batch_cost)
    wall_time = time.perf_counter() - started

    table = np.array(rows, dtype=np.float64).reshape(-1, 4)
    arms, sizes, recommended = (table[:, i].astype(np.int64) for i in (0, 1, 3))
    spend = table[:, 2]
    cost_pct = 100.0 * spend / exhaustive
    regret = best - row_means[recommended]
    trace = {
        "step": np.arange(1, len(rows) + 1),
        "arm": arms,
        "batch_size": sizes,
        "cost": spend,
        "cost_pct": cost_pct,
        "recommended": recommended,
        "regret": regret,
    }
    # Under `value` a certificate is of the value Zbar_k + b_k, as the regret is.
    positions = {f"{p}pct": _last_position(cost_pct, p) for p in REPORT_PERCENTS}
    positions["stop"] = None if stop_step is None else stop_step - 1
    final = {"final": len(rows) - 1 if rows else None}
    params = policy.hyperparameters()
    summary: dict[str, Any] = {
        "benchmark": benchmark.name,
        "benchmark_details": {key: benchmark.details[key] for key in BENCHMARK_FACTS if key in benchmark.details},
        "stand_in": benchmark.stand_in,
        "data_source": benchmark.source,
        "policy": policy.name,
        "label": policy.display_label(prior_name),
        "seed": int(seed),
        "prior": prior_name,
        "prior_mean": prior.mean,
        "prior_var": prior.var,
        "batch_size": params.get("batch_size"),
        "lam": params.get("lam"),
        "kappa": params.get("kappa"),
        "hyperparameters": params,
        "cost_mode": cost_mode,
        "budget_fraction": budget_fraction,
        "n_arms": n_arms,
        "n_examples": n_examples,
        "exhaustive_cost": exhaustive,
        "budget": problem.budget,
        "total_cost": float(spent),
        "n_steps": len(rows),
        "stop_step": stop_step,
        "stop_cost": None if stop_step is None else float(spend[stop_step - 1]),
        "stop_cost_pct": None if stop_step is None else float(cost_pct[stop_step - 1]),
        "stop_regret": None if stop_step is None else float(regret[stop_step - 1]),
        # The wall time (s) from the run's start to the batch at which the signal fired (the timing figures' mark).
        "stop_wall_time_s": stop_wall_time,
        "best_mean": best,
        # The truth a learned prior (GittinsEval-EB) is judged against: mean and variance (ddof 0) of the K arm means.
        "arm_population": {"mean": float(row_means.mean()), "var": float(row_means.var())},
        "final_recommended": int(recommended[-1]) if rows else None,
        "final_regret": float(regret[-1]) if rows else None,
        "certificate": _without_regret(record.certificates(final, recommended, row_means)["final"]),
        "confidence_stop": stop_record(settings.stop_when, confidence_step, spend, cost_pct, regret),
        **{f"regret_at_{p}pct": regret_at(cost_pct, regret, p) for p in REPORT_PERCENTS},
        "wall_time_s": wall_time,
        "diagnostics": policy.diagnostics(),
    }
    if checkpoint_certificates:
        summary["certificates"] = record.certificates(positions, recommended, row_means)
    if compare_certificates:
        summary["model_certificates"] = {
            model: record.certificates(positions, recommended, row_means, model) for model in compare_certificates
        }
        if settings.stop_when is not None:
            summary["model_stops"] = {
                model: stop_record(settings.stop_when, step, spend, cost_pct, regret)
                | {"mode": "anytime" if model == "anytime" else "posterior"}
                for model, step in record.stop_steps.items()
            }
    if record_arm_spend:
        batch_spend = np.diff(spend, prepend=0.0)
        summary["arm_spend"] = {
            f"{p}pct": np.bincount(arms[:n], weights=batch_spend[:n], minlength=n_arms).tolist()
            for p in REPORT_PERCENTS
            for n in [_batches_within(cost_pct, p)]
        }
        summary["arm_means"] = row_means.tolist()
        summary["arm_prices"] = None if benchmark.prices is None else benchmark.prices.tolist()
        if cost_plan is not None:
            summary["arm_planned_over_true"] = (np.asarray(cost_plan.guess, dtype=np.float64) / costs).tolist()
    if objective.name != "accuracy":
        qualified = None if session.choice is None else session.choice.qualified
        summary["objective"] = {**objective.as_dict(), "qualified": qualified}
    if cost_plan is not None:
        learned = session.learned_costs
        summary["cost_plan"] = cost_plan.name + ("" if learned is None else ", learned")
        summary["cost_refreshes"] = 0 if learned is None else learned.n_refreshes
    return RunResult(trace=trace, summary=summary)


def _without_regret(certificate: dict[str, Any] | None) -> dict[str, Any] | None:
    """The final certificate as the summary has always kept it: with ``true_mean``, without ``regret``
    (the summary's ``final_regret``)."""
    if certificate is None:
        return None
    certificate = dict(certificate)
    del certificate["regret"]
    return certificate


def _batches_within(cost_pct: np.ndarray, percent: float) -> int:
    """How many batches (from the first) have a cumulative cost of at most ``percent`` %."""
    return int(np.searchsorted(cost_pct, percent + 1e-9, side="right"))


def _last_position(cost_pct: np.ndarray, percent: float) -> int | None:
    """0-based position of the last batch whose cumulative cost is at most ``percent`` % (as :func:`regret_at`)."""
    position = _batches_within(cost_pct, percent) - 1
    return None if position < 0 else position


def _check_request(request: Request, seen: np.ndarray, n_arms: int) -> int:
    """Number of cells of a valid request; errors name the faulty arm or examples."""
    n_examples = seen.shape[1]
    if not (0 <= request.arm < n_arms):
        raise ValueError(f"policy requested arm {request.arm}, outside [0, {n_arms})")
    examples = np.asarray(request.examples)
    if examples.ndim != 1 or examples.size == 0:
        raise ValueError(f"policy requested no examples of arm {request.arm}")
    # Requests are mostly a few examples: plain Python on a list beats numpy's per-call overhead.
    listed = examples.tolist()
    if min(listed) < 0 or max(listed) >= n_examples:
        raise ValueError(f"policy requested examples outside [0, {n_examples}) of arm {request.arm}")
    if len(set(listed)) != len(listed) or seen[request.arm, examples].any():
        raise ValueError(f"policy requested examples of arm {request.arm} twice")
    return examples.size
