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


# bench/experiments' modules that other scripts import (no command line of their own)
EXPERIMENT_MODULES = {"__init__.py", "workload_case.py", "stage2_warp_specialized.py", "stage2_ws_copy.py",
                      "stage2_ws_resident.py"}
EXPERIMENT_SCRIPTS = sorted(p.name for p in (ROOT / "bench" / "experiments").glob("*.py")
                            if p.name not in EXPERIMENT_MODULES)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
@pytest.mark.parametrize("script", EXPERIMENT_SCRIPTS)
def test_experiment_without_a_gpu_stops_without_a_traceback(script):
    """Each prototype or A/B script, given a workload's token count on a machine without a GPU,
    stops with its reason (no GPU, a usage line, the package it needs) and no traceback."""
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "experiments" / script), "2984"], cwd=ROOT,
                            capture_output=True, text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, timeout=300)
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip() and not result.stdout.strip(), result


def test_ptx_fingerprint_ignores_debug_lines_labels_and_the_kernels_name():
    from bench.ptx_fingerprints import fingerprint
    a = ".entry foo(\n.loc 1 2 3\n$L__BB0_1:\n\tadd.s32 %r1, %r2, %r3;\n\tbra $L__BB0_1;"
    b = ".entry bar(\n.loc 1 9 9\n$L__BB0_7:\n\tadd.s32 %r1, %r2, %r3;\n\tbra $L__BB0_7;"
    assert fingerprint(a, "foo") == fingerprint(b, "bar")
    assert fingerprint(a, "foo") != fingerprint(a.replace("add", "sub"), "foo")
    assert fingerprint(a, "foo") != fingerprint(b, "")  # the name kept when none is given


def test_experiments_workload_case_and_checks():
    """bench/experiments' shared setup: the official workload's inputs and outputs; a variant's
    outputs pass the check only if it writes them (NaN-filled first)."""
    from bench.experiments.workload_case import outputs_of, verdicts, workload_case

    workload, inputs, outputs = workload_case(128, "cpu")
    assert workload.tokens == 128 and [tuple(o.shape) for o in outputs][0] == (1, 128, 512)
    expected = reference.run(*inputs)

    def writes_reference(*args):
        for out, ref in zip(args[len(inputs):], expected):
            out.copy_(ref)

    assert all(v.passed for v in verdicts(outputs_of(writes_reference, inputs, outputs), expected, workload).values())
    assert not any(v.passed for v in verdicts(outputs_of(lambda *args: None, inputs, outputs), expected, workload).values())
    with pytest.raises(ValueError, match="no official workload has 5 tokens"):
        workload_case(5, "cpu")


def test_provenance_names_the_host_cpu():
    """Host-time figures depend on the host CPU: every results file's provenance names it."""
    from evaluation.provenance import provenance

    cpu = provenance("test")["host_cpu"]
    assert isinstance(cpu, str) and cpu and cpu != "unknown"


def test_experiments_workload_tokens():
    """The A/B scripts' token argument: official workload token counts only, comma-separated."""
    from bench.experiments.workload_case import WORKLOAD_TOKENS, workload_tokens

    assert workload_tokens("2984,131072") == [2984, 131072] and len(WORKLOAD_TOKENS) == 16
    for bad in ("5", "2984,", "x", ""):
        with pytest.raises(ValueError, match="not a comma-separated list of workload token counts"):
            workload_tokens(bad)


def test_experiments_write_their_results_file_after_each_token_count(tmp_path):
    """measure_each rewrites the results file after every token count: a run cut short (here, by an
    error at the second count) keeps the rows it measured, under the header's fields."""
    import json

    from bench.experiments.workload_case import measure_each

    out = tmp_path / "ab.json"

    def measure(tokens: int) -> dict:
        if tokens == 131:
            raise RuntimeError("cut short")
        return {"tokens": tokens, "correct": {"a": True}, "a": [{"us": 1.25, "kernels_us": {}}]}

    with pytest.raises(RuntimeError, match="cut short"):
        measure_each([128, 131], measure, str(out), {"provenance": {"method": "test"}})
    written = json.loads(out.read_text())
    assert written["provenance"] == {"method": "test"} and [r["tokens"] for r in written["rows"]] == [128]


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

HELP_TOOLS = sorted(f"bench/experiments/{p.name}" for p in (ROOT / "bench" / "experiments").glob("*.py")
                    if p.name != "__init__.py") + ["bench/ptx_fingerprints.py", "bench/results_index.py",
                                                   "tests/fixtures/make_fixtures.py"]


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


E = "bench/experiments/"
BAD_ARGUMENTS = [  # (tool, arguments, what the error line must say)
    (E + "ab_few_tokens_plans.py", ["999"], "'999': not a comma-separated list of workload token counts"),
    (E + "ab_few_tokens_plans.py", ["128", "nosuch"], "unknown variant 'nosuch'"),
    (E + "ab_fp32_weights.py", ["-5"], "'-5': not a comma-separated list of workload token counts"),
    (E + "ab_host_path.py", ["/nonexistent", "128"], "'/nonexistent': no __init__.py or ffn_backward.py there"),
    (E + "ab_host_path.py", ["solution", "128", "0"], "argument rounds: '0': must be >= 1"),
    (E + "ab_large_layernorm.py", ["128"], "token counts [128] are not above BEYOND (32768)"),
    (E + "ab_large_layernorm.py", ["131072", "-5"], "argument BEYOND: '-5': not a token count >= 1"),
    (E + "ab_large_layernorm.py", ["131072", "32768", "nosuch"], "launch 'nosuch': expected ROWSrows-wWARPS-xWAVES"),
    (E + "ab_stage1_by_tokens.py", ["5"], "'5': not a comma-separated list of workload token counts"),
    (E + "ab_stage4_operand_b.py", ["-1"], "'-1': not a comma-separated list of workload token counts"),
    (E + "ab_stage4_second_wave.py", ["0"], "'0': not a comma-separated list of workload token counts"),
    (E + "ab_v18_v19.py", ["1,x"], "'1,x': not a comma-separated list of workload token counts"),
    (E + "overlap_stage1_stage2.py", ["0"], "'0': not a comma-separated list of token counts >= 1"),
    (E + "plan_sweeps.py", ["stage9"], "unknown sweep 'stage9'"),
    (E + "stage2_prototypes.py", ["-5"], "'-5': not a comma-separated list of token counts >= 1"),
    (E + "stage2_tiles.py", ["999"], "'999': not a comma-separated list of workload token counts"),
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
    """Where a script cannot run here: one line, no traceback (the DRY check without the interpreter,
    ptx_fingerprints under the interpreter, an A/B whose branch-only plan fields main lacks, a library
    module)."""
    cases = [(E + "overlap_stage1_stage2.py", ["128"], {"DRY": "1", "TRITON_INTERPRET": "0"}, "set TRITON_INTERPRET=1"),
             ("bench/ptx_fingerprints.py", [], {"TRITON_INTERPRET": "1"}, "unset TRITON_INTERPRET"),
             (E + "ab_fp32_weights.py", ["128"], {}, "the record of a past A/B"),
             (E + "stage2_ws_copy.py", [], {}, "a library module, nothing to run")]
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


def test_experiments_argument_types():
    """The scripts' argument types: each a ValueError to a caller, and to argparse an error whose
    message (naming the value) it prints as is."""
    import argparse

    from bench.experiments.workload_case import description, token_counts
    from evaluation.staging import int_at_least

    assert token_counts("1,5000") == [1, 5000] and int_at_least(1)("3") == 3
    for parse, bad in ((token_counts, "0"), (token_counts, "1,-2"), (token_counts, "x"), (int_at_least(1), "0"),
                       (int_at_least(1), "1.5")):
        with pytest.raises((ValueError, argparse.ArgumentTypeError), match=repr(bad)):
            parse(bad)
    parser = argparse.ArgumentParser()
    parser.add_argument("tokens", type=token_counts)
    with pytest.raises(SystemExit):
        parser.parse_args(["0"])
    assert description("One sentence\nover two lines.\n\nMore.") == "One sentence over two lines."


def test_ab_solutions_variants_are_plans_the_solution_takes():
    """Every plan variant of bench/experiments/ab_solutions.py, on sm_90's plan (the one it runs on),
    describes a call at token counts on both sides of the plans' bounds: a variant that builds a
    plan the launches refuse would fail only on the GPU machine, after its first call."""
    from bench.experiments.ab_solutions import VARIANTS
    from solution import configs
    from solution.arguments import Dims
    from solution.launches import describe_call

    for name, variant in VARIANTS.items():
        plan = variant(configs.PLANS["sm_90"])
        for tokens in (128, 1163, 2984, 4096, 4097, 17312):
            call = describe_call(Dims(tokens=tokens, hidden=512, intermediate=2048, device=torch.device("cpu")), plan)
            assert call.launches, (name, tokens)


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


def test_ab_rounds_alternate_which_variant_runs_first():
    """The host A/Bs reverse the variants' order every other round (later in a round runs under a
    lower clock), and every round measures every variant once."""
    from bench.experiments.ab_host_path import round_order

    names = ["old", "checkout"]
    assert [round_order(names, k) for k in range(3)] == [names, names[::-1], names]
    assert all(sorted(round_order(["a", "b", "c"], k)) == ["a", "b", "c"] for k in range(4))
