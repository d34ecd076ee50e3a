"""A chat reply's text and usage, read and checked, and each example's bill."""

from types import SimpleNamespace

import httpx
import openai
import pytest

from gittinseval.live.failures import NonRetryableError, TransientError
from gittinseval.live.tasks.replies import outcome_bill, reply_usage, status_failure


def reply(usage, content="4."):
    return SimpleNamespace(usage=usage, choices=[SimpleNamespace(message=SimpleNamespace(content=content))])


def test_a_reply_gives_its_text_and_its_tokens_the_reasoning_ones_within_the_completion_ones():
    details = SimpleNamespace(reasoning_tokens=2)
    usage = SimpleNamespace(prompt_tokens=10, completion_tokens=5, completion_tokens_details=details)
    assert reply_usage(reply(usage), "here") == ("4.", 10, 5, 2)
    assert reply_usage(reply(SimpleNamespace(prompt_tokens=10, completion_tokens=5), None), "here") == ("", 10, 5, 0)


def test_a_reply_that_says_wrongly_what_it_was_billed_for_is_a_failure_of_unknown_cost():
    for usage, problem in (
        (None, "no usage.prompt_tokens"),
        (SimpleNamespace(prompt_tokens=-1, completion_tokens=5), "a negative or non-integer (-1) usage.prompt_tokens"),
        (SimpleNamespace(prompt_tokens=1, completion_tokens=2,
                         completion_tokens_details=SimpleNamespace(reasoning_tokens=3)), "reasoning_tokens 3"),
    ):
        failure = reply_usage(reply(usage), "here")
        assert isinstance(failure, NonRetryableError) and problem in str(failure) and failure.uncosted == 1


def test_the_bill_of_an_outcome_a_scored_one_a_billed_failure_and_one_of_unknown_cost():
    assert outcome_bill((1.0, 0.5, 10, 5, 2, False)) == (0.5, 10, 5, 2, False)
    assert outcome_bill(TransientError("refused", cost=0.0)) == (0.0, 0, 0, 0, False)
    assert outcome_bill(NonRetryableError("no usage", cost=0.0, uncosted=1)) == (0.0, None, None, None, False)


@pytest.mark.parametrize(
    ("status", "code", "kind", "wait"),
    [
        (429, None, TransientError, 2.0),  # retried after the wait the provider asks for
        (429, "insufficient_quota", NonRetryableError, None),  # a spent quota would only come again
        (503, None, TransientError, None),
        (400, None, NonRetryableError, None),
    ],
)
def test_an_http_error_answer_is_classified_free_and_named(status, code, kind, wait):
    response = httpx.Response(status, headers={"retry-after": "2"}, request=httpx.Request("POST", "http://h/v1"))
    error = openai.APIStatusError("refused", response=response, body=None if code is None else {"code": code})
    failure = status_failure(error, "somewhere: ")
    assert type(failure) is kind and failure.cost == 0.0 and failure.retry_after == wait
    assert str(failure).startswith(f"somewhere: HTTP {status}: refused")
