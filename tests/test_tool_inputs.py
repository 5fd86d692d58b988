"""Bad input to the CPU tools (a results file of the wrong shape or encoding, an impossible value) and
to the GPU tools' output options: one line naming what is wrong, no traceback, before any GPU work."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from reference.problem import ROOT

NOT_UTF8 = b"\x85\x00\xff binary"


def run_tool(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, timeout=300)


def one_line(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert all(w in last for w in words), result.stderr


@pytest.mark.parametrize("rows, words", [
    (5, ["not a list of objects"]),
    (None, ["not a list of objects"]),
    ([1], ["not a list of objects"]),
    ([{"latency_ms": 1.0}], ["tokens"]),
    ([{"tokens": "x"}], ["tokens"]),
    ([{"tokens": 5, "latency_ms": "x"}], ["latency_ms"]),
])
def test_score_elasticity_refuses_misshapen_rows(rows, words, tmp_path):
    path = tmp_path / "eval.json"
    path.write_text(json.dumps({"rows": rows}))
    one_line(run_tool("bench/score_elasticity.py", "--results", str(path)), str(path), *words)


@pytest.mark.parametrize("what_if, words", [("131072=inf", ["above 0 and below"]), ("131072=nan", ["above 0"]),
                                            ("131072=-1", ["above 0"]), ("131072=1e300", ["below 1e+09"]),
                                            ("99=5", ["no workload of 99"]),
                                            ("128=5,128=6", ["128 tokens given twice"]),
                                            ("128=5,", ["expected TOKENS=US"])])
def test_score_elasticity_refuses_impossible_times(what_if, words):
    one_line(run_tool("bench/score_elasticity.py", "--what-if", what_if), what_if, *words)


@pytest.mark.parametrize("option", ["--results", "--ab", "--real-use", "--readme", "--performance"])
def test_readme_table_refuses_a_file_that_is_not_utf8(option, tmp_path):
    path = tmp_path / "file"
    path.write_bytes(NOT_UTF8)
    one_line(run_tool("bench/readme_table.py", option, str(path), "--check"), str(path), "not UTF-8")


@pytest.mark.parametrize("change, words", [("no rows", ["has no rows"]), ("a string latency", ["ValueError"])])
def test_readme_table_refuses_a_results_file_it_cannot_render(change, words, tmp_path):
    results = json.loads((ROOT / "results" / "eval_b6c01ec.json").read_text())
    if change == "no rows":
        results["rows"] = []
    else:
        results["rows"][0]["latency_ms"] = "x"
    path, readme = tmp_path / "eval.json", tmp_path / "README.md"
    path.write_text(json.dumps(results))
    readme.write_text((ROOT / "README.md").read_text(encoding="utf-8"), encoding="utf-8")
    one_line(run_tool("bench/readme_table.py", "--results", str(path), "--readme", str(readme)), str(path), *words)


@pytest.mark.parametrize("markers", ["<!-- perf:end -->\nold\n<!-- perf:begin -->",
                                     "<!-- perf:begin -->\n" * 2 + "<!-- perf:end -->"])
def test_readme_table_refuses_markers_out_of_order_or_twice_and_leaves_the_file(markers, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{markers}\n")
    before = readme.read_text()
    one_line(run_tool("bench/readme_table.py", "--readme", str(readme)), "each once")
    assert readme.read_text() == before
    other = run_tool("bench/readme_table.py", "--real-use", str(tmp_path / "none.json"))
    one_line(other, "--real-use", "none.json")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks what is refused before the GPU check")
@pytest.mark.parametrize("argv, words", [
    (["bench/verify_workloads.py", "--rounds", "0"], ["--rounds 0"]),
    (["bench/verify_workloads.py", "--out", "{tmp}"], ["--out", "a folder"]),
    (["bench/real_use.py", "--tokens", "999"], ["--tokens [999]"]),
    (["bench/real_use.py", "--profile", "{tmp}"], ["--profile", "a folder"]),
    (["bench/profile_stages.py", "--tokens", "0"], ["--tokens [0]"]),
])
def test_gpu_tools_refuse_bad_options_before_the_gpu_check(argv, words, tmp_path):
    result = run_tool(*(a.format(tmp=tmp_path) for a in argv))
    assert result.returncode == 2
    one_line(result, *words)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_gpu_tools_check_their_output_path_but_make_nothing_without_a_gpu(tmp_path):
    """An output path no folder can be made for is refused before the GPU check; a good one in a
    folder that is not there yet (a fresh clone has no out/) passes, and nothing is created by a
    tool that then stops for want of a GPU."""
    (tmp_path / "a_file").write_text("")
    one_line(run_tool("bench/verify_workloads.py", "--out", str(tmp_path / "a_file" / "v.json")), "is a file")
    out = tmp_path / "new" / "verify.json"
    one_line(run_tool("bench/verify_workloads.py", "--out", str(out)), "needs a CUDA GPU")
    assert not out.parent.exists()
    if Path("/proc/self").is_dir():  # a folder nobody can write in, root included (os.access says yes to root)
        one_line(run_tool("bench/verify_workloads.py", "--out", "/proc/no_folder/v.json"), "--out", "cannot write")
    assert list(tmp_path.iterdir()) == [tmp_path / "a_file"]


# Every tool that needs a CUDA GPU, by module: the name its one line gives it, and arguments that pass
# its checks before the GPU check ({tmp}: a fresh folder)
GPU_TOOLS = {"bench.ab": ("ab", ["solution", "--tokens", "128", "--out", "{tmp}/out.json"]),
             "bench.profile_call": ("profile_call", ["--tokens", "128"]),
             "bench.profile_stages": ("profile_stages", ["--out", "{tmp}/out.json"]),
             "bench.real_use": ("real_use", ["--out", "{tmp}/out.json"]),
             "bench.verify_workloads": ("verify_workloads", ["--out", "{tmp}/out.json"]),
             "evaluation.cli": ("python -m evaluation.cli", ["--out", "{tmp}/out"])}


def test_the_gpu_tools_are_every_tool_that_requires_a_gpu():
    requiring = {f"bench.{p.stem}" for p in (ROOT / "bench").glob("*.py") if "require_gpu(" in p.read_text()}
    assert requiring - {"bench.gpu"} == {m for m in GPU_TOOLS if m.startswith("bench.")}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
@pytest.mark.parametrize("module", GPU_TOOLS)
def test_every_gpu_tool_stops_with_the_same_status_and_one_line_without_a_gpu(module, tmp_path, capsys):
    from evaluation.staging import NO_GPU_STATUS

    name, argv = GPU_TOOLS[module]
    try:
        status = importlib.import_module(module).main([a.format(tmp=tmp_path) for a in argv])
    except SystemExit as stop:
        status = stop.code
    captured = capsys.readouterr()
    assert status == NO_GPU_STATUS == 2, captured.err
    assert captured.err == f"{name}: needs a CUDA GPU (torch {torch.__version__} sees none)\n"
    assert not captured.out and list(tmp_path.iterdir()) == []


def test_host_profile_paths_are_relative_to_the_repository():
    from bench.real_use import _relative_paths
    text = (f"  25  0.001 {ROOT}/solution/graph.py:296(launch)\n"
            "   1  0.002 /opt/x/.venv/lib/python3.12/site-packages/torch/cuda/__init__.py:5(f)\n"
            "   1  0.003 /usr/lib/python3.12/functools.py:3(g)\n   3  0.004 {built-in method x}")
    assert _relative_paths(text).splitlines() == [
        "  25  0.001 solution/graph.py:296(launch)", "   1  0.002 <site-packages>/torch/cuda/__init__.py:5(f)",
        "   1  0.003 <python>/functools.py:3(g)", "   3  0.004 {built-in method x}"]


# The --check tools: one line on stdout where all is up to date, one line on stderr (exit 1) otherwise

def test_readme_table_check_says_up_to_date_in_one_line(capsys):
    from bench import readme_table

    assert readme_table.main(["--check"]) == 0
    assert capsys.readouterr() == ("README.md, docs/performance.md: generated tables up to date\n", "")


def test_readme_table_check_says_out_of_date_in_one_line_with_the_command_that_rewrites(tmp_path, capsys):
    from bench import readme_table

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    begin, end = text.index(readme_table.BEGIN) + len(readme_table.BEGIN), text.index(readme_table.END)
    readme = tmp_path / "README.md"
    readme.write_text(text[:begin] + "\nstale\n" + text[end:], encoding="utf-8")
    assert readme_table.main(["--readme", str(readme), "--check"]) == 1
    out, err = capsys.readouterr()
    assert not out and err == (f"{readme}: generated tables out of date: "
                               f"run python bench/readme_table.py --readme {readme}\n")
    assert "stale" in readme.read_text(encoding="utf-8")


def test_results_index_check_says_up_to_date_or_not_in_one_line(monkeypatch, capsys):
    from bench import results_index

    assert results_index.main(["--check"]) == 0
    assert capsys.readouterr() == ("results/README.md: the cited-in column is up to date\n", "")
    monkeypatch.setattr(results_index, "updated_index", lambda index, cells: index + "a changed line\n")
    assert results_index.main(["--check"]) == 1
    assert capsys.readouterr() == ("", "results/README.md: the cited-in column is out of date: "
                                       "run python bench/results_index.py\n")
