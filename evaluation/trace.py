"""Trace records, one JSON line per workload (docs/evaluator.md §1.5), and the status/log texts (§2.12)."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass

import torch

from evaluation.compare import Correctness

PASSED = "PASSED"
INVALID_REFERENCE = "INVALID_REFERENCE"
INCORRECT_SHAPE = "INCORRECT_SHAPE"
INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
INCORRECT_DTYPE = "INCORRECT_DTYPE"
RUNTIME_ERROR = "RUNTIME_ERROR"
COMPILE_ERROR = "COMPILE_ERROR"
TIMEOUT = "TIMEOUT"
REWARD_HACK = "REWARD_HACK"


class Log:
    """The driver's log strings, verbatim (§2.12)."""

    @staticmethod
    def integrity(name: str) -> str:
        return f"Eval driver integrity violated: '{name}' has been monkey-patched"

    CLOCKS_NOT_LOCKED = "lock_clocks=True but GPU clocks are not locked on this server"
    ELAPSED_TIME_PATCHED = "torch.cuda.Event.elapsed_time has been monkey-patched"

    @staticmethod
    def safetensors(error: BaseException) -> str:
        return f"Failed to load safetensors: {error}"

    @staticmethod
    def gen_inputs(error: BaseException) -> str:
        return f"gen_inputs failed: {error}"

    @staticmethod
    def reference(error: BaseException, traceback_text: str) -> str:
        return f"Reference run() failed: {error}\n{traceback_text}"

    @staticmethod
    def user(error: BaseException, traceback_text: str) -> str:
        return f"User function failed: {error}\n{traceback_text}"

    @staticmethod
    def lazy(output: object) -> str:
        return f"Lazy evaluation detected: output is {type(output).__name__}, not torch.Tensor"

    @staticmethod
    def timing(error: BaseException) -> str:
        return f"Timing failed: {error}"

    @staticmethod
    def threads(after: int, before: int) -> str:
        return f"Thread injection detected: {after} threads after call vs {before} before"


@dataclass(frozen=True)
class Performance:
    latency_ms: float
    reference_latency_ms: float
    speedup_factor: float

    @classmethod
    def from_latencies(cls, latency_ms: float, reference_latency_ms: float) -> Performance:
        """speedup = ref / sol, 0 when the solution latency is not positive (§2.3 step 9)."""
        speedup = reference_latency_ms / latency_ms if latency_ms > 0 else 0.0
        return cls(latency_ms, reference_latency_ms, speedup)

    def to_json(self) -> dict:
        return {
            "latency_ms": self.latency_ms,
            "reference_latency_ms": self.reference_latency_ms,
            "speedup_factor": self.speedup_factor,
        }


def environment() -> dict:
    libs = {"torch": torch.__version__}
    try:
        import triton

        libs["triton"] = triton.__version__
    except ImportError:
        pass
    if torch.version.cuda is not None:  # None on CPU builds; the schema wants a string
        libs["cuda"] = torch.version.cuda
    hardware = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return {"hardware": hardware, "libs": libs}


def make_trace(
    definition: str,
    workload: dict,
    solution: str,
    status: str,
    log: str = "",
    correctness: Correctness | None = None,
    performance: Performance | None = None,
    clock_line: str | None = None,
) -> dict:
    """A Trace in the official key order. Presence rules (§1.5): PASSED carries both records,
    INCORRECT_NUMERICAL only correctness, every other status neither."""
    if status != PASSED:
        performance = None
    if status not in (PASSED, INCORRECT_NUMERICAL):
        correctness = None
    if clock_line is not None:
        log = f"{clock_line}\n{log}" if log else clock_line
    return {
        "definition": definition,
        "workload": workload,
        "solution": solution,
        "evaluation": {
            "status": status,
            "environment": environment(),
            "timestamp": datetime.datetime.now().isoformat(),
            "log": log,
            "correctness": correctness.to_json() if correctness else None,
            "performance": performance.to_json() if performance else None,
        },
    }


def dumps(trace: dict) -> str:
    """Strict JSON (NaN/Inf raise), one line."""
    return json.dumps(trace, allow_nan=False)
