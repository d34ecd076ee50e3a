"""Model prices in one file: model -> USD per 1M input and output tokens.

The file has the shape of inspect_ai's model cost config (``inspect eval
--model-cost-config prices.yaml``, or ``model_cost_config=`` of ``inspect_ai.eval``),
so that one file serves both::

    openai/gpt-4o-mini:
      input: 0.15              # USD per 1M input tokens
      output: 0.60             # USD per 1M output tokens
      input_cache_write: 0.15  # optional here; inspect_ai requires all four
      input_cache_read: 0.075
      batch_input: 0.075       # optional: USD per 1M tokens of a Batch API call (mode: batch)
      batch_output: 0.30

YAML or JSON.  Every price must be a finite number ``>= 0``; an unknown field is an
error (a misspelt ``ouput`` would otherwise charge nothing).  A model is looked up
by its full name, or by the part after the provider when one key ends in it: an
OpenAI-compatible request for ``gpt-4o-mini`` finds ``openai/gpt-4o-mini``.

Batch prices are a model's own pair ``batch_input`` and ``batch_output`` (both or neither), as a provider's
price list gives them (OpenAI's: half the ``input`` and ``output``), rather than one discount for every
model: providers discount models differently, and a per-model field keeps the file inspect_ai's (which
ignores fields it does not know, where a top-level key would be read as a model).  A chat task in
``mode: batch`` charges them (:meth:`Prices.batch_price`); a model without them is an error there.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from gittinseval.live.task import TOKENS_PER_MILLION
from gittinseval.utils.validation import non_negative_float

__all__ = ["ModelPrice", "Prices", "load_prices"]


@dataclass(frozen=True)
class ModelPrice:
    """USD per 1M tokens of one model (inspect_ai's ``ModelCost``).

    ``input`` is charged on input tokens read at the full rate, ``output`` on output
    tokens, and the optional cache prices on the input tokens written to and read
    from a prompt cache, which providers report apart from the full-rate ones.  ``batch_input`` and
    ``batch_output`` are the input and output prices of a call made through a Batch API.
    """

    input: float
    output: float
    input_cache_write: float | None = None
    input_cache_read: float | None = None
    batch_input: float | None = None
    batch_output: float | None = None

    def dollars(
        self, input_tokens: float, output_tokens: float, cache_write_tokens: float = 0, cache_read_tokens: float = 0
    ) -> float:
        """``sum(tokens * price) / 1e6``; cache tokens without a cache price are an error, not free."""
        total = input_tokens * self.input + output_tokens * self.output
        for tokens, price, field in (
            (cache_write_tokens, self.input_cache_write, "input_cache_write"),
            (cache_read_tokens, self.input_cache_read, "input_cache_read"),
        ):
            if tokens:
                if price is None:
                    raise ValueError(f"{tokens:g} cache tokens were used but the price has no {field}")
                total += tokens * price
        return total / TOKENS_PER_MILLION


FIELDS = tuple(field.name for field in fields(ModelPrice))
REQUIRED = ("input", "output")
BATCH_FIELDS = ("batch_input", "batch_output")
"""A model's batch prices: both or neither."""


class Prices(Mapping[str, ModelPrice]):
    """A validated table of :class:`ModelPrice` by model name.

    Args:
        entries: ``{model: {input, output[, input_cache_write, input_cache_read]}}``.
        source: where the entries come from (a file name), for error messages.
    """

    def __init__(self, entries: Mapping[str, Mapping[str, Any]], source: str = "prices") -> None:
        if not isinstance(entries, Mapping) or not entries:
            raise ValueError(f"{source}: expected a mapping of model -> {{input, output}} prices, got {entries!r}")
        table = {}
        for model, entry in entries.items():
            where = f"{source}: model {model!r}"
            if not isinstance(entry, Mapping):
                raise ValueError(f"{where}: expected {{input: ..., output: ...}} per 1M tokens, got {entry!r}")
            unknown = sorted(set(entry) - set(FIELDS))
            if unknown:
                raise ValueError(f"{where}: unknown price field(s) {unknown}; the fields are {', '.join(FIELDS)}")
            missing = [field for field in REQUIRED if field not in entry]
            if missing:
                raise ValueError(f"{where}: missing {' and '.join(missing)} (USD per 1M tokens)")
            batch = [field for field in BATCH_FIELDS if entry.get(field) is not None]
            if len(batch) == 1:
                other = next(field for field in BATCH_FIELDS if field not in batch)
                raise ValueError(f"{where}: {batch[0]} without {other}; a batch price has both (USD per 1M tokens)")
            # An unset cache price may be null; input and output must be numbers.
            table[str(model)] = ModelPrice(
                **{
                    field: None
                    if value is None and field not in REQUIRED
                    else non_negative_float(f"{where}: {field}", value)
                    for field, value in entry.items()
                }
            )
        self.source = source
        self._table = table

    def __getitem__(self, model: str) -> ModelPrice:
        return self._table[model]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def price(self, model: str) -> ModelPrice:
        """The price of ``model``: its own entry, else the one entry named ``<provider>/.../<model>``."""
        if model in self._table:
            return self._table[model]
        candidates = [key for key in self._table if key.endswith("/" + model)]
        if len(candidates) == 1:
            return self._table[candidates[0]]
        if candidates:
            raise ValueError(f"{self.source}: model {model!r} is ambiguous between {candidates}; use its full name")
        raise ValueError(f"{self.source}: no price for model {model!r}; priced models: {', '.join(self._table)}")

    def batch_price(self, model: str) -> ModelPrice:
        """The price of a Batch API call of ``model`` (:meth:`price`): its ``batch_input`` and ``batch_output`` as
        its input and output prices; a model without them is a ``ValueError`` that names the fields."""
        price = self.price(model)
        if price.batch_input is None or price.batch_output is None:
            raise ValueError(
                f"{self.source}: model {model!r} has no batch price: give it batch_input and batch_output (USD per "
                "1M tokens of a Batch API call; OpenAI's are half its input and output), or run in mode: chat"
            )
        return ModelPrice(price.batch_input, price.batch_output)

    def as_dict(self, batch: bool = False) -> dict[str, dict[str, float]]:
        """The table as plain mappings (the file's shape, without unset prices); the batch prices only with
        ``batch``: a call that is not batched never costs them, so a store's record of the prices it was charged
        at (its scorer's identity) leaves them out."""
        shown = [field for field in FIELDS if batch or field not in BATCH_FIELDS]
        return {
            model: {field: getattr(price, field) for field in shown if getattr(price, field) is not None}
            for model, price in self._table.items()
        }

    def __repr__(self) -> str:
        return f"Prices({self.as_dict(batch=True)!r})"


def load_prices(source: str | Path | Mapping[str, Mapping[str, Any]]) -> Prices:
    """Prices from a YAML or JSON file, or from a mapping given inline (e.g. in a task config)."""
    if isinstance(source, Prices):
        return source
    if isinstance(source, Mapping):
        return Prices(source)
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"prices file {path} does not exist")
    try:
        entries = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = "" if mark is None else f" (line {mark.line + 1}, column {mark.column + 1})"
        problem = getattr(error, "problem", None) or " ".join(str(error).split())
        raise ValueError(f"prices file {path} is not YAML or JSON{where}: {problem}") from None
    return Prices(entries, source=str(path))
