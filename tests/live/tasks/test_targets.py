"""Objects a task config names by import path (gittinseval.live.tasks.targets): located through modules and their
attributes, built by Hydra wherever they are nested, and every failure one line naming the setting."""

import json
import os.path
from fractions import Fraction

import pytest

from gittinseval.live.tasks.targets import build_targets, locate, one_line


def test_a_path_is_followed_through_modules_and_then_attributes():
    assert locate("json.dumps", "grader") is json.dumps
    assert locate("os.path.join", "grader") is os.path.join
    assert locate("fractions.Fraction.from_float", "grader") == Fraction.from_float


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("not a path", r"^task.grader: 'not a path' is not a dotted import path such as package.module.name$"),
        ("json.dumps.nothing", r"^task.grader: cannot import 'json.dumps.nothing': 'json.dumps' has no 'nothing'$"),
        ("json.nothing", r"^task.grader: cannot import 'json.nothing': 'json' has no 'nothing'$"),
        ("no_such_package_here.grade", r"^task.grader: cannot import 'no_such_package_here.grade': no module "
                                       r"'no_such_package_here' on the search path \(.*\); install it, or add its "
                                       r"folder to PYTHONPATH$"),
    ],
)
def test_a_path_that_names_nothing_says_why_in_one_line(path, message):
    with pytest.raises(ValueError, match=message):
        locate(path, "task.grader")


def test_a_module_that_fails_on_import_is_named_with_its_error(tmp_path, monkeypatch):
    (tmp_path / "explodes.py").write_text("raise RuntimeError('boom,\\n  twice')\n")
    (tmp_path / "needs.py").write_text("import no_such_dependency_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"^g: importing 'explodes' failed: RuntimeError: boom, twice$"):
        locate("explodes.grade", "g")
    with pytest.raises(ValueError, match=r"^g: importing 'needs' failed: ModuleNotFoundError: No module named 'no_s"):
        locate("needs.grade", "g")


def test_one_line_collapses_every_kind_of_whitespace():
    assert one_line(KeyError("a\n\tb   c")) == "KeyError: 'a\\n\\tb c'"  # a KeyError's str is its repr
    assert one_line(ValueError("a\n\tb   c\r\n")) == "ValueError: a b c"


def test_every_mapping_with_a_target_is_built_wherever_it_is_nested():
    value = {
        "weights": [{"_target_": "fractions.Fraction", "numerator": 1, "denominator": 4}, 2],
        "plain": {"a": [1, {"b": "c"}]},
        "outer": {"_target_": "builtins.dict", "inner": {"_target_": "fractions.Fraction", "numerator": 3}},
    }
    built = build_targets(value, "arm")
    assert built == {"weights": [Fraction(1, 4), 2], "plain": {"a": [1, {"b": "c"}]},
                     "outer": {"inner": Fraction(3)}}
    assert type(built["weights"][0]) is Fraction and build_targets(7, "arm") == 7


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"_target_": "builtins.dict", "inner": {"_target_": "nowhere_pkg.x"}},
         r"^arm: model_args.inner: cannot import 'nowhere_pkg.x': no module 'nowhere_pkg'"),
        ({"list": [1, {"_target_": "json.nothing"}]}, r"^arm: model_args.list\[1\]: cannot import 'json.nothing'"),
        ({"_target_": "fractions.Fraction", "numerator": 1, "denominator": 0},
         r"^arm: model_args: fractions.Fraction: ZeroDivisionError: Fraction\(1, 0\)$"),
    ],
)
def test_a_target_that_cannot_be_built_is_named_by_its_setting(value, message):
    with pytest.raises(ValueError, match=message):
        build_targets(value, "arm: model_args")
