"""GSM8K and PIQA from BanditEval: model x sampling-configuration arms x 1000 examples.

The package ships every row's configuration (model, temperature, max tokens,
prompt) and price in the release's row order, but not the scores.  Without a
``path`` the loaders build a documented **stand-in**; with ``path`` they read the
release (``.npy`` or ``.pkl``, arms x examples) and attach the same configurations
and prices.

Stand-in generative model (one per benchmark, constants below):

* Row accuracy ``p_k = sigmoid(m[model] + t[temperature] + s[prompt, max_tokens])``:
  a model ability plus a temperature effect and a prompt x length effect (a
  step-by-step answer cut at 128 tokens is often unparseable).
* Calibration to the known facts: the abilities of the models of the known rows
  are solved so those rows hit their known means exactly; the other models'
  abilities (relative values below) get one common shift, found by Brent's
  method, so that the mean of the row means equals the known value.
* Correct counts: ``round(1000 p_k)`` for greedy rows (temperature 0) and known
  rows, the same in every matrix; ``Binomial(1000, p_k)`` for sampled rows, drawn
  per matrix (``matrix_seed`` 1..5 as in the release) and capped one below the
  known best row, which stays the best by fact.
* Which items are correct: item easiness ``N(0, 1.2^2)`` shared by all matrices and
  a Gumbel top-k draw per row
  (:func:`~gittinseval.data.synthesis.binary_with_row_sums`); greedy rows keep
  the same correct set in every matrix.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, logit

from gittinseval.data._files import read_csv, specific_prior
from gittinseval.data.benchmark import Benchmark, validate_matrix
from gittinseval.data.matrix import read_matrix
from gittinseval.data.synthesis import binary_with_row_sums

__all__ = [
    "MATRIX_SEEDS",
    "STAND_INS",
    "StandInModel",
    "load_gsm8k",
    "load_piqa",
    "read_banditeval_matrix",
    "stand_in_accuracies",
]

N_EXAMPLES = 1000
MATRIX_SEEDS = range(1, 6)
"""The ``matrix_seed`` of each of the release's five matrices per benchmark."""
ITEM_SPREAD = 1.2
TEMPERATURES = (0.0, 0.5, 1.0)
MAX_TOKENS = (128, 512)
PROMPTS = ("empty", "step_by_step")


@dataclass(frozen=True)
class StandInModel:
    """Constants of one benchmark's stand-in (logit scale).

    Attributes:
        abilities: relative ability of each model not fixed by a known row.
        temperature: effect of each sampling temperature.
        prompt_length: effect of each (prompt, max_tokens) pair.
        known_means: ``{row: mean}`` facts the stand-in reproduces exactly.
        mean_of_means: the known mean of all row means.
        data_seed: seed of item easiness, greedy rows and the calibration-free draws.
    """

    abilities: dict[str, float]
    temperature: dict[float, float]
    prompt_length: dict[tuple[str, int], float]
    known_means: dict[int, float]
    mean_of_means: float
    data_seed: int


STAND_INS = {
    "gsm8k": StandInModel(
        abilities={
            "gpt2_large": -3.3, "tulu": -2.6, "tulu2": -2.0, "codellama": -2.2, "llama2_7b": -2.3,
            "mistral_7b": -1.4, "gemma_7b": -1.1, "starcoder2_7b": -1.9, "llemma_7b": -1.3,
        },
        temperature={0.0: 0.0, 0.5: -0.3, 1.0: -1.2},
        prompt_length={("empty", 512): 0.0, ("empty", 128): -0.2, ("step_by_step", 512): -0.1,
                       ("step_by_step", 128): -0.9},
        known_means={106: 0.413, 1: 0.021},
        mean_of_means=0.111,
        data_seed=8_000,
    ),
    "piqa": StandInModel(
        abilities={
            "gpt2": -3.0, "gpt2_large": -2.5, "codellama": -1.1, "gemma_7b": -0.3, "llama2_7b": -0.8,
            "mistral_7b": -0.2, "phi2": -0.5, "starcoder2_7b": -1.5, "llemma_7b": -1.2,
        },
        temperature={0.0: 0.0, 0.5: float(logit(0.650) - logit(0.672)), 1.0: -0.6},
        prompt_length={("empty", 512): 0.0, ("empty", 128): 0.0, ("step_by_step", 512): -1.0,
                       ("step_by_step", 128): -1.8},
        known_means={19: 0.672, 20: 0.672, 24: 0.650, 14: 0.630},
        mean_of_means=0.298,
        data_seed=9_000,
    ),
}

_SOURCE = "BanditEval (Zhou et al., 2024) {name} response matrices"
_LICENSE = "configurations and prices: the GittinsEval paper and BanditEval; stand-in scores: synthesized"


@lru_cache(maxsize=2)
def _configs(name: str) -> list[dict[str, str]]:
    rows = read_csv(f"{name}/configs.csv")
    if [int(r["row"]) for r in rows] != list(range(len(rows))):
        raise ValueError(f"{name}/configs.csv: rows are not 0..K-1 in order")
    return rows


def _models() -> list[str]:
    return [row["model"] for row in read_csv("gsm8k/model_prices.csv")]


def _config_effects(name: str, model: StandInModel) -> np.ndarray:
    return np.array(
        [
            model.temperature[float(r["temperature"])] + model.prompt_length[(r["prompt"], int(r["max_tokens"]))]
            for r in _configs(name)
        ]
    )


def stand_in_accuracies(name: str) -> np.ndarray:
    """Calibrated row accuracies ``p_k`` of a stand-in, shape ``[K]``."""
    model = STAND_INS[name]
    configs = _configs(name)
    effects = _config_effects(name, model)
    ability: dict[str, float] = {}
    for row, mean in model.known_means.items():
        ability.setdefault(configs[row]["model"], float(logit(mean) - effects[row]))
    models = [r["model"] for r in configs]
    fixed = np.array([m in ability for m in models])
    base = np.array([ability.get(m, model.abilities.get(m, np.nan)) for m in models])
    if np.isnan(base).any():
        missing = sorted({m for m, b in zip(models, base, strict=True) if np.isnan(b)})
        raise ValueError(f"{name}: no ability for models {missing}")

    def accuracies(shift: float) -> np.ndarray:
        return expit(base + effects + np.where(fixed, 0.0, shift))

    shift = brentq(lambda s: accuracies(s).mean() - model.mean_of_means, -20.0, 20.0, xtol=1e-12)
    p = accuracies(shift)
    for row, mean in model.known_means.items():
        p[row] = mean
    return p


def _features(name: str) -> np.ndarray:
    models = _models()
    return np.array(
        [
            [
                models.index(r["model"]),
                TEMPERATURES.index(float(r["temperature"])),
                MAX_TOKENS.index(int(r["max_tokens"])),
                PROMPTS.index(r["prompt"]),
            ]
            for r in _configs(name)
        ],
        dtype=np.int64,
    )


def _stand_in_scores(name: str, matrix_seed: int) -> np.ndarray:
    model = STAND_INS[name]
    configs = _configs(name)
    p = stand_in_accuracies(name)
    greedy = np.array([float(r["temperature"]) == 0.0 for r in configs]) | np.isin(
        np.arange(len(configs)), list(model.known_means)
    )
    shared = np.random.default_rng(model.data_seed)
    easiness = shared.normal(0.0, ITEM_SPREAD, size=N_EXAMPLES)
    shared_gumbel = shared.gumbel(size=(len(configs), N_EXAMPLES))
    per_matrix = np.random.default_rng([model.data_seed, matrix_seed])
    counts = np.where(greedy, np.round(N_EXAMPLES * p), per_matrix.binomial(N_EXAMPLES, p)).astype(np.int64)
    # A sampled row never ties or beats the known best rows: they are the best by fact.
    best = round(N_EXAMPLES * max(model.known_means.values()))
    counts = np.where(greedy, counts, np.minimum(counts, best - 1))
    gumbel = np.where(greedy[:, None], shared_gumbel, per_matrix.gumbel(size=shared_gumbel.shape))
    return binary_with_row_sums(counts, easiness, gumbel)


def read_banditeval_matrix(path: str | Path) -> np.ndarray:
    """A BanditEval response matrix (arms x examples) from ``.npy`` or the original ``.pkl``.

    A pickle may hold an array, a nested list, a pandas DataFrame, or a dict with
    one array under ``data``, ``matrix`` or ``scores``.  Unpickling runs code from
    the file: read only files you trust.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"BanditEval matrix not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        payload = read_matrix(path)
    elif suffix in (".pkl", ".pickle"):
        try:
            with open(path, "rb") as handle:
                payload = pickle.load(handle)
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError) as error:
            raise ValueError(f"{path}: cannot unpickle the matrix ({error})") from error
        if isinstance(payload, dict):
            keys = [k for k in ("data", "matrix", "scores") if k in payload]
            if not keys:
                keys_found = list(payload)[:5]
                raise ValueError(f"{path}: a pickled dict needs a 'data', 'matrix' or 'scores' entry, has {keys_found}")
            payload = payload[keys[0]]
        if hasattr(payload, "to_numpy"):
            payload = payload.to_numpy()
    else:
        raise ValueError(f"{path}: unsupported BanditEval format {suffix!r}; use .npy or .pkl")
    return validate_matrix(payload, str(path))


def _load(name: str, matrix_seed: int, path: str | None) -> Benchmark:
    configs = _configs(name)
    if path is not None:
        scores = read_banditeval_matrix(path)
        if scores.shape[0] != len(configs):
            raise ValueError(f"{path}: {scores.shape[0]} rows, but {name} has {len(configs)} configurations")
        source, stand_in = f"{_SOURCE.format(name=name)} ({path})", False
    else:
        if matrix_seed not in MATRIX_SEEDS:
            raise ValueError(f"matrix_seed must be one of 1..5 (the release's five matrices), got {matrix_seed!r}")
        scores = _stand_in_scores(name, matrix_seed)
        source = f"stand-in for {_SOURCE.format(name=name)}: real configurations and prices, synthesized scores"
        stand_in = True
    return Benchmark(
        name=name if path is not None else f"{name}_standin/m{matrix_seed}",
        scores=scores,
        prices=np.array([float(r["price_usd_per_1m_tokens"]) for r in configs]),
        arm_names=tuple(f"{r['model']}/T={r['temperature']}/{r['max_tokens']}/{r['prompt']}" for r in configs),
        features=_features(name),
        specific_prior=specific_prior(name),
        default_batch_size=min(8, scores.shape[1]),
        source=source,
        license=_LICENSE,
        stand_in=stand_in,
        details={"matrix_seed": matrix_seed, "feature_names": ["model", "temperature", "max_tokens", "prompt"]},
    )


@lru_cache(maxsize=6)
def load_gsm8k(matrix_seed: int = 1, path: str | None = None) -> Benchmark:
    """GSM8K, 122 configurations x 1000 problems: the stand-in, or the release at ``path``.

    Costs are ``input + 2 x output`` price (USD per 1M tokens).
    """
    return _load("gsm8k", matrix_seed, path)


@lru_cache(maxsize=6)
def load_piqa(matrix_seed: int = 1, path: str | None = None) -> Benchmark:
    """PIQA, 103 configurations x 1000 questions: the stand-in, or the release at ``path``.

    Costs are input prices (USD per 1M tokens).
    """
    return _load("piqa", matrix_seed, path)
