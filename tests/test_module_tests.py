"""Every module of the package has a test file of its own name (the rule: scripts/untested_modules.py)."""

from pathlib import Path

from untested_modules import holds_logic, needed_test_file, untested_modules


def test_every_module_has_a_test_file_of_its_own_name():
    missing = untested_modules()
    listed = "\n".join(f"  {module} (write {test_file})" for module, test_file in missing)
    assert not missing, f"{len(missing)} module(s) without a test file of their own name:\n{listed}"


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_the_rule_mirrors_the_package_and_exempts_packages_that_only_gather_names(tmp_path):
    write(tmp_path, {
        "gittinseval/__init__.py": '"""Docs."""\nfrom gittinseval.core.a import A\n__all__ = ["A"]\n',
        "gittinseval/__main__.py": "from gittinseval.cli import main\n\nif __name__ == \"__main__\":\n    main()\n",
        "gittinseval/core/__init__.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import x\n",
        "gittinseval/core/a.py": "class A: ...\n",
        "gittinseval/core/_private.py": "X = 1\n",
        "gittinseval/core/roots/__init__.py": "def schedule():\n    return 1\n",
        "gittinseval/core/roots/chain.py": "",
        "gittinseval/lrf/__init__.py": "from .p import P\nfor _c in (P,):\n    _c.__module__ = __name__\n",
        "hydra_plugins/sweeper/__init__.py": "",
        "hydra_plugins/sweeper/skip.py": "",
        "tests/core/test_a.py": "",
        "tests/core/roots/test_init.py": "",
        "tests/hydra_plugins/test_skip.py": "",  # the wrong folder: hydra_plugins keeps its whole path
    })
    assert [(str(module), str(test)) for module, test in untested_modules(tmp_path)] == [
        ("gittinseval/core/_private.py", "tests/core/test_private.py"),
        ("gittinseval/core/roots/chain.py", "tests/core/roots/test_chain.py"),
        ("gittinseval/lrf/__init__.py", "tests/lrf/test_init.py"),  # a loop is logic
        ("hydra_plugins/sweeper/skip.py", "tests/hydra_plugins/sweeper/test_skip.py"),
    ]
    assert needed_test_file(Path("gittinseval/__init__.py"), tmp_path) is None
    assert not holds_logic(tmp_path / "gittinseval/__main__.py")
    assert holds_logic(tmp_path / "gittinseval/lrf/__init__.py")
    write(tmp_path, {"gittinseval/__main__.py": "import sys\nsys.exit(0)\n"})  # a call is logic too
    assert needed_test_file(Path("gittinseval/__main__.py"), tmp_path) == Path("tests/test_main.py")

