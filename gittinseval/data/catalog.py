"""What data the package has, as printed by ``gittinseval-data list`` (:mod:`gittinseval.cli.data`).

The catalog is built from the ``benchmark`` config group, ``conf/benchmark/*.yaml``, as
``gittinseval --help`` lists it: one entry per file, so a new file is listed with no edit
here.  Each file's ``_target_`` (a loader) is called with the file's other keys, and the
entry reads the :class:`~gittinseval.data.benchmark.Benchmark` it returns: its shape, its
value type, what of it is real (:func:`data_status`) and its provenance (``source``,
``license``).  Two tables below hold what a config file does not say: the loaders whose
key chooses one of several bundled matrices (the entry gives the range of their shapes),
and the file formats of a loader of the user's own files (a file with a mandatory key,
``???``, such as ``matrix``).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gittinseval.data.banditeval import MATRIX_SEEDS, load_gsm8k, load_piqa
from gittinseval.data.benchmark import Benchmark
from gittinseval.data.matrix import COST_FORMATS, MATRIX_FORMATS, load_matrix
from gittinseval.data.mmlu import load_mmlu, mmlu_subjects
from gittinseval.utils.config_dir import CONFIG_DIR

__all__ = ["CatalogEntry", "benchmark_names", "catalog", "data_status"]

BENCHMARK_DIR = CONFIG_DIR / "benchmark"
"""The ``benchmark`` config group: one yaml file per benchmark."""

MISSING = "???"
"""A mandatory value of a config file (OmegaConf's): a benchmark of the user's own files."""

_CHOICES: dict[Callable[..., Benchmark], tuple[str, Callable[[], Sequence[Any]]]] = {
    load_mmlu: ("subject", mmlu_subjects),
    load_gsm8k: ("matrix_seed", lambda: list(MATRIX_SEEDS)),
    load_piqa: ("matrix_seed", lambda: list(MATRIX_SEEDS)),
}
"""Loaders whose config key chooses one of several bundled matrices: the key and its values."""

_FILE_FORMATS: dict[Callable[..., Benchmark], dict[str, tuple[str, ...]]] = {
    load_matrix: {"path": MATRIX_FORMATS, "costs": COST_FORMATS},
}
"""Loaders of the user's own files: the formats each key's file may have."""


@dataclass(frozen=True)
class CatalogEntry:
    """One benchmark of the ``benchmark=`` config group as bundled."""

    name: str
    n_arms: str
    n_examples: str
    values: str
    status: str
    source: str
    license: str


def benchmark_names() -> list[str]:
    """The options of ``benchmark=``: the names of ``conf/benchmark/*.yaml``, sorted."""
    return sorted(path.stem for path in BENCHMARK_DIR.glob("*.yaml"))


def data_status(benchmark: Benchmark) -> str:
    """What of a benchmark's data is real, from what its loader recorded.

    ``real row sums, synthesized item assignment`` (MMLU: which questions an arm got
    right is synthesized), ``R real rows, S synthesized (stand-in)`` (some rows
    synthesized), ``stand-in (real configurations and prices)`` (scores synthesized for
    the real arms and their prices) or ``stand-in``, else ``real``; a benchmark whose
    cells each have a cost says so.
    """
    synthesized = benchmark.details.get("synthesized_arms") or ()
    if benchmark.details.get("item_assignment") == "synthesized":
        status = "real row sums, synthesized item assignment"
    elif synthesized:
        status = f"{benchmark.n_arms - len(synthesized)} real rows, {len(synthesized)} synthesized (stand-in)"
    elif benchmark.stand_in:
        status = "stand-in (real configurations and prices)" if benchmark.prices is not None else "stand-in"
    else:
        status = "real"
    return f"{status}, with per-cell costs (cost=per_cell)" if benchmark.cell_costs is not None else status


def _span(values: Iterable[int]) -> str:
    """``"100-1534"``, or ``"805"`` when every value is the same."""
    values = sorted(set(values))
    return str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}"


def _choice_label(key: str, values: Sequence[Any]) -> str:
    """``benchmark.matrix_seed=1..5`` for consecutive integers, else ``benchmark.subject=<57 subjects>``."""
    if all(isinstance(v, int) for v in values) and list(values) == list(range(values[0], values[0] + len(values))):
        return f"benchmark.{key}={values[0]}..{values[-1]}"
    return f"benchmark.{key}=<{len(values)} {key}s>"


def _read_config(path: Path) -> dict[str, Any]:
    """The keys of a benchmark config file, a mandatory value left as :data:`MISSING`."""
    from omegaconf import OmegaConf  # the data floor reads a config file only here

    return OmegaConf.to_container(OmegaConf.load(path), resolve=True, throw_on_missing=False)


def _loader(target: str, path: Path) -> Callable[..., Benchmark]:
    module, _, name = str(target).rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as error:
        raise ValueError(f"{path}: _target_ {target!r} names no loader ({error})") from error


def _your_own(name: str, loader: Callable[..., Benchmark], config: dict[str, Any]) -> CatalogEntry:
    """The entry of a benchmark of the user's files: its keys to give, with their files' formats."""
    formats = _FILE_FORMATS.get(loader, {})
    keys = [key for key, value in config.items() if value == MISSING or key in formats]
    hint = " ".join(f"benchmark.{key}=<{'/'.join(formats.get(key, ('...',)))}>" for key in keys)
    return CatalogEntry(
        name=f"{name} ({hint})",
        n_arms="K",
        n_examples="N",
        values="binary or continuous in [0, 1]",
        status="your own",
        source="your file",
        license="yours",
    )


def _entry(name: str) -> CatalogEntry:
    """The entry of ``conf/benchmark/<name>.yaml``: its benchmark loaded with the file's settings."""
    path = BENCHMARK_DIR / f"{name}.yaml"
    config = _read_config(path)
    target = config.pop("_target_", None)
    if target is None:
        raise ValueError(f"{path}: no _target_ names the loader of the benchmark")
    loader = _loader(target, path)
    settings = {key: value for key, value in config.items() if not key.startswith("_")}
    if MISSING in settings.values():
        return _your_own(name, loader, settings)
    key, choices = _CHOICES.get(loader, (None, None))
    try:
        default = loader(**settings)
        variants = [loader(**{**settings, key: value}) for value in choices()] if key else [default]
    except (OSError, ValueError, TypeError, KeyError) as error:
        raise ValueError(f"{path}: the benchmark does not load ({error})") from error
    binary = {benchmark.binary for benchmark in variants}
    return CatalogEntry(
        name=f"{name} ({_choice_label(key, choices())})" if key else name,
        n_arms=_span(benchmark.n_arms for benchmark in variants),
        n_examples=_span(benchmark.n_examples for benchmark in variants),
        values="binary" if binary == {True} else "continuous" if binary == {False} else "binary or continuous",
        status=data_status(default),
        source=default.source,
        license=default.license,
    )


def _unknown(name: str, known: list[str]) -> ValueError:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return ValueError(f"unknown benchmark {name!r}{hint}; the benchmarks of conf/benchmark/: {', '.join(known)}")


def catalog(names: Iterable[str] | None = None) -> list[CatalogEntry]:
    """Every bundled benchmark with its shape, value type, provenance and licence.

    One entry per ``conf/benchmark/*.yaml`` (the options of ``benchmark=``), benchmarks of
    the user's own files last; ``names`` lists only those, in that order, and an unknown
    name is a ``ValueError`` that names the known ones.
    """
    known = benchmark_names()
    if names is None:
        entries = [_entry(name) for name in known]
        return sorted(entries, key=lambda entry: entry.status == "your own")  # stable: by name otherwise
    chosen = list(names)
    for name in chosen:
        if name not in known:
            raise _unknown(name, known)
    return [_entry(name) for name in chosen]
