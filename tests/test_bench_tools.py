"""Every GPU tool of bench/ stops with one line, not a traceback, where there is no CUDA GPU."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import reference
from reference.problem import ROOT

GPU_TOOLS = ["profile_stages.py", "verify_workloads.py", "real_use.py"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
@pytest.mark.parametrize("tool", GPU_TOOLS)
def test_gpu_tool_without_a_gpu_says_so_in_one_line(tool, tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "bench" / tool), "--out", str(tmp_path / "out.json")],
                            cwd=ROOT, capture_output=True, text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs a CUDA GPU" in lines[0], result.stderr
    assert not result.stdout.strip()


def test_ncu_stalls_ranks_instructions_and_reasons(tmp_path):
    """A made-up source page of three instructions: samples per reason, the instructions with the most
    samples in address order, each under the one before it."""
    from bench import ncu_stalls

    header = ["Address", "Source", ncu_stalls.SAMPLES, ncu_stalls.EXECUTED, "stall_long_sb", "stall_barrier",
              "stall_long_sb (Not Issued)"]
    rows = [["0x100", "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2", "1", "8", "1", "0", "1"],
            ["0x110", "@!P0 BRA 0x200", "6", "8", "6", "0", "6"],
            ["0x120", "NOP", "3", "1", "0", "3", "0"]]
    page = tmp_path / "page.csv"
    page.write_text("\n".join(",".join(f'"{c}"' for c in line) for line in [["Kernel Name", "k"], header, *rows]))
    kernel, parsed = ncu_stalls.read_source_page(str(page))
    text = ncu_stalls.summary(kernel, parsed, top=2)
    assert text.splitlines()[0] == "k: 10 warp-stall samples over 3 instructions"
    assert "long_sb                      7  70.0%" in text and "barrier                      3  30.0%" in text
    listed = [line.split()[0] for line in text.splitlines() if line.strip().startswith("0x")]
    assert listed == ["0x10", "0x20"]  # offsets from the first instruction, in address order; 0x100 not listed
    assert "(SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2)" in text and "[long_sb=6]" in text


def test_ptx_fingerprint_ignores_debug_lines_labels_and_the_kernels_name():
    from bench.ptx_fingerprints import fingerprint
    a = ".entry foo(\n.loc 1 2 3\n$L__BB0_1:\n\tadd.s32 %r1, %r2, %r3;\n\tbra $L__BB0_1;"
    b = ".entry bar(\n.loc 1 9 9\n$L__BB0_7:\n\tadd.s32 %r1, %r2, %r3;\n\tbra $L__BB0_7;"
    assert fingerprint(a, "foo") == fingerprint(b, "bar")
    assert fingerprint(a, "foo") != fingerprint(a.replace("add", "sub"), "foo")
    assert fingerprint(a, "foo") != fingerprint(b, "")  # the name kept when none is given


def test_score_elasticity_is_the_derivative_of_the_score(capsys):
    """d ln S / d ln T matches a finite difference; a workload's time replaced moves the geomean
    score the way its elasticity says; bad input is one line."""
    import math

    from bench import score_elasticity
    from evaluation.roofline import sol_score

    t, t_sol, t_b, h = 0.3, 0.05, 0.5, 1e-6
    numeric = (math.log(sol_score(t * (1 + h), t_sol, t_b)) - math.log(sol_score(t * (1 - h), t_sol, t_b))) / (
        math.log(1 + h) - math.log(1 - h))
    assert score_elasticity.elasticity(t, t_sol, t_b) == pytest.approx(numeric, rel=1e-6)
    rows = score_elasticity.load_rows(score_elasticity.RESULTS_FILE)
    assert len(rows) == 16
    big = rows[-1]
    measured = {r["tokens"]: r["latency_ms"] for r in rows}
    before = score_elasticity.geomean_scores(rows, measured)["b200"]
    after = score_elasticity.geomean_scores(rows, {**measured, big["tokens"]: big["latency_ms"] * 0.99})["b200"]
    t_sol, t_b = score_elasticity.scales(big)["b200"]
    expected = -score_elasticity.elasticity(big["latency_ms"], t_sol, t_b) * 0.01 / 16
    assert math.log(after / before) == pytest.approx(expected, rel=0.02)
    assert score_elasticity.main([]) == 0  # the documented run: no what-if
    out = capsys.readouterr().out
    assert "geomean S:" in out and "with " not in out
    assert score_elasticity.main(["--what-if", ""]) == 2  # given, but empty
    assert score_elasticity.main(["--what-if", "5=3"]) == 2
    assert capsys.readouterr().err.count("\n") == 2


# -- command lines: --help does no work; a bad argument is a usage error before the GPU check -------------

HELP_TOOLS = ["bench/ab.py", "bench/ncu_stalls.py", "bench/plan_table.py", "bench/profile_call.py",
              "bench/ptx_fingerprints.py", "bench/results_index.py", "tests/fixtures/make_fixtures.py"]


def _run_tool(path: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / path), *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": "", **env}, timeout=300)


@pytest.mark.parametrize("tool", HELP_TOOLS)
def test_help_prints_usage_and_does_nothing_else(tool):
    """--help: usage on stdout, exit 0, nothing written (make_fixtures once rewrote the tracked
    fixtures on any argument)."""
    fixtures = {p: p.stat().st_mtime_ns for p in (ROOT / "tests" / "fixtures").glob("*.safetensors")}
    result = _run_tool(tool, "--help")
    assert result.returncode == 0 and result.stdout.startswith("usage:") and not result.stderr, result
    assert {p: p.stat().st_mtime_ns for p in fixtures} == fixtures


BAD_ARGUMENTS = [  # (tool, arguments, what the error line must say)
    ("bench/ab.py", ["/nonexistent"], "'/nonexistent': not a solution package"),
    ("bench/ab.py", ["solution", "--tokens", "999"], "'999': not a comma-separated list of workload token counts"),
    ("bench/ab.py", ["solution", "--rounds", "0"], "--rounds 0: at least 1"),
    ("bench/ab.py", ["checkout=solution"], "the name must be an identifier other than 'checkout'"),
    ("bench/ab.py", ["solution", "solution"], "two packages are named alike"),
    ("bench/profile_call.py", ["--tokens", "0"], "'0': not a whole number of at least 1"),
    ("bench/profile_call.py", ["--tokens", "128", "--package", "/nonexistent"], "'/nonexistent': not a solution package"),
    ("bench/ncu_stalls.py", ["/nonexistent.csv"], "/nonexistent.csv: No such file or directory"),
    ("bench/ncu_stalls.py", ["README.md"], "README.md: not Nsight Compute's source page as CSV"),
    ("bench/ncu_stalls.py", ["README.md", "--top", "0"], "--top 0: at least 1"),
    ("bench/ptx_fingerprints.py", ["--arch", "sm_80"], "invalid choice: 'sm_80'"),
    ("tests/fixtures/make_fixtures.py", ["--bogus"], "unrecognized arguments: --bogus"),
]


@pytest.mark.parametrize("tool, args, message", BAD_ARGUMENTS)
def test_a_bad_argument_is_a_usage_error_naming_it(tool, args, message):
    """argparse's usage line, then one error line that names the value; exit 2, no traceback, before
    any GPU check."""
    result = _run_tool(tool, *args)
    assert result.returncode == 2 and "Traceback" not in result.stderr and not result.stdout, result
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("usage:") and message in lines[-1] and "error:" in lines[-1], result.stderr


def test_refusals_of_the_environment_are_one_line():
    """Where a tool cannot run here: one line, no traceback (ptx_fingerprints under the interpreter,
    the A/B without a GPU)."""
    cases = [("bench/ptx_fingerprints.py", [], {"TRITON_INTERPRET": "1"}, "unset TRITON_INTERPRET")]
    if not torch.cuda.is_available():
        cases.append(("bench/ab.py", ["solution", "--tokens", "128"], {}, "needs a CUDA GPU"))
    for tool, args, env, message in cases:
        result = _run_tool(tool, *args, **env)
        lines = result.stderr.strip().splitlines()
        assert result.returncode != 0 and len(lines) == 1 and message in lines[0] and not result.stdout, result


def test_make_fixtures_writes_where_it_is_told(tmp_path):
    """--out DIR: both fixtures there, the tracked ones untouched; a file as --out is a usage error."""
    fixtures = {p: p.stat().st_mtime_ns for p in (ROOT / "tests" / "fixtures").glob("*.safetensors")}
    result = _run_tool("tests/fixtures/make_fixtures.py", "--out", str(tmp_path / "new"))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == sorted(p.name for p in fixtures)
    assert {p: p.stat().st_mtime_ns for p in fixtures} == fixtures
    (tmp_path / "a_file").write_text("")
    result = _run_tool("tests/fixtures/make_fixtures.py", "--out", str(tmp_path / "a_file"))
    assert result.returncode == 2 and "a file, not a folder" in result.stderr, result


def test_real_use_describes_the_host_it_ran_on():
    """real_use's host figures: the reference task is fixed and takes measurable time; the steal
    share is a share of the ticks that passed, and unknown where the ticks are."""
    from bench import real_use

    assert real_use.HostReference.task() == real_use.HostReference.task()
    assert real_use.HostReference.median_us() > 0
    assert real_use._steal_share((5, 1000), (15, 1100)) == pytest.approx(0.1)
    assert real_use._steal_share(None, (15, 1100)) is None and real_use._steal_share((5, 1000), (5, 1000)) is None
    ticks = real_use._cpu_ticks()
    assert ticks is None or 0 <= ticks[0] <= ticks[1]
    assert real_use._involuntary_switches() >= 0


def test_real_use_names_the_clock_where_sampled():
    """--clocks: the printed line gives the median SM clock of both phases, or why there is none."""
    from bench import real_use

    assert real_use._clock_note({"host_us": 1.0}) == ""
    sampled = {"samples": 9, "sm_mhz": {"min": 1500, "median": 1620, "max": 1755}}
    note = real_use._clock_note({"clocks_back_to_back": sampled, "clocks_gpu": {"error": "no samples: x"}})
    assert note == "; SM clock 1620 MHz back-to-back, no samples: x timed"


def test_ab_rounds_alternate_which_side_runs_first():
    """The A/B reverses the sides' order every other round (later in a round runs under a lower
    clock), and every round measures every side once."""
    from bench.ab import round_order

    names = ["old", "checkout"]
    assert [round_order(names, k) for k in range(3)] == [names, names[::-1], names]
    assert all(sorted(round_order(["a", "b", "c"], k)) == ["a", "b", "c"] for k in range(4))


def test_clock_summary_spreads_the_samples_and_names_the_reasons():
    from bench.clocks import summarize
    text = "1980, 350.5, 0x0000000000000000\n1755, 690.0, 0x0000000000000004\n[N/A], [N/A], [N/A]\n1830, 700.2, 0x1\n"
    s = summarize(text)
    assert s["samples"] == 3
    assert s["sm_mhz"] == {"min": 1755.0, "median": 1830.0, "max": 1980.0}
    assert s["power_w"]["max"] == 700.2
    assert s["reasons"] == ["SwPowerCap"]  # GpuIdle (0x1) is not a slowdown
    assert summarize("Field \"clocks_event_reasons.active\" is not a valid field to query.\n") == {
        "error": "no samples: Field \"clocks_event_reasons.active\" is not a valid field to query."}


def test_clock_log_samples_while_its_block_runs(tmp_path, monkeypatch):
    """The sampler's child process, here a stand-in for nvidia-smi that prints two samples; and
    without nvidia-smi a summary that says so, the measurement untouched."""
    import shutil
    import time

    from bench import clocks
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '1980, 400.0, 0x0'\necho '1900, 650.0, 0x4'\nexec sleep 30\n")
    smi.chmod(0o755)
    monkeypatch.setattr(shutil, "which", lambda name: str(smi) if name == "nvidia-smi" else None)
    monkeypatch.setattr(clocks, "_smi_id", lambda device: [])
    with clocks.ClockLog(torch.device("cpu")) as log:
        time.sleep(0.5)
    assert log.summary() == {"samples": 2, "sm_mhz": {"min": 1900.0, "median": 1940.0, "max": 1980.0},
                             "power_w": {"min": 400.0, "median": 525.0, "max": 650.0}, "reasons": ["SwPowerCap"]}
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with clocks.ClockLog(torch.device("cpu")) as log:
        pass
    assert log.summary() == {"error": "nvidia-smi not found"}
