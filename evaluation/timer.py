"""The official timer (docs/evaluator.md §2.9): shifting pool, cold L2, CUPTI spans, median.

    from evaluation.timer import time_call
    result = time_call(run, inputs, [torch.zeros_like(o) for o in outputs])   # DPS
    result = time_call(reference_run, inputs, [])                             # return style
    print(result.median_ms, result.timer)

Per call: `setup` (copy inputs into the next 256-byte-shifted pool slot, zero the outputs), flush L2
(`.zero_()` on 2 x L2 bytes), then `fn(*args)` between two CUPTI timestamps. The iteration's time is
the span of the GPU activities its API calls launched; the result is the median over `rep` calls.

Where `cupti` (cupti-python) cannot be imported, the timer falls back to CUDA events around each
call (`timer == "cuda-events"`; NOT comparable with the leaderboard: it also counts launch latency
before the first kernel). Every report line carries the timer name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from evaluation.attribution import ApiRecord, Attribution, GpuActivity, attribute
from evaluation.shifting_pool import ShiftingMemoryPool

try:
    from cupti import cupti
except ImportError:  # cupti-python absent (CPU CI, bare installs): CUDA-event fallback
    cupti = None

CUPTI_TIMER = "cupti"
EVENT_TIMER = "cuda-events"
TIMER_NAME = CUPTI_TIMER if cupti is not None else EVENT_TIMER

CUPTI_BUFFER_BYTES = 8 * 1024 * 1024  # §2.9 step 2: 8 MiB buffers, unlimited records


@dataclass(frozen=True)
class TimingResult:
    median_ms: float
    spans_ms: tuple[float, ...]
    kernel_set: frozenset[str]  # activity keys of one iteration (empty for the event timer)
    timer: str  # "cupti" or "cuda-events"
    activity_ms: dict[str, float] = field(default_factory=dict)  # GPU time per kernel name (CUPTI only)
    window_ms: dict[str, tuple[float, float]] = field(default_factory=dict)  # its (start, end) in the call (CUPTI only)
    last_args: tuple = field(default=(), repr=False, compare=False)  # the last timed call's arguments
    last_return: object = field(default=None, repr=False, compare=False)  # and its return value


class L2Flusher:
    """`.zero_()` on a buffer of twice the L2 size (§2.9; H200: 2 x 60 MiB written per call)."""

    def __init__(self, device: torch.device):
        l2_bytes = torch.cuda.get_device_properties(device).L2_cache_size
        self.buffer = torch.empty(2 * l2_bytes, dtype=torch.int8, device=device)

    def __call__(self) -> None:
        self.buffer.zero_()


class _CuptiRecorder:
    """Collects GPU activities and API records between `start()` and `stop()` (§2.9 steps 2 and 4)."""

    GPU_KINDS = ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET")
    API_KINDS = ("RUNTIME", "DRIVER")

    def __init__(self):
        self.activities: list[GpuActivity] = []
        self.api_records: list[ApiRecord] = []
        self.kinds = [getattr(cupti.ActivityKind, name) for name in self.API_KINDS + self.GPU_KINDS]
        self.gpu_kind_names = {int(getattr(cupti.ActivityKind, name)): name for name in self.GPU_KINDS}
        self.api_kinds = {int(getattr(cupti.ActivityKind, name)) for name in self.API_KINDS}

    def _buffer_requested(self):
        return CUPTI_BUFFER_BYTES, 0

    def _buffer_completed(self, records) -> None:
        for record in records:
            kind = int(record.kind)
            if kind in self.gpu_kind_names:
                kind_name = self.gpu_kind_names[kind]
                self.activities.append(
                    GpuActivity(
                        kind=kind_name,
                        name=record.name if kind_name == "CONCURRENT_KERNEL" else kind_name,
                        start=record.start,
                        end=record.end,
                        correlation_id=record.correlation_id,
                        copy_kind=int(record.copy_kind) if kind_name == "MEMCPY" else 0,
                        num_bytes=int(record.bytes) if kind_name != "CONCURRENT_KERNEL" else 0,
                        value=int(record.value) if kind_name == "MEMSET" else 0,
                    )
                )
            elif kind in self.api_kinds:
                self.api_records.append(ApiRecord(record.start, record.end, record.correlation_id))

    def start(self) -> None:
        for kind in self.kinds:
            cupti.activity_enable(kind)
        cupti.activity_register_callbacks(self._buffer_requested, self._buffer_completed)

    def stop(self) -> None:
        cupti.activity_flush_all(0)
        for kind in self.kinds:
            cupti.activity_disable(kind)
        cupti.finalize()


def _run_cupti(fn: Callable, setup: Callable, flush: Callable, rep: int):
    """§2.9 steps 2-8: traced loop, attribution by API window, consistency, median."""
    recorder = _CuptiRecorder()
    recorder.start()
    try:
        torch.cuda.synchronize()
        windows, last = [], None
        for _ in range(rep):
            args = setup()
            flush()
            t0 = cupti.get_timestamp()
            returned = fn(*args)
            t1 = cupti.get_timestamp()
            torch.cuda.synchronize()
            windows.append((t0, t1))
            last = (tuple(args), returned)
        torch.cuda.synchronize()
    finally:
        recorder.stop()
    return attribute(windows, recorder.api_records, recorder.activities), last


def _run_events(fn: Callable, setup: Callable, flush: Callable, rep: int):
    """Fallback without CUPTI: CUDA events recorded right around each call."""
    spans, last = [], None
    for _ in range(rep):
        args = setup()
        flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        returned = fn(*args)
        end.record()
        torch.cuda.synchronize()
        spans.append(start.elapsed_time(end))
        last = (tuple(args), returned)
    return Attribution(tuple(spans), frozenset()), last


def time_call(
    fn: Callable, inputs: list, output_templates: list[torch.Tensor], warmup: int = 10, rep: int = 50
) -> TimingResult:
    """Median latency of `fn(*inputs, *outputs)` in ms, measured like the official `time_runnable`.

    `output_templates` are the DPS outputs (zeroed before every call); pass `[]` for return style.
    Raises RuntimeError "No kernel activities recorded for iteration <i>" or "Inconsistent kernel
    names: ..." like the official timer (the driver turns any exception into "Timing failed: <e>").
    """
    device = torch.device("cuda:0")
    with torch.cuda.device(device):
        pool = ShiftingMemoryPool(list(inputs), list(output_templates), warmup + rep)
        flush = L2Flusher(device)
        torch.cuda.synchronize()
        for _ in range(warmup):
            args = pool.next()
            flush()
            fn(*args)
        torch.cuda.synchronize()
        run_loop = _run_cupti if cupti is not None else _run_events
        attribution, (last_args, last_return) = run_loop(fn, pool.next, flush, rep)
    return TimingResult(
        median_ms=attribution.median_ms,
        spans_ms=attribution.spans_ms,
        kernel_set=attribution.kernel_set,
        activity_ms=attribution.activity_ms,
        window_ms=attribution.window_ms,
        timer=TIMER_NAME,
        last_args=last_args,
        last_return=last_return,
    )
