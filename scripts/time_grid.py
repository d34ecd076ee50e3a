"""Time one run of each policy on representative benchmarks and extrapolate the paper's grid.

    python scripts/time_grid.py [--out outputs/time_grid.json] [--policies gittins,ucbe,...]
    python scripts/time_grid.py --mmlu-experiment paper/mmlu_buckets   # that experiment's MMLU subjects only
    python scripts/time_grid.py --mmlu-experiment paper/mmlu_subjects --from-store docs/results/timing.parquet \
        --skip-stored docs/results/mmlu_subjects.parquet docs/results/mmlu_buckets.parquet

The grid (paper, Sec. 5 and App. C): every policy on MMLU (57 subjects x 20 seeds), GSM8K and
PIQA (5 matrices x 20 seeds each) and AlpacaEval (20 seeds; PromptEval-BAI left out), unit
and cost-aware, 10% budget; GittinsEval twice (general and specific prior).  Each
measurement is one run (policy and simulator, built by the experiment's own
``simulate_config``) in this process on one torch thread (``threads=1``),
cost-aware for seed 0 and unit cost for seed 1, timed in CPU seconds of this process (the
machine may be shared; the run's ``wall_time_s`` is printed too).

Extrapolation (a model, not a measurement): a bandit run's time grows linearly with the
number of examples N at a fixed batch size, so an MMLU size bucket (small/medium/large,
B = 2/4/8) costs its representative's mean time x (sum of the bucket's N) / (its N).
LRF (one cost-aware run) is run whole on the small MMLU subject, GSM8K and AlpacaEval;
on the medium and large ones it is timed per step after its 5% warm-up between two short
budgets and extended to the 10% budget's step count; an MMLU bucket then costs the
representative's time x (sum of N^2) / N^2 (steps and the per-step fit both grow with N).  BO runs are
taken as they are (their time depends on the configuration count, 1500 for every MMLU
subject).  GSM8K stands in for PIQA (1000 examples each).

``--from-store STORE`` (a timing store, e.g. docs/results/timing.parquet) runs nothing: each
method's time on a size group is the mean wall time of its stored one-thread runs on that
group's subject (every seed and both cost modes), and the MMLU grid alone is estimated.
Those are the "run CPU-hours" of the README's table, not process CPU time: they leave out
the benchmark's loading, include any contention of the machine they ran on, and, for a
``cold_start`` store such as paper/timing, each run's building of its root tables, which a
sweep's runs mostly reuse.  ``--skip-stored STORE...`` also prints what those stores do not
hold yet: a subject's runs there (by cost mode and seed, seeds 0-19) leave the estimate.  An
experiment's sweep skips the runs of the stores of its ``results_store`` (paper/mmlu_subjects names
both stores above), and no others: to run just the rest of another grid, narrow ``benchmark.subject``
to the subjects left.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter, defaultdict
from pathlib import Path
from statistics import mean

from hydra import compose, initialize_config_dir

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.data.mmlu import _subject_table, mmlu_subjects
from gittinseval.sim.experiment import simulate_config
from gittinseval.sim.results_store import read_store

REPRESENTATIVE = {"small": "management", "medium": "conceptual_physics", "large": "high_school_psychology"}
BANDITS = ["gittins_G", "gittins_S", "ucbe", "sysrs", "prompteval"]
BO = ["pbgi", "logei", "logeipc"]
SEEDS_AND_COSTS = ((0, "aware"), (1, "unit"))
RUNS_PER_MMLU_SUBJECT = 20 * 2  # seeds x cost modes
RUNS_PER_OTHER = {"gsm8k": 100 * 2, "piqa": 100 * 2, "alpacaeval_paper": 20 * 2}


def run_time(benchmark: list[str], policy: str, seed: int, cost: str, budget: float = 0.10) -> dict:
    name, _, prior = policy.partition("_")
    overrides = [*benchmark, f"policy={name}", f"cost={cost}", "logger=none", f"seed={seed}", f"budget={budget}",
                 "threads=1", "prior=specific" if prior == "S" else "prior=general"]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    started = time.process_time()
    summary = simulate_config(cfg).summary
    cpu_s = time.process_time() - started
    print(f"{' '.join(benchmark):45s} {policy:10s} {cost:5s} budget {budget:5.3f}: {cpu_s:8.2f} CPU s "
          f"({summary['wall_time_s']:8.2f} s wall) {summary['n_steps']:6d} steps", flush=True)
    return {"cpu_s": cpu_s, "n_steps": summary["n_steps"], "n_examples": summary["n_examples"]}


def method_of(summary: dict) -> str:
    """The policy name this script uses for a stored run (GittinsEval's by its prior)."""
    if summary["policy"] == "gittins":
        return {"general": "gittins_G", "specific": "gittins_S"}[summary["prior"]]
    return summary["policy"]


def stored_mmlu_runs(stores: list[Path]) -> list[dict]:
    """The summaries of the MMLU runs in ``stores``."""
    return [row.summary for store in stores for row in read_store(store)
            if row.summary["benchmark"].startswith("mmlu/")]


def store_times(store: Path, table: dict[str, dict[str, str]]) -> dict[str, dict]:
    """``{"<policy>/mmlu_<size>": {"run_s", "n_examples", "subject", "runs"}}``: the mean wall time of
    the stored runs of each policy on each size group's subject (one subject per group)."""
    times: dict[str, list[float]] = defaultdict(list)
    subjects: dict[str, set[str]] = defaultdict(set)
    for summary in stored_mmlu_runs([store]):
        if summary.get("threads") != 1:
            raise ValueError(f"{store}: a run of {summary['label']} ran on {summary.get('threads')} threads, "
                             "not one: its wall time is not one core's")
        subject = summary["benchmark"].removeprefix("mmlu/")
        key = f"{method_of(summary)}/mmlu_{table[subject]['size']}"
        times[key].append(summary["wall_time_s"])
        subjects[key].add(subject)
    for key, names in subjects.items():
        if len(names) != 1:
            raise ValueError(f"{store} holds {key} on {len(names)} subjects ({', '.join(sorted(names))}): "
                             "a timing store has one subject per size group")
    return {key: {"run_s": mean(times[key]), "n_examples": int(table[next(iter(subjects[key]))]["n_examples"]),
                  "subject": next(iter(subjects[key])), "runs": len(times[key])} for key in times}


def experiment_subjects(experiment: str) -> list[str]:
    """The MMLU subjects an experiment file sweeps (``hydra.sweeper.params['benchmark.subject']``)."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"experiment={experiment}"], return_hydra_config=True)
    return str(cfg.hydra.sweeper.params["benchmark.subject"]).split(",")


def measure(policy: str, key: str, overrides: list[str]) -> dict:
    """Time ``policy`` on one benchmark of the grid: ``{"run_s", "n_examples", ...}``, one run's CPU seconds."""
    if policy == "lrf" and key in ("mmlu_medium", "mmlu_large"):
        # Too slow to run whole here: time the steps after the 5% warm-up between two short budgets.
        short, longer = (run_time(overrides, policy, 0, "aware", budget) for budget in (0.051, 0.053))
        per_step = (longer["cpu_s"] - short["cpu_s"]) / (longer["n_steps"] - short["n_steps"])
        n_examples = short["n_examples"]
        run = short["cpu_s"] + per_step * (0.10 - 0.051) * 1500 * n_examples / 32
        return {"per_step_s": per_step, "run_s": run, "n_examples": n_examples}
    if policy == "lrf":
        whole = run_time(overrides, policy, 0, "aware")
        return {"run_s": whole["cpu_s"], "n_examples": whole["n_examples"]}
    runs = [run_time(overrides, policy, seed, cost) for seed, cost in SEEDS_AND_COSTS]
    return {"run_s": mean(r["cpu_s"] for r in runs), "n_examples": runs[0]["n_examples"]}


def subject_scale(policy: str, n_examples: int, measured_examples: int) -> float:
    """A subject's run time over its size group's measured run (the module docstring's model)."""
    if policy in BO:
        return 1.0
    if policy == "lrf":
        return n_examples**2 / measured_examples**2
    return n_examples / measured_examples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("outputs/time_grid.json"))
    parser.add_argument("--policies", default=",".join([*BANDITS, "lrf", *BO]))
    parser.add_argument("--mmlu-experiment", help="estimate only this experiment's MMLU subjects, e.g. "
                        "paper/mmlu_buckets (its sweep's subject list; 20 seeds x 2 cost modes each)")
    parser.add_argument("--from-store", type=Path, help="take each method's time per MMLU size group from this "
                        "timing store's runs instead of running it (MMLU only)")
    parser.add_argument("--skip-stored", type=Path, nargs="+", default=[], help="also estimate what is left to "
                        "run: the MMLU runs already in these stores are skipped")
    args = parser.parse_args()
    policies = args.policies.split(",")
    table = _subject_table()
    subjects = experiment_subjects(args.mmlu_experiment) if args.mmlu_experiment else mmlu_subjects()
    sizes = {table[s]["size"] for s in subjects}
    benchmarks = {f"mmlu_{size}": ["benchmark=mmlu", f"benchmark.subject={subject}"]
                  for size, subject in REPRESENTATIVE.items() if size in sizes}
    if not (args.mmlu_experiment or args.from_store):
        benchmarks |= {"gsm8k": ["benchmark=gsm8k"], "alpacaeval_paper": ["benchmark=alpacaeval_paper"]}
    from_store = store_times(args.from_store, table) if args.from_store else {}
    stored = Counter(
        (method_of(summary), summary["benchmark"].removeprefix("mmlu/"))
        for summary in {
            (summary["policy"], summary["prior"], summary["benchmark"], summary["cost_mode"], summary["seed"]): summary
            for summary in stored_mmlu_runs(args.skip_stored) if summary["seed"] < RUNS_PER_MMLU_SUBJECT // 2
        }.values()
    )

    seconds: dict[str, float] = {}  # policy -> extrapolated CPU seconds of its share of the grid
    remaining: dict[str, float] = {}  # policy -> the same, without the runs in --skip-stored
    measured: dict[str, dict] = {}
    for policy in policies:
        seconds[policy] = remaining[policy] = 0.0
        for key, overrides in benchmarks.items():
            if policy == "prompteval" and key == "alpacaeval_paper":
                continue
            if args.from_store:
                if f"{policy}/{key}" not in from_store:
                    raise ValueError(f"{args.from_store} has no {policy} run on {key}")
                measured[f"{policy}/{key}"] = from_store[f"{policy}/{key}"]
            else:
                measured[f"{policy}/{key}"] = measure(policy, key, overrides)
            run, n_examples = measured[f"{policy}/{key}"]["run_s"], measured[f"{policy}/{key}"]["n_examples"]
            if key.startswith("mmlu"):
                for subject in subjects:
                    if f"mmlu_{table[subject]['size']}" == key:
                        per_run = run * subject_scale(policy, int(table[subject]["n_examples"]), n_examples)
                        seconds[policy] += per_run * RUNS_PER_MMLU_SUBJECT
                        left = max(RUNS_PER_MMLU_SUBJECT - stored[policy, subject], 0)
                        remaining[policy] += per_run * left
            else:
                runs = RUNS_PER_OTHER["gsm8k"] + RUNS_PER_OTHER["piqa"] if key == "gsm8k" else RUNS_PER_OTHER[key]
                seconds[policy] += run * runs
                remaining[policy] += run * runs
        left = f", {remaining[policy] / 3600:.2f} of them not in the stores" if args.skip_stored else ""
        print(f"== {policy}: {seconds[policy] / 3600:.2f} CPU-hours for its share of the grid{left}", flush=True)
    left = f", {sum(remaining.values()) / 3600:.1f} of them not in the stores" if args.skip_stored else ""
    grid = "MMLU grid" if args.mmlu_experiment or args.from_store else "grid"
    print(f"== {grid}: {sum(seconds.values()) / 3600:.1f} CPU-hours{left}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    kind = f"mean wall time of the one-thread runs of {args.from_store}" if args.from_store else "CPU time"
    args.out.write_text(json.dumps({"measure": kind, "measured": measured, "seconds": seconds,
                                    "remaining_seconds": remaining}, indent=1))


if __name__ == "__main__":
    main()
