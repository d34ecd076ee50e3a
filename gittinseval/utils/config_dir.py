"""Where the Hydra config tree ``conf/`` is: inside an installed wheel (``gittinseval/conf``, which the
wheel's build copies there), else at the repository's top.

The command lines compose it (:mod:`gittinseval.cli.configs`), and the benchmark catalog
(:mod:`gittinseval.data.catalog`) lists the options of its ``benchmark`` group; both read it from here.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CONFIG_DIR", "config_dir"]


def config_dir() -> Path:
    """``conf/`` inside an installed wheel, else the repository's top-level ``conf/``."""
    package = Path(__file__).resolve().parents[1]
    packaged = package / "conf"
    return packaged if packaged.is_dir() else package.parent / "conf"


CONFIG_DIR = config_dir()
"""The config tree of this installation (:func:`config_dir`)."""
