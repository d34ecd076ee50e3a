"""Rate limits kept before sending (issue 50, item 1): gittinseval.live.rate_limits and the chat scorer's use of it.

The chat scorer keeps each provider's requests and tokens per minute before it sends a request, reads the
wait a 429 asks for, and the driver waits that long before the retry, at no charge.  Against the fake
server's requests-per-minute cap: a run at the cap receives no 429, and a run above it recovers with its
429s free.  No assertion is on a time.
"""

import asyncio
import re
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import openai
import pytest

from gittinseval import GittinsPolicy
from gittinseval.live import LiveConfig, NonRetryableError, OpenAIChatScorer, TransientError, evaluate_async
from gittinseval.live.export import store_tables
from gittinseval.live.fake_server import COMPLETION_TOKENS, PRICES, FakeChatServer
from gittinseval.live.rate_limits import RateLimiter, WaitClock, per_minute, reset_seconds, retry_after
from gittinseval.live.status import status_text
from gittinseval.live.tasks.chat import chat_task

CAP = 1200  # the fake server's requests per minute: 20 a second, so that a run goes past the first second's burst
EXAMPLES = [{"prompt": f"What is {n} + 1?", "answer": str(n + 1)} for n in range(50)]


def answers():
    return {example["prompt"]: example["answer"] for example in EXAMPLES}


def run(arms, scorer, store=None, **settings):
    """An exhaustive run of ``arms`` on :data:`EXAMPLES` (a chat task), four calls of eight examples in flight."""
    task = chat_task(arms, EXAMPLES, scorer, prompt_tokens=6, completion_tokens=COMPLETION_TOKENS)
    options = {"policy": GittinsPolicy(8), "concurrency": 4, "progress": False, "store": store, **settings}
    return task, asyncio.run(evaluate_async(task, LiveConfig(**options)))


def scorer_of(server, **settings):
    return OpenAIChatScorer(server.base_url, PRICES, api_key_env=None, timeout=10, cache="never", **settings)


@pytest.fixture
def capped():
    server = FakeChatServer(answers(), rpm=CAP)
    yield server
    server.close()


ARMS = [{"model": "bad-model"}, {"model": "good-model"}]


def test_a_run_kept_at_the_servers_cap_receives_no_429(capped, tmp_path):
    _, result = run(ARMS, scorer_of(capped, rpm=CAP), tmp_path / "run.sqlite")
    assert result.stop_reason == "exhausted" and result.error is None
    assert capped.received == 2 * len(EXAMPLES) > CAP / 60  # past the first second's requests
    assert capped.rate_limited == 0 and result.attempts["failed"] == 0
    assert result.spent == pytest.approx(capped.cost_of_calls(), rel=1e-12)
    # The requests waited for the limit, and the status line says so.
    assert result.limit_wait > 0 and "s for rate limits" in result.ledger_line()
    assert "s for rate limits" in status_text(result.ledger_line(), result.warnings, result.status).splitlines()[0]


def test_a_run_above_the_cap_waits_as_each_429_asks_and_its_429s_are_free(capped, tmp_path, caplog):
    store = tmp_path / "run.sqlite"
    # A backoff of its own would wait 10 s and more; the server asks for less than a second.
    _, result = run(ARMS, scorer_of(capped, rpm=4 * CAP), store, max_retries=100, retry_backoff=10.0)
    assert result.stop_reason == "exhausted" and result.error is None
    assert capped.rate_limited > 0 and result.attempts["failed"] > 0
    _, attempts = (table.to_pylist() for table in store_tables(store))
    failed = [row for row in attempts if row["status"] == "failed"]
    assert failed and all("HTTP 429" in row["error"] for row in failed)
    # A failed call is charged what its other examples were billed: its 429s add nothing, none charged as expected.
    assert all(row["charged_as_expected"] == 0 for row in failed)
    assert [row["dollars"] for row in failed] == pytest.approx([row["billed_dollars"] for row in failed], rel=1e-12)
    assert result.spent == pytest.approx(capped.cost_of_calls(), rel=1e-12)
    assert sum(row["dollars"] for row in attempts) == pytest.approx(result.spent, rel=1e-12)
    waits = [float(wait) for wait in re.findall(r"HTTP 429.*; retrying in ([\d.e+-]+) s", caplog.text)]
    assert waits and max(waits) < 10.0


@pytest.mark.parametrize("setting", ["rpm", "tpm"])
@pytest.mark.parametrize("value", [0, -5, "fast", float("inf"), True])
def test_a_limit_that_is_not_a_positive_number_is_refused_by_name(setting, value):
    message = f"{setting} must be a positive number per minute, or null for no limit, got {value!r}"
    with pytest.raises(ValueError, match=re.escape(message)):
        OpenAIChatScorer("http://127.0.0.1:9/v1", PRICES, **{setting: value})
    with pytest.raises(ValueError, match=re.escape(f"arm 1: {message}")):
        OpenAIChatScorer("http://127.0.0.1:9/v1", PRICES).route([{"model": "a"}, {"model": "b", setting: value}])
    assert per_minute(setting, None) is None and per_minute(setting, "60") == 60.0


def test_a_429_of_a_spent_quota_stops_and_a_rate_limit_429_carries_its_wait(monkeypatch):
    scorer = OpenAIChatScorer("http://127.0.0.1:9/v1", PRICES, api_key_env=None, cache="never")

    def refuse_with(code, headers):
        async def create(self, **request):
            response = httpx.Response(429, headers=headers, request=httpx.Request("POST", "http://127.0.0.1:9/v1"))
            raise openai.RateLimitError("refused", response=response, body={"code": code})

        monkeypatch.setattr(openai.resources.chat.completions.AsyncCompletions, "create", create)

    refuse_with("insufficient_quota", {"retry-after": "3"})
    with pytest.raises(NonRetryableError, match="HTTP 429") as spent:
        asyncio.run(scorer({"model": "good-model"}, EXAMPLES[:2]))
    assert spent.value.retry_after is None and spent.value.cost == 0
    refuse_with("rate_limit_exceeded", {"retry-after": "3", "retry-after-ms": "2500"})
    with pytest.raises(TransientError, match="HTTP 429") as limited:
        asyncio.run(scorer({"model": "good-model"}, EXAMPLES[:2]))
    assert limited.value.retry_after == 2.5 and limited.value.cost == 0 and limited.value.scores == [None, None]


def test_retry_after_reads_the_wait_a_429_asks_for():
    assert retry_after({"retry-after-ms": "1500", "Retry-After": "9"}) == 1.5
    assert retry_after({"Retry-After": "2"}) == 2.0
    assert retry_after({"retry-after": "0.25"}) == 0.25
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 < retry_after({"Retry-After": later}) <= 30
    earlier = format_datetime(datetime.now(UTC) - timedelta(seconds=30), usegmt=True)
    assert retry_after({"Retry-After": earlier}) == 0.0
    # Without Retry-After: the longest reset of a limit that is spent (its remaining 0, or not said).
    resets = {"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s"}
    assert retry_after(resets) == 360.0
    assert retry_after({**resets, "x-ratelimit-remaining-tokens": "1200"}) == 1.0
    assert retry_after({**resets, "x-ratelimit-remaining-requests": "3", "x-ratelimit-remaining-tokens": "0"}) == 360
    assert retry_after(httpx.Headers({"X-RateLimit-Reset-Requests": "20ms"})) == pytest.approx(0.02)
    # Nothing it can read: the driver's own backoff.
    for headers in (None, {}, {"retry-after": "soon"}, {"retry-after-ms": "-5"}, {"x-ratelimit-reset-requests": "1d"}):
        assert retry_after(headers) is None, headers
    assert retry_after({"retry-after-ms": "nan", "retry-after": "4"}) == 4.0


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("2m59.56s", 179.56), ("0.75", 0.75),
     ("", None), ("1d", None), ("s", None), ("-1s", None), ("1 s", None)],
)
def test_reset_seconds_reads_the_durations_providers_write(text, seconds):
    assert reset_seconds(text) == (None if seconds is None else pytest.approx(seconds))


def test_a_request_counts_its_expected_tokens_and_a_large_one_waits_for_them_to_drain():
    scorer = OpenAIChatScorer("http://127.0.0.1:9/v1", PRICES)
    messages = [{"role": "user", "content": "x" * 41}]
    assert scorer._expected_tokens({"model": "m", "max_tokens": 16}, messages) == 11 + 16
    assert scorer._expected_tokens({"model": "m", "max_completion_tokens": 8, "max_tokens": 16}, messages) == 19
    assert scorer._expected_tokens({"model": "m", "max_completion_tokens": None, "max_tokens": 16}, messages) == 27
    scorer.route([{"model": "m"}], completion_tokens=4.5)
    assert scorer._expected_tokens({"model": "m"}, messages) == 11 + 5

    async def admitted():
        # 3600 tokens a minute, 60 a second: a second's worth goes at once, a token more waits for the bucket.
        limiter, clock = RateLimiter(None, 60 * 60), WaitClock()
        await limiter.acquire(60, clock)  # a second's worth: at once
        assert clock.seconds == 0
        await limiter.acquire(1, clock)
        return clock.seconds

    assert asyncio.run(admitted()) > 0


def test_the_wait_clock_counts_concurrent_waits_once():
    clock = WaitClock()
    with clock.waiting():
        outer_started = clock.seconds
        with clock.waiting():
            inner = clock.seconds
        assert clock._waiting == 1 and clock.seconds >= inner >= outer_started
    total = clock.seconds
    assert clock._waiting == 0 and clock.seconds == total > 0  # nothing in progress: it stands still
