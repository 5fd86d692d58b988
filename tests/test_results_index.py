"""results/ stays indexed: every file in it has its line in results/README.md, every `results/<name>`
that the documents and the code cite is there (a `*` in a cited name matches any text, at least one
file), and each line's "cited in" column is what bench/results_index.py writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.results_index import CITATION, INDEX_ENTRY, NOWHERE, cited_in, citing_files, updated_index
from reference.problem import ROOT

RESULTS = ROOT / "results"
INDEX = RESULTS / "README.md"


def citations(root: Path) -> list[tuple[str, str]]:
    """(`file:line`, cited name) for every `results/<name>` in the citing files."""
    found = []
    for path in citing_files(root):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [(f"{path.relative_to(root)}:{number}", name) for name in CITATION.findall(line)]
    return found


def missing_citations(root: Path) -> list[str]:
    results = root / "results"
    return [f"{where}: results/{name}" for where, name in citations(root) if not any(results.glob(name))]


def unindexed_files(results: Path) -> list[str]:
    indexed = set(INDEX_ENTRY.findall((results / "README.md").read_text(encoding="utf-8")))
    return sorted(p.name for p in results.iterdir() if p.name != "README.md" and p.name not in indexed)


def stale_index_entries(results: Path) -> list[str]:
    indexed = INDEX_ENTRY.findall((results / "README.md").read_text(encoding="utf-8"))
    return sorted(name for name in indexed if not (results / name).exists())


def test_every_results_file_is_indexed():
    assert unindexed_files(RESULTS) == [], "add a line to results/README.md for each"


def test_every_index_entry_is_a_file():
    assert stale_index_entries(RESULTS) == [], "remove these lines from results/README.md"


def test_every_cited_results_file_exists():
    assert citations(ROOT), "no citation found: the pattern or the citing files are wrong"
    assert missing_citations(ROOT) == []


def test_every_results_file_is_cited():
    """results/ keeps only what the documents and the code cite."""
    cells = cited_in(ROOT)
    assert [name for name, cell in cells.items() if cell == NOWHERE] == [], "remove these from results/"


def test_the_cited_in_column_is_current():
    index = INDEX.read_text(encoding="utf-8")
    assert updated_index(index, cited_in(ROOT)) == index, "run python bench/results_index.py"


@pytest.fixture
def small_tree(tmp_path: Path) -> Path:
    """A repository with one indexed result, cited once by name and once by a pattern."""
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "eval_abc1234.json").write_text("{}\n")
    (tmp_path / "results" / "README.md").write_text("| file |\n|---|\n| `eval_abc1234.json` | abc1234 |\n")
    (tmp_path / "CHANGELOG.md").write_text("(`results/eval_abc1234.json`, `results/eval_*.json`)\n")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "tool.py").write_text('"""Writes results/eval_<commit>.json."""\n')
    return tmp_path


def test_the_checks_pass_on_a_consistent_tree(small_tree):
    assert [name for _, name in citations(small_tree)] == ["eval_abc1234.json", "eval_*.json"]
    assert (missing_citations(small_tree), unindexed_files(small_tree / "results")) == ([], [])
    assert stale_index_entries(small_tree / "results") == []


def test_the_checks_catch_an_unindexed_file_a_dead_citation_and_a_stale_entry(small_tree):
    (small_tree / "results" / "stages_abc1234.json").write_text("{}\n")
    (small_tree / "bench" / "tool.py").write_text('"""See results/gone_abc1234.json and results/gone_*.json."""\n')
    (small_tree / "results" / "eval_abc1234.json").rename(small_tree / "results" / "eval_def5678.json")
    assert unindexed_files(small_tree / "results") == ["eval_def5678.json", "stages_abc1234.json"]
    assert missing_citations(small_tree) == [
        "CHANGELOG.md:1: results/eval_abc1234.json",
        "bench/tool.py:1: results/gone_abc1234.json",
        "bench/tool.py:1: results/gone_*.json",
    ]
    assert stale_index_entries(small_tree / "results") == ["eval_abc1234.json"]


def test_the_cited_in_column_names_documents_with_headings_and_sources_by_path(small_tree):
    (small_tree / "results" / "README.md").write_text(
        "| file |\n|---|\n| `eval_abc1234.json` | abc1234 | run | old |\n"
        "| `ptx_abc1234.json` | abc1234 | beside `eval_abc1234.json` | old |\n")
    (small_tree / "results" / "ptx_abc1234.json").write_text("{}\n")
    (small_tree / "CHANGELOG.md").write_text(
        "# Log\n## v2 (abc1234): faster\nSee `results/eval_abc1234.json`.\n```bash\n# not a heading\n```\n"
        "## Session 3 — more\n(`eval_abc1234.json` again; `results/ptx_*.json`)\n")
    cells = cited_in(small_tree)
    assert cells == {"eval_abc1234.json": "CHANGELOG.md (v2; Session 3); results/README.md (ptx_abc1234.json)",
                     "ptx_abc1234.json": "CHANGELOG.md (Session 3)"}
    (small_tree / "CHANGELOG.md").write_text("nothing\n")
    assert cited_in(small_tree)["ptx_abc1234.json"] == NOWHERE
    index = (small_tree / "results" / "README.md").read_text()
    assert updated_index(index, cited_in(small_tree)).splitlines()[2] == \
        "| `eval_abc1234.json` | abc1234 | run | results/README.md (ptx_abc1234.json) |"
