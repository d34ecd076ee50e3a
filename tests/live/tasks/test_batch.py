"""Batch mode's settings, the key a request is journaled by, and how a failed job call is classified (the runs
against the fake server's Batch API: tests/live/test_batch.py)."""

import httpx
import openai
import pytest

from gittinseval.live.failures import NonRetryableError, TransientError
from gittinseval.live.tasks.batch import BatchSettings, _classified, journal_key
from gittinseval.live.tasks.providers import Endpoint


def test_the_settings_default_to_a_30_second_poll_retrying_expired_lines_in_the_24h_window():
    assert BatchSettings.of(None) == BatchSettings(30.0, "retry", "24h")
    assert BatchSettings.of({"poll_seconds": 1, "expired": "fail"}) == BatchSettings(1, "fail", "24h")
    with pytest.raises(ValueError, match=r"batch\.completion_window must be a window"):
        BatchSettings.of({"completion_window": ""})
    with pytest.raises(ValueError, match=r"batch\.poll_seconds must be a positive number of seconds, got True"):
        BatchSettings.of({"poll_seconds": True})


def test_a_request_is_journaled_by_the_whole_request_with_its_sample_above_temperature_0():
    endpoint, messages = Endpoint("http://x/v1", None), [{"role": "user", "content": "2 + 2?"}]
    cold, warm = {"temperature": 0}, {"temperature": 1}
    assert journal_key(endpoint, "m", messages, cold, 0) == journal_key(endpoint, "m", messages, cold, 3)
    assert journal_key(endpoint, "m", messages, warm, 0) != journal_key(endpoint, "m", messages, warm, 3)
    assert journal_key(endpoint, "m", messages, cold, 0) != journal_key(Endpoint("http://y/v1", None), "m",
                                                                        messages, cold, 0)


def test_a_failed_upload_creation_or_poll_is_classified_as_a_chat_request_and_free():
    request = httpx.Request("POST", "http://x/v1/batches")

    def status(code, body=None):
        response = httpx.Response(code, request=request, json=body or {"error": {"message": "no"}})
        return openai.APIStatusError("no", response=response, body=body)

    assert type(_classified(openai.APIConnectionError(request=request))) is TransientError
    for code, kind in ((429, TransientError), (503, TransientError), (400, NonRetryableError)):
        failure = _classified(status(code), "creating: ")
        assert type(failure) is kind and failure.cost == 0.0 and str(failure).startswith(f"creating: HTTP {code}")
    spent = status(429, {"code": "insufficient_quota"})
    assert type(_classified(spent)) is NonRetryableError
