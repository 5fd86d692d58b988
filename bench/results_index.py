"""Write the "cited in" column of results/README.md from the files that name each result (never by hand).

    python bench/results_index.py            # rewrite the column in results/README.md
    python bench/results_index.py --check    # one line: up to date, or out of date (exit 1)

A results file is cited where its name appears (with or without `results/` before it, or matched by
a `results/` name pattern with a `*` in it) in README.md,
CHANGELOG.md, or a .md or .py file under docs/, solution/, bench/ or evaluation/; or in another
file's line of results/README.md. The cell names each citing file in that order: a Markdown
document with the headings its mentions sit under (each heading cut at its first ": ", " — " or
" ("), results/README.md with the files whose lines name it, a source file by its path alone. A
file cited nowhere reads "cited nowhere".
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import sys
from pathlib import Path

from reference.problem import ROOT

CITING_FILES = ("README.md", "CHANGELOG.md")
CITING_DIRS = ("docs", "solution", "bench", "evaluation")
CITING_SUFFIXES = (".md", ".py")
# `results/<name>.<ext>`; a placeholder such as `results/eval_<commit>.json` names no file and does not match.
CITATION = re.compile(r"results/([\w.*-]+\.\w+)")
# A file name as a word of the text (`eval_abc1234.json`, not the `eval_abc1234` of `ab_eval_abc1234.json`).
FILE_NAME = re.compile(r"(?<![\w.-])[\w-]+(?:\.\w+)+")
# An index line: `| \`<name>\` | <commit> | <what it measured> | <cited in> |`.
INDEX_ENTRY = re.compile(r"^\| `([^`]+)` \|", re.MULTILINE)
HEADING = re.compile(r"^#+ (.*)$")
HEADING_CUT = re.compile(r": | — | \(")
NOWHERE = "cited nowhere"


def citing_files(root: Path) -> list[Path]:
    """The files whose mentions of results count, in the column's order."""
    files = [root / name for name in CITING_FILES if (root / name).is_file()]
    for directory in CITING_DIRS:
        files += sorted(p for p in (root / directory).rglob("*") if p.suffix in CITING_SUFFIXES and p.is_file())
    return files


def _short_heading(text: str) -> str:
    return HEADING_CUT.split(text.strip(), maxsplit=1)[0].strip()


def _mentions(path: Path) -> tuple[dict[str, list[str]], list[tuple[str, str]]]:
    """(file name -> the headings (Markdown) its mentions sit under, in order; [(pattern, heading)])."""
    names: dict[str, list[str]] = {}
    patterns = []
    heading, fenced = "", False
    markdown = path.suffix == ".md"
    for line in path.read_text(encoding="utf-8").splitlines():
        if markdown and line.startswith("```"):
            fenced = not fenced
        elif markdown and not fenced and HEADING.match(line):
            heading = _short_heading(HEADING.match(line).group(1))
        for name in FILE_NAME.findall(line):
            names.setdefault(name, []).append(heading)
        patterns += [(p, heading) for p in CITATION.findall(line) if "*" in p and not p.startswith("*.")]
    return names, patterns


def _index_lines(index: str) -> list[tuple[str, set[str]]]:
    """(indexed file, the file names its line names outside the cited-in cell) for every line of the
    index table."""
    return [(m.group(1), set(FILE_NAME.findall(_without_last_cell(line))))
            for line in index.splitlines() if (m := INDEX_ENTRY.match(line))]


def _without_last_cell(line: str) -> str:
    return line.rstrip().removesuffix("|").rsplit("|", 1)[0]


def cited_in(root: Path) -> dict[str, str]:
    """Each indexed file's "cited in" cell, as it should read."""
    index = (root / "results" / "README.md").read_text(encoding="utf-8")
    lines = _index_lines(index)
    documents = [(str(p.relative_to(root)), *_mentions(p)) for p in citing_files(root)]
    cells = {}
    for name, _ in lines:
        parts = []
        for document, names, patterns in documents:
            headings = names.get(name, []) + [h for p, h in patterns if fnmatch.fnmatchcase(name, p)]
            if not headings:
                continue
            shown = list(dict.fromkeys(h for h in headings if h))  # a source file's are all ""
            parts.append(f"{document} ({'; '.join(shown)})" if shown else document)
        rows = [other for other, named in lines if other != name and name in named]
        if rows:
            parts.append(f"results/README.md ({', '.join(rows)})")
        cells[name] = "; ".join(parts) or NOWHERE
    return cells


def updated_index(index: str, cells: dict[str, str]) -> str:
    """The index with every table line's last cell replaced by its entry in `cells`."""
    out = []
    for line in index.splitlines(keepends=True):
        entry = INDEX_ENTRY.match(line)
        if entry:
            line = f"{_without_last_cell(line)}| {cells[entry.group(1)]} |\n"
        out.append(line)
    return "".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the column is up to date")
    args = parser.parse_args(argv)
    path = ROOT / "results" / "README.md"
    shown = path.relative_to(ROOT).as_posix()
    current = path.read_text(encoding="utf-8")
    new = updated_index(current, cited_in(ROOT))
    if args.check:
        if new != current:
            print(f"{shown}: the cited-in column is out of date: run python bench/results_index.py", file=sys.stderr)
            return 1
        print(f"{shown}: the cited-in column is up to date")
        return 0
    path.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
