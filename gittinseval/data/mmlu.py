"""MMLU (PromptEval/DOVE): 57 subjects, 1500 arms = 15 models x 100 prompt templates.

Bundled: each arm's exact number of correct answers per subject.  Which questions
an arm got right is synthesized (:func:`load_mmlu`); the original release is read
by :func:`read_prompteval_mmlu`.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from gittinseval.data._files import data_file, read_csv, specific_prior, unknown_name
from gittinseval.data.benchmark import Benchmark, validate_matrix
from gittinseval.data.synthesis import binary_with_row_sums

__all__ = [
    "MMLU_DATA_SEED",
    "MMLU_ITEM_SPREAD",
    "PROMPTEVAL_REPO",
    "load_mmlu",
    "mmlu_batch_size",
    "mmlu_subjects",
    "read_prompteval_mmlu",
]

MMLU_DATA_SEED = 20240521
"""Default seed of the synthesized MMLU item assignment."""

MMLU_ITEM_SPREAD = 1.0
"""Standard deviation of the synthesized question easiness (logit scale)."""

PROMPTEVAL_REPO = "PromptEval/PromptEval_MMLU_correctness"
"""Hugging Face dataset of the original correctness matrices (config = subject, split = model)."""

_BATCH_SIZE_BY_SIZE = {"small": 2, "medium": 4, "large": 8}
_SOURCE = "PromptEval/DOVE MMLU correctness (Polo et al., 2024): real row sums, synthesized item assignment"
_LICENSE = "MIT (PromptEval release; cite Polo et al., 2024); prices from the GittinsEval paper"


@lru_cache(maxsize=1)
def _counts() -> dict[str, np.ndarray]:
    with np.load(data_file("mmlu/arm_correct_counts.npz")) as data:
        return {key: data[key] for key in data.files}


@lru_cache(maxsize=1)
def _subject_table() -> dict[str, dict[str, str]]:
    return {row["subject"]: row for row in read_csv("mmlu/subjects.csv")}


@lru_cache(maxsize=1)
def _models() -> list[dict[str, str]]:
    return read_csv("mmlu/models.csv")


def mmlu_subjects() -> list[str]:
    """The 57 MMLU subjects, snake_case and sorted."""
    return [str(s) for s in _counts()["subjects"]]


def _subject_info(subject: str) -> dict[str, str]:
    if subject not in _subject_table():
        raise unknown_name("MMLU subject", subject, mmlu_subjects())
    return _subject_table()[subject]


def mmlu_batch_size(subject: str) -> int:
    """The paper's default batch size for the subject's size bucket (small 2, medium 4, large 8)."""
    return _BATCH_SIZE_BY_SIZE[_subject_info(subject)["size"]]


def _benchmark(subject: str, scores: np.ndarray, source: str, license: str, details: dict) -> Benchmark:
    info = _subject_info(subject)
    models = _models()
    n_templates = len(_counts()["templates"])
    model_codes, template_codes = np.divmod(np.arange(len(models) * n_templates), n_templates)
    return Benchmark(
        name=f"mmlu/{subject}",
        scores=scores,
        prices=np.repeat([float(m["input_usd_per_1m_tokens"]) for m in models], n_templates),
        arm_names=tuple(f"{m['model']}/template_{t}" for m in models for t in range(n_templates)),
        features=np.stack([model_codes, template_codes], axis=1),
        specific_prior=specific_prior("mmlu", info["difficulty"]),
        default_batch_size=mmlu_batch_size(subject),
        source=source,
        license=license,
        details={
            "subject": subject,
            "display_name": info["display_name"],
            "difficulty": info["difficulty"],
            "size": info["size"],
            "feature_names": ["model", "template"],
            **details,
        },
    )


@lru_cache(maxsize=8)
def load_mmlu(subject: str = "moral_scenarios", data_seed: int = MMLU_DATA_SEED, path: str | None = None) -> Benchmark:
    """One MMLU subject as a 1500 x N binary matrix (arm = model_index * 100 + template).

    Without ``path``: the row sums are the real correct counts of the PromptEval
    release and the item assignment is synthesized by
    :func:`~gittinseval.data.synthesis.binary_with_row_sums` (question easiness
    ``N(0, MMLU_ITEM_SPREAD^2)``, seeded by ``data_seed``).  Policies that sample
    each arm's questions in an independent random order see exactly the real
    distribution; methods that share questions across arms see a plausible item
    structure.  With ``path``: the original release, read by
    :func:`read_prompteval_mmlu`.

    Prices are the models' input prices (USD per 1M tokens); the data-specific prior
    is the subject's difficulty bucket; the default batch size follows its size.
    """
    subject_info = _subject_info(subject)
    if path is not None:
        scores = read_prompteval_mmlu(path, subject)
        return _benchmark(subject, scores, f"{PROMPTEVAL_REPO} ({path})", _LICENSE, {"item_assignment": "real"})
    counts = _counts()
    column = mmlu_subjects().index(subject)
    n_examples = int(counts["n_examples"][column])
    rng = np.random.default_rng([int(data_seed), column])
    easiness = rng.normal(0.0, MMLU_ITEM_SPREAD, size=n_examples)
    gumbel = rng.gumbel(size=(counts["correct"].shape[0], n_examples))
    scores = binary_with_row_sums(counts["correct"][:, column], easiness, gumbel)
    details = {"item_assignment": "synthesized", "data_seed": int(data_seed), "n_examples": subject_info["n_examples"]}
    return _benchmark(subject, scores, _SOURCE, _LICENSE, details)


def _example_columns(names: list[str], source: object) -> list[str]:
    columns = sorted((c for c in names if c.startswith("example_")), key=lambda c: int(c[len("example_") :]))
    if not columns:
        raise ValueError(f"{source}: no example_<j> columns (found {list(names)[:5]})")
    return columns


def _parquet_rows(files: list[Path]) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.concat_tables([pq.read_table(f) for f in files])
    columns = _example_columns(table.column_names, files[0])
    return np.column_stack([table.column(c).to_numpy(zero_copy_only=False) for c in columns]).astype(np.float64)


def read_prompteval_mmlu(source: str | Path, subject: str) -> np.ndarray:
    """The original PromptEval correctness matrix of one subject, ``[1500, N]``.

    The release (:data:`PROMPTEVAL_REPO`) has one config per subject and one split
    per model (its ``source_id`` in ``mmlu/models.csv``); each split has 100 rows
    (templates) and columns ``example_0 .. example_{N-1}`` of 0/1.  ``source`` is
    either a local directory holding ``<subject>/<model>-*.parquet`` (a download or
    clone of the dataset repository) or the hub id itself, read with ``datasets``
    when that package is installed and the hub is reachable.  Arms are model-major
    in the order of ``mmlu/models.csv``.
    """
    _subject_info(subject)
    model_ids = [m["source_id"] for m in _models()]
    root = Path(source)
    if root.is_dir():
        blocks = []
        for model in model_ids:
            files = sorted((root / subject).glob(f"{model}-*.parquet")) or sorted(
                (root / subject / model).glob("*.parquet")
            )
            if not files:
                raise FileNotFoundError(f"{root / subject}: no parquet file for model {model!r}")
            blocks.append(_parquet_rows(files))
    elif str(source) == PROMPTEVAL_REPO:
        try:
            from datasets import load_dataset
        except ImportError as error:
            raise ImportError(
                f"reading {PROMPTEVAL_REPO} from the hub needs the 'datasets' package; "
                "or download the dataset and pass its local directory"
            ) from error
        splits = load_dataset(PROMPTEVAL_REPO, subject)
        blocks = []
        for model in model_ids:
            split = splits[model]
            columns = _example_columns(list(split.column_names), f"{PROMPTEVAL_REPO}/{subject}/{model}")
            blocks.append(np.column_stack([np.asarray(split[c], dtype=np.float64) for c in columns]))
    else:
        raise FileNotFoundError(f"{source}: not a directory, and not the hub id {PROMPTEVAL_REPO!r}")
    widths = {block.shape[1] for block in blocks}
    if len(widths) != 1:
        raise ValueError(f"{source}: models of subject {subject!r} have different numbers of examples {sorted(widths)}")
    return validate_matrix(np.vstack(blocks), f"{source} ({subject})")
