"""Access to the data files bundled in ``gittinseval/data/files`` (see its README)."""

from __future__ import annotations

import csv
import difflib
from importlib import resources
from pathlib import Path

__all__ = ["data_file", "read_csv", "specific_prior", "unknown_name"]


def data_file(relative: str) -> Path:
    return Path(str(resources.files("gittinseval.data") / "files")) / relative


def read_csv(relative: str) -> list[dict[str, str]]:
    with open(data_file(relative), newline="") as handle:
        return list(csv.DictReader(handle))


def specific_prior(benchmark: str, group: str = "specific") -> tuple[float, float]:
    """The paper's data-specific prior ``(mean, var)`` for a benchmark and group."""
    for row in read_csv("priors.csv"):
        if row["benchmark"] == benchmark and row["group"] == group:
            return float(row["prior_mean"]), float(row["prior_var"])
    raise KeyError(f"no prior for benchmark {benchmark!r}, group {group!r} in priors.csv")


def unknown_name(kind: str, name: str, choices: list[str]) -> ValueError:
    """An error for an unknown name that suggests the closest valid ones."""
    close = difflib.get_close_matches(name, choices, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; choose one of {', '.join(choices)}"
    return ValueError(f"unknown {kind} {name!r}{hint}")
