"""Prices file: model -> USD per 1M tokens, in inspect_ai's model cost config shape."""

import math
from pathlib import Path

import pytest

from gittinseval.live.tasks.prices import ModelPrice, Prices, load_prices

BUNDLED = Path(__file__).resolve().parents[3] / "gittinseval" / "live" / "examples" / "prices.yaml"


def test_dollars_are_tokens_times_price_per_million():
    price = ModelPrice(input=0.15, output=0.60, input_cache_write=0.15, input_cache_read=0.075)
    # 1200 input, 300 output, 100 cache write and 4000 cache read tokens, by hand.
    expected = (1200 * 0.15 + 300 * 0.60 + 100 * 0.15 + 4000 * 0.075) / 1_000_000
    assert math.isclose(price.dollars(1200, 300, 100, 4000), expected, rel_tol=1e-15)
    assert ModelPrice(1.0, 2.0).dollars(1_000_000, 0) == 1.0
    with pytest.raises(ValueError, match="no input_cache_read"):
        ModelPrice(1.0, 2.0).dollars(10, 10, cache_read_tokens=5)


def test_load_prices_from_a_file_and_inline(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text('{"openai/gpt-4o": {"input": 2.5, "output": 10}}')
    prices = load_prices(path)
    assert prices["openai/gpt-4o"] == ModelPrice(2.5, 10.0)
    assert load_prices(str(path)).as_dict() == {"openai/gpt-4o": {"input": 2.5, "output": 10.0}}
    assert load_prices({"m": {"input": 0, "output": 1}})["m"].input == 0.0


def test_lookup_by_full_name_or_by_the_part_after_the_provider():
    prices = Prices({"openai/gpt-4o": {"input": 2.5, "output": 10}, "openai/gpt-4o-mini": {"input": 1, "output": 2}})
    assert prices.price("openai/gpt-4o").input == 2.5
    assert prices.price("gpt-4o-mini").input == 1.0
    with pytest.raises(ValueError, match="no price for model 'gpt-5'; priced models: openai/gpt-4o"):
        prices.price("gpt-5")
    both = Prices({"openai/gpt-4o": {"input": 2.5, "output": 10}, "azure/gpt-4o": {"input": 3, "output": 12}})
    with pytest.raises(ValueError, match="ambiguous"):
        both.price("gpt-4o")


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        ({"m": {"input": -1, "output": 1}}, r"model 'm': input must be non-negative and finite, got -1"),
        ({"m": {"input": 1, "output": float("nan")}}, r"model 'm': output must be non-negative and finite"),
        ({"m": {"input": 1, "output": float("inf")}}, r"output must be non-negative and finite"),
        ({"m": {"input": "cheap", "output": 1}}, r"input must be non-negative and finite, got 'cheap'"),
        ({"m": {"input": True, "output": 1}}, r"input must be non-negative and finite, got True"),
        ({"m": {"input": None, "output": 1}}, r"input must be non-negative and finite, got None"),
        ({"m": {"input": 1, "ouput": 1}}, r"unknown price field\(s\) \['ouput'\]"),
        ({"m": {"input": 1}}, r"model 'm': missing output"),
        ({"m": {"input": 1, "output": 1, "input_cache_read": -0.5}}, r"input_cache_read must be non-negative"),
        ({"m": 0.5}, r"expected \{input: ..., output: ...\}"),
        ({}, r"expected a mapping of model"),
    ],
)
def test_bad_prices_are_named(entries, match):
    with pytest.raises(ValueError, match=match):
        Prices(entries)


def test_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_prices(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("m: {input: 1, output: [")
    with pytest.raises(ValueError, match="is not YAML or JSON"):
        load_prices(broken)
    listing = tmp_path / "list.yaml"
    listing.write_text("- m\n")
    with pytest.raises(ValueError, match=f"{listing}: expected a mapping"):
        load_prices(listing)


def test_bundled_prices():
    prices = load_prices(BUNDLED)
    assert prices.price("gpt-4o-mini") == ModelPrice(0.15, 0.60, 0.15, 0.075, 0.075, 0.30)
    assert prices.batch_price("gpt-4o-mini") == ModelPrice(0.075, 0.30)  # OpenAI's batch price: half the list price
    # Every entry has inspect_ai's four fields (tests/live/tasks/test_inspect_task.py reads it with inspect_ai), and
    # the batch prices only when asked for (inspect_ai ignores them).
    assert all(len(entry) == 4 for entry in prices.as_dict().values())
    assert all(len(entry) == 6 for entry in prices.as_dict(batch=True).values() if "batch_input" in entry)


def test_a_malformed_prices_file_is_named_on_one_line_with_its_line_or_row(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("openai/gpt-4o: {input: 2.5, output: 10}\nm: {input: 1, output: [\n")
    with pytest.raises(ValueError) as error:
        load_prices(broken)
    assert str(error.value) == (
        f"prices file {broken} is not YAML or JSON (line 3, column 1): expected the node content, but found "
        "'<stream end>'"
    )
    bad_row = tmp_path / "row.yaml"
    bad_row.write_text("openai/gpt-4o: {input: 2.5, output: 10}\nopenai/gpt-4o-mini: {input: 0.15, ouptut: 0.6}\n")
    with pytest.raises(ValueError) as error:
        load_prices(bad_row)
    assert str(error.value) == (
        f"{bad_row}: model 'openai/gpt-4o-mini': unknown price field(s) ['ouptut']; the fields are input, output, "
        "input_cache_write, input_cache_read, batch_input, batch_output"
    )
