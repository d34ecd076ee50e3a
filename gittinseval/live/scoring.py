"""Scoring functions for live runs: a response matrix with latency, and an OpenAI-compatible chat endpoint."""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gittinseval.data import Benchmark
from gittinseval.live.driver import NonRetryableError
from gittinseval.live.task import TOKENS_PER_MILLION, LiveTask

__all__ = [
    "MatrixScorer",
    "OpenAIChatScorer",
    "bundled_examples",
    "chat_task",
    "expected_chat_costs",
    "grade_first_word",
    "matrix_task",
    "read_jsonl",
]


class MatrixScorer:
    """``score_fn`` that reads a complete ``[K, N]`` response matrix.

    ``scorer(arm, example_ids)`` sleeps ``latency`` seconds (a stand-in for an
    LLM call) and returns ``scores[row, example_ids]``, where ``row`` is ``arm``
    itself for an integer arm, or its position in ``arm_names``.
    """

    def __init__(self, scores: np.ndarray, latency: float = 0.0, arm_names: Sequence[str] = ()) -> None:
        if not latency >= 0:
            raise ValueError(f"latency must be non-negative seconds, got {latency!r}")
        self.scores = np.asarray(scores, dtype=np.float64)
        self.latency = float(latency)
        self.rows = {name: row for row, name in enumerate(arm_names)}

    def __call__(self, arm: int | str, examples: Sequence[int]) -> np.ndarray:
        if self.latency:
            time.sleep(self.latency)
        row = self.rows[arm] if isinstance(arm, str) else int(arm)
        return self.scores[row, np.asarray(examples, dtype=np.int64)]


def matrix_task(
    benchmark: Benchmark, latency: float = 0.0, tokens_per_example: float = 1000.0, name: str | None = None
) -> LiveTask:
    """A live task that replays ``benchmark``: arms are its arm names, examples its ids.

    An example of arm ``k`` costs ``price_k * tokens_per_example / 1e6`` dollars
    (the bundled prices are USD per 1M tokens), so the policy's raw cost
    ``dollars * 1e6 / tokens_per_example`` is the price again; without prices
    the task has no costs.
    """
    if not tokens_per_example > 0:
        raise ValueError(f"tokens_per_example must be positive, got {tokens_per_example!r}")
    # Dollars per raw unit, then the product: the evaluator divides by the same
    # factor, so the policy sees the prices bit for bit (for 1000 tokens).
    dollars_per_unit = tokens_per_example / TOKENS_PER_MILLION
    costs = None if benchmark.prices is None else benchmark.prices * dollars_per_unit
    return LiveTask(
        arms=list(benchmark.arm_names),
        examples=list(range(benchmark.n_examples)),
        score_fn=MatrixScorer(benchmark.scores, latency, benchmark.arm_names),
        costs=None if costs is None else costs.tolist(),
        tokens_per_example=float(tokens_per_example),
        binary=benchmark.binary,
        benchmark=benchmark,
        name=benchmark.name.replace("/", "_") if name is None else name,
    )


def chat_task(
    arms: Sequence[Mapping[str, Any]],
    examples: Sequence[Mapping[str, Any]],
    score_fn: OpenAIChatScorer,
    prompt_tokens: float = 100.0,
    completion_tokens: float | None = 20.0,
    binary: bool = True,
    name: str = "chat",
) -> LiveTask:
    """A live task on a chat endpoint: expected costs from ``score_fn.prices`` and the
    expected token counts (see :func:`expected_chat_costs`), and
    ``tokens_per_example = prompt_tokens + completion_tokens`` (with
    ``completion_tokens=None``, the arms' mean ``max_tokens``)."""
    completion = (
        float(np.mean([arm["max_tokens"] for arm in arms if "max_tokens" in arm] or [0.0]))
        if completion_tokens is None
        else completion_tokens
    )
    return LiveTask(
        arms=list(arms),
        examples=list(examples),
        score_fn=score_fn,
        costs=expected_chat_costs(arms, score_fn.prices, prompt_tokens, completion_tokens),
        tokens_per_example=float(prompt_tokens + completion),
        binary=binary,
        name=name,
    )


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
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def bundled_examples() -> Path:
    """Twenty short arithmetic questions with one-word answers, for the chat example."""
    return Path(__file__).resolve().parent / "examples" / "arithmetic.jsonl"


def grade_first_word(reply: str, answer: str) -> float:
    """1.0 if the reply's first word, stripped of punctuation, equals the answer (case-insensitive)."""
    words = reply.split()
    if not words:
        return 0.0
    return float(words[0].strip(".,:;!?()[]\"'*").casefold() == str(answer).strip().casefold())


def grade_answer(reply: str, answer: str, choices: Sequence[str] | None = None) -> float:
    """Exact-match grading of a free-form reply, token by token (case-insensitive).

    With ``choices`` (e.g. ``["yes", "no"]``): 1.0 if the first token of the reply
    that is one of the choices is the answer.  Without: 1.0 if the answer is one of
    the reply's tokens ("The capital of Italy is Rome." for ``rome``).  Tokens are
    runs of letters and digits, so ``12`` does not match ``120``; an answer of
    several tokens must appear as that run of tokens.
    """
    tokens = re.findall(r"[a-z0-9]+", reply.casefold())
    wanted = re.findall(r"[a-z0-9]+", str(answer).casefold())
    if not wanted:
        raise ValueError(f"answer {answer!r} has no letters or digits to match")
    if choices is not None:
        options = {str(choice).casefold() for choice in choices}
        first = next((token for token in tokens if token in options), None)
        return float(first is not None and [first] == wanted)
    width = len(wanted)
    return float(any(tokens[i : i + width] == wanted for i in range(len(tokens) - width + 1)))


GRADERS = ("first_word", "answer")


def expected_chat_costs(
    arms: Sequence[Mapping[str, Any]],
    prices: Mapping[str, Mapping[str, float]],
    prompt_tokens: float = 100.0,
    completion_tokens: float | None = 20.0,
) -> list[float]:
    """Expected dollars per example of each chat arm from its model's prices per 1M tokens.

    ``completion_tokens=None`` takes each arm's ``max_tokens`` (an upper bound), so
    arms that may answer at length are expected to cost more.
    """
    missing = sorted({arm["model"] for arm in arms} - set(prices))
    if missing:
        raise ValueError(f"no prices for models {missing}; add them under prices: {{model: {{input, output}}}}")
    if completion_tokens is None and any("max_tokens" not in arm for arm in arms):
        raise ValueError("completion_tokens: null takes each arm's max_tokens, and some arm has none")
    return [
        (
            prompt_tokens * prices[arm["model"]]["input"]
            + (arm["max_tokens"] if completion_tokens is None else completion_tokens) * prices[arm["model"]]["output"]
        )
        / TOKENS_PER_MILLION
        for arm in arms
    ]


class OpenAIChatScorer:
    """``score_fn`` that asks an OpenAI-compatible ``/chat/completions`` endpoint.

    An arm is a mapping with ``model``, an optional ``system`` prompt, and any
    further request fields (``temperature``, ``max_tokens``, ...).  An example is a
    mapping with ``prompt``, ``answer`` and optionally ``choices``; its score is
    :func:`grade_first_word` of the reply (``grading="first_word"``) or
    :func:`grade_answer` (``grading="answer"``).  A batch costs
    ``sum(prompt_tokens * input + completion_tokens * output) / 1e6`` dollars from
    each response's ``usage`` and the model's ``prices`` (dollars per 1M tokens).
    Uses only the standard library.  Server errors, timeouts, 408 and 429 propagate,
    so the driver retries them; other client errors (a bad key, an unknown model)
    raise :class:`~gittinseval.live.driver.NonRetryableError` and stop the run.

    Args:
        base_url: e.g. ``http://localhost:8000/v1``.
        prices: ``{model: {"input": ..., "output": ...}}``.
        api_key_env: environment variable holding the API key (sent as a bearer
            token if set).
        timeout: seconds per HTTP request.
        grading: ``"first_word"`` or ``"answer"`` (see above).
    """

    def __init__(
        self,
        base_url: str,
        prices: Mapping[str, Mapping[str, float]],
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        grading: str = "first_word",
    ) -> None:
        if grading not in GRADERS:
            raise ValueError(f"grading must be one of {', '.join(GRADERS)}, got {grading!r}")
        for model, price in prices.items():
            if set(price) != {"input", "output"} or min(price.values()) < 0:
                raise ValueError(f"prices[{model!r}] must be {{input: >= 0, output: >= 0}} per 1M tokens, got {price}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.prices = {model: dict(price) for model, price in prices.items()}
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.grading = grading

    def __call__(self, arm: Mapping[str, Any], examples: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, float]:
        model = arm["model"]
        if model not in self.prices:
            raise ValueError(f"no price for model {model!r}")
        scores, cost = [], 0.0
        for example in examples:
            reply, usage = self.complete(arm, example["prompt"])
            if self.grading == "answer":
                scores.append(grade_answer(reply, example["answer"], example.get("choices")))
            else:
                scores.append(grade_first_word(reply, example["answer"]))
            price = self.prices[model]
            cost += (
                usage["prompt_tokens"] * price["input"] + usage["completion_tokens"] * price["output"]
            ) / TOKENS_PER_MILLION
        return np.array(scores), cost

    def complete(self, arm: Mapping[str, Any], prompt: str) -> tuple[str, dict[str, int]]:
        """The reply text and token ``usage`` of one chat completion."""
        fields = {key: value for key, value in arm.items() if key != "system"}
        system = [{"role": "system", "content": arm["system"]}] if arm.get("system") else []
        body = {**fields, "messages": [*system, {"role": "user", "content": prompt}]}
        headers = {"Content-Type": "application/json"}
        if key := os.environ.get(self.api_key_env):
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.load(response)
        except urllib.error.HTTPError as error:
            if 400 <= error.code < 500 and error.code not in (408, 429):
                message = f"{self.url} rejected the request for model {arm['model']!r}: {error}"
                raise NonRetryableError(message) from error
            raise
        usage = payload.get("usage") or {}
        if not {"prompt_tokens", "completion_tokens"} <= set(usage):
            raise ValueError(f"{self.url} returned no token usage for model {arm['model']!r}; cannot account the cost")
        return payload["choices"][0]["message"]["content"] or "", usage
