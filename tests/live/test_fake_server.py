"""The fake OpenAI-compatible endpoint (gittinseval/live/fake_server.py), as the tutorial runs it."""

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from gittinseval.live.fake_server import COMPLETION_TOKENS, PRICES, FakeChatServer, bill_lines


def chat(base_url, model, prompt):
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}]}).encode()
    request = urllib.request.Request(f"{base_url}/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_the_good_model_answers_every_other_says_0_and_every_call_is_billed():
    server = FakeChatServer({"What is 2 + 2?": "4"}, reply="The answer is {answer}.")
    try:
        good = chat(server.base_url, "good-model", "What is 2 + 2?")
        bad = chat(server.base_url, "bad-model", "What is 2 + 2?")
    finally:
        server.close()
    assert good["choices"][0]["message"]["content"] == "The answer is 4."
    assert bad["choices"][0]["message"]["content"] == "0"
    assert good["usage"] == {"prompt_tokens": 5, "completion_tokens": COMPLETION_TOKENS}
    assert server.billed == [("good-model", 5, COMPLETION_TOKENS), ("bad-model", 5, COMPLETION_TOKENS)]
    by_hand = sum((5 * PRICES[m]["input"] + COMPLETION_TOKENS * PRICES[m]["output"]) / 1e6 for m in PRICES)
    assert server.cost_of_calls() == pytest.approx(by_hand, rel=1e-12)


def test_the_bill_is_served_at_get_bill_per_model_and_an_unpriced_model_has_no_dollars():
    server = FakeChatServer({"What is 2 + 2?": "4"})
    try:
        for model in ("good-model", "good-model", "bad-model", "unpriced-model"):
            chat(server.base_url, model, "What is 2 + 2?")
        with urllib.request.urlopen(f"{server.base_url}/bill", timeout=30) as response:
            served = json.loads(response.read())
        with urllib.request.urlopen(f"{server.base_url.removesuffix('/v1')}/bill", timeout=30) as response:
            assert json.loads(response.read()) == served
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(f"{server.base_url}/models", timeout=30)
    finally:
        server.close()
    assert served == server.bill() and list(served) == ["good-model", "bad-model", "unpriced-model"]
    per_call = (5 * PRICES["good-model"]["input"] + COMPLETION_TOKENS * PRICES["good-model"]["output"]) / 1e6
    assert served["good-model"] == {"calls": 2, "tokens_in": 10, "tokens_out": 2 * COMPLETION_TOKENS,
                                    "tokens_reasoning": 0, "dollars": pytest.approx(2 * per_call, rel=1e-12)}
    assert served["unpriced-model"]["calls"] == 1 and served["unpriced-model"]["dollars"] is None
    lines = bill_lines(served).splitlines()
    assert lines[0] == "bill:" and lines[1] == (
        f"  good-model: 2 calls, 10 tokens in, {2 * COMPLETION_TOKENS} tokens out (0 of them reasoning), "
        f"${2 * per_call:.6g}"
    )
    assert lines[3].endswith(", no price") and lines[4].startswith("  total: 4 calls, $")
    assert lines[4].endswith(" (and 1 unpriced model)")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_command_serves_a_jsonl_task_until_interrupted(tmp_path):
    examples = tmp_path / "questions.jsonl"
    examples.write_text('{"question": "Capital of Italy?", "answer": "Rome"}\n')
    port = free_port()
    command = [sys.executable, "-m", "gittinseval.live.fake_server", "--examples", str(examples), "--prompt",
               "Q: {question}", "--good-model", "big-model", "--port", str(port)]
    prices = tmp_path / "prices.yaml"
    prices.write_text("big-model: {input: 2.0, output: 8.0}\n")
    process = subprocess.Popen([*command, "--prices", str(prices)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == f"fake chat endpoint at http://127.0.0.1:{port}/v1"
        assert process.stdout.readline().strip() == (
            f"its bill: GET http://127.0.0.1:{port}/v1/bill, and printed here when it stops"
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                reply = chat(f"http://127.0.0.1:{port}/v1", "big-model", "Q: Capital of Italy?")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert reply["choices"][0]["message"]["content"] == "The answer is Rome."
    finally:
        process.terminate()  # as `kill` does: the server stops, printing its bill
        output, _ = process.communicate(timeout=30)
    tokens = reply["usage"]["prompt_tokens"]
    assert output.splitlines() == [
        "bill:",
        f"  big-model: 1 call, {tokens} tokens in, {COMPLETION_TOKENS} tokens out (0 of them reasoning), "
        f"${(tokens * 2.0 + COMPLETION_TOKENS * 8.0) / 1e6:.6g}",
        f"  total: 1 call, ${(tokens * 2.0 + COMPLETION_TOKENS * 8.0) / 1e6:.6g}",
    ]
    bad = subprocess.run([*command, "--prices", str(tmp_path / "none.yaml")], capture_output=True, text=True)
    assert bad.returncode == 2 and "prices file" in bad.stderr and "none.yaml does not exist" in bad.stderr


def test_the_command_bills_reasoning_tokens_as_a_part_of_the_completion_tokens(tmp_path):
    examples = tmp_path / "questions.jsonl"
    examples.write_text('{"prompt": "Capital of Italy?", "answer": "Rome"}\n')
    port = free_port()
    command = [sys.executable, "-m", "gittinseval.live.fake_server", "--examples", str(examples),
               "--good-model", "big-model", "--port", str(port), "--reasoning-tokens", "big-model=7"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        process.stdout.readline()
        deadline = time.monotonic() + 30
        while True:
            try:
                big = chat(f"http://127.0.0.1:{port}/v1", "big-model", "Capital of Italy?")
                small = chat(f"http://127.0.0.1:{port}/v1", "small-model", "Capital of Italy?")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert big["usage"]["completion_tokens"] == COMPLETION_TOKENS + 7
    assert big["usage"]["completion_tokens_details"] == {"reasoning_tokens": 7}
    assert small["usage"] == {"prompt_tokens": 3, "completion_tokens": COMPLETION_TOKENS}
    bad = subprocess.run(command[:-1] + ["7", "--reasoning-tokens", "big-model=x"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--reasoning-tokens takes N or MODEL=N" in bad.stderr
    mixed = subprocess.run(command + ["--reasoning-tokens", "3"], capture_output=True, text=True)
    assert mixed.returncode == 2 and "one N for every model, or MODEL=N" in mixed.stderr


def test_above_its_rpm_cap_the_server_answers_429_with_the_wait_unbilled():
    from gittinseval.live.rate_limits import retry_after

    server = FakeChatServer({"What is 2 + 2?": "4"}, rpm=1, jitter=0.0)  # one request, then one a minute
    try:
        first = chat(server.base_url, "good-model", "What is 2 + 2?")
        with pytest.raises(urllib.error.HTTPError) as refused:
            chat(server.base_url, "good-model", "What is 2 + 2?")
    finally:
        server.close()
    assert first["choices"][0]["message"]["content"] == "4."
    assert refused.value.code == 429 and "rate limit of 1 requests per minute" in refused.value.read().decode()
    headers = refused.value.headers
    assert 0 < int(headers["Retry-After"]) <= 60 and headers["x-ratelimit-remaining-requests"] == "0"
    assert 0 < retry_after(dict(headers.items())) <= 60  # retry-after-ms: when the request would fit
    assert (server.received, server.rate_limited, len(server.billed)) == (2, 1, 1)
    with pytest.raises(ValueError, match="rpm must be a positive number of requests per minute"):
        FakeChatServer({}, rpm=0)


def test_the_command_refuses_a_cap_that_is_not_a_positive_rate(tmp_path):
    examples = tmp_path / "questions.jsonl"
    examples.write_text('{"prompt": "Capital of Italy?", "answer": "Rome"}\n')
    command = [sys.executable, "-m", "gittinseval.live.fake_server", "--examples", str(examples),
               "--good-model", "big-model", "--port", str(free_port()), "--rpm", "-5"]
    refused = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "--rpm takes a positive number of requests per minute, got -5" in refused.stderr
