"""A/B of how a call with new addresses updates the kept executable graph (issue 15), up to three
ways in one process, each measured for host time (bench/real_use's host measurement, back-to-back
wall-clock included) and for GPU latency (official-style timer, every variant's outputs checked
first), in interleaved rounds:
  - capture (--capture-dir): an older solution package that records the launches by stream capture
    every call and copies the recording into the executable graph (cuGraphExecUpdate; v30's host path);
  - template: an older solution package that records once per shape, then writes each call's values
    into the recording's kernel nodes (cuGraphKernelNodeSetParams) and copies it (cuGraphExecUpdate;
    v31's host path);
  - exec-setparams: the checkout's, which writes the values into the executable graph's nodes
    directly (cuGraphExecKernelNodeSetParams, no copy; v32), as v16 did (its kernels then ran 0.4-1 us
    slower each, results/graph_update_2e42506.json).
Session 23 ran it before v32 with the exec-level write patched into that checkout
(results/graph_update_ab_1fe8c3e.json); session 26 with v31's package as the template.

    PYTHONPATH=. python bench/experiments/ab_graph_update.py TEMPLATE_SOLUTION_DIR 128,613,7184 [--capture-dir DIR] [--rounds 3]   # on the GPU machine
"""
import argparse
import json
import os
import statistics
import sys

import bench.real_use as real_use
import reference
from bench.experiments.ab_host_path import FIELDS, load_run, round_order
from bench.experiments.workload_case import checked_and_timed, description, workload_tokens
from bench.gpu import require_gpu
from evaluation.provenance import provenance
from evaluation.shifting_pool import ShiftingMemoryPool
from evaluation.staging import int_at_least
from solution.ffn_backward import run as checkout_run

def fresh_host(workload: reference.Workload, calls: int, device) -> dict:
    """Host time of each of `calls` back-to-back calls of real_use's `run` with fresh addresses: its
    distribution (the wall-clock per call is the mean's business, not the median's), and the
    wall-clock per call."""
    inputs, outputs = real_use._workload_arguments(workload, device)
    pool = ShiftingMemoryPool(inputs, outputs, calls)
    argument_sets = [pool.next() for _ in range(calls)]
    real_use.run(*argument_sets[0])
    wall, host = real_use.back_to_back(argument_sets)
    host.sort()
    return {"fresh_host_median_us": statistics.median(host), "fresh_host_mean_us": statistics.mean(host),
            "fresh_host_p90_us": host[int(0.9 * calls)], "fresh_host_max_us": host[-1], "fresh_wall_us": wall}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("template_dir", metavar="TEMPLATE_SOLUTION_DIR",
                        help="a solution package that updates a recording's nodes and copies it (v31's)")
    parser.add_argument("tokens", type=workload_tokens, help="comma-separated workload token counts")
    parser.add_argument("--capture-dir", help="a solution package that records every call (v30's)")
    parser.add_argument("--rounds", type=int_at_least(1), default=3)
    parser.add_argument("--gpu-only", action="store_true", help="only the GPU latencies")
    args = parser.parse_args(argv)
    dirs = {"capture": args.capture_dir, "template": args.template_dir}
    for name, directory in dirs.items():
        missing = [f for f in ("__init__.py", "ffn_backward.py")
                   if directory is not None and not os.path.isfile(os.path.join(directory, f))]
        if missing:  # load_run imports the package from both
            parser.error(f"{name} solution directory {directory!r}: no {' or '.join(missing)} there")
    device = require_gpu("ab_graph_update")
    runs = {name: load_run(directory, f"{name}_solution") for name, directory in dirs.items() if directory}
    runs["exec-setparams"] = checkout_run
    out = os.path.join(os.environ.get("OUT", "."), "graph_update_ab.json")
    header = {"provenance": provenance(
        f"A/B of the graph update for new addresses: {args.capture_dir} ('capture'), {args.template_dir} "
        f"('template'), the checkout ('exec-setparams'); host: bench/real_use.measure_host, 200 calls, "
        f"{args.rounds} interleaved rounds (the order reversed every other round from session 28 on); GPU: "
        "evaluation.timer.time_call (official-style, shifting addresses), "
        f"{args.rounds} interleaved rounds, median of 50 each, after all host measurements")}
    rows = []

    def write() -> None:  # as it goes: a run cut short keeps what it measured
        with open(out, "w") as f:
            json.dump({**header, "rows": rows}, f, indent=1)

    for t in [] if args.gpu_only else args.tokens:
        workload = next(w for w in reference.WORKLOADS if w.tokens == t)
        host = {name: [] for name in runs}
        for round_index in range(args.rounds):
            for name in round_order(list(runs), round_index):
                real_use.run = runs[name]  # measure_host calls the module's `run`
                host[name].append({**{k: v for k, v in real_use.measure_host(workload, 200, device).items() if k in FIELDS},
                                   **fresh_host(workload, 200, device)})
        row = {"tokens": t, "host_rounds": host,
               "host_median": {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in host.items()}}
        rows.append(row)
        print(t, {name: {k: round(v, 1) for k, v in m.items()} for name, m in row["host_median"].items()}, flush=True)
        write()
    # the GPU latency after every host measurement: CUPTI in the process slows the host path
    if args.gpu_only:
        rows = [{"tokens": t} for t in args.tokens]
    for row in rows:
        row["gpu"] = checked_and_timed(row["tokens"], runs, args.rounds)
        print(row["tokens"], row["gpu"]["correct"],
              {k: [round(x["us"], 2) for x in v] for k, v in row["gpu"].items() if isinstance(v, list)}, flush=True)
        write()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
