"""Write the generated tables of README.md and docs/performance.md from results files (never typed
by hand).

    python bench/readme_table.py                      # RESULTS_FILE, AB_FILE, REAL_USE_FILE -> the docs
    python bench/readme_table.py --check              # one line: up to date, or out of date (exit 1)
    python bench/readme_table.py --results FILE       # another evaluator results file

README.md, between `<!-- perf:begin -->` and `<!-- perf:end -->`: the evaluator's results per
workload (python -m evaluation.cli): latency, the GEMM reference (evaluation.gemm_reference) and the
ratio of the two, the worst output's error against its bound, and, where the file measured baselines,
a column per baseline and S (H200) against the fastest correct one. docs/performance.md, between
`<!-- stages:begin -->` and `<!-- stages:end -->`: each stage kernel's time per workload from an A/B
file of bench/ab.py (the checkout's side); between `<!-- real-use:begin -->` and
`<!-- real-use:end -->`: host time and back-to-back wall-clock per call beside the GPU latency
(bench/real_use.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import shlex
import sys
from pathlib import Path

from evaluation.baselines import LABELS
from evaluation.report import geomean
from evaluation.roofline import sol_score
from reference.problem import ROOT

BEGIN, END = "<!-- perf:begin -->", "<!-- perf:end -->"
STAGES_BEGIN, STAGES_END = "<!-- stages:begin -->", "<!-- stages:end -->"
REAL_USE_BEGIN, REAL_USE_END = "<!-- real-use:begin -->", "<!-- real-use:end -->"
RESULTS_FILE = ROOT / "results" / "eval_nobaselines_b9a5b37_h100.json"  # the evaluation the README reports
AB_FILE = ROOT / "results" / "ab_b9a5b37_h100.json"  # the stage times docs/performance.md reports
REAL_USE_FILE = ROOT / "results" / "real_use_b9a5b37_h100.json"  # the real-use measurement it reports
# the stage each kernel runs, as docs/performance.md's table has them
STAGE_OF = {"layernorm_backward_kernel": "stage 1", "gelu_backward_gemm_kernel": "stage 2",
            "gelu_backward_ws_kernel": "stage 2", "fp16_copy_kernel": "copy", "input_grad_gemm_kernel": "stage 3",
            "weight_grad_kernel": "stage 4", "weight_grad_ws_kernel": "stage 4", "column_sums_kernel": "sums"}


class UsageError(Exception):
    """A bad argument or input file: reported as one line."""


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1000:.1f}"


def baseline_columns(rows: list[dict]) -> list[str]:
    """The baselines any row measured, in the registry's order (names it does not know last)."""
    measured = {name for row in rows for name in row["baselines_ms"]}
    return [name for name in LABELS if name in measured] + sorted(measured - set(LABELS))


def fastest_baseline(row: dict) -> tuple[str, float] | None:
    """(name, latency ms) of the row's fastest correct baseline: the T_b of its S."""
    baselines = row["baselines_ms"]
    return min(baselines.items(), key=lambda item: item[1]) if baselines else None


def score(row: dict) -> float | None:
    """S (H200) = 1/(1 + (T - T_SOL)/(T_b - T_SOL)), T_b the fastest baseline (docs/evaluator.md §2.10)."""
    fastest = fastest_baseline(row)
    if fastest is None or not row["latency_ms"] or not row["t_sol_local_ms"]:
        return None
    return sol_score(row["latency_ms"], row["t_sol_local_ms"], fastest[1])


def _speedup(baseline_ms: float | None, latency_ms: float | None) -> float | None:
    return baseline_ms / latency_ms if baseline_ms and latency_ms else None


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x faster"


def _fixed(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _label(name: str) -> str:
    return LABELS.get(name, name)


def _row_line(row: dict, names: list[str], with_gemm: bool) -> str:
    fastest = fastest_baseline(row)
    worst = max(row["worst_ratio"].values()) if row["worst_ratio"] else None
    cells = [row["label"], str(row["tokens"]), row["status"], f"**{_us(row['latency_ms'])}**",
             *[_us(row["baselines_ms"].get(name)) for name in names]]
    if names:
        cells += [_us(row["t_sol_local_ms"]), "-" if fastest is None else f"{_us(fastest[1])} ({_label(fastest[0])})",
                  _fixed(score(row))]
    if with_gemm:
        cells += [_us(row.get("gemm_reference_ms")), _fixed(row.get("ratio_to_gemm_reference"), 2)]
    cells.append(_fixed(worst))
    return "| " + " | ".join(cells) + " |"


def _geomean_line(results: dict, names: list[str], with_gemm: bool) -> str:
    rows, s = results["rows"], results["summary"]
    speedup = s["geomean_speedup_vs"]
    fastest = [fastest_baseline(row) for row in rows]
    cells = ["**geomean**", "", f"{s['passed']}/{s['total']} passed", f"**{_us(s['geomean_latency_ms'])}**",
             *[_times(speedup.get(name)) for name in names]]
    if names:
        cells += [_us(s["geomean_t_sol_local_ms"]),
                  _times(geomean(_speedup(f[1], row["latency_ms"]) for row, f in zip(rows, fastest) if f)),
                  _fixed(geomean(score(row) for row in rows))]
    if with_gemm:
        cells += [_us(geomean(row.get("gemm_reference_ms") for row in rows)),
                  _fixed(geomean(row.get("ratio_to_gemm_reference") for row in rows), 2)]
    cells.append("")
    return "| " + " | ".join(cells) + " |"


def render(results: dict, source: str) -> str:
    p, rows = results["provenance"], results["rows"]
    names = baseline_columns(rows)
    with_gemm = any(row.get("gemm_reference_ms") for row in rows)
    header = ["workload", "tokens", "status", "solution", *[_label(n) for n in names],
              *(["T_SOL H200", "T_b (fastest baseline)", "S (H200)"] if names else []),
              *(["GEMM ref", "solution / GEMM ref"] if with_gemm else []), "worst err/bound"]
    align = ["---", "---:", "---", "---:", *["---:"] * (len(header) - 4)]
    lines = [
        f"Measured on {p['gpu']} (driver {p['driver']}, CUDA {p['cuda']}, torch {p['torch']}, "
        f"triton {p['triton']}), commit {p['git_commit']}, {p['date']}, timer: {p['timer']} "
        f"({p['method']}). Source: `{source}`. Latencies in µs (median of 50 calls, cold L2).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(align) + "|",
        *[_row_line(row, names, with_gemm) for row in rows],
        _geomean_line(results, names, with_gemm),
        "",
        *(["S (H200) = 1/(1 + (T - T_SOL)/(T_b - T_SOL)) with the local roofline T_SOL (989 TFLOP/s dense fp16, "
           "4.8 TB/s at 2 bytes per element) and T_b = the fastest correct baseline of the workload measured in "
           "the same run, named in its column."] if names else []),
        "worst err/bound = max over outputs and rounds of |err| / (atol + rtol |ref|) (below 1: every element "
        "inside the official tolerance).",
    ]
    if with_gemm:
        lines.append(
            "GEMM ref = the backward's four GEMMs alone as fp16 cuBLAS GEMMs with fp32 accumulation, one CUDA "
            "graph, same timer (`evaluation/gemm_reference.py`): a reference line, not a baseline (it computes "
            "only the GEMMs)."
        )
    return "\n".join(lines)


def render_stages(results: dict, source: str) -> str:
    """Each stage kernel's CUPTI time per workload (the checkout's side of a bench/ab.py file, median
    over the rounds), beside the call and the GEMM reference."""
    p, rows = results["provenance"], results["rows"]
    stages = list(dict.fromkeys(STAGE_OF.values()))
    lines = [
        f"Measured on {p['gpu']} (CUDA {p['cuda']}, torch {p['torch']}, triton {p['triton']}), "
        f"commit {p['commit']}, {p['date']} ({p['method']}). Source: `{source}`. In µs, medians over the "
        "rounds; a stage's time is its kernel's (CUPTI); stages 3 and 4, the copy and the sums overlap where the "
        "plan runs them side by side, so the stages add up to more than the call there.",
        "",
        "| tokens | call | GEMM ref | call / GEMM ref | " + " | ".join(stages) + " |",
        "|---:|---:|---:|---:|" + "---:|" * len(stages),
    ]
    for row in rows:
        kernels: dict[str, list[float]] = {}
        for one_round in row["times"]["checkout"]:
            for name, us in one_round["kernels_us"].items():
                kernels.setdefault(STAGE_OF.get(name, name), []).append(us)
        cells = [str(row["tokens"]), f"{row['median_us']['checkout']:.1f}", f"{row['median_us']['gemm_reference']:.1f}",
                 f"{row['ratio_to_gemm_reference']['checkout']:.2f}",
                 *[f"{statistics.median(kernels[stage]):.1f}" if stage in kernels else "-" for stage in stages]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_real_use(results: dict, source: str) -> str:
    """Host time and back-to-back wall-clock per call beside the GPU latency (bench/real_use.py)."""
    p = results["provenance"]
    layers = results["rows"][0]["layers"]
    lines = [
        f"Measured on {p['gpu']} (torch {p['torch']}, triton {p['triton']}), commit {p['commit']}, {p['date']}. "
        f"Source: `{source}`. Per call, in µs: host time of one call (no synchronize; median), after the GPU "
        "drained and during back-to-back calls; wall-clock per call over back-to-back calls with one synchronize "
        f"at the end (same buffers every call; a fresh set of addresses every call; {layers} sets of buffers in "
        "turn, as a model's layers call), and the official-style GPU latency of the same call; the goal: "
        "back-to-back wall-clock at most 1.1 x the GPU latency + 10 µs; host reference: a fixed pure-Python "
        "task's median time before the workload (and after it, where measured: a slow spell of the host shows in it).",
        "",
        f"| workload | tokens | host | host, back-to-back | back-to-back | back-to-back, fresh addresses | "
        f"back-to-back, {layers} layers | GPU latency | wall goal | met | host reference |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
        *[f"| {r['label']} | {r['tokens']} | {r['host_us']:.1f} | {r['host_busy_us']:.1f} | {r['wall_same_us']:.1f} | "
          f"{r['wall_fresh_us']:.1f} | {r['wall_layers_us']:.1f} | {r['gpu_us']:.1f} | {r['target_wall_us']:.1f} | "
          f"{'yes' if r['meets_targets'] else '**no**'} | {r['reference_us']:.1f}"
          + (f" / {r['reference_after_us']:.1f}" if "reference_after_us" in r else "") + " |"
          for r in results["rows"]],
    ]
    return "\n".join(lines)


def updated_readme(readme: str, table: str, begin: str = BEGIN, end: str = END) -> str:
    """The document with the text between `begin` and `end` (each there once, in that order) replaced."""
    if readme.count(begin) != 1 or readme.count(end) != 1 or readme.index(begin) > readme.index(end):
        raise UsageError(f"the document needs {begin} and then {end}, each once")
    start, stop = readme.index(begin) + len(begin), readme.index(end)
    return readme[:start] + "\n" + table + "\n" + readme[stop:]


def _shown_path(path: Path) -> str:
    """The results file as the README names it: relative to the repository when inside it."""
    resolved = path.resolve()
    return resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else str(path)


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot read the {what} {path}: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise UsageError(f"the {what} {path} is not UTF-8 text ({e.reason})") from e


def table_for(results_path: Path, render=render) -> str:
    try:
        results = json.loads(_read(results_path, "results file"))
        if not results["rows"]:
            raise UsageError(f"{results_path} has no rows: no table to write")
        return render(results, _shown_path(results_path))
    except json.JSONDecodeError as e:
        raise UsageError(f"{results_path} is not JSON: {e}") from e
    except (KeyError, TypeError, AttributeError, ValueError) as e:  # ValueError: a string where a number belongs
        raise UsageError(f"{results_path} is not a results file of the tool this table reads: "
                         f"{type(e).__name__} {e}") from e


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS_FILE, help="evaluator results file (default: %(default)s)")
    parser.add_argument("--ab", type=Path, default=AB_FILE, help="bench/ab.py results file (default: %(default)s)")
    parser.add_argument("--real-use", type=Path, default=REAL_USE_FILE,
                        help="bench/real_use.py results file (default: %(default)s)")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md", help="(default: %(default)s)")
    parser.add_argument("--performance", type=Path, default=ROOT / "docs" / "performance.md",
                        help="(default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="only check that the documents are up to date")
    args = parser.parse_args(argv)
    documents = {args.readme: [("--results", args.results, render, BEGIN, END)],
                 args.performance: [("--ab", args.ab, render_stages, STAGES_BEGIN, STAGES_END),
                                    ("--real-use", args.real_use, render_real_use, REAL_USE_BEGIN, REAL_USE_END)]}
    try:
        current, new = {}, {}
        for document, tables in documents.items():
            current[document] = text = _read(document, "document")
            for flag, path, render_table, begin, end in tables:
                try:
                    text = updated_readme(text, table_for(path, render_table), begin, end)
                except UsageError as e:
                    raise UsageError(f"{flag}: {e}") from e
            new[document] = text
    except UsageError as e:
        print(f"readme_table: {e}", file=sys.stderr)
        return 2
    stale = [document for document in documents if new[document] != current[document]]
    if args.check:
        shown = ", ".join(_shown_path(d) for d in documents)
        if stale:
            rewrite = shlex.join(["python", "bench/readme_table.py",
                                  *(a for a in (sys.argv[1:] if argv is None else argv) if a != "--check")])
            print(f"{', '.join(_shown_path(d) for d in stale)}: generated tables out of date: run {rewrite}",
                  file=sys.stderr)
            return 1
        print(f"{shown}: generated tables up to date")
        return 0
    for document in stale:
        document.write_text(new[document], encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
