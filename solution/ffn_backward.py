"""Entry point: the backward pass of the FFN block, destination-passing style.

Forward (saved tensors in brackets):
    [fc1_output] = hidden_states @ fc1_weight^T            (no bias term needed for the backward)
    [gelu_output] = gelu_tanh(fc1_output)
    residual_output = gelu_output @ fc2_weight^T + hidden_states
    [normalized] = (residual_output - mean) / sqrt([var] + eps);  y = normalized * ln_weight + ln_bias

Backward, in four stages (M = tokens, H = 512, I = 2048):
    1. layernorm_backward:  grad_residual (M x H) and partial sums for grad_ln_weight, grad_ln_bias,
                            grad_fc2_bias; fp16 copies of the GEMM operands
    2. gelu_backward_gemm:  grad_fc1_output = (grad_residual @ fc2_weight) * gelu'(fc1_output),
                            partial sums for grad_fc1_bias
    3. input_grad_gemm:     grad_hidden_states = grad_fc1_output @ fc1_weight + grad_residual
    4. weight_grad_gemm:    grad_fc2_weight = grad_residual^T @ gelu_output,
                            grad_fc1_weight = grad_fc1_output^T @ hidden_states, and the final sums
Inputs are never written; `residual_output` is not needed (the LayerNorm backward uses `normalized`).

One kernel per stage, each with its own tile shape and warp count by token count (configs.py); the
four are recorded into a CUDA graph at each call and launched as one (cuda_graph.py), so that the GPU
runs them back to back without the host's launch gaps. Stage 4 does not need stage 3: at few tokens
the graph lets the two run concurrently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace

import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

from .arguments import Dims, check_arguments
from .configs import GemmConfig, LaunchPlan, for_tokens, launch_plan, multiprocessor_count
from .cuda_graph import create_events, launch_as_graph
from .gelu_backward_gemm import gelu_backward_gemm_kernel, gelu_backward_persistent_kernel
from .input_grad_gemm import input_grad_gemm_kernel
from .layernorm_backward import fp16_chunks, layernorm_backward_kernel
from .weight_grad_gemm import weight_grad_kernel, weight_grad_programs


INPUT_NAMES = (
    "grad_output", "hidden_states", "fc1_weight", "fc1_output", "gelu_output", "fc2_weight",
    "residual_output", "normalized", "var", "ln_weight",
)  # then eps
OUTPUT_NAMES = (
    "grad_hidden_states", "grad_fc1_weight", "grad_fc1_bias", "grad_fc2_weight", "grad_fc2_bias",
    "grad_ln_weight", "grad_ln_bias",
)


@dataclass(frozen=True)
class Launch:
    """One kernel launch: `kernel[grid](*args, **constexprs, **options)`."""

    kernel: triton.JITFunction
    grid: tuple[int, ...]
    args: tuple
    constexprs: dict
    options: dict
    # may run at the same time as the launch before it (both after everything before that one):
    # honoured only by the CUDA-graph launch, otherwise launches run in order
    concurrent_with_previous: bool = False

    def __call__(self) -> None:
        self.kernel[self.grid](*self.args, **self.constexprs, **self.options)

    def prepare(self, stream: int) -> Callable[[], None]:
        """This launch with all its host work done now: the launch left costs one driver call.

        `kernel[grid](...)` looks the compiled kernel up from its arguments (their types, 16-byte
        alignment, integer divisibility) and then checks every tensor's address with the driver, one
        call each, while the GPU may be idle: under the benchmark's CUPTI tracing that is ~20 us a
        launch (../shared/docs/protocol.md, 2.9). Here `warmup` does the same look-up (and the first
        call's compilation) without launching, and the compiled kernel then gets the resolved argument
        list, tensors as their addresses (their device was checked in arguments.py). The compiled
        kernel is the one the same arguments would launch, so the kernel set does not change.
        """
        compiled = self.kernel.warmup(*self.args, grid=self.grid, **self.constexprs, **self.options)
        values = dict(zip(self.kernel.arg_names, self.args), **self.constexprs)
        args = [v.data_ptr() if isinstance(v, torch.Tensor) else v for v in map(values.__getitem__, self.kernel.arg_names)]
        return partial(compiled[(*self.grid, 1, 1)[:3]], *args, stream=stream)  # the runner wants (x, y, z)


@dataclass(frozen=True)
class Workspace:
    """Intermediates, allocated per call before the first launch (the caching allocator makes
    this free of GPU work)."""

    grad_residual: torch.Tensor  # (M, H) fp32
    grad_residual_f16: torch.Tensor  # (M, H) fp16
    hidden_states_f16: torch.Tensor  # (M, H) fp16
    fc1_weight_f16: torch.Tensor  # (I, H) fp16
    fc2_weight_f16: torch.Tensor  # (2, H, I) fp16: hi and lo parts (lo written and used only if plan.fc2_weight_lo)
    grad_fc1_output: torch.Tensor  # (M, I) fp16
    gelu_output_f16: torch.Tensor  # (M, I) fp16
    ln_partials: torch.Tensor  # (programs, 3, H) fp32
    bias_partials: torch.Tensor  # (cdiv(M, stage-2 block_m), I) fp32

    @classmethod
    def allocate(cls, dims: Dims, ln_programs: int, bias_partial_rows: int) -> Workspace:
        M, H, I, device = dims.tokens, dims.hidden, dims.intermediate, dims.device

        def empty(*shape, dtype=torch.float32):
            return torch.empty(shape, dtype=dtype, device=device)

        return cls(
            grad_residual=empty(M, H),
            grad_residual_f16=empty(M, H, dtype=torch.float16),
            hidden_states_f16=empty(M, H, dtype=torch.float16),
            fc1_weight_f16=empty(I, H, dtype=torch.float16),
            fc2_weight_f16=empty(2, H, I, dtype=torch.float16),
            grad_fc1_output=empty(M, I, dtype=torch.float16),
            gelu_output_f16=empty(M, I, dtype=torch.float16),
            ln_partials=empty(ln_programs, 3, H),
            bias_partials=empty(bias_partial_rows, I),
        )


def _blocks(t: torch.Tensor, rows: int, cols: int) -> TensorDescriptor:
    """A TMA descriptor of the 2-D tensor `t`, in rows x cols blocks. TMA needs a 16-byte aligned
    base: the workspaces are (the caching allocator's blocks are 512-byte aligned); a caller's
    tensor that is not is copied first."""
    return TensorDescriptor.from_tensor(t if t.data_ptr() % 16 == 0 else t.clone(), [rows, cols])


def _gemm_meta(g: GemmConfig) -> dict:
    return dict(BLOCK_M=g.block_m, BLOCK_N=g.block_n, BLOCK_K=g.block_k)


def _gemm_options(g: GemmConfig) -> dict:
    cap = dict(maxnreg=g.max_registers) if g.max_registers else {}
    return dict(num_warps=g.num_warps, num_stages=g.num_stages, **cap)


def gelu_backward_launch(g: GemmConfig, dims: Dims, ws: Workspace, x: SimpleNamespace, lo: bool,
                         round_gelu: bool) -> Launch:
    """Stage 2: a program per tile (pointer loads), or `g.programs_per_sm` programs per SM looping
    over the tiles, their operands moved by TMA (and then, if `round_gelu`, rounding gelu_output)."""
    M, H, I = dims.tokens, dims.hidden, dims.intermediate
    tiles = triton.cdiv(M, g.block_m) * (I // g.block_n)
    meta = dict(H=H, I=I, **_gemm_meta(g), GROUP_M=g.group_m, FC2_WEIGHT_LO=lo)
    if g.programs_per_sm == 0:
        return Launch(gelu_backward_gemm_kernel, (tiles,),
                      (ws.grad_residual_f16, ws.fc2_weight_f16, x.fc1_output, ws.grad_fc1_output, ws.bias_partials, M),
                      meta, _gemm_options(g))
    hi, lo_part = ws.fc2_weight_f16
    programs = max(1, min(tiles, g.programs_per_sm * multiprocessor_count(dims.device)))
    return Launch(gelu_backward_persistent_kernel, (programs,),
                  (_blocks(ws.grad_residual_f16, g.block_m, g.block_k), _blocks(hi, g.block_k, g.block_n),
                   _blocks(lo_part, g.block_k, g.block_n) if lo else None,
                   _blocks(x.fc1_output.view(M, I), g.block_m, g.block_n),
                   _blocks(x.gelu_output.view(M, I), g.block_m, g.block_n) if round_gelu else None,
                   ws.grad_fc1_output, ws.gelu_output_f16 if round_gelu else None, ws.bias_partials, M),
                  dict(meta, ROUND_GELU=round_gelu), _gemm_options(g))


def build_launches(dims: Dims, inputs: dict, eps, outputs: dict, plan: LaunchPlan) -> list[Launch]:
    """Allocate the workspaces and describe every launch, one per stage, in order, for checked arguments.

    All host work happens here, before the first launch: the benchmark's timer counts host time
    between launches but not before the first one.
    """
    x, y = SimpleNamespace(**inputs), SimpleNamespace(**outputs)
    M, H, I, device = dims.tokens, dims.hidden, dims.intermediate, dims.device
    g2, g3, g4 = for_tokens(plan.gelu_gemm, M), for_tokens(plan.input_gemm, M), plan.weight_gemm
    row_programs = max(1, min(triton.cdiv(M, plan.layernorm_block_m), plan.layernorm_waves * multiprocessor_count(device)))
    bias_partial_rows = triton.cdiv(M, g2.block_m)
    ws = Workspace.allocate(dims, row_programs, bias_partial_rows)
    round_gelu = M >= plan.round_gelu_in_stage2_from and g2.programs_per_sm > 0
    return [
        Launch(layernorm_backward_kernel, (row_programs + fp16_chunks(M, H, I, plan.fp16_chunk, not round_gelu),),
               (x.grad_output, x.normalized, x.var, x.ln_weight, float(eps), x.hidden_states, x.gelu_output,
                x.fc1_weight, x.fc2_weight, ws.grad_residual, ws.grad_residual_f16, ws.hidden_states_f16,
                ws.gelu_output_f16, ws.fc1_weight_f16, ws.fc2_weight_f16, ws.ln_partials, M, row_programs),
               dict(H=H, I=I, BLOCK_M=plan.layernorm_block_m, CHUNK=plan.fp16_chunk, FC2_WEIGHT_LO=plan.fc2_weight_lo),
               dict(num_warps=plan.layernorm_warps)),
        gelu_backward_launch(g2, dims, ws, x, plan.fc2_weight_lo, round_gelu),
        Launch(input_grad_gemm_kernel, (triton.cdiv(M, g3.block_m) * (H // g3.block_n),),
               (_blocks(ws.grad_fc1_output, g3.block_m, g3.block_k), _blocks(ws.fc1_weight_f16, g3.block_k, g3.block_n),
                _blocks(ws.grad_residual, g3.block_m, g3.block_n), y.grad_hidden_states, M),
               dict(H=H, I=I, **_gemm_meta(g3), GROUP_M=g3.group_m), _gemm_options(g3)),
        # stage 4 needs stages 1 and 2, not stage 3: the two may run concurrently
        Launch(weight_grad_kernel, (weight_grad_programs(H, I, g4.block_m, g4.block_n),),
               (_blocks(ws.grad_residual_f16, g4.block_k, g4.block_m), _blocks(ws.gelu_output_f16, g4.block_k, g4.block_n),
                _blocks(ws.grad_fc1_output, g4.block_k, g4.block_m), _blocks(ws.hidden_states_f16, g4.block_k, g4.block_n),
                ws.ln_partials, row_programs, ws.bias_partials, bias_partial_rows,
                y.grad_fc2_weight, y.grad_fc1_weight, y.grad_ln_weight, y.grad_ln_bias, y.grad_fc2_bias,
                y.grad_fc1_bias, M),
               dict(H=H, I=I, BLOCK_P=g4.block_m, BLOCK_Q=g4.block_n, BLOCK_K=g4.block_k,
                    SUM_BLOCK_R=plan.sum_block_r),
               _gemm_options(g4), concurrent_with_previous=M <= plan.overlap_stages_3_4_up_to),
    ]


def run(
    grad_output,
    hidden_states,
    fc1_weight,
    fc1_output,
    gelu_output,
    fc2_weight,
    residual_output,
    normalized,
    var,
    ln_weight,
    eps,
    grad_hidden_states,
    grad_fc1_weight,
    grad_fc1_bias,
    grad_fc2_weight,
    grad_fc2_bias,
    grad_ln_weight,
    grad_ln_bias,
) -> None:
    """The benchmark's entry point: the 11 inputs in definition order, then the 7 outputs."""
    args = locals()
    inputs = {name: args[name] for name in INPUT_NAMES}
    outputs = {name: args[name] for name in OUTPUT_NAMES}
    dims = check_arguments(inputs, eps, outputs)
    plan = launch_plan(dims.device)
    launches = build_launches(dims, inputs, eps, outputs, plan)
    if dims.device.type != "cuda":  # the Triton interpreter: no compiled kernels to prepare
        for launch in launches:
            launch()
        return
    with torch.cuda.device(dims.device):  # Triton compiles for and launches on the current device
        if plan.cuda_graph:
            replay_as_graph(launches, dims.device)
            return
        stream = torch.cuda.current_stream(dims.device).cuda_stream
        ready = [launch.prepare(stream) for launch in launches]  # all host work before the first launch
        for go in ready:
            go()


_GRAPH_WIDTH = 2  # the most launches that run concurrently
_CAPTURE_STREAMS: dict = {}


def concurrent_groups(launches: list[Launch]) -> list[list[Launch]]:
    """Consecutive launches grouped by `concurrent_with_previous`."""
    groups: list[list[Launch]] = []
    for launch in launches:
        if launch.concurrent_with_previous and groups:
            groups[-1].append(launch)
        else:
            groups.append([launch])
    return groups


def replay_as_graph(launches: list[Launch], device: torch.device) -> None:
    """`launches` recorded into a CUDA graph and launched as one (cuda_graph.py), on the current
    stream. Recording needs streams other than the default one, and events for the forks and joins
    of concurrent launches (made once per device); nothing runs on those streams."""
    if device not in _CAPTURE_STREAMS:
        _CAPTURE_STREAMS[device] = ([torch.cuda.Stream(device) for _ in range(_GRAPH_WIDTH)],
                                    create_events(_GRAPH_WIDTH))
    streams, events = _CAPTURE_STREAMS[device]
    groups = concurrent_groups(launches)
    if max(map(len, groups)) > _GRAPH_WIDTH:
        raise ValueError(f"more than {_GRAPH_WIDTH} concurrent launches")
    launch_as_graph([[launch.prepare(streams[j].cuda_stream) for j, launch in enumerate(group)] for group in groups],
                    [s.cuda_stream for s in streams], events, torch.cuda.current_stream(device).cuda_stream)
