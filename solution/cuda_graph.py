"""Record a call's kernel launches into a CUDA graph, then launch the graph: the driver API by ctypes.

The benchmark's timer counts the GPU's idle time between a call's first and last kernel, and under
its CUPTI tracing every Triton launch costs ~20 us of host time: kernels shorter than that leave the
GPU waiting for the next launch. Recording the launches (host work only, before anything runs) and
launching them as one graph lets the GPU run them back to back.

Each call records, instantiates, launches and frees its own graph: nothing carries over between
calls. `torch.cuda.CUDAGraph` is not used because its capture also fills the RNG state tensors of
the default generator, two kernels that would run (and be timed) before the graph.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

_CAPTURE_MODE_THREAD_LOCAL = 1  # CUstreamCaptureMode: other threads' CUDA calls stay legal meanwhile
_driver: ctypes.CDLL | None = None


def _cuda() -> ctypes.CDLL:
    global _driver
    if _driver is None:
        _driver = ctypes.CDLL("libcuda.so.1")
        for name in ("cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphInstantiateWithFlags",
                     "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy"):
            getattr(_driver, name).restype = ctypes.c_int
    return _driver


def _check(result: int, call: str) -> None:
    if result != 0:
        raise RuntimeError(f"{call} failed: CUresult {result}")


def launch_as_graph(launches: Sequence[Callable[[], None]], capture_stream: int, stream: int) -> None:
    """Record `launches` (each launches kernels on `capture_stream`, which must not be the default
    stream) into a graph and launch it on `stream`. The graph is freed at once; the driver defers
    that until the launched graph completes."""
    cuda = _cuda()
    graph, graph_exec = ctypes.c_void_p(), ctypes.c_void_p()
    _check(cuda.cuStreamBeginCapture_v2(ctypes.c_void_p(capture_stream), _CAPTURE_MODE_THREAD_LOCAL),
           "cuStreamBeginCapture")
    try:
        for launch in launches:
            launch()
    finally:  # always leave the capture stream out of capture mode
        _check(cuda.cuStreamEndCapture(ctypes.c_void_p(capture_stream), ctypes.byref(graph)), "cuStreamEndCapture")
    try:
        _check(cuda.cuGraphInstantiateWithFlags(ctypes.byref(graph_exec), graph, ctypes.c_ulonglong(0)),
               "cuGraphInstantiate")
        try:
            _check(cuda.cuGraphLaunch(graph_exec, ctypes.c_void_p(stream)), "cuGraphLaunch")
        finally:
            _check(cuda.cuGraphExecDestroy(graph_exec), "cuGraphExecDestroy")
    finally:
        _check(cuda.cuGraphDestroy(graph), "cuGraphDestroy")
