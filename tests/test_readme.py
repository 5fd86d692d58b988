"""The README's numbers come from a results file, its quick-start commands are the ones CI runs, and
its example runs; docs/plan.md is what the plans give."""

import os
import re
import subprocess
import sys

from bench import readme_table
from reference.problem import ROOT


def test_performance_table_matches_the_results_file():
    assert readme_table.main(["--check"]) == 0, "the generated tables are out of date: run python bench/readme_table.py"


def test_ci_runs_the_readme_commands():
    """.ci/run's own extraction yields exactly the command under each README marker."""
    readme = (ROOT / "README.md").read_text()
    extractor = re.search(r"^readme_command\(\) \{.*?^\}", (ROOT / ".ci" / "run").read_text(), re.S | re.M).group(0)
    for marker in ("ci:setup", "ci:test"):
        written = re.search(rf"<!-- {marker} -->\n```bash\n(.+)\n```", readme).group(1)
        extracted = subprocess.run(["bash", "-c", f"{extractor}\nreadme_command {marker}"], cwd=ROOT,
                                   capture_output=True, text=True, check=True).stdout.strip()
        assert extracted == written, marker


def test_plan_doc_matches_the_plans():
    """docs/plan.md is what bench/plan_table.py writes from solution/configs.py's plans."""
    from bench import plan_table

    assert plan_table.main(["--check"]) == 0, "docs/plan.md is out of date: run python bench/plan_table.py"


def test_readme_python_example_runs_on_the_cpu():
    """The README's example of calling `run`, as it tells a machine without a GPU to run it: every
    output passes the check."""
    text = (ROOT / "README.md").read_text()
    code = re.search(r"## Calling `run` from Python.*?```python\n(.*?)```", text, re.S).group(1)
    code = code.replace('"cuda"', '"cpu"')
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")[:-1]
    assert len(lines) == 7 and all(line.endswith(" True") for line in lines), result.stdout
