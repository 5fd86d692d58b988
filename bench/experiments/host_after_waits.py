"""Host time of one call after each kind of wait (issue 15: in full runs of bench/real_use.py the
drained call at 131072 tokens took 49.5-103.1 us of host time against ~23 at 128 tokens). Per
workload: the median and the least of 60 calls (perf_counter around the call) after a synchronize,
a synchronize and 1 ms of sleep, a synchronize and ~1 ms of spinning, a sleep of 1.5 x the call's
time (the GPU busy when it starts), a blocking event's wait, and back to back.

    PYTHONPATH=. python bench/experiments/host_after_waits.py 613,7184,131072   # on the GPU machine

Session 25 took results/host_after_waits_e7f4ba6_h100.json with the same measurement in a scratch
script (other random inputs); this is it with argument parsing.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

from bench.experiments.workload_case import description, workload_case, workload_tokens
from bench.gpu import require_gpu
from evaluation.provenance import provenance
from solution.ffn_backward import run

CALLS = 60


def host_after(wait, args: list, calls: int = CALLS) -> tuple[float, float]:
    """(median, least) host time in us of `run(*args)` right after `wait()`."""
    times = []
    for _ in range(calls):
        wait()
        start = time.perf_counter()
        run(*args)
        times.append((time.perf_counter() - start) * 1e6)
    torch.cuda.synchronize()
    return round(statistics.median(times), 1), round(min(times), 1)


def measure(tokens: int) -> dict:
    _, inputs, outputs = workload_case(tokens)
    args = [*inputs, *outputs]
    for _ in range(20):
        run(*args)
    torch.cuda.synchronize()
    start = time.perf_counter()
    run(*args)
    torch.cuda.synchronize()
    call_s = time.perf_counter() - start
    event = torch.cuda.Event(blocking=True)
    waits = {
        "after synchronize": torch.cuda.synchronize,
        "after synchronize + sleep 1 ms": lambda: (torch.cuda.synchronize(), time.sleep(0.001)),
        "after synchronize + spin 1 ms": lambda: (torch.cuda.synchronize(), [time.perf_counter() for _ in range(3000)]),
        "after sleep (GPU still busy at first)": lambda: time.sleep(call_s * 1.5),
        "after a blocking event wait": lambda: (event.record(), event.synchronize()),
        "back to back": lambda: None,
    }
    return {"call_and_sync_us": call_s * 1e6, **{name: host_after(wait, args) for name, wait in waits.items()}}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("tokens", type=workload_tokens, help="comma-separated workload token counts")
    args = parser.parse_args(argv)
    require_gpu("host_after_waits")
    rows = {}
    for tokens in args.tokens:
        rows[tokens] = measure(tokens)
        print(tokens, rows[tokens], flush=True)
        torch.cuda.empty_cache()
    method = (f"bench/experiments/host_after_waits.py: median and least host time of one call (perf_counter, "
              f"{CALLS} calls) after each kind of wait")
    with open(os.path.join(os.environ.get("OUT", "."), "host_after_waits.json"), "w") as f:
        json.dump({"provenance": provenance(method), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
