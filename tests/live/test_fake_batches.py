"""The fake server's Batch API, through the openai client: files, batches completed after a delay, the bill."""

import json
import time

import openai
import pytest

from gittinseval.live.fake_server import COMPLETION_TOKENS, FakeChatServer

PRICES = {"good-model": {"input": 2.0, "output": 8.0, "batch_input": 1.0, "batch_output": 4.0}}


def lines(*prompts):
    return "".join(json.dumps({"custom_id": f"request-{n}", "method": "POST", "url": "/v1/chat/completions",
                               "body": {"model": "good-model", "messages": [{"role": "user", "content": prompt}]}})
                   + "\n" for n, prompt in enumerate(prompts)).encode()


@pytest.fixture
def served():
    server = FakeChatServer({"What is 2 + 2?": "4", "What is 3 + 3?": "6"}, prices=PRICES, batch_delay=0.05)
    client = openai.OpenAI(api_key="EMPTY", base_url=server.base_url, max_retries=0)
    yield server, client
    client.close()
    server.close()


def test_a_batch_completes_after_its_delay_with_each_line_answered_and_billed_at_the_batch_price(served):
    server, client = served
    uploaded = client.files.create(file=("lines.jsonl", lines("What is 2 + 2?", "What is 3 + 3?")), purpose="batch")
    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert client.batches.retrieve(batch.id).status == "in_progress" and server.batch_billed == []
    time.sleep(0.06)
    done = client.batches.retrieve(batch.id)
    assert done.status == "completed" and done.request_counts.completed == 2 and done.error_file_id is None
    output = [json.loads(line) for line in client.files.content(done.output_file_id).text.splitlines()]
    assert [line["custom_id"] for line in output] == ["request-0", "request-1"]
    assert output[0]["response"]["body"]["choices"][0]["message"]["content"] == "4."
    assert [b.id for b in client.batches.list()] == [batch.id] and server.batches.created == 1
    assert server.batches.retrieved[batch.id] == 2 and len(server.batches.lines) == 2
    bill = server.bill()
    assert list(bill) == ["good-model (batch)"] and bill["good-model (batch)"]["calls"] == 2
    assert bill["good-model (batch)"]["dollars"] == pytest.approx(2 * (5 * 1.0 + COMPLETION_TOKENS * 4.0) / 1e6)


def test_planned_lines_expire_or_fail_unbilled_and_a_planned_batch_fails(served):
    server, client = served
    server.batches.line_plan = ["expired", 500]
    uploaded = client.files.create(file=("lines.jsonl", lines("What is 2 + 2?", "What is 3 + 3?")), purpose="batch")
    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
    time.sleep(0.06)
    done = client.batches.retrieve(batch.id)
    assert done.status == "expired" and done.output_file_id is None and server.batch_billed == []
    errors = [json.loads(line) for line in client.files.content(done.error_file_id).text.splitlines()]
    assert errors[0]["error"]["code"] == "batch_expired" and errors[1]["response"]["status_code"] == 500
    server.batches.fail_batches = 1
    failed = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert failed.status == "failed" and failed.errors.data[0].code == "invalid_request"
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_unknown")
