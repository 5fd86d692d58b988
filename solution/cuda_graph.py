"""Record a call's kernel launches into a CUDA graph, then launch the graph: the driver API by ctypes.

The benchmark's timer counts the GPU's idle time between a call's first and last kernel, and under
its CUPTI tracing every Triton launch costs ~20 us of host time: kernels shorter than that leave the
GPU waiting for the next launch. Recording the launches (host work only, before anything runs) and
launching them as one graph lets the GPU run them back to back.

Launches may form groups that run concurrently: each group forks from the stream that records the
graph (an event recorded there, waited for by one more stream per extra member) and joins it again
before the next group, so the graph's edges say which kernels may overlap.

Each call records, instantiates, launches and frees its own graph: nothing carries over between
calls. `torch.cuda.CUDAGraph` is not used because its capture also fills the RNG state tensors of
the default generator, two kernels that would run (and be timed) before the graph.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

_CAPTURE_MODE_THREAD_LOCAL = 1  # CUstreamCaptureMode: other threads' CUDA calls stay legal meanwhile
_EVENT_DISABLE_TIMING = 2  # CUevent_flags
_driver: ctypes.CDLL | None = None


def _cuda() -> ctypes.CDLL:
    global _driver
    if _driver is None:
        _driver = ctypes.CDLL("libcuda.so.1")
        for name in ("cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphInstantiateWithFlags",
                     "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy", "cuEventCreate", "cuEventRecord",
                     "cuStreamWaitEvent"):
            getattr(_driver, name).restype = ctypes.c_int
    return _driver


def _check(result: int, call: str) -> None:
    if result != 0:
        raise RuntimeError(f"{call} failed: CUresult {result}")


def create_events(count: int) -> list[int]:
    """`count` CUDA events (without timing) in the current context, for `launch_as_graph`'s forks and
    joins; made once and kept (recording an event into a graph leaves the event itself unused)."""
    events = []
    for _ in range(count):
        event = ctypes.c_void_p()
        _check(_cuda().cuEventCreate(ctypes.byref(event), _EVENT_DISABLE_TIMING), "cuEventCreate")
        events.append(event.value)
    return events


def _record_then_wait(event: int, recorder: int, waiter: int) -> None:
    """An edge from everything `recorder` has recorded so far to what `waiter` records next."""
    cuda = _cuda()
    _check(cuda.cuEventRecord(ctypes.c_void_p(event), ctypes.c_void_p(recorder)), "cuEventRecord")
    _check(cuda.cuStreamWaitEvent(ctypes.c_void_p(waiter), ctypes.c_void_p(event), 0), "cuStreamWaitEvent")


def launch_as_graph(groups: Sequence[Sequence[Callable[[], None]]], streams: Sequence[int],
                    events: Sequence[int], stream: int) -> None:
    """Record `groups` into a graph and launch it on `stream`. The members of a group may run
    concurrently, after everything in the groups before it: member j launches its kernels on
    `streams[j]` (none of them the default stream); `events` holds one event per stream. The graph
    is freed at once; the driver defers that until the launched graph completes."""
    cuda = _cuda()
    graph, graph_exec = ctypes.c_void_p(), ctypes.c_void_p()
    main = streams[0]
    _check(cuda.cuStreamBeginCapture_v2(ctypes.c_void_p(main), _CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture")
    try:
        for group in groups:
            for j in range(1, len(group)):  # fork: the other members' streams join the capture here
                _record_then_wait(events[0], main, streams[j])
            for launch in group:
                launch()
            for j in range(1, len(group)):  # join: the next group waits for every member
                _record_then_wait(events[j], streams[j], main)
    finally:  # always leave the capture stream out of capture mode
        _check(cuda.cuStreamEndCapture(ctypes.c_void_p(main), ctypes.byref(graph)), "cuStreamEndCapture")
    try:
        _check(cuda.cuGraphInstantiateWithFlags(ctypes.byref(graph_exec), graph, ctypes.c_ulonglong(0)),
               "cuGraphInstantiate")
        try:
            _check(cuda.cuGraphLaunch(graph_exec, ctypes.c_void_p(stream)), "cuGraphLaunch")
        finally:
            _check(cuda.cuGraphExecDestroy(graph_exec), "cuGraphExecDestroy")
    finally:
        _check(cuda.cuGraphDestroy(graph), "cuGraphDestroy")
