"""The verdicts as the pages show them (gittinseval.results.verdict_tables): the rule, the summary, a page's table and
a claim's evidence, written from claims.yaml and the runs."""

from pathlib import Path

from gittinseval.results.manifest import StoreReport
from gittinseval.results.verdict_tables import evidence_cells, page_cells, rule_markdown, summary_cells, write_verdicts
from gittinseval.results.verdicts import SE_MULTIPLE, VERDICTS, judge_all, read_claims
from tests.results.test_panels import row

CLAIMS = """
claims:
  - name: earliest
    claim: S below U early
    paper: "S reaches near-zero regret earliest"
    page: main
    note: "earliest read as lower at 1 and 2 %"
    direction: lower
    methods: [S]
    versus: [U]
    percents: [1, 2]
    reports: [toy]
  - name: stops
    claim: S stops within 1-10 %
    paper: null
    page: stopping
    measure: stop_within
    window: [1, 10]
    direction: higher
    methods: [S]
    level: 0.5
    reports: [toy, later]
"""


def runs():
    rows = []
    for seed, gap in enumerate([0.02, 0.03, 0.025]):
        rows += [row("toy", "S", [1, 2], [0.05, 0.0], seed=seed, stop=2.0),
                 row("toy", "U", [1, 2], [0.05 + gap, 0.0], seed=seed),
                 row("piqa_standin/m1", "S", [1, 2], [0.05, 0.01], seed=seed, stand_in=True),
                 row("piqa_standin/m1", "U", [1, 2], [0.05 + gap, 0.01 - gap / 2], seed=seed, stand_in=True)]
    return rows


def test_the_rule_states_the_se_multiple_and_every_verdict():
    text = rule_markdown()
    assert f"more than {SE_MULTIPLE:g} SE" in text and "`docs/results/claims.yaml`" in text
    assert all(f"**{name}**" in text for name in VERDICTS)


def test_the_tables_of_the_verdicts_are_written_from_the_claims_and_the_runs(tmp_path):
    (tmp_path / "claims.yaml").write_text(CLAIMS)
    toy = StoreReport("toy", tmp_path / "toy.parquet", tmp_path / "toy")
    out = tmp_path / "verdicts"
    written = write_verdicts(tmp_path, [toy], out, runs={toy.store: runs()})
    assert sorted(path.name for path in written) == [
        "claim_earliest.md", "claim_stops.md", "page_main.md", "page_stopping.md", "rule.md", "summary.md"
    ]
    summary = (out / "summary.md").read_text().splitlines()
    # S below U at 1 % on both (real and stand-in) and level at 2 % on the real panel, against at 2 % on PIQA.
    assert summary[2] == "| [S below U early](main.md) | **partial** | 1 hold, 1 level, 0 against | " \
                         "1 hold, 0 level, 1 against |"
    assert "**partial** (no store yet: later) | 1 hold, 0 level, 0 against | 0 hold, 0 level, 1 against" in summary[3]
    page = (out / "page_main.md").read_text()
    assert "“S reaches near-zero regret earliest”" in page and "Read: earliest read as lower at 1 and 2 %." in page
    assert "regret at 1, 2 % of the cost: S lower than U; toy." in page
    assert "beyond the paper" in (out / "page_stopping.md").read_text()
    evidence = (out / "claim_earliest.md").read_text()
    assert evidence.startswith("**S below U early**: **partial**.\n\n| panel | data | comparison | Δ regret @ 1 % |")
    assert "| toy (unit cost) | real | S − U | -0.0250 ± 0.0029 holds | 0.0000 ± 0.0000 level |" in evidence
    stops = (out / "claim_stops.md").read_text()
    assert "| toy (unit cost) | real | S − level 0.5 | 0.500 ± 0.000 holds |" in stops
    assert "| piqa_standin (unit cost) [stand-in data] | stand-in | S − level 0.5 | -0.500 ± 0.000 against |" in stops


def test_a_claim_whose_store_is_not_made_yet_says_so_and_no_claims_write_nothing(tmp_path):
    (tmp_path / "claims.yaml").write_text(CLAIMS.replace("reports: [toy, later]", "reports: [later]"))
    toy = StoreReport("toy", tmp_path / "toy.parquet", tmp_path / "toy")
    write_verdicts(tmp_path, [toy], tmp_path / "out", runs={toy.store: runs()})
    assert (tmp_path / "out" / "claim_stops.md").read_text().endswith("| store |\n|---|\n| no store yet: later |\n")
    assert "**not judged: no store yet**" in (tmp_path / "out" / "summary.md").read_text()
    assert write_verdicts(tmp_path / "none", [toy], tmp_path / "nothing") == []
    assert not (tmp_path / "nothing").exists()


def test_the_cells_of_one_judgement(tmp_path):
    (tmp_path / "claims.yaml").write_text(CLAIMS)
    toy = StoreReport("toy", Path("toy.parquet"), Path("toy"))
    earliest, _ = judge_all(read_claims(tmp_path), [toy], {toy.store: runs()})
    (first, second) = evidence_cells(earliest)
    assert list(first) == ["panel", "data", "comparison", "Δ regret @ 1 %", "Δ regret @ 2 %"]
    assert (first["data"], second["data"]) == ("real", "stand-in")
    (page,) = page_cells([earliest])
    assert (page["real data"], page["verdict"]) == ("1 hold, 1 level, 0 against", "**partial**")
    assert summary_cells([earliest])[0]["stand-in data"] == "1 hold, 0 level, 1 against"
