"""A call's kernels as one CUDA graph, built once per shape and relaunched with each call's addresses.

Why a graph: the benchmark's timer counts the GPU's idle time between a call's first and last
kernel, and under its CUPTI tracing each separate launch costs ~20 us of host time, so kernels
shorter than that would leave the GPU waiting. A graph's kernels follow each other back to back.

Why built once: recording and instantiating a graph costs ~0.5 ms of host time, twenty times the
GPU time of a 128-token call. So a `CallGraph` is built per device, shape, plan and pointer
alignment (what decides which compiled kernels run), and every call only writes its own addresses
(and eps) into the kernels' parameter blocks, updates the graph's kernel nodes with them
(cuGraphExecKernelNodeSetParams) and launches the graph. Nothing computed from the data is kept: the
parameter blocks hold addresses, TMA descriptors of those addresses, shapes and eps, rewritten every
call. `GraphCache` keeps the few most recent shapes per process.

The parameter block of a Triton kernel is laid out here the way Triton 3.6's own launcher lays it
out (triton/backends/nvidia/driver.py, `make_launcher`): one entry per parameter that is not a
compile-time constant, in order (a pointer: 8 bytes; a TMA descriptor: the 128-byte CUtensorMap
followed by its shape as int32 and strides as int64; int32/int64/fp32 scalars), then the global and
profile scratch pointers. A kernel that needs scratch memory or a non-TMA descriptor is refused.

When the caller's stream is being captured (the caller records its own CUDA graph), the kernels are
launched one by one instead, and so become part of the caller's graph.

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

_GRAPH_NODE_TYPE_KERNEL = 0  # CUgraphNodeType
_L2_PROMOTION_128B = 2  # CUtensorMapL2promotion, as Triton's launcher
_TENSOR_MAP_BYTES, _TENSOR_MAP_ALIGNMENT = 128, 64
_driver: ctypes.CDLL | None = None


class _KernelNodeParams(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS_v2."""

    _fields_ = [("func", ctypes.c_void_p),
                ("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint),
                ("kernelParams", ctypes.POINTER(ctypes.c_void_p)), ("extra", ctypes.c_void_p),
                ("kern", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]


def cuda_driver() -> ctypes.CDLL:
    global _driver
    if _driver is None:
        _driver = ctypes.CDLL("libcuda.so.1")
        for name in ("cuGraphCreate", "cuGraphAddKernelNode_v2", "cuGraphInstantiateWithFlags",
                     "cuGraphExecKernelNodeSetParams_v2", "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy",
                     "cuTensorMapEncodeTiled", "cuLaunchKernel", "cuStreamIsCapturing", "cuCtxGetCurrent",
                     "cuCtxSetCurrent"):
            getattr(_driver, name).restype = ctypes.c_int
    return _driver


def check(result: int, call: str) -> None:
    if result != 0:
        raise RuntimeError(f"{call} failed: CUresult {result}")


class _Descriptor:
    """One TMA descriptor parameter: the CUtensorMap, 64-byte aligned, re-encoded for each base
    address; its shape and strides are fixed by the shape of the call."""

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

    def encode(self, base: int) -> None:
        dtype, rank, dims, strides, box, element_strides, interleave, swizzle, l2, fill = self._encode_args
        check(cuda_driver().cuTensorMapEncodeTiled(ctypes.c_void_p(self.address), dtype, rank, ctypes.c_void_p(base),
                                                   dims, strides, box, element_strides, interleave, swizzle, l2, fill),
              "cuTensorMapEncodeTiled")


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
        self.array = (ctypes.c_void_p * len(pointers))(*pointers)
        self.node = _KernelNodeParams(
            func=compiled.function, gridDimX=launch.grid, gridDimY=1, gridDimZ=1,
            blockDimX=32 * meta.num_warps, blockDimY=1, blockDimZ=1, sharedMemBytes=meta.shared,
            kernelParams=ctypes.cast(self.array, ctypes.POINTER(ctypes.c_void_p)), extra=None, kern=None, ctx=None)


def compile_launches(call: CallDescription, tensors: dict[str, torch.Tensor], eps: float) -> list:
    """The compiled kernel of every launch, for these tensors (Triton specializes on pointer
    alignment and on some integer values), compiling on first use. Nothing is launched."""
    compiled = []
    for launch in call.launches:
        args = [resolve(a, tensors, eps) for a in launch.args]
        kernel = launch.kernel.warmup(*args, grid=(launch.grid,), **launch.constexprs, **launch.options)
        kernel._init_handles()  # loads the module: kernel.function
        compiled.append(kernel)
    return compiled


class CallGraph:
    """One shape's launches as an instantiated CUDA graph, relaunched with each call's values."""

    def __init__(self, call: CallDescription, compiled: Sequence):
        cuda = cuda_driver()
        self.params = [KernelParams(launch, kernel) for launch, kernel in zip(call.launches, compiled)]
        # every call's values go to: the caller's pointers and TMA descriptors (written every call),
        # the workspaces' (written when the call's workspace allocation moves: offsets from its base), eps
        offsets = dict(call.workspace_offsets)
        pointers = [slot for p in self.params for slot in p.pointer_slots]
        descriptors = [d for p in self.params for d in p.descriptors]
        self._caller_pointers = [(name, slot) for name, slot in pointers if name not in offsets]
        self._caller_descriptors = [(name, d) for name, d in descriptors if name not in offsets]
        self._workspace_pointers = [(offsets[name], slot) for name, slot in pointers if name in offsets]
        self._workspace_descriptors = [(offsets[name], d) for name, d in descriptors if name in offsets]
        self._eps_slots = [slot for p in self.params for name, slot in p.scalar_slots if name == "eps"]
        self._workspace_base: int | None = None
        self._lock = threading.Lock()  # the parameter blocks are shared by every caller of this shape
        context = ctypes.c_void_p()
        check(cuda.cuCtxGetCurrent(ctypes.byref(context)), "cuCtxGetCurrent")
        self.context = context.value
        self.graph, self.graph_exec = ctypes.c_void_p(), ctypes.c_void_p()
        check(cuda.cuGraphCreate(ctypes.byref(self.graph), 0), "cuGraphCreate")
        try:
            nodes = []
            for launch, params in zip(call.launches, self.params):
                node = ctypes.c_void_p()
                deps = (ctypes.c_void_p * max(1, len(launch.after)))(*(nodes[i] for i in launch.after))
                check(cuda.cuGraphAddKernelNode_v2(ctypes.byref(node), self.graph, deps, len(launch.after),
                                                   ctypes.byref(params.node)), "cuGraphAddKernelNode")
                nodes.append(node)
            check(cuda.cuGraphInstantiateWithFlags(ctypes.byref(self.graph_exec), self.graph, ctypes.c_ulonglong(0)),
                  "cuGraphInstantiate")
        except BaseException as error:  # free what was made; the original error is the one raised
            try:
                self.destroy()
            except Exception as cleanup:
                error.__notes__ = [*getattr(error, "__notes__", []), f"freeing the graph then failed too: {cleanup}"]
            raise
        self._node_updates = [(self.graph_exec, node, ctypes.byref(p.node)) for node, p in zip(nodes, self.params)]

    def launch(self, addresses: dict[str, int], eps: float, workspace_base: int, stream: int) -> None:
        """Write this call's values (`addresses`: the caller's tensors'; `workspace_base`: the call's
        workspace allocation), then launch the graph on `stream`, or, while `stream` is being
        captured, each kernel one by one (they join the caller's capture)."""
        cuda = cuda_driver()
        with self._lock:
            self._make_context_current()
            for name, slot in self._caller_pointers:
                slot.value = addresses[name]
            for name, descriptor in self._caller_descriptors:
                descriptor.encode(addresses[name])
            if workspace_base != self._workspace_base:
                for offset, slot in self._workspace_pointers:
                    slot.value = workspace_base + offset
                for offset, descriptor in self._workspace_descriptors:
                    descriptor.encode(workspace_base + offset)
                self._workspace_base = workspace_base
            for slot in self._eps_slots:
                slot.value = eps
            stream = ctypes.c_void_p(stream)
            capturing = ctypes.c_int()
            check(cuda.cuStreamIsCapturing(stream, ctypes.byref(capturing)), "cuStreamIsCapturing")
            if capturing.value:
                for p in self.params:
                    n = p.node
                    check(cuda.cuLaunchKernel(ctypes.c_void_p(n.func), n.gridDimX, n.gridDimY, n.gridDimZ, n.blockDimX,
                                              n.blockDimY, n.blockDimZ, n.sharedMemBytes, stream, n.kernelParams,
                                              None), "cuLaunchKernel")
                return
            for update in self._node_updates:
                check(cuda.cuGraphExecKernelNodeSetParams_v2(*update), "cuGraphExecKernelNodeSetParams")
            check(cuda.cuGraphLaunch(self.graph_exec, stream), "cuGraphLaunch")

    def _make_context_current(self) -> None:
        """The driver calls act on the thread's current context: a thread that has not used the
        device through the runtime yet may have none."""
        current = ctypes.c_void_p()
        check(cuda_driver().cuCtxGetCurrent(ctypes.byref(current)), "cuCtxGetCurrent")
        if current.value != self.context:
            check(cuda_driver().cuCtxSetCurrent(ctypes.c_void_p(self.context)), "cuCtxSetCurrent")

    def destroy(self) -> None:
        """Free the graph (the driver defers it until launches already made complete)."""
        cuda = cuda_driver()
        errors = []
        if self.graph_exec.value:
            errors.append(cuda.cuGraphExecDestroy(self.graph_exec))
            self.graph_exec = ctypes.c_void_p()
        if self.graph.value:
            errors.append(cuda.cuGraphDestroy(self.graph))
            self.graph = ctypes.c_void_p()
        for result in errors:
            check(result, "cuGraphDestroy")

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
