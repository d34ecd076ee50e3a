"""What the live task adapters share (gittinseval.live.tasks.scoring): the JSON-lines reader of a task's examples
and the bundled example files."""

import json

import pytest

from gittinseval.live.tasks.scoring import bundled_examples, bundled_prices, read_jsonl


def test_examples_are_read_one_json_object_a_line_skipping_blank_lines(tmp_path):
    rows = [{"prompt": "2 + 2?", "answer": "4"}, {"prompt": "capital of France?", "answer": "Paris", "n": [1, 2]}]
    path = tmp_path / "quiz.jsonl"
    path.write_text(json.dumps(rows[0]) + "\n\n   \n" + json.dumps(rows[1]) + "\n")
    assert read_jsonl(path) == rows
    assert read_jsonl(str(path)) == rows


def test_the_bundled_examples_are_the_default_and_can_be_named():
    default = read_jsonl()
    with open(bundled_examples()) as handle:
        lines = [line for line in handle if line.strip()]
    assert len(default) == len(lines) == 20 and default == [json.loads(line) for line in lines]
    assert all(set(example) >= {"prompt", "answer"} for example in default)
    assert read_jsonl(bundled="arithmetic.jsonl") == default
    assert bundled_prices().is_file() and bundled_prices().parent == bundled_examples().parent


def test_a_bad_examples_file_is_named_with_the_line_and_what_is_there(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "a"}\n{"prompt": "b",}\n')
    with pytest.raises(ValueError, match=rf"{path}, line 2: not JSON \(.*, column 16\)"):
        read_jsonl(path)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(ValueError, match=rf"{empty} holds no examples \(one JSON object per line\)"):
        read_jsonl(empty)
    with pytest.raises(ValueError, match=rf"no examples file {tmp_path / 'none.jsonl'}"):
        read_jsonl(tmp_path / "none.jsonl")
    with pytest.raises(ValueError, match=r"no bundled examples 'quiz.jsonl'; bundled: .*arithmetic.jsonl"):
        read_jsonl(bundled="quiz.jsonl")
