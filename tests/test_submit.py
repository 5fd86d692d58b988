"""`submit.py` end to end, in subprocesses, on tiny solution dirs under tmp_path.

The solutions here are pure PyTorch (the official reference, copied into the DPS outputs), so these
tests do not depend on the Triton kernels in `solution/`. Packaging rules: docs/evaluator.md §1.3,
§2.1, §3.11; the check: §2.2 step 8.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reference.problem import ROOT
from schemas.validate import validate_solution

REFERENCE_DPS = '''\
"""Pure-torch DPS solution: the reference outputs{offset}, copied into the provided outputs."""
from reference import INPUT_NAMES, run as reference_run


def run(*args):
    inputs, outputs = args[: len(INPUT_NAMES)], args[len(INPUT_NAMES) :]
    for out, value in zip(outputs, reference_run(*inputs)):
        out.copy_(value{offset})
'''


def make_solution(directory: Path, offset: str = "") -> Path:
    """A solution dir with an `__init__.py` and the DPS entry file; `offset` makes it wrong."""
    directory.mkdir(parents=True)
    (directory / "__init__.py").write_text('"""A test solution."""\n')
    (directory / "ffn_backward.py").write_text(REFERENCE_DPS.format(offset=offset))
    return directory


def submit(solution_dir: Path, output: Path, *flags: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(ROOT / "submit.py"), "--solution-dir", str(solution_dir), "--output", str(output)]
    return subprocess.run([*command, *flags], capture_output=True, text=True)


def load_submit():
    """submit.py as a module, for the tests that call its functions in this process."""
    spec = importlib.util.spec_from_file_location("submit", ROOT / "submit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def refusal(stderr: str) -> str:
    """The one line a refusal prints, without its prefix; fails on a traceback or several lines."""
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("submit.py: refused: "), stderr
    return lines[0].removeprefix("submit.py: refused: ")


def test_submit_twice_is_byte_identical(tmp_path):
    solution_dir = make_solution(tmp_path / "sol")
    (solution_dir / "__pycache__").mkdir()
    (solution_dir / "__pycache__" / "ffn_backward.cpython-312.pyc").write_bytes(b"\0")
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    assert submit(solution_dir, first).returncode == 0
    assert submit(solution_dir, second).returncode == 0
    assert first.read_bytes() == second.read_bytes()
    assert first.read_text().endswith("}\n")


def test_written_file_validates(tmp_path):
    solution_dir = make_solution(tmp_path / "sol")
    (solution_dir / "kernels").mkdir()
    (solution_dir / "kernels" / "gemm.py").write_text("BLOCK = 64\n")
    output = tmp_path / "solution.json"
    result = submit(solution_dir, output)
    assert result.returncode == 0, result.stderr
    solution = json.loads(output.read_text())
    validate_solution(solution)
    assert solution["spec"]["entry_point"] == "sol/ffn_backward.py::run"
    assert [source["path"] for source in solution["sources"]] == [
        "sol/__init__.py", "sol/ffn_backward.py", "sol/kernels/gemm.py",
    ]
    assert solution["definition"] == json.loads((ROOT / "definition.json").read_text())["name"]


@pytest.mark.parametrize(
    "relative, content, message",
    [
        pytest.param("triton.py", "x = 1\n", "sol/triton.py: 'triton.py' would shadow", id="shadows-triton"),
        pytest.param("torch/ops.py", "x = 1\n", "sol/torch/ops.py: 'torch' would shadow", id="shadows-torch-pkg"),
        pytest.param("cupti.py", "x = 1\n", "sol/cupti.py: 'cupti.py' would shadow", id="shadows-cupti"),
        pytest.param("json.py", "x = 1\n", "sol/json.py: 'json.py' would shadow", id="shadows-stdlib"),
        pytest.param("config.json", "{}\n", "sol/config.json: 'config.json' is a reserved", id="reserved-config"),
        pytest.param("eval_driver.py", "x = 1\n", "sol/eval_driver.py: 'eval_driver.py' is a reserved", id="reserved-driver"),
        pytest.param("empty.py", "", "sol/empty.py: empty file", id="empty-file"),
    ],
)
def test_refuses_bad_source(tmp_path, relative, content, message):
    solution_dir = make_solution(tmp_path / "sol")
    (solution_dir / relative).parent.mkdir(parents=True, exist_ok=True)
    (solution_dir / relative).write_text(content)
    output = tmp_path / "solution.json"
    result = submit(solution_dir, output)
    assert result.returncode != 0
    assert refusal(result.stderr).startswith(message)
    assert not output.exists()


def test_output_elsewhere_changes_no_path(tmp_path):
    """`--output` says only where the file goes: paths stay relative to the package root."""
    solution_dir = make_solution(tmp_path / "elsewhere" / "sol")
    beside, away = tmp_path / "elsewhere" / "solution.json", tmp_path / "out" / "deeper" / "solution.json"
    away.parent.mkdir(parents=True)
    for output in (beside, away):
        result = submit(solution_dir, output)
        assert result.returncode == 0, result.stderr
    assert away.read_bytes() == beside.read_bytes()
    assert json.loads(away.read_text())["spec"]["entry_point"] == "sol/ffn_backward.py::run"


def test_refuses_output_into_a_missing_directory(tmp_path):
    output = tmp_path / "missing" / "solution.json"
    result = submit(make_solution(tmp_path / "sol"), output)
    assert result.returncode == 1
    assert refusal(result.stderr) == f"--output {output}: directory {output.parent} does not exist"


def test_refuses_output_that_is_a_directory(tmp_path):
    output = tmp_path / "solution.json"
    output.mkdir()
    result = submit(make_solution(tmp_path / "sol"), output)
    assert result.returncode == 1
    assert refusal(result.stderr) == f"--output {output}: a folder, not a file"


def test_refuses_a_read_only_directory(tmp_path, monkeypatch, capsys):
    """As on a read-only mount (chmod cannot make one for root): the system's reason, in one line."""
    submit_module = load_submit()

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(submit_module.tempfile, "mkstemp", read_only)
    output = tmp_path / "solution.json"
    status = submit_module.main(["--solution-dir", str(make_solution(tmp_path / "sol")), "--output", str(output)])
    assert status == 1
    expected = f"--output {output}: cannot write a file in {tmp_path} (Read-only file system)"
    assert refusal(capsys.readouterr().err) == expected


def test_refuses_a_solution_dir_that_is_not_a_directory(tmp_path):
    missing = tmp_path / "missing"
    result = submit(missing, tmp_path / "solution.json")
    assert result.returncode == 1
    assert refusal(result.stderr) == f"--solution-dir {missing}: not a directory"


def test_refuses_missing_entry_file(tmp_path):
    solution_dir = make_solution(tmp_path / "sol")
    (solution_dir / "ffn_backward.py").unlink()
    result = submit(solution_dir, tmp_path / "solution.json")
    assert result.returncode != 0
    assert refusal(result.stderr).startswith("spec.entry_point: entry file 'sol/ffn_backward.py' is not one of")


def test_check_passes_with_the_reference_solution_in_one_line(tmp_path):
    output = tmp_path / "solution.json"
    result = submit(make_solution(tmp_path / "sol"), output, "--check")
    assert result.returncode == 0 and not result.stderr, result.stdout + result.stderr
    assert re.fullmatch(rf"wrote {re.escape(str(output))} \(2 sources\); check PASSED on (cpu|cuda): "
                        r"all 14 outputs of 2 fixtures\n", result.stdout), result.stdout  # two fixtures, seven outputs


def test_check_fails_with_wrong_values_in_one_line(tmp_path):
    """Also the `--no-write` path: the file is written first, then checked as it is; --verbose adds
    a line per output."""
    solution_dir = make_solution(tmp_path / "sol", offset=" + 1.0")
    output = tmp_path / "solution.json"
    assert submit(solution_dir, output).returncode == 0
    result = submit(solution_dir, output, "--check", "--no-write")
    assert result.returncode == 1 and not result.stdout, result.stdout + result.stderr
    assert re.fullmatch(r"submit.py: check FAILED on (cpu|cuda): 14 of 14 outputs, first B1_S1 grad_hidden_states "
                        r"\(matched .*; --verbose shows every output\n", result.stderr), result.stderr
    verbose = submit(solution_dir, output, "--check", "--no-write", "--verbose")
    assert verbose.returncode == 1
    assert len([line for line in verbose.stdout.splitlines() if line.endswith("< 99%)")]) == 14, verbose.stdout
    assert verbose.stderr.splitlines()[-1].startswith("submit.py: check FAILED"), verbose.stderr


def test_check_names_what_the_solution_raised_in_one_line(tmp_path):
    solution_dir = make_solution(tmp_path / "sol")
    (solution_dir / "ffn_backward.py").write_text('def run(*args):\n    raise ValueError("grad_output: bad\\nmore")\n')
    result = submit(solution_dir, tmp_path / "solution.json", "--check")
    assert result.returncode == 1 and not result.stdout, result.stdout + result.stderr
    assert re.fullmatch(r"submit.py: check FAILED on (cpu|cuda): B1_S1: the entry point raised "
                        r"ValueError: grad_output: bad\n", result.stderr), result.stderr


def test_check_names_a_missing_entry_function_in_one_line(tmp_path):
    """The entry file is there but lacks the function: the check says so in one line, no traceback."""
    solution_dir = make_solution(tmp_path / "sol")
    output = tmp_path / "solution.json"
    assert submit(solution_dir, output).returncode == 0
    packaged = json.loads(output.read_text())
    packaged["spec"]["entry_point"] = packaged["spec"]["entry_point"].split("::")[0] + "::nope"
    output.write_text(json.dumps(packaged))
    result = submit(solution_dir, output, "--check", "--no-write")
    assert result.returncode != 0 and not result.stdout, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "check FAILED" in lines[0] and "has no function 'nope'" in lines[0], result.stderr


def test_refuses_a_file_that_is_not_utf8(tmp_path):
    output = tmp_path / "solution.json"
    output.write_bytes(b"\x85\x00binary")
    result = subprocess.run([sys.executable, str(ROOT / "submit.py"), "--no-write", "--output", str(output)],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and "utf-8" in result.stderr, result.stderr


def test_committed_solution_json_is_current():
    """The solution.json in the repository packages exactly the current solution/ sources."""
    submit_module = load_submit()
    built = submit_module.render(submit_module.build_solution(ROOT / "solution"))
    assert (ROOT / "solution.json").read_text() == built, "run python submit.py and commit solution.json"
