"""The fake OpenAI-compatible endpoint (gittinseval/live/fake_server.py), as the tutorial runs it."""

import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from gittinseval.live.fake_server import COMPLETION_TOKENS, PRICES, FakeChatServer


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
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == f"fake chat endpoint at http://127.0.0.1:{port}/v1"
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
        process.terminate()
        process.wait(timeout=30)


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
