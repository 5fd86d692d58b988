"""The GPU's SM clock and power while a call is timed the official way and while it runs back to back
(issue 15: back-to-back calls at the largest workloads took 7-16% longer each than the official-style
latency). Per workload: the official-style timer; calls drained one by one, then back-to-back calls
at once (bench/real_use.py's order); back-to-back calls with the same buffers and with fresh
addresses, each after 0.5 s idle. nvidia-smi samples the clock and power every 20 ms in the
background; each phase's samples are those between its start and end.

    PYTHONPATH=. python bench/experiments/sustained_clocks.py 17312,131072 [--calls 300]   # on the GPU machine
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time

import torch

from bench.experiments.workload_case import description, workload_case, workload_tokens
from bench.gpu import require_gpu
from evaluation.provenance import provenance
from evaluation.shifting_pool import ShiftingMemoryPool
from evaluation.staging import int_at_least
from evaluation.timer import time_call
from solution.ffn_backward import run

SAMPLE_MS = 20


def _phase(samples: list[tuple[float, float, float, str]], start: float, end: float) -> dict:
    inside = [(clock, power, reasons) for t, clock, power, reasons in samples if start <= t <= end]
    if not inside:
        return {"samples": 0}
    return {"samples": len(inside), "sm_clock_mhz_median": statistics.median(c for c, _, _ in inside),
            "sm_clock_mhz_min": min(c for c, _, _ in inside), "power_w_median": statistics.median(p for _, p, _ in inside),
            "clock_event_reasons": sorted({r for _, _, r in inside if r})}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("tokens", type=workload_tokens, help="comma-separated workload token counts")
    parser.add_argument("--calls", type=int_at_least(10), default=300)
    args = parser.parse_args(argv)
    require_gpu("sustained_clocks")
    out = os.path.join(os.environ.get("OUT", "."), "sustained_clocks.json")
    log = os.path.join(os.environ.get("OUT", "."), "sustained_clocks.csv")
    fields = "timestamp,clocks.sm,power.draw"
    reasons = subprocess.run(["nvidia-smi", "--query-gpu=clocks_event_reasons.active,power.limit", "--format=csv,noheader"],
                             capture_output=True, text=True)
    if reasons.returncode == 0:  # why the clock is below its maximum (a bit mask), where this nvidia-smi knows it
        fields += ",clocks_event_reasons.active"
        print("clock event reasons, power limit at the start:", reasons.stdout.strip(), flush=True)
    sampler = subprocess.Popen(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits",
                                f"-lms={SAMPLE_MS}", f"--filename={log}"])
    phases = []
    try:
        time.sleep(1.0)
        for t in args.tokens:
            _, inputs, outputs = workload_case(t)
            run(*inputs, *outputs)
            torch.cuda.synchronize()
            start = time.time()
            latency = time_call(run, inputs, outputs, warmup=10, rep=50).median_ms * 1e3
            phases.append({"tokens": t, "phase": "official timer", "us": latency, "start": start, "end": time.time()})
            same = [[*inputs, *outputs]] * args.calls
            # bench/real_use.py's order: drained calls (a synchronize after each), then back to back
            # at once; then each back-to-back run again after an idle spell, as the official timer's gaps
            for name, argument_sets, idle_s, drained in (
                    ("drained calls", same, 0.5, True),
                    ("back to back, same buffers, no idle before", same, 0.0, False),
                    ("back to back, same buffers", same, 0.5, False),
                    ("back to back, fresh addresses", _fresh(inputs, outputs, args.calls), 0.5, False)):
                torch.cuda.synchronize()
                time.sleep(idle_s)
                start = time.time()
                for a in argument_sets:
                    run(*a)
                    if drained:
                        torch.cuda.synchronize()
                torch.cuda.synchronize()
                end = time.time()
                phases.append({"tokens": t, "phase": name, "idle_before_s": idle_s, "us": (end - start) / args.calls * 1e6,
                               "start": start, "end": end})
            del inputs, outputs
    finally:
        time.sleep(0.2)
        sampler.terminate()
        sampler.wait()
    samples = []
    with open(log) as f:
        for row in csv.reader(f):
            try:
                seconds, fraction = row[0].strip().split(".")  # local time, as time.mktime reads it
                stamp = time.mktime(time.strptime(seconds, "%Y/%m/%d %H:%M:%S")) + float("0." + fraction)
                samples.append((stamp, float(row[1]), float(row[2]), row[3].strip() if len(row) > 3 else ""))
            except (ValueError, IndexError):
                continue
    for p in phases:
        p.update(_phase(samples, p["start"], p["end"]))
        print(p["tokens"], p["phase"], round(p["us"], 1), {k: v for k, v in p.items() if k.startswith(("sm_", "power", "samples"))}, flush=True)
    with open(out, "w") as f:
        json.dump({"provenance": provenance(f"SM clock and power (nvidia-smi every {SAMPLE_MS} ms) per phase: the official-style "
                                            f"timer, then {args.calls} calls drained one by one, at once {args.calls} back-to-back "
                                            "calls with the same buffers (bench/real_use.py's order), then after 0.5 s idle "
                                            f"{args.calls} back-to-back calls with the same buffers and {args.calls} with fresh addresses"), "phases": phases}, f, indent=1)
    return 0


def _fresh(inputs: list, outputs: list, calls: int) -> list[list]:
    pool = ShiftingMemoryPool(inputs, outputs, calls)
    return [pool.next() for _ in range(calls)]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
