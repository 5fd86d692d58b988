"""Write the README's performance table from an evaluator results file (never typed by hand).

    python bench/readme_table.py                      # RESULTS_FILE -> README.md
    python bench/readme_table.py --check              # exit 1 if README.md is out of date

The table sits between `<!-- perf:begin -->` and `<!-- perf:end -->` in README.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from reference.problem import ROOT

BEGIN, END = "<!-- perf:begin -->", "<!-- perf:end -->"
RESULTS_FILE = ROOT / "results" / "eval_e7215dc.json"  # the evaluation the README reports


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1000:.1f}"


def render(results: dict, source: str) -> str:
    p, s = results["provenance"], results["summary"]
    lines = [
        f"Measured on {p['gpu']} (driver {p['driver']}, CUDA {p['cuda']}, torch {p['torch']}, "
        f"triton {p['triton']}), commit {p['git_commit']}, {p['date']}, timer: {p['timer']} "
        f"({p['method']}). Source: `{source}`. Latencies in µs (median of 50 calls, cold L2).",
        "",
        "| workload | tokens | status | solution | eager ref | torch.compile | optimized PyTorch | T_SOL H200 | S (H200) | worst err/bound |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results["rows"]:
        b = r["baselines_ms"]
        worst = max(r["worst_ratio"].values()) if r["worst_ratio"] else None
        lines.append(
            f"| {r['label']} | {r['tokens']} | {r['status']} | **{_us(r['latency_ms'])}** | {_us(b.get('eager'))} | "
            f"{_us(b.get('compile'))} | {_us(b.get('optimized'))} | {_us(r['t_sol_local_ms'])} | "
            f"{r['score_local']:.3f} | {'-' if worst is None else f'{worst:.3f}'} |"
        )
    speedup = s["geomean_speedup_vs"]
    lines += [
        f"| **geomean** | | {s['passed']}/{s['total']} passed | **{_us(s['geomean_latency_ms'])}** | "
        f"{speedup.get('eager', 0):.2f}x faster | {speedup.get('compile', 0):.2f}x faster | "
        f"{speedup.get('optimized', 0):.2f}x faster | {_us(s['geomean_t_sol_local_ms'])} | "
        f"{s['geomean_score_local']:.3f} | |",
        "",
        "S (H200) = 1/(1 + (T - T_SOL)/(T_b - T_SOL)) with the local roofline T_SOL (989 TFLOP/s dense fp16, "
        "4.8 TB/s at 2 bytes per element) and T_b = the fastest baseline measured in the same run. "
        "worst err/bound = max over outputs and rounds of |err| / (atol + rtol |ref|) (below 1: every "
        "element inside the official tolerance).",
    ]
    return "\n".join(lines)


def updated_readme(readme: str, table: str) -> str:
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    return readme[:start] + "\n" + table + "\n" + readme[end:]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS_FILE)
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    parser.add_argument("--check", action="store_true", help="only check that the README is up to date")
    args = parser.parse_args(argv)
    table = render(json.loads(args.results.read_text()), args.results.relative_to(ROOT).as_posix())
    current = args.readme.read_text()
    new = updated_readme(current, table)
    if args.check:
        if new != current:
            print(f"{args.readme} is out of date: run python bench/readme_table.py", file=sys.stderr)
            return 1
        return 0
    args.readme.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
