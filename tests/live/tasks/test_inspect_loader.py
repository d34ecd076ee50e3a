"""Building inspect_ai objects from a live run's configuration (gittinseval.live.tasks.inspect_loader): tasks from
files, names and functions, solvers from their specs, arms with their settings, and the errors of each."""

import hashlib
import json
from pathlib import Path

import pytest
from inspect_ai import Task
from inspect_ai.model import GenerateConfig

from gittinseval.live.tasks.inspect_loader import build_arm, build_solver, load_inspect_task, registry_name, task_source
from gittinseval.live.tasks.prices import load_prices
from tests.live.tasks.test_inspect_task import BUNDLED_TASK, PRICES, QUESTIONS


def test_loading_a_task_by_spec_object_or_function():
    loaded = load_inspect_task(BUNDLED_TASK)
    assert isinstance(loaded, Task) and loaded.name == "arithmetic"
    assert load_inspect_task(loaded) is loaded
    assert load_inspect_task(lambda: loaded) is loaded


def test_a_task_file_runs_in_its_folder_and_names_its_task(tmp_path, monkeypatch):
    folder = tmp_path / "tasks"
    folder.mkdir()
    samples = [{"id": name, "input": text, "target": "0"} for name, text in zip("ab", QUESTIONS, strict=False)]
    (folder / "data.json").write_text(json.dumps(samples))
    (folder / "two.py").write_text(
        "from inspect_ai import Task, task\n"
        "from inspect_ai.dataset import json_dataset\n"
        "from inspect_ai.scorer import match\n\n"
        "@task\ndef first():\n    return Task(dataset=json_dataset('data.json'), scorer=match())\n\n"
        "@task(name='renamed')\ndef second(limit=2):\n"
        "    return Task(dataset=json_dataset('data.json')[:limit], scorer=match())\n"
    )
    monkeypatch.chdir(tmp_path)  # the dataset's relative path resolves in the task file's folder
    assert [sample.id for sample in load_inspect_task("tasks/two.py@first").dataset] == ["a", "b"]
    renamed = load_inspect_task("tasks/two.py@renamed", {"limit": 1})
    assert renamed.name == "renamed" and [sample.id for sample in renamed.dataset] == ["a"]
    with pytest.raises(ValueError, match=r"defines 2 tasks \(first, renamed\); name one as file.py@name"):
        load_inspect_task("tasks/two.py")
    with pytest.raises(ValueError, match=r"has no task 'second'; its tasks: first, renamed"):
        load_inspect_task("tasks/two.py@second")
    with pytest.raises(ValueError, match=r"no inspect task 'nowhere/nothing': give path/to/file.py@task_name"):
        load_inspect_task("nowhere/nothing")


def test_a_task_file_that_fails_is_named_with_its_line(tmp_path):
    (tmp_path / "syntax.py").write_text("from inspect_ai import task\n\ndef oops(:\n")
    (tmp_path / "imports.py").write_text("import no_such_package_here\n")
    (tmp_path / "raises.py").write_text(
        "from inspect_ai import task\n\n@task\ndef quiz(n=1):\n    return 1 / 0\n"
    )
    with pytest.raises(ValueError, match=r"inspect task file .*syntax.py \(line 3\) failed to load: SyntaxError"):
        load_inspect_task(str(tmp_path / "syntax.py"))
    with pytest.raises(
        ValueError, match=r"imports.py \(line 1\) failed to load: ModuleNotFoundError: No module named 'no_such_pa"
    ):
        load_inspect_task(str(tmp_path / "imports.py"))
    with pytest.raises(
        ValueError, match=r"inspect task 'quiz' of .*raises.py \(line 5\) failed with task_args \{\}: ZeroDivisionError"
    ):
        load_inspect_task(f"{tmp_path / 'raises.py'}@quiz")
    with pytest.raises(ValueError, match=r"failed with task_args \{'m': 2\}: TypeError: .*unexpected keyword .*'m'"):
        load_inspect_task(f"{tmp_path / 'raises.py'}@quiz", {"m": 2})


def test_a_task_is_recorded_by_its_spec_and_its_files_text(tmp_path):
    source = task_source(BUNDLED_TASK, {"n": 3})
    text = Path(BUNDLED_TASK.partition("@")[0]).read_bytes()
    assert source == {"spec": BUNDLED_TASK, "task_args": {"n": 3}, "file_sha256": hashlib.sha256(text).hexdigest()}
    copy = tmp_path / "quiz.py"
    copy.write_bytes(text)
    before = task_source(f"{copy}@arithmetic")["file_sha256"]
    copy.write_bytes(text + b"\n# edited\n")
    assert task_source(f"{copy}@arithmetic")["file_sha256"] != before
    loaded = load_inspect_task(BUNDLED_TASK)
    assert task_source(loaded) == {"spec": "arithmetic"}  # built in Python: by its name only
    assert task_source("inspect_evals/gsm8k") == {"spec": "inspect_evals/gsm8k", "task_args": {}}  # no file


def test_solvers_are_built_from_registry_names_target_mappings_and_lists_of_them():
    assert registry_name(build_solver("generate")) == "inspect_ai/generate"
    chained = build_solver(["generate", {"_target_": "inspect_ai.solver.system_message", "template": "Be brief."}])
    assert registry_name(chained) == "inspect_ai/chain"
    built = build_solver({"_target_": "inspect_ai.solver.system_message", "template": "Be brief."})
    assert callable(built) and registry_name(built) != "inspect_ai/chain"
    assert registry_name(lambda state: state) == "function"  # not registered: named by its type
    with pytest.raises(ValueError, match=r"my arm: no inspect solver 'no_such' is registered"):
        build_solver("no_such", "my arm")
    with pytest.raises(ValueError, match=r"solver\[1\]: no inspect solver 'no_such' is registered"):
        build_solver(["generate", "no_such"])


def test_an_arms_settings_override_the_tasks_which_override_the_defaults():
    task = load_inspect_task(BUNDLED_TASK)
    prices = load_prices(PRICES)
    defaults = GenerateConfig(max_tokens=100, seed=7, temperature=1.0)
    arm = {"model": "mockllm/strong", "temperature": 0.3, "system": "Be brief.", "model_args": {"x": 1, "y": 0}}
    built = build_arm(arm, 0, task, defaults, prices, {"mockllm/strong": {"y": 2}, "mockllm/weak": {"z": 3}})
    assert (built.config.temperature, built.config.max_tokens, built.config.seed) == (0.3, 100, 7)
    assert built.model_args == {"x": 1, "y": 2}  # the arguments given apart win over the arm's own
    assert registry_name(built.solver) == "inspect_ai/chain"  # the system message, then the task's solver
    plain = build_arm({"model": "mockllm/weak"}, 1, task, defaults, prices, {})
    assert plain.solver is task.solver and plain.model_args == {} and plain.config.temperature == 1.0
    with pytest.raises(ValueError, match=r"inspect arm 2 'fast' \(mockllm/weak\): bad generate settings"):
        build_arm({"model": "mockllm/weak", "name": "fast", "max_tokens": "many"}, 2, task, defaults, prices, {})
