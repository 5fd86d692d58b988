"""Session 9, experiment 4: where a call's host time goes (2e42506), per step, no CUPTI in the process.
Replicates ffn_backward._run / _run_graph / CallGraph.launch step by step with perf_counter between
steps; median over 200 calls after a synchronize, per workload, in token order."""
import sys, json, os, ctypes, time, statistics, gc
import torch
import reference
import solution.ffn_backward as fb
import solution.graph as graph
from solution.arguments import check_arguments
from solution.configs import launch_plan
from solution.launches import describe_call, workspace_views

OUT = os.environ.get("OUT", ".")
cuda = graph.cuda_driver()


def steps_once(args):
    t = [time.perf_counter()]
    inputs, outputs = dict(zip(fb.INPUT_NAMES, args[:10])), dict(zip(fb.OUTPUT_NAMES, args[11:]))
    dims, addresses, aligned = check_arguments(inputs, args[10], outputs)
    t.append(time.perf_counter())
    plan = launch_plan(dims.device)
    call = describe_call(dims, plan)
    t.append(time.perf_counter())
    flat = torch.empty(call.workspace_bytes, dtype=torch.uint8, device=dims.device)
    t.append(time.perf_counter())
    key = (call, True)
    cg = fb._graphs.get(key, lambda: None)
    stream = torch._C._cuda_getCurrentRawStream(dims.device.index)
    t.append(time.perf_counter())
    with cg._lock:
        cg._make_context_current()
        cg._write_values(addresses, float(args[10]), flat.data_ptr())
        t.append(time.perf_counter())
        s = ctypes.c_void_p(stream)
        capturing = ctypes.c_int()
        cuda.cuStreamIsCapturing(s, ctypes.byref(capturing))
        t.append(time.perf_counter())
        g = ctypes.c_void_p()
        cuda.cuStreamBeginCapture_v2(cg.streams[0], 1)
        t.append(time.perf_counter())
        cg._record(cg.streams[0])
        t.append(time.perf_counter())
        cuda.cuStreamEndCapture(cg.streams[0], ctypes.byref(g))
        t.append(time.perf_counter())
        cg._write_into_exec(g)
        t.append(time.perf_counter())
        cuda.cuGraphDestroy(g)
        t.append(time.perf_counter())
        cuda.cuGraphLaunch(cg.graph_exec, s)
        t.append(time.perf_counter())
    return [(b - a) * 1e6 for a, b in zip(t, t[1:])]


NAMES = ["check_arguments", "describe_call", "torch.empty", "cache+stream", "write_values", "IsCapturing",
         "BeginCapture", "record", "EndCapture", "ExecUpdate", "GraphDestroy", "GraphLaunch"]
rows = []
for tokens in [int(x) for x in sys.argv[1].split(",")]:
    torch.manual_seed(0)
    inputs = list(reference.make_inputs(1, tokens, "cuda"))
    shapes = reference.output_shapes(1, tokens)
    outs = [torch.empty(shapes[n], device="cuda") for n in reference.OUTPUT_NAMES]
    args = inputs + outs
    for _ in range(3):
        fb.run(*args)
    torch.cuda.synchronize()
    per = []
    whole = []
    for i in range(200):
        torch.cuda.synchronize()
        per.append(steps_once(args))
        torch.cuda.synchronize()
        t = time.perf_counter(); fb.run(*args); whole.append((time.perf_counter() - t) * 1e6)
    med = {n: round(statistics.median(p[i] for p in per), 2) for i, n in enumerate(NAMES)}
    row = {"tokens": tokens, "run_us": round(statistics.median(whole), 1), "sum_of_steps_us": round(sum(med.values()), 1),
           **med, "graphs_cached": len(fb._graphs), "gc_counts": gc.get_count()}
    rows.append(row)
    print(row, flush=True)
json.dump(rows, open(os.path.join(OUT, "e4_host.json"), "w"), indent=1)
