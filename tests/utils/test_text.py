"""The wording shared by the command-line messages (gittinseval.utils.text): counts of nouns and one-line YAML
errors."""

import pytest
import yaml

from gittinseval.utils.text import count, invalid_yaml


@pytest.mark.parametrize(("number", "expected"), [(0, "0 runs"), (1, "1 run"), (2, "2 runs"), (1000, "1000 runs")])
def test_a_count_takes_an_s_unless_it_is_one(number, expected):
    assert count(number, "run") == expected


def test_a_yaml_error_in_a_string_is_one_line_with_its_place_and_the_file_given():
    with pytest.raises(yaml.YAMLError) as info:
        yaml.safe_load("a: 1\nb: [2, 3\nc: 4\n")
    mark = info.value.problem_mark
    line = invalid_yaml(info.value, "conf/task/mine.yaml")
    assert "\n" not in line
    assert line.startswith(f"conf/task/mine.yaml: not valid YAML (line {mark.line + 1}, column {mark.column + 1}): ")
    assert info.value.problem in line and line.endswith("; fix the file's syntax there")
    assert f"({info.value.context})" in line  # what PyYAML was reading, kept beside the problem


def test_a_yaml_error_of_a_file_names_the_file_yaml_read(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("key: value\n  indented: wrong\n")
    with open(path) as handle, pytest.raises(yaml.YAMLError) as info:
        yaml.safe_load(handle)
    assert invalid_yaml(info.value).startswith(f"{path}: not valid YAML (line 2, column ")


def test_an_error_without_marks_keeps_its_message_on_one_line():
    line = invalid_yaml(ValueError("two\n   lines"))
    assert line == "a config file: not valid YAML: two lines; fix the file's syntax there"
