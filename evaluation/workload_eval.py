"""One workload through the official procedure (docs/evaluator.md §2.3), plus the side-file checks.

The device, the synchronize function and the timer are fields of `Harness`, so the verdict logic
runs on CPU tensors in the tests with a stand-in timer.
"""

from __future__ import annotations

import gc
import traceback
from dataclasses import dataclass, field
from typing import Callable

import torch

from evaluation import guards, hardening
from evaluation.compare import CorrectnessTracker, check
from evaluation.io_conventions import allocate_outputs, normalize_outputs
from evaluation.staging import BenchmarkConfig
from evaluation.timer import time_call
from evaluation.trace import (
    INCORRECT_NUMERICAL,
    INVALID_REFERENCE,
    PASSED,
    REWARD_HACK,
    RUNTIME_ERROR,
    Log,
    Performance,
    make_trace,
)
from reference.problem import Tolerance, resolve_axes
from reference.tolerance import check_output


@dataclass
class Harness:
    definition: dict  # normalized (staging) definition
    solution_name: str
    user_fn: Callable
    dps: bool
    reference_run: Callable  # return style; gives the expected outputs
    reference_timed: Callable  # what is timed as the reference (the definition's `run`)
    gen_inputs: Callable[[dict, dict], list]  # (workload, axes) -> inputs in definition order
    integrity: guards.IntegritySnapshot
    config: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    device: torch.device = torch.device("cuda:0")
    synchronize: Callable[[], None] = torch.cuda.synchronize
    time_fn: Callable = time_call
    rounds: int = 10
    clock_line: str | None = None
    replay_check: bool = True  # off in offline mode: stored outputs only fit the stored inputs
    flags_at_start: dict = field(default_factory=hardening.torch_flags)
    import_findings: list[str] = field(default_factory=list)  # hardening.ImportWatch, shadowing: every workload


@dataclass
class WorkloadResult:
    trace: dict
    side: dict
    inputs: list | None = None  # round-9 inputs (for the baselines)
    expected: list | None = None  # reference outputs of round 9


REPLAY = "replay with fresh inputs in the timed buffers, outputs NaN-filled"


class _Stop(Exception):
    """Ends the workload with a trace status (the official driver's early `continue`s)."""

    def __init__(self, status: str, log: str = ""):
        self.status, self.log = status, log


class WorkloadEvaluation:
    def __init__(self, harness: Harness, workload: dict):
        self.h = harness
        self.workload = workload
        self.tolerance = Tolerance.from_json(workload.get("tolerance"))
        self.output_names = list(harness.definition["outputs"])
        self.input_names = tuple(harness.definition["inputs"])
        self.tracker = CorrectnessTracker()
        self.margins = {name: {"worst_matched": 1.0, "worst_ratio": 0.0} for name in self.output_names}
        self.findings: list[str] = list(harness.import_findings)
        self.side: dict = {"uuid": workload["uuid"], "outputs": self.margins, "hardening": self.findings}

    def trace(self, status: str, log: str = "", performance: Performance | None = None) -> dict:
        h = self.h
        return make_trace(
            h.definition["name"], self.workload, h.solution_name, status, log,
            self.tracker.current, performance, h.clock_line,
        )

    # -- one correctness round (§2.3 step 4) --------------------------------------------------------

    def _round(self, r: int, axes: dict):
        h = self.h
        try:
            inputs = h.gen_inputs(self.workload, axes)
        except Exception as e:
            raise _Stop(RUNTIME_ERROR, Log.gen_inputs(e))
        try:
            returned = h.reference_run(*inputs)
            h.synchronize()
            expected = normalize_outputs(returned, h.definition, h.device)
        except Exception as e:
            raise _Stop(INVALID_REFERENCE, Log.reference(e, traceback.format_exc()))
        snapshot = hardening.InputSnapshot(self.input_names, inputs)
        try:
            if h.dps:
                outputs = allocate_outputs(h.definition, axes, h.device)
                h.user_fn(*inputs, *outputs)
            else:
                outputs = normalize_outputs(h.user_fn(*inputs), h.definition, h.device)
                _require_tensors(outputs, self.output_names)
            h.synchronize()
        except Exception as e:
            raise _Stop(RUNTIME_ERROR, Log.user(e, traceback.format_exc()))
        self._note_side_effects(f"round {r}", snapshot, inputs)
        if r == 0:
            self._round0_checks(expected, outputs)
        for name, ref, out in zip(self.output_names, expected, outputs):
            result = check(out, ref, self.tolerance)
            self.tracker.update(result.correctness)
            margin = self.margins[name]
            margin["worst_matched"] = min(margin["worst_matched"], result.verdict.matched)
            margin["worst_ratio"] = max(margin["worst_ratio"], result.verdict.worst_ratio)
            if not result.passed:
                raise _Stop(INCORRECT_NUMERICAL)
        return inputs, expected

    def _round0_checks(self, expected: list, outputs: list) -> None:
        """§2.3 d, in order: integrity, thread baseline, lazy outputs, shape then dtype."""
        violated = self.h.integrity.violated()
        if violated:
            raise _Stop(REWARD_HACK, Log.integrity(violated))
        self.threads_before = guards.thread_count()
        lazy = guards.first_lazy_output(outputs)
        if lazy is not None:
            raise _Stop(REWARD_HACK, Log.lazy(outputs[lazy]))
        issue = guards.structural_issue(expected, outputs)
        if issue:
            raise _Stop(issue)

    def _note_side_effects(self, when: str, snapshot: hardening.InputSnapshot, inputs: list) -> None:
        mutated = snapshot.mutated(inputs)
        if mutated:
            self.findings.append(f"input mutation ({when}): {', '.join(mutated)} modified in place")
        changes = hardening.flag_changes(self.h.flags_at_start, hardening.torch_flags())
        if changes and not any(f.startswith("torch flags") for f in self.findings):
            self.findings.append(f"torch flags changed ({when}): {'; '.join(changes)}")

    # -- the whole workload (§2.3) ------------------------------------------------------------------

    def run(self) -> WorkloadResult:
        h = self.h
        gc.collect()
        if h.device.type == "cuda":
            torch.cuda.empty_cache()
        axes = resolve_axes(h.definition, self.workload["axes"])  # uncaught, like the original (§2.3 step 2)
        inputs = expected = None
        try:
            for r in range(h.rounds):
                inputs, expected = self._round(r, axes)
            performance = self._time(inputs, axes)
        except _Stop as stop:
            return WorkloadResult(self.trace(stop.status, stop.log), self.side)
        try:
            self._check_timed_results(inputs, expected, axes)
        except Exception as e:
            self.findings.append(f"stale-results check raised: {type(e).__name__}: {e}")
        return WorkloadResult(self.trace(PASSED, performance=performance), self.side, inputs, expected)

    def _time(self, inputs: list, axes: dict) -> Performance:
        """§2.3 steps 5-9."""
        h = self.h
        if guards.elapsed_time_patched():
            raise _Stop(REWARD_HACK, Log.ELAPSED_TIME_PATCHED)
        try:  # the buffers too: an out-of-memory here is a timing failure, as in the official driver
            templates = allocate_outputs(h.definition, axes, h.device) if h.dps else []
            snapshot = hardening.InputSnapshot(self.input_names, inputs)
            self.timing = h.time_fn(h.user_fn, inputs, templates, h.config.warmup_runs, h.config.iterations)
        except Exception as e:
            raise _Stop(RUNTIME_ERROR, Log.timing(e))
        threads_after = guards.thread_count()
        if threads_after > self.threads_before:
            raise _Stop(REWARD_HACK, Log.threads(threads_after, self.threads_before))
        self._note_side_effects("timing", snapshot, inputs)
        reference_ms = 0.0
        if h.config.benchmark_reference:
            try:
                self.reference_timing = h.time_fn(
                    h.reference_timed, inputs, [], h.config.warmup_runs, h.config.iterations
                )
                reference_ms = self.reference_timing.median_ms
                self.side["reference_timing"] = _timing_json(self.reference_timing)
            except Exception:
                reference_ms = 0.0
        self.side["timing"] = _timing_json(self.timing)
        return Performance.from_latencies(self.timing.median_ms, reference_ms)

    # -- hardening after the official steps (side file only) ----------------------------------------

    def _check_timed_results(self, inputs: list, expected: list, axes: dict) -> None:
        """Stale results: the last timed call's outputs must match the reference of the round-9
        inputs, and a replay in the same buffers with freshly drawn contents must match too. The
        replay's outputs are NaN-filled, not zeroed, so that results accumulated into the outputs
        (correct only because the harness zeroes them, outside the timed window) are caught."""
        h = self.h
        timing, self.timing = self.timing, None
        args = list(timing.last_args)
        timed_outputs = args[len(inputs):] if h.dps else normalize_outputs(timing.last_return, h.definition, h.device)
        self._compare("last timed call", timed_outputs, expected)
        if not h.replay_check:
            return
        with torch.random.fork_rng(devices=[h.device] if h.device.type == "cuda" else []):
            fresh = h.gen_inputs(self.workload, axes)
        timed_inputs = args[: len(inputs)]
        for view, value in zip(timed_inputs, fresh):
            if torch.is_tensor(view):
                view.copy_(value)
        fresh_expected = normalize_outputs(h.reference_run(*fresh), h.definition, h.device)
        if h.dps:
            for out in timed_outputs:
                out.fill_(float("nan"))
            h.user_fn(*timed_inputs, *timed_outputs)
        else:
            timed_outputs = normalize_outputs(h.user_fn(*timed_inputs), h.definition, h.device)
        h.synchronize()
        self._compare(REPLAY, timed_outputs, fresh_expected)

    def _compare(self, when: str, outputs: list, expected: list) -> None:
        for name, out, ref in zip(self.output_names, outputs, expected):
            verdict = check_output(out, ref, self.tolerance)
            if not verdict.passed:
                self.findings.append(f"stale results ({when}): {name} {verdict.reason}")
                return


def _require_tensors(outputs: list, names: list[str]) -> None:
    """Return style: every output a tensor (the official normalization raises for anything else
    but numbers, which `normalize_outputs` converted), so that `(None,) * 7` is a RUNTIME_ERROR."""
    for name, output in zip(names, outputs):
        if not isinstance(output, torch.Tensor):
            raise TypeError(f"output {name!r} is {type(output).__name__}, not a tensor")


def _timing_json(result) -> dict:
    return {
        "timer": result.timer,
        "median_ms": result.median_ms,
        "spans_ms": list(result.spans_ms),
        "kernel_set": sorted(result.kernel_set),
    }
