"""Evaluate a solution.json like the official CLI, plus baselines, SOL scores and a plot.

    python -m evaluation.cli --solution solution.json --out out/eval
    python -m evaluation.cli --workloads 0,3 --baselines none
    python -m evaluation.cli --offline --workloads 0     # stored inputs/outputs under .cache/ffn042

Stages the solution (docs/evaluator.md §2.1), runs the driver as ONE subprocess for all workloads (§2.2)
with `PYTORCH_ALLOC_CONF=expandable_segments:True` (§4.1), parses its trace lines, and writes to
`--out`: traces.jsonl, side.jsonl, results.json (rows, geomeans, provenance), table.txt, latency.png.
A wall-clock limit synthesizes TIMEOUT traces for unfinished workloads; a driver crash synthesizes
RUNTIME_ERROR ones (the original emits nothing then, §2.4). Exit 0 iff every workload PASSED;
1 otherwise; 2 when all passed but a hardening check found something, at once without a CUDA GPU
(evaluation.staging.NO_GPU_STATUS, as every GPU tool), or (argparse) for a usage error: an unknown option,
workload or baseline name, a number out of range, a --solution that cannot be read or staged.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from evaluation import offline, report
from evaluation.provenance import git_commit, host_cpu
from evaluation.staging import (BenchmarkConfig, check_source_paths, folder_refusal, int_at_least, load_solution,
                                no_gpu, normalize_solution, stage)
from evaluation.trace import PASSED, RUNTIME_ERROR, TIMEOUT, dumps, make_trace
from reference.problem import DEFINITION, ROOT, WORKLOAD_PATH

DEFAULT_TIMEOUT_S = 600  # the official CLI's --timeout default (§2.4), baselines included here


def select_workloads(raw: list[dict], spec: str | None) -> list[dict]:
    """`spec`: comma-separated indices (file order) or uuids; None = all.

    Raises ValueError (one line) for an entry that names no workload, so that a typo is a usage
    error instead of an empty run that "passes".
    """
    if spec is None:
        return raw
    uuids = {w["uuid"]: w for w in raw}
    chosen = []
    for item in (entry.strip() for entry in spec.split(",")):
        if item.isdigit() and int(item) < len(raw):
            chosen.append(raw[int(item)])
        elif item in uuids:
            chosen.append(uuids[item])
        else:
            raise ValueError(f"--workloads: {item!r} is neither an index 0-{len(raw) - 1} nor a workload uuid")
    return chosen


def select_baselines(spec: str, known: tuple[str, ...]) -> list[str]:
    """`spec`: comma-separated names of `known` (the baselines registry), `all` or `none`."""
    if spec == "none":
        return []
    if spec == "all":
        return list(known)
    names = [name.strip() for name in spec.split(",")]
    if {"all", "none"} & set(names):  # else "unknown 'all'" below, beside a list that names it
        raise ValueError(f"--baselines {spec!r}: 'all' and 'none' stand alone, not in a list with other names")
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"--baselines: unknown {', '.join(map(repr, unknown))} (known: {', '.join(known)}, all, none)")
    return names


def timeout_seconds(text: str) -> float:
    """argparse type for --timeout: finite and > 0 (nan, inf or <= 0 would never fire or fire at once),
    and within what threading.Timer can wait (beyond it the timer thread dies and nothing fires)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and 0 < value <= threading.TIMEOUT_MAX):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a number of seconds > 0 and <= {threading.TIMEOUT_MAX:.0f}")
    return value


def read_solution(path: Path) -> dict:
    """--solution loaded (empty `content` filled from files beside it) and checked as staging will
    use it; ValueError (one line) otherwise, so that a bad file is a usage error before the GPU check
    instead of a traceback after it."""
    try:
        solution = load_solution(path)
        check_source_paths(normalize_solution(solution))
    except OSError as e:  # missing, a folder, unreadable
        raise ValueError(f"--solution {path}: {e.strerror or e}") from None
    except (KeyError, TypeError, AttributeError) as e:  # JSON, but not shaped like a solution
        reason = _schema_refusal(json.loads(path.read_text())) or f"not a solution object ({type(e).__name__}: {e})"
        raise ValueError(f"--solution {path}: {reason}") from None
    except ValueError as e:  # not UTF-8, not JSON, a bad source path (StagingError)
        raise ValueError(f"--solution {path}: {e}") from None
    reason = _schema_refusal(solution)
    if reason:
        raise ValueError(f"--solution {path}: {reason}")
    return solution


def _schema_refusal(solution: object) -> str | None:
    """What the solution schema says against `solution`, or None (also where the schemas, optional,
    are not installed)."""
    try:
        from schemas.validate import validate_solution
    except ImportError:
        return None
    try:
        validate_solution(solution)
    except ValueError as e:  # SchemaError
        return str(e)
    return None


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _command_output(command: list[str], cwd: Path | None = None) -> str | None:
    try:
        return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=20).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def provenance(traces: list[dict], timer: str, baselines: list[str]) -> dict:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    hardware = next((t["evaluation"]["environment"]["hardware"] for t in traces if t.get("evaluation")), None)
    return {
        "gpu": hardware,
        "host_cpu": host_cpu(),
        "driver": _command_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton_version,
        "python": sys.version.split()[0],
        "git_commit": git_commit(),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "timer": timer,
        "method": "docs/evaluator.md §2.2-2.9 reproduction (evaluation.driver); the GEMM reference "
                  + (f"and the baselines {', '.join(baselines)} " if baselines else "") + "timed in the same run",
    }


def validate(traces: list[dict]) -> list[str]:
    """Schema errors by `schemas.validate.validate_trace`, where that module exists."""
    try:
        from schemas.validate import validate_trace
    except ImportError:
        return []
    errors = []
    for trace in traces:
        try:
            validate_trace(trace)
        except Exception as e:  # SchemaError, or anything the validator raises
            errors.append(f"{trace['workload']['uuid']}: {e}")
    return errors


def run_driver(staging: Path, side_path: Path, args, total: int) -> tuple[list[dict], int | None, bool]:
    """Driver subprocess; returns (traces, return code, timed out). Progress goes to stderr."""
    command = [sys.executable, "-P", "-m", "evaluation.driver", str(staging), "--side", str(side_path),
               "--rounds", str(args.rounds), "--baselines", ",".join(args.baselines) or "none"]
    if args.offline:
        command += ["--offline-dir", str(Path(args.cache_dir).resolve())]
    env = {**os.environ, "PYTORCH_ALLOC_CONF": "expandable_segments:True",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen(command, cwd=staging, env=env, stdout=subprocess.PIPE, text=True)
    timed_out = threading.Event()

    def expire():
        timed_out.set()
        process.kill()

    timer = threading.Timer(args.timeout, expire)
    timer.start()
    traces = []
    try:
        for line in process.stdout:
            if line.strip().startswith("{"):
                trace = json.loads(line)
                traces.append(trace)
                evaluation = trace["evaluation"]
                latency = (evaluation.get("performance") or {}).get("latency_ms")
                shown = f"{latency:.4f} ms" if latency is not None else evaluation["log"].splitlines()[:1]
                print(f"[{len(traces)}/{total}] {trace['workload']['uuid']} {evaluation['status']} {shown}",
                      file=sys.stderr, flush=True)
        process.wait()
    finally:
        timer.cancel()
    return traces, process.returncode, timed_out.is_set()


def fill_missing(traces: list[dict], workloads: list[dict], solution_name: str, rc, timed_out: bool) -> list[dict]:
    """Synthesized traces for workloads the driver left without one (§7; the original emits none)."""
    done = {t["workload"]["uuid"] for t in traces}
    status = TIMEOUT if timed_out else RUNTIME_ERROR
    log = "Evaluation timed out" if timed_out else f"Driver exited with code {rc} before this workload"
    missing = [make_trace(DEFINITION["name"], w, solution_name, status, log) for w in workloads if w["uuid"] not in done]
    return traces + missing


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (exit 2), without the usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> OneLineParser:
    """The command line: every option with its help and its default."""
    from evaluation.baselines import BASELINE_NAMES, DEFAULT_BASELINES

    parser = OneLineParser(prog="python -m evaluation.cli", description=__doc__.splitlines()[0])
    parser.add_argument("--solution", default=str(ROOT / "solution.json"),
                        help="the solution.json to evaluate (default: %(default)s)")
    parser.add_argument("--workloads", default=None,
                        help="workload indices (file order) or uuids, comma-separated (default: all)")
    parser.add_argument("--rounds", type=int_at_least(1), default=10,
                        help="correctness rounds per workload, each on fresh inputs (default: %(default)s)")
    parser.add_argument("--warmup", type=int_at_least(0), default=10,
                        help="untimed calls before the timed ones (default: %(default)s)")
    parser.add_argument("--iterations", type=int_at_least(1), default=50,
                        help="timed calls per workload; the latency is their median (default: %(default)s)")
    parser.add_argument("--baselines", default=",".join(DEFAULT_BASELINES),
                        help=f"comma list of {', '.join(BASELINE_NAMES)}; all; none (default: %(default)s)")
    parser.add_argument("--offline", action="store_true",
                        help="inputs and expected outputs from stored safetensors under --cache-dir")
    parser.add_argument("--cache-dir", default=str(ROOT / offline.CACHE_DIR),
                        help="where --offline keeps its safetensors (default: %(default)s)")
    parser.add_argument("--timeout", type=timeout_seconds, default=DEFAULT_TIMEOUT_S,
                        help="wall-clock limit in seconds for the driver, all workloads together (default: %(default)s)")
    parser.add_argument("--out", default="out/eval", help="folder for the results files (default: %(default)s)")
    parser.add_argument("--keep-staging", action="store_true",
                        help="keep the staging dir (deleted by default, §2.1)")
    return parser


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[dict]]:
    """Arguments, the selected (normalized) workloads, `args.baselines` as a list and
    `args.loaded_solution` (the --solution file's object); every bad value is a usage error (exit 2)
    before anything runs."""
    from evaluation.baselines import BASELINE_NAMES

    parser = build_parser()
    args = parser.parse_args(argv)

    from evaluation.staging import normalize_workload

    raw_workloads = [json.loads(l) for l in WORKLOAD_PATH.read_text().splitlines() if l.strip()]
    try:
        workloads = [normalize_workload(w) for w in select_workloads(raw_workloads, args.workloads)]
        args.baselines = select_baselines(args.baselines, BASELINE_NAMES)
        args.loaded_solution = read_solution(Path(args.solution))
    except ValueError as e:
        parser.error(str(e))
    for flag, folder in (("--out", args.out), ("--cache-dir", args.cache_dir if args.offline else None)):
        refusal = folder and folder_refusal(Path(folder))
        if refusal:
            parser.error(f"{flag} {folder}: {refusal}")
    return args, workloads


def main(argv: list[str] | None = None) -> int:
    args, workloads = parse_args(argv)
    if not cuda_available():
        return no_gpu("python -m evaluation.cli")
    solution = args.loaded_solution
    if args.offline:
        for workload in workloads:
            offline.ensure_fixture(Path(args.cache_dir), workload)
    config = BenchmarkConfig(warmup_runs=args.warmup, iterations=args.iterations)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    staging = stage(DEFINITION, workloads, solution, config)
    side_path = (out / "side.jsonl").resolve()
    if args.keep_staging:
        print(f"staging: {staging}", file=sys.stderr)
    try:
        traces, rc, timed_out = run_driver(staging, side_path, args, len(workloads))
    finally:
        if not args.keep_staging:
            shutil.rmtree(staging, ignore_errors=True)
    traces = fill_missing(traces, workloads, solution["name"], rc, timed_out)
    sides = [json.loads(l) for l in side_path.read_text().splitlines() if l.strip()] if side_path.exists() else []
    side_by_uuid = {side["uuid"]: side for side in sides}
    timer = next((s["timing"]["timer"] for s in sides if "timing" in s), "unknown")

    (out / "traces.jsonl").write_text("".join(dumps(t) + "\n" for t in traces))
    schema_errors = validate(traces)
    env = provenance(traces, timer, args.baselines)
    rows = report.build_rows(traces, side_by_uuid, env["gpu"] or "")
    totals = report.summary(rows)
    table = report.format_table(rows, totals, timer)
    results = {"provenance": env, "summary": totals, "rows": [row.to_json() for row in rows],
               "schema_errors": schema_errors, "offline": args.offline}
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "table.txt").write_text(table + "\n")
    print(table, file=sys.stderr)
    for error in schema_errors:
        print(f"trace schema error: {error}", file=sys.stderr)
    try:
        report.plot(rows, out / "latency.png", f"{solution['name']} on {env['gpu']} ({timer})")
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)

    if any(t["evaluation"]["status"] != PASSED for t in traces) or schema_errors:
        return 1
    return 2 if any(row.findings for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
