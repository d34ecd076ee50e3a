"""GSM8K, real: 41 chat models x the 1319 GSM8K test questions, scored from ZeroEval's released replies.

Each cell is 1 if the number in the model's last ``"answer"`` field equals the gold
answer (greedy decoding, ZeroEval's zero-shot JSON format).  Beside the scores the
release gives each cell's prompt and reply length in characters, so each cell has its
own price: with ``T = chars / 4`` tokens and the model's list prices ``p_in, p_out``
(USD per 1M tokens),

    dollars[k, n] = (input_chars[n] * p_in[k] + output_chars[k, n] * p_out[k]) / 4e6.

Raw costs are in the unit of ``lam`` (USD per 1M tokens of an example, as the paper's
price tables): ``cell_costs[k, n] = dollars[k, n] * 1e6 / T_mean``, with ``T_mean``
the mean tokens of a cell over the whole matrix.  An arm's price (``prices[k]``, what
``cost=aware`` charges per example and what every cost mode plans with) is the mean of
its row, ``cell_costs[k].mean()``: its expected blended price at its own reply length.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from gittinseval.data._files import data_file, read_csv, specific_prior
from gittinseval.data.benchmark import Benchmark

__all__ = ["FEATURE_NAMES", "load_gsm8k_zeroeval"]

NAME = "gsm8k_zeroeval"
CHARS_PER_TOKEN = 4.0
# The categorical configuration encoding of the BO baselines' kernel, one code per column.
FEATURE_NAMES = ("model", "family", "size_class", "host")
SOURCE = (
    "ZeroEval (yuchenlin/ZeroEval, result_dirs/gsm at 570c6269): 41 models' replies to the 1319 GSM8K test "
    "questions, scored here; list prices are public mid-2024 proxies"
)
LICENSE = "replies Apache-2.0 (ZeroEval), questions MIT (openai/gsm8k)"


def _codes(column: list[str]) -> np.ndarray:
    """Integer codes of a categorical column, in order of first appearance."""
    levels = {value: code for code, value in enumerate(dict.fromkeys(column))}
    return np.array([levels[value] for value in column], dtype=np.int64)


@lru_cache(maxsize=1)
def load_gsm8k_zeroeval() -> Benchmark:
    """The real GSM8K response matrix (``[41, 1319]`` binary) with per-cell costs (``cell_costs``).

    ``details`` holds ``dollars_per_raw_cost`` (``T_mean / 1e6``: a raw cost times it is
    dollars), ``feature_names`` and ``reported_accuracy_pct`` (ZeroEval's own accuracy
    per model, ``nan`` where it reports none).
    """
    with np.load(data_file(f"{NAME}/correct.npz")) as release:
        correct = release["correct"].astype(np.float64)
        output_chars = release["output_chars"].astype(np.float64)
        input_chars = release["input_chars"].astype(np.float64)
        models = [str(model) for model in release["models"]]
    table = read_csv(f"{NAME}/models.csv")
    features = read_csv(f"{NAME}/features.csv")
    reported = {row["model"]: row["reported_pct"] for row in read_csv(f"{NAME}/scores_vs_reported.csv")}
    for rows, what in ((table, "models.csv"), (features, "features.csv")):
        if [row["model"] for row in rows] != models:
            raise ValueError(f"{NAME}/{what} does not list the matrix's models in its row order")
    price_in = np.array([float(row["input_usd_per_1m"]) for row in table])
    price_out = np.array([float(row["output_usd_per_1m"]) for row in table])
    dollars = (input_chars[None, :] * price_in[:, None] + output_chars * price_out[:, None]) / (CHARS_PER_TOKEN * 1e6)
    mean_tokens = float((input_chars[None, :] + output_chars).mean() / CHARS_PER_TOKEN)
    return Benchmark(
        name=NAME,
        scores=correct,
        cell_costs=dollars * 1e6 / mean_tokens,
        arm_names=tuple(models),
        features=np.column_stack([_codes([row[name] for row in features]) for name in FEATURE_NAMES]),
        specific_prior=specific_prior(NAME),
        default_batch_size=8,
        source=SOURCE,
        license=LICENSE,
        details={
            "dollars_per_raw_cost": mean_tokens / 1e6,
            "feature_names": list(FEATURE_NAMES),
            "reported_accuracy_pct": np.array([float(reported[model] or "nan") for model in models]),
        },
    )
