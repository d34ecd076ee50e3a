"""The Hydra config tree: where ``conf/`` is, and what is registered beside its files.

Importing this module completes the tree, as Hydra's own ConfigStore pattern
does at import time.  It must: Hydra's launchers compose each job and resolve
its folder in worker processes that import only the task function's module
(which imports this one), so nothing called from ``main`` would reach them.

- The ``path_component`` resolver names a run's folder after its swept values
  (``conf/config.yaml``); a value that is a path must not nest folders.
- The ``config_groups`` resolver lists the config groups and their options in
  ``--help`` (``conf/hydra/help/``), so that a new yaml file is listed with no edit.
- The ``method`` group: every ``policy/<name>.yaml`` without a file of its own in
  ``method/`` is also the method ``<name>`` (``method=<name>`` sets
  ``policy=<name>``), so a baseline is one module and one policy yaml.  Files in
  ``conf/method/`` are the methods that set more than the policy (GittinsEval-G,
  -S, -EB also choose the prior).  ``conf/`` is registered at import; the folders
  a command line adds with ``hydra.searchpath=[...]`` are registered by the app's
  ``main`` (:func:`register_method_aliases`) before Hydra composes anything, and
  reach the launchers' workers with the rest of Hydra's ConfigStore (the joblib,
  Ray and Submitit launchers hand their workers the singletons' state).
"""

from __future__ import annotations

import functools
import importlib.resources
import sys
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path

from hydra import initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException
from omegaconf import OmegaConf

from gittinseval.utils.config_dir import CONFIG_DIR

__all__ = ["CONFIG_DIR", "config_groups_help", "group_options", "register_method_aliases", "search_path_dirs"]


def register_method_aliases(config_dirs: Iterable[Path]) -> list[str]:
    """Make each ``<dir>/policy/<name>.yaml`` without a ``<dir>/method/<name>.yaml`` the method ``<name>``.

    Returns the names registered, in order.  A folder without ``policy/`` adds none.
    """
    store = ConfigStore.instance()
    registered = []
    for config_dir in config_dirs:
        written = {path.stem for path in (config_dir / "method").glob("*.yaml")}
        for path in sorted((config_dir / "policy").glob("*.yaml")):
            if path.stem not in written:
                node = {"defaults": [{"override /policy": path.stem}]}
                store.store(group="method", name=path.stem, node=node, package="_global_")
                registered.append(path.stem)
    return registered


def search_path_dirs(overrides: Sequence[str]) -> list[Path]:
    """The folders that ``hydra.searchpath=[...]`` among command-line ``overrides`` adds.

    ``file://`` entries are paths (relative ones to the working directory), ``pkg://``
    entries folders inside installed packages; other words (flags, ``-m``) are skipped.
    An override Hydra cannot parse is left for Hydra to report.
    """
    words = [word for word in overrides if word.split("=", 1)[0].lstrip("+~") == "hydra.searchpath"]
    try:
        parsed = OverridesParser.create().parse_overrides(words)
    except OverrideParseException:
        return []
    folders = []
    for override in parsed:
        entries = override.value()
        for entry in entries if isinstance(entries, list) else [entries]:
            scheme, _, location = str(entry).partition("://")
            if scheme == "file":
                folders.append(Path(location))
            elif scheme == "pkg":
                package, _, inner = location.replace("/", ".").partition(".")
                folders.append(Path(str(importlib.resources.files(package))).joinpath(*inner.split(".")))
    return folders


def _group_options(group: str, overrides: list[str]) -> list[str]:
    """The options of ``group``, those of its subgroups as ``sub/option`` (e.g. ``paper/main``)."""
    loader = GlobalHydra.instance().config_loader()
    options = loader.get_group_options(group, config_name="config", overrides=overrides)
    for subgroup in loader.list_groups(group):
        options += [f"{subgroup}/{option}" for option in _group_options(f"{group}/{subgroup}", overrides)]
    return options


def group_options(group: str, overrides: Sequence[str] = ()) -> list[str]:
    """Every option of the config group ``group``, those of its subgroups as ``sub/option`` (``paper/main``).

    Read from ``conf/`` and the folders that ``hydra.searchpath=[...]`` among the command
    line's ``overrides`` adds; outside a composition (an error message after Hydra gave
    up) Hydra's config repository is opened here.
    """
    search_path = list(_search_path_overrides(overrides))
    if GlobalHydra.instance().is_initialized():
        return _group_options(group, search_path)
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return _group_options(group, search_path)


def _search_path_overrides(words: Sequence[str]) -> tuple[str, ...]:
    """The ``hydra.searchpath=[...]`` overrides among command-line ``words``."""
    return tuple(word for word in words if word.split("=", 1)[0] == "hydra.searchpath")


def config_groups_help() -> str:
    """Each config group with its options, one wrapped paragraph a group (the ``--help`` listing).

    Read from Hydra's config repository, with the command line's ``hydra.searchpath``
    folders, so that every yaml file on the search path is listed and none by hand.
    Hydra resolves the help template whenever it composes a config, not only for
    ``--help``: a command line without ``--help`` gets a pointer instead, and the
    listing is made once per search path and process.
    """
    if "--help" not in sys.argv[1:]:
        return "  (listed by gittinseval --help)"
    loader = GlobalHydra.instance().config_loader()
    overrides = _search_path_overrides(sys.argv[1:])
    search_path = tuple(str(element) for element in loader.get_search_path().get_path())
    return _listing(search_path, overrides)


@functools.lru_cache(maxsize=16)
def _listing(search_path: tuple[str, ...], overrides: tuple[str, ...]) -> str:
    """The listing of :func:`config_groups_help` for one search path (the key of the cache)."""
    loader = GlobalHydra.instance().config_loader()
    overrides = list(overrides)
    paragraphs = []
    groups = sorted(set(loader.list_groups("")) - {"hydra"})
    # The names' column is as wide as the longest name and a space, so a name never runs into its options.
    column = max(map(len, groups), default=0) + 1
    for group in groups:
        options = ", ".join(_group_options(group, overrides))
        paragraphs.append(
            textwrap.fill(
                options, width=86, initial_indent=f"  {group:<{column}}", subsequent_indent=" " * (column + 2)
            )
        )
    return "\n".join(paragraphs)


OmegaConf.register_new_resolver("config_groups", config_groups_help, replace=True)
OmegaConf.register_new_resolver("path_component", lambda text: str(text).replace("/", "_"), replace=True)
register_method_aliases([CONFIG_DIR])
