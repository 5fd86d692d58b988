"""Stage 2: back through FC2 and the GELU, with the FC1 bias partial sums in the epilogue.

    grad_gelu       = grad_residual @ fc2_weight              (M x H) @ (H x I), K = H = 512
    grad_fc1_output = grad_gelu * gelu'(fc1_output)           elementwise, fp32
    grad_fc1_bias   = sum_m grad_fc1_output                    (partial sums per row-block)

GEMM operands are fp16 (rounded by stage 1) with fp32 accumulation (docs/precision.md: fp16 operands
pass 042's tolerance, bf16 and Triton's default TF32 truncation do not). `grad_fc1_output` is stored
in fp16 because its only later uses are as a GEMM operand; the bias sums use the fp32 values.

Two kernels share the tile's epilogue (`gelu_backward_epilogue`) and differ in how they feed the
K loop: at few tokens a program per tile with pointer loads (`gelu_backward_gemm_kernel`); from
more tokens on a persistent kernel whose operands arrive by TMA (`gelu_backward_persistent_kernel`;
the choice and its measurements: configs.py).
"""

import triton
import triton.language as tl

from .gelu import gelu_tanh_grad
from .tiling import grouped_tile, store_tile


@triton.jit
def gelu_backward_epilogue(
    acc,  # (BLOCK_M, BLOCK_N) fp32: the tile of grad_residual @ fc2_weight
    fc1_output_tile,  # (BLOCK_M, BLOCK_N) fp32 (zeros on rows past M)
    tile_m,
    row,
    col,
    grad_fc1_output,  # out (M, I) fp16
    bias_partials,  # out (cdiv(M, BLOCK_M), I) fp32: row tile_m gets this tile's column sums
    M,
    I: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """grad_fc1_output = acc * gelu'(fc1_output) for one tile, stored in fp16; its fp32 column sums
    (rows past M are zero in acc, so they add nothing)."""
    d = acc * gelu_tanh_grad(fc1_output_tile)
    store_tile(grad_fc1_output, d.to(tl.float16), row, col, M, I, BLOCK_M, BLOCK_N)
    tl.store(bias_partials + tile_m * I + col + tl.arange(0, BLOCK_N), tl.sum(d, axis=0))


@triton.jit
def gelu_backward_gemm_kernel(
    grad_residual,  # (M, H) fp16
    fc2_weight,  # (H, I) fp16
    fc1_output,  # (M, I) fp32
    grad_fc1_output,  # out (M, I) fp16
    bias_partials,  # out (cdiv(M, BLOCK_M), I) fp32
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """One tile a program, pointer loads (few tokens: configs.py)."""
    tile_m, tile_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), I // BLOCK_N, GROUP_M)
    row, col = tile_m * BLOCK_M, tile_n * BLOCK_N
    rows = row + tl.arange(0, BLOCK_M).to(tl.int64)
    cols = col + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    # The elementwise operand does not depend on the GEMM: issue its load first, so that its memory
    # traffic overlaps the MMAs instead of following them.
    x = tl.load(fc1_output + rows[:, None] * I + cols[None, :], mask=row_ok[:, None], other=0.0)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, H, BLOCK_K):
        ks = k + tl.arange(0, BLOCK_K)
        a = tl.load(grad_residual + rows[:, None] * H + ks[None, :], mask=row_ok[:, None], other=0.0)
        acc = tl.dot(a, tl.load(fc2_weight + ks[:, None] * I + cols[None, :]), acc)
    gelu_backward_epilogue(acc, x, tile_m, row, col, grad_fc1_output, bias_partials, M, I, BLOCK_M, BLOCK_N)


@triton.jit
def gelu_backward_persistent_kernel(
    grad_residual,  # tensor descriptor: (M, H) fp16, BLOCK_M x BLOCK_K blocks
    fc2_weight,  # tensor descriptor: (H, I) fp16, BLOCK_K x BLOCK_N blocks
    fc1_output,  # tensor descriptor: (M, I) fp32, BLOCK_M x BLOCK_N blocks
    grad_fc1_output,  # out (M, I) fp16
    bias_partials,  # out (cdiv(M, BLOCK_M), I) fp32
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """Persistent and fed by TMA: each program loops over the tiles pid, pid + programs, ..., so
    that the loads of its next tile overlap the epilogue of this one (the K loop is only H / BLOCK_K
    steps long). Rows past M load as zeros."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    for tile in tl.range(tl.program_id(0), tiles_m * (I // BLOCK_N), tl.num_programs(0)):
        tile_m, tile_n = grouped_tile(tile, tiles_m, I // BLOCK_N, GROUP_M)
        row, col = tile_m * BLOCK_M, tile_n * BLOCK_N
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k in range(0, H, BLOCK_K):
            acc = tl.dot(grad_residual.load([row, k]), fc2_weight.load([k, col]), acc)
        gelu_backward_epilogue(acc, fc1_output.load([row, col]), tile_m, row, col, grad_fc1_output, bias_partials,
                               M, I, BLOCK_M, BLOCK_N)
