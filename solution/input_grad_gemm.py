"""Stage 3: back through FC1 to the input, plus the residual branch.

    grad_hidden_states = grad_fc1_output @ fc1_weight + grad_residual     (M x I) @ (I x H), K = I

The operands are loaded by TMA from stage 1's and stage 2's fp16 workspaces (faster than pointer
loads: configs.py), the residual `grad_residual` in fp32.
"""

import triton
import triton.language as tl

from .tiling import grouped_tile, store_tile


@triton.jit
def input_grad_gemm_kernel(
    grad_fc1_output,  # tensor descriptor: (M, I) fp16, BLOCK_M x BLOCK_K blocks
    fc1_weight,  # tensor descriptor: (I, H) fp16, BLOCK_K x BLOCK_N blocks
    grad_residual,  # tensor descriptor: (M, H) fp32, BLOCK_M x BLOCK_N blocks
    grad_hidden_states,  # out (M, H) fp32 (the caller's tensor: plain stores, no alignment asked)
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """A tile of grad_hidden_states a program (TMA: rows past M load as zeros)."""
    tile_m, tile_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), H // BLOCK_N, GROUP_M)
    row, col = tile_m * BLOCK_M, tile_n * BLOCK_N
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, I, BLOCK_K):
        acc = tl.dot(grad_fc1_output.load([row, k]), fc1_weight.load([k, col]), acc)
    store_tile(grad_hidden_states, acc + grad_residual.load([row, col]), row, col, M, H, BLOCK_M, BLOCK_N)
