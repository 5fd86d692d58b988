"""tcap: the graph captured ONCE from Triton's own launcher (cuLaunchKernelEx), then relaunched with
HEAD's per-call parameter updates (cuGraphExecKernelNodeSetParams). old / new for reference."""
import sys, json, os, ctypes, threading
sys.path.insert(0, os.path.dirname(__file__))
import torch
import reference
from evaluation.timer import time_call
import old_solution.ffn_backward as old
import solution.ffn_backward as new
import solution.graph as graph
from solution import launches

cuda = graph.cuda_driver()
for n in ("cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphGetNodes", "cuGraphKernelNodeGetParams_v2"):
    getattr(cuda, n).restype = ctypes.c_int
original_init = graph.CallGraph.__init__
state = {}


def tcap_init(self, call, compiled):
    assert all(l.after == ((i - 1,) if i else ()) for i, l in enumerate(call.launches)), "in-order only"
    self.params = [graph.KernelParams(launch, kernel) for launch, kernel in zip(call.launches, compiled)]
    offsets = dict(call.workspace_offsets)
    pointers = [s for p in self.params for s in p.pointer_slots]
    descriptors = [d for p in self.params for d in p.descriptors]
    self._caller_pointers = [(n, s) for n, s in pointers if n not in offsets]
    self._caller_descriptors = [(n, d) for n, d in descriptors if n not in offsets]
    self._workspace_pointers = [(offsets[n], s) for n, s in pointers if n in offsets]
    self._workspace_descriptors = [(offsets[n], d) for n, d in descriptors if n in offsets]
    self._eps_slots = [s for p in self.params for name, s in p.scalar_slots if name == "eps"]
    self._workspace_base = None
    self._lock = threading.Lock()
    ctx = ctypes.c_void_p(); cuda.cuCtxGetCurrent(ctypes.byref(ctx)); self.context = ctx.value
    self.graph, self.graph_exec = ctypes.c_void_p(), ctypes.c_void_p()
    side = torch.cuda.Stream()
    tensors, eps = state["tensors"], state["eps"]
    graph.check(cuda.cuStreamBeginCapture_v2(ctypes.c_void_p(side.cuda_stream), 1), "begin")
    for launch, kernel in zip(call.launches, compiled):
        resolved = [launches.resolve(a, tensors, eps) for a in launch.args]
        values = dict(zip(launch.kernel.arg_names, resolved), **launch.constexprs)
        args = [v.data_ptr() if isinstance(v, torch.Tensor) else v for v in map(values.__getitem__, launch.kernel.arg_names)]
        kernel[(launch.grid, 1, 1)](*args, stream=side.cuda_stream)
    graph.check(cuda.cuStreamEndCapture(ctypes.c_void_p(side.cuda_stream), ctypes.byref(self.graph)), "end")
    count = ctypes.c_size_t(0)
    cuda.cuGraphGetNodes(self.graph, None, ctypes.byref(count))
    nodes = (ctypes.c_void_p * count.value)()
    cuda.cuGraphGetNodes(self.graph, nodes, ctypes.byref(count))
    by_func = {}
    for node in nodes:
        kp = graph._KernelNodeParams()
        if cuda.cuGraphKernelNodeGetParams_v2(ctypes.c_void_p(node), ctypes.byref(kp)) == 0:
            by_func[kp.func] = node
    ordered = [ctypes.c_void_p(by_func[p.node.func]) for p in self.params]
    graph.check(cuda.cuGraphInstantiateWithFlags(ctypes.byref(self.graph_exec), self.graph, ctypes.c_ulonglong(0)), "inst")
    self._node_updates = [(self.graph_exec, node, ctypes.byref(p.node)) for node, p in zip(ordered, self.params)]
    self._side = side


original_compile = graph.compile_launches


def compile_and_remember(call, tensors, eps):
    state["tensors"], state["eps"] = tensors, eps
    return original_compile(call, tensors, eps)


def tcap(*a):
    if graph.CallGraph.__init__ is not tcap_init:
        graph.CallGraph.__init__ = tcap_init
        graph.compile_launches = compile_and_remember
        new._graphs = None
    new.run(*a)


def plain(*a):
    if graph.CallGraph.__init__ is not original_init:
        graph.CallGraph.__init__ = original_init
        graph.compile_launches = original_compile
        new._graphs = None
    new.run(*a)


VARIANTS = [("old", old.run), ("new", plain), ("tcap", tcap)]
rows = []
for tokens in [int(t) for t in sys.argv[1].split(",")]:
    torch.manual_seed(0)
    inputs = list(reference.make_inputs(1, tokens, "cuda"))
    shapes = reference.output_shapes(1, tokens)
    outs = [torch.empty(shapes[n], device="cuda") for n in reference.OUTPUT_NAMES]
    expected = reference.run(*inputs)
    from reference.fixtures import FIXTURE_TOLERANCE
    nan = [torch.full_like(o, float("nan")) for o in outs]
    tcap(*inputs, *nan); torch.cuda.synchronize()
    tcap(*inputs, *nan); torch.cuda.synchronize()
    print("tcap correct:", all(reference.check_output(o, e, FIXTURE_TOLERANCE).passed for o, e in zip(nan, expected)))
    res = {name: [] for name, _ in VARIANTS}
    for rnd in range(2):
        for name, fn in VARIANTS:
            r = time_call(fn, inputs, outs, warmup=10, rep=50)
            res[name].append((r.median_ms * 1e3, {k: round(v * 1e3, 2) for k, v in r.activity_ms.items()}))
    rows.append({"tokens": tokens, **res})
    print(tokens, {k: [round(x[0], 1) for x in v] for k, v in res.items()})
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "ab_tcap.json"), "w"), indent=1)
