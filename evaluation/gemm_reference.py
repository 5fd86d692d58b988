"""The GEMM reference line: the backward pass's four GEMMs alone, in cuBLAS.

    from evaluation.gemm_reference import gemm_reference_ms
    gemm_reference_ms(2984)          # median ms, official-style timer

A reference line, not a baseline: it computes only the GEMMs, none of the backward's outputs, so it
is never a T_b. It tells how far a solution is from the tensor-core work it cannot avoid: the ratio
solution / GEMM reference per workload.

For M tokens (H = 512, I = 2048, from the definition), fp16 operands laid out as the backward holds
them (token-major; the weight gradients read two of them transposed), cuBLAS through `torch.mm` with
fp32 accumulation (reduced-precision split-K reductions disallowed) and fp16 results:

    grad_gelu        (M x H) @ (H x I)    dr @ fc2_weight
    grad_hidden      (M x I) @ (I x H)    d1 @ fc1_weight
    grad_fc2_weight  (H x M) @ (M x I)    dr^T @ gelu_output
    grad_fc1_weight  (I x M) @ (M x H)    d1^T @ hidden_states

The four are recorded as one CUDA graph and timed with the official-style timer
(evaluation.timer.time_call, docs/evaluator.md §2.9: L2 flushed before each call, CUPTI span,
median). The graph reads fixed buffers, so a timed call is the replay alone: no operand copies.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from evaluation.timer import TIMER_NAME, time_call
from reference.problem import DEFINITION

HIDDEN = DEFINITION["axes"]["hidden_size"]["value"]
INTERMEDIATE = DEFINITION["axes"]["intermediate_size"]["value"]
SEED = 0  # operand values: a private generator, so the caller's RNG stream is untouched


@dataclass(frozen=True)
class GemmOperands:
    """The operands of the four GEMMs for one token count, fp16, random normal."""

    dr: torch.Tensor  # grad_fc2_output (M x H)
    d1: torch.Tensor  # grad_fc1_output (M x I)
    gelu_output: torch.Tensor  # (M x I)
    hidden_states: torch.Tensor  # (M x H)
    fc1_weight: torch.Tensor  # (I x H)
    fc2_weight: torch.Tensor  # (H x I)

    @classmethod
    def draw(cls, tokens: int, device: torch.device | str) -> GemmOperands:
        generator = torch.Generator(device=device).manual_seed(SEED)

        def randn(*shape: int) -> torch.Tensor:
            return torch.randn(shape, generator=generator, device=device, dtype=torch.float16)

        m, h, i = tokens, HIDDEN, INTERMEDIATE
        return cls(randn(m, h), randn(m, i), randn(m, i), randn(m, h), randn(i, h), randn(h, i))


def four_gemms(ops: GemmOperands) -> tuple[torch.Tensor, ...]:
    """grad_gelu, grad_hidden (without its residual term), grad_fc2_weight, grad_fc1_weight."""
    return (
        torch.mm(ops.dr, ops.fc2_weight),
        torch.mm(ops.d1, ops.fc1_weight),
        torch.mm(ops.dr.t(), ops.gelu_output),
        torch.mm(ops.d1.t(), ops.hidden_states),
    )


def _record(ops: GemmOperands) -> torch.cuda.CUDAGraph:
    """The four GEMMs as one graph, with fp32 split-K reductions (the flag is read when cuBLAS is called)."""
    matmul = torch.backends.cuda.matmul
    reduced = matmul.allow_fp16_reduced_precision_reduction
    matmul.allow_fp16_reduced_precision_reduction = False
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            four_gemms(ops)  # cuBLAS handle and workspace, outside the graph
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            four_gemms(ops)
    finally:
        matmul.allow_fp16_reduced_precision_reduction = reduced
    return graph


def gemm_reference_graph(tokens: int) -> torch.cuda.CUDAGraph:
    """The four GEMMs for `tokens` tokens on cuda:0 as a graph to replay (its operands kept alive by it)."""
    ops = GemmOperands.draw(tokens, torch.device("cuda:0"))
    graph = _record(ops)
    graph.operands = ops  # the replay reads these buffers
    return graph


def gemm_reference_ms(tokens: int, warmup: int = 10, rep: int = 50) -> float:
    """Median latency in ms of the four GEMMs for `tokens` tokens on cuda:0 (official-style timer)."""
    return time_call(gemm_reference_graph(tokens).replay, [], [], warmup, rep).median_ms


def side_entry(tokens: int, config) -> dict:
    """The driver's side-data entry for one workload: `{"latency_ms", "timer"}` or `{"error"}`.

    `config` is the run's BenchmarkConfig (its warmup_runs and iterations, as for the solution).
    """
    try:
        return {"latency_ms": gemm_reference_ms(tokens, config.warmup_runs, config.iterations), "timer": TIMER_NAME}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}
