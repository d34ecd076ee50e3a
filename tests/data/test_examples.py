"""The toy example matrix and prices bundled for ``benchmark=matrix`` (gittinseval/data/files/examples)."""

import csv
import shlex

import pytest
from hydra import compose, initialize_config_dir

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.data._files import data_file
from gittinseval.sim.experiment import simulate_config
from tests.conftest import ROOT, code_blocks

EXAMPLES = "gittinseval/data/files/examples/"


def example_commands() -> list[tuple[str, list[str]]]:
    """``(page, overrides)`` of each ``gittinseval`` command of README.md and docs/*.md that runs the example."""
    pages = ["README.md", *sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs").glob("*.md"))]
    commands = []
    for page in pages:
        for language, body in code_blocks(page):
            lines = body.replace("\\\n", " ").splitlines() if language == "bash" else []
            for line in lines:
                if line.startswith(".venv/bin/gittinseval ") and EXAMPLES in line:
                    commands.append((page, shlex.split(line, comments=True)[1:]))
    return commands


def test_the_tutorial_runs_the_example():
    assert "docs/tutorial.md" in {page for page, _ in example_commands()}


@pytest.mark.parametrize(("page", "overrides"), example_commands())
def test_the_example_command_runs_as_the_page_shows_it(page, overrides, monkeypatch):
    monkeypatch.chdir(ROOT)  # the pages' commands run from the repository's top folder
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[word for word in overrides if not word.startswith("hydra.")])
    summary = simulate_config(cfg).summary
    assert summary["cost_mode"] == "aware" and summary["n_arms"] == 8 and summary["n_steps"] > 0


def test_the_example_prices_follow_the_matrix_rows():
    with open(data_file("examples/scores.csv"), newline="") as scores, open(data_file("examples/prices.csv")) as prices:
        score_rows, price_rows = list(csv.DictReader(scores)), list(csv.DictReader(prices))
    assert [row["arm"] for row in price_rows] == [row["arm"] for row in score_rows]
    assert all(float(row["usd_per_1m_tokens"]) > 0 for row in price_rows)
