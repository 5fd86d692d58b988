"""The repository stands alone: no tracked file points outside the clone, and every citation of
`docs/evaluator.md` names a section that the page has.

Code and docs cite the evaluator's behaviour by section (`docs/evaluator.md §2.9`, `docs/evaluator.md
section 1.3`, `docs/evaluator.md 2.2 step 8`); a renumbered or missing heading would leave them pointing
nowhere. Files outside the repository (a sibling `shared` folder of the developers' machine) do not
exist in a user's clone, so no tracked file may refer to one.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from reference.problem import ROOT

EVALUATOR_DOC = "docs/evaluator.md"
OUTSIDE = "/".join(("..", "shared"))  # written in two parts so that this file does not contain it

_NUMBER = r"\d+(?:\.\d+)*"
_SECTION = rf"(?:§\s*)?{_NUMBER}|Appendix [A-Z]"
# one section, or a list / range of them: "§2.2-2.9", "1.3, 2.1, 3.11", "3.11 and 5", "§2.2/§2.3"
_SECTIONS = rf"(?:{_SECTION})(?:\s*(?:-|–|,|/|and)\s*(?:{_SECTION}))*"
CITATION = re.compile(rf"{re.escape(EVALUATOR_DOC)},?\s+(?:sections?\s+)?(?P<sections>{_SECTIONS})")
SELF_CITATION = re.compile(rf"§\s*(?P<sections>{_SECTIONS})")
HEADING = re.compile(rf"^#+\s+(?:§\s*)?(?P<number>{_NUMBER}|Appendix [A-Z])\b", re.M)


def tracked_text_files() -> dict[str, str]:
    """Path -> text of every tracked file in the working tree, binary files left out (a NUL byte in
    the first 8000 bytes, git's own test)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    # safe.directory: a checkout owned by another user (a mounted workspace in a container) is still read
    listing = subprocess.run(["git", "-c", "safe.directory=*", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    texts = {}
    for name in map(os.fsdecode, filter(None, listing.split(b"\0"))):
        path = ROOT / name
        if not path.is_file():  # deleted in the working tree but not yet in the index
            continue
        data = path.read_bytes()
        if b"\0" not in data[:8000]:
            texts[name] = data.decode("utf-8", errors="replace")
    return texts


def headings(markdown: str) -> set[str]:
    """Section numbers ("2.9", "3", "Appendix A") of the headings of a Markdown page."""
    return {m["number"] for m in HEADING.finditer(markdown)}


def cited_sections(listed: str) -> list[str]:
    """The sections of one citation's list, a range naming both ends: "2.2-2.9" -> ["2.2", "2.9"]."""
    return re.findall(rf"Appendix [A-Z]|{_NUMBER}", listed)


def missing_sections(texts: dict[str, str], pattern: re.Pattern, sections: set[str]) -> list[str]:
    """One `path:line: §X` entry per section cited through `pattern` that `sections` lacks."""
    missing = []
    for name, text in texts.items():
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            missing += [f"{name}:{line}: §{s}" for s in cited_sections(match["sections"]) if s not in sections]
    return missing


def test_no_tracked_file_points_outside_the_repository():
    offenders = [name for name, text in tracked_text_files().items() if OUTSIDE in text]
    assert not offenders, f"{OUTSIDE} does not exist in a clone; cite docs/ instead: {offenders}"


def test_evaluator_citations_name_existing_sections():
    texts = tracked_text_files()
    sections = headings((ROOT / EVALUATOR_DOC).read_text())
    missing = missing_sections(texts, CITATION, sections)
    assert not missing, f"sections that {EVALUATOR_DOC} does not have:\n" + "\n".join(missing)


def test_evaluator_page_cites_only_its_own_sections():
    text = (ROOT / EVALUATOR_DOC).read_text()
    missing = missing_sections({EVALUATOR_DOC: text}, SELF_CITATION, headings(text))
    assert not missing, "\n".join(missing)


# The examples are built from EVALUATOR_DOC so that this file's own text holds no citation to check.
@pytest.mark.parametrize(("text", "expected"), [
    ("see {doc} §2.9 steps 5-8", ["2.9"]),
    ("({doc} §2.2-2.9 reproduction", ["2.2", "2.9"]),
    ("{doc} section 1.3 and Appendix A", ["1.3", "Appendix A"]),
    ("{doc} 1.1 rule 3", ["1.1"]),
    ("rules: {doc} 1.3, 2.1, 3.11; the rest", ["1.3", "2.1", "3.11"]),
    ("{doc} 3.11 and 5: top-level modules", ["3.11", "5"]),
    ("{doc} section 1.5. Presence rules", ["1.5"]),
    ("{doc} is the page", []),
])
def test_citation_forms(text, expected):
    text = text.format(doc=EVALUATOR_DOC)
    assert [s for m in CITATION.finditer(text) for s in cited_sections(m["sections"])] == expected


def test_a_missing_section_is_reported():
    sections = headings("# 1. Formats\n### 1.1 definition.json\n## Appendix A. Example\n")
    assert sections == {"1", "1.1", "Appendix A"}
    text = f"ok: {EVALUATOR_DOC} §1.1\nbad: {EVALUATOR_DOC} section 9.9 and Appendix Z\n"
    assert missing_sections({"x.py": text}, CITATION, sections) == ["x.py:2: §9.9", "x.py:2: §Appendix Z"]
