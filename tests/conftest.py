"""Shared test helpers."""

import contextlib
import hashlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from gittinseval.data import Benchmark

RESPONSE_CACHE_ENV = "GITTINSEVAL_RESPONSE_CACHE"
"""``gittinseval.live.response_cache.CACHE_ENV``, named here so that a session need not import the live package."""
RESPONSE_CACHES = pytest.StashKey[Path]()
"""The folder of the tests' response caches, one file per test."""


def pytest_configure(config):
    config.stash[RESPONSE_CACHES] = Path(tempfile.mkdtemp(prefix="gittinseval-response-caches-"))


def pytest_unconfigure(config):
    if RESPONSE_CACHES in config.stash:
        shutil.rmtree(config.stash[RESPONSE_CACHES], ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Each test gets a response cache of its own (``$GITTINSEVAL_RESPONSE_CACHE``, a new file), from before its
    fixtures are set up, so that the module fixture set up with a module's first test has it too: no test is
    answered from replies another test paid for, and none reads or writes the user's own cache."""
    previous = os.environ.get(RESPONSE_CACHE_ENV)
    name = hashlib.sha256(item.nodeid.encode()).hexdigest()[:16]
    os.environ[RESPONSE_CACHE_ENV] = str(item.config.stash[RESPONSE_CACHES] / f"{name}.sqlite")
    try:
        return (yield)
    finally:
        if previous is None:
            os.environ.pop(RESPONSE_CACHE_ENV, None)
        else:
            os.environ[RESPONSE_CACHE_ENV] = previous


def binary_benchmark(n_arms: int, n_examples: int, seed: int, prices=(0.5, 1.0, 3.0)) -> Benchmark:
    """A random binary benchmark: arm k answers each example with probability q_k ~ U(0.2, 0.8)."""
    rng = np.random.default_rng(seed)
    quality = rng.uniform(0.2, 0.8, size=n_arms)
    scores = (rng.uniform(size=(n_arms, n_examples)) < quality[:, None]).astype(float)
    return Benchmark("toy", scores, prices=rng.choice(prices, size=n_arms))


class _Built(Exception):
    """Raised in place of a live run's evaluation, once its task and settings are built."""


def built_live_run(cfg, output_dir):
    """``(task, config)``: the :class:`~gittinseval.live.LiveTask` and :class:`~gittinseval.live.LiveConfig` that
    ``run_live(cfg, output_dir)`` builds from the composed config and would evaluate (it evaluates nothing here)."""
    from unittest import mock

    built = []

    async def record(task, config):
        built.extend((task, config))
        raise _Built

    with mock.patch("gittinseval.live.app.evaluate_async", record), pytest.raises(_Built):
        from gittinseval.live.app import run_live

        run_live(cfg, output_dir)
    return tuple(built)


ROOT = Path(__file__).resolve().parent.parent
FILE_HEADER = re.compile(r"# ([\w./-]+\.\w+)$")


def cell_benchmark(seed=0, n_arms=4, n_examples=30) -> Benchmark:
    """A random binary benchmark whose cells each have their own cost (log-normal around 1)."""
    rng = np.random.default_rng(seed)
    scores = (rng.uniform(size=(n_arms, n_examples)) < 0.6).astype(float)
    return Benchmark("cells", scores, cell_costs=rng.lognormal(0.0, 1.0, size=(n_arms, n_examples)))


def code_blocks(page: str) -> list[tuple[str, str]]:
    """``(language, body)`` of each fenced code block of ``page`` (``README.md`` or ``docs/<name>.md``)."""
    text = (ROOT / page).read_text()
    blocks = []
    for block in text.split("```")[1::2]:
        language, _, body = block.partition("\n")
        blocks.append((language.strip(), body))
    return blocks


def page_block(page: str, first_line: str) -> str:
    """The fenced code block of ``page`` (``README.md`` or ``docs/<name>.md``) whose first line is ``first_line``."""
    for _, body in code_blocks(page):
        if body.startswith(first_line):
            return body
    raise AssertionError(f"{page} has no code block starting with {first_line!r}")


def page_files(page: str) -> dict[str, str]:
    """The files a reader of ``page`` writes: each Python or yaml block whose first line is ``# <path>``."""
    files = {}
    for language, body in code_blocks(page):
        header = FILE_HEADER.match(body.split("\n", 1)[0])
        if language in ("python", "yaml") and header:
            files[header.group(1)] = body
    return files


@pytest.fixture
def example_baseline(tmp_path, monkeypatch):
    """The files of the "Adding a baseline" page (``my_baselines/greedy.py``, ``my_conf/policy/greedy.yaml``),
    written to ``tmp_path`` as the page shows them, with ``tmp_path`` on ``sys.path``."""
    for path, text in page_files("docs/baselines.md").items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _is_pytests(handler: logging.Handler) -> bool:
    """A handler of pytest's log capture, which pytest itself adds and removes around each phase of a test."""
    return type(handler).__module__.startswith("_pytest")


@contextlib.contextmanager
def logging_as_it_was() -> Iterator[None]:
    """Leave the loggers found on entry as they were: their handlers, levels and flags.

    A Hydra app run in-process (``main()`` under a patched ``sys.argv``) configures logging, and
    its console handler on the root logger writes to the stream the test captured, closed when
    the test ends: every later record, of any test, was then a ``--- Logging error ---`` report
    ending in ``Arguments: (...)`` on that test's stderr, in place of its own last line.  pytest's
    own capture handlers are left to pytest.  Loggers made meanwhile are left as they are.
    """
    loggers = [logging.root, *(logger for logger in logging.root.manager.loggerDict.values()
                                if isinstance(logger, logging.Logger))]
    before = {logger: ([h for h in logger.handlers if not _is_pytests(h)], logger.level, logger.propagate,
                       logger.disabled) for logger in loggers}
    try:
        yield
    finally:
        for logger, (handlers, level, propagate, disabled) in before.items():
            logger.handlers[:] = handlers + [h for h in logger.handlers if _is_pytests(h)]
            logger.setLevel(level)
            logger.propagate, logger.disabled = propagate, disabled


@pytest.fixture(autouse=True)
def _logging_as_it_was():
    """Each test leaves the loggers it found as it found them (:func:`logging_as_it_was`)."""
    with logging_as_it_was():
        yield


@pytest.fixture
def hydra_choices():
    """Compose the live config as its Hydra app does, with the app's ``hydra:`` runtime choices set (so ``store``'s
    interpolations resolve), and leave no Hydra config behind."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from gittinseval.cli.live import LIVE_CONFIG_NAME
    from gittinseval.utils.config_dir import CONFIG_DIR

    def compose_app(*overrides):
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose(config_name=LIVE_CONFIG_NAME, overrides=list(overrides), return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        with open_dict(cfg):
            del cfg["hydra"]
        return cfg

    yield compose_app
    HydraConfig.instance().cfg = None
