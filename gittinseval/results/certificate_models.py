"""The certificate's posterior models judged side by side on real data: numbers first, then the tables.

Each run of a model-comparison store (``compare_certificates``, e.g. ``experiment=certificate_models``)
states, at 1, 2, 5 and 10 % of the exhaustive cost and at the policy's stopping signal, the certificate
of its recommendation under each model (``model_certificates``), with the anytime statement beside it,
and records where the confidence stop would have fired under each (``model_stops``).  A simulation
knows the true means, so every statement can be checked.  Per benchmark family (MMLU's subjects
pooled) and model, over every method and checkpoint:

- **coverage**: the share of statements whose credible interval held the recommended arm's
  full-benchmark mean (for the anytime statement: its confidence interval);
- **ECE** (expected calibration error) of a stated probability ``p`` of an event ``E``, with the
  statements in :data:`ECE_BINS` equal bins of ``p``: ``sum_b (n_b / n) |mean_b(p) - mean_b(1{E})|``;
  of ``P(within eps)`` (E: regret at most eps) and ``P(best)`` (E: regret 0);
- **the anytime guarantee**: the share of runs in which some checkpoint's statement was false
  (the true regret of the recommendation above the certified eps), against ``delta``;
- **the confidence stop**: the share of runs it fired in, the share of runs it fired on an arm more
  than ``eps`` from the best (*wrong stops*, against ``delta``: the anytime mode promises this per
  run whatever the benchmark; the posterior mode promises it among stops, on benchmarks drawn from
  its model) and the mean cost at which it fired;
- **recommendation**: the regret of each model's LCB recommendation (largest posterior mean minus
  ``kappa`` SDs) and its paired difference from the Gaussian surrogate's, clustered by seed.

:func:`verdicts` reads the targets of :data:`TARGETS` off these numbers, one sentence per family.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gittinseval.results.pooling import REGRET_TOLERANCE
from gittinseval.results.pooling import benchmark_family as family_of
from gittinseval.results.stats import Estimate

__all__ = [
    "ANYTIME",
    "ECE_BINS",
    "TARGETS",
    "CalibrationRow",
    "RegretRow",
    "StopRow",
    "calibration_rows",
    "expected_calibration_error",
    "regret_rows",
    "stop_rows",
    "verdicts",
]

ANYTIME = "anytime"
"""The anytime statement's name among the models."""

ECE_BINS = 5
"""Equal-width bins of stated probability in the expected calibration error."""

TARGETS = {"ece": 0.05, "coverage": (0.93, 0.98), "stop_fires": 0.25}
"""The issue's targets: ECE of each probability at most 0.05, 95 % interval coverage in [0.93, 0.98], and a
Bayesian stop that fires in at least 25 % of runs; wrong stops at most ``delta`` + 2 SE."""



def expected_calibration_error(stated: Sequence[float], happened: Sequence[bool], bins: int = ECE_BINS) -> float:
    """``sum_b (n_b / n) |mean_b(stated) - mean_b(happened)|`` over ``bins`` equal bins of ``[0, 1]`` (the
    last closed); ``nan`` without statements."""
    p = np.asarray(stated, dtype=float)
    hit = np.asarray(happened, dtype=float)
    if p.size == 0:
        return float("nan")
    which = np.minimum((p * bins).astype(int), bins - 1)
    error = 0.0
    for b in range(bins):
        inside = which == b
        if inside.any():
            error += inside.sum() / p.size * abs(p[inside].mean() - hit[inside].mean())
    return float(error)


@dataclass(frozen=True)
class CalibrationRow:
    """One family and model: ``n`` statements, their interval coverage, and the mean stated probability, the
    observed share and the ECE of ``P(within eps)`` and ``P(best)`` (``nan`` for the anytime statement, which
    states no probability); for the anytime statement, ``violated_runs`` of ``runs`` with a false statement."""

    family: str
    model: str
    n: int
    covered: int
    within_stated: float
    within_observed: float
    within_ece: float
    best_stated: float
    best_observed: float
    best_ece: float
    runs: int
    violated_runs: int
    delta: float

    @property
    def coverage(self) -> float:
        return self.covered / self.n


def _statements(summary: dict, model: str) -> list[dict]:
    """The run's checkpoint statements under ``model`` (the anytime one from any model's, where it is kept)."""
    by_model = summary.get("model_certificates") or {}
    source = by_model.get(model) if model != ANYTIME else next(iter(by_model.values()), None)
    return [statement for statement in (source or {}).values() if statement is not None]


def _models(summaries: Sequence[dict]) -> list[str]:
    models: list[str] = []
    for summary in summaries:
        for model in summary.get("model_certificates") or {}:
            if model not in models:
                models.append(model)
    has_anytime = any(s.get("anytime") for summary in summaries for s in _statements(summary, ANYTIME))
    return models + ([ANYTIME] if has_anytime else [])


def _by_family(summaries: Sequence[dict]) -> dict[str, list[dict]]:
    families: dict[str, list[dict]] = {}
    for summary in summaries:
        if summary.get("model_certificates"):
            families.setdefault(family_of(summary["benchmark"]), []).append(summary)
    return dict(sorted(families.items()))


def calibration_rows(summaries: Sequence[dict]) -> list[CalibrationRow]:
    """Per family and model, the calibration of every checkpoint statement (module docstring)."""
    rows = []
    for family, runs in _by_family(summaries).items():
        for model in _models(runs):
            statements = [s for summary in runs for s in _statements(summary, model)]
            if model == ANYTIME:
                statements = [s for s in statements if s.get("anytime")]
            if not statements:
                continue
            eps = statements[0]["eps"]
            if model == ANYTIME:
                covered = sum(s["anytime"]["lower"] <= s["true_mean"] <= s["anytime"]["upper"] for s in statements)
                violated = [
                    any(s["regret"] > s["anytime"]["certified_eps"] + REGRET_TOLERANCE for s in _statements(run, model))
                    for run in runs
                ]
                nan = float("nan")
                rows.append(CalibrationRow(
                    family, model, len(statements), covered, nan, nan, nan, nan, nan, nan,
                    len(runs), sum(violated), statements[0]["anytime"]["delta"],
                ))
                continue
            within = [s["regret"] <= eps + REGRET_TOLERANCE for s in statements]
            best = [s["regret"] <= REGRET_TOLERANCE for s in statements]
            stated_within = [s["prob_eps_best"] for s in statements]
            stated_best = [s["prob_best"] for s in statements]
            rows.append(CalibrationRow(
                family=family,
                model=model,
                n=len(statements),
                covered=sum(s["lower"] <= s["true_mean"] <= s["upper"] for s in statements),
                within_stated=float(np.mean(stated_within)),
                within_observed=float(np.mean(within)),
                within_ece=expected_calibration_error(stated_within, within),
                best_stated=float(np.mean(stated_best)),
                best_observed=float(np.mean(best)),
                best_ece=expected_calibration_error(stated_best, best),
                runs=len(runs),
                violated_runs=0,
                delta=float("nan"),
            ))
    return rows


@dataclass(frozen=True)
class StopRow:
    """One family and model's confidence stop over ``runs`` runs: ``fired`` of them, ``wrong`` of those on an
    arm more than ``eps`` from the best, at a mean ``cost_pct`` % of the exhaustive cost (``nan``: none fired),
    promising ``delta``."""

    family: str
    model: str
    runs: int
    fired: int
    wrong: int
    cost_pct: float
    delta: float

    @property
    def wrong_per_run(self) -> float:
        return self.wrong / self.runs

    @property
    def wrong_per_run_se(self) -> float:
        share = self.wrong_per_run
        return float(np.sqrt(share * (1 - share) / self.runs))

    @property
    def keeps_promise(self) -> bool:
        """Wrong stops per run at most ``delta`` + 2 SE (the SE at ``delta``, so that 0 wrong stops pass)."""
        return self.wrong_per_run <= self.delta + 2 * float(np.sqrt(self.delta * (1 - self.delta) / self.runs))


def stop_rows(summaries: Sequence[dict]) -> list[StopRow]:
    """Per family and model, where the confidence stop would have fired (module docstring)."""
    rows = []
    for family, runs in _by_family(summaries).items():
        stops: dict[str, list[dict]] = {}
        for summary in runs:
            for model, stop in (summary.get("model_stops") or {}).items():
                stops.setdefault(model, []).append(stop)
        for model, records in stops.items():
            fired = [r for r in records if r["step"] is not None]
            eps = records[0]["eps"]
            rows.append(StopRow(
                family=family,
                model=model,
                runs=len(records),
                fired=len(fired),
                wrong=sum(r["regret"] > eps + REGRET_TOLERANCE for r in fired),
                cost_pct=float(np.mean([r["cost_pct"] for r in fired])) if fired else float("nan"),
                delta=1.0 - records[0]["prob_eps_best"],
            ))
    return rows


@dataclass(frozen=True)
class RegretRow:
    """One family, checkpoint and model: the mean regret of its LCB recommendation and the paired difference
    from the Gaussian surrogate's (negative: lower regret), clustered by seed."""

    family: str
    checkpoint: str
    model: str
    regret: Estimate
    versus_gaussian: Estimate | None


def regret_rows(
    summaries: Sequence[dict], checkpoints: Sequence[str] = ("1pct", "2pct", "5pct", "10pct")
) -> list[RegretRow]:
    """Per family, checkpoint and model (not the anytime statement, which recommends nothing of its own)."""
    rows = []
    for family, runs in _by_family(summaries).items():
        models = [m for m in _models(runs) if m != ANYTIME]
        for checkpoint in checkpoints:
            for model in models:
                pairs, differences = [], []
                for summary in runs:
                    by_model = summary["model_certificates"]
                    mine = (by_model.get(model) or {}).get(checkpoint)
                    base = (by_model.get("gaussian") or {}).get(checkpoint)
                    if mine is None:
                        continue
                    pairs.append((mine["lcb_regret"], summary["seed"]))
                    if base is not None and model != "gaussian":
                        differences.append((mine["lcb_regret"] - base["lcb_regret"], summary["seed"]))
                estimate = Estimate.of(pairs)
                if estimate is not None:
                    rows.append(RegretRow(family, checkpoint, model, estimate, Estimate.of(differences)))
    return rows


def verdicts(summaries: Sequence[dict]) -> dict[str, str]:
    """Per family, one sentence per model read off the targets (:data:`TARGETS`): which are met, and by
    how much the others miss."""
    calibration = {(row.family, row.model): row for row in calibration_rows(summaries)}
    stops = {(row.family, row.model): row for row in stop_rows(summaries)}
    low, high = TARGETS["coverage"]
    sentences: dict[str, list[str]] = {}
    for (family, model), row in calibration.items():
        parts = []
        if model == ANYTIME:
            kept = row.violated_runs / row.runs <= row.delta
            parts.append(
                f"guarantee {'kept' if kept else 'VIOLATED'} ({row.violated_runs} of {row.runs} runs had a false "
                f"statement at a checkpoint; delta {row.delta:g})"
            )
        else:
            for name, ece in (("P(within eps)", row.within_ece), ("P(best)", row.best_ece)):
                met = ece <= TARGETS["ece"]
                parts.append(f"ECE of {name} {ece:.3f} ({'met' if met else 'missed'})")
            coverage_met = low <= row.coverage <= high
            parts.append(f"coverage {row.coverage:.3f} ({'met' if coverage_met else 'missed'})")
        stop = stops.get((family, model))
        if stop is not None:
            fires = stop.fired / stop.runs
            fire_note = ""
            if model != ANYTIME:
                fire_note = f", {'met' if fires >= TARGETS['stop_fires'] else 'missed'} the 25 % target"
            parts.append(
                f"stop fired in {stop.fired} of {stop.runs} runs{fire_note}, {stop.wrong} wrong "
                f"({'within' if stop.keeps_promise else 'ABOVE'} delta {stop.delta:g} + 2 SE)"
            )
        sentences.setdefault(family, []).append(f"{model}: " + "; ".join(parts))
    return {family: ". ".join(parts) + "." for family, parts in sentences.items()}
