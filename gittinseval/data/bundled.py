"""Benchmarks built from the data files bundled with the package.

Provenance and licences of every file are in ``files/README.md``.
"""

from __future__ import annotations

import csv
import difflib
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from gittinseval.data.benchmark import Benchmark

__all__ = [
    "MMLU_DATA_SEED",
    "load_alpacaeval",
    "load_mmlu",
    "mmlu_subjects",
    "specific_prior",
    "synthesize_binary_matrix",
]

MMLU_DATA_SEED = 20240521
"""Default seed of the synthesized MMLU item assignment."""

MMLU_ITEM_SPREAD = 1.0
"""Standard deviation of the synthesized MMLU item easiness (logit scale)."""

_MMLU_SOURCE = "PromptEval/DOVE MMLU correctness (Polo et al., 2024): real row sums, synthesized item assignment"
_MMLU_LICENSE = "PromptEval release (cite Polo et al., 2024); prices from the GittinsEval paper"
_ALPACA_SOURCE = "tatsu-lab/alpaca_eval, weighted_alpaca_eval_gpt4_turbo vs gpt4_1106_preview"
_ALPACA_LICENSE = "CC BY-NC 4.0 (data), Apache-2.0 (code)"


def _files() -> Path:
    return Path(str(resources.files("gittinseval.data") / "files"))


def _read_csv(relative: str) -> list[dict[str, str]]:
    with open(_files() / relative, newline="") as handle:
        return list(csv.DictReader(handle))


@lru_cache(maxsize=1)
def _mmlu_counts() -> dict[str, np.ndarray]:
    with np.load(_files() / "mmlu" / "arm_correct_counts.npz") as data:
        return {key: data[key] for key in data.files}


@lru_cache(maxsize=1)
def _mmlu_subject_table() -> dict[str, dict[str, str]]:
    return {row["subject"]: row for row in _read_csv("mmlu/subjects.csv")}


def mmlu_subjects() -> list[str]:
    """The 57 MMLU subjects, snake_case and sorted."""
    return [str(s) for s in _mmlu_counts()["subjects"]]


def specific_prior(benchmark: str, group: str = "specific") -> tuple[float, float]:
    """The paper's data-specific prior ``(mean, var)`` for a benchmark and group."""
    for row in _read_csv("priors.csv"):
        if row["benchmark"] == benchmark and row["group"] == group:
            return float(row["prior_mean"]), float(row["prior_var"])
    raise KeyError(f"no prior for benchmark {benchmark!r}, group {group!r} in priors.csv")


def synthesize_binary_matrix(
    row_sums: np.ndarray, n_examples: int, rng: np.random.Generator, item_spread: float = MMLU_ITEM_SPREAD
) -> np.ndarray:
    """A binary ``[K, N]`` matrix with exactly the given row sums and shared item difficulty.

    Item ``j`` gets an easiness ``e_j ~ N(0, item_spread^2)``.  Arm ``k`` answers the
    ``row_sums[k]`` items with the largest ``e_j + G_kj`` correctly, ``G_kj`` i.i.d.
    standard Gumbel: a draw without replacement with probabilities proportional to
    ``exp(e_j)`` (Gumbel top-k), so easy items are correct for most arms.
    """
    row_sums = np.asarray(row_sums, dtype=np.int64)
    if np.any(row_sums < 0) or np.any(row_sums > n_examples):
        raise ValueError(f"row sums must lie in [0, {n_examples}]")
    easiness = rng.normal(0.0, item_spread, size=n_examples)
    keys = easiness[None, :] + rng.gumbel(size=(row_sums.size, n_examples))
    ranks = np.argsort(np.argsort(-keys, axis=1), axis=1)
    return (ranks < row_sums[:, None]).astype(np.float64)


def _unknown(kind: str, name: str, choices: list[str]) -> ValueError:
    close = difflib.get_close_matches(name, choices, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; choose one of {', '.join(choices)}"
    return ValueError(f"unknown {kind} {name!r}{hint}")


@lru_cache(maxsize=8)
def load_mmlu(subject: str = "moral_scenarios", data_seed: int = MMLU_DATA_SEED) -> Benchmark:
    """One MMLU subject: 1500 arms (15 models x 100 templates, model-major).

    Row sums are the real correct counts of the PromptEval release; which items
    each arm got right is synthesized by :func:`synthesize_binary_matrix` with
    ``data_seed`` (the counts alone determine the behaviour of policies that
    sample each arm's items in an independent random order).  Prices are the
    models' input prices (USD per 1M tokens).
    """
    counts = _mmlu_counts()
    subjects = mmlu_subjects()
    if subject not in subjects:
        raise _unknown("MMLU subject", subject, subjects)
    column = subjects.index(subject)
    info = _mmlu_subject_table()[subject]
    n_examples = int(counts["n_examples"][column])
    rng = np.random.default_rng([int(data_seed), column])
    scores = synthesize_binary_matrix(counts["correct"][:, column], n_examples, rng)

    models = _read_csv("mmlu/models.csv")
    n_templates = len(counts["templates"])
    prices = np.repeat([float(m["input_usd_per_1m_tokens"]) for m in models], n_templates)
    model_codes, template_codes = np.divmod(np.arange(len(models) * n_templates), n_templates)
    names = tuple(f"{m['model']}/template_{t}" for m in models for t in range(n_templates))
    return Benchmark(
        name=f"mmlu/{subject}",
        scores=scores,
        prices=prices,
        arm_names=names,
        features=np.stack([model_codes, template_codes], axis=1),
        specific_prior=specific_prior("mmlu", info["difficulty"]),
        source=_MMLU_SOURCE,
        license=_MMLU_LICENSE,
        stand_in=False,
        details={
            "subject": subject,
            "display_name": info["display_name"],
            "difficulty": info["difficulty"],
            "size": info["size"],
            "data_seed": int(data_seed),
            "item_assignment": "synthesized",
        },
    )


@lru_cache(maxsize=1)
def load_alpacaeval() -> Benchmark:
    """The 57 x 805 AlpacaEval 2.0 preference matrix shipped with the package.

    Scores are the weighted GPT-4-Turbo judge's preferences against
    ``gpt4_1106_preview`` (continuous in [0, 1]).  Prices are ``input + 8 x output``
    (USD per 1M tokens) from the paper's table; the 7 models that table does not
    list get a price of 1.0 (recorded in ``details["unpriced_arms"]``).
    """
    with np.load(_files() / "alpacaeval" / "preferences_57.npz") as data:
        scores = data["scores"].astype(np.float64)
        models = [str(m) for m in data["models"]]
    table = {row["model"]: row for row in _read_csv("alpacaeval/models.csv")}
    unpriced = [m for m in models if m not in table]
    prices = np.array(
        [float(table[m]["cost_usd_per_1m_tokens_in_plus_8_out"]) if m in table else 1.0 for m in models]
    )
    return Benchmark(
        name="alpacaeval",
        scores=scores,
        prices=prices,
        arm_names=tuple(models),
        features=np.arange(len(models))[:, None],
        specific_prior=specific_prior("alpacaeval"),
        source=_ALPACA_SOURCE,
        license=_ALPACA_LICENSE,
        stand_in=False,
        details={"unpriced_arms": unpriced},
    )
