"""Entry point: the backward pass of the FFN block, destination-passing style.

Forward (saved tensors in brackets):
    [fc1_output] = hidden_states @ fc1_weight^T            (no bias term needed for the backward)
    [gelu_output] = gelu_tanh(fc1_output)
    residual_output = gelu_output @ fc2_weight^T + hidden_states
    [normalized] = (residual_output - mean) / sqrt([var] + eps);  y = normalized * ln_weight + ln_bias

Backward, in four launches (M = tokens, H = 512, I = 2048):
    1. layernorm_backward:  grad_residual (M x H) and partial sums for grad_ln_weight, grad_ln_bias,
                            grad_fc2_bias
    2. gelu_backward_gemm:  grad_fc1_output = (grad_residual @ fc2_weight) * gelu'(fc1_output),
                            partial sums for grad_fc1_bias
    3. input_grad_gemm:     grad_hidden_states = grad_fc1_output @ fc1_weight + grad_residual
    4. weight_grad_gemm:    grad_fc2_weight = grad_residual^T @ gelu_output,
                            grad_fc1_weight = grad_fc1_output^T @ hidden_states, and the final sums
Inputs are never written; `residual_output` is not needed (the LayerNorm backward uses `normalized`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch
import triton

from .arguments import Dims, check_arguments
from .configs import LaunchPlan, launch_plan, multiprocessor_count
from .gelu_backward_gemm import gelu_backward_gemm_kernel
from .input_grad_gemm import input_grad_gemm_kernel
from .layernorm_backward import layernorm_backward_kernel, weight_programs
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

    def __call__(self) -> None:
        self.kernel[self.grid](*self.args, **self.constexprs, **self.options)


def build_launches(dims: Dims, inputs: dict, eps, outputs: dict, plan: LaunchPlan) -> list[Launch]:
    """Allocate the workspaces and describe every launch, in order, for checked arguments.

    All host work happens here, before the first launch: the benchmark's timer counts host time
    between launches but not before the first one.
    """
    M, H, I, device = dims.tokens, dims.hidden, dims.intermediate, dims.device
    x, y = SimpleNamespace(**inputs), SimpleNamespace(**outputs)
    g2, g3, g4 = plan.gelu_gemm, plan.input_gemm, plan.weight_gemm

    row_programs = max(1, min(triton.cdiv(M, plan.layernorm_block_m), plan.layernorm_waves * multiprocessor_count(device)))
    bias_partial_rows = triton.cdiv(M, g2.block_m)

    def empty(*shape, dtype=torch.float32):
        return torch.empty(shape, dtype=dtype, device=device)

    grad_residual = empty(M, H)
    grad_residual_f16 = empty(M, H, dtype=torch.float16)
    hidden_states_f16 = empty(M, H, dtype=torch.float16)
    fc1_weight_f16 = empty(I, H, dtype=torch.float16)
    fc2_weight_f16 = empty(H, I, dtype=torch.float16)
    grad_fc1_output = empty(M, I, dtype=torch.float16)
    # stage 4's grad_fc2_weight operand: an fp16 copy made by stage 2, or the fp32 input itself
    gelu_operand = empty(M, I, dtype=torch.float16) if plan.copy_gelu_f16 else x.gelu_output
    ln_partials = empty(row_programs, 3, H)
    bias_partials = empty(bias_partial_rows, I)

    def gemm_meta(g):
        return dict(BLOCK_M=g.block_m, BLOCK_N=g.block_n, BLOCK_K=g.block_k, GROUP_M=g.group_m)

    def gemm_options(g):
        return dict(num_warps=g.num_warps, num_stages=g.num_stages)

    launches = [
        Launch(layernorm_backward_kernel, (row_programs + weight_programs(H, I, plan.weight_block),),
               (x.grad_output, x.normalized, x.var, x.ln_weight, float(eps), x.hidden_states, x.fc1_weight,
                x.fc2_weight, grad_residual, grad_residual_f16, hidden_states_f16, fc1_weight_f16, fc2_weight_f16,
                ln_partials, M, row_programs),
               dict(H=H, I=I, BLOCK_M=plan.layernorm_block_m, WEIGHT_BLOCK=plan.weight_block), dict(num_warps=4)),
    ]
    if M > 0:
        launches += [
            Launch(gelu_backward_gemm_kernel, (bias_partial_rows * (I // g2.block_n),),
                   (grad_residual_f16, fc2_weight_f16, x.fc1_output, x.gelu_output, grad_fc1_output, gelu_operand,
                    bias_partials, M),
                   dict(H=H, I=I, **gemm_meta(g2), COPY_GELU_F16=plan.copy_gelu_f16), gemm_options(g2)),
            Launch(input_grad_gemm_kernel, (triton.cdiv(M, g3.block_m) * (H // g3.block_n),),
                   (grad_fc1_output, fc1_weight_f16, grad_residual, y.grad_hidden_states, M),
                   dict(H=H, I=I, **gemm_meta(g3)), gemm_options(g3)),
        ]
    launches.append(
        Launch(weight_grad_kernel, (weight_grad_programs(H, I, g4.block_m, g4.block_n),),
               (grad_residual_f16, gelu_operand, grad_fc1_output, hidden_states_f16,
                ln_partials, row_programs, bias_partials, bias_partial_rows,
                y.grad_fc2_weight, y.grad_fc1_weight, y.grad_ln_weight, y.grad_ln_bias, y.grad_fc2_bias,
                y.grad_fc1_bias, M),
               dict(H=H, I=I, BLOCK_P=g4.block_m, BLOCK_Q=g4.block_n, BLOCK_K=g4.block_k,
                    SUM_BLOCK_R=plan.sum_block_r),
               gemm_options(g4)),
    )
    return launches


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
    for launch in build_launches(dims, inputs, eps, outputs, launch_plan(dims.device)):
        launch()
