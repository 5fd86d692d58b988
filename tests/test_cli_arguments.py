"""evaluation.cli's and evaluation.driver's refusals of bad values: a usage error (exit 2) in one line
that names the value, before the GPU check, staging or the driver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reference.problem import ROOT


@pytest.fixture
def cli(monkeypatch):
    """evaluation.cli where the GPU check, staging and the driver must not be reached."""
    from evaluation import cli

    def not_reached(*args, **kwargs):
        raise AssertionError("a bad argument must stop before this")

    for name in ("cuda_available", "stage", "run_driver"):
        monkeypatch.setattr(cli, name, not_reached)
    return cli


def _solution_files(tmp_path) -> dict[str, str]:
    files = {"missing": str(tmp_path / "missing.json"), "folder": str(tmp_path)}
    for name, content in {"not_json": b"nope", "binary": bytes(range(128, 256)), "empty_object": b"{}",
                          "a_list": b"[1]", "bad_entry": json.dumps(_solution(entry_point="nofile.py::run")).encode()}.items():
        (tmp_path / f"{name}.json").write_bytes(content)
        files[name] = str(tmp_path / f"{name}.json")
    return files


def _solution(**spec) -> dict:
    solution = json.loads((ROOT / "solution.json").read_text())
    solution["spec"].update(spec)
    return solution


@pytest.mark.parametrize("argv, message", [
    (["--warmup", "-1"], "argument --warmup: '-1': must be >= 0"),
    (["--warmup", "x"], "argument --warmup: 'x' is not an integer"),
    (["--iterations", "0"], "argument --iterations: '0': must be >= 1"),
    (["--rounds", "-3"], "argument --rounds: '-3': must be >= 1"),
    (["--timeout", "-5"], "argument --timeout: '-5': must be a number of seconds > 0"),
    (["--timeout", "0"], "argument --timeout: '0': must be"),
    (["--timeout", "nan"], "argument --timeout: 'nan': must be"),
    (["--timeout", "inf"], "argument --timeout: 'inf': must be"),
    (["--timeout", "1e300"], "argument --timeout: '1e300': must be"),
    (["--baselines", "all,none"], "--baselines 'all,none': 'all' and 'none' stand alone"),
    (["--baselines", "eager,none"], "'all' and 'none' stand alone"),
    (["--out", str(ROOT / "pyproject.toml" / "eval")], "pyproject.toml is a file, not a folder"),
    *([(["--out", "/proc/no_folder"], "--out /proc/no_folder: cannot write in /proc"),
       (["--offline", "--cache-dir", "/proc/no_folder"], "--cache-dir /proc/no_folder: cannot write in /proc")]
      if Path("/proc/self").is_dir() else []),  # a folder nobody can write in, root included
])
def test_bad_numbers_and_names_are_one_line_usage_errors(cli, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m evaluation.cli: error: ") and message in err and err.count("\n") == 1, err


@pytest.mark.parametrize("case, message", [
    ("missing", "No such file or directory"),
    ("folder", "Is a directory"),
    ("not_json", "Expecting value"),
    ("binary", "can't decode"),
    ("empty_object", "name: required field is missing"),  # the schema's words where the object is misshapen
    ("a_list", "is not of type 'object'"),
    ("bad_entry", "entry file 'nofile.py' is not among the sources"),
])
def test_a_bad_solution_file_is_a_usage_error(cli, capsys, tmp_path, case, message):
    """--solution is read and checked while parsing: before, a bad one passed the arguments and ended
    in a traceback after the GPU check."""
    path = _solution_files(tmp_path)[case]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--solution", path])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"--solution {path}: " in err and message in err and err.count("\n") == 1, err


def test_the_solution_is_loaded_while_parsing(cli):
    args, _ = cli.parse_args(["--solution", str(ROOT / "solution.json"), "--warmup", "0", "--timeout", "0.5"])
    assert args.loaded_solution["name"] == json.loads((ROOT / "solution.json").read_text())["name"]
    assert args.warmup == 0 and args.timeout == 0.5


@pytest.mark.parametrize("staging, side, message", [
    ("/nonexistent", "{tmp}/side.jsonl", "/nonexistent: not a staging folder (no definition.json there)"),
    ("{tmp}", "{tmp}/side.jsonl", "not a staging folder (no definition.json there)"),
    ("{staged}", "/nonexistent/side.jsonl", "--side /nonexistent/side.jsonl: not a file in an existing folder"),
])
def test_driver_refuses_bad_paths_in_one_line(tmp_path, staging, side, message):
    """The driver is internal (evaluation.cli starts it with paths it made), but run by hand a wrong path
    is argparse's usage error, not a traceback."""
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / "definition.json").write_text("{}")
    fill = {"tmp": tmp_path / "empty", "staged": staged}
    (tmp_path / "empty").mkdir()
    result = subprocess.run([sys.executable, "-P", "-m", "evaluation.driver", staging.format(**fill), "--side",
                             side.format(**fill)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})  # -P: the cwd is not on sys.path
    assert result.returncode == 2 and "Traceback" not in result.stderr and not result.stdout, result
    assert message in result.stderr.strip().splitlines()[-1], result.stderr


def test_help_describes_every_option_with_its_default(cli, capsys):
    """--help: usage on stdout, exit 0, nothing run; every option has a help line that gives its
    default, unless it is a flag (an option that takes no value)."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())  # argparse wraps lines (and breaks at hyphens)
    parser = cli.build_parser()
    formatter = parser._get_formatter()
    for action in parser._actions:
        if action.dest == "help":
            continue
        text = formatter._expand_help(action) if action.help else ""
        assert text, f"{action.option_strings[0]} has no help"
        assert action.nargs == 0 or "(default: " in text, f"{action.option_strings[0]}: {text!r} gives no default"
        assert action.option_strings[0] in shown
