"""Session 9, experiment 2. e1 found: HEAD's parameter blocks stream-captured into a fresh graph each
call are as fast as e7215dc; the node-API graph is ~1 us a kernel slower, rebuilt or reused, with or
without SetParams. Which part of "captured fresh" matters?

  old       e7215dc
  reuse     HEAD (node API once, SetParams per call)
  capfresh  captured + instantiated each call (control)
  cap1      captured once, SetParams per call
  capupd    captured each call, cuGraphExecUpdate into one kept exec, launched
  cap1noset captured once, same addresses, no SetParams (custom loop, fixed addresses)
  sl_*      no CUPTI: GPU span by CUDA events behind a sleep kernel (host enqueue hidden)
  host_*    host time of one call (perf_counter, no CUPTI, after a synchronize), median of 200
"""
import sys, json, os, ctypes, time, statistics
sys.path.insert(0, os.path.dirname(__file__))
import torch
import reference
from evaluation import timer as T
import old_solution.ffn_backward as old
import solution.ffn_backward as new
import solution.graph as graph

OUT = os.environ.get("OUT", ".")
cuda = graph.cuda_driver()
for name in ("cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuEventCreate", "cuEventRecord", "cuStreamWaitEvent",
             "cuGraphInstantiateWithFlags", "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy",
             "cuLaunchKernel", "cuGraphExecUpdate_v2", "cuGraphGetNodes", "cuGraphKernelNodeGetParams_v2"):
    getattr(cuda, name).restype = ctypes.c_int
original_launch = graph.CallGraph.launch
_orig_init = graph.CallGraph.__init__


class UpdateInfo(ctypes.Structure):
    _fields_ = [("result", ctypes.c_int), ("errorNode", ctypes.c_void_p), ("errorFromNode", ctypes.c_void_p)]


def _init_keep(self, call, compiled):
    _orig_init(self, call, compiled)
    self._launches = call.launches


graph.CallGraph.__init__ = _init_keep
_side = {}


def _events(n):
    out = []
    for _ in range(n):
        e = ctypes.c_void_p()
        graph.check(cuda.cuEventCreate(ctypes.byref(e), 2), "event")
        out.append(e)
    return out


def write_values(self, addresses, eps, workspace_base):
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


def capture(self):
    """A CUgraph of this CallGraph's parameter blocks, by stream capture, fork/join by launch.after."""
    k = len(self.params)
    if k not in _side:
        _side[k] = ([torch.cuda.Stream() for _ in range(k)], _events(2 * k))
    streams, events = _side[k]
    st = [ctypes.c_void_p(s.cuda_stream) for s in streams]
    g = ctypes.c_void_p()
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
    return g


def capfresh_launch(self, addresses, eps, workspace_base, stream):
    with self._lock:
        write_values(self, addresses, eps, workspace_base)
        g, ge = capture(self), ctypes.c_void_p()
        graph.check(cuda.cuGraphInstantiateWithFlags(ctypes.byref(ge), g, ctypes.c_ulonglong(0)), "inst")
        graph.check(cuda.cuGraphLaunch(ge, ctypes.c_void_p(stream)), "glaunch")
        graph.check(cuda.cuGraphExecDestroy(ge), "xd")
        graph.check(cuda.cuGraphDestroy(g), "gd")


def capupd_launch(self, addresses, eps, workspace_base, stream):
    with self._lock:
        write_values(self, addresses, eps, workspace_base)
        g = capture(self)
        if getattr(self, "_upd_exec", None) is None:
            self._upd_exec = ctypes.c_void_p()
            graph.check(cuda.cuGraphInstantiateWithFlags(ctypes.byref(self._upd_exec), g, ctypes.c_ulonglong(0)), "inst")
        else:
            info = UpdateInfo()
            graph.check(cuda.cuGraphExecUpdate_v2(self._upd_exec, g, ctypes.byref(info)), f"update {info.result}")
        graph.check(cuda.cuGraphLaunch(self._upd_exec, ctypes.c_void_p(stream)), "glaunch")
        graph.check(cuda.cuGraphDestroy(g), "gd")


def cap1_launch(self, addresses, eps, workspace_base, stream):
    """Captured once (at the first call) into self._cap_exec; SetParams per call on its nodes."""
    with self._lock:
        write_values(self, addresses, eps, workspace_base)
        if getattr(self, "_cap_exec", None) is None:
            g = capture(self)
            count = ctypes.c_size_t(0)
            graph.check(cuda.cuGraphGetNodes(g, None, ctypes.byref(count)), "nodes")
            nodes = (ctypes.c_void_p * count.value)()
            graph.check(cuda.cuGraphGetNodes(g, nodes, ctypes.byref(count)), "nodes")
            by_func = {}
            for node in nodes:
                kp = graph._KernelNodeParams()
                if cuda.cuGraphKernelNodeGetParams_v2(ctypes.c_void_p(node), ctypes.byref(kp)) == 0:
                    by_func[kp.func] = node
            self._cap_nodes = [ctypes.c_void_p(by_func[p.node.func]) for p in self.params]
            self._cap_exec = ctypes.c_void_p()
            graph.check(cuda.cuGraphInstantiateWithFlags(ctypes.byref(self._cap_exec), g, ctypes.c_ulonglong(0)), "inst")
            self._cap_graph = g
            self._cap_state = None
        state = (tuple(sorted(addresses.items())), eps, workspace_base)
        if state != self._cap_state or not NOSET[0]:
            for node, p in zip(self._cap_nodes, self.params):
                graph.check(cuda.cuGraphExecKernelNodeSetParams_v2(self._cap_exec, node, ctypes.byref(p.node)), "set")
            self._cap_state = state
        graph.check(cuda.cuGraphLaunch(self._cap_exec, ctypes.c_void_p(stream)), "glaunch")


NOSET = [False]


def variant(launch, noset=False):
    def fn(*a):
        graph.CallGraph.launch = launch
        NOSET[0] = noset
        try:
            new.run(*a)
        finally:
            graph.CallGraph.launch = original_launch
    return fn


def custom(fn, setup, warmup=10, rep=50):
    flush = T.L2Flusher(torch.device("cuda:0"))
    rec = T._CuptiRecorder()
    rec.start()
    try:
        for _ in range(warmup):
            args = setup(); flush(); fn(*args)
        torch.cuda.synchronize()
        windows = []
        for _ in range(rep):
            args = setup(); flush()
            t0 = T.cupti.get_timestamp(); fn(*args); t1 = T.cupti.get_timestamp()
            torch.cuda.synchronize()
            windows.append((t0, t1))
    finally:
        rec.stop()
    a = T.attribute(windows, rec.api_records, rec.activities)
    return a.median_ms * 1e3, {k: round(v * 1e3, 2) for k, v in a.activity_ms.items()}


def official(fn, inputs, outs):
    r = T.time_call(fn, inputs, outs, warmup=10, rep=50)
    return r.median_ms * 1e3, {k: round(v * 1e3, 2) for k, v in r.activity_ms.items()}


def sleep_span(fn, inputs, outs, rep=30):
    """GPU span without CUPTI: a 300-us sleep kernel hides the host's enqueue of the call."""
    pool = T.ShiftingMemoryPool(list(inputs), list(outs), 5 + rep)
    flush = T.L2Flusher(torch.device("cuda:0"))
    spans = []
    for i in range(5 + rep):
        args = pool.next(); flush()
        torch.cuda._sleep(400_000)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(*args); e.record()
        torch.cuda.synchronize()
        if i >= 5:
            spans.append(s.elapsed_time(e) * 1e3)
    return statistics.median(spans), {}


def host_time(fn, fixed, n=200):
    ts = []
    for _ in range(n):
        torch.cuda.synchronize()
        t = time.perf_counter(); fn(*fixed); ts.append((time.perf_counter() - t) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(ts), {}


VARIANTS = (("old", old.run), ("reuse", new.run), ("capfresh", variant(capfresh_launch)),
            ("cap1", variant(cap1_launch)), ("capupd", variant(capupd_launch)))
rows = []
from reference.fixtures import FIXTURE_TOLERANCE
for tokens in [int(t) for t in sys.argv[1].split(",")]:
    torch.manual_seed(0)
    inputs = list(reference.make_inputs(1, tokens, "cuda"))
    shapes = reference.output_shapes(1, tokens)
    outs = [torch.empty(shapes[n], device="cuda") for n in reference.OUTPUT_NAMES]
    fixed = inputs + outs
    expected = reference.run(*inputs)
    for name, fn in VARIANTS:
        worst = []
        for trial in range(3):
            nan = [torch.full_like(o, float("nan")) for o in outs]
            fn(*inputs, *nan)
            torch.cuda.synchronize()
            worst.append(max(((o - e).abs().max() / e.abs().max().clamp_min(1e-30)).item() for o, e in zip(nan, expected)))
        print("check", tokens, name, "max rel err", [f"{w:.2e}" for w in worst])
    res = {}
    for rnd in range(3):
        new._graphs.clear()
        for name, fn in VARIANTS:
            res.setdefault(name, []).append(official(fn, inputs, outs))
        res.setdefault("cap1noset", []).append(custom(variant(cap1_launch, noset=True), lambda: fixed))
        res.setdefault("cap1set_fixed", []).append(custom(variant(cap1_launch), lambda: fixed))
        for name, fn in VARIANTS:
            res.setdefault("sl_" + name, []).append(sleep_span(fn, inputs, outs))
        for name, fn in VARIANTS:
            res.setdefault("host_" + name, []).append(host_time(fn, fixed))
    rows.append({"tokens": tokens, **res})
    print(tokens, flush=True)
    for k, v in res.items():
        print("   ", k, [round(x[0], 2) for x in v], v[-1][1])
json.dump(rows, open(os.path.join(OUT, "e2_capture.json"), "w"), indent=1)
