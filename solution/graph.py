"""A call's kernels as one CUDA graph: recorded once per shape, instantiated once, then each call's
addresses written into the executable graph's kernel nodes.

Why a graph: the benchmark's timer counts the GPU's idle time between a call's first and last
kernel, and under its CUPTI tracing each separate launch costs ~20 us of host time, so kernels
shorter than that would leave the GPU waiting. A graph's kernels follow each other back to back.

What is kept per device, shape, plan and pointer alignment (a `CallGraph`): the compiled kernels,
their parameter blocks, one or two private streams and a few events to record on, the recording (the
launches recorded by stream capture on the first call: a CUgraph, host work only, kept because its
nodes name the executable graph's) and the executable graph instantiated from it. What a call with
new values does: write its addresses (and eps) into the parameter blocks, copy each block into its
kernel node of the executable graph (cuGraphExecKernelNodeSetParams) and launch it. A call whose
addresses, eps and workspace are those of the call before (the same buffers again) launches the
executable graph as it is. Nothing computed from the data is kept: the parameter blocks hold
addresses, TMA descriptors of those addresses (re-encoded where an address changed), shapes and eps.
`GraphCache` keeps the few most recent shapes per process.

Writing the executable graph's nodes directly is the cheapest of the ways measured: 1.2-1.7 us less
host time a call than updating a kept template and copying it in by cuGraphExecUpdate, with the GPU
time the same (results/graph_update_ab_bee8ddf_h100.json); recording the launches again every call
costs 10-40 us more, and a new executable graph every call 30-66 us more. Nodes made by
cuGraphAddKernelNode instead of stream capture ran ~0.4-1 us longer each (results/graph_update_2e42506.json).

The parameter block of a Triton kernel is laid out here the way Triton 3.6's own launcher lays it
out (triton/backends/nvidia/driver.py, `make_launcher`): one entry per parameter that is not a
compile-time constant, in order (a pointer: 8 bytes; a TMA descriptor: the 128-byte CUtensorMap
followed by its shape as int32 and strides as int64; int32/int64/fp32 scalars), then the global and
profile scratch pointers. A kernel that needs scratch memory or a non-TMA descriptor is refused.

When the caller's stream is itself being captured (the caller records its own CUDA graph), the
launches are recorded onto that stream instead, one after the other, and so become part of the
caller's graph.

The driver API is reached through ctypes (libcuda.so.1); every call's status is checked.
"""

from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import torch
from triton.backends.nvidia.driver import TMA_DTYPE_DEVICE_TO_HOST

from .launches import Buffer, CallDescription, Launch, Scalar, Tiles, resolve

_STREAM_NON_BLOCKING = 1  # CUstream_flags: no implicit wait for the legacy default stream
_EVENT_DISABLE_TIMING = 2  # CUevent_flags
_CAPTURE_MODE_THREAD_LOCAL = 1  # CUstreamCaptureMode: other threads' CUDA calls stay legal meanwhile
_GRAPH_NODE_TYPE_KERNEL = 0  # CUgraphNodeType
_L2_PROMOTION_128B = 2  # CUtensorMapL2promotion, as Triton's launcher
_TENSOR_MAP_BYTES, _TENSOR_MAP_ALIGNMENT = 128, 64
_PREFERRED_SHARED_MEMORY_CARVEOUT = 9  # CUfunction_attribute
_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6  # CUlaunchAttributeID
_driver: ctypes.CDLL | None = None


class _LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: an id, then the value union (64 bytes) at offset 8; the one value used
    here is an int at its start."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int),
                ("value_rest", ctypes.c_char * 60)]


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (cuLaunchKernelEx)."""
    _fields_ = [("grid_x", ctypes.c_uint), ("grid_y", ctypes.c_uint), ("grid_z", ctypes.c_uint),
                ("block_x", ctypes.c_uint), ("block_y", ctypes.c_uint), ("block_z", ctypes.c_uint),
                ("shared_bytes", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attributes", ctypes.POINTER(_LaunchAttribute)), ("attribute_count", ctypes.c_uint)]


class _ProgrammaticLaunch:
    """A launch as a programmatic dependent of the launch before it on its stream
    (cuLaunchKernelEx with PROGRAMMATIC_STREAM_SERIALIZATION): the kernel may start as soon as every
    program of that launch has signalled (griddepcontrol.launch_dependents) or ended, and its
    griddepcontrol.wait returns once that launch has ended and its stores are visible. A stream
    capture records the dependency as a programmatic edge of the graph. Called like cuLaunchKernel's
    bound step: the stream is read when the step runs (the caller's stream changes between calls)."""

    def __init__(self, params: "KernelParams", stream: ctypes.c_void_p):
        self._attribute = _LaunchAttribute(id=_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, value=1)
        self._config = _LaunchConfig(params.grid, 1, 1, params.threads, 1, 1, params.shared_bytes, None,
                                     ctypes.pointer(self._attribute), 1)
        self._stream, self._function, self._array = stream, ctypes.c_void_p(params.function), params.array

    def __call__(self) -> int:
        self._config.stream = self._stream.value
        return cuda_driver().cuLaunchKernelEx(ctypes.byref(self._config), self._function, self._array, None)


class _KernelNodeParams(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS_v2: a kernel node's launch (read from a recorded node, then given
    this call's kernelParams)."""

    _fields_ = [("func", ctypes.c_void_p), ("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint),
                ("blockDimZ", ctypes.c_uint), ("sharedMemBytes", ctypes.c_uint),
                ("kernelParams", ctypes.POINTER(ctypes.c_void_p)), ("extra", ctypes.c_void_p),
                ("kern", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]


def cuda_driver() -> ctypes.CDLL:
    global _driver
    if _driver is None:
        _driver = ctypes.CDLL("libcuda.so.1")
        for name in ("cuStreamCreate", "cuStreamDestroy_v2", "cuEventCreate", "cuEventDestroy_v2", "cuEventRecord",
                     "cuStreamWaitEvent", "cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuStreamIsCapturing",
                     "cuGraphInstantiateWithFlags", "cuGraphLaunch", "cuGraphExecDestroy",
                     "cuGraphDestroy", "cuTensorMapEncodeTiled", "cuLaunchKernel", "cuLaunchKernelEx",
                     "cuCtxGetCurrent", "cuCtxSetCurrent", "cuFuncSetAttribute", "cuGraphGetNodes", "cuGraphNodeGetType",
                     "cuGraphKernelNodeGetParams_v2", "cuGraphExecKernelNodeSetParams_v2"):
            getattr(_driver, name).restype = ctypes.c_int
    return _driver


def check(result: int, call: str) -> None:
    if result != 0:
        raise RuntimeError(f"{call} failed: CUresult {result}")


class _Descriptor:
    """One TMA descriptor parameter: the CUtensorMap, 64-byte aligned, encoded for a base address
    (anew where the address changes); its shape and strides are fixed by the shape of the call."""

    def __init__(self, tiles: Tiles, meta: dict):
        rows, cols = tiles.buffer.shape
        if meta is None or meta.get("fp4_padded"):
            raise NotImplementedError(f"{tiles.buffer.name}: a tensor descriptor Triton did not lower to TMA ({meta})")
        # the box Triton chose (it may split the block into narrower boxes to fit its swizzle)
        box_rows, box_cols = meta["block_size"]
        self._storage = ctypes.create_string_buffer(_TENSOR_MAP_BYTES + _TENSOR_MAP_ALIGNMENT)
        address = ctypes.addressof(self._storage)
        self.address = (address + _TENSOR_MAP_ALIGNMENT - 1) // _TENSOR_MAP_ALIGNMENT * _TENSOR_MAP_ALIGNMENT
        # cuTensorMapEncodeTiled's arguments but the base address: dimensions innermost first,
        # strides in bytes of all but the innermost dimension
        self._encode_args = (
            ctypes.c_int(TMA_DTYPE_DEVICE_TO_HOST[meta["elem_type"]]), ctypes.c_uint(2),
            (ctypes.c_uint64 * 2)(cols, rows), (ctypes.c_uint64 * 1)(cols * meta["elem_size"]),
            (ctypes.c_uint32 * 2)(box_cols, box_rows), (ctypes.c_uint32 * 2)(1, 1),
            ctypes.c_int(0), ctypes.c_int(meta["swizzle"]), ctypes.c_int(_L2_PROMOTION_128B), ctypes.c_int(0))
        self.shape = (rows, cols)
        self.strides = (cols, 1)
        self.base: int | None = None  # the base address the CUtensorMap holds

    def encode(self, base: int) -> None:
        """The CUtensorMap for tiles from `base` on (kept as it is where `base` is the last one's)."""
        if base == self.base:
            return
        self.base = None  # until the encode succeeds
        dtype, rank, dims, strides, box, element_strides, interleave, swizzle, l2, fill = self._encode_args
        check(cuda_driver().cuTensorMapEncodeTiled(ctypes.c_void_p(self.address), dtype, rank, ctypes.c_void_p(base),
                                                   dims, strides, box, element_strides, interleave, swizzle, l2, fill),
              "cuTensorMapEncodeTiled")
        self.base = base


class KernelParams:
    """A compiled kernel's parameter block (kernelParams: a pointer to each parameter's value), with
    setters that write one call's values into it."""

    _SCALARS = {"i1": ctypes.c_int8, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32,
                "i64": ctypes.c_int64, "u32": ctypes.c_uint32, "u64": ctypes.c_uint64, "fp32": ctypes.c_float}

    def __init__(self, launch: Launch, compiled):
        meta = compiled.metadata
        if meta.global_scratch_size or meta.profile_scratch_size:
            raise NotImplementedError(f"{compiled.name}: needs scratch memory, which this launcher does not allocate")
        values = dict(zip(launch.kernel.arg_names, launch.args), **launch.constexprs)
        descriptors_meta = iter(getattr(meta, "tensordesc_meta", None) or [])
        self._keep: list = []  # the ctypes objects the pointers point to
        pointers: list[int] = []
        self.sizes: list[int] = []  # bytes of each parameter (bench/compile_check.py checks them against the PTX)
        # what a call writes: (buffer name, ctypes slot) for pointers, (buffer name, descriptor) for
        # TMA, (scalar name, slot) for eps
        self.pointer_slots: list[tuple[str, ctypes.c_uint64]] = []
        self.descriptors: list[tuple[str, _Descriptor]] = []
        self.scalar_slots: list[tuple[str, ctypes.c_float]] = []

        def value(ctype, v):
            slot = ctype(v)
            self._keep.append(slot)
            pointers.append(ctypes.addressof(slot))
            self.sizes.append(ctypes.sizeof(slot))
            return slot

        for name, kind in compiled.src.signature.items():
            arg = values[name]
            if kind == "constexpr":
                continue
            if kind.startswith("*"):
                if not isinstance(arg, Buffer):
                    raise TypeError(f"{compiled.name}.{name}: a pointer parameter needs a Buffer, got {arg!r}")
                self.pointer_slots.append((arg.name, value(ctypes.c_uint64, 0)))
            elif kind.startswith("tensordesc"):
                descriptor = _Descriptor(arg, next(descriptors_meta, None))
                self._keep.append(descriptor)
                pointers.append(descriptor.address)
                self.sizes.append(_TENSOR_MAP_BYTES)
                for size in descriptor.shape:
                    value(ctypes.c_int32, size)
                for stride in descriptor.strides:
                    value(ctypes.c_int64, stride)
                self.descriptors.append((arg.buffer.name, descriptor))
            elif kind in self._SCALARS:
                slot = value(self._SCALARS[kind], 0 if isinstance(arg, Scalar) else arg)
                if isinstance(arg, Scalar):
                    self.scalar_slots.append((arg.name, slot))
            else:
                raise NotImplementedError(f"{compiled.name}.{name}: parameter type {kind}")
        for _ in range(2):  # global and profile scratch: none
            value(ctypes.c_uint64, 0)
        self.array = (ctypes.c_void_p * len(pointers))(*pointers)  # cuLaunchKernel's kernelParams
        # the rest of the launch, as Triton's launcher makes it: a 1-D grid, one CTA per program
        self.function, self.grid, self.threads, self.shared_bytes = (
            compiled.function, launch.grid, 32 * meta.num_warps, meta.shared)

    def recorded_as(self, node: _KernelNodeParams) -> bool:
        """Whether a recorded kernel node launches this kernel with the values now in this block."""
        if ((node.func or self.function) != self.function
                or (node.gridDimX, node.blockDimX, node.sharedMemBytes) != (self.grid, self.threads, self.shared_bytes)):
            return False
        return all(ctypes.string_at(node.kernelParams[i], size) == ctypes.string_at(self.array[i], size)
                   for i, size in enumerate(self.sizes))


def compile_launches(call: CallDescription, tensors: dict[str, torch.Tensor], eps: float) -> list:
    """The compiled kernel of every launch, for these tensors (Triton specializes on pointer
    alignment and on some integer values), compiling on first use. Nothing is launched."""
    compiled = []
    for launch in call.launches:
        args = [resolve(a, tensors, eps) for a in launch.args]
        kernel = launch.kernel.warmup(*args, grid=(launch.grid,), **launch.constexprs, **launch.options)
        kernel._init_handles()  # loads the module: kernel.function
        if launch.shared_carveout is not None:
            check(cuda_driver().cuFuncSetAttribute(ctypes.c_void_p(kernel.function), _PREFERRED_SHARED_MEMORY_CARVEOUT,
                                                   launch.shared_carveout), "cuFuncSetAttribute")
        compiled.append(kernel)
    return compiled


def recording_steps(launches: Sequence[Launch]) -> tuple[int, list[tuple]]:
    """How to record `launches` by stream capture so that the graph's edges are their `after`
    lists: (the number of streams, the steps). A launch continues the stream whose last launch it
    depends on; others get a stream of their own that first waits for its dependencies' events
    (or, with none, for the start). Every stream ends joined into stream 0, as a capture requires.
    Steps: ("launch", stream, launch index), ("record", stream, event index), ("wait", stream, event
    index); event i follows launch i, event len(launches) marks the start."""
    start = len(launches)
    tails: list[int] = []  # the last launch on each stream
    placed: list[tuple] = []  # (stream, launch index, events waited for before it)
    for j, launch in enumerate(launches):
        continued = [s for s, tail in enumerate(tails) if tail in launch.after]
        if not tails:  # the first launch: stream 0, which the capture begins on
            stream, waits = 0, ()
            tails.append(j)
        elif continued:
            stream = continued[0]
            waits = tuple(i for i in launch.after if i != tails[stream])
        else:
            stream, waits = len(tails), tuple(launch.after) or (start,)
            tails.append(j)
        tails[stream] = j
        if launch.programmatic and (not continued or waits):
            raise ValueError(f"launch {j}: a programmatic launch must follow its one dependency on that one's stream")
        placed.append((stream, j, waits))
    recorded = {i for _, _, waits in placed for i in waits if i != start}
    recorded |= set(tails[1:])  # joined into stream 0 at the end
    steps: list[tuple] = []
    if any(start in waits for _, _, waits in placed):
        steps.append(("record", 0, start))
    for stream, j, waits in placed:
        steps += [("wait", stream, i) for i in waits]
        steps.append(("launch", stream, j))
        if j in recorded:
            steps.append(("record", stream, j))
    waited_on_0 = {i for stream, _, waits in placed if stream == 0 for i in waits}
    steps += [("wait", 0, tails[s]) for s in range(1, len(tails)) if tails[s] not in waited_on_0]
    return len(tails), steps


def _run_steps(steps: Sequence[tuple[Callable, tuple, str]]) -> None:
    for function, arguments, name in steps:
        check(function(*arguments), name)


class CallGraph:
    """One shape's launches: parameter blocks, the streams and events to record them on, the
    recording and the executable graph each call's values are written into before it is launched."""

    def __init__(self, call: CallDescription, compiled: Sequence, argument_names: Sequence[str]):
        """`argument_names`: the caller's tensors, in the order of the addresses each call passes."""
        cuda = cuda_driver()
        self.params = [KernelParams(launch, kernel) for launch, kernel in zip(call.launches, compiled)]
        self._programmatic = [launch.programmatic for launch in call.launches]
        self.workspace_bytes = call.workspace_bytes  # each call allocates its workspaces in one block of this size
        # every call's values go to: the caller's pointers and TMA descriptors (by argument position),
        # the workspaces' (written when the call's workspace allocation moves: offsets from its base), eps
        offsets = dict(call.workspace_offsets)
        position = {name: k for k, name in enumerate(argument_names)}
        pointers = [slot for p in self.params for slot in p.pointer_slots]
        descriptors = [d for p in self.params for d in p.descriptors]
        self._caller_pointers = [(position[name], slot) for name, slot in pointers if name not in offsets]
        self._caller_descriptors = [(position[name], d) for name, d in descriptors if name not in offsets]
        self._workspace_pointers = [(offsets[name], slot) for name, slot in pointers if name in offsets]
        self._workspace_descriptors = [(offsets[name], d) for name, d in descriptors if name in offsets]
        self._eps_slots = [slot for p in self.params for name, slot in p.scalar_slots if name == "eps"]
        self._workspace_base: int | None = None
        # the values (addresses, eps, workspace base) the executable graph was last written with:
        # a call with the same values launches it as it is
        self._graph_values: tuple | None = None
        self._lock = threading.Lock()  # the parameter blocks, streams and graph serve every caller of this shape
        # the launches recorded once (a CUgraph, kept for its node handles), and per launch the step
        # that writes the values now in its parameter block into its kernel node of the executable graph
        self._recording = ctypes.c_void_p()
        self._set_node_params: list[tuple[Callable, tuple, str]] = []
        context = ctypes.c_void_p()
        check(cuda.cuCtxGetCurrent(ctypes.byref(context)), "cuCtxGetCurrent")
        self.context = context.value
        stream_count, steps = recording_steps(call.launches)
        self.graph_exec = ctypes.c_void_p()
        self.streams = [ctypes.c_void_p() for _ in range(stream_count)]
        self.events = [ctypes.c_void_p() for _ in range(len(call.launches) + 1)]
        try:
            for stream in self.streams:
                check(cuda.cuStreamCreate(ctypes.byref(stream), _STREAM_NON_BLOCKING), "cuStreamCreate")
            for event in self.events:
                check(cuda.cuEventCreate(ctypes.byref(event), _EVENT_DISABLE_TIMING), "cuEventCreate")
        except BaseException as error:  # free what was made; the original error is the one raised
            self._destroy_noting(error)
            raise
        self._steps = [self._bind(step, self.streams) for step in steps]
        # While the caller's stream is being captured: the launches one after the other onto it (in
        # an order that respects `after`). Forking onto a private stream would draw that stream into
        # the caller's capture until the caller ends it, and so break other calls of this shape.
        self._caller_stream = ctypes.c_void_p()
        self._serial_steps = [self._bind(("launch", 0, j), [self._caller_stream]) for j in range(len(self.params))]

    def _bind(self, step: tuple, lanes: list[ctypes.c_void_p]) -> tuple[Callable, tuple, str]:
        """A recording step as (driver function, its arguments, its name), bound once."""
        cuda = cuda_driver()
        kind, lane, index = step
        if kind == "record":
            return cuda.cuEventRecord, (self.events[index], lanes[lane]), "cuEventRecord"
        if kind == "wait":
            return cuda.cuStreamWaitEvent, (lanes[lane], self.events[index], ctypes.c_uint(0)), "cuStreamWaitEvent"
        p, one = self.params[index], ctypes.c_uint(1)
        if self._programmatic[index]:
            return _ProgrammaticLaunch(p, lanes[lane]), (), "cuLaunchKernelEx"
        return cuda.cuLaunchKernel, (
            ctypes.c_void_p(p.function), ctypes.c_uint(p.grid), one, one, ctypes.c_uint(p.threads), one, one,
            ctypes.c_uint(p.shared_bytes), lanes[lane], p.array, None), "cuLaunchKernel"

    def launch(self, addresses: tuple[int, ...], eps: float, workspace_base: int, stream: int) -> None:
        """Write this call's values (`addresses`: the caller's tensors', in `argument_names` order;
        `workspace_base`: the call's workspace allocation) into the executable graph and launch it on
        `stream`, or, while `stream` is being captured, record the launches onto it one after the
        other (they join the caller's capture). A call whose values are those the executable graph
        holds (the same buffers as the call before) launches it as it is."""
        cuda = cuda_driver()
        values = (addresses, eps, workspace_base)
        with self._lock:
            self._make_context_current()
            stream = ctypes.c_void_p(stream)
            capturing = ctypes.c_int()
            check(cuda.cuStreamIsCapturing(stream, ctypes.byref(capturing)), "cuStreamIsCapturing")
            if capturing.value:
                self._write_values(addresses, eps, workspace_base)
                self._caller_stream.value = stream.value
                _run_steps(self._serial_steps)
                return
            if values != self._graph_values:
                self._write_values(addresses, eps, workspace_base)
                self._graph_values = None  # until the executable graph holds them
                self._update_exec()
                self._graph_values = values
            check(cuda.cuGraphLaunch(self.graph_exec, stream), "cuGraphLaunch")

    def _update_exec(self) -> None:
        """The executable graph, given the values now in the parameter blocks: the first time the
        launches are recorded (the recording kept: its nodes name the executable graph's) and the
        executable graph instantiated from it; afterwards each parameter block is copied into its
        kernel node of the executable graph (cuGraphExecKernelNodeSetParams)."""
        if self.graph_exec.value:
            _run_steps(self._set_node_params)
            return
        cuda = cuda_driver()
        if self._recording.value:  # recorded, but the instantiation failed: recorded anew
            recording, self._recording = self._recording, ctypes.c_void_p()
            check(cuda.cuGraphDestroy(recording), "cuGraphDestroy")
        self._record()
        check(cuda.cuGraphInstantiateWithFlags(ctypes.byref(self.graph_exec), self._recording, ctypes.c_ulonglong(0)),
              "cuGraphInstantiate")

    def _record(self) -> None:
        """The launches, with the values now in the parameter blocks, recorded as a graph (kept),
        and each launch's kernel node found in it."""
        cuda = cuda_driver()
        graph = self._capture()
        try:
            self._set_node_params = self._node_param_steps(graph)
        except BaseException as error:  # free the recording; the original error is the one raised
            result = cuda.cuGraphDestroy(graph)
            if result:
                error.__notes__ = [*getattr(error, "__notes__", []), f"cuGraphDestroy then failed too: {result}"]
            raise
        self._recording = graph

    def _node_param_steps(self, graph: ctypes.c_void_p) -> list[tuple[Callable, tuple, str]]:
        """Per launch, in order, the step that writes its parameter block's values into its kernel node
        of the executable graph instantiated from `graph` (whose nodes hold them now: that is how each
        node is told from the others)."""
        cuda = cuda_driver()
        count = ctypes.c_size_t()
        check(cuda.cuGraphGetNodes(graph, None, ctypes.byref(count)), "cuGraphGetNodes")
        nodes = (ctypes.c_void_p * count.value)()
        check(cuda.cuGraphGetNodes(graph, nodes, ctypes.byref(count)), "cuGraphGetNodes")
        steps: list = [None] * len(self.params)
        for node in nodes:
            node_type = ctypes.c_int()
            check(cuda.cuGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(node_type)), "cuGraphNodeGetType")
            if node_type.value != _GRAPH_NODE_TYPE_KERNEL:
                continue
            recorded = _KernelNodeParams()
            check(cuda.cuGraphKernelNodeGetParams_v2(ctypes.c_void_p(node), ctypes.byref(recorded)),
                  "cuGraphKernelNodeGetParams")
            j = next((j for j, p in enumerate(self.params) if steps[j] is None and p.recorded_as(recorded)), None)
            if j is None:
                raise RuntimeError("a recorded kernel node matches none of the call's launches")
            recorded.kernelParams, recorded.extra = self.params[j].array, None  # the values the driver copies
            steps[j] = (cuda.cuGraphExecKernelNodeSetParams_v2,
                        (self.graph_exec, ctypes.c_void_p(node), ctypes.byref(recorded)), "cuGraphExecKernelNodeSetParams")
        if None in steps:
            raise RuntimeError(f"launch {steps.index(None)} has no kernel node in the recorded graph")
        return steps

    def _write_values(self, addresses: tuple[int, ...], eps: float, workspace_base: int) -> None:
        for position, slot in self._caller_pointers:
            slot.value = addresses[position]
        for position, descriptor in self._caller_descriptors:
            descriptor.encode(addresses[position])
        if workspace_base != self._workspace_base:
            for offset, slot in self._workspace_pointers:
                slot.value = workspace_base + offset
            for offset, descriptor in self._workspace_descriptors:
                descriptor.encode(workspace_base + offset)
            self._workspace_base = workspace_base
        for slot in self._eps_slots:
            slot.value = eps

    def _capture(self) -> ctypes.c_void_p:
        """This call's launches as a CUgraph, by capture on the private stream 0."""
        cuda = cuda_driver()
        graph = ctypes.c_void_p()
        check(cuda.cuStreamBeginCapture_v2(self.streams[0], _CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture")
        try:
            _run_steps(self._steps)  # the driver copies each parameter block as it records the launch
        except BaseException:  # leave capture mode; the recording's error is the one raised
            if cuda.cuStreamEndCapture(self.streams[0], ctypes.byref(graph)) == 0 and graph.value:
                cuda.cuGraphDestroy(graph)
            raise
        check(cuda.cuStreamEndCapture(self.streams[0], ctypes.byref(graph)), "cuStreamEndCapture")
        return graph

    def _make_context_current(self) -> None:
        """The driver calls act on the thread's current context: a thread that has not used the
        device through the runtime yet may have none."""
        current = ctypes.c_void_p()
        check(cuda_driver().cuCtxGetCurrent(ctypes.byref(current)), "cuCtxGetCurrent")
        if current.value != self.context:
            check(cuda_driver().cuCtxSetCurrent(ctypes.c_void_p(self.context)), "cuCtxSetCurrent")

    def destroy(self) -> None:
        """Free the executable graph, streams and events (the driver defers it until launches
        already made complete)."""
        cuda = cuda_driver()
        errors = []
        if self._recording.value:
            errors.append(("cuGraphDestroy", cuda.cuGraphDestroy(self._recording)))
            self._recording = ctypes.c_void_p()
        if self.graph_exec.value:
            errors.append(("cuGraphExecDestroy", cuda.cuGraphExecDestroy(self.graph_exec)))
            self.graph_exec.value = None  # the same object: the node update steps pass it
        for stream in self.streams:
            if stream.value:
                errors.append(("cuStreamDestroy", cuda.cuStreamDestroy_v2(stream)))
                stream.value = None
        for event in self.events:
            if event.value:
                errors.append(("cuEventDestroy", cuda.cuEventDestroy_v2(event)))
                event.value = None
        for name, result in errors:
            check(result, name)

    def _destroy_noting(self, error: BaseException) -> None:
        try:
            self.destroy()
        except Exception as cleanup:
            error.__notes__ = [*getattr(error, "__notes__", []), f"freeing the graph then failed too: {cleanup}"]

    def __del__(self) -> None:  # evicted from the cache and no longer in use by any caller
        try:
            self.destroy()
        except Exception:  # at interpreter exit the driver may already be shut down
            pass


class GraphCache:
    """The `capacity` most recently used CallGraphs, by key. An evicted one is freed once no caller
    holds it any more (CallGraph.__del__)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._graphs: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key, build: Callable[[], CallGraph]) -> CallGraph:
        with self._lock:
            graph = self._graphs.get(key)
            if graph is not None:
                self._graphs.move_to_end(key)
                return graph
        graph = build()  # outside the lock: compiling can take seconds
        with self._lock:
            if key in self._graphs:  # another thread built it meanwhile
                return self._graphs[key]
            self._graphs[key] = graph
            while len(self._graphs) > self.capacity:
                self._graphs.popitem(last=False)
            return graph

    def __len__(self) -> int:
        return len(self._graphs)

    def clear(self) -> None:
        with self._lock:
            self._graphs.clear()
