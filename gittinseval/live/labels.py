"""Short, unique, stable labels for arms, for progress lines, logs, ``status.txt`` and W&B.

An arm given as a string is its own label, and an arm mapping with a ``name:`` keeps
that name.  Any other arm mapping is labelled by the fields in which the arms
differ, e.g. ``gpt-4o-mini t=0 sys2`` for arms that differ in model, temperature and
system prompt:

- ``model``: the part after the last ``/`` (``openai/gpt-4o-mini`` -> ``gpt-4o-mini``),
  or the whole name where two models would share that part;
- ``system``: ``sys1``, ``sys2``, ... numbering the distinct system prompts in the
  order they first appear (``nosys`` for an arm without one), since a prompt is too
  long to show;
- a number: ``key=value`` with a short key for common settings (``t`` for
  temperature, ``max`` for max_tokens), integral values without ``.0``;
- a short string (at most 16 characters, no spaces): ``key=value``; a longer string
  or a nested value: ``key1``, ``key2``, ... numbered like system prompts;
- a field that an arm lacks: nothing (``key=none`` where it is ``null``).

Fields appear in the order model, temperature, max_tokens, system, then the rest
alphabetically.  The labels
depend only on the list of arms, so the same arms get the same labels when a run
resumes.  Two arms with the same fields, or two arms with the same label, are an
error: the labels name the arms in every report, so they must tell them apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["arm_attributes", "arm_labels"]

NAME = "name"
_FIRST_FIELDS = ("model", "temperature", "max_tokens", "system")
_SHORT_KEYS = {"temperature": "t", "max_tokens": "max", "system": "sys"}
_MAX_SHOWN = 16
_ABSENT = object()
_ABSENT_TEXT = "\0absent"  # no JSON text starts with a NUL: an absent field is a value of its own


def _short_model_names(models: list[Any]) -> dict[str, str]:
    """Each distinct model name -> its part after the last ``/``, unless two models share that part."""
    names = {str(model) for model in models if model is not _ABSENT}
    tails = {name: name.rsplit("/", 1)[-1] for name in names}
    clash = len(set(tails.values())) < len(tails)
    return {name: name if clash else tail for name, tail in tails.items()}


def _number(value: float | int) -> str:
    """``0.0`` -> ``0``, ``0.7`` -> ``0.7`` (the shortest text that reads back as the same float)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value)


def _tokens(key: str, values: list[Any]) -> list[str]:
    """The label part of field ``key`` for each arm, given the arms' values (``_ABSENT`` where missing)."""
    short = _SHORT_KEYS.get(key, key)
    if key == "model":
        names = _short_model_names(values)
        return ["" if value is _ABSENT else names[str(value)] for value in values]
    numbered: dict[str, int] = {}
    tokens = []
    for value in values:
        if key == "system" and (value is _ABSENT or not value):
            tokens.append("nosys")
        elif value is _ABSENT:
            tokens.append("")
        elif value is None:
            tokens.append(f"{short}=none")
        elif isinstance(value, bool):
            tokens.append(f"{short}={str(value).lower()}")
        elif isinstance(value, int | float):
            tokens.append(f"{short}={_number(value)}")
        elif key != "system" and isinstance(value, str) and len(value) <= _MAX_SHOWN and " " not in value:
            tokens.append(f"{short}={value}")
        else:
            identity = json.dumps(value, sort_keys=True, default=str)
            number = numbered.setdefault(identity, len(numbered) + 1)
            tokens.append(f"{short}{number}")
    return tokens


def _differs(values: list[Any]) -> bool:
    """Whether some arm lacks the field while another has it, or two arms give it different values."""
    present = [value for value in values if value is not _ABSENT]
    return len(present) < len(values) or any(value != present[0] for value in present)


def _check_name(index: int, name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"arm {index}: name must be a non-empty string, got {name!r}")
    return name


def arm_labels(arms: Sequence[Any]) -> list[str]:
    """A label per arm (see the module's docstring): unique, short and the same for the same arms.

    Raises ``ValueError`` for two arms with the same fields, a repeated label, or a
    ``name`` that is not a non-empty string.
    """
    labels: list[str | None] = [None] * len(arms)
    configured = []
    for index, arm in enumerate(arms):
        if isinstance(arm, str):
            labels[index] = _check_name(index, arm)
        elif isinstance(arm, Mapping):
            if NAME in arm:
                labels[index] = _check_name(index, arm[NAME])
            configured.append(index)
        else:
            raise ValueError(f"arm {index} must be a string or a mapping of settings, got {type(arm).__name__}")
    settings = [{key: value for key, value in arms[index].items() if key != NAME} for index in configured]
    for position, fields in enumerate(settings):
        for other in range(position):
            if settings[other] == fields:
                raise ValueError(
                    f"arms {configured[other]} and {configured[position]} have the same settings {fields}; "
                    "remove one (or tell them apart with another field)"
                )
    keys = {key for fields in settings for key in fields}
    ordered = [key for key in _FIRST_FIELDS if key in keys] + sorted(keys - set(_FIRST_FIELDS))
    columns = []
    for key in ordered:
        values = [fields.get(key, _ABSENT) for fields in settings]
        if _differs(values):
            columns.append(_tokens(key, values))
    for position, index in enumerate(configured):
        if labels[index] is not None:
            continue
        parts = [column[position] for column in columns if column[position]]
        if not parts:
            model = settings[position].get("model")
            parts = [_short_model_names([model])[str(model)] if model is not None else "arm"]
        labels[index] = " ".join(parts)
    seen: dict[str, int] = {}
    for index, label in enumerate(labels):
        if label in seen:
            raise ValueError(f"arms {seen[label]} and {index} are both labelled {label!r}; give them distinct `name:`s")
        seen[label] = index
    return [str(label) for label in labels]


def arm_attributes(arms: Sequence[Any]) -> np.ndarray | None:
    """``[K, D]`` integer codes of the fields that arm mappings share, for the certificate's prior; ``None`` if none.

    A field counts when the arms take at least two values of it and some value is shared by two arms or more
    (``model`` across prompts, ``system`` across models): then an arm's siblings tell about it.  ``name`` and
    fields every arm has alike, or that tell every arm apart, do not count.  Values are compared as their JSON
    text (an absent field is a value of its own), and coded in the order they first appear.
    """
    if not arms or not all(isinstance(arm, Mapping) for arm in arms):
        return None
    keys = sorted({key for arm in arms for key in arm if key != NAME})
    columns = []
    for key in keys:
        values = [json.dumps(arm[key], sort_keys=True, default=str) if key in arm else _ABSENT_TEXT for arm in arms]
        codes: dict[str, int] = {}
        column = [codes.setdefault(value, len(codes)) for value in values]
        if 1 < len(codes) < len(arms):
            columns.append(column)
    return np.array(columns, dtype=np.int64).T if columns else None
