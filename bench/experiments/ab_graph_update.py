"""A/B of how a call with new addresses updates the kept executable graph (issue 15), three ways in
one process, each measured for host time (bench/real_use's host measurement) and for GPU latency
(official-style timer, every variant's outputs checked first), in interleaved rounds:
  - capture: an older solution package that records the launches by stream capture every call and
    copies the recording into the executable graph (cuGraphExecUpdate; v30's host path);
  - template: the checkout's, which records once per shape, then writes each call's values into the
    recording's kernel nodes (cuGraphKernelNodeSetParams) and copies it (cuGraphExecUpdate);
  - exec-setparams: the checkout's with the values written into the executable graph's nodes
    directly (cuGraphExecKernelNodeSetParams, no copy), as v16 did (its kernels then ran 0.4-1 us
    slower each, results/graph_update_2e42506.json).

    PYTHONPATH=. python bench/experiments/ab_graph_update.py CAPTURE_SOLUTION_DIR 128,613,7184 [--rounds 3]   # on the GPU machine
"""
import argparse
import json
import os
import statistics
import sys

import bench.real_use as real_use
import reference
from bench.experiments.ab_host_path import FIELDS, load_run
from bench.experiments.workload_case import checked_and_timed, description, workload_tokens
from bench.gpu import require_gpu
from evaluation.provenance import provenance
from evaluation.shifting_pool import ShiftingMemoryPool
from evaluation.staging import int_at_least
from solution.ffn_backward import run as checkout_run

CHECKOUT_SOLUTION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "solution")


def exec_level_run():
    """`run` of a second copy of the checkout's package whose graphs, after the first call, take new
    values by cuGraphExecKernelNodeSetParams on the executable graph's nodes."""
    run = load_run(CHECKOUT_SOLUTION, "exec_level_solution")
    graph = sys.modules["exec_level_solution.graph"]
    record_first = graph.CallGraph._update_exec

    def _update_exec(self) -> None:
        if not (self._template.value and self.graph_exec.value):
            record_first(self)
            return
        cuda = graph.cuda_driver()
        for _, (node, params), _ in self._set_node_params:
            graph.check(cuda.cuGraphExecKernelNodeSetParams_v2(self.graph_exec, node, params),
                        "cuGraphExecKernelNodeSetParams")

    graph.CallGraph._update_exec = _update_exec
    return run


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
    parser.add_argument("capture_dir", metavar="CAPTURE_SOLUTION_DIR", help="a solution package that records every call")
    parser.add_argument("tokens", type=workload_tokens, help="comma-separated workload token counts")
    parser.add_argument("--rounds", type=int_at_least(1), default=3)
    parser.add_argument("--gpu-only", action="store_true", help="only the GPU latencies")
    args = parser.parse_args(argv)
    missing = [f for f in ("__init__.py", "ffn_backward.py") if not os.path.isfile(os.path.join(args.capture_dir, f))]
    if missing:  # load_run imports the package from both
        parser.error(f"CAPTURE_SOLUTION_DIR {args.capture_dir!r}: no {' or '.join(missing)} there")
    device = require_gpu("ab_graph_update")
    runs = {"capture": load_run(args.capture_dir), "template": checkout_run, "exec-setparams": exec_level_run()}
    out = os.path.join(os.environ.get("OUT", "."), "graph_update_ab.json")
    header = {"provenance": provenance(
        f"A/B of the graph update for new addresses: {args.capture_dir} ('capture'), the checkout ('template'), "
        f"the checkout with exec-level SetParams ('exec-setparams'); host: bench/real_use.measure_host, 200 calls, "
        f"{args.rounds} interleaved rounds; GPU: evaluation.timer.time_call (official-style, shifting addresses), "
        f"{args.rounds} interleaved rounds, median of 50 each, after all host measurements")}
    rows = []

    def write() -> None:  # as it goes: a run cut short keeps what it measured
        with open(out, "w") as f:
            json.dump({**header, "rows": rows}, f, indent=1)

    for t in [] if args.gpu_only else args.tokens:
        workload = next(w for w in reference.WORKLOADS if w.tokens == t)
        host = {name: [] for name in runs}
        for _ in range(args.rounds):
            for name, run in runs.items():
                real_use.run = run  # measure_host calls the module's `run`
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
