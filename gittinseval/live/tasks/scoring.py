"""What the live task adapters and their configs share: the bundled example files and prices, and the
JSON-lines reader of a task's examples (in a task's yaml,
``examples: {_target_: gittinseval.live.tasks.scoring.read_jsonl, path: ...}``).

The adapters themselves: :mod:`gittinseval.live.tasks.matrix` (a response matrix) and
:mod:`gittinseval.live.tasks.chat` (an OpenAI-compatible chat endpoint).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["bundled_examples", "bundled_prices", "read_jsonl"]


def read_jsonl(path: str | Path | None = None, bundled: str | None = None) -> list[dict[str, Any]]:
    """Examples from a JSON-lines file ``path``, or the bundled file named ``bundled``
    (in ``gittinseval/live/examples/``); neither: the bundled arithmetic examples."""
    if path is not None:
        path = Path(path)
    elif bundled is not None:
        path = bundled_examples().with_name(bundled)
        if not path.is_file():
            available = sorted(p.name for p in path.parent.glob("*.jsonl"))
            raise ValueError(f"no bundled examples {bundled!r}; bundled: {', '.join(available)}")
    else:
        path = bundled_examples()
    if not path.is_file():
        raise ValueError(f"no examples file {path}")
    examples = []
    with open(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                examples.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}, line {number}: not JSON ({error.msg}, column {error.colno})") from None
    if not examples:
        raise ValueError(f"{path} holds no examples (one JSON object per line)")
    return examples


def bundled_prices() -> Path:
    """Example prices (USD per 1M tokens) of OpenAI's models and inspect_ai's mock model, in inspect_ai's
    model cost config shape."""
    return Path(__file__).resolve().parents[1] / "examples" / "prices.yaml"


def bundled_examples() -> Path:
    """Twenty short arithmetic questions with one-word answers, for the chat example."""
    return Path(__file__).resolve().parents[1] / "examples" / "arithmetic.jsonl"
