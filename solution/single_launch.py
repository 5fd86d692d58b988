"""The whole backward pass in one persistent launch, for few tokens.

With few tokens the GEMMs are tiny and the benchmark's timer sees mostly the gaps between launches
(about 20 us of host time per extra Triton launch under CUPTI tracing). Here one grid of at most a
few programs per SM runs the work as three phases separated by grid barriers; in each phase every
program loops over that phase's tiles with a stride of the grid size:

    phase 1: LayerNorm-backward rows (+ fp16 copies of grad_residual and hidden_states), then
             the fp16 rounding of both weights and gelu_output in flat chunks, spread over all
             programs                                               [layernorm_backward.py]
    phase 2: grad_fc2_weight tiles (they need only phase 1's output; first, since each loops over
             all tokens), then grad_fc1_output tiles (FC2 backward, GELU derivative, FC1-bias
             partial sums)                                          [weight_grad_gemm.py,
                                                                     gelu_backward_gemm.py]
    phase 3: grad_hidden_states tiles, grad_fc1_weight tiles and the final column sums, which need
             phase 2's grad_fc1_output                              [input_grad_gemm.py,
                                                                     weight_grad_gemm.py]
Each phase calls the same device functions as the multi-launch path, with the same arithmetic per
element; only the number of partial sums behind the column sums differs (one per program here).
Splitting the two weight gradients over phases 2 and 3 gives the phases about equal work.
"""

import triton
import triton.language as tl

from .gelu_backward_gemm import gelu_backward_tile
from .grid_barrier import grid_barrier
from .input_grad_gemm import input_grad_tile
from .layernorm_backward import layernorm_backward_rows, round_to_fp16_chunk
from .weight_grad_gemm import (column_sum_chunks, column_sums_chunk, fc1_weight_grad_tile, fc2_weight_grad_tile,
                               weight_grad_tiles)


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
    H: tl.constexpr,
    I: tl.constexpr,
    LN_BLOCK_M: tl.constexpr,
    CHUNK: tl.constexpr,
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
    FC2_WEIGHT_LO: tl.constexpr,  # configs.LaunchPlan.fc2_weight_lo
    PHASES: tl.constexpr,  # 3; fewer only to time the phases (the later ones are then skipped)
):
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    weight_tiles: tl.constexpr = weight_grad_tiles(H, I, WEIGHT_BLOCK_P, WEIGHT_BLOCK_Q)  # of either weight

    if PHASES < 1:
        return
    # Phase 1: LayerNorm backward; fp16 operands.
    layernorm_backward_rows(pid, num_programs, grad_output, normalized, var, ln_weight, eps, hidden_states,
                            grad_residual, grad_residual_f16, hidden_states_f16, ln_partials + pid * (3 * H),
                            M, H, LN_BLOCK_M)
    # the fp16 chunks (as many as layernorm_backward.fp16_chunks counts on the host; M <= max_tokens
    # here, so M * I fits in 32 bits) from the last program down, so that the row programs (the
    # first ones) get fewer
    for chunk in range(num_programs - 1 - pid, H * I // CHUNK + tl.cdiv(M * I, CHUNK), num_programs):
        round_to_fp16_chunk(chunk, fc1_weight, fc2_weight, gelu_output, fc1_weight_f16, fc2_weight_f16,
                            gelu_output_f16, M, H, I, CHUNK, FC2_WEIGHT_LO)
    grid_barrier(sync, num_programs)
    if PHASES < 2:
        return

    # Phase 2: grad_fc2_weight = grad_residual^T @ gelu_output, then
    # grad_fc1_output = (grad_residual @ fc2_weight) * gelu'(fc1_output).
    gelu_tiles_n: tl.constexpr = I // GELU_BLOCK_N
    for tile in range(pid, weight_tiles + tl.cdiv(M, GELU_BLOCK_M) * gelu_tiles_n, num_programs):
        if tile < weight_tiles:
            fc2_weight_grad_tile(tile, grad_residual_f16, gelu_output_f16, grad_fc2_weight, M, H, I,
                                 WEIGHT_BLOCK_P, WEIGHT_BLOCK_Q, WEIGHT_BLOCK_K)
        else:
            gelu_tile = tile - weight_tiles
            gelu_backward_tile(gelu_tile // gelu_tiles_n, gelu_tile % gelu_tiles_n, grad_residual_f16,
                               fc2_weight_f16, fc1_output, grad_fc1_output, bias_partials,
                               M, H, I, GELU_BLOCK_M, GELU_BLOCK_N, GELU_BLOCK_K, FC2_WEIGHT_LO)
    grid_barrier(sync, num_programs)
    if PHASES < 3:
        return

    # Phase 3: grad_hidden_states tiles, grad_fc1_weight tiles, column sums.
    input_tiles_n: tl.constexpr = H // INPUT_BLOCK_N
    input_tiles = tl.cdiv(M, INPUT_BLOCK_M) * input_tiles_n
    for tile in range(pid, input_tiles + weight_tiles + column_sum_chunks(H, I), num_programs):
        if tile < input_tiles:
            input_grad_tile(tile // input_tiles_n, tile % input_tiles_n, grad_fc1_output, fc1_weight_f16,
                            grad_residual, grad_hidden_states, M, H, I, INPUT_BLOCK_M, INPUT_BLOCK_N,
                            INPUT_BLOCK_K)
        elif tile < input_tiles + weight_tiles:
            fc1_weight_grad_tile(tile - input_tiles, grad_fc1_output, hidden_states_f16, grad_fc1_weight, M, H, I,
                                 WEIGHT_BLOCK_P, WEIGHT_BLOCK_Q, WEIGHT_BLOCK_K)
        else:
            column_sums_chunk(tile - input_tiles - weight_tiles, ln_partials, num_programs, bias_partials,
                              tl.cdiv(M, GELU_BLOCK_M), grad_ln_weight, grad_ln_bias, grad_fc2_bias,
                              grad_fc1_bias, H, I, SUM_BLOCK_R)
