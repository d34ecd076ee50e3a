"""One line for every error of the command-line apps, with its exit code: 2 for usage, 1 for a failed run,
130 for an interruption (Ctrl-C), as shells expect."""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from hydra.errors import HydraException, InstantiationException
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from gittinseval.cli.configs import group_options
from gittinseval.utils.errors import UsageError

__all__ = ["INTERRUPTED", "RUN_FAILURE", "USAGE_ERROR", "RunFailure", "one_line", "one_line_errors", "run_app"]

USAGE_ERROR = 2
RUN_FAILURE = 1
INTERRUPTED = 130  # 128 + SIGINT
FULL_ERROR = "HYDRA_FULL_ERROR"
ONE_LINE = "GITTINSEVAL_ONE_LINE_ERRORS"

# Usage errors: a wrong override, a value out of range, bad input files, a store that cannot be opened.
_USAGE = (HydraException, OmegaConfBaseException, ValueError, FileNotFoundError, UsageError)
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
            except _USAGE as error:
                if _user_wants_traces():
                    raise
                _exit(program, one_line(error), USAGE_ERROR)

        return run

    return decorate


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
