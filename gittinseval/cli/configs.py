"""The Hydra config tree: where ``conf/`` is, and what is registered beside its files.

Importing this module completes the tree, as Hydra's own ConfigStore pattern
does at import time.  It must: Hydra's launchers compose each job and resolve
its folder in worker processes that import only the task function's module
(which imports this one), so nothing called from ``main`` would reach them.

- The ``path_component`` resolver names a run's folder after its swept values
  (``conf/config.yaml``); a value that is a path must not nest folders.
- The ``method`` group: every ``conf/policy/<name>.yaml`` without a file of its
  own in ``conf/method/`` is also the method ``<name>`` (``method=<name>`` sets
  ``policy=<name>``), so a baseline is one module and one policy yaml.  Files in
  ``conf/method/`` are the methods that set more than the policy (GittinsEval-G,
  -S, -EB also choose the prior).
"""

from __future__ import annotations

from pathlib import Path

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

__all__ = ["CONFIG_DIR"]


def _config_dir() -> Path:
    """``conf/`` inside an installed wheel, else the repository's top-level ``conf/``."""
    packaged = Path(__file__).resolve().parents[1] / "conf"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "conf"


CONFIG_DIR = _config_dir()


def _register_method_aliases(config_dir: Path) -> None:
    store = ConfigStore.instance()
    written = {path.stem for path in (config_dir / "method").glob("*.yaml")}
    for path in sorted((config_dir / "policy").glob("*.yaml")):
        if path.stem not in written:
            node = {"defaults": [{"override /policy": path.stem}]}
            store.store(group="method", name=path.stem, node=node, package="_global_")


OmegaConf.register_new_resolver("path_component", lambda text: str(text).replace("/", "_"), replace=True)
_register_method_aliases(CONFIG_DIR)
