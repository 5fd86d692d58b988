"""The whole backward pass in one persistent launch, for few tokens.

With few tokens the GEMMs are tiny and the benchmark's timer sees mostly the gaps between launches
(about 20 us of host time per extra Triton launch under CUPTI tracing). Here one grid of at most one
program per SM runs the four stages as three phases separated by grid barriers; in each phase every
program loops over that phase's tiles with a stride of the grid size:

    phase 1: LayerNorm-backward rows (+ fp16 copies of grad_residual and hidden_states) and the
             fp16 rounding of both weights                          [layernorm_backward.py]
    phase 2: grad_fc1_output tiles (FC2 backward, GELU derivative, FC1-bias partial sums, fp16 copy
             of gelu_output)                                        [gelu_backward_gemm.py]
    phase 3: grad_hidden_states tiles, weight-gradient tiles and the final column sums; they only
             read what phases 1 and 2 wrote                         [input_grad_gemm.py,
                                                                     weight_grad_gemm.py]
Each phase calls the same device functions as the multi-launch path, so both compute identically.
"""

import triton
import triton.language as tl

from .gelu_backward_gemm import gelu_backward_tile
from .grid_barrier import grid_barrier
from .input_grad_gemm import input_grad_tile
from .layernorm_backward import layernorm_backward_rows, round_weights_chunk
from .weight_grad_gemm import weight_grad_tile


@triton.jit
def ffn_backward_single_launch_kernel(
    grad_output, normalized, var, ln_weight, eps, hidden_states, fc1_weight, fc2_weight, fc1_output,
    gelu_output,  # inputs, as in the multi-launch stages
    grad_residual, grad_residual_f16, hidden_states_f16, fc1_weight_f16, fc2_weight_f16, grad_fc1_output,
    gelu_output_f16, ln_partials, bias_partials,  # workspaces; ln_partials has one row per program
    grad_hidden_states, grad_fc1_weight, grad_fc1_bias, grad_fc2_weight, grad_fc2_bias, grad_ln_weight,
    grad_ln_bias,  # outputs
    sync,  # (2,) int32 grid-barrier counters
    M,
    weight_tiles,  # weight_grad_programs(H, I, WEIGHT_BLOCK_P, WEIGHT_BLOCK_Q)
    H: tl.constexpr,
    I: tl.constexpr,
    LN_BLOCK_M: tl.constexpr,
    WEIGHT_BLOCK: tl.constexpr,
    GELU_BLOCK_M: tl.constexpr,
    GELU_BLOCK_N: tl.constexpr,
    GELU_BLOCK_K: tl.constexpr,
    INPUT_BLOCK_M: tl.constexpr,
    INPUT_BLOCK_N: tl.constexpr,
    INPUT_BLOCK_K: tl.constexpr,
    WEIGHT_BLOCK_P: tl.constexpr,
    WEIGHT_BLOCK_Q: tl.constexpr,
    WEIGHT_BLOCK_K: tl.constexpr,
    SUM_BLOCK_R: tl.constexpr,
    PHASES: tl.constexpr,  # 3; fewer only to time the phases (the later ones are then skipped)
):
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)

    if PHASES < 1:
        return
    # Phase 1: LayerNorm backward; fp16 operands.
    layernorm_backward_rows(pid, num_programs, grad_output, normalized, var, ln_weight, eps, hidden_states,
                            grad_residual, grad_residual_f16, hidden_states_f16, ln_partials + pid * (3 * H),
                            M, H, LN_BLOCK_M)
    for chunk in range(pid, H * I // WEIGHT_BLOCK, num_programs):
        round_weights_chunk(chunk, fc1_weight, fc2_weight, fc1_weight_f16, fc2_weight_f16, H, I, WEIGHT_BLOCK)
    grid_barrier(sync, num_programs)
    if PHASES < 2:
        return

    # Phase 2: grad_fc1_output = (grad_residual @ fc2_weight) * gelu'(fc1_output).
    gelu_tiles_n: tl.constexpr = I // GELU_BLOCK_N
    for tile in range(pid, tl.cdiv(M, GELU_BLOCK_M) * gelu_tiles_n, num_programs):
        gelu_backward_tile(tile // gelu_tiles_n, tile % gelu_tiles_n, grad_residual_f16, fc2_weight_f16,
                           fc1_output, gelu_output, grad_fc1_output, gelu_output_f16, bias_partials,
                           M, H, I, GELU_BLOCK_M, GELU_BLOCK_N, GELU_BLOCK_K)
    grid_barrier(sync, num_programs)
    if PHASES < 3:
        return

    # Phase 3: grad_hidden_states tiles, then weight-gradient tiles and column sums.
    input_tiles_n: tl.constexpr = H // INPUT_BLOCK_N
    input_tiles = tl.cdiv(M, INPUT_BLOCK_M) * input_tiles_n
    for tile in range(pid, input_tiles + weight_tiles, num_programs):
        if tile < input_tiles:
            input_grad_tile(tile // input_tiles_n, tile % input_tiles_n, grad_fc1_output, fc1_weight_f16,
                            grad_residual, grad_hidden_states, M, H, I, INPUT_BLOCK_M, INPUT_BLOCK_N,
                            INPUT_BLOCK_K)
        else:
            weight_grad_tile(tile - input_tiles, grad_residual_f16, gelu_output_f16, grad_fc1_output,
                             hidden_states_f16, ln_partials, num_programs, bias_partials,
                             tl.cdiv(M, GELU_BLOCK_M), grad_fc2_weight, grad_fc1_weight, grad_ln_weight,
                             grad_ln_bias, grad_fc2_bias, grad_fc1_bias, M, H, I, WEIGHT_BLOCK_P,
                             WEIGHT_BLOCK_Q, WEIGHT_BLOCK_K, SUM_BLOCK_R)
