"""The batch journal: a job's file and batch ids kept before it can be paid for, its lines pending until taken."""

import pytest

from gittinseval.live.batch_journal import BatchJournal, PendingLine
from gittinseval.live.response_cache import ResponseCache, ResponseCacheError


@pytest.fixture
def journal(tmp_path):
    cache = ResponseCache(tmp_path / "responses.sqlite")
    yield BatchJournal(cache)
    cache.close()


def test_a_line_is_pending_from_its_upload_until_taken_once_and_then_known_billed(journal):
    assert journal.pending(["a", "b"]) == {} and journal.count_unbilled(["a", "b"]) == 2  # never in a batch
    job, _ = journal.record_file("http://x/v1", "file-1", [("a", "request-0"), ("b", "request-1")])
    assert journal.pending(["a"]) == {"a": PendingLine(job, "file-1", None, "request-0")}
    journal.record_batch(job, "batch_1")
    assert journal.pending(["a", "b", "c"])["b"] == PendingLine(job, "file-1", "batch_1", "request-1")
    assert journal.take("a", job) and not journal.take("a", job)  # a second collector is not charged
    assert set(journal.pending(["a", "b"])) == {"b"}
    assert journal.count_unbilled(["a", "b", "c"]) == 2  # a was billed; b waits; c was never sent
    journal.drop([("b", job)])  # failed: not billed, submitted anew by a retry
    assert journal.pending(["b"]) == {} and journal.count_unbilled(["b"]) == 1


def test_a_request_submitted_again_is_pending_in_its_new_job_and_a_refused_job_is_dropped(journal):
    first, _ = journal.record_file("http://x/v1", "file-1", [("a", "request-0")])
    journal.take("a", first)
    second, _ = journal.record_file("http://x/v1", "file-2", [("a", "request-0"), ("b", "request-1")])
    assert journal.pending(["a"])["a"].job == second and journal.count_unbilled(["a"]) == 1
    journal.drop_job(second)
    assert journal.pending(["a", "b"]) == {}


def test_the_journal_outlives_a_cache_clear_and_a_foreign_file_is_refused(journal, tmp_path):
    job, _ = journal.record_file("http://x/v1", "file-1", [("a", "request-0")])
    assert journal.cache.clear() == 0 and journal.pending(["a"])["a"].job == job
    foreign = tmp_path / "foreign.sqlite"
    foreign.write_text("not sqlite")
    with pytest.raises(ResponseCacheError, match="cannot be used"):
        BatchJournal(ResponseCache(foreign)).pending(["a"])


def test_a_file_with_a_request_pending_elsewhere_is_not_journaled_and_that_line_is_found(journal, tmp_path):
    """Two processes sharing the journal: the check for a pending line and the journal's write are one transaction,
    so the second process to journal a request finds the first's line and journals nothing (no batch of its file)."""
    other = BatchJournal(ResponseCache(journal.cache.path))  # another process's connection to the same file
    try:
        job, found = journal.record_file("http://x/v1", "file-1", [("a", "request-0")])
        assert found == {}
        assert other.record_file("http://x/v1", "file-2", [("b", "request-0"), ("a", "request-1")]) == (
            None, {"a": PendingLine(job, "file-1", None, "request-0")})
        assert set(other.pending(["a", "b"])) == {"a"} and journal.pending(["a"])["a"].job == job
    finally:
        other.cache.close()
