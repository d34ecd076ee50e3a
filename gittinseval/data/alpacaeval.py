"""AlpacaEval 2.0: leaderboard models x 805 instructions, continuous preferences in [0, 1].

An entry is the weighted GPT-4-Turbo judge's preference for the model's output over
``gpt4_1106_preview``'s (the annotation's ``preference`` minus 1).  Costs are
``input + 8 x output`` price (USD per 1M tokens), the paper's 1:8 token ratio.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.special import logit

from gittinseval.data._files import data_file, read_csv, specific_prior
from gittinseval.data.benchmark import Benchmark, validate_matrix
from gittinseval.data.synthesis import continuous_with_row_means

__all__ = [
    "ALPACA_ANNOTATOR",
    "ALPACA_DATA_SEED",
    "load_alpacaeval",
    "load_alpacaeval_paper",
    "read_alpaca_eval_results",
]

ALPACA_ANNOTATOR = "weighted_alpaca_eval_gpt4_turbo"
ALPACA_DATA_SEED = 20240806
"""Default seed of the synthesized rows of ``alpacaeval_paper``."""

_SOURCE = f"tatsu-lab/alpaca_eval, {ALPACA_ANNOTATOR} vs gpt4_1106_preview"
_LICENSE = "CC BY-NC 4.0 (data), Apache-2.0 (code)"
_CLIP = 1e-7  # logit clipping of the real scores when estimating instruction effects


@lru_cache(maxsize=1)
def _shipped() -> tuple[np.ndarray, list[str], list[str]]:
    with np.load(data_file("alpacaeval/preferences_57.npz")) as data:
        return (
            data["scores"].astype(np.float64),
            [str(m) for m in data["models"]],
            [str(i) for i in data["instructions"]],
        )


@lru_cache(maxsize=1)
def _model_table() -> dict[str, dict[str, str]]:
    return {row["model"]: row for row in read_csv("alpacaeval/models.csv")}


def _price(model: str) -> float | None:
    row = _model_table().get(model)
    return None if row is None else float(row["cost_usd_per_1m_tokens_in_plus_8_out"])


def _benchmark(name: str, scores: np.ndarray, models: list[str], source: str, stand_in: bool, details: dict):
    prices = [_price(m) for m in models]
    unpriced = [m for m, p in zip(models, prices, strict=True) if p is None]
    return Benchmark(
        name=name,
        scores=scores,
        prices=np.array([1.0 if p is None else p for p in prices]),
        arm_names=tuple(models),
        features=np.arange(len(models))[:, None],
        specific_prior=specific_prior("alpacaeval"),
        default_batch_size=min(8, scores.shape[1]),
        source=source,
        license=_LICENSE,
        stand_in=stand_in,
        details={"unpriced_arms": unpriced, "feature_names": ["model"], **details},
    )


@lru_cache(maxsize=2)
def load_alpacaeval(path: str | None = None) -> Benchmark:
    """The real AlpacaEval matrix.

    Without ``path``: the bundled 57 x 805 rows.  With ``path``: every model of an
    ``alpaca_eval`` results tree (see :func:`read_alpaca_eval_results`).  Models the
    paper's price table lacks cost 1.0 (listed in ``details["unpriced_arms"]``).
    """
    if path is not None:
        scores, models = read_alpaca_eval_results(path)
        return _benchmark("alpacaeval", scores, models, f"{_SOURCE} ({path})", False, {"rows": "real"})
    scores, models, _ = _shipped()
    return _benchmark("alpacaeval", scores, models, _SOURCE, False, {"rows": "real"})


def _instruction_effects(scores: np.ndarray) -> tuple[np.ndarray, float]:
    """Instruction effects and residual spread of an additive logit model of real rows.

    ``logit Z_kj ~ g + a_k + d_j + spread * e_kj`` fitted by two-way means on
    ``logit(clip(Z, 1e-7, 1 - 1e-7))``; returns ``g + d_j`` and ``spread``.
    """
    logits = logit(np.clip(scores, _CLIP, 1 - _CLIP))
    grand = logits.mean()
    rows = logits.mean(axis=1) - grand
    columns = logits.mean(axis=0) - grand
    residual = logits - grand - rows[:, None] - columns[None, :]
    return grand + columns, float(residual.std())


@lru_cache(maxsize=4)
def load_alpacaeval_paper(data_seed: int = ALPACA_DATA_SEED, path: str | None = None) -> Benchmark:
    """The paper's 152-model AlpacaEval matrix (``in_paper_matrix == 1`` in ``models.csv``).

    With ``path`` (an ``alpaca_eval`` results tree) every row is real.  Without it,
    the 50 rows shipped in the package are real and the other 102 are synthesized
    by :func:`~gittinseval.data.synthesis.continuous_with_row_means`: the
    instruction effects and the residual spread of an additive logit model fitted to
    the 57 real rows (so instructions that are hard for real models are hard for
    synthesized ones, and most mass sits near 0 and 1), and each synthesized row's
    mean is exactly the model's published mean.  Arms are in the order of
    ``models.csv``.
    """
    paper_models = [m for m, row in _model_table().items() if row["in_paper_matrix"] == "1"]
    if path is not None:
        scores, models = read_alpaca_eval_results(path, models=paper_models)
        return _benchmark("alpacaeval_paper", scores, models, f"{_SOURCE} ({path})", False, {"rows": "real"})
    real_scores, real_models, _ = _shipped()
    effects, spread = _instruction_effects(real_scores)
    index = {m: k for k, m in enumerate(real_models)}
    synthesized = [m for m in paper_models if m not in index]
    targets = np.array([float(_model_table()[m]["mean_preference"]) for m in synthesized])
    fake = continuous_with_row_means(targets, effects, spread, np.random.default_rng(data_seed))
    fake_rows = dict(zip(synthesized, fake, strict=True))
    scores = np.stack([real_scores[index[m]] if m in index else fake_rows[m] for m in paper_models])
    return _benchmark(
        "alpacaeval_paper",
        scores,
        paper_models,
        f"stand-in for {_SOURCE}: {len(paper_models) - len(synthesized)} real rows, "
        f"{len(synthesized)} rows synthesized with the published means",
        True,
        {"rows": "mixed", "synthesized_arms": synthesized, "data_seed": int(data_seed), "logit_spread": spread},
    )


def read_alpaca_eval_results(
    results_dir: str | Path, models: list[str] | None = None, annotator: str = ALPACA_ANNOTATOR
) -> tuple[np.ndarray, list[str]]:
    """Read ``results/<model>/<annotator>/annotations.json`` of ``tatsu-lab/alpaca_eval``.

    Each annotation has the ``instruction`` and the judge's ``preference`` in
    [1, 2]; the score is ``preference - 1``.  Columns are aligned on the instruction
    text, in the order of the first model.  ``models`` selects and orders the rows
    (default: every model directory with annotations, sorted).

    Returns:
        ``([K, N] scores, K model names)``.
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"alpaca_eval results directory not found: {root}")
    if models is None:
        models = sorted(p.parent.parent.name for p in root.glob(f"*/{annotator}/annotations.json"))
        if not models:
            raise FileNotFoundError(f"{root}: no <model>/{annotator}/annotations.json")
    rows, order = [], None
    for model in models:
        path = root / model / annotator / "annotations.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing annotations for model {model!r}")
        try:
            records = json.loads(path.read_text())
            by_instruction = {r["instruction"]: r.get("preference") for r in records}
        except (json.JSONDecodeError, TypeError, KeyError) as error:
            message = f"{path}: not a list of annotations with 'instruction' and 'preference' ({error})"
            raise ValueError(message) from error
        if order is None:
            order = list(by_instruction)
        missing = [i for i in order if i not in by_instruction]
        if missing or len(by_instruction) != len(order):
            raise ValueError(f"{path}: instructions differ from {models[0]!r}'s ({len(missing)} missing)")
        rows.append([np.nan if by_instruction[i] is None else float(by_instruction[i]) - 1.0 for i in order])
    scores = np.array(rows)
    nan_rows = [models[k] for k in np.flatnonzero(np.isnan(scores).any(axis=1))]
    if nan_rows:
        raise ValueError(f"{root}: annotations without a preference for models {nan_rows[:10]}")
    return validate_matrix(scores, str(root)), list(models)
