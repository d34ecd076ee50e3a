"""Prompts built from an example's fields: a template with ``{field}`` placeholders and a system prompt per arm.

An example is a mapping (one line of a ``.jsonl`` file); a template names its fields
in braces, ``"Question: {question}\\nAnswer with a number."``, and a literal brace is
written twice (``{{`` and ``}}``), as in :meth:`str.format`.  A field the example
lacks is an error that names the field and the example, never an empty string.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping
from typing import Any

__all__ = ["PromptTemplate", "chat_messages", "describe_example", "example_field"]

_SHOWN = 120


def describe_example(example: Any) -> str:
    """The example as short JSON (cut to 120 characters), for error messages."""
    text = json.dumps(example, sort_keys=True, default=str)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def example_field(example: Mapping[str, Any], field: str, needed_by: str) -> Any:
    """``example[field]``, or a ``ValueError`` naming the field, who needs it and the example."""
    if not isinstance(example, Mapping):
        raise ValueError(f"{needed_by} needs examples that are mappings of fields, got {describe_example(example)}")
    if field not in example:
        fields = ", ".join(sorted(map(str, example))) or "none"
        raise ValueError(
            f"{needed_by} needs field {field!r}, missing from example {describe_example(example)} "
            f"(its fields: {fields})"
        )
    return example[field]


class PromptTemplate:
    """A user prompt with ``{field}`` placeholders filled from an example.

    Placeholders are plain field names (``{question}``); conversions and format
    specs are allowed (``{price:.2f}``), indexing and attributes (``{a[0]}``,
    ``{a.b}``) are not, so that a template reads the example's top-level fields only.

    Args:
        template: e.g. ``"{prompt}"`` (the default: the example's ``prompt`` field as is).
    """

    def __init__(self, template: str = "{prompt}") -> None:
        if not isinstance(template, str):
            raise TypeError(f"a prompt template must be a string, got {template!r}")
        try:
            parts = list(string.Formatter().parse(template))
        except ValueError as error:
            raise ValueError(
                f"prompt template {template!r} is malformed: {error} (write a literal brace twice)"
            ) from None
        fields = []
        for _, field, _, _ in parts:
            if field is None:
                continue
            if not field.isidentifier():
                raise ValueError(
                    f"prompt template {template!r}: placeholder {{{field}}} must be a field name "
                    "(letters, digits and underscores)"
                )
            if field not in fields:
                fields.append(field)
        self.template = template
        self.fields = tuple(fields)

    def render(self, example: Mapping[str, Any]) -> str:
        """The template with each placeholder replaced by the example's field."""
        values = {field: example_field(example, field, f"prompt template {self.template!r}") for field in self.fields}
        return self.template.format_map(values)

    def __repr__(self) -> str:
        return f"PromptTemplate({self.template!r})"


def chat_messages(
    template: PromptTemplate, example: Mapping[str, Any], system: str | None = None
) -> list[dict[str, str]]:
    """The chat messages of one example for an arm: its ``system`` prompt, if any, then the rendered user prompt.

    The system prompt is the arm's own and is sent as written (no placeholders), so
    that arms that differ only in their instructions share one template.
    """
    if system is not None and not isinstance(system, str):
        raise TypeError(f"a system prompt must be a string, got {system!r}")
    head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": template.render(example)}]
