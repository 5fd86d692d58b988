"""Where a faster call moves the score most: each workload's SOL score and its elasticity, from an
evaluator results file, and the geometric-mean score with some workloads' times replaced.

    python bench/score_elasticity.py                                  # results/eval_b6c01ec.json
    python bench/score_elasticity.py --results FILE --what-if 131072=2428,17312=344

Per workload, S = 1 / (1 + (T - T_SOL) / (T_b - T_SOL)) (evaluation.roofline.sol_score), on two
scales: NVIDIA's published B200 T_SOL and T_b with this run's (H200) T ("B200 scale", as the
evaluator's score_b200), and the H200's own T_SOL and fastest measured baseline ("local"). Its
elasticity is the relative change of S for a relative change of T,

    d ln S / d ln T = -T S / (T_b - T_SOL),

so a workload's share of the board's geometric mean (over 16 workloads) moves by about
elasticity x (relative change of T) / 16. A workload far from its T_SOL relative to its
T_b - T_SOL has the larger elasticity: the same per cent there is worth more. `--what-if` replaces
the named workloads' T (us, by token count) and prints both geometric means before and after (a
projection from measured times, not a measurement).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from evaluation.roofline import sol_score
from reference.problem import ROOT

RESULTS_FILE = ROOT / "results" / "eval_b6c01ec.json"


class UsageError(Exception):
    """A bad argument or input file: reported as one line."""


def elasticity(t: float, t_sol: float, t_b: float) -> float:
    """d ln S / d ln T at T = t (0 where T_b <= T_SOL: S is then a step)."""
    if t_b <= t_sol:
        return 0.0
    return -t * sol_score(t, t_sol, t_b) / (t_b - t_sol)


def scales(row: dict) -> dict[str, tuple[float, float]]:
    """(T_SOL, T_b) in ms on each scale the row has."""
    out = {}
    if row.get("t_sol_b200_ms") and row.get("t_b_b200_ms"):
        out["b200"] = (row["t_sol_b200_ms"], row["t_b_b200_ms"])
    if row.get("t_sol_local_ms") and row.get("t_b_local_ms"):
        out["local"] = (row["t_sol_local_ms"], row["t_b_local_ms"])
    return out


def geomean_scores(rows: list[dict], times_ms: dict[int, float]) -> dict[str, float]:
    """The geometric mean of S on each scale, with T from `times_ms` by token count."""
    logs: dict[str, list[float]] = {}
    for row in rows:
        for scale, (t_sol, t_b) in scales(row).items():
            logs.setdefault(scale, []).append(math.log(sol_score(times_ms[row["tokens"]], t_sol, t_b)))
    return {scale: math.exp(sum(v) / len(v)) for scale, v in logs.items()}


NUMERIC_FIELDS = ("latency_ms", "t_sol_b200_ms", "t_b_b200_ms", "t_sol_local_ms", "t_b_local_ms")


def _positive(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def load_rows(path: Path) -> list[dict]:
    try:
        rows = json.loads(path.read_text())["rows"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UsageError(f"{path}: not an evaluator results file ({type(error).__name__}: {error})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise UsageError(f"{path}: not an evaluator results file (its \"rows\" are not a list of objects)")
    for r in rows:
        bad = [f for f in NUMERIC_FIELDS if r.get(f) is not None and not _positive(r[f])]
        if not isinstance(r.get("tokens"), int) or r["tokens"] < 1 or bad:
            raise UsageError(f"{path}: a row's tokens or {', '.join(bad) or 'times'} are not positive numbers: "
                             f"{ {k: r.get(k) for k in ('tokens', *bad)} }")
    rows = [r for r in rows if r.get("latency_ms") and scales(r)]
    if not rows:
        raise UsageError(f"{path}: no row with a latency and a score")
    return sorted(rows, key=lambda r: r["tokens"])


MAX_WHAT_IF_US = 1e9  # a what-if time: 1000 s is past any sense already


def parse_what_if(arg: str, tokens: set[int]) -> dict[int, float]:
    """'131072=2428,17312=344' -> {131072: 2.428, 17312: 0.344} (ms)."""
    out = {}
    for item in arg.split(","):
        try:
            k, us = item.split("=")
            k, us = int(k), float(us)
        except ValueError:
            raise UsageError(f"--what-if {arg!r}: expected TOKENS=US[,TOKENS=US...]") from None
        if k not in tokens:
            raise UsageError(f"--what-if {item!r}: no workload of {k} tokens in the file")
        if k in out:
            raise UsageError(f"--what-if {arg!r}: {k} tokens given twice")
        if not 0 < us < MAX_WHAT_IF_US:
            raise UsageError(f"--what-if {item!r}: the time must be a number of us above 0 and below "
                             f"{MAX_WHAT_IF_US:g}")
        out[k] = us / 1e3
    return out


def report(rows: list[dict], what_if: dict[int, float]) -> str:
    lines = ["tokens    T us   S b200  elasticity b200   S local  elasticity local"]
    for row in rows:
        t = row["latency_ms"]
        cells = []
        for scale in ("b200", "local"):
            if scale in scales(row):
                t_sol, t_b = scales(row)[scale]
                cells += [f"{sol_score(t, t_sol, t_b):7.3f}", f"{elasticity(t, t_sol, t_b):17.3f}"]
            else:
                cells += [f"{'-':>7}", f"{'-':>17}"]
        lines.append(f"{row['tokens']:6d} {t * 1e3:7.1f}  " + "  ".join(cells))
    measured = {r["tokens"]: r["latency_ms"] for r in rows}
    before = geomean_scores(rows, measured)
    lines.append("geomean S: " + ", ".join(f"{k} {v:.4f}" for k, v in before.items()))
    if what_if:
        after = geomean_scores(rows, {**measured, **what_if})
        lines.append("with " + ", ".join(f"{k} tokens at {v * 1e3:.1f} us" for k, v in what_if.items()) + ": "
                     + ", ".join(f"{k} {after[k]:.4f} ({after[k] / before[k] - 1:+.2%})" for k in after))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--results", type=Path, default=RESULTS_FILE, help="an evaluator results file")
    parser.add_argument("--what-if", help="TOKENS=US[,...]: those workloads' times replaced")
    args = parser.parse_args(argv)
    try:
        rows = load_rows(args.results)
        what_if = {} if args.what_if is None else parse_what_if(args.what_if, {r["tokens"] for r in rows})
        print(report(rows, what_if))
    except UsageError as error:
        print(f"score_elasticity: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
