"""Building inspect_ai objects from what a live run's configuration holds: tasks, solvers and arms.

A task is loaded from a ``"path/to/file.py@name"`` spec, the name of a task an installed
package registers, a ``Task``, or a function making one (:func:`load_inspect_task`).  A
solver is built from a JSON spec: an inspect registry name, a mapping with a Hydra
``_target_`` and its arguments, or a list of these, chained (:func:`build_solver`).  An
arm mapping (see :mod:`gittinseval.live.tasks.inspect_task`) builds its generate settings,
solver and model arguments (:func:`build_arm`).  The specs stay JSON in the arms, so that
the store records them; their ``_target_`` mappings are built by
:func:`gittinseval.live.tasks.targets.build_targets`, whose errors name the arm and the setting.
A task file that fails to load, or a task function that fails, is named by its file and line.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspect_ai import Task
from inspect_ai.model import GenerateConfig
from inspect_ai.solver import Solver, chain, system_message
from inspect_ai.util import registry_create, registry_info
from pydantic import ValidationError

from gittinseval.live.tasks.prices import Prices
from gittinseval.live.tasks.targets import build_targets, one_line

__all__ = [
    "ARM_FIELDS",
    "InspectArm",
    "build_arm",
    "build_solver",
    "load_inspect_task",
    "registry_name",
    "task_source",
]

ARM_FIELDS = ("model", "name", "system", "solver", "model_args")
"""The keys of an arm mapping that are not inspect ``GenerateConfig`` fields."""


def load_inspect_task(task: str | Task | Callable[..., Task], task_args: Mapping[str, Any] | None = None) -> Task:
    """An inspect ``Task`` from a ``"file.py@name"`` spec (``"file.py"`` for a file with one task), the name of
    a task an installed package registers, a ``Task``, or a function making one."""
    if isinstance(task, Task):
        if task_args:
            raise ValueError("task_args apply to a task loaded by name; this task is already built")
        return task
    if callable(task):
        made = task(**(task_args or {}))
        if not isinstance(made, Task):
            raise ValueError(f"{task!r} returned {type(made).__name__}, not an inspect_ai Task")
        return made
    spec = str(task)
    path, _, name = spec.partition("@")
    if path.endswith(".py"):
        return _task_from_file(Path(path), name or None, dict(task_args or {}))
    try:
        made = registry_create("task", spec, **(task_args or {}))
    except LookupError:
        raise ValueError(
            f"no inspect task {spec!r}: give path/to/file.py@task_name, or a task an installed package registers"
        ) from None
    if not isinstance(made, Task):
        raise ValueError(f"inspect registry name {spec!r} is not a task")
    return made


def task_source(task: str | Task | Callable[..., Task], task_args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the store records of where a task came from: the spec and its arguments, and for a task file the
    SHA-256 of its text (an edited scorer, solver or dataset in the file changes it).  A ``Task`` or a function
    given from Python is recorded by its name only."""
    if isinstance(task, Task) or callable(task):
        return {"spec": getattr(task, "name", None) or getattr(task, "__qualname__", type(task).__name__)}
    spec, source = str(task), {"spec": str(task), "task_args": dict(task_args or {})}
    path = Path(spec.partition("@")[0])
    if path.suffix == ".py" and path.is_file():
        source["file_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return source


def registry_name(value: Any) -> str:
    """The inspect registry name of a scorer or solver; a chain or a plain function is named by its type."""
    try:
        return registry_info(value).name
    except (AttributeError, ValueError):  # a solver chain or a plain function is not registered
        return type(value).__name__


def _task_from_file(path: Path, name: str | None, task_args: dict[str, Any]) -> Task:
    """The ``@task`` function ``name`` of a Python file, called with ``task_args``.

    As ``inspect eval`` does, the file runs, and its task is built, in the file's own
    folder, so that the relative paths of its datasets resolve there; the ``@task``
    decorator records the file, and inspect runs the task's evals in that folder too.
    """
    if not path.is_file():
        raise FileNotFoundError(f"inspect task file {path} does not exist (relative to {Path.cwd()})")
    path = path.resolve()
    # Not in sys.modules, as inspect's own loader leaves it: inspect then takes the task for a local file's and
    # skips searching the installed distributions for its package (a third of a second per eval, measured here).
    module_name = f"_gittinseval_inspect_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    with contextlib.chdir(path.parent):
        try:
            spec.loader.exec_module(module)
        except Exception as error:  # noqa: BLE001 - any failure of the user's file is named by its file and line
            where = f"inspect task file {path}{_line_of(error, path)}"
            raise ValueError(f"{where} failed to load: {one_line(error)}") from error
        tasks = {
            registry_info(function).name.rsplit("/", 1)[-1]: function
            for function in vars(module).values()
            if _is_task_function(function, module_name)
        }
        if name is None and len(tasks) != 1:
            names = ", ".join(sorted(tasks)) or "none"
            raise ValueError(f"inspect task file {path} defines {len(tasks)} tasks ({names}); name one as file.py@name")
        if name is not None and name not in tasks:
            raise ValueError(f"inspect task file {path} has no task {name!r}; its tasks: {', '.join(sorted(tasks))}")
        chosen = name or next(iter(tasks))
        try:
            return tasks[chosen](**task_args)
        except Exception as error:  # noqa: BLE001 - a bad task argument, or the task function's own failure
            raise ValueError(
                f"inspect task {chosen!r} of {path}{_line_of(error, path)} failed with task_args {task_args}: "
                f"{one_line(error)}"
            ) from error


def _line_of(error: BaseException, path: Path) -> str:
    """``" (line N)"``: where in the file ``path`` the ``error`` was raised (its last frame there), if it was."""
    if isinstance(error, SyntaxError) and error.filename == str(path):
        return f" (line {error.lineno})"
    lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__) if frame.filename == str(path)]
    return f" (line {lines[-1]})" if lines else ""


def _is_task_function(value: Any, module_name: str) -> bool:
    """Whether ``value`` is a ``@task`` function defined in the module ``module_name`` (not imported into it)."""
    if not callable(value) or getattr(value, "__module__", None) != module_name:
        return False
    try:
        return registry_info(value).type == "task"
    except ValueError:  # not a registry object
        return False


def build_solver(spec: Any, where: str = "solver") -> Solver:
    """An inspect solver from its JSON spec: a registry name (``"generate"``, ``"mypackage/my_solver"``), a mapping
    with a Hydra ``_target_`` and its arguments (``{_target_: inspect_ai.solver.prompt_template, template: ...}``),
    or a list of these, chained.  ``where`` names the spec in errors."""
    if isinstance(spec, str):
        try:
            return registry_create("solver", spec)
        except LookupError:
            raise ValueError(f"{where}: no inspect solver {spec!r} is registered") from None
    if isinstance(spec, Sequence) and spec:
        return chain(*(build_solver(item, f"{where}[{position}]") for position, item in enumerate(spec)))
    if isinstance(spec, Mapping) and "_target_" in spec:
        built = build_targets(spec, where)
        if isinstance(built, Sequence):
            return chain(*built)
        if not callable(built):
            raise ValueError(f"{where}: {spec['_target_']} built {type(built).__name__}, not an inspect solver")
        return built
    raise ValueError(
        f"{where} must be an inspect solver's registry name, a {{_target_: ...}} mapping or a list of them "
        f"(JSON, so that the store can record the arm), got {spec!r}"
    )


@dataclass(frozen=True)
class InspectArm:
    """What an arm mapping builds: its generate settings, its solver and the arguments of its model."""

    config: GenerateConfig
    solver: Solver
    model_args: dict[str, Any]


def build_arm(
    arm: Mapping[str, Any],
    index: int,
    task: Task,
    defaults: GenerateConfig,
    prices: Prices,
    model_args: Mapping[str, Mapping[str, Any]],
) -> InspectArm:
    """Arm ``index``'s settings on ``task``, refused before any call when they are bad or unpriced.

    Its generate settings are the arm's over the task's over ``defaults``; its solver the
    arm's ``solver`` (else the task's), after its ``system`` message; its model's arguments
    the arm's ``model_args`` (``_target_`` mappings built) updated by ``model_args[model]``,
    the built arguments given apart from the arms.
    """
    if "model" not in arm:
        raise ValueError(f"inspect arm {index} has no model: {arm}")
    where = f"inspect arm {index}" + (f" {arm['name']!r}" if arm.get("name") else "") + f" ({arm['model']})"
    settings = {key: value for key, value in arm.items() if key not in ARM_FIELDS}
    try:
        config = GenerateConfig(**settings)
    except ValidationError as error:
        problems = "; ".join(problem["msg"] for problem in error.errors())
        raise ValueError(f"{where}: bad generate settings: {problems}") from None
    prices.price(str(arm["model"]))  # an arm without a price is refused before any call
    solver = task.solver if arm.get("solver") is None else build_solver(arm["solver"], f"{where}: solver")
    if arm.get("system"):
        solver = chain(system_message(arm["system"]), solver)
    own_args = build_targets(arm.get("model_args") or {}, f"{where}: model_args")
    arm_args = {**own_args, **model_args.get(arm["model"], {})}
    return InspectArm(defaults.merge(task.config).merge(config), solver, arm_args)
