"""Reading an inspect eval's log (gittinseval.live.tasks.inspect_outcome): scores through inspect's value_to_float,
the charge of every model's usage, each sample's bill, and what a failed eval or sample leaves."""

from types import SimpleNamespace

import numpy as np
import pytest
from inspect_ai.model import ModelUsage

from gittinseval.live.failures import NonRetryableError
from gittinseval.live.tasks.inspect_outcome import EvalLogReader, score_value
from gittinseval.live.tasks.prices import load_prices
from tests.live.tasks.test_inspect_task import PRICES, per_example_dollars


def test_samples_bills_are_reported_only_when_they_add_up_to_the_evals_charge():
    """Usage inspect counted outside the samples (or an unpriced model) leaves the batch one charge, unbroken."""
    from types import SimpleNamespace

    from gittinseval.live.tasks.inspect_outcome import EvalLogReader

    reader = EvalLogReader("arithmetic", None, load_prices(PRICES))
    used = {"mockllm/strong": ModelUsage(input_tokens=40, output_tokens=6, total_tokens=46)}
    log = SimpleNamespace(samples=[SimpleNamespace(id=i, model_usage=used, error=None) for i in (1, 2)])
    one = per_example_dollars("mockllm/strong")
    assert reader.usage([1, 2, 3], log, 2 * one).tokens_in == (40, 40, None)  # sample 3 never ran
    assert reader.usage([1, 2], log, 3 * one) is None
    log.samples[0].model_usage = {"mockllm/unpriced": ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)}
    assert reader.usage([1, 2], log, one) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [("C", 1.0), ("P", 0.5), ("I", 0.0), ("N", 0.0), ("yes", 1.0), ("No", 0.0), ("TRUE", 1.0), ("false", 0.0),
     (0.25, 0.25), (1, 1.0), ("0.75", 0.75)],
)
def test_a_scorers_value_is_read_as_inspect_reads_it(value, expected):
    assert score_value(value, "match", 3) == expected


@pytest.mark.parametrize("value", ["maybe", 1.5, -1, "nan", "inf", "2"])
def test_a_value_that_is_not_a_score_is_named_with_its_scorer_and_sample(value):
    with pytest.raises(NonRetryableError, match=rf"inspect scorer 'judge' gave {value!r} for sample 'q7', which is"):
        score_value(value, "judge", "q7")


def usage(input_tokens, output_tokens):
    return ModelUsage(input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens)


def sample(sample_id, value, tokens=(40, 6), error=None):
    """A logged sample of mockllm/strong: its score under ``match`` and the usage of its one call."""
    return SimpleNamespace(id=sample_id, model_usage={"mockllm/strong": usage(*tokens)},
                           error=None if error is None else SimpleNamespace(message=error),
                           scores={"match": SimpleNamespace(value=value)})


def eval_log(samples, status="success"):
    """An eval log whose stats add up the samples' usage."""
    total_in = sum(s.model_usage["mockllm/strong"].input_tokens for s in samples)
    total_out = sum(s.model_usage["mockllm/strong"].output_tokens for s in samples)
    return SimpleNamespace(samples=samples, status=status, error=None,
                           stats=SimpleNamespace(model_usage={"mockllm/strong": usage(total_in, total_out)}))


def test_the_charge_is_every_models_usage_at_its_price_and_an_unpriced_model_is_named():
    reader = EvalLogReader("arithmetic", None, load_prices(PRICES))
    log = SimpleNamespace(stats=SimpleNamespace(model_usage={
        "mockllm/strong": usage(100, 10), "mockllm/weak": usage(1000, 50), "mockllm/grader": usage(7, 3),
    }))
    dollars, tokens, unpriced = reader.charge(log)
    # strong: 1 in, 4 out; weak: 0.5 in, 2 out (USD per 1M tokens); the grader has no price.
    assert dollars == pytest.approx((100 * 1.0 + 10 * 4.0 + 1000 * 0.5 + 50 * 2.0) / 1e6, rel=1e-12)
    assert tokens == 110 + 1050 + 10
    assert list(unpriced) == ["mockllm/grader"] and unpriced["mockllm/grader"].startswith("7 input, 3 output tokens: ")


def test_a_batch_has_each_samples_mean_score_over_its_epochs_in_the_order_asked():
    reader = EvalLogReader("arithmetic", None, load_prices(PRICES))
    log = eval_log([sample(1, "C"), sample(2, "I", tokens=(50, 8)), sample(1, "I")])  # sample 1 ran two epochs
    outcome = reader.outcome(0, "mockllm/strong", [2, 1], log)
    np.testing.assert_array_equal(outcome.scores, [0.0, 0.5])
    bills = [(50 * 1.0 + 8 * 4.0) / 1e6, 2 * (40 * 1.0 + 6 * 4.0) / 1e6]
    assert outcome.dollars == pytest.approx(sum(bills), rel=1e-12) and outcome.tokens == 58 + 2 * 46
    assert outcome.usage.dollars == pytest.approx(bills, rel=1e-12)
    assert (outcome.usage.tokens_in, outcome.usage.tokens_out) == ((50, 80), (8, 12))


def test_a_failed_sample_keeps_the_others_scores_and_leaves_its_own_cost_unknown():
    reader = EvalLogReader("arithmetic", None, load_prices(PRICES))
    log = eval_log([sample(1, "C"), sample(2, "C", error="rate\nlimited"), sample(3, "P")], status="error")
    with pytest.raises(NonRetryableError, match=r"inspect eval of arm 4 \(mockllm/strong\) ended error: sample 2 "
                                                r"failed: rate limited") as info:
        reader.outcome(4, "mockllm/strong", [1, 2, 3], log)
    failure = info.value
    assert failure.scores == [1.0, None, 0.5] and failure.uncosted == 1 and failure.example == 1
    assert failure.cost == pytest.approx(3 * (40 * 1.0 + 6 * 4.0) / 1e6, rel=1e-12)
    assert failure.usage.tokens_in == (40, None, 40)  # the failed sample's bill is unknown


def test_a_task_with_several_scorers_needs_one_named():
    log = eval_log([sample(1, "C")])
    log.samples[0].scores["judge"] = SimpleNamespace(value=0.2)
    with pytest.raises(NonRetryableError, match=r"inspect task 'arithmetic' has scorers \['judge', 'match'\]; choose"):
        EvalLogReader("arithmetic", None, load_prices(PRICES)).outcome(0, "mockllm/strong", [1], log)
    chosen = EvalLogReader("arithmetic", "judge", load_prices(PRICES)).outcome(0, "mockllm/strong", [1], log)
    np.testing.assert_array_equal(chosen.scores, [0.2])
    with pytest.raises(NonRetryableError, match=r"sample 1 has no score 'exact' \(its scores: \['judge', 'match'\]\)"):
        EvalLogReader("arithmetic", "exact", load_prices(PRICES)).outcome(0, "mockllm/strong", [1], log)
