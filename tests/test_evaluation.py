"""Tests of the local evaluator (evaluation/). CPU tests run the verdict logic on CPU tensors with a
stand-in timer built on the real shifting pool; `gpu` tests run the driver subprocess end to end."""

from __future__ import annotations

import importlib.util
import json
import shutil
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from evaluation import guards, hardening, report, roofline
from evaluation.attribution import ApiRecord, GpuActivity, attribute
from evaluation.compare import Correctness, CorrectnessTracker, check
from evaluation.io_conventions import allocate_outputs, custom_input_generator
from evaluation.shifting_pool import ShiftingMemoryPool, storage_span
from evaluation.staging import RESERVED_NAMES, StagingError, normalize_workload, package_directory, stage
from evaluation.timer import TimingResult
from evaluation.trace import dumps, make_trace
from evaluation.workload_eval import Harness, WorkloadEvaluation
from reference.problem import DEFINITION, ROOT, WORKLOAD_PATH, Tolerance
from reference.problem import run as reference_run

CONTROLS = Path(__file__).resolve().parent / "negative_controls"
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
RAW_WORKLOADS = [json.loads(l) for l in WORKLOAD_PATH.read_text().splitlines() if l.strip()]

# -- timer pieces ------------------------------------------------------------------------------------


def test_storage_span_counts_physical_elements_only():
    assert storage_span((4, 3), (3, 1), 12) == 12
    assert storage_span((4, 3), (0, 1), 12) == 3  # broadcast rows
    assert storage_span((0, 3), (3, 1), 0) == 0


def test_shifting_pool_moves_256_bytes_copies_inputs_and_zeroes_outputs():
    x, out = torch.randn(5, 7), torch.full((3,), 9.0)
    pool = ShiftingMemoryPool([x, 2.5], [out], total=3)
    first, second = pool.next(), pool.next()
    assert second[0].data_ptr() - first[0].data_ptr() == 256
    assert torch.equal(second[0], x) and second[1] == 2.5
    assert torch.count_nonzero(second[2]) == 0 and second[2].shape == (3,)
    pool.next()
    with pytest.raises(RuntimeError):
        pool.next()


def _activity(name, start, end, cid, kind="CONCURRENT_KERNEL"):
    return GpuActivity(kind=kind, name=name, start=start, end=end, correlation_id=cid)


def test_attribution_spans_by_api_window_and_median():
    api = [ApiRecord(10, 11, 1), ApiRecord(12, 13, 2), ApiRecord(110, 111, 3), ApiRecord(50, 51, 99)]
    gpu = [_activity("k", 20, 30, 1), _activity("k", 40, 60, 2), _activity("k", 120, 125, 3), _activity("x", 0, 999, 99)]
    result = attribute([(10, 13), (100, 115)], api, gpu)
    assert result.spans_ms == pytest.approx((40e-6, 5e-6))
    assert result.kernel_set == frozenset({"k_0_0_0_CONCURRENT_KERNEL"})
    assert result.activity_ms == pytest.approx({"k": (30e-6 + 5e-6) / 2})  # busy 30 ns, then 5 ns


def test_attribution_windows_are_offsets_from_the_iterations_first_activity():
    api = [ApiRecord(10, 11, 1), ApiRecord(12, 13, 2), ApiRecord(110, 111, 3), ApiRecord(112, 113, 4)]
    gpu = [_activity("a", 20, 30, 1), _activity("b", 25, 60, 2), _activity("a", 120, 124, 3), _activity("b", 130, 140, 4)]
    result = attribute([(10, 13), (100, 115)], api, gpu)
    # a: (0, 10 ns) then (0, 4 ns); b: (5, 40 ns) then (10, 20 ns); medians of two
    assert result.window_ms["a"] == pytest.approx((0.0, 7e-6))
    assert result.window_ms["b"] == pytest.approx((7.5e-6, 30e-6))


def test_attribution_errors_match_the_official_messages():
    api = [ApiRecord(10, 11, 1), ApiRecord(110, 111, 2)]
    with pytest.raises(RuntimeError, match="No kernel activities recorded for iteration 1"):
        attribute([(10, 13), (100, 115)], api, [_activity("k", 20, 30, 1)])
    with pytest.raises(RuntimeError, match="Inconsistent kernel names"):
        attribute([(10, 13), (100, 115)], api, [_activity("k", 20, 30, 1), _activity("j", 120, 130, 2)])


def test_demangled_aten_name_and_plain_triton_name():
    mangled = GpuActivity("CONCURRENT_KERNEL", "_ZN2at6native4testIfEEvv", 0, 1, 1)
    assert mangled.key.startswith("void at::native::test<float>()")
    assert GpuActivity("CONCURRENT_KERNEL", "ffn_bwd_kernel", 0, 1, 1).key.startswith("ffn_bwd_kernel_")
    assert GpuActivity("MEMSET", "MEMSET", 0, 1, 1, num_bytes=64, value=0).key == "MEMSET_0_64_0_MEMSET"


# -- numerical check and tracked correctness (§2.7, §2.3 e) -------------------------------------------

TOL = Tolerance(max_atol=0.1, max_rtol=1e-3)


def test_check_reports_nan_with_zero_errors_and_zero_output_with_the_l2_norm():
    ref = torch.tensor([3.0, 4.0])
    nan = check(torch.tensor([float("nan"), 1.0]), ref, TOL)
    assert not nan.passed and nan.correctness == Correctness(0.0, 0.0, True, False)
    inf = check(torch.tensor([float("inf"), 1.0]), ref, TOL)
    assert inf.correctness == Correctness(0.0, 0.0, False, True)
    zero = check(torch.zeros(2), ref, TOL)
    assert not zero.passed and zero.correctness.max_absolute_error == pytest.approx(5.0)


def test_check_allows_one_percent_of_elements_wrong_by_default_ratio():
    ref = torch.ones(1000)
    out = ref.clone()
    out[:10] = 100.0  # 1 % off: 0.99 matched passes (042's misspelled 0.98 has no effect)
    assert check(out, ref, TOL).passed
    out[:11] = 100.0
    assert not check(out, ref, TOL).passed
    assert Tolerance.from_json(RAW_WORKLOADS[0]["tolerance"]).required_matched_ratio == 0.99


def test_tracker_keeps_largest_abs_error_and_lets_nan_win():
    tracker = CorrectnessTracker()
    for c in (Correctness(0.1, 0.5), Correctness(0.9, 0.2), Correctness(0, 0, False, True)):
        tracker.update(c)
    assert tracker.current.has_inf
    tracker.update(Correctness(0, 0, True, False))
    tracker.update(Correctness(0, 0, False, True))
    assert tracker.current.has_nan
    fresh = CorrectnessTracker()
    fresh.update(Correctness(0.1, 0.5))
    fresh.update(Correctness(0.9, 0.2))
    assert fresh.current == Correctness(0.1, 0.5)  # the earlier, larger abs error is reported (quirk)


# -- roofline and score (§2.10) ----------------------------------------------------------------------


def test_sol_score_anchors():
    assert roofline.sol_score(1.0, 1.0, 3.0) == 1.0
    assert roofline.sol_score(3.0, 1.0, 3.0) == 0.5
    assert roofline.sol_score(2.0, 1.0, 0.5) == 0.0 and roofline.sol_score(0.5, 1.0, 0.5) == 1.0


def test_roofline_is_compute_bound_for_the_largest_workload_and_close_to_b200_published():
    b200 = roofline.gpu_rates("NVIDIA B200")
    tokens = 32 * 4096
    assert roofline.flops(tokens) / b200.fp16_flops > roofline.io_bytes(tokens) / b200.dram_bytes_per_s
    published = roofline.b200_published()["workloads"]["9f7b84ad-5820-5bcf-85f0-539019bea7f3"]["T_SOL_ms"]
    assert roofline.t_sol_ms(tokens, b200) == pytest.approx(published, rel=0.1)
    assert roofline.gpu_rates("NVIDIA H200").fp16_flops == 989e12 and roofline.gpu_rates("cpu") is None


# -- staging (§2.1) ------------------------------------------------------------------------------------


def _package(name: str, dps: bool = True) -> dict:
    return package_directory(CONTROLS / name, "solution.py::run", name, DEFINITION["name"], dps)


def test_staging_layout_and_normalization(request):
    staging = stage(DEFINITION, RAW_WORKLOADS[:2], _package("zero_output"))
    request.addfinalizer(lambda: shutil.rmtree(staging, ignore_errors=True))
    assert staging.name.startswith("sol_execbench_")
    assert sorted(p.name for p in staging.iterdir()) == [
        "config.json", "definition.json", "solution.json", "solution.py", "workload.jsonl"]
    lines = (staging / "workload.jsonl").read_text().split("\n")
    assert len(lines) == 2 and "required_match_ratio" not in lines[0]
    assert json.loads(lines[0])["tolerance"]["required_matched_ratio"] == 0.99
    assert json.loads((staging / "config.json").read_text()) == {
        "warmup_runs": 10, "iterations": 50, "lock_clocks": False, "benchmark_reference": True, "seed": 200}
    definition = json.loads((staging / "definition.json").read_text())
    assert list(definition) == ["name", "op_type", "axes", "custom_inputs_entrypoint", "inputs", "outputs",
                                "reference", "description", "hf_id"]


@pytest.mark.parametrize("path", sorted(RESERVED_NAMES))
def test_staging_rejects_reserved_names(path):
    solution = _package("zero_output")
    solution["sources"].append({"path": path, "content": "x = 1\n"})
    with pytest.raises(StagingError):
        stage(DEFINITION, RAW_WORKLOADS[:1], solution)


def test_shadowing_sources_are_found():
    assert hardening.shadowing_modules(["torch.py", "mykernel_xyz.py", "triton/x.py"]) == ["torch", "triton"]


# -- trace shape (§1.5) ------------------------------------------------------------------------------


def test_trace_presence_rules_and_strict_json():
    workload = normalize_workload(RAW_WORKLOADS[0])
    failing = make_trace("d", workload, "s", "RUNTIME_ERROR", "boom", Correctness(1, 2))
    assert failing["evaluation"]["correctness"] is None and failing["evaluation"]["performance"] is None
    assert list(failing["evaluation"]) == ["status", "environment", "timestamp", "log", "correctness", "performance"]
    numerical = make_trace("d", workload, "s", "INCORRECT_NUMERICAL", correctness=Correctness(1, 2))
    assert numerical["evaluation"]["correctness"]["extra"] is None
    json.loads(dumps(numerical))
    try:
        from schemas.validate import validate_trace
    except ImportError:
        return
    validate_trace(failing)
    validate_trace(numerical)


# -- the driver's verdict logic on the CPU -------------------------------------------------------------

CPU = torch.device("cpu")
SMALL_WORKLOAD = normalize_workload({**RAW_WORKLOADS[0], "axes": {"batch_size": 1, "seq_len": 5}})


def cpu_timer(fn, inputs, templates, warmup, rep):
    """The real shifting pool, no L2 flush, fixed latency: enough for the verdict logic."""
    pool = ShiftingMemoryPool(list(inputs), list(templates), warmup + rep)
    for _ in range(warmup + rep):
        args = pool.next()
        returned = fn(*args)
    return TimingResult(0.1, (0.1,) * rep, frozenset(), "cpu-stand-in", last_args=tuple(args), last_return=returned)


CPU_ROUNDS = 3


def load_control(name: str):
    spec = importlib.util.spec_from_file_location(f"negative_control_{name}", CONTROLS / name / "solution.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run


def evaluate_on_cpu(user_fn, dps: bool = True, import_findings: list[str] | None = None):
    from evaluation.staging import normalize_definition, BenchmarkConfig

    definition = normalize_definition(DEFINITION)
    namespace = {"evaluate": evaluate_on_cpu}
    torch.manual_seed(200)
    harness = Harness(
        definition=definition, solution_name="test", user_fn=user_fn, dps=dps,
        reference_run=reference_run, reference_timed=reference_run,
        gen_inputs=custom_input_generator(definition, __import__("reference").problem.get_inputs, CPU),
        integrity=guards.IntegritySnapshot(namespace, ("evaluate",)),
        config=BenchmarkConfig(warmup_runs=2, iterations=3), device=CPU, synchronize=lambda: None,
        time_fn=cpu_timer, rounds=CPU_ROUNDS, import_findings=import_findings or [],
    )
    return WorkloadEvaluation(harness, SMALL_WORKLOAD).run()


def reference_dps(*args):
    for out, value in zip(args[11:], reference_run(*args[:11])):
        out.copy_(value)


def test_reference_as_dps_solution_passes_with_clean_side_data():
    result = evaluate_on_cpu(reference_dps)
    evaluation = result.trace["evaluation"]
    assert evaluation["status"] == "PASSED" and evaluation["log"] == ""
    assert evaluation["performance"]["speedup_factor"] == pytest.approx(1.0)
    assert result.side["hardening"] == []
    assert all(m["worst_matched"] == 1.0 for m in result.side["outputs"].values())


@pytest.fixture
def restore_torch_state():
    elapsed_time, tf32 = torch.cuda.Event.elapsed_time, torch.backends.cuda.matmul.allow_tf32
    matmul = torch.Tensor.__matmul__
    yield
    torch.cuda.Event.elapsed_time = elapsed_time
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.Tensor.__matmul__ = matmul


# control -> (official status, log fragment, hardening fragment); DPS unless named in RETURN_STYLE
EXPECTED = {
    "zero_output": ("INCORRECT_NUMERICAL", "", None),
    "wrong_values": ("INCORRECT_NUMERICAL", "", None),
    "raises": ("RUNTIME_ERROR", "User function failed: negative control", None),
    "thread_injection": ("REWARD_HACK", "Thread injection detected", None),
    "elapsed_time_patch": ("REWARD_HACK", "torch.cuda.Event.elapsed_time has been monkey-patched", None),
    "lazy_output": ("REWARD_HACK", "Lazy evaluation detected: output is LazyTensor", None),
    "pointer_cache": ("PASSED", "", "stale results"),
    "input_mutation": ("PASSED", "", "input mutation"),
    "tf32_global": ("PASSED", "", "torch flags changed"),
    "accumulates_into_outputs": ("PASSED", "", "outputs NaN-filled"),
    "torch_patch": ("PASSED", "", "torch attributes changed by the solution's import: torch.Tensor.__matmul__"),
    "thread_at_import": ("PASSED", "", "threads started by the solution's import"),
    "none_outputs": ("RUNTIME_ERROR", "User function failed: output 'grad_hidden_states' is NoneType", None),
    "nan_output": ("INCORRECT_NUMERICAL", "", None),
    "inf_output": ("INCORRECT_NUMERICAL", "", None),
}
NONFINITE = {"nan_output": "has_nan", "inf_output": "has_inf"}  # the flag the trace's correctness sets
GPU_ONLY = {
    "launches_nothing": ("RUNTIME_ERROR", "Timing failed: No kernel activities recorded for iteration 0", None),
    "inconsistent_kernels": ("RUNTIME_ERROR", "Timing failed: Inconsistent kernel names", None),
}
RETURN_STYLE = {"lazy_output", "none_outputs"}
# Caught only by the driver process itself (it patches the driver's globals): run end to end.
DRIVER_ONLY = {
    "driver_patch": ("REWARD_HACK", "Eval driver integrity violated: 'time_runnable' has been monkey-patched", None),
}


def assert_expected_outcome(name: str, trace: dict, findings: list[str]) -> None:
    status, log, finding = {**EXPECTED, **GPU_ONLY, **DRIVER_ONLY}[name]
    evaluation = json.loads(dumps(trace))["evaluation"]  # strict JSON, NaN/Inf outputs included
    assert evaluation["status"] == status and log in evaluation["log"], evaluation
    if finding:
        assert any(finding in f for f in findings), findings
    if status == "INCORRECT_NUMERICAL":
        assert evaluation["correctness"] is not None and evaluation["performance"] is None
    if name in NONFINITE:
        correctness = evaluation["correctness"]
        assert correctness[NONFINITE[name]] is True
        assert math.isfinite(correctness["max_absolute_error"]) and math.isfinite(correctness["max_relative_error"])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_negative_control_on_cpu(name, restore_torch_state):
    """As the driver does: what the control's import changes is watched, then its workload evaluated."""
    watch = hardening.ImportWatch()
    user_fn = load_control(name)
    result = evaluate_on_cpu(user_fn, dps=name not in RETURN_STYLE, import_findings=watch.findings())
    assert_expected_outcome(name, result.trace, result.side["hardening"])


def test_every_control_directory_has_an_expectation():
    assert {p.name for p in CONTROLS.iterdir() if p.is_dir()} == set(EXPECTED) | set(GPU_ONLY) | set(DRIVER_ONLY)


def test_out_of_memory_for_the_timing_buffers_is_a_timing_failure(monkeypatch):
    """The output templates are allocated after the correctness rounds (one allocation per round)."""
    import evaluation.workload_eval as workload_eval

    calls = []

    def allocate(definition, axes, device):
        calls.append(device)
        if len(calls) > CPU_ROUNDS:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 MiB (test)")
        return allocate_outputs(definition, axes, device)

    monkeypatch.setattr(workload_eval, "allocate_outputs", allocate)
    evaluation = evaluate_on_cpu(reference_dps).trace["evaluation"]
    assert evaluation["status"] == "RUNTIME_ERROR"
    assert evaluation["log"].startswith("Timing failed: CUDA out of memory")


def test_lazy_output_check_names_a_none_output():
    assert guards.first_lazy_output([torch.zeros(1), None]) == 1
    assert guards.first_lazy_output([torch.zeros(1)]) is None


def test_importing_the_driver_leaves_torch_compile_settings_alone():
    """The baselines' process-wide torch.compile settings must not apply to the solution's own
    torch.compile: the driver imports `evaluation.baselines` only when baselines run."""
    code = (
        "import torch._inductor.config as inductor, torch._dynamo.config as dynamo\n"
        "before = inductor.compile_threads, dynamo.recompile_limit\n"
        "import evaluation.driver\n"
        "after = inductor.compile_threads, dynamo.recompile_limit\n"
        "assert after == before, f'{before} -> {after}'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


# -- the CLI's refusals: at once, one line, before any staging or driver -------------------------------


@pytest.fixture
def cli_without_driver(monkeypatch):
    from evaluation import cli

    def no_driver(*args, **kwargs):
        raise AssertionError("the driver must not start")

    monkeypatch.setattr(cli, "stage", no_driver)
    monkeypatch.setattr(cli, "run_driver", no_driver)
    return cli


@pytest.mark.parametrize("argv, message", [
    (["--workloads", "foo"], "--workloads: 'foo' is neither an index 0-15 nor a workload uuid"),
    (["--workloads", "99"], "--workloads: '99' is neither an index 0-15 nor a workload uuid"),
    (["--workloads", "0,foo"], "'foo' is neither"),
    (["--baselines", "bogus"], "--baselines: unknown 'bogus'"),
    (["--rounds", "0"], "must be >= 1"),
])
def test_cli_usage_errors_are_one_line(cli_without_driver, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        cli_without_driver.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m evaluation.cli: error: ") and message in err and err.count("\n") == 1, err


def test_cli_baselines_come_from_the_registry(cli_without_driver):
    from evaluation.baselines import BASELINE_NAMES, DEFAULT_BASELINES

    def baselines(*argv: str) -> list[str]:
        return cli_without_driver.parse_args(list(argv))[0].baselines

    assert baselines() == list(DEFAULT_BASELINES)
    assert baselines("--baselines", "all") == list(BASELINE_NAMES) and baselines("--baselines", "none") == []
    assert baselines("--baselines", ",".join(reversed(BASELINE_NAMES))) == list(reversed(BASELINE_NAMES))


def test_cli_without_a_gpu_stops_at_once(cli_without_driver, monkeypatch, capsys):
    monkeypatch.setattr(cli_without_driver, "cuda_available", lambda: False)
    assert cli_without_driver.main([]) == 2  # evaluation.staging.NO_GPU_STATUS, as every GPU tool
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a CUDA GPU" in err


# -- report ------------------------------------------------------------------------------------------


def test_report_rows_geomean_and_table():
    workload = normalize_workload(RAW_WORKLOADS[0])
    trace = make_trace("d", workload, "s", "PASSED", correctness=Correctness(0, 0),
                       performance=__import__("evaluation.trace").trace.Performance.from_latencies(0.05, 0.5))
    side = {"uuid": workload["uuid"], "outputs": {"grad_hidden_states": {"worst_matched": 1.0, "worst_ratio": 0.3}},
            "hardening": [], "baselines": {"optimized": {"latency_ms": 0.1, "passed": True, "worst_ratio": 0.2}}}
    rows = report.build_rows([trace], {workload["uuid"]: side}, "NVIDIA H200")
    row = rows[0]
    assert row.t_b_local_ms == 0.1 and row.t_sol_b200_ms == 0.0014
    assert row.score_local == pytest.approx(roofline.sol_score(0.05, row.t_sol_local_ms, 0.1))
    totals = report.summary(rows)
    assert totals["geomean_speedup_vs"]["optimized"] == pytest.approx(2.0)
    assert report.geomean([1.0, 4.0]) == 2.0 and math.isclose(report.geomean([2.0]), 2.0)
    table = report.format_table(rows, totals, "cupti")
    assert "1/1 passed" in table and "timer: cupti" in table


def fp32_rounding(expected: torch.Tensor) -> Tolerance:
    """Room for fp32 rounding only, every element: 1e-5 of the output's largest value plus 1e-5 of
    each element (the bound of tests/test_reference.py). Sums and matmuls are not bit-identical
    across CPUs (their summation order is the CPU's and the BLAS's choice)."""
    return Tolerance(max_atol=1e-5 * expected.abs().max().item(), max_rtol=1e-5, required_matched_ratio=1.0)


def test_offline_fixture_matches_the_reference_on_cpu():
    from reference.fixtures import fixture_paths, load_fixture
    from reference.tolerance import check_output

    fixture = load_fixture(fixture_paths()[0])
    for (name, expected), value in zip(fixture.expected.items(), reference_run(*fixture.inputs)):
        tolerance = fp32_rounding(expected)
        assert check_output(value, expected, tolerance).passed, name
        assert not check_output(value * (1 + 1e-4), expected, tolerance).passed, f"{name}: the bound is too loose"


def test_optimized_baseline_math_passes_the_tolerance_on_cpu():
    from evaluation.baselines import optimized

    torch.manual_seed(0)
    inputs = __import__("reference").problem.make_inputs(2, 37, "cpu")
    tol = Tolerance.from_json(RAW_WORKLOADS[0]["tolerance"])
    for out, ref in zip(optimized.run(*inputs), reference_run(*inputs)):
        assert check(out, ref, tol).passed


# -- GPU: the driver subprocess end to end -------------------------------------------------------------


def run_cli(tmp_path, solution: dict, *extra: str) -> tuple[int, list[dict], list[dict]]:
    from evaluation import cli

    solution_path = tmp_path / "solution.json"
    solution_path.write_text(json.dumps(solution))
    out = tmp_path / "out"
    rc = cli.main(["--solution", str(solution_path), "--out", str(out), *extra])
    traces = [json.loads(l) for l in (out / "traces.jsonl").read_text().splitlines()]
    sides = [json.loads(l) for l in (out / "side.jsonl").read_text().splitlines() if l.strip()]
    return rc, traces, sides


@pytest.mark.parametrize("name", sorted(DRIVER_ONLY))
def test_driver_global_patch_is_caught_end_to_end(name, tmp_path, monkeypatch):
    """Integrity check #1 (§2.2 step 10) runs before any GPU work, so this runs on the CPU too (past
    the CLI's GPU requirement)."""
    from evaluation import cli

    monkeypatch.setattr(cli, "cuda_available", lambda: True)
    rc, traces, sides = run_cli(tmp_path, _package(name), "--workloads", "0", "--baselines", "none", "--rounds", "1")
    assert rc != 0
    assert_expected_outcome(name, traces[0], [])


@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted({**EXPECTED, **GPU_ONLY, **DRIVER_ONLY}))
def test_negative_control_on_gpu(name, tmp_path):
    rc, traces, sides = run_cli(tmp_path, _package(name, dps=name not in RETURN_STYLE),
                                "--workloads", "0", "--baselines", "none", "--rounds", "3")
    assert rc != 0
    assert_expected_outcome(name, traces[0], sides[0]["hardening"] if sides else [])


@needs_gpu
@pytest.mark.gpu
def test_solution_with_baselines_on_gpu(tmp_path):
    solution_path = ROOT / "solution.json"
    if not solution_path.exists():
        pytest.skip("no solution.json (run submit.py)")
    from evaluation.staging import load_solution

    rc, traces, sides = run_cli(tmp_path, load_solution(solution_path), "--workloads", "0,4")
    assert [t["evaluation"]["status"] for t in traces] == ["PASSED", "PASSED"], traces
    assert all(s["baselines"]["optimized"].get("passed") for s in sides), sides
