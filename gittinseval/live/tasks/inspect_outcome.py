"""Reading an inspect eval's log: a batch's scores, and its charge from the token usage inspect reports.

- A sample's score is its scorer's value through inspect's ``value_to_float`` ("C" 1,
  "P" 0.5, "I" and "N" 0, yes/no, true/false, numbers), the mean over epochs; a value
  that is none of these, or a number outside [0, 1], is an error naming the scorer and
  the sample (:func:`score_value`).
- A batch's charge is the usage of every model the eval called (graders included) at
  each model's price, ``sum_models dollars(input, output, cache write, cache read)``
  (:meth:`EvalLogReader.charge`).
- A sample's bill is the usage its log records (``EvalSample.model_usage``, summed over
  epochs) at the prices: input tokens are every token the models read (cache writes and
  reads included), output tokens what they wrote.  A batch reports its examples' bills
  (:class:`~gittinseval.live.usage.Usage`) when they add up to its charge, as they do
  unless inspect counted usage outside the samples (:meth:`EvalLogReader.usage`).
- A failed eval or sample keeps the scores of the samples that finished, charges the
  usage reported, and counts each sample that did not finish as of unknown cost: the
  request it failed on may have been billed (:meth:`EvalLogReader.outcome`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from inspect_ai.log import EvalLog
from inspect_ai.scorer import CORRECT, INCORRECT, NOANSWER, PARTIAL, value_to_float

from gittinseval.live.failures import NonRetryableError
from gittinseval.live.tasks.prices import Prices
from gittinseval.live.usage import Usage

__all__ = ["BatchOutcome", "EvalLogReader", "score_value"]

_BOOLEAN_WORDS = ("yes", "no", "true", "false")  # value_to_float reads these, in any case


def score_value(value: Any, scorer: str, sample_id: Any) -> float:
    """A scorer's value as a float in [0, 1] through inspect's ``value_to_float``, else a named error."""
    convertible = isinstance(value, int | float) or (
        isinstance(value, str)
        and (value in (CORRECT, INCORRECT, PARTIAL, NOANSWER) or value.lower() in _BOOLEAN_WORDS or _is_number(value))
    )
    number = value_to_float()(value) if convertible else math.nan
    if not 0.0 <= number <= 1.0:
        raise NonRetryableError(
            f"inspect scorer {scorer!r} gave {value!r} for sample {sample_id!r}, which is not a score in [0, 1]; "
            "gittinseval reads C/P/I/N, yes/no, true/false and numbers in [0, 1] (choose another scorer with scorer=)"
        )
    return number


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


@dataclass(frozen=True)
class BatchOutcome:
    """One arm's batch, scored by inspect.

    Attributes:
        scores: ``[B]`` scores in [0, 1], in the order of the batch's sample ids.
        dollars: the eval's usage at the prices.
        tokens: total tokens of the batch (input, output and cache, every model).
        usage: what each sample of the batch was billed, if the samples' usage adds up to ``dollars``.
    """

    scores: np.ndarray
    dollars: float
    tokens: int
    usage: Usage | None = None


class EvalLogReader:
    """Reads the scores and the charge of batches from the eval logs of inspect task ``task_name``.

    Args:
        task_name: the inspect task's name, for errors.
        scorer: the name of the task's scorer to read; ``None``: its only one.
        prices: model -> USD per 1M tokens.
    """

    def __init__(self, task_name: str, scorer: str | None, prices: Prices) -> None:
        self.task_name = task_name
        self.scorer = scorer
        self.prices = prices

    def charge(self, eval_log: EvalLog) -> tuple[float, int, dict[str, str]]:
        """``(dollars, tokens, unpriced)`` of the usage inspect reports for an eval, every model at its price;
        ``unpriced``: model -> why its usage could not be charged (e.g. a grader model without a price)."""
        dollars, tokens, unpriced = 0.0, 0, {}
        for model, usage in eval_log.stats.model_usage.items():
            cache_write, cache_read = usage.input_tokens_cache_write or 0, usage.input_tokens_cache_read or 0
            try:
                dollars += self.prices.price(model).dollars(
                    usage.input_tokens, usage.output_tokens, cache_write, cache_read
                )
            except ValueError as error:
                unpriced[model] = f"{usage.input_tokens} input, {usage.output_tokens} output tokens: {error}"
            tokens += usage.input_tokens + usage.output_tokens + cache_write + cache_read
        return dollars, tokens, unpriced

    def usage(self, ids: Sequence[Any], eval_log: EvalLog, dollars: float) -> Usage | None:
        """The ``[B]`` bills of sample ``ids`` from their logged usage (every epoch, every model) at the prices, or
        ``None`` when a model is unpriced or they do not add up to the eval's charge ``dollars``.  A sample that
        failed, or is absent from the log, has no token counts (its whole bill is unknown) and the dollars of
        the usage logged for it."""
        bills: dict[Any, list[float]] = {}
        for sample in eval_log.samples or []:
            bill = bills.setdefault(sample.id, [0.0, 0, 0])
            for model, usage in sample.model_usage.items():
                cached = (usage.input_tokens_cache_write or 0, usage.input_tokens_cache_read or 0)
                try:
                    bill[0] += self.prices.price(model).dollars(usage.input_tokens, usage.output_tokens, *cached)
                except ValueError:
                    return None
                if bill[1] is not None:
                    bill[1] += usage.input_tokens + sum(cached)
                    bill[2] += usage.output_tokens
            if sample.error is not None:  # the request it failed on may have been billed unreported
                bill[1:] = [None, None]
        rows = [bills.get(sample_id, (0.0, None, None)) for sample_id in ids]
        if not math.isclose(sum(row[0] for row in rows), dollars, rel_tol=1e-9, abs_tol=1e-15):
            return None
        return Usage(*zip(*rows, strict=True))

    def outcome(self, index: int, model: str, ids: Sequence[Any], eval_log: EvalLog) -> BatchOutcome:
        """The scores and charge of arm ``index``'s batch of sample ``ids`` on ``model``; a failed eval or
        sample raises, with the scores of the samples that finished and the charge of the usage inspect reports."""
        dollars, tokens, unpriced = self.charge(eval_log)
        usage = None if unpriced else self.usage(ids, eval_log, dollars)
        scores: dict[Any, list[float]] = {}
        failed: dict[Any, str] = {}
        try:
            for sample in eval_log.samples or []:
                if sample.error is not None:
                    failed.setdefault(sample.id, sample.error.message)
                    continue
                named = sample.scores or {}
                name = self.scorer if self.scorer is not None else next(iter(named), None)
                if self.scorer is None and len(named) > 1:
                    raise NonRetryableError(
                        f"inspect task {self.task_name!r} has scorers {sorted(named)}; choose one with scorer="
                    )
                if name not in named:
                    raise NonRetryableError(
                        f"inspect task {self.task_name!r}: sample {sample.id!r} has no score {name!r} "
                        f"(its scores: {sorted(named) or 'none'})"
                    )
                scores.setdefault(sample.id, []).append(score_value(named[name].value, name, sample.id))
        except NonRetryableError as failure:
            raise NonRetryableError(str(failure), cost=dollars, usage=usage) from None
        finished = [sample_id in scores and sample_id not in failed for sample_id in ids]
        kept = [float(np.mean(scores[i])) if done else None for i, done in zip(ids, finished, strict=True)]
        if unpriced:
            # The scores stand; what the unpriced model cost is unknown, so every example of the batch is
            # charged its expected cost on top of the priced usage, and the run stops.
            unpriced_model, why = next(iter(unpriced.items()))
            raise NonRetryableError(
                f"arm {index} ({model}): no price for the usage of model {unpriced_model!r} ({why}); "
                f"add its price to {self.prices.source}",
                scores=kept,
                cost=dollars,
                uncosted=len(ids),
            )
        if eval_log.status == "success" and all(finished):
            return BatchOutcome(np.array(kept), dollars, tokens, usage)
        first = finished.index(False) if not all(finished) else None
        if failed:
            sample_id, message = next(iter(failed.items()))
            problem = f"sample {sample_id!r} failed: {' '.join(message.split())}"
        elif first is not None:
            problem = f"no scores for samples {[i for i, done in zip(ids, finished, strict=True) if not done][:5]}"
        else:
            problem = eval_log.error.message if eval_log.error else "no error given"
        # A sample that did not finish may have been billed for the request it failed on, whose usage
        # inspect does not report: the driver charges it one example at the arm's expected cost.
        raise NonRetryableError(
            f"inspect eval of arm {index} ({model}) ended {eval_log.status}: {problem}",
            scores=kept,
            cost=dollars,
            uncosted=finished.count(False),
            example=first,
            usage=usage,
        )
