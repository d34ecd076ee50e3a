"""The pages (README.md and docs/*.md) show only commands that work.

Each page's shell snippets (its ``bash`` blocks, and inline code that starts with
``.venv/bin/``, ``gittinseval`` or ``make``) run in bash in a folder of their own, in
page order, with every program of ``.venv/bin`` and ``make`` replaced by a recorder: the
files a page writes are written, and each command is recorded with the arguments bash
gives it.  Then every recorded command must be

- composed by Hydra's compose API (``gittinseval``, ``python -m gittinseval`` and
  ``gittinseval-live``; a sweep at the first value of each swept key, and every value of
  a swept config group an option of the group), or
- accepted by its own program's argument parser, which is stopped before it runs (the
  other console scripts, ``python -m gittinseval.<module>``, ``python scripts/<name>.py``), or
- a ``make`` target and variable of the Makefile, a ``pip install`` of an extra of
  pyproject.toml, Python on stdin that compiles and whose imports resolve, or one of
  :data:`KNOWN_COMMANDS`.

A command's ``PYTHONPATH`` (a module the page writes, named by its task config or imported
on stdin) is on Python's search path while it is checked or run.

So a page cannot show an unknown config key, option, flag, script or extra, and no
sweep is run.  The live runs of the pages against the fake server run in full, and the
Python blocks, yaml excerpts and quoted names and paths are checked against the code.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import importlib.util
import os
import queue
import re
import runpy
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser

from gittinseval.cli.configs import CONFIG_DIR, register_method_aliases, search_path_dirs
from gittinseval.cli.live import LIVE_CONFIG_NAME, SUBCOMMANDS
from gittinseval.cli.simulate import expand_subject_sweep
from gittinseval.core.params import current_target
from gittinseval.live import fake_server
from gittinseval.live.app import dry_run, run_live
from gittinseval.sim.launchers import check_launcher
from tests.conftest import ROOT, code_blocks, page_block, page_files

PAGES = ["README.md", *sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs").glob("*.md")),
         *sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs" / "reproduction").glob("*.md"))]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CONSOLE_SCRIPTS = PYPROJECT["project"]["scripts"]
HYDRA_APPS = {"gittinseval": "config", "gittinseval-live": LIVE_CONFIG_NAME}
FAKE_SERVER = fake_server.__name__

KNOWN_COMMANDS = {
    ("gittinseval", "--help"),  # run by tests/cli/test_errors.py
    ("python", "-m", "pytest", "-m", "slow"),  # the slow tests
    ("ruff", "check", "."),  # run by .ci/run
    ("ray", "start", "--head", "--port=6379"),  # a local Ray head
    ("ray", "stop"),
}
"""Commands of other programs that the pages show, word for word."""
KNOWN_PREFIXES = {("wandb", "sync")}
"""Commands of other programs that the pages show with arguments of their own (W&B's upload of run folders)."""

RECORDED = ["python", "pytest", "ruff", "pip", "wandb", "ray", "make", *CONSOLE_SCRIPTS]
RECORDER = """#!/bin/bash
record="$DOCS_RECORD/${EPOCHREALTIME/./}-$$"
printf '%s\\0' "${0##*/}" "$@" > "$record.argv"
printf '%s' "${PYTHONPATH-}" > "$record.pythonpath"
cat > "$record.stdin"
"""
# A snippet's waits and stops are for real servers; a recorded one has exited.
PRELUDE = "sleep() { :; }\nkill() { :; }\n"
INLINE_COMMAND = re.compile(r"`((?:\.venv/bin/[\w.-]+|gittinseval(?:-\w+)?|make) [^`]+)`")
SHELL_FAILURE = re.compile(r"^bash: line \d+: (.*): (No such file or directory|command not found)$", re.M)


@dataclass(frozen=True)
class Command:
    """One program call of a page: the program's name, its arguments as bash gave them, its stdin and the
    folders of its ``PYTHONPATH``."""

    program: str
    args: tuple[str, ...]
    stdin: str
    pythonpath: tuple[str, ...] = ()

    def __str__(self) -> str:
        return " ".join((self.program, *self.args))


def shell_snippets(page: str) -> list[str]:
    """The page's ``bash`` blocks, then its inline commands (a program and its arguments), each as a script."""
    blocks = [body for language, body in code_blocks(page) if language in ("bash", "sh", "shell")]
    prose = "".join((ROOT / page).read_text().split("```")[0::2])
    return blocks + [" ".join(match.group(1).split()) for match in INLINE_COMMAND.finditer(prose)]


def record_commands(page: str, folder: Path) -> list[list[Command]]:
    """Run the page's snippets in ``folder`` with recorders for its programs; the commands of each snippet."""
    recorders = folder / ".venv" / "bin"
    recorders.mkdir(parents=True)
    for name in RECORDED:
        (recorders / name).write_text(RECORDER)
        (recorders / name).chmod(0o755)
    (folder / "gittinseval").symlink_to(ROOT / "gittinseval")  # bundled files named by relative paths
    for path, text in page_files(page).items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    snippets = []
    for number, snippet in enumerate(shell_snippets(page)):
        records = folder / ".records" / str(number)
        records.mkdir(parents=True)
        env = {**os.environ, "PATH": f"{recorders}:{os.environ['PATH']}", "DOCS_RECORD": str(records)}
        done = subprocess.run(
            ["bash", "-c", f"{PRELUDE}{snippet}\nwait\n"], cwd=folder, env=env,
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        )
        failures = SHELL_FAILURE.findall(done.stderr)
        assert not failures, f"{page}: {failures[0][0]}: {failures[0][1]}, in\n{snippet}"
        commands = []
        for argv in sorted(records.glob("*.argv")):
            program, *args = argv.read_bytes().decode().split("\0")[:-1]
            path = tuple(entry for entry in argv.with_suffix(".pythonpath").read_text().split(":") if entry)
            commands.append(Command(program, tuple(args), argv.with_suffix(".stdin").read_text(), path))
        snippets.append(commands)
    return snippets


@contextmanager
def importable(command: Command) -> Iterator[None]:
    """The folders of the command's ``PYTHONPATH`` on ``sys.path``, as the program would have them."""
    with pytest.MonkeyPatch.context() as patch:
        for entry in reversed(command.pythonpath):
            patch.syspath_prepend(entry)
        yield


class Parsed(Exception):
    """Raised in place of running a program once its argument parser accepted the command line."""


@contextmanager
def parse_only() -> Iterator[None]:
    """Make every ``argparse`` parser raise :class:`Parsed` when the outermost parse succeeds."""
    parse_known = argparse.ArgumentParser.parse_known_args
    depth = 0

    def parse_known_args(self, args=None, namespace=None):
        nonlocal depth
        depth += 1
        try:
            parsed = parse_known(self, args, namespace)
        finally:
            depth -= 1
        if depth:  # a subcommand's parser, called by its parent's
            return parsed
        raise Parsed(parsed)

    def parse_args(self, args=None, namespace=None):
        nonlocal depth
        depth += 1
        try:
            namespace, extras = parse_known(self, args, namespace)
        finally:
            depth -= 1
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        raise Parsed(namespace)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_known_args", parse_known_args)
        patch.setattr(argparse.ArgumentParser, "parse_args", parse_args)
        yield


def check_parses(command: Command, run, argv: list[str]) -> None:
    """``run()`` (a program's ``main``) accepts ``argv`` (``sys.argv`` of ``command``) as its command line."""
    with parse_only(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", argv)
        try:
            run()
        except Parsed:
            return
        except SystemExit as exit_:
            raise AssertionError(f"{command}: refused by its argument parser (exit {exit_.code})") from None
    raise AssertionError(f"{command}: ran without parsing a command line")


def app_overrides(program: str, args: tuple[str, ...], folder: Path) -> tuple[list[str], bool]:
    """The overrides of a Hydra app's command line (``--config-dir`` as a search path) and whether it sweeps."""
    words, multirun = [], False
    args = list(expand_subject_sweep(list(args))) if program == "gittinseval" else list(args)
    while args:
        word = args.pop(0)
        if word in ("-m", "--multirun"):
            multirun = True
        elif word in ("--config-dir", "-cd"):
            words.append(f"hydra.searchpath=[file://{(folder / args.pop(0)).resolve()}]")
        elif word.startswith("-"):
            raise AssertionError(f"{program}: the flag {word} is not one the pages use")
        else:
            words.append(word)
    return words, multirun


@functools.cache
def compose_app(program: str, overrides: tuple[str, ...]) -> None:
    """Compose the config of a Hydra app, once per command line (pages repeat commands)."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        compose(config_name=HYDRA_APPS[program], overrides=list(overrides))


def check_app(command: Command, program: str, args: tuple[str, ...], folder: Path) -> None:
    """The command line ``args`` of the Hydra app ``program`` composes, as its ``main`` would prepare it.

    A sweep composes at the first value of each swept key; the other values of a swept
    config group (``method=a,b``) must be options of the group.
    """
    words, multirun = app_overrides(program, args, folder)
    if program == "gittinseval":
        register_method_aliases(search_path_dirs(words))  # as main() does: outside baselines are methods
        check_launcher(words)
    overrides = OverridesParser.create().parse_overrides(words)
    swept = [override for override in overrides if multirun and override.is_sweep_override()]
    first = [
        f"{o.get_key_element()}={next(iter(o.sweep_string_iterator()))}" if o in swept else o.input_line
        for o in overrides
    ]
    try:
        compose_app(program, tuple(first))
    except Exception as error:  # noqa: BLE001 - any failure to compose is the page's error
        raise AssertionError(f"{command}: does not compose with {first}: {error}") from None
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        for override in swept:
            group = override.key_or_group
            options = loader.get_group_options(group) if "." not in group else []
            missing = set(override.sweep_string_iterator()) - set(options)
            assert not options or not missing, f"{command}: {group} has no option {', '.join(sorted(missing))}"


def check_imports(source: str, where: str) -> None:
    """``source`` compiles, and each module and name it imports exists."""
    tree = ast.parse(source, where)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name) or importlib.util.find_spec(f"{node.module}.{alias.name}"), (
                    f"{where}: {node.module} has no {alias.name}"
                )


def check_python(command: Command, folder: Path) -> None:
    args = command.args
    if args[:2] == ("-m", "gittinseval"):
        check_app(command, "gittinseval", args[2:], folder)
    elif args[:3] == ("-m", "pip", "install"):
        extras = [extra for arg in args[3:] for extra in re.findall(r"^\.\[([\w,-]+)\]$", arg)]
        assert extras, f"{command}: installs something other than this package with extras"
        for extra in ",".join(extras).split(","):
            assert extra in PYPROJECT["project"]["optional-dependencies"], f"{command}: no extra {extra!r}"
    elif args[:1] == ("-m",) and args[1].startswith("gittinseval."):
        module = importlib.import_module(args[1])
        check_parses(command, module.main, [module.__file__, *args[2:]])
    elif args[:1] == ("-",):
        with importable(command):
            check_imports(command.stdin, f"{command} (stdin)")
    elif args and args[0].startswith("scripts/"):
        script = ROOT / args[0]
        assert script.is_file(), f"{command}: no script {args[0]}"
        check_parses(command, lambda: runpy.run_path(str(script), run_name="__main__"), [str(script), *args[1:]])
    else:
        raise AssertionError(f"{command}: not a Python command line the pages are known to use")


def check_make(command: Command) -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    variables = set(re.findall(r"^(\w+) \?=", makefile, re.M))
    assert command.args, f"{command}: no target"
    for arg in command.args:
        if "=" in arg:
            assert arg.split("=")[0] in variables, f"{command}: the Makefile has no variable {arg.split('=')[0]}"
        else:
            assert arg in targets, f"{command}: the Makefile has no target {arg}"


def is_subcommand(command: Command) -> bool:
    """``gittinseval-live export ...`` or ``gittinseval-live cache ...``: a subcommand with a parser of its own, not
    a Hydra command line."""
    return command.program == "gittinseval-live" and command.args[:1] in {(name,) for name in SUBCOMMANDS}


def check_command(command: Command, folder: Path) -> None:
    words = (command.program, *command.args)
    if words in KNOWN_COMMANDS or any(words[: len(prefix)] == prefix for prefix in KNOWN_PREFIXES):
        return
    if command.program in HYDRA_APPS and not is_subcommand(command):
        check_app(command, command.program, command.args, folder)
    elif command.program in CONSOLE_SCRIPTS:
        module, _, function = CONSOLE_SCRIPTS[command.program].partition(":")
        check_parses(command, getattr(importlib.import_module(module), function), list(words))
    elif command.program == "python":
        check_python(command, folder)
    elif command.program == "make":
        check_make(command)
    else:
        raise AssertionError(f"{command}: not one of the known commands")


@pytest.mark.parametrize("page", PAGES)
def test_every_command_of_the_page_composes_parses_or_is_known(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for commands in record_commands(page, tmp_path):
        for command in commands:
            check_command(command, tmp_path)


def test_the_readme_sets_up_with_make_run_and_make_test():
    setup = page_block("README.md", "make run").splitlines()
    assert [line.split("#")[0].strip() for line in setup] == ["make run", "make test"]


@pytest.mark.parametrize("page", PAGES)
def test_every_python_block_compiles_and_its_imports_resolve(page):
    for number, (language, body) in enumerate(code_blocks(page)):
        if language == "python":
            check_imports(body, f"{page}, Python block {number + 1}")


@pytest.mark.parametrize("page", PAGES)
def test_every_yaml_excerpt_is_in_a_config_file(page):
    """A yaml block that is not a file the reader writes is quoted from conf/, as it is there."""
    configs = [path.read_text() for path in (ROOT / "conf").rglob("*.yaml")]
    written = set(page_files(page).values())
    for language, body in code_blocks(page):
        if language == "yaml" and body not in written:
            assert any(body in text for text in configs), f"{page}: a yaml block is not in conf/:\n{body}"


QUOTED_NAME = re.compile(r"`((?:gittinseval|baselines)(?:\.\w+)+)(?:\(\))?`")
QUOTED_PATH = re.compile(r"`((?:gittinseval|baselines|scripts|tests|conf|docs)/[\w./-]*\w)`")


def resolve(name: str) -> object:
    """The module, or the attribute of the longest importable module prefix, that a dotted name names."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:end]))
        except ModuleNotFoundError:
            continue
        for part in parts[end:]:
            found = getattr(found, part)
        return found
    raise ImportError(name)


@pytest.mark.parametrize("page", PAGES)
def test_every_name_and_path_the_page_quotes_exists(page):
    """Inline code naming a module, class or function of the package, or a file of the repository, names one
    that exists (a file the page writes may be named elsewhere, e.g. where it would go in the repository; a
    baseline may be named by its path from before the move into the package, as digests name it)."""
    prose = "".join((ROOT / page).read_text().split("```")[0::2])
    written = {Path(path).name for path in page_files(page)}
    for name in sorted(set(QUOTED_NAME.findall(prose))):
        try:
            resolve(current_target(name))
        except (ImportError, AttributeError) as error:
            raise AssertionError(f"{page}: `{name}` names nothing: {error}") from None
    for path in sorted(set(QUOTED_PATH.findall(prose))):
        assert (ROOT / path).exists() or Path(path).name in written, f"{page}: no file {path}"


@contextmanager
def serving(args: tuple[str, ...], monkeypatch) -> Iterator[fake_server.FakeChatServer]:
    """``python -m gittinseval.live.fake_server ARGS`` in a thread, on a free port rather than the page's."""
    started: queue.Queue = queue.Queue()

    class OnAFreePort(fake_server.FakeChatServer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "port": 0})
            started.put(self)

    monkeypatch.setattr(fake_server, "FakeChatServer", OnAFreePort)
    monkeypatch.setattr(sys, "argv", [fake_server.__file__, *args])
    thread = threading.Thread(target=fake_server.main, daemon=True)
    thread.start()
    server = started.get(timeout=60)
    try:
        yield server
    finally:
        server.close()
        thread.join(timeout=10)


def page_url(server_command: Command) -> str:
    """The base URL that a page's fake server command serves: ``127.0.0.1`` at its ``--port``."""
    args = server_command.args
    port = args[args.index("--port") + 1] if "--port" in args else fake_server.DEFAULT_PORT
    return f"http://127.0.0.1:{port}/v1"


def live_config(command: Command, folder: Path):
    """The config a ``gittinseval-live`` command of a page runs with."""
    overrides, _ = app_overrides("gittinseval-live", command.args, folder)
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name=LIVE_CONFIG_NAME, overrides=overrides)


@pytest.mark.parametrize("page", [page for page in PAGES if f"-m {FAKE_SERVER}" in (ROOT / page).read_text()])
def test_the_live_runs_against_the_fake_server_recommend_the_model_it_answers_for(
    page, tmp_path, monkeypatch, capsys
):
    """Each snippet that starts the fake server runs its ``gittinseval-live`` commands against it, as written
    but for the server's port (a snippet that starts several, one per provider of its arms, against them, each
    arm's ``base_url`` at its own); each recommends an arm of a model that a server answers right for.  Dry runs
    run too, and the snippet's exports of the stores written and its reports of the response cache."""
    monkeypatch.chdir(tmp_path)
    runs = 0
    for commands in record_commands(page, tmp_path):
        servers = [c for c in commands if c.program == "python" and c.args[:2] == ("-m", FAKE_SERVER)]
        live = [c for c in commands if c.program == "gittinseval-live" and not is_subcommand(c)]
        subcommands = [c for c in commands if is_subcommand(c)]
        for command in (c for c in live if "dry_run=true" in c.args):
            with importable(command):
                assert dry_run(live_config(command, tmp_path)).startswith("dry run of task")
        if not servers:
            continue
        good_models = {c.args[c.args.index("--good-model") + 1] for c in servers}
        with ExitStack() as stack:
            # Each server on a free port, each URL of the page moved to its server's.
            moved = {page_url(c): stack.enter_context(serving(c.args[2:], monkeypatch)).base_url for c in servers}
            for command in (c for c in live if "dry_run=true" not in c.args):
                cfg = live_config(command, tmp_path)
                cfg.task.score_fn.base_url = moved.get(cfg.task.score_fn.base_url, next(iter(moved.values())))
                for arm in cfg.task.arms:
                    if "base_url" in arm:
                        arm.base_url = moved[arm.base_url]
                cfg.progress = False
                run_dir = next((w.split("=", 1)[1] for w in command.args if w.startswith("hydra.run.dir=")), "run")
                with importable(command):
                    result = run_live(cfg, tmp_path / run_dir)
                assert result.recommendation is not None, f"{command}: {result.failure}"
                recommended = cfg.task.arms[result.recommendation.arm].model
                assert recommended in good_models, f"{command}: recommended {recommended}; {result.ledger_line()}"
                assert (tmp_path / run_dir / "status.txt").is_file()
                runs += 1
        capsys.readouterr()  # the server's and the runs' output
        for command in subcommands:  # of the stores and the response cache the runs above wrote
            SUBCOMMANDS[command.args[0]](list(command.args[1:]))
            output = capsys.readouterr().out
            if command.args[0] == "export":
                paths = output.split()
                assert len(paths) == 2 and all((tmp_path / path).is_file() for path in paths), f"{command}: {paths}"
            else:
                assert re.search(r"^response cache .*: \d+ repl", output, re.M), f"{command}: {output}"
    assert runs > 0
