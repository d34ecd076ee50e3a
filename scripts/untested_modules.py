"""List the modules of ``gittinseval/`` and ``hydra_plugins/`` that have no test file of their own name.

    python scripts/untested_modules.py

Prints each such module's path and the test file it lacks, then their count; exits 0.
``tests/test_module_tests.py`` runs the same listing and fails naming them.

The rule.  The tests mirror the package, with ``gittinseval/`` mapped to ``tests/`` and any
other top-level package (``hydra_plugins/``) kept as a folder of ``tests/``:

- ``gittinseval/<path>/<module>.py``   needs ``tests/<path>/test_<module>.py``;
- ``hydra_plugins/<path>/<module>.py`` needs ``tests/hydra_plugins/<path>/test_<module>.py``.

Leading underscores of a private module's name are dropped (``data/_files.py`` needs
``tests/data/test_files.py``).  A package's ``__init__.py`` or ``__main__.py`` is exempt when
it is glue: a docstring, imports, assignments (``__all__``, tables of names), ``del``, and
``if TYPE_CHECKING:`` / ``if __name__ == "__main__":`` blocks.  Any other top-level statement
(a ``def``, a ``class``, a loop, a ``try``, a call, any other ``if`` or ``with``) is logic, and
the module then needs ``tests/<path>/test_init.py`` (or ``test_main.py``), e.g.
``gittinseval/core/roots/__init__.py`` (``root_schedule``) needs ``tests/core/roots/test_init.py``
and ``gittinseval/baselines/lrf/__init__.py`` (its loop renaming the classes' module) needs
``tests/baselines/lrf/test_init.py``.

A test file of the right name counts whatever it holds; whether it tests the module well is
for review, not for this script.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Top-level packages scanned, and the folder of tests/ their tests mirror ("" for tests/ itself).
PACKAGES = {"gittinseval": "", "hydra_plugins": "hydra_plugins"}
SPECIAL = ("__init__.py", "__main__.py")


def _is_glue(statement: ast.stmt) -> bool:
    """Whether a top-level statement of an ``__init__``/``__main__`` is glue rather than logic."""
    if isinstance(statement, ast.Import | ast.ImportFrom | ast.Assign | ast.AnnAssign | ast.Delete):
        return True
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return True  # a docstring
    if isinstance(statement, ast.If):
        test = ast.unparse(statement.test)
        return test in ("TYPE_CHECKING", "typing.TYPE_CHECKING") or test.replace("'", '"') == '__name__ == "__main__"'
    return False


def holds_logic(path: Path) -> bool:
    """Whether the module at ``path`` has a statement other than glue (see the module's docstring)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return not all(_is_glue(statement) for statement in tree.body)


def needed_test_file(module: Path, root: Path = ROOT) -> Path | None:
    """The test file (relative to ``root``) that ``module`` (relative to ``root``) needs, or None if exempt."""
    top, *folders, name = module.parts
    if name in SPECIAL and not holds_logic(root / module):
        return None
    stem = name.removesuffix(".py").strip("_") if name in SPECIAL else name.removesuffix(".py").lstrip("_")
    mirror = PACKAGES[top]
    return Path("tests", *([mirror] if mirror else []), *folders, f"test_{stem}.py")


def untested_modules(root: Path = ROOT) -> list[tuple[Path, Path]]:
    """``(module, missing test file)`` for every module under ``root`` without its test file, sorted.

    Paths are relative to ``root`` (the repository's top folder).
    """
    missing = []
    for package in PACKAGES:
        for module in sorted((root / package).rglob("*.py")):
            relative = module.relative_to(root)
            if "__pycache__" in relative.parts:
                continue
            test_file = needed_test_file(relative, root)
            if test_file is not None and not (root / test_file).is_file():
                missing.append((relative, test_file))
    return missing


def main() -> int:
    missing = untested_modules()
    for module, test_file in missing:
        print(f"{module}  (no {test_file})")
    print(f"{len(missing)} module(s) without a test file of their own name")
    return 0


if __name__ == "__main__":
    sys.exit(main())
