"""Shared test helpers."""

from pathlib import Path

import numpy as np
import pytest

from gittinseval.data import Benchmark


def binary_benchmark(n_arms: int, n_examples: int, seed: int, prices=(0.5, 1.0, 3.0)) -> Benchmark:
    """A random binary benchmark: arm k answers each example with probability q_k ~ U(0.2, 0.8)."""
    rng = np.random.default_rng(seed)
    quality = rng.uniform(0.2, 0.8, size=n_arms)
    scores = (rng.uniform(size=(n_arms, n_examples)) < quality[:, None]).astype(float)
    return Benchmark("toy", scores, prices=rng.choice(prices, size=n_arms))


def readme_block(first_line: str) -> str:
    """The fenced code block of README.md whose first line is ``first_line``."""
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    for block in text.split("```")[1::2]:
        body = block.split("\n", 1)[1]
        if body.startswith(first_line):
            return body
    raise AssertionError(f"README.md has no code block starting with {first_line!r}")


@pytest.fixture
def readme_package(tmp_path, monkeypatch):
    """The README's ``my_baselines`` package and policy yaml in ``tmp_path`` (on ``sys.path``)."""
    package = tmp_path / "my_baselines"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "greedy.py").write_text(readme_block("# my_baselines/greedy.py"))
    (tmp_path / "conf" / "policy").mkdir(parents=True)
    (tmp_path / "conf" / "policy" / "greedy.yaml").write_text(readme_block("# conf/policy/greedy.yaml"))
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path
