"""Where conf/ is (gittinseval/utils/config_dir.py)."""

from pathlib import Path

import gittinseval
from gittinseval.cli import configs
from gittinseval.utils.config_dir import CONFIG_DIR, config_dir


def test_the_config_dir_is_the_repositorys_conf_outside_a_wheel():
    repository = Path(gittinseval.__file__).resolve().parents[1]
    assert config_dir() == CONFIG_DIR == repository / "conf"
    assert (CONFIG_DIR / "config.yaml").is_file() and (CONFIG_DIR / "benchmark").is_dir()
    assert configs.CONFIG_DIR == CONFIG_DIR  # the command lines compose the same tree


def test_an_installed_wheels_conf_comes_first(tmp_path, monkeypatch):
    """A wheel copies conf/ into the package (pyproject.toml's force-include), beside utils/."""
    from gittinseval.utils import config_dir as module

    package = tmp_path / "gittinseval"
    (package / "utils").mkdir(parents=True)
    (package / "conf").mkdir()
    monkeypatch.setattr(module, "__file__", str(package / "utils" / "config_dir.py"))
    assert module.config_dir() == package / "conf"
    (package / "conf").rmdir()
    assert module.config_dir() == tmp_path / "conf"
