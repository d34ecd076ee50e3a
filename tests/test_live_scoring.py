"""Shipped scoring functions: the response-matrix scorer and the OpenAI-compatible chat wrapper.

The chat wrapper is tested against a local HTTP server on 127.0.0.1 started by the test.
"""

import json
import subprocess
import sys
import threading
import time
import urllib.error
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from gittinseval import GittinsPolicy
from gittinseval.cli import CONFIG_DIR
from gittinseval.data import Benchmark
from gittinseval.live import MatrixScorer, NonRetryableError, OpenAIChatScorer, evaluate, matrix_task
from gittinseval.live.scoring import expected_chat_costs, grade_first_word, read_jsonl

PRICES = {"good-model": {"input": 2.0, "output": 8.0}, "bad-model": {"input": 0.5, "output": 1.0}}
COMPLETION_TOKENS = 3


class FakeChatServer:
    """An OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 that answers from a key.

    ``good_model`` answers correctly, any other model always says 0.  Usage: one
    prompt token per word of the messages, ``COMPLETION_TOKENS`` completion tokens.
    ``fail_next`` makes the next calls fail with HTTP ``fail_status`` (503 by default).
    """

    def __init__(self, answers, good_model="good-model", prices=PRICES):
        self.answers = answers
        self.good_model = good_model
        self.prices = prices
        self.calls = []
        self.fail_next = 0
        self.fail_status = 503
        self.omit_usage = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path != "/v1/chat/completions" or server.fail_next:
                    server.fail_next = max(0, server.fail_next - 1)
                    self.send_response(server.fail_status if self.path == "/v1/chat/completions" else 404)
                    self.end_headers()
                    return
                prompt = body["messages"][-1]["content"]
                prompt_tokens = sum(len(m["content"].split()) for m in body["messages"])
                server.calls.append((body, self.headers.get("Authorization"), prompt_tokens))
                reply = f"{server.answers[prompt]}." if body["model"] == server.good_model else "0"
                payload = {"choices": [{"message": {"role": "assistant", "content": reply}}]}
                if not server.omit_usage:
                    payload["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": COMPLETION_TOKENS}
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def cost_of_calls(self):
        return sum(
            (tokens * self.prices[body["model"]]["input"] + COMPLETION_TOKENS * self.prices[body["model"]]["output"])
            / 1e6
            for body, _, tokens in self.calls
        )

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def examples():
    return read_jsonl()


@pytest.fixture
def server(examples):
    fake = FakeChatServer({e["prompt"]: e["answer"] for e in examples})
    yield fake
    fake.close()


ARMS = [
    {"model": "bad-model", "temperature": 0.0},
    {"model": "good-model", "temperature": 0.0, "system": "You are a calculator."},
]


def test_chat_scorer_scores_and_costs_from_token_usage(server, examples, monkeypatch):
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    scorer = OpenAIChatScorer(server.base_url, PRICES, api_key_env="FAKE_KEY", timeout=5)
    scores, cost = scorer(ARMS[1], examples[:3])
    np.testing.assert_array_equal(scores, [1.0, 1.0, 1.0])
    assert cost == pytest.approx(server.cost_of_calls())
    body, auth, _ = server.calls[0]
    assert auth == "Bearer sk-test" and body["model"] == "good-model" and body["temperature"] == 0.0
    assert body["messages"][0] == {"role": "system", "content": "You are a calculator."}
    assert body["messages"][1]["content"] == examples[0]["prompt"]
    scores, _ = scorer(ARMS[0], examples[:2])
    np.testing.assert_array_equal(scores, [0.0, 0.0])


def test_chat_scorer_errors(server, examples):
    scorer = OpenAIChatScorer(server.base_url, PRICES, timeout=5)
    server.fail_next = 1
    with pytest.raises(urllib.error.HTTPError, match="503"):
        scorer(ARMS[1], examples[:1])
    server.omit_usage = True
    with pytest.raises(ValueError, match="no token usage"):
        scorer(ARMS[1], examples[:1])
    server.omit_usage = False
    server.fail_next, server.fail_status = 1, 401
    with pytest.raises(NonRetryableError, match="rejected the request for model 'good-model'.*401"):
        scorer(ARMS[1], examples[:1])
    with pytest.raises(ValueError, match="no price for model 'other'"):
        scorer({"model": "other"}, examples[:1])
    with pytest.raises(ValueError, match="per 1M tokens"):
        OpenAIChatScorer(server.base_url, {"m": {"input": 1.0}})


def test_live_run_against_the_chat_endpoint_pays_what_the_usage_says(server, examples):
    server.fail_next = 2  # transient outage: retried
    costs = expected_chat_costs(ARMS, PRICES, prompt_tokens=15, completion_tokens=COMPLETION_TOKENS)
    result = evaluate(
        ARMS,
        examples,
        OpenAIChatScorer(server.base_url, PRICES, timeout=5),
        budget_usd=1.0,
        costs=costs,
        policy=GittinsPolicy(4),
        concurrency=2,
        retry_backoff=0.001,
        progress=False,
    )
    assert result.stop_reason == "exhausted" and result.error is None
    assert len(server.calls) == 2 * len(examples)
    assert result.spent == pytest.approx(server.cost_of_calls())
    assert result.recommendation.name == json.dumps(ARMS[1], sort_keys=True)
    assert result.recommendation.mean == 1.0


def test_expected_chat_costs_and_grading():
    costs = expected_chat_costs(ARMS, PRICES, prompt_tokens=100, completion_tokens=10)
    assert costs == pytest.approx([(100 * 0.5 + 10 * 1.0) / 1e6, (100 * 2.0 + 10 * 8.0) / 1e6])
    with pytest.raises(ValueError, match="no prices for models \\['x'\\]"):
        expected_chat_costs([{"model": "x"}], PRICES)
    assert grade_first_word(" 42. The answer", "42") == 1.0
    assert grade_first_word("420", "42") == 0.0
    assert grade_first_word("", "42") == 0.0
    assert grade_first_word("**B**", "b") == 1.0


def test_matrix_scorer_reads_rows_by_index_or_name_and_sleeps():
    scores = np.arange(12, dtype=float).reshape(3, 4) / 12
    scorer = MatrixScorer(scores, latency=0.02, arm_names=["a", "b", "c"])
    started = time.perf_counter()
    np.testing.assert_array_equal(scorer("b", [3, 0]), scores[1, [3, 0]])
    assert time.perf_counter() - started >= 0.02
    np.testing.assert_array_equal(scorer(2, [1]), scores[2, [1]])
    with pytest.raises(ValueError, match="latency"):
        MatrixScorer(scores, latency=-1)


def test_matrix_task_costs_are_prices_per_million_tokens():
    bench = Benchmark("suite/sub", np.eye(3), prices=[1.0, 2.0, 4.0], arm_names=["x", "y", "z"])
    task = matrix_task(bench, tokens_per_example=500)
    assert task.arms == ["x", "y", "z"] and task.examples == [0, 1, 2] and task.name == "suite_sub"
    np.testing.assert_allclose(task.costs, [5e-4, 1e-3, 2e-3])
    np.testing.assert_array_equal(task.score_fn("z", [2, 0]), [1.0, 0.0])
    assert matrix_task(Benchmark("u", np.eye(2))).costs is None


def test_cli_chat_example_runs_against_a_local_endpoint(examples, tmp_path):
    """``gittinseval-live task=openai_chat`` end to end, only the base URL overridden."""
    from omegaconf import OmegaConf

    prices = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "task" / "openai_chat.yaml").score_fn.prices)
    fake = FakeChatServer({e["prompt"]: e["answer"] for e in examples}, good_model="gpt-4o", prices=prices)
    try:
        command = [
            sys.executable,
            "-m",
            "gittinseval.live_cli",
            "task=openai_chat",
            f"task.score_fn.base_url={fake.base_url}",
            "budget_usd=1.0",
            "progress=false",
            "policy.batch_size=5",
            f"store={tmp_path / 'chat.sqlite'}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ]
        subprocess.run(command, check=True, timeout=120, capture_output=True)
    finally:
        fake.close()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stop_reason"] == "exhausted" and summary["n_cells"] == 3 * len(examples)
    assert json.loads(summary["recommended_name"])["model"] == "gpt-4o"
    assert summary["spent"] == pytest.approx(fake.cost_of_calls())
