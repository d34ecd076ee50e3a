"""The results pages show only what the committed stores give: every table on them is included from a
file that `make results` writes, and every figure under docs/figures is shown on some page."""

import re
from pathlib import Path

from gittinseval.results.status import STATUS_DIR
from gittinseval.results.verdict_tables import VERDICTS_DIR
from gittinseval.results.verdicts import read_claims
from tests.results.conftest import REPOSITORY, RESULTS

RESULTS_PAGES = sorted((REPOSITORY / "docs" / "reproduction").glob("*.md"))
SNIPPET = re.compile(r'^--8<-- "([^"]+)"\s*$')
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.png)\)")


def table_problems(text: str, generated: set[str]) -> list[str]:
    """What is wrong with the tables of a results page: a table row typed into the page, or a snippet
    included from a file that is not among ``generated`` (paths relative to the repository)."""
    problems = []
    prose = "".join(text.split("```")[0::2])  # code blocks may show anything
    for number, line in enumerate(prose.splitlines(), 1):
        if line.lstrip().startswith("|"):
            problems.append(f"line {number}: a table typed into the page: {line.strip()[:60]}")
        if line.startswith("--8<--"):
            match = SNIPPET.match(line)
            if match is None or match.group(1) not in generated:
                problems.append(f"line {number}: {line.strip()}: not a table that make results writes")
    return problems


def generated_tables(regenerated) -> set[str]:
    """The tables a fresh regeneration writes, as the repository paths they are committed at."""
    fresh, reports, _ = regenerated
    folders = {report.name: report.out for report in reports} | {STATUS_DIR.name: STATUS_DIR,
                                                                  VERDICTS_DIR.name: VERDICTS_DIR}
    return {str(folders[folder.name] / path.name) for folder in fresh.iterdir() for path in folder.glob("*.md")}


def test_every_table_of_a_results_page_is_a_table_the_stores_regenerate(regenerated):
    generated = generated_tables(regenerated)
    assert RESULTS_PAGES
    for page in RESULTS_PAGES:
        assert table_problems(page.read_text(), generated) == [], page.name
        assert "--8<--" in page.read_text(), f"{page.name}: no table from the stores"


def test_a_typed_table_or_an_include_of_another_file_is_found():
    generated = {"docs/figures/main/gsm8k_standin_unit.md"}
    page = "\n".join([
        "# A page", "", '--8<-- "docs/figures/main/gsm8k_standin_unit.md"', "",
        "| method | regret @ 2 % |", "|---|---|", "| GittinsEval-S | 0.0227 ± 0.0046 |", "",
        '--8<-- "docs/tables/pasted.md"', "", "```", "| a table in a code block is a listing |", "```",
    ])
    problems = table_problems(page, generated)
    assert [problem.split(":")[0] for problem in problems] == ["line 5", "line 6", "line 7", "line 9"]
    assert "docs/tables/pasted.md" in problems[-1]


# A number in the prose of a results page (docs/reproduction/index.md states the rule): digits, or a
# number word from three up, outside code, includes, link targets, dates, section signs, list markers and
# the paper's own words (marked paper: "...").
NUMBER = re.compile(
    r"(?<![\w.])\d+(?:[.,]\d+)*(?=x\b|\W|$)"
    r"|\b(?:three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen"
    r"|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million)\b",
    re.IGNORECASE,
)
EXEMPT = re.compile(
    r"`[^`]*`"  # code: commands, config values, file names, commits
    r'|paper: "[^"]*"'  # the paper's own words
    r"|\]\([^)]*\)"  # link and image targets
    r"|\b(?:19|20)\d\d(?:-\d\d){0,2}\b"  # years and dates
    r"|§\s?\d+(?:\.\d+)*"  # section numbers
    r"|^[ \t]*\d+\.[ \t]",  # ordered-list markers
    re.MULTILINE,
)


def prose_numbers(text: str) -> list[str]:
    """The numbers in the prose of a results page that no include produces and that are not exempt (above); an
    exempt span may run over several lines."""
    lines, in_code = [], False
    for line in text.splitlines():
        fence = line.lstrip().startswith("```")
        in_code ^= fence
        lines.append("" if fence or in_code or line.startswith("--8<--") else line)
    prose = EXEMPT.sub(lambda match: re.sub(r"[^\n]", " ", match.group()), "\n".join(lines))
    return [
        f"line {prose.count(chr(10), 0, match.start()) + 1}: {match.group()!r} in "
        f"{text.splitlines()[prose.count(chr(10), 0, match.start())].strip()[:70]!r}"
        for match in NUMBER.finditer(prose)
    ]


def test_no_number_in_the_prose_of_a_results_page():
    for page in RESULTS_PAGES:
        assert prose_numbers(page.read_text()) == [], f"{page.name}: a number no include produces; put it in a " \
            "table the stores give (make results), in code if it is a setting, or mark the paper's as paper: \"...\""


def test_a_number_in_prose_is_found_and_the_exempt_ones_are_not():
    page = "\n".join([
        "S is below G on 25 of the 57 subjects, sixteen of them hard; UCB-E-LRF is 30× slower and 5x dearer.",
        'The paper: paper: "typically triggers at 1%–10%". Runs with `seed=0` and `lam=1e-4` on GSM8K.',
        "1. Since the fix of 2026-11-24 (§4.2), see [the table](main.md#regret-at-2-percent).",
        "--8<-- \"docs/figures/main/gsm8k_standin_unit.md\"",
        "```bash", "gittinseval -m experiment=paper/main trials=20", "```",
        "A regret of 0.0059 ± 0.0026 at λ = 1e-4, as paper: \"the paper's words may run",
        'over a line, 2 %" says.',
    ])
    found = [problem.split(" in ")[0] for problem in prose_numbers(page)]
    assert found == ["line 1: '25'", "line 1: '57'", "line 1: 'sixteen'", "line 1: '30'", "line 1: '5'",
                     "line 8: '0.0059'", "line 8: '0.0026'", "line 8: '4'"]


def test_every_page_shows_the_verdicts_of_its_claims_and_the_index_the_rule_and_summary():
    claims = read_claims(REPOSITORY / RESULTS)
    assert claims
    index = (REPOSITORY / "docs/reproduction/index.md").read_text().splitlines()
    for name in ("rule.md", "summary.md"):
        assert f'--8<-- "{VERDICTS_DIR / name}"' in index
    for page in {claim.page for claim in claims}:
        lines = (REPOSITORY / "docs/reproduction" / f"{page}.md").read_text().splitlines()
        wanted = [VERDICTS_DIR / f"page_{page}.md"] + [
            VERDICTS_DIR / f"claim_{claim.name}.md" for claim in claims if claim.page == page
        ]
        assert [str(path) for path in wanted if f'--8<-- "{path}"' not in lines] == [], page


def shown_figures() -> set[Path]:
    """Every PNG an image link of a documentation page points at (pages outside the data folders)."""
    docs = REPOSITORY / "docs"
    pages = [page for page in docs.rglob("*.md") if not page.is_relative_to(docs / "figures")]
    return {
        (page.parent / link).resolve() for page in pages for link in IMAGE.findall(page.read_text())
    }


def test_every_figure_is_shown_on_a_page():
    shown = shown_figures()
    unshown = sorted(
        str(path.relative_to(REPOSITORY)) for path in (REPOSITORY / "docs" / "figures").rglob("*.png")
        if path.resolve() not in shown
    )
    assert unshown == [], "figures no page shows: show them on a results page, or delete them (and have their " \
        "report draw fewer: figures in docs/results/reports.yaml)"


def markdown_rows(text: str, first_column: str) -> list[dict[str, str]]:
    """The rows of the markdown table in ``text`` whose header starts with ``first_column``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_column} |"))
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")), strict=True)))
    return rows


def test_the_reproduction_table_is_what_the_stores_hold(regenerated):
    """Every experiment of the paper has a row, and its runs, CPU-hours and data are those of its store."""
    fresh, _, _ = regenerated
    status = (fresh / "status" / "stores.md").read_text()
    stores = {row["store"].strip("`"): row for row in markdown_rows(status, "store")}
    table = markdown_rows((fresh / "status" / "experiments.md").read_text(), "experiment")
    experiments = {row["experiment"].strip("`").removeprefix("paper/"): row for row in table}
    assert len(experiments) == len(table)
    assert sorted(experiments) == sorted(path.stem for path in (REPOSITORY / "conf/experiment/paper").glob("*.yaml"))
    for name, row in experiments.items():
        stored = stores.get(f"docs/results/{name}.parquet")
        if stored is None:
            assert (row["runs stored"], row["run CPU-h"]) == ("not stored", "–"), name
        else:
            assert (row["runs stored"], row["run CPU-h"], row["data"]) == (
                stored["runs"], stored["run CPU-h"], stored["data"]
            ), name
    # A store of an experiment beyond the paper's (conf/experiment/<name>.yaml) is on its own results page.
    beyond = {path.stem for path in (REPOSITORY / "conf/experiment").glob("*.yaml")}
    assert {f"docs/results/{name}.parquet" for name in experiments.keys() | beyond} >= set(stores)


def test_the_reproduction_index_shows_the_table_and_the_readme_links_to_it():
    include = f'--8<-- "{STATUS_DIR / "experiments.md"}"'
    assert include in (REPOSITORY / "docs/reproduction/index.md").read_text().splitlines()
    readme = (REPOSITORY / "README.md").read_text()
    assert "](docs/reproduction/index.md#every-experiment-of-the-paper)" in readme
    assert "## Every experiment of the paper" in (REPOSITORY / "docs/reproduction/index.md").read_text()
    assert not any(line.startswith("| experiment |") for line in readme.splitlines()), "the table is on the index"
    assert len(readme.splitlines()) <= 250
