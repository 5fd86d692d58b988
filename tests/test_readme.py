"""The README's numbers come from a results file, and its quick-start commands are the ones CI runs."""

import re

from bench import readme_table
from reference.problem import ROOT


def test_performance_table_matches_the_results_file():
    assert readme_table.main(["--check"]) == 0, "README.md is out of date: run python bench/readme_table.py"


def test_ci_runs_the_readme_commands():
    readme = (ROOT / "README.md").read_text()
    for marker in ("ci:setup", "ci:test"):
        assert re.search(rf"<!-- {marker} -->\n```bash\n.+\n```", readme), marker
    assert "ci:setup" in (ROOT / ".ci" / "run").read_text()
