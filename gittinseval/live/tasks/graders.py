"""Graders: ``grader(reply, example) -> score in [0, 1]`` for a model's reply to one example.

Each built-in grader is a small class configured by its constructor, so that a
task config builds it with Hydra's ``_target_``::

    grader:
      _target_: gittinseval.live.tasks.graders.LastNumber
      field: answer          # the example's field holding the reference answer
      tolerance: 1.0e-6

The reference answer is ``example[field]`` (``"answer"`` by default); a missing field
is an error naming the field and the example.  :func:`grade` calls any grader and
checks what it returns, so a custom grader that returns NaN, a string or a value
outside [0, 1] stops the run with an error naming the grader and the example
instead of being recorded.
"""

from __future__ import annotations

import functools
import math
import re
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from gittinseval.live.tasks.prompts import describe_example, example_field
from gittinseval.live.tasks.targets import locate, one_line
from gittinseval.utils.validation import non_negative_float, positive_int

__all__ = [
    "CallableGrader",
    "ChoiceLetter",
    "ContainsAnswer",
    "ExactMatch",
    "FirstWord",
    "GraderFn",
    "LastNumber",
    "RegexCapture",
    "grade",
    "last_number",
]

GraderFn = Callable[[str, Mapping[str, Any]], float]

# Minus signs a model may write: ASCII hyphen-minus, U+2212 MINUS SIGN, U+FE63 SMALL
# HYPHEN-MINUS and U+FF0D FULLWIDTH HYPHEN-MINUS.
_MINUS_SIGNS = "-\u2212\ufe63\uff0d"
# A sign counts only where no letter or digit precedes it, so "3-5" is 3 then 5 and
# "x-2" is 2.  Thousands separators must group three digits ("1,234.0"); a period
# with no digit after it ends a sentence and is not part of the number ("109.").
_NUMBER = re.compile(
    rf"(?:(?<![^\W_])(?P<sign>[+{re.escape(_MINUS_SIGNS)}]))?"
    r"(?P<body>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
)
_PUNCTUATION = ".,:;!?()[]{}\"'*`"
_TOKEN = re.compile(r"[^\W_]+")


def last_number(text: str) -> float | None:
    """The last number written in ``text``, or ``None`` if there is none.

    Reads thousands separators (``"1,234.0"`` is 1234.0), Unicode minus signs
    (``"\u22125"`` is -5), and ignores a sentence's final period (``"is 109."`` is 109).
    A comma that does not separate groups of three digits separates numbers
    (``"1,23"`` is 1 then 23): decimal commas are not read.
    """
    matches = list(_NUMBER.finditer(text))
    if not matches:
        return None
    match = matches[-1]
    value = float(match["body"].replace(",", ""))
    return -value if match["sign"] and match["sign"] != "+" else value


def _reference_texts(example: Mapping[str, Any], field: str, grader: str) -> list[str]:
    """The example's reference answer(s) as stripped strings: one value, or a list of accepted ones."""
    answer = example_field(example, field, grader)
    answers = answer if isinstance(answer, list | tuple) else [answer]
    if not answers:
        raise ValueError(f"{grader}: example field {field!r} is an empty list; no answer to compare with")
    return [str(item).strip() for item in answers]


class ExactMatch:
    """1 if the whole reply, stripped of surrounding whitespace, is the reference answer.

    Args:
        field: the example's field holding the answer (a string, or a list of accepted answers).
        ignore_case: compare case-insensitively.
    """

    def __init__(self, field: str = "answer", ignore_case: bool = True) -> None:
        self.field = field
        self.ignore_case = bool(ignore_case)

    def _same(self, reply: str, answer: str) -> bool:
        return reply.casefold() == answer.casefold() if self.ignore_case else reply == answer

    def __call__(self, reply: str, example: Mapping[str, Any]) -> float:
        answers = _reference_texts(example, self.field, repr(self))
        return float(any(self._same(reply.strip(), answer) for answer in answers))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(field={self.field!r})"


class FirstWord(ExactMatch):
    """1 if the reply's first word, stripped of punctuation, is the reference answer.

    For replies asked to start with the answer ("Rome.", "yes, because ...");
    "The answer is 109." scores 0 against 109: use :class:`LastNumber` or
    :class:`RegexCapture` for replies that lead up to their answer.
    """

    def __call__(self, reply: str, example: Mapping[str, Any]) -> float:
        answers = _reference_texts(example, self.field, repr(self))
        words = reply.split()
        first = words[0].strip(_PUNCTUATION) if words else ""
        return float(bool(first) and any(self._same(first, answer.strip(_PUNCTUATION)) for answer in answers))


class RegexCapture(ExactMatch):
    """1 if a capture group of the pattern's last match in the reply is the reference answer.

    ``RegexCapture(r"#### *(\\S+)")`` reads GSM8K's ``#### 72``; no match scores 0.

    Args:
        pattern: a regular expression with at least ``group`` capture groups.
        group: the capture group holding the answer (number or name).
        field: the example's field holding the answer.
        ignore_case: match the pattern and compare the answer case-insensitively.
    """

    def __init__(self, pattern: str, group: int | str = 1, field: str = "answer", ignore_case: bool = True) -> None:
        super().__init__(field, ignore_case)
        self.pattern = pattern
        try:
            self.regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as error:
            raise ValueError(f"RegexCapture: pattern {pattern!r} is not a regular expression: {error}") from None
        if isinstance(group, str):
            if group not in self.regex.groupindex:
                raise ValueError(f"RegexCapture: pattern {pattern!r} has no group named {group!r}")
        elif positive_int("RegexCapture group", group) > self.regex.groups:
            raise ValueError(
                f"RegexCapture: pattern {pattern!r} has {self.regex.groups} capture group(s), "
                f"so it cannot capture group {group}; put the answer in parentheses"
            )
        self.group = group

    def __call__(self, reply: str, example: Mapping[str, Any]) -> float:
        answers = _reference_texts(example, self.field, repr(self))
        matches = list(self.regex.finditer(reply))
        captured = matches[-1][self.group] if matches else None
        if captured is None:
            return 0.0
        return float(any(self._same(captured.strip(), answer) for answer in answers))

    def __repr__(self) -> str:
        return f"RegexCapture({self.regex.pattern!r}, group={self.group!r}, field={self.field!r})"


class ContainsAnswer:
    """1 if the reference answer appears in the reply as a run of whole tokens (case-insensitive).

    Tokens are runs of letters and digits, so ``12`` does not match ``120`` and
    "The capital of Italy is Rome." matches ``rome``; an answer of several tokens
    must appear as that run.  With ``choices_field`` and an example that has it
    (e.g. ``["yes", "no"]``): 1 if the first token of the reply that is one of the
    choices is the answer ("No, ... Yes it is." grades as ``no``).

    Args:
        field: the example's field holding the answer.
        choices_field: the example's field listing the choices, where it has one.
    """

    def __init__(self, field: str = "answer", choices_field: str = "choices") -> None:
        self.field = field
        self.choices_field = choices_field

    def __call__(self, reply: str, example: Mapping[str, Any]) -> float:
        answer = example_field(example, self.field, repr(self))
        tokens = _TOKEN.findall(reply.casefold())
        wanted = _TOKEN.findall(str(answer).casefold())
        if not wanted:
            raise ValueError(f"{self!r}: answer {answer!r} has no letters or digits to match")
        choices = example.get(self.choices_field)
        if choices is not None:
            options = {str(choice).casefold() for choice in choices}
            first = next((token for token in tokens if token in options), None)
            return float(first is not None and [first] == wanted)
        width = len(wanted)
        return float(any(tokens[i : i + width] == wanted for i in range(len(tokens) - width + 1)))

    def __repr__(self) -> str:
        return f"ContainsAnswer(field={self.field!r}, choices_field={self.choices_field!r})"


class LastNumber:
    """1 if the last number in the reply is within a tolerance of the reference number (GSM8K style).

    The reply's number is read by :func:`last_number`; the reference is the example's
    field as a number, or the last number of its text (so a GSM8K solution ending in
    ``#### 72`` gives 72).  A match is ``|reply - answer| <= max(tolerance,
    relative * |answer|)`` (:func:`math.isclose`).

    Args:
        field: the example's field holding the answer.
        tolerance: absolute tolerance.
        relative: relative tolerance (0: absolute only).
    """

    def __init__(self, field: str = "answer", tolerance: float = 1e-6, relative: float = 0.0) -> None:
        self.field = field
        self.tolerance = non_negative_float("LastNumber tolerance", tolerance)
        self.relative = non_negative_float("LastNumber relative", relative)

    def reference(self, example: Mapping[str, Any]) -> float:
        """The example's reference number."""
        answer = example_field(example, self.field, repr(self))
        if isinstance(answer, int | float) and not isinstance(answer, bool):
            return float(answer)
        number = last_number(str(answer))
        if number is None:
            raise ValueError(f"{self!r}: the example's {self.field!r} is {answer!r}, which holds no number")
        return number

    def __call__(self, reply: str, example: Mapping[str, Any]) -> float:
        expected = self.reference(example)
        number = last_number(reply)
        if number is None:
            return 0.0
        return float(math.isclose(number, expected, rel_tol=self.relative, abs_tol=self.tolerance))

    def __repr__(self) -> str:
        return f"LastNumber(field={self.field!r}, tolerance={self.tolerance!r}, relative={self.relative!r})"


class ChoiceLetter:
    """1 if the letter after the reply's last answer marker is the reference letter (multiple choice).

    The reply must state its choice after ``marker`` (case-insensitive), as in
    ``"ANSWER: C"``, ``"Answer: (c)"`` or ``"... so the answer: **C**."``; a letter
    anywhere else does not count, so "A good answer is C" has no choice and scores 0
    (it does not grade as A).  The letter must stand alone (``"ANSWER: Cats"`` has
    no choice) and be one of ``letters``.  Tell the model the marker in the prompt,
    e.g. "End with ANSWER: followed by the letter of your choice."

    Args:
        field: the example's field holding the correct letter.
        marker: the text that announces the choice.
        letters: the letters the choices are labelled with.
    """

    def __init__(self, field: str = "answer", marker: str = "ANSWER:", letters: str = "ABCDEFGHIJ") -> None:
        if not marker.strip():
            raise ValueError("ChoiceLetter: marker must be non-empty text, e.g. 'ANSWER:'")
        if not (letters.isalpha() and letters.isascii() and len(set(letters.upper())) == len(letters)):
            raise ValueError(f"ChoiceLetter: letters must be distinct ASCII letters, got {letters!r}")
        self.field = field
        self.marker = marker
        self.letters = letters.upper()
        self.regex = re.compile(re.escape(marker.strip()) + r"[\s*_(\[]*([A-Za-z])(?![A-Za-z])", re.IGNORECASE)

    def choice(self, reply: str) -> str | None:
        """The letter after the reply's last marker, or ``None``."""
        matches = self.regex.findall(reply)
        letter = matches[-1].upper() if matches else None
        return letter if letter is not None and letter in self.letters else None

    def __call__(self, reply: str, example: Mapping[str, Any]) -> float:
        answer = str(example_field(example, self.field, repr(self))).strip().strip(_PUNCTUATION).upper()
        if len(answer) != 1 or answer not in self.letters:
            raise ValueError(
                f"{self!r}: the example's {self.field!r} must be one of the letters {self.letters}, got {answer!r}"
            )
        return float(self.choice(reply) == answer)

    def __repr__(self) -> str:
        return f"ChoiceLetter(field={self.field!r}, marker={self.marker!r})"


class CallableGrader:
    """Any Python function ``fn(reply, example) -> float``, named by its import path.

    ``CallableGrader("mypackage.grading.rubric", strict=True)`` imports
    ``mypackage.grading.rubric`` (``"mypackage.grading:rubric"`` works too) and calls
    ``rubric(reply, example, strict=True)``.  What it returns is checked by
    :func:`grade`: a bool or a finite number in [0, 1].

    Args:
        path: dotted import path of the function.
        **kwargs: keyword arguments passed on every call.
    """

    def __init__(self, path: str, **kwargs: Any) -> None:
        function = locate(path.replace(":", "."), f"CallableGrader({path!r})")
        if not callable(function):
            raise ValueError(f"CallableGrader: {path!r} is {type(function).__name__}, not a function")
        self.path = path
        self.kwargs = kwargs
        self.function = functools.partial(function, **kwargs) if kwargs else function

    def identity(self) -> dict[str, Any]:
        """What a store records of this grader: the function's path and its keyword arguments."""
        return {"path": self.path, "kwargs": dict(self.kwargs)}

    def __call__(self, reply: str, example: Mapping[str, Any]) -> float:
        return grade(self.function, reply, example, name=self.path)

    def __repr__(self) -> str:
        return f"CallableGrader({self.path!r})"


def grade(grader: GraderFn, reply: str, example: Mapping[str, Any], name: str | None = None) -> float:
    """``grader(reply, example)`` as a float in [0, 1], else a ``ValueError`` naming the grader and the example.

    A bool counts as 0 or 1; NaN, infinities, values outside [0, 1] and anything
    that is not a number are errors, so that a broken grader stops a run instead of
    recording scores that mean nothing.  A grader that raises anything but a
    ``ValueError`` (which the built-in graders raise, naming themselves) is named too,
    with the file and line it raised at, the reply and the example.
    """
    if not isinstance(reply, str):
        raise TypeError(f"a grader takes the reply as a string, got {type(reply).__name__}")
    # A function by its import path (its repr holds a memory address); a grader object by its repr, its settings.
    label = name or (f"{grader.__module__}.{grader.__qualname__}" if hasattr(grader, "__qualname__") else repr(grader))
    try:
        score = grader(reply, example)
    except ValueError:
        raise
    except Exception as error:  # noqa: BLE001 - a custom grader's bug: named, so the run stops on one line
        frame = traceback.extract_tb(error.__traceback__)[-1]
        raise ValueError(
            f"grader {label} raised {one_line(error)} at {frame.filename}, line {frame.lineno}, on the reply "
            f"{reply[:80]!r} to example {describe_example(example)}"
        ) from error
    try:
        value = float(score)
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(score, str | bytes) or not (0.0 <= value <= 1.0):
        raise ValueError(
            f"grader {label} returned {score!r} for the reply {reply[:80]!r} to example {describe_example(example)}; "
            "a grader must return a number in [0, 1]"
        )
    return value
