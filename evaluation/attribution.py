"""Attribute CUPTI activity records to timed iterations (docs/evaluator.md §2.9 steps 5-8).

Pure Python over plain records, so it is tested on the CPU with synthetic timestamps.
"""

from __future__ import annotations

import bisect
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from evaluation.kernel_names import activity_key, demangle


@dataclass(frozen=True)
class GpuActivity:
    """A CONCURRENT_KERNEL, MEMCPY or MEMSET record (timestamps in CUPTI ns)."""

    kind: str  # "CONCURRENT_KERNEL", "MEMCPY" or "MEMSET"
    name: str  # kernel name as CUPTI reports it; "MEMCPY" / "MEMSET" for copies and fills
    start: int
    end: int
    correlation_id: int
    copy_kind: int = 0
    num_bytes: int = 0
    value: int = 0

    @property
    def key(self) -> str:
        name = demangle(self.name) if self.kind == "CONCURRENT_KERNEL" else self.kind
        return activity_key(name, self.copy_kind, self.num_bytes, self.value, self.kind)


@dataclass(frozen=True)
class ApiRecord:
    """A RUNTIME or DRIVER API record: a host call that may have launched GPU work."""

    start: int
    end: int
    correlation_id: int


@dataclass(frozen=True)
class Attribution:
    spans_ms: tuple[float, ...]
    kernel_set: frozenset[str]
    # per activity name (kernel name, "MEMCPY", "MEMSET"): the median over iterations of its summed
    # GPU time in the iteration; the gaps between activities are what spans_ms adds on top
    activity_ms: dict[str, float] = field(default_factory=dict)
    # per activity name: the medians over iterations of its first start and last end, in ms from the
    # iteration's first GPU activity (a timeline: which kernels overlap, where the gaps are)
    window_ms: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.spans_ms)


def attribute(
    windows: list[tuple[int, int]], api_records: list[ApiRecord], activities: list[GpuActivity]
) -> Attribution:
    """Spans of every iteration window `(t0, t1)`.

    An iteration owns the API records whose START lies in [t0, t1] (from any host thread) and every
    GPU activity sharing their correlation ids (any stream). Its span is max end - min start of those
    activities, so GPU idle gaps inside it count. Every iteration must launch the same SET of activity
    keys as the first one.
    """
    by_correlation: dict[int, list[GpuActivity]] = defaultdict(list)
    for activity in activities:
        by_correlation[activity.correlation_id].append(activity)
    api_sorted = sorted(api_records, key=lambda record: record.start)
    api_starts = [record.start for record in api_sorted]

    spans, first_set, busy = [], None, defaultdict(list)
    starts: dict[str, list[float]] = defaultdict(list)
    ends: dict[str, list[float]] = defaultdict(list)
    for i, (t0, t1) in enumerate(windows):
        lo, hi = bisect.bisect_left(api_starts, t0), bisect.bisect_right(api_starts, t1)
        ids = {record.correlation_id for record in api_sorted[lo:hi]}
        owned = [activity for cid in ids for activity in by_correlation.get(cid, ())]
        if not owned:
            raise RuntimeError(f"No kernel activities recorded for iteration {i}")
        names = {activity.key for activity in owned}
        if first_set is None:
            first_set = names
        elif names != first_set:
            raise RuntimeError(f"Inconsistent kernel names: {sorted(names)} != {sorted(first_set)}")
        origin = min(a.start for a in owned)
        spans.append((max(a.end for a in owned) - origin) / 1e6)
        iteration_busy: dict[str, int] = defaultdict(int)
        first_start: dict[str, int] = {}
        last_end: dict[str, int] = {}
        for activity in owned:
            iteration_busy[activity.name] += activity.end - activity.start
            first_start[activity.name] = min(first_start.get(activity.name, activity.start), activity.start)
            last_end[activity.name] = max(last_end.get(activity.name, activity.end), activity.end)
        for name, ns in iteration_busy.items():
            busy[name].append(ns / 1e6)
            starts[name].append((first_start[name] - origin) / 1e6)
            ends[name].append((last_end[name] - origin) / 1e6)
    activity_ms = {name: statistics.median(times) for name, times in busy.items()}
    window_ms = {name: (statistics.median(starts[name]), statistics.median(ends[name])) for name in busy}
    return Attribution(tuple(spans), frozenset(first_set or ()), activity_ms, window_ms)
