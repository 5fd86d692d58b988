"""Baselines timed in the same driver run, with the same timer, on the round-9 inputs (return style).

- `eager`: the definition's reference; its latency IS the trace's `reference_latency_ms` (timed by
  the official procedure, §2.3 step 8), not timed a second time.
- `compile`: `torch.compile` of the reference `run`.
- `optimized`: `evaluation.baselines.optimized.run` (fused elementwise stages, fp16 GEMMs).

Each timed baseline is checked once against the round-9 reference outputs with the workload's
tolerance (an incorrect baseline would make a meaningless T_b).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch._inductor.config

from evaluation.timer import time_call
from reference.problem import Tolerance
from reference.tolerance import check_output

BASELINE_NAMES = ("eager", "compile", "optimized")

# Inductor compiles in this process, without its worker pool: the pool's helper threads come and go
# (an idle timer), and the next workload's thread-count check (protocol.md defense 5), which runs in
# the same process here but never sees a baseline in the official run, counted one of them as a
# solution-injected thread (REWARD_HACK at 2984 tokens, results/eval_911783b_thread_artifact.json).
torch._inductor.config.compile_threads = 1
# 16 workload shapes: stay below Dynamo's recompile limit (8 by default), else it falls back to eager.
_LIMIT = "recompile_limit" if hasattr(torch._dynamo.config, "recompile_limit") else "cache_size_limit"
setattr(torch._dynamo.config, _LIMIT, max(getattr(torch._dynamo.config, _LIMIT), 64))


def _factories(reference_run: Callable) -> dict[str, Callable[[], Callable]]:
    def optimized() -> Callable:
        from evaluation.baselines.optimized import run

        return run

    return {"compile": lambda: torch.compile(reference_run), "optimized": optimized}


_built: dict[str, Callable] = {}


def run_baselines(names, reference_run, result, workload: dict, config, performance: dict | None) -> dict:
    """`{name: {"latency_ms", "passed", "worst_ratio"} or {"error"}}` for one workload."""
    report: dict[str, dict] = {}
    if "eager" in names and performance is not None:
        report["eager"] = {"latency_ms": performance["reference_latency_ms"], "passed": True, "worst_ratio": 0.0}
    tolerance = Tolerance.from_json(workload.get("tolerance"))
    factories = _factories(reference_run)
    for name in names:
        if name not in factories:
            continue
        try:
            fn = _built.setdefault(name, factories[name]())
            outputs = list(fn(*result.inputs))  # both return the 7 outputs as a tuple
            verdicts = [check_output(out, ref, tolerance) for out, ref in zip(outputs, result.expected)]
            timing = time_call(fn, result.inputs, [], config.warmup_runs, config.iterations)
            report[name] = {
                "latency_ms": timing.median_ms,
                "passed": all(v.passed for v in verdicts),
                "worst_ratio": max(v.worst_ratio for v in verdicts),
                "timer": timing.timer,
            }
        except Exception as e:
            report[name] = {"error": f"{type(e).__name__}: {e}"}
    return report
