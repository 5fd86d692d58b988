"""Stage 3: back through FC1 to the input, plus the residual branch.

    grad_hidden_states = grad_fc1_output @ fc1_weight + grad_residual     (M x I) @ (I x H), K = I

`input_grad_tile` (pointer loads) is the one-launch path's tile; the stage-3 kernel loads the same
operands by TMA from the workspaces (faster in its 128 x 256 tiles: configs.py).
"""

import triton
import triton.language as tl

from .tiling import grouped_tile, store_tile


@triton.jit
def input_grad_tile(
    tile_m,
    tile_n,
    grad_fc1_output,  # (M, I) fp16
    fc1_weight,  # (I, H) fp16
    grad_residual,  # (M, H) fp32
    grad_hidden_states,  # out (M, H) fp32
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M

    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, I, BLOCK_K):
        ks = k + tl.arange(0, BLOCK_K)
        a = tl.load(grad_fc1_output + rows[:, None] * I + ks[None, :], mask=row_ok[:, None], other=0.0)
        b = tl.load(fc1_weight + ks[:, None] * H + cols[None, :])
        acc = tl.dot(a, b, acc)

    offsets = rows[:, None] * H + cols[None, :]
    acc += tl.load(grad_residual + offsets, mask=row_ok[:, None], other=0.0)
    tl.store(grad_hidden_states + offsets, acc, mask=row_ok[:, None])


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
    """input_grad_tile with its operands loaded by TMA (rows past M load as zeros)."""
    tile_m, tile_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), H // BLOCK_N, GROUP_M)
    row, col = tile_m * BLOCK_M, tile_n * BLOCK_N
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, I, BLOCK_K):
        acc = tl.dot(grad_fc1_output.load([row, k]), fc1_weight.load([k, col]), acc)
    store_tile(grad_hidden_states, acc + grad_residual.load([row, col]), row, col, M, H, BLOCK_M, BLOCK_N)
