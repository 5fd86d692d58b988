"""A return-style function captured in a CUDA graph: what a user does to remove its host gaps.

The `optimized` baseline launches about a dozen kernels from Python. Under the official timer a
call's time is the span of the GPU activities it launched (docs/evaluator.md §2.9), so at a few
thousand tokens and fewer the host time between its launches, not its GPU work, sets its latency
(523-1050 us at 1163 tokens and fewer, results/eval_e7215dc.json). Replaying a graph launches all
of it at once.

A graph reads and writes fixed addresses. Every call therefore pays what a user of the graph pays,
and the timer counts it: the call's inputs are copied into the graph's static inputs, the graph is
replayed, and its static outputs are cloned (the next replay overwrites them). Only the recording is
left out of the timed region: it happens at the first call with a new shape, which the baselines
driver makes for the correctness check before timing (evaluation.baselines.run_baselines).

One graph is kept, the last shape's: the driver times the workloads one after the other, and 16
graphs with their memory pools would pile up beside the solution's memory.
"""

from __future__ import annotations

from typing import Callable

import torch

WARMUP_CALLS = 3  # before recording: compiles, autotunes and allocates outside the graph (side stream)


def signature(inputs) -> tuple:
    """What a recording depends on: each tensor's shape, strides, dtype and device; other values as is."""
    return tuple(
        (tuple(x.shape), x.stride(), x.dtype, x.device) if torch.is_tensor(x) else ("value", x) for x in inputs
    )


class GraphedRun:
    """`GraphedRun(run)(*inputs)` returns what `run(*inputs)` returns, as new tensors, from a CUDA graph."""

    def __init__(self, run: Callable):
        self._run = run
        self._signature: tuple | None = None
        self._graph: torch.cuda.CUDAGraph | None = None
        self._static_inputs: list = []
        self._static_outputs: tuple = ()

    def __call__(self, *inputs) -> tuple[torch.Tensor, ...]:
        if signature(inputs) != self._signature:
            self._record(inputs)
        for static, value in zip(self._static_inputs, inputs):
            if torch.is_tensor(static):
                static.copy_(value)
        self._graph.replay()
        return tuple(out.clone() for out in self._static_outputs)

    def _release(self) -> None:
        """Drop the previous shape's graph, its memory pool and static buffers before recording anew."""
        self._graph, self._static_inputs, self._static_outputs, self._signature = None, [], (), None

    def _record(self, inputs) -> None:
        self._release()
        static_inputs = [x.clone() if torch.is_tensor(x) else x for x in inputs]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_CALLS):
                self._run(*static_inputs)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_outputs = tuple(self._run(*static_inputs))
        self._graph, self._static_inputs, self._static_outputs = graph, static_inputs, static_outputs
        self._signature = signature(inputs)
