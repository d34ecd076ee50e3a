"""Real response matrices scored from ZeroEval's released replies, each cell with its own cost (by default).

Three matrices of chat models, each answering every question once with greedy decoding
in ZeroEval's zero-shot JSON format: GSM8K (``gsm8k_zeroeval``, 41 models x the 1319
test questions; a cell is 1 if the number in the reply's last ``"answer"`` field equals
the gold answer), CRUXEval-O (``crux_zeroeval``, 48 x 800; the answer equals the gold
output literal as a string, ZeroEval's rule) and MATH level 5 (``math_l5_zeroeval``,
38 x 721; the answer's first number equals the gold one's, ZeroEval's rule).  Beside
the scores the release gives each cell's prompt and reply length in characters, so each
cell has its own price: with ``T = chars / 4`` tokens and the model's list prices
``p_in, p_out`` (USD per 1M tokens),

    dollars[k, n] = (input_chars[n] * p_in[k] + output_chars[k, n] * p_out[k]) / 4e6.

Two price rules (``prices``, ``benchmark.prices`` in a config):

- ``"tokens"`` (the default): raw costs are in the unit of ``lam`` (USD per 1M tokens of
  an example): ``cell_costs[k, n] = dollars[k, n] * 1e6 / T_mean``, with ``T_mean`` the
  mean tokens of a cell over the whole matrix.  An arm's price (``prices[k]``, what
  ``cost=aware`` charges per example and what every cost mode plans with) is the mean of
  its row, ``cell_costs[k].mean()``: its expected blended price at its own reply length.
  It stays the default because every stored run on these matrices
  (``docs/results/main_*_zeroeval.parquet``) was made with it, and a run's config digest
  leaves the setting out at its default, so those runs keep their digests.
- ``"paper"``: the paper's GSM8K rule (App. "Evaluation costs", Table
  ``tab:gsm8k_piqa_model_costs``: an assumed input-to-output token ratio of 1:2, so an
  arm's cost is its input price plus twice its output price, USD per 1M tokens):
  ``prices[k] = p_in[k] + 2 p_out[k]``, the same for every example.  The paper prices
  model-level and uses no example-specific token counts, so in its unit a cell has no cost
  of its own: there are no ``cell_costs`` (``cost=per_cell`` refuses), and the benchmark is
  named ``<name>/paper_prices`` so that its runs are told apart from the token-priced
  ones.  It charges an example one input and two output prices where the token rule charges
  one example of the mean length at its blend of the two, so it prices every arm higher (on
  these matrices 1.6 to 6 times): the same ``lam`` buys less evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from gittinseval.data._files import data_file, read_csv, specific_prior, unknown_name
from gittinseval.data.benchmark import Benchmark

__all__ = [
    "FEATURE_NAMES",
    "PRICE_RULES",
    "ZEROEVAL_BENCHMARKS",
    "load_crux_zeroeval",
    "load_gsm8k_zeroeval",
    "load_math_l5_zeroeval",
    "load_zeroeval",
]

CHARS_PER_TOKEN = 4.0
# The price rules of `prices` (module docstring): each cell its own tokens, or the paper's GSM8K rule.
PRICE_RULES = ("tokens", "paper")
# The paper's GSM8K rule: input price plus this many times the output price (input-to-output tokens 1:2).
PAPER_OUTPUT_PER_INPUT = 2.0
# The categorical configuration encoding of the BO baselines' kernel, one code per column.
FEATURE_NAMES = ("model", "family", "size_class", "host")
_PRICES = "list prices are public mid-2024 proxies"


@dataclass(frozen=True)
class _Release:
    """Provenance of one bundled ZeroEval matrix (``gittinseval/data/files/<name>/``)."""

    source: str
    license: str
    # The paper's batch size for more than 400 examples (its size rule), as for every matrix here.
    default_batch_size: int = 8


ZEROEVAL_BENCHMARKS: dict[str, _Release] = {
    "gsm8k_zeroeval": _Release(
        source="ZeroEval (yuchenlin/ZeroEval, result_dirs/gsm at 570c6269): 41 models' replies to the 1319 GSM8K "
        f"test questions, scored here; {_PRICES}",
        license="replies Apache-2.0 (ZeroEval), questions MIT (openai/gsm8k)",
    ),
    "crux_zeroeval": _Release(
        source="ZeroEval (yuchenlin/ZeroEval, result_dirs/crux at 570c6269): 48 models' replies to the 800 "
        f"CRUXEval-O questions, scored here by ZeroEval's rule; {_PRICES}",
        license="replies Apache-2.0 (ZeroEval), questions MIT (cruxeval-org/cruxeval)",
    ),
    "math_l5_zeroeval": _Release(
        source="ZeroEval (yuchenlin/ZeroEval, result_dirs/math-l5 at 570c6269): 38 models' replies to 721 MATH "
        f"level-5 problems, scored here by ZeroEval's rule; {_PRICES}",
        license="replies Apache-2.0 (ZeroEval), problems MIT (hendrycks/math)",
    ),
}


def _codes(column: list[str]) -> np.ndarray:
    """Integer codes of a categorical column, in order of first appearance."""
    levels = {value: code for code, value in enumerate(dict.fromkeys(column))}
    return np.array([levels[value] for value in column], dtype=np.int64)


def load_zeroeval(name: str, prices: str = "tokens") -> Benchmark:
    """A bundled ZeroEval response matrix (binary, arms x questions), its arms priced by the rule ``prices``.

    ``name`` is one of :data:`ZEROEVAL_BENCHMARKS`; ``prices`` one of :data:`PRICE_RULES`
    (the module docstring): ``"tokens"``, the default, gives per-cell costs (``cell_costs``)
    and each arm the mean of its row; ``"paper"`` each arm the paper's GSM8K price
    ``p_in + 2 p_out`` and no per-cell costs.  The default is the rule of every stored run on
    these matrices.  ``details`` holds ``prices`` (the rule), ``feature_names`` and
    ``reported_accuracy_pct`` (ZeroEval's own accuracy per model, ``nan`` where it reports
    none); under ``"tokens"`` also ``dollars_per_raw_cost`` (``T_mean / 1e6``: a raw cost
    times it is dollars), under ``"paper"`` ``no_cell_costs``, why ``cost=per_cell`` refuses.
    """
    if name not in ZEROEVAL_BENCHMARKS:
        raise unknown_name("ZeroEval benchmark", name, list(ZEROEVAL_BENCHMARKS))
    if prices not in PRICE_RULES:
        raise ValueError(f"benchmark.prices must be one of {', '.join(PRICE_RULES)} (the price rule of {name}), "
                         f"got {prices!r}")
    return _loaded(name, prices)


@lru_cache(maxsize=len(ZEROEVAL_BENCHMARKS) * len(PRICE_RULES))
def _loaded(name: str, prices: str) -> Benchmark:
    """:func:`load_zeroeval` of a known ``name`` and price rule, built once a process."""
    release_info = ZEROEVAL_BENCHMARKS[name]
    with np.load(data_file(f"{name}/correct.npz")) as release:
        correct = release["correct"].astype(np.float64)
        output_chars = release["output_chars"].astype(np.float64)
        input_chars = release["input_chars"].astype(np.float64)
        models = [str(model) for model in release["models"]]
    table = read_csv(f"{name}/models.csv")
    features = read_csv(f"{name}/features.csv")
    reported = {row["model"]: row["reported_pct"] for row in read_csv(f"{name}/scores_vs_reported.csv")}
    for rows, what in ((table, "models.csv"), (features, "features.csv")):
        if [row["model"] for row in rows] != models:
            raise ValueError(f"{name}/{what} does not list the matrix's models in its row order")
    price_in = np.array([float(row["input_usd_per_1m"]) for row in table])
    price_out = np.array([float(row["output_usd_per_1m"]) for row in table])
    details = {
        "prices": prices,
        "feature_names": list(FEATURE_NAMES),
        "reported_accuracy_pct": np.array([float(reported[model] or "nan") for model in models]),
    }
    if prices == "paper":
        costs = {"prices": price_in + PAPER_OUTPUT_PER_INPUT * price_out}
        details["no_cell_costs"] = (
            "benchmark.prices=paper prices each arm by the paper's GSM8K rule (input + 2 x output price, USD per 1M "
            "tokens), in which a cell has no cost of its own; benchmark.prices=tokens charges each cell its tokens"
        )
    else:
        dollars = (input_chars[None, :] * price_in[:, None] + output_chars * price_out[:, None]) / (
            CHARS_PER_TOKEN * 1e6
        )
        mean_tokens = float((input_chars[None, :] + output_chars).mean() / CHARS_PER_TOKEN)
        costs = {"cell_costs": dollars * 1e6 / mean_tokens}
        details["dollars_per_raw_cost"] = mean_tokens / 1e6
    return Benchmark(
        name=name if prices == "tokens" else f"{name}/paper_prices",
        scores=correct,
        **costs,
        arm_names=tuple(models),
        features=np.column_stack([_codes([row[column] for row in features]) for column in FEATURE_NAMES]),
        specific_prior=specific_prior(name),
        default_batch_size=release_info.default_batch_size,
        source=release_info.source,
        license=release_info.license,
        details=details,
    )


def load_gsm8k_zeroeval(prices: str = "tokens") -> Benchmark:
    """The real GSM8K matrix (``[41, 1319]`` binary), priced by ``prices``: ``load_zeroeval("gsm8k_zeroeval")``."""
    return load_zeroeval("gsm8k_zeroeval", prices)


def load_crux_zeroeval(prices: str = "tokens") -> Benchmark:
    """The real CRUXEval-O matrix (``[48, 800]`` binary), priced by ``prices``: ``load_zeroeval("crux_zeroeval")``."""
    return load_zeroeval("crux_zeroeval", prices)


def load_math_l5_zeroeval(prices: str = "tokens") -> Benchmark:
    """The real MATH level-5 matrix (``[38, 721]`` binary), priced by ``prices``: ``load_zeroeval("math_l5_zeroeval")``.
    """
    return load_zeroeval("math_l5_zeroeval", prices)
