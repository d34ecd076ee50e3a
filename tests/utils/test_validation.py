"""Checks of configured values: what passes, what each rejects, and that the error names the key."""

import math
import re

import numpy as np
import pytest

from gittinseval.utils.validation import (
    ConfigError,
    fraction_in_unit_interval,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)


@pytest.mark.parametrize(
    ("check", "value", "expected"),
    [
        (positive_int, 3, 3),
        (positive_int, 8.0, 8),  # YAML arithmetic gives integral floats
        (positive_int, np.int64(2), 2),
        (non_negative_int, 0, 0),
        (non_negative_int, "4", 4),  # seeds from the command line
        (positive_float, 1e-4, 1e-4),
        (positive_float, 2, 2.0),
        (non_negative_float, 0, 0.0),
        (fraction_in_unit_interval, 1, 1.0),
    ],
)
def test_valid_values_come_back_as_numbers(check, value, expected):
    result = check("key", value)
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(
    ("check", "value", "words"),
    [
        (positive_int, 0, "a positive integer"),
        (positive_int, 2.5, "a positive integer"),
        (positive_int, True, "a positive integer"),
        (positive_int, "abc", "a positive integer"),
        (positive_int, None, "a positive integer"),
        (positive_int, math.inf, "a positive integer"),
        (non_negative_int, -1, "a non-negative integer"),
        (non_negative_int, 1.5, "a non-negative integer"),
        (positive_float, 0.0, "positive and finite"),
        (positive_float, -1e-9, "positive and finite"),
        (positive_float, math.nan, "positive and finite"),
        (positive_float, math.inf, "positive and finite"),
        (positive_float, "abc", "positive and finite"),
        (positive_float, False, "positive and finite"),
        (non_negative_float, -0.5, "non-negative and finite"),
        (non_negative_float, math.nan, "non-negative and finite"),
        (fraction_in_unit_interval, 0, re.escape("a number in (0, 1]")),
        (fraction_in_unit_interval, 1.5, re.escape("a number in (0, 1]")),
    ],
)
def test_invalid_values_are_a_config_error_naming_the_key(check, value, words):
    with pytest.raises(ConfigError, match=f"^policy\\.some_key must be {words}, got {re.escape(repr(value))}$"):
        check("policy.some_key", value)


def test_a_config_error_is_a_value_error():
    # Library callers catch ValueError; the command line turns ConfigError into one line.
    with pytest.raises(ValueError):
        positive_float("lam", 0)
