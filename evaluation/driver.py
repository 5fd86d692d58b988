"""The evaluation driver: one subprocess for all workloads of a staged solution (docs/evaluator.md §2.2-2.3).

    python -P -m evaluation.driver <staging dir> --side <side.jsonl> [--rounds 10]
        [--baselines none|<comma list>] [--offline-dir DIR]

Writes one Trace JSON line per workload to the REAL stdout (everything else, user prints included,
goes to stderr) and one side-data JSON line per workload to `--side` (margins, hardening findings,
timing spans, baselines). Deliberate deviation (§7): our modules, torch, triton and cupti are imported
BEFORE the staging dir is put on `sys.path` (hence `-P`), so a source file cannot shadow them.
"""

import os
import sys

# §2.2 step 1: keep the real stdout for traces; fd 1 and sys.stdout now point at stderr. Must run
# before torch (or anything that may print) is imported.
_TRACE_STREAM = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr

import argparse  # noqa: E402
import importlib  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402,F401  (imported before the staging dir can shadow it)

from evaluation import compare, gemm_reference, guards, hardening, io_conventions, timer  # noqa: E402
from evaluation.baselines import run_baselines  # noqa: E402
from evaluation.staging import BenchmarkConfig, int_at_least  # noqa: E402
from evaluation.trace import REWARD_HACK, RUNTIME_ERROR, Log, dumps, make_trace  # noqa: E402
from evaluation.workload_eval import Harness, WorkloadEvaluation  # noqa: E402
from evaluation.io_conventions import custom_input_generator  # noqa: E402
from evaluation.offline import offline_sources  # noqa: E402


def emit(trace: dict) -> None:
    _TRACE_STREAM.write(dumps(trace) + "\n")
    _TRACE_STREAM.flush()


def load_reference(staging: Path, definition: dict):
    """§2.2 step 6: `_reference.py` executed from a file spec, not registered in sys.modules."""
    path = staging / "_reference.py"
    path.write_text(definition["reference"])
    spec = importlib.util.spec_from_file_location("_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_user_function(solution: dict):
    """§2.2 step 8 for Python languages: cpp_extension blocked, then import `<file minus .py>`."""
    guards.block_cpp_extension()
    entry_file, function = solution["spec"]["entry_point"].split("::")
    module = importlib.import_module(entry_file.removesuffix(".py").replace("/", "."))
    return getattr(module, function)


REPO_ROOT = Path(__file__).resolve().parent.parent


def isolate_from_repo() -> None:
    """Drop the repository root from sys.path once our modules are imported: the repo's own
    `solution/` package (a regular package) would otherwise win over the staged `solution/`
    directory (a namespace portion) and the working tree would be evaluated instead of the package."""
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO_ROOT]


# §2.2 step 7: the official driver's eleven global functions, bound here under their official names
# to what does their work in this evaluator, so that a solution patching one of them through
# sys.modules["__main__"] (this module, run with -m) gets REWARD_HACK as it would officially (§2.8
# check 2); then this driver's own globals.
time_runnable = timer.time_call
compute_error_stats = compare.check
check_monkey_patch = guards.elapsed_time_patched
check_lazy_outputs = guards.first_lazy_output
check_thread_injection = guards.thread_count
check_eval_integrity = guards.IntegritySnapshot.violated
_call_and_collect_outputs = WorkloadEvaluation.run
gen_inputs = custom_input_generator
allocate_outputs = io_conventions.allocate_outputs
normalize_outputs = io_conventions.normalize_outputs
make_eval = make_trace
OFFICIAL_INTEGRITY_NAMES = (
    "time_runnable", "compute_error_stats", "check_monkey_patch", "check_lazy_outputs",
    "check_thread_injection", "check_eval_integrity", "_call_and_collect_outputs", "gen_inputs",
    "allocate_outputs", "normalize_outputs", "make_eval",
)
INTEGRITY_NAMES = OFFICIAL_INTEGRITY_NAMES + (
    "emit",
    "load_reference",
    "load_user_function",
    "isolate_from_repo",
    "evaluate_all",
    "main",
)


def evaluate_all(args, staging: Path, side_stream) -> None:
    definition = json.loads((staging / "definition.json").read_text())
    workload_file = staging / "workload.jsonl"
    workloads = [json.loads(l) for l in workload_file.read_text().splitlines() if l.strip()] if workload_file.exists() else []
    config_file = staging / "config.json"
    config = BenchmarkConfig(**json.loads(config_file.read_text())) if config_file.exists() else BenchmarkConfig()
    solution = json.loads((staging / "solution.json").read_text())
    reference = load_reference(staging, definition)

    integrity = guards.IntegritySnapshot(globals(), INTEGRITY_NAMES)
    flags_at_start = hardening.torch_flags()
    isolate_from_repo()
    shadowing = hardening.shadowing_modules([s["path"] for s in solution["sources"]], REPO_ROOT)
    import_findings = [f"sources shadow installed modules: {', '.join(shadowing)}"] if shadowing else []
    watch = hardening.ImportWatch()  # imports torch._dynamo: before the staging dir is on sys.path
    sys.path.insert(0, str(staging))
    user_fn = load_user_function(solution)
    import_findings += watch.findings()
    device = torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")

    def emit_all(status: str, log: str) -> None:
        for workload in workloads:
            emit(make_trace(definition["name"], workload, solution["name"], status, log))

    violated = integrity.violated()
    if violated:
        return emit_all(REWARD_HACK, Log.integrity(violated))
    clock_line = None
    if config.lock_clocks:
        locked = os.environ.get("SOL_EXECBENCH_CLOCKS_LOCKED") == "1"
        clock_line = f"Clocks locked: {'yes' if locked else 'no'}"
        if not locked:
            return emit_all(RUNTIME_ERROR, f"{clock_line}\n{Log.CLOCKS_NOT_LOCKED}")

    random.seed(config.seed)  # §2.2 step 12: once, for all workloads
    torch.manual_seed(config.seed)
    torch.cuda.manual_seed_all(config.seed)

    custom_fn = getattr(reference, definition["custom_inputs_entrypoint"]) if definition.get("custom_inputs_entrypoint") else None
    gen_inputs, reference_run = custom_input_generator(definition, custom_fn, device), reference.run
    if args.offline_dir:
        gen_inputs, reference_run = offline_sources(Path(args.offline_dir), definition, device)
    harness = Harness(
        definition=definition,
        solution_name=solution["name"],
        user_fn=user_fn,
        dps=solution["spec"].get("destination_passing_style", True),
        reference_run=reference_run,
        reference_timed=reference.run,
        gen_inputs=gen_inputs,
        integrity=integrity,
        config=config,
        device=device,
        synchronize=torch.cuda.synchronize if device.type == "cuda" else (lambda: None),
        rounds=args.rounds,
        clock_line=clock_line,
        replay_check=not args.offline_dir,
        flags_at_start=flags_at_start,
        import_findings=import_findings,
    )
    baselines = [name for name in args.baselines.split(",") if name and name != "none"]
    for workload in workloads:
        result = WorkloadEvaluation(harness, workload).run()
        emit(result.trace)
        if result.inputs is not None:
            if baselines:
                # Not in the official run: keep the seeded RNG stream (§2.2 step 12) as if they never ran,
                # so the next workloads draw the official inputs.
                with torch.random.fork_rng(devices=[harness.device] if harness.device.type == "cuda" else []):
                    result.side["baselines"] = run_baselines(
                        baselines, reference.run, result, workload, config, result.trace["evaluation"]["performance"]
                    )
            axes = workload["axes"]  # the four GEMMs alone: a reference line, with or without baselines
            result.side["gemm_reference"] = gemm_reference.side_entry(axes["batch_size"] * axes["seq_len"], config)
        side_stream.write(json.dumps(result.side, allow_nan=False) + "\n")
        side_stream.flush()
        del result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -P -m evaluation.driver")
    parser.add_argument("staging", type=Path)
    parser.add_argument("--side", type=Path, required=True)
    parser.add_argument("--rounds", type=int_at_least(1), default=10)
    parser.add_argument("--baselines", default="none", help="comma list of evaluation.baselines names")
    parser.add_argument("--offline-dir", default=None)
    args = parser.parse_args(argv)
    # evaluation.cli passes paths it made; run by hand, a wrong one is one line, not a traceback.
    # The paths are used after the chdir below: resolved first, each means what the check saw.
    args.staging, args.side = args.staging.resolve(), args.side.resolve()
    if args.offline_dir:
        args.offline_dir = str(Path(args.offline_dir).resolve())
    if not (args.staging / "definition.json").is_file():
        parser.error(f"{args.staging}: not a staging folder (no definition.json there)")
    if args.side.is_dir() or not args.side.parent.is_dir():
        parser.error(f"--side {args.side}: not a file in an existing folder")
    if args.offline_dir and not Path(args.offline_dir).is_dir():
        parser.error(f"--offline-dir {args.offline_dir}: not a folder")
    os.chdir(args.staging)
    with open(args.side, "w") as side_stream:
        evaluate_all(args, args.staging, side_stream)


if __name__ == "__main__":
    main()
