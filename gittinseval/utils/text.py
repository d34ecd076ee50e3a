"""Wording shared by the messages of the command-line apps."""

from __future__ import annotations

__all__ = ["count", "invalid_yaml"]


def count(number: int, noun: str) -> str:
    """``number`` and ``noun``, with an ``s`` unless ``number`` is 1: ``count(1, "run") == "1 run"``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def invalid_yaml(error: Exception, path: object = None) -> str:
    """One line for a ``yaml.YAMLError``: ``<file>: not valid YAML (line L, column C): <problem>; fix ...``.

    PyYAML's own message spans four lines (the context, its place, the problem, its place); this
    keeps the problem and where it is.  ``path``: the file, when the error does not name it (a
    string was parsed); a file that PyYAML read itself is named by its mark.  (Duck-typed on the
    error's marks, so that this floor does not import PyYAML.)
    """
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    if path is None and mark is not None and not str(mark.name).startswith("<"):
        path = mark.name
    where = "" if mark is None else f" (line {mark.line + 1}, column {mark.column + 1})"
    problem = getattr(error, "problem", None) or " ".join(str(error).split())
    context = getattr(error, "context", None)
    problem = f"{problem} ({context})" if context else problem
    return f"{path or 'a config file'}: not valid YAML{where}: {problem}; fix the file's syntax there"
