"""One line for every error of the command-line apps, with its exit code: 2 for usage, 1 for a failed run,
130 for an interruption (Ctrl-C), as shells expect."""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import yaml
from hydra._internal.utils import get_args_parser
from hydra.errors import HydraException, InstantiationException
from hydra.utils import get_object
from omegaconf import DictConfig, ListConfig
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from gittinseval.cli.configs import group_options
from gittinseval.utils.errors import UsageError
from gittinseval.utils.text import invalid_yaml

__all__ = [
    "INTERRUPTED", "RUN_FAILURE", "USAGE_ERROR", "RunFailure", "check_command_line", "number_given_as_text", "one_line",
    "one_line_errors", "run_app",
]

USAGE_ERROR = 2
RUN_FAILURE = 1
INTERRUPTED = 130  # 128 + SIGINT
FULL_ERROR = "HYDRA_FULL_ERROR"
ONE_LINE = "GITTINSEVAL_ONE_LINE_ERRORS"

# Usage errors: a wrong override, a value out of range, bad input files (a config file that is not YAML
# among them: Hydra lets PyYAML's error through), a store that cannot be opened.
_USAGE = (HydraException, OmegaConfBaseException, ValueError, FileNotFoundError, UsageError, yaml.YAMLError)
_DETAILS = ("full_key:", "object_type=", "reference_type=")


class RunFailure(Exception):
    """A run that started and failed (its scoring calls failed, nothing to recommend): exit code 1."""


def run_app(program: str, app: Callable[[], Any]) -> None:
    """Run a ``@hydra.main`` app, turning every error into one line ``<program>: error: ...`` on stderr.

    Exit code 2 for usage errors (an unknown key or option, a value out of range, a
    missing mandatory value, bad input data, a store that is refused) and 1 for a
    :class:`RunFailure`, 130 for a Ctrl-C (``interrupted``, without its trace); anything
    else is a bug and keeps its trace.  Hydra prints
    the errors of composing the config over several lines and exits 1: while the
    app runs, Hydra is told to raise them instead (``HYDRA_FULL_ERROR``), and the
    errors of the task function itself are caught inside it (:func:`one_line_errors`).
    A user who sets ``HYDRA_FULL_ERROR=1`` gets Hydra's report and the full trace.
    """
    if _user_wants_traces():
        app()
        return
    check_command_line(program, sys.argv[1:])
    os.environ[FULL_ERROR] = "1"
    os.environ[ONE_LINE] = "1"  # inherited by launcher workers, as HYDRA_FULL_ERROR is
    try:
        app()
    except _USAGE as error:
        _exit(program, one_line(error), USAGE_ERROR)
    except KeyboardInterrupt:
        _exit(program, "interrupted", INTERRUPTED)
    finally:
        os.environ.pop(FULL_ERROR, None)
        os.environ.pop(ONE_LINE, None)


def one_line_errors(program: str) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """Decorate a Hydra task function: its usage errors and :class:`RunFailure` become one line and
    an exit code there, before Hydra adds its own ``Error executing job`` line."""

    def decorate(task: Callable[[Any], Any]) -> Callable[[Any], Any]:
        @functools.wraps(task)
        def run(cfg: Any) -> Any:
            try:
                return task(cfg)
            except RunFailure as failure:
                if _user_wants_traces():
                    raise
                _exit(program, str(failure), RUN_FAILURE)
            except (*_USAGE, TypeError) as error:
                if _user_wants_traces():
                    raise
                # A number given as text (policy.kappa=abc) fails deep inside, as "must be real number,
                # not str" or as a ValueError that names the argument but not its config group: name the key.
                text = number_given_as_text(cfg)
                if text is None and not isinstance(error, _USAGE):
                    raise  # any other TypeError is a bug: its trace is kept
                _exit(program, text or one_line(error), USAGE_ERROR)

        return run

    return decorate


def number_given_as_text(cfg: Any) -> str | None:
    """``<key> must be a number, got 'abc'; ...`` for the first setting of ``cfg`` given as text where the object it
    configures (its ``_target_``'s signature) takes a number (or given a fraction where it takes an integer);
    ``None`` if there is none.

    Read only after a run failed, so that a setting is never refused on its annotation alone.
    """
    for key, node in _targets(cfg, ""):
        try:
            parameters = inspect.signature(get_object(node["_target_"])).parameters
        except Exception:  # noqa: BLE001 - a target that cannot be imported or inspected has its own error
            continue
        for name, parameter in parameters.items():
            kind = _NUMBER_ANNOTATIONS.get(str(getattr(parameter.annotation, "__name__", parameter.annotation)))
            value = _value(node, name)
            if kind is None or not isinstance(value, str | float) or _fits(value, kind):
                continue
            default = parameter.default
            remedy = (f"give {key}{name}=<{kind.split()[-1]}>" if default in (None, inspect.Parameter.empty)
                      else f"e.g. {key}{name}={default}, its default")
            return f"{key}{name} must be {kind}, got {value!r}; {remedy}"
    return None


# Annotations of numbers (as strings under `from __future__ import annotations`) and what they take.
_NUMBER_ANNOTATIONS = {
    "float": "a number", "float | None": "a number", "int": "an integer", "int | None": "an integer",
}


def _targets(node: Any, prefix: str) -> Iterator[tuple[str, DictConfig]]:
    """``(key prefix, node)`` of every node of ``node`` with a ``_target_``, outermost first."""
    if isinstance(node, DictConfig):
        if "_target_" in node:
            yield prefix, node
        items = ((key, _value(node, key)) for key in node if not str(key).startswith("_"))
    elif isinstance(node, ListConfig):
        items = ((str(index), _value(node, index)) for index in range(len(node)))
    else:
        return
    for key, child in items:
        yield from _targets(child, f"{prefix}{key}.")


def _value(node: Any, key: Any) -> Any:
    try:
        return node[key] if key in node or isinstance(node, ListConfig) else None
    except OmegaConfBaseException:  # an interpolation that does not resolve: not this check's concern
        return None


def _fits(value: str | float, kind: str) -> bool:
    try:
        number = float(value)
    except ValueError:
        return False
    return kind == "a number" or number.is_integer()


def check_command_line(program: str, argv: list[str]) -> None:
    """Parse ``argv`` with Hydra's own parser first, so that its errors are one line as the others are.

    Hydra's parser prints its usage over six lines before the error.  Its overrides are one
    positional list, so a flag between two overrides ends it and the overrides after the flag are
    "unrecognized arguments": the line says to put the flags first.
    """
    parser = get_args_parser()

    def error(message: str) -> None:
        if message.startswith("unrecognized arguments:"):
            message += (
                "; flags (-m, --cfg job, --config-dir DIR, ...) go before the overrides (key=value): "
                f"{program} [flags] key=value ..."
            )
        _exit(program, message, USAGE_ERROR)

    parser.error = error  # type: ignore[method-assign]  # argparse calls self.error on every parse error
    parser.parse_args(argv)


def _user_wants_traces() -> bool:
    return os.environ.get(FULL_ERROR) == "1" and os.environ.get(ONE_LINE) != "1"


def _exit(program: str, message: str, code: int) -> None:
    print(f"{program}: error: {message}", file=sys.stderr)
    raise SystemExit(code) from None


def one_line(error: BaseException) -> str:
    """The message of ``error`` (or of the error an instantiation failed on) on one line.

    Hydra's option lists become ``available options in 'policy': gittins, lrf, ...``, with
    the options of subgroups (``experiment``: ``..., main, paper/batch_size, ...``);
    OmegaConf's ``full_key``/``object_type`` detail lines and Hydra's config search
    path are dropped; a missing mandatory value says how to give it.
    """
    if isinstance(error, InstantiationException) and error.__cause__ is not None:
        error = error.__cause__
    if isinstance(error.__cause__, yaml.YAMLError):
        error = error.__cause__
    if isinstance(error, yaml.YAMLError):
        return invalid_yaml(error)
    text = str(error)
    if isinstance(error, HydraException) and isinstance(error.__cause__, OmegaConfBaseException):
        text += "\n" + str(error.__cause__)
    if isinstance(error, MissingMandatoryValue) and error.full_key:
        text = f"{text.splitlines()[0]} (give it on the command line: {error.full_key}=...)"
    text = re.sub(
        r"Available options in '([^']*)':\n((?:\t.*(?:\n|$))+)",
        lambda match: f"available options in '{match[1]}': {', '.join(_all_options(match[1], match[2].split()))}\n",
        text.split("Config search path")[0],
    )
    lines = [line.strip() for line in text.splitlines()]
    return "; ".join(line.rstrip(".") for line in lines if line and not line.startswith(_DETAILS))


def _all_options(group: str, listed: list[str]) -> list[str]:
    """The options of ``group`` with its subgroups' (``experiment=paper/main``): Hydra lists only its own."""
    try:
        return group_options(group, sys.argv[1:]) or listed
    except (HydraException, OmegaConfBaseException):  # the command line's search path itself is broken
        return listed
