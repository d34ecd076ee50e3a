"""Built-in graders on replies written to trip them, and the checks on any grader's output."""

import math
import re

import pytest
from hydra.utils import instantiate

from gittinseval.live.tasks.graders import (
    CallableGrader,
    ChoiceLetter,
    ExactMatch,
    FirstWord,
    LastNumber,
    RegexCapture,
    grade,
    last_number,
)


def half_credit(reply, example, weight=0.5):
    """A custom grader for CallableGrader (imported by its path)."""
    return weight if example["answer"] in reply else 0.0


def not_a_score(reply, example):
    return float("nan")


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("The answer is 109.", 109.0),
        ("1,234.0", 1234.0),
        ("It costs $1,234,567.25 in total.", 1234567.25),
        ("\u22125", -5.0),  # U+2212 MINUS SIGN
        ("x = \uff0d3.5", -3.5),  # U+FF0D FULLWIDTH HYPHEN-MINUS
        ("so -42", -42.0),
        ("from 3-5", 5.0),  # a hyphen between numbers is no sign
        ("7, then 8", 8.0),
        ("1,23", 23.0),  # not a thousands group: two numbers
        ("about .5", 0.5),
        ("+12", 12.0),
        ("no digits here", None),
    ],
)
def test_last_number(text, number):
    assert last_number(text) == number


def test_last_number_grades_gsm8k_style_replies():
    grader = LastNumber()
    assert grader("The answer is 109.", {"answer": "109"}) == 1.0
    assert grader("Total: 1,234.0", {"answer": 1234}) == 1.0
    assert grader("The change is \u221212 dollars.", {"answer": "-12"}) == 1.0
    assert grader("The change is 12 dollars.", {"answer": "-12"}) == 0.0
    # The reference may be a whole GSM8K solution: its last number is the answer.
    assert grader("so 72 clips", {"answer": "48 + 24 = 72\n#### 72"}) == 1.0
    assert grader("I cannot tell.", {"answer": "72"}) == 0.0
    assert grader("109.0000001", {"answer": "109"}) == 1.0
    assert grader("109.01", {"answer": "109"}) == 0.0
    assert LastNumber(tolerance=0.05)("109.01", {"answer": "109"}) == 1.0
    assert LastNumber(tolerance=0, relative=0.01)("1005", {"answer": "1000"}) == 1.0
    with pytest.raises(ValueError, match="holds no number"):
        grader("12", {"answer": "twelve"})


def test_first_word_scores_leading_answers_only():
    grader = FirstWord()
    assert grader("Rome.", {"answer": "rome"}) == 1.0
    assert grader("**Yes**, because", {"answer": "yes"}) == 1.0
    # The reply that motivated the other graders: its first word is "The".
    assert grader("The answer is 109.", {"answer": "109"}) == 0.0
    assert grader("", {"answer": "109"}) == 0.0
    assert grader("109", {"answer": ["108", "109"]}) == 1.0


def test_exact_match():
    grader = ExactMatch()
    assert grader("  Paris \n", {"answer": "paris"}) == 1.0
    assert grader("Paris.", {"answer": "paris"}) == 0.0
    assert grader("The answer is 109.", {"answer": "109"}) == 0.0
    assert ExactMatch(ignore_case=False)("paris", {"answer": "Paris"}) == 0.0
    assert ExactMatch(field="label")("B", {"label": "b"}) == 1.0


def test_regex_capture_takes_the_last_match():
    grader = RegexCapture(r"answer is\s*(-?\d+)")
    assert grader("The answer is 109.", {"answer": "109"}) == 1.0
    assert grader("The answer is 10, no wait, the answer is 109.", {"answer": "109"}) == 1.0
    assert grader("The answer is 10, no wait, the answer is 109.", {"answer": "10"}) == 0.0
    assert grader("It is 109.", {"answer": "109"}) == 0.0
    named = RegexCapture(r"#### *(?P<final>\S+)", group="final")
    assert named("work...\n#### 72", {"answer": "72"}) == 1.0
    with pytest.raises(ValueError, match="1 capture group"):
        RegexCapture(r"answer is (\d+)", group=2)
    with pytest.raises(ValueError, match="no group named"):
        RegexCapture(r"(\d+)", group="final")
    with pytest.raises(ValueError, match="not a regular expression"):
        RegexCapture(r"(\d+")


def test_choice_letter_needs_the_marker():
    grader = ChoiceLetter()
    # "A good answer is C" must not grade as A (the article), nor as C: it has no marker.
    assert grader("A good answer is C", {"answer": "A"}) == 0.0
    assert grader("A good answer is C", {"answer": "C"}) == 0.0
    assert grader.choice("A good answer is C") is None
    assert grader("ANSWER: C", {"answer": "C"}) == 1.0
    assert grader("ANSWER: C", {"answer": "A"}) == 0.0
    assert grader("Let me think. Answer: (c).", {"answer": "C"}) == 1.0
    assert grader("First ANSWER: B, but on reflection ANSWER: **D**", {"answer": "D"}) == 1.0
    assert grader("ANSWER: Cats", {"answer": "C"}) == 0.0
    assert grader("ANSWER: Z", {"answer": "A"}) == 0.0  # Z is not a choice
    assert ChoiceLetter(marker="Final choice:")("Final choice: b", {"answer": "B"}) == 1.0
    with pytest.raises(ValueError, match="must be one of the letters"):
        grader("ANSWER: C", {"answer": "2"})
    with pytest.raises(ValueError, match="distinct ASCII letters"):
        ChoiceLetter(letters="AAB")


def test_callable_grader_by_import_path():
    grader = CallableGrader(f"{__name__}.half_credit", weight=0.25)
    assert grader("it is 12", {"answer": "12"}) == 0.25
    assert CallableGrader(f"{__name__}:half_credit")("it is 12", {"answer": "12"}) == 0.5
    with pytest.raises(ValueError, match="cannot import"):
        CallableGrader("no_such_module_here.grader")
    with pytest.raises(ValueError, match=r"returned nan .* a number in \[0, 1\]"):
        CallableGrader(f"{__name__}.not_a_score")("x", {"answer": "1"})


def test_a_callable_grader_that_cannot_be_imported_or_fails_is_one_line(capsys):
    with pytest.raises(ValueError) as missing:
        CallableGrader("no_such_module_here.grader")
    assert str(missing.value).startswith(
        "CallableGrader('no_such_module_here.grader'): cannot import 'no_such_module_here.grader': no module "
        "'no_such_module_here' on the search path ("
    )
    with pytest.raises(ValueError, match=rf"cannot import '{__name__}.nothing': '{__name__}' has no 'nothing'$"):
        CallableGrader(f"{__name__}.nothing")
    with pytest.raises(ValueError) as raised:
        CallableGrader(f"{__name__}.half_credit")("it is 12", {"answer": 12})  # a number is not in a string
    assert re.fullmatch(
        rf"grader {__name__}.half_credit raised TypeError: 'in <string>' requires string as left operand, not int at "
        r".*test_graders.py, line \d+, on the reply 'it is 12' to example \{\"answer\": 12\}",
        str(raised.value),
    )
    assert capsys.readouterr() == ("", "")  # nothing printed besides the error


@pytest.mark.parametrize("bad", [math.nan, 1.5, -0.1, math.inf, "1", None])
def test_grade_refuses_bad_grader_output(bad):
    with pytest.raises(ValueError, match="a grader must return a number in"):
        grade(lambda reply, example: bad, "reply", {"answer": "1"}, name="custom")


def test_grade_accepts_bools_and_numbers():
    assert grade(lambda r, e: True, "x", {}) == 1.0
    assert grade(lambda r, e: 0, "x", {}) == 0.0
    assert grade(lambda r, e: 0.75, "x", {}) == 0.75


def test_missing_answer_field_names_field_and_example():
    with pytest.raises(ValueError, match=r"needs field 'answer', missing from example .*\"question\": \"2\+2\?\""):
        LastNumber()("4", {"question": "2+2?"})


def test_graders_build_from_target():
    grader = instantiate({"_target_": "gittinseval.live.tasks.graders.RegexCapture", "pattern": r"=\s*(\d+)"})
    assert grader("2 + 2 = 4", {"answer": "4"}) == 1.0
    target = "gittinseval.live.tasks.graders.CallableGrader"
    grader = instantiate({"_target_": target, "path": f"{__name__}.half_credit"})
    assert grader("12", {"answer": "12"}) == 0.5
