"""Host time of a call, step by step (issue 15: a drained call at 131072 tokens took 80-100 us of
host time against ~23 at 128 tokens, in every run since v27). Each step of ffn_backward._run_graph
and CallGraph.launch is replicated with perf_counter between steps, for calls with the same buffers
after a synchronize (drained) and back to back, and for calls back to back that alternate between
two sets of buffers (fresh addresses: the values written and the executable graph's kernel nodes
updated, each node's write timed on its own; before v32, the template's nodes, then the executable
graph from the template: session 25's results/host_steps_86c11a9_h100.json); medians of `--calls`.
Beside each workload, bench/real_use's host reference (a fixed pure-Python task): what the host's
speed was meanwhile. The workspace steps follow v33's path (a raw caching-allocator block; before
v33 a torch.empty tensor).

    PYTHONPATH=. python bench/experiments/host_steps.py 128,17312,131072 [--calls 200]   # on the GPU machine
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import torch

import bench.real_use as real_use
from bench.experiments.workload_case import description, workload_case, workload_tokens
from bench.gpu import require_gpu
from evaluation.provenance import provenance
from evaluation.staging import int_at_least
from solution import ffn_backward, graph
from solution.arguments import check_arguments

STEPS = ("check_arguments", "graph_cache", "stream", "workspace", "context_and_is_capturing", "graph_launch",
         "workspace_freed")
FRESH_STEPS = ("check_arguments", "graph_cache", "stream", "workspace", "context_and_is_capturing", "write_values",
               "node_updates", "graph_launch", "workspace_freed")


def one_call(tensors: tuple, eps: float, fresh: bool = False) -> tuple[list[float], list[float]]:
    """ffn_backward._run_graph's steps, perf_counter stamps between them: for a call whose values the
    kept graph holds (fresh False), or one whose addresses differ from the last call's (fresh True);
    and the stamps after each kernel node's write (fresh True)."""
    stamps = [time.perf_counter()]
    node_stamps: list[float] = []  # after each kernel node's write (fresh True)
    dims, addresses, aligned = check_arguments(tensors, eps)
    stamps.append(time.perf_counter())
    call_graph = ffn_backward._graphs.get((dims, None, True), None)
    stamps.append(time.perf_counter())
    stream_handle = ffn_backward._current_stream(dims.device.index)
    stream = ctypes.c_void_p(stream_handle)
    stamps.append(time.perf_counter())
    workspace = ffn_backward._workspace_alloc(call_graph.workspace_bytes, stream_handle)
    stamps.append(time.perf_counter())
    values = (addresses, eps, workspace)
    if (values != call_graph._graph_values) != fresh:
        raise RuntimeError(f"the kept graph {'holds' if fresh else 'does not hold'} this call's values: "
                           "not the path meant to be timed")
    cuda = graph.cuda_driver()
    with call_graph._lock:
        call_graph._make_context_current()
        capturing = ctypes.c_int()
        graph.check(cuda.cuStreamIsCapturing(stream, ctypes.byref(capturing)), "cuStreamIsCapturing")
        stamps.append(time.perf_counter())
        if fresh:
            call_graph._write_values(*values)
            call_graph._graph_values = None
            stamps.append(time.perf_counter())
            for function, arguments, name in call_graph._set_node_params:  # graph._run_steps, one node at a time
                graph.check(function(*arguments), name)
                node_stamps.append(time.perf_counter())
            call_graph._graph_values = values
            stamps.append(time.perf_counter())
        graph.check(cuda.cuGraphLaunch(call_graph.graph_exec, stream), "cuGraphLaunch")
    stamps.append(time.perf_counter())
    ffn_backward._workspace_free(workspace)
    stamps.append(time.perf_counter())
    return stamps, node_stamps


def _medians(stamps: list[list[float]], steps: tuple[str, ...]) -> dict[str, float]:
    row = {name: statistics.median((s[k + 1] - s[k]) * 1e6 for s in stamps) for k, name in enumerate(steps)}
    row["call"] = statistics.median((s[-1] - s[0]) * 1e6 for s in stamps)
    return row


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("tokens", type=workload_tokens, help="comma-separated workload token counts")
    parser.add_argument("--calls", type=int_at_least(10), default=200)
    args = parser.parse_args(argv)
    require_gpu("host_steps")
    rows = []
    for t in args.tokens:
        _, inputs, outputs = workload_case(t)
        tensors, eps = (*inputs[:10], *outputs), inputs[10]
        for _ in range(3):
            ffn_backward.run(*inputs, *outputs)
        torch.cuda.synchronize()
        row = {"tokens": t, "reference_us": real_use.HostReference.median_us()}
        for mode in ("drained", "back to back"):
            stamps = []
            for _ in range(args.calls):
                stamps.append(one_call(tensors, eps)[0])
                if mode == "drained":
                    torch.cuda.synchronize()
            torch.cuda.synchronize()
            row[mode] = _medians(stamps, STEPS)
        # a second set of buffers (copies of the first): each call's addresses differ from the last's
        other = (*(x.clone() for x in tensors[:10]), *(torch.empty_like(x) for x in tensors[10:]))
        calls = [one_call(tensors if k % 2 else other, eps, fresh=True) for k in range(args.calls)]
        torch.cuda.synchronize()
        row["fresh, back to back"] = _medians([stamps for stamps, _ in calls], FRESH_STEPS)
        write_values_end = FRESH_STEPS.index("write_values") + 1  # the stamp the first node write starts from
        row["node_writes_us"] = [statistics.median((nodes[j] - (nodes[j - 1] if j else stamps[write_values_end])) * 1e6
                                                   for stamps, nodes in calls) for j in range(len(calls[0][1]))]
        del other
        rows.append(row)
        print(t, {m: {k: round(v, 1) for k, v in steps.items()} if isinstance(steps, dict)
                  else [round(v, 2) for v in steps] if isinstance(steps, list) else round(steps, 1)
                  for m, steps in row.items() if m != "tokens"}, flush=True)
        del inputs, outputs, tensors
    with open(os.path.join(os.environ.get("OUT", "."), "host_steps.json"), "w") as f:
        method = (f"host time by step (us, median of {args.calls} calls), ffn_backward._run_graph and "
                  "CallGraph.launch replicated for calls with the same buffers, after a synchronize (drained) and "
                  "back to back, and for calls back to back alternating between two sets of buffers (fresh addresses), "
                  "each kernel node's write on its own; bench/real_use's host reference per workload")
        json.dump({"provenance": provenance(method), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
