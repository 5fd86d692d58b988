"""Where a kernel's warps wait: Nsight Compute's warp-stall samples by reason and by instruction, from
its source page exported as CSV.

    ncu --set full --import-source yes -k regex:gelu_backward_ws --launch-skip 2 --launch-count 1 \\
        -o stage2 python bench/profile_call.py --tokens 131072
    ncu --import stage2.ncu-rep --page source --csv --print-source sass > stage2.csv
    python bench/ncu_stalls.py stage2.csv [--top 30]

Prints the kernel's samples in all, their share per stall reason, then the instructions with the
most samples (offset from the kernel's first instruction, share of all samples, times executed, the
instruction, its three largest reasons) each under the instruction before it (a branch that spins
on an mbarrier reads as the wait before it).
"""

from __future__ import annotations

import argparse
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def number(cell: str) -> float:
    """A CSV cell as a number (empty or non-numeric: 0)."""
    try:
        return float(cell.replace(",", "")) if cell else 0.0
    except ValueError:
        return 0.0


def read_source_page(path: str) -> tuple[str, list[dict[str, str]]]:
    """(kernel name, one row a SASS instruction) of `ncu --page source --csv --print-source sass`."""
    with open(path, newline="", encoding="utf-8") as f:
        lines = list(csv.reader(f))
    if len(lines) < 2 or lines[0][:1] != ["Kernel Name"] or not {"Address", "Source", SAMPLES} <= set(lines[1]):
        raise ValueError("not Nsight Compute's source page as CSV (ncu --import R --page source --csv "
                         "--print-source sass)")
    header = lines[1]
    return lines[0][1], [dict(zip(header, line)) for line in lines[2:] if len(line) == len(header)]


def summary(kernel: str, rows: list[dict[str, str]], top: int) -> str:
    reasons = [key for key in (rows[0] if rows else {}) if key.startswith("stall_") and "Not Issued" not in key]
    total = sum(number(r[SAMPLES]) for r in rows) or 1.0
    base = int(rows[0]["Address"], 16) if rows else 0
    out = [f"{kernel}: {total:.0f} warp-stall samples over {len(rows)} instructions", "", "by reason:"]
    by_reason = sorted(((sum(number(r[k]) for r in rows), k) for k in reasons), reverse=True)
    out += [f"  {k[len('stall_'):]:<20} {v:>9.0f} {100 * v / total:5.1f}%" for v, k in by_reason if v]
    out += ["", f"the {top} instructions with the most samples (each under the instruction before it):"]
    ranked = sorted(range(len(rows)), key=lambda i: -number(rows[i][SAMPLES]))[:top]
    for i in sorted(ranked):
        r = rows[i]
        largest = sorted(((number(r[k]), k) for k in reasons), reverse=True)[:3]
        why = " ".join(f"{k[len('stall_'):]}={v:.0f}" for v, k in largest if v)
        before = rows[i - 1]["Source"].strip() if i else ""
        out.append(f"  {'':>8} {'':>6} {'':>10}   ({before})")
        out.append(f"  {int(r['Address'], 16) - base:>#8x} {100 * number(r[SAMPLES]) / total:5.1f}% "
                   f"{number(r.get(EXECUTED, '')):>10.0f}   {r['Source'].strip()}   [{why}]")
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", help="Nsight Compute's source page as CSV")
    parser.add_argument("--top", type=int, default=30, help="instructions to list (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error(f"--top {args.top}: at least 1")
    try:
        kernel, rows = read_source_page(args.csv)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        parser.error(f"{args.csv}: {e.strerror if isinstance(e, OSError) else e}")
    print(summary(kernel, rows, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
