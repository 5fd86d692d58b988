"""Why are HEAD's kernels ~1 us each slower under the CUPTI timer than e7215dc's? Session 9, experiment 1.

Variants (official-style timer unless said):
  old      e7215dc: Triton's launcher captured into a fresh graph each call
  reuse    HEAD: graph built once (node API), SetParams per call
  fresh    HEAD's node-API graph rebuilt and instantiated every call
  capfresh HEAD's parameter blocks, stream-captured (fork/join like old) into a fresh graph every call
  cuptib   reuse, but the graph is built after CUPTI activity is enabled (custom loop)
  fixset   reuse, same addresses every call, SetParams every call (custom loop)
  fixnoset reuse, same addresses every call, no SetParams after the first (custom loop)
  fixold   old, same addresses every call (custom loop)
  ev_*     CUDA-event spans (no CUPTI) for old and reuse
Also dumps cuGraphDebugDotPrint of old's and HEAD's graphs at 128 tokens.
"""
import sys, json, os, ctypes, statistics
sys.path.insert(0, os.path.dirname(__file__))
import torch
import reference
from evaluation import timer as T
from evaluation.shifting_pool import ShiftingMemoryPool
import old_solution.ffn_backward as old
import old_solution.cuda_graph as old_graph
import solution.ffn_backward as new
import solution.graph as graph

OUT = os.environ.get("OUT", ".")
cuda = graph.cuda_driver()
for name in ("cuGraphDebugDotPrint", "cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuEventCreate",
             "cuEventRecord", "cuStreamWaitEvent", "cuGraphInstantiateWithFlags", "cuGraphLaunch",
             "cuGraphExecDestroy", "cuGraphDestroy", "cuLaunchKernel"):
    getattr(cuda, name).restype = ctypes.c_int
DOT_ALL = 0xFFFF

# --- DOT dump of old's graph: wrap its driver's instantiate once
old_cuda = old_graph._cuda()
_dump = {"old": None}
_orig_inst = old_cuda.cuGraphInstantiateWithFlags


def _inst_and_dump(exec_ref, g, flags):
    if _dump["old"] is not None:
        path = os.path.join(OUT, f"dot_old_{_dump['old']}.dot").encode()
        print("dot old", cuda.cuGraphDebugDotPrint(g, path, ctypes.c_uint(DOT_ALL)))
        _dump["old"] = None
    return _orig_inst(exec_ref, g, flags)


old_cuda.cuGraphInstantiateWithFlags = _inst_and_dump

original_launch = graph.CallGraph.launch


def reuse(*a):
    new.run(*a)


def fresh(*a):
    new._graphs.clear()
    new.run(*a)


# --- capfresh: our parameter blocks captured fresh each call, fork/join by launch.after
_side = {}


def _events(n):
    out = []
    for _ in range(n):
        e = ctypes.c_void_p()
        graph.check(cuda.cuEventCreate(ctypes.byref(e), 2), "event")
        out.append(e)
    return out


def capfresh_launch(self, addresses, eps, workspace_base, stream):
    with self._lock:
        for n, s in self._caller_pointers:
            s.value = addresses[n]
        for n, d in self._caller_descriptors:
            d.encode(addresses[n])
        for off, s in self._workspace_pointers:
            s.value = workspace_base + off
        for off, d in self._workspace_descriptors:
            d.encode(workspace_base + off)
        for s in self._eps_slots:
            s.value = eps
        k = len(self.params)
        if k not in _side:
            _side[k] = ([torch.cuda.Stream() for _ in range(k)], _events(2 * k))
        streams, events = _side[k]
        st = [ctypes.c_void_p(s.cuda_stream) for s in streams]
        g, ge = ctypes.c_void_p(), ctypes.c_void_p()
        graph.check(cuda.cuStreamBeginCapture_v2(st[0], 1), "begin")
        for j, (launch, p) in enumerate(zip(self._launches, self.params)):
            for i in launch.after:
                graph.check(cuda.cuStreamWaitEvent(st[j], events[i], 0), "wait")
            if j and not launch.after:
                graph.check(cuda.cuEventRecord(events[k], st[0]), "rec0")
                graph.check(cuda.cuStreamWaitEvent(st[j], events[k], 0), "wait0")
            n = p.node
            graph.check(cuda.cuLaunchKernel(ctypes.c_void_p(n.func), n.gridDimX, 1, 1, n.blockDimX, 1, 1,
                                            n.sharedMemBytes, st[j], n.kernelParams, None), "launch")
            graph.check(cuda.cuEventRecord(events[j], st[j]), "rec")
        for j in range(1, k):
            graph.check(cuda.cuStreamWaitEvent(st[0], events[j], 0), "join")
        graph.check(cuda.cuStreamEndCapture(st[0], ctypes.byref(g)), "end")
        graph.check(cuda.cuGraphInstantiateWithFlags(ctypes.byref(ge), g, ctypes.c_ulonglong(0)), "inst")
        graph.check(cuda.cuGraphLaunch(ge, ctypes.c_void_p(stream)), "glaunch")
        graph.check(cuda.cuGraphExecDestroy(ge), "xd")
        graph.check(cuda.cuGraphDestroy(g), "gd")


_orig_init = graph.CallGraph.__init__


def _init_keep(self, call, compiled):
    _orig_init(self, call, compiled)
    self._launches = call.launches


graph.CallGraph.__init__ = _init_keep


def capfresh(*a):
    graph.CallGraph.launch = capfresh_launch
    try:
        new.run(*a)
    finally:
        graph.CallGraph.launch = original_launch


# --- fixnoset: skip writes + SetParams when the addresses did not change
def noset_launch(self, addresses, eps, workspace_base, stream):
    state = (tuple(sorted(addresses.items())), eps, workspace_base)
    if getattr(self, "_last_state", None) == state:
        graph.check(cuda.cuGraphLaunch(self.graph_exec, ctypes.c_void_p(stream)), "glaunch")
        return
    self._last_state = state
    original_launch(self, addresses, eps, workspace_base, stream)


def fixnoset(*a):
    graph.CallGraph.launch = noset_launch
    try:
        new.run(*a)
    finally:
        graph.CallGraph.launch = original_launch


def custom(fn, setup, warmup=10, rep=50, before=None):
    """time_call's CUPTI loop; `before` runs after CUPTI is enabled and before the warm-up."""
    flush = T.L2Flusher(torch.device("cuda:0"))
    rec = T._CuptiRecorder()
    rec.start()
    try:
        if before:
            before()
        for _ in range(warmup):
            args = setup()
            flush()
            fn(*args)
        torch.cuda.synchronize()
        windows = []
        for _ in range(rep):
            args = setup()
            flush()
            t0 = T.cupti.get_timestamp()
            fn(*args)
            t1 = T.cupti.get_timestamp()
            torch.cuda.synchronize()
            windows.append((t0, t1))
    finally:
        rec.stop()
    a = T.attribute(windows, rec.api_records, rec.activities)
    return a.median_ms * 1e3, {k: round(v * 1e3, 2) for k, v in a.activity_ms.items()}


def events_span(fn, inputs, outs, rep=50):
    pool = ShiftingMemoryPool(list(inputs), list(outs), 10 + rep)
    flush = T.L2Flusher(torch.device("cuda:0"))
    for _ in range(10):
        args = pool.next(); flush(); fn(*args)
    torch.cuda.synchronize()
    a, _ = T._run_events(fn, pool.next, flush, rep)
    return a.median_ms * 1e3, {}


def official(fn, inputs, outs):
    r = T.time_call(fn, inputs, outs, warmup=10, rep=50)
    return r.median_ms * 1e3, {k: round(v * 1e3, 2) for k, v in r.activity_ms.items()}


rows = []
from reference.fixtures import FIXTURE_TOLERANCE
for tokens in [int(t) for t in sys.argv[1].split(",")]:
    torch.manual_seed(0)
    inputs = list(reference.make_inputs(1, tokens, "cuda"))
    shapes = reference.output_shapes(1, tokens)
    outs = [torch.empty(shapes[n], device="cuda") for n in reference.OUTPUT_NAMES]
    fixed = inputs + outs
    expected = reference.run(*inputs)
    for name, fn in (("old", old.run), ("reuse", reuse), ("fresh", fresh), ("capfresh", capfresh),
                     ("fixnoset", fixnoset)):
        for trial in range(2):
            nan = [torch.full_like(o, float("nan")) for o in outs]
            fn(*inputs, *nan)
            torch.cuda.synchronize()
            bad = [n for n, o, e in zip(reference.OUTPUT_NAMES, nan, expected)
                   if not reference.check_output(o, e, FIXTURE_TOLERANCE).passed]
            print("check", tokens, name, "OK" if not bad else f"INCORRECT {bad}")
    if tokens == 128:
        _dump["old"] = tokens
        old.run(*fixed)
        torch.cuda.synchronize()
        new._graphs.clear()
        new.run(*fixed)
        torch.cuda.synchronize()
        (g,) = list(new._graphs._graphs.values())
        print("dot new", cuda.cuGraphDebugDotPrint(g.graph, os.path.join(OUT, "dot_new_128.dot").encode(),
                                                   ctypes.c_uint(DOT_ALL)))
    res = {}
    for rnd in range(3):
        new._graphs.clear()
        for name, f in (("old", lambda: official(old.run, inputs, outs)),
                        ("reuse", lambda: official(reuse, inputs, outs)),
                        ("fresh", lambda: official(fresh, inputs, outs)),
                        ("capfresh", lambda: official(capfresh, inputs, outs)),
                        ("cuptib", lambda: custom(reuse, T.ShiftingMemoryPool(inputs, outs, 60).next,
                                                  before=new._graphs.clear)),
                        ("shift_custom", lambda: custom(reuse, T.ShiftingMemoryPool(inputs, outs, 60).next)),
                        ("fixset", lambda: custom(reuse, lambda: fixed)),
                        ("fixnoset", lambda: custom(fixnoset, lambda: fixed)),
                        ("fixold", lambda: custom(old.run, lambda: fixed)),
                        ("ev_old", lambda: events_span(old.run, inputs, outs)),
                        ("ev_reuse", lambda: events_span(reuse, inputs, outs))):
            res.setdefault(name, []).append(f())
    rows.append({"tokens": tokens, **res})
    print(tokens, {k: [round(x[0], 2) for x in v] for k, v in res.items()}, flush=True)
    for k, v in res.items():
        print("   ", k, v[-1][1])
json.dump(rows, open(os.path.join(OUT, "e1_launch.json"), "w"), indent=1)
