"""Reasoning tokens (issue 50, item 5): billed once, at the output price, and reported as ``tokens_reasoning``.

The OpenAI API counts a reasoning model's hidden tokens
(``usage.completion_tokens_details.reasoning_tokens``) in ``usage.completion_tokens``; the fake server
does too, and bills them once.  An exhaustive run against it must export the server's bill, tokens and
dollars alike, and a store written before the column must still export.
"""

import shutil
import sqlite3
from types import SimpleNamespace

import pytest

from gittinseval.live import RunStore, Usage
from gittinseval.live.export import store_tables
from gittinseval.live.fake_server import COMPLETION_TOKENS, FakeChatServer
from gittinseval.live.tasks.replies import _reasoning_tokens
from tests.live.test_ledger import ARMS, PRICES, PROMPT_TOKENS, answers, run

REASONING = 50


@pytest.fixture(scope="module")
def reasoning_run(tmp_path_factory):
    """``(result, store, the server's bill per model)`` of an exhaustive run in which ``good-model`` reasons and
    ``bad-model`` replies without completion token details."""
    from gittinseval.live.tasks.scoring import read_jsonl

    examples = read_jsonl()
    store = tmp_path_factory.mktemp("reasoning") / "run.sqlite"
    server = FakeChatServer(answers(examples), prompt_tokens=PROMPT_TOKENS, reasoning_tokens={"good-model": REASONING})
    try:
        result = run(examples, server, store)
        bill = server.bill()
        assert sum(line["dollars"] for line in bill.values()) == pytest.approx(server.cost_of_calls(), rel=1e-12)
    finally:
        server.close()
    assert result.stop_reason == "exhausted"
    return result, store, bill


def test_the_fake_server_bills_reasoning_tokens_once_at_the_output_price(reasoning_run):
    _, _, bill = reasoning_run
    good, bad = bill["good-model"], bill["bad-model"]
    assert good["tokens_out"] == good["calls"] * (COMPLETION_TOKENS + REASONING)
    assert good["tokens_reasoning"] == good["calls"] * REASONING and bad["tokens_reasoning"] == 0
    per_call = (PROMPT_TOKENS * PRICES["good-model"]["input"]
                + (COMPLETION_TOKENS + REASONING) * PRICES["good-model"]["output"]) / 1e6
    assert good["dollars"] == pytest.approx(good["calls"] * per_call, rel=1e-12)


def test_the_export_equals_the_bill_in_tokens_and_dollars_and_reports_the_reasoning_tokens(reasoning_run):
    result, store, bill = reasoning_run
    cells, attempts = (table.to_pylist() for table in store_tables(store))
    assert result.spent == pytest.approx(sum(line["dollars"] for line in bill.values()), rel=1e-12)
    assert sum(row["dollars"] for row in attempts) == pytest.approx(result.spent, rel=1e-12)
    for model, line in bill.items():
        arm = next(k for k, settings in enumerate(ARMS) if settings["model"] == model)
        rows = [row for row in attempts if row["arm"] == arm]
        for column in ("tokens_in", "tokens_out", "tokens_reasoning"):
            assert sum(row[column] for row in rows) == line[column], (model, column)
        assert sum(row["billed_dollars"] for row in rows) == pytest.approx(line["dollars"], rel=1e-12)
        reasoning = REASONING if model == "good-model" else 0  # a reply without details: 0
        arm_cells = [cell for cell in cells if cell["arm"] == arm]
        assert len(arm_cells) == 20
        assert {(cell["tokens_out"], cell["tokens_reasoning"]) for cell in arm_cells} == {
            (COMPLETION_TOKENS + reasoning, reasoning)
        }


def test_a_store_written_before_the_column_exports_null_reasoning_and_gets_the_column_when_opened(
    reasoning_run, tmp_path
):
    _, store, _ = reasoning_run
    old = tmp_path / "old.sqlite"
    shutil.copy(store, old)
    with sqlite3.connect(old) as db:
        db.execute("ALTER TABLE usage DROP COLUMN tokens_reasoning")
    cells, attempts = store_tables(old)
    assert cells.column("tokens_reasoning").null_count == cells.num_rows == 40
    assert attempts.column("tokens_reasoning").null_count == attempts.num_rows
    assert cells.column("tokens_out") == store_tables(store)[0].column("tokens_out")
    RunStore(old).close()  # opening it for writing adds the column, NULL in the rows it had
    with sqlite3.connect(old) as db:
        assert db.execute("SELECT COUNT(*), COUNT(tokens_reasoning) FROM usage").fetchone() == (40, 0)
    assert store_tables(old)[0].column("tokens_reasoning").null_count == 40


def test_reasoning_tokens_are_a_part_of_the_output_tokens():
    assert Usage([0.1], [1], [2]).tokens_reasoning == (None,)
    assert Usage([0.1, 0.2], [1, 1], [5, 3], [5, 0]).tokens_reasoning == (5, 0)
    with pytest.raises(ValueError, match="usage: tokens_reasoning are a part of tokens_out"):
        Usage([0.1], [1], [2], [3])
    with pytest.raises(ValueError, match="usage: 1 tokens_reasoning for 2 examples"):
        Usage([0.1, 0.2], [1, 1], [2, 2], [0])


def test_a_reply_without_completion_token_details_has_no_reasoning_tokens():
    assert _reasoning_tokens(SimpleNamespace(prompt_tokens=1, completion_tokens=2)) == 0
    assert _reasoning_tokens(SimpleNamespace(completion_tokens_details=None)) == 0
    assert _reasoning_tokens(SimpleNamespace(completion_tokens_details=SimpleNamespace(reasoning_tokens=None))) == 0
    assert _reasoning_tokens(SimpleNamespace(completion_tokens_details=SimpleNamespace(reasoning_tokens=7))) == 7
