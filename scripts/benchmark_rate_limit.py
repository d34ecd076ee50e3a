"""A live run kept at a provider's rate limit: its wall time against the time the limit implies.

    .venv/bin/python scripts/benchmark_rate_limit.py --rpm 1200 --examples 200

Serves the fake chat endpoint (``gittinseval.live.fake_server``) with a cap of ``--rpm`` requests
per minute, and runs a chat task of two arms on ``--examples`` examples against it, every cell
scored (2 x examples requests, eight examples a call, four calls in flight), with the scorer's
``rpm`` at the same cap.  The cap implies a least time: the server's bucket lets one second's
requests go at once (``BURST_SECONDS`` x rpm / 60, at least one), then rpm / 60 a second, so n
requests take at least ``(n - burst) / (rpm / 60)`` seconds.  Prints the run's wall time (the
whole ``evaluate_async``, from the store's opening to the final certificate), that least time, their
ratio (the target: at most 1.1x) and the 429s the server answered (kept at the cap: none); then the
ratio of the sending alone (the first request's arrival to the last's), without the run's fixed
start and end, which a longer run spreads thinner.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from gittinseval import GittinsPolicy
from gittinseval.live import LiveConfig, OpenAIChatScorer, evaluate_async
from gittinseval.live.fake_server import COMPLETION_TOKENS, PRICES, FakeChatServer
from gittinseval.live.rate_limits import BURST_SECONDS
from gittinseval.live.tasks.chat import chat_task

ARMS = [{"model": "bad-model"}, {"model": "good-model"}]
TARGET = 1.1


class TimedServer(FakeChatServer):
    """The fake server, with the time each request arrived."""

    def __init__(self, *args, **kwargs):
        self.arrivals: list[float] = []
        super().__init__(*args, **kwargs)

    def admit(self):
        self.arrivals.append(time.perf_counter())
        return super().admit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rpm", type=float, default=1200.0, help="the server's cap and the run's limit (default 1200)")
    parser.add_argument("--examples", type=int, default=200, help="examples of the task (default 200)")
    args = parser.parse_args()
    rate = args.rpm / 60
    burst = max(1.0, rate * BURST_SECONDS)
    if not (args.rpm > 0 and 2 * args.examples > burst):
        parser.error(f"--rpm must be positive and 2 x --examples above the first second's {burst:g} requests")
    examples = [{"prompt": f"What is {n} + 1?", "answer": str(n + 1)} for n in range(args.examples)]
    server = TimedServer({example["prompt"]: example["answer"] for example in examples}, rpm=args.rpm)
    try:
        scorer = OpenAIChatScorer(server.base_url, PRICES, api_key_env=None, cache="never", rpm=args.rpm)
        task = chat_task(ARMS, examples, scorer, prompt_tokens=6, completion_tokens=COMPLETION_TOKENS)
        config = LiveConfig(policy=GittinsPolicy(8), concurrency=4, progress=False, max_retries=100)
        started = time.perf_counter()
        result = asyncio.run(evaluate_async(task, config))
        wall = time.perf_counter() - started
    finally:
        server.close()
    requests = server.received - server.rate_limited
    least = (requests - burst) / rate
    ratio = wall / least
    print(f"{requests} requests at a cap of {args.rpm:g} a minute ({result.stop_reason}): wall time {wall:.2f} s, "
          f"the cap implies at least {least:.2f} s; ratio {ratio:.3f}x (target at most {TARGET}x, "
          f"{'met' if ratio <= TARGET else 'missed'}); 429s: {server.rate_limited}; "
          f"waited {result.limit_wait:.2f} s for the limit")
    first, last = server.arrivals[0], server.arrivals[-1]
    print(f"sending alone: {last - first:.2f} s, ratio {(last - first) / least:.3f}x; the run's start "
          f"{first - started:.2f} s and end {started + wall - last:.2f} s")


if __name__ == "__main__":
    main()
