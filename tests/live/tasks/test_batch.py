"""Batch mode's settings, the key a request is journaled by, and how a failed job call is classified (the runs
against the fake server's Batch API: tests/live/test_batch.py)."""

from types import SimpleNamespace

import httpx
import openai
import pytest

from gittinseval.live.batch_journal import BatchJournal
from gittinseval.live.failures import NonRetryableError, TransientError
from gittinseval.live.response_cache import ResponseCache
from gittinseval.live.tasks.batch import FREE, BatchCalls, BatchSettings, _classified, journal_key
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


def failed_batch(status, *codes):
    return SimpleNamespace(id="batch_1", status=status,
                           errors=SimpleNamespace(data=[SimpleNamespace(code=c, message="why") for c in codes]))


def test_a_line_or_batch_failure_is_classified_as_in_chat_mode():
    """A line's 429 of a spent quota stops the run (it would only come again), another 429 is retried; a batch that
    failed on the provider's enqueued-token limit is retried (the limit frees up), any other failed batch stops it."""
    calls = BatchCalls(BatchSettings(), None)

    def line(code):
        response = {"status_code": 429, "body": {"error": {"code": code, "message": "no"}}}
        return calls._failure(failed_batch("completed"), response, {}, "here")

    assert type(line("insufficient_quota")) is NonRetryableError and type(line("rate_limit_exceeded")) is TransientError
    queued = calls._failure(failed_batch("failed", "token_limit_exceeded"), {}, {}, "here")
    assert type(queued) is TransientError and "token_limit_exceeded: why" in str(queued)
    assert type(calls._failure(failed_batch("failed", "invalid_request"), {}, {}, "here")) is NonRetryableError


def test_a_line_that_fails_unpriced_is_charged_once_whatever_the_positions_asking_its_request(tmp_path):
    """A line missing from its batch's files, or whose reply cannot be read, may have been billed once: the first
    position asking its request counts it (``uncosted``), the others nothing; a line another call took, nothing."""
    cache = ResponseCache(tmp_path / "responses.sqlite")
    journal = BatchJournal(cache)
    calls = BatchCalls(BatchSettings(), journal)
    ended = failed_batch("completed")
    try:
        for result in (None, {"response": {"status_code": 200}}):  # no result; a reply without a body
            job, _ = journal.record_file("http://x/v1", "file-1", [("k", "request-0")])
            line = journal.pending(["k"])["k"]
            failures = calls._outcomes(None, "k", line, ended, result, "here", FREE, [{}, {}, {}], None, None)
            assert [f.uncosted for f in failures] == [1, 0, 0]
        assert [f.uncosted for f in calls._outcomes(None, "k", line, ended, result, "here", FREE, [{}], None,
                                                    None)] == [0]  # taken by the call above
        assert job == line.job
    finally:
        cache.close()
