"""Objects a task's config names by import path: a grader function, a solver, a reply script.

:func:`locate` imports the object a dotted path names, and :func:`build_targets` builds
every ``{_target_: path, ...}`` mapping of a value with Hydra.  Both fail with one line
that names the setting the path came from and why it names nothing: no module of that
name on Python's search path (``sys.path``, listed, since a console script such as
``gittinseval-live`` does not search the working folder), no such name in a module that
exists, a module that fails on import, or a call that fails.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from hydra.errors import InstantiationException
from hydra.utils import instantiate

__all__ = ["build_targets", "locate", "one_line"]


def one_line(error: BaseException) -> str:
    """``"Type: message"`` of ``error`` with its whitespace, line breaks included, collapsed to single spaces."""
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


def _search_path() -> str:
    return ", ".join(entry or "." for entry in sys.path)


def locate(path: str, where: str) -> Any:
    """The object the dotted import path ``path`` names (``package.module.name``), imported as needed.

    Else a one-line ``ValueError`` starting with ``where`` (the setting that gave
    ``path``): which module is missing from the search path, which name is missing from
    which module, or which module failed on import, and how.
    """
    parts = str(path).split(".")
    if not all(part.isidentifier() for part in parts):
        raise ValueError(f"{where}: {path!r} is not a dotted import path such as package.module.name")
    found: Any = None
    for position, part in enumerate(parts):
        name, owner = ".".join(parts[: position + 1]), ".".join(parts[:position])
        if position and hasattr(found, part):
            found = getattr(found, part)
            continue
        if position and not isinstance(found, ModuleType):
            raise ValueError(f"{where}: cannot import {path!r}: {owner!r} has no {part!r}")
        try:
            found = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name != name:  # the module exists, and one of its own imports failed
                raise ValueError(f"{where}: importing {name!r} failed: {one_line(error)}") from error
            if position:
                raise ValueError(f"{where}: cannot import {path!r}: {owner!r} has no {part!r}") from None
            raise ValueError(
                f"{where}: cannot import {path!r}: no module {part!r} on the search path ({_search_path()}); "
                "install it, or add its folder to PYTHONPATH"
            ) from None
        except Exception as error:  # noqa: BLE001 - any failure of the user's module on import is named
            raise ValueError(f"{where}: importing {name!r} failed: {one_line(error)}") from error
    return found


def _locate_all(value: Any, where: str) -> None:
    """Import every ``_target_`` of ``value``, nested ones included, so that a bad one is named by its setting."""
    if isinstance(value, Mapping):
        if "_target_" in value:
            locate(value["_target_"], where)
        for key, item in value.items():
            if key != "_target_":
                _locate_all(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for position, item in enumerate(value):
            _locate_all(item, f"{where}[{position}]")


def build_targets(value: Any, where: str) -> Any:
    """``value`` with every mapping that has a ``_target_`` built by Hydra; anything else as it is.

    ``where`` names ``value``'s setting in errors (``inspect arm 0 (mockllm/small): model_args``);
    a nested setting is named by its keys and positions (``...: model_args.custom_outputs``).
    """
    if isinstance(value, Mapping):
        if "_target_" in value:
            _locate_all(value, where)
            try:
                return instantiate(dict(value), _convert_="all")
            except InstantiationException as error:
                cause = error.__cause__ or error
                raise ValueError(f"{where}: {value['_target_']}: {one_line(cause)}") from cause
        return {key: build_targets(item, f"{where}.{key}") for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [build_targets(item, f"{where}[{position}]") for position, item in enumerate(value)]
    return value
