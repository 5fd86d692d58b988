"""What a user's program pays per call: host time and back-to-back wall-clock beside the GPU latency.

The benchmark's timer counts GPU time from a call's first kernel to its last; a training step also
pays the host time of the call. Per workload:
  - host_us: host time of one call (perf_counter around the call, no synchronize; median of
    `--calls`, the GPU drained between calls so that a full launch queue never blocks the host);
  - host_busy_us: the same, for the calls of the back-to-back run below (same buffers), where the
    host does not wait for the GPU between calls (after a long synchronize every step of a call,
    pure Python included, measures slower: results/host_steps_2e42506.json);
  - wall_same_us: wall-clock per call over `--calls` back-to-back calls, one synchronize at the end,
    the same input and output buffers every call;
  - wall_fresh_us: the same with a fresh set of addresses every call (the official timer's shifting
    pool, evaluation.shifting_pool, prepared before the clock starts); host_fresh_busy_us: the median
    host time of one of those calls (each writes its addresses into the recorded launches and
    updates an executable graph with them);
  - wall_layers_us: the same with LAYERS sets of addresses called in turn (a model's FFN layers,
    each with its own buffers, which the caching allocator hands out again step after step; each
    set called once before the clock starts); host_layers_busy_us: the median host time of one of
    those calls;
  - gpu_us: the official-style GPU latency of the same call (evaluation.timer: CUPTI spans, cold L2,
    shifting addresses, median of 50);
  - target_wall_us = 1.1 x gpu_us + 10 and target_host_us = 40 (the goals), with pass/fail;
  - with --clocks: the SM clock, power draw and throttle reasons sampled during the back-to-back
    run with the same buffers and during the GPU latency's measurement (bench/clocks.py:
    clocks_back_to_back, clocks_gpu), which tell a GPU that runs a stream of calls at a lower clock
    from one that runs them slower at the same clock;
  - how busy the host itself was while these were measured, so that a slow spell of a shared host
    can be told from a slower package: reference_us and reference_after_us, the median time of a
    fixed pure-Python task that touches no GPU (HostReference; the same on every commit, so it
    compares runs and hosts), timed right before the workload's host measurement and right after
    its last back-to-back phase (a spell can begin or end in between); and over the host
    measurement the share of the CPUs' time the hypervisor took (steal_share, Linux's /proc/stat;
    null elsewhere) and this thread's involuntary context switches. These only describe the host:
    no figure above is corrected by them.

    python bench/real_use.py --out results/real_use_<commit>.json [--tokens 128 131072] [--clocks]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import resource
import statistics
import sys
import time

import torch

import reference
from reference.problem import ROOT
from bench.clocks import ClockLog
from bench.gpu import make_folders, require_gpu, writable
from evaluation.provenance import provenance
from evaluation.shifting_pool import ShiftingMemoryPool
from evaluation.timer import time_call
from solution.ffn_backward import run

HOST_TARGET_US = 40.0
LAYERS = 4  # sets of buffers called in turn for wall_layers_us


def wall_target_us(gpu_us: float) -> float:
    return 1.1 * gpu_us + 10.0


def back_to_back(argument_sets: list[list]) -> tuple[float, list[float]]:
    """(wall-clock per call over the back-to-back calls, each call's host time), in us."""
    torch.cuda.synchronize()
    host = []
    start = time.perf_counter()
    for args in argument_sets:
        call_start = time.perf_counter()
        run(*args)
        host.append((time.perf_counter() - call_start) * 1e6)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / len(argument_sets) * 1e6, host


class HostReference:
    """A fixed pure-Python task (integer arithmetic and a sort, ~20 us on a quiet host): its
    median time says how fast this host runs Python right now."""

    REPEATS = 50

    @staticmethod
    def task() -> int:
        return sum(sorted(((i * 7919) % 1009 for i in range(300)), reverse=True)[::3])

    @classmethod
    def median_us(cls) -> float:
        times = []
        for _ in range(cls.REPEATS):
            start = time.perf_counter()
            cls.task()
            times.append((time.perf_counter() - start) * 1e6)
        return statistics.median(times)


def _cpu_ticks() -> tuple[int, int] | None:
    """(all CPUs' steal ticks, all CPUs' ticks) from /proc/stat's first line, or None where the
    file is not Linux's."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        ticks = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError):
        return None
    return (ticks[7], sum(ticks)) if fields[0] == "cpu" and len(ticks) == 8 else None


def _steal_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def _involuntary_switches() -> int:
    return resource.getrusage(getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)).ru_nivcsw


def _back_to_back_us(argument_sets: list[list]) -> tuple[float, float]:
    """(wall-clock per call over the back-to-back calls, the median host time of one of them)."""
    wall, host = back_to_back(argument_sets)
    return wall, statistics.median(host)


def _workload_arguments(workload: reference.Workload, device: torch.device) -> tuple[list, list]:
    b, s = workload.axes["batch_size"], workload.axes["seq_len"]
    inputs = list(reference.make_inputs(b, s, device))
    shapes = reference.output_shapes(b, s)
    return inputs, [torch.empty(shapes[n], device=device) for n in reference.OUTPUT_NAMES]


def _clock_log(device: torch.device, clocks: bool):
    return ClockLog(device) if clocks else contextlib.nullcontext()


def measure_host(workload: reference.Workload, calls: int, device: torch.device, clocks: bool = False) -> dict:
    """Host time of one call and back-to-back wall-clock per call, no CUPTI in the process yet (with
    `clocks`, the clock sampled during the back-to-back run with the same buffers)."""
    inputs, outputs = _workload_arguments(workload, device)
    same = [*inputs, *outputs]
    for _ in range(3):  # first calls: compilation, graph build
        run(*same)
    torch.cuda.synchronize()
    # then as many untimed calls as timed ones: without them the first workload measured read
    # 15-25 us higher than the next (results/real_use_36d35a2.json), whichever it was
    for _ in range(calls):
        run(*same)
    torch.cuda.synchronize()
    reference_us = HostReference.median_us()
    ticks, switches = _cpu_ticks(), _involuntary_switches()
    host = []
    for _ in range(calls):
        start = time.perf_counter()
        run(*same)
        host.append((time.perf_counter() - start) * 1e6)
        torch.cuda.synchronize()
    with _clock_log(device, clocks) as log:
        wall_same, host_busy = _back_to_back_us([same] * calls)
    pool = ShiftingMemoryPool(inputs, outputs, calls)
    fresh = [pool.next() for _ in range(calls)]
    wall_fresh, host_fresh_busy = _back_to_back_us(fresh)
    layer_pool = ShiftingMemoryPool(inputs, outputs, LAYERS)
    layers = [layer_pool.next() for _ in range(LAYERS)]
    for args in layers:  # the step before
        run(*args)
    wall_layers, host_layers_busy = _back_to_back_us([layers[k % LAYERS] for k in range(calls)])
    steal = _steal_share(ticks, _cpu_ticks())
    reference_after_us = HostReference.median_us()
    return {"uuid": workload.uuid, "label": workload.label, "tokens": workload.tokens,
            "host_us": statistics.median(host), "host_us_max": max(host), "host_busy_us": host_busy,
            "host_fresh_busy_us": host_fresh_busy, "wall_same_us": wall_same, "wall_fresh_us": wall_fresh,
            "layers": LAYERS, "host_layers_busy_us": host_layers_busy, "wall_layers_us": wall_layers,
            "reference_us": reference_us, "reference_after_us": reference_after_us, "steal_share": steal,
            "involuntary_switches": _involuntary_switches() - switches,
            **({"clocks_back_to_back": log.summary()} if clocks else {})}


def add_gpu_latency(row: dict, workload: reference.Workload, device: torch.device, clocks: bool = False) -> dict:
    """The official-style GPU latency beside the host figures (with `clocks`, the clock sampled
    during its measurement), and the verdict against the targets."""
    inputs, outputs = _workload_arguments(workload, device)
    with _clock_log(device, clocks) as log:
        gpu_us = time_call(run, inputs, outputs, warmup=10, rep=50).median_ms * 1e3
    if clocks:
        row = {**row, "clocks_gpu": log.summary()}
    target = wall_target_us(gpu_us)
    return {**row, "gpu_us": gpu_us, "target_host_us": HOST_TARGET_US, "target_wall_us": target,
            "meets_targets": row["host_us"] <= HOST_TARGET_US and max(row["wall_same_us"], row["wall_fresh_us"]) <= target}


def _profile_host(workload: reference.Workload, calls: int, device: torch.device, path: str) -> None:
    """cProfile of `calls` back-to-back calls with the same buffers (the kept graph relaunched), then
    of as many with a fresh set of addresses each (recorded and written into the kept graph every
    call, as under the benchmark's shifting pool): the host side of each, by own time."""
    import cProfile
    import io
    import pstats

    inputs, outputs = _workload_arguments(workload, device)
    pool = ShiftingMemoryPool(inputs, outputs, calls)
    sections = {"same buffers": [[*inputs, *outputs]] * calls, "fresh addresses": [pool.next() for _ in range(calls)]}
    run(*inputs, *outputs)
    torch.cuda.synchronize()
    with open(path, "w") as f:
        for title, argument_sets in sections.items():
            profiler = cProfile.Profile()
            profiler.enable()
            for args in argument_sets:
                run(*args)
            profiler.disable()
            torch.cuda.synchronize()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
            f.write(f"{workload.label}, {calls} calls, {title}\n{_relative_paths(text.getvalue())}\n")


def _relative_paths(profile: str) -> str:
    """The profile's file names without the machine's folders: the repository's relative to it,
    installed packages' and the standard library's under <site-packages> and <python>."""
    profile = profile.replace(f"{ROOT}/", "")
    profile = re.sub(r"[^\s(]*/site-packages/", "<site-packages>/", profile)
    return re.sub(r"[^\s(]*/lib/python3\.\d+/", "<python>/", profile)


def _clock_note(row: dict) -> str:
    """The median SM clock back-to-back and under the latency timer, where sampled."""
    if "clocks_back_to_back" not in row:
        return ""
    return f"; SM clock {_median_mhz(row['clocks_back_to_back'])} back-to-back, {_median_mhz(row['clocks_gpu'])} timed"


def _median_mhz(clocks: dict) -> str:
    return f"{clocks['sm_mhz']['median']:.0f} MHz" if "sm_mhz" in clocks else clocks.get("error", "not sampled")


def _percent(share: float | None) -> str:
    return "n/a" if share is None else f"{100 * share:.1f}%"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", help="only the workloads of these token counts")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", default="out/real_use.json")
    parser.add_argument("--clocks", action="store_true", help="sample the SM clock, power and throttle reasons during "
                                                                "the back-to-back run and the GPU latency")
    parser.add_argument("--profile", metavar="FILE", help="also write a cProfile of the host side of --calls calls "
                                                           "at the smallest workload chosen (text, by own time)")
    args = parser.parse_args(argv)
    if args.calls < 1:
        parser.error("--calls: at least 1")
    unknown = sorted(set(args.tokens or ()) - {w.tokens for w in reference.WORKLOADS})
    if unknown:
        parser.error(f"--tokens {unknown}: no official workload has these token counts")
    workloads = [w for w in reference.WORKLOADS if not args.tokens or w.tokens in args.tokens]
    writable(parser, out=args.out, profile=args.profile)
    device = require_gpu("real_use")
    make_folders(args.out, args.profile)
    torch.manual_seed(0)
    if args.profile:
        _profile_host(min(workloads, key=lambda w: w.tokens), args.calls, device, args.profile)
    workloads = sorted(workloads, key=lambda w: w.tokens)
    # every host measurement before the first CUPTI timing, so that tracing cannot touch them
    host_rows = [measure_host(w, args.calls, device, args.clocks) for w in workloads]
    rows = []
    for w, host_row in zip(workloads, host_rows):
        rows.append(add_gpu_latency(host_row, w, device, args.clocks))
        r = rows[-1]
        print(f"{w.label:>12} M={w.tokens:>6}: host {r['host_us']:7.1f} us, back-to-back {r['wall_same_us']:8.1f} "
              f"(fresh addresses {r['wall_fresh_us']:8.1f}, {LAYERS} layers {r['wall_layers_us']:8.1f}) us, "
              f"GPU {r['gpu_us']:8.1f} us, target wall "
              f"{r['target_wall_us']:8.1f}: {'ok' if r['meets_targets'] else 'MISSED'}; host reference "
              f"{r['reference_us']:5.1f} / {r['reference_after_us']:5.1f} us (before / after), "
              f"steal {_percent(r['steal_share'])}, {r['involuntary_switches']} involuntary switches"
              f"{_clock_note(r)}", flush=True)
    with open(args.out, "w") as f:
        json.dump({"provenance": provenance(f"bench/real_use.py: host time of one call (perf_counter, median of "
                                            f"{args.calls}), back-to-back wall-clock per call over {args.calls} "
                                            f"calls (same buffers; fresh addresses; {LAYERS} sets of buffers in "
                                            "turn), official-style GPU latency (evaluation.timer); the host's "
                                            "own speed beside them (HostReference, steal share, "
                                            "involuntary switches)"),
                   "rows": rows}, f, indent=1)
    missed = [r["label"] for r in rows if not r["meets_targets"]]
    print(f"{len(rows) - len(missed)} passed, {len(missed)} failed" + (f": {', '.join(missed)}" if missed else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
