"""Stage 2: back through FC2 and the GELU, with the FC1 bias partial sums in the epilogue.

    grad_gelu       = grad_residual @ fc2_weight              (M x H) @ (H x I), K = H = 512
    grad_fc1_output = grad_gelu * gelu'(fc1_output)           elementwise, fp32
    grad_fc1_bias   = sum_m grad_fc1_output                    (partial sums per row-block)

GEMM operands are fp16 (rounded by stage 1; optionally fc2_weight's remainder as a second MMA) with
fp32 accumulation (see README: fp16 operands pass 042's tolerance, bf16 and Triton's default TF32
truncation do not). `grad_fc1_output` is stored in
fp16 because its only later uses are as a GEMM operand; the bias sums use the fp32 values.

At few tokens stage 2 runs a tile a program with pointer loads (`gelu_backward_gemm_kernel`); from
more tokens on it is persistent and loads its operands by TMA (`gelu_backward_persistent_kernel`; the
choice and its measurements: configs.py).
"""

import triton
import triton.language as tl

from .gelu import gelu_tanh_grad
from .tiling import grouped_tile, store_tile


@triton.jit
def gelu_backward_tile(
    tile_m,
    tile_n,
    grad_residual,  # (M, H) fp16
    fc2_weight,  # (2, H, I) fp16: hi and lo parts
    fc1_output,  # (M, I) fp32
    grad_fc1_output,  # out (M, I) fp16
    bias_partials,  # out (cdiv(M, BLOCK_M), I) fp32
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    FC2_WEIGHT_LO: tl.constexpr,  # also multiply by fc2_weight's lo part (configs.LaunchPlan.fc2_weight_lo)
):
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M

    # The elementwise operand does not depend on the GEMM: issue its load first, so that its memory
    # traffic overlaps the MMAs instead of following them.
    offsets = rows[:, None] * I + cols[None, :]
    x = tl.load(fc1_output + offsets, mask=row_ok[:, None], other=0.0)

    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, H, BLOCK_K):
        ks = k + tl.arange(0, BLOCK_K)
        a = tl.load(grad_residual + rows[:, None] * H + ks[None, :], mask=row_ok[:, None], other=0.0)
        b_offsets = ks[:, None] * I + cols[None, :]
        acc = tl.dot(a, tl.load(fc2_weight + b_offsets), acc)
        if FC2_WEIGHT_LO:
            acc = tl.dot(a, tl.load(fc2_weight + H * I + b_offsets), acc)

    d = acc * gelu_tanh_grad(x)  # zero on masked rows, since acc is
    tl.store(grad_fc1_output + offsets, d.to(tl.float16), mask=row_ok[:, None])
    tl.store(bias_partials + tile_m * I + cols, tl.sum(d, axis=0))


@triton.jit
def gelu_backward_gemm_kernel(
    grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials,  # as in gelu_backward_tile
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    FC2_WEIGHT_LO: tl.constexpr,
):
    """One tile a program, pointer loads (few tokens: configs.py)."""
    tile_m, tile_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), I // BLOCK_N, GROUP_M)
    gelu_backward_tile(tile_m, tile_n, grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials,
                       M, H, I, BLOCK_M, BLOCK_N, BLOCK_K, FC2_WEIGHT_LO)


@triton.jit
def gelu_backward_persistent_kernel(
    grad_residual,  # tensor descriptor: (M, H) fp16, BLOCK_M x BLOCK_K blocks
    fc2_weight,  # tensor descriptor: (H, I) fp16, the hi part, BLOCK_K x BLOCK_N blocks
    fc2_weight_lo,  # tensor descriptor: (H, I) fp16, the lo part, if FC2_WEIGHT_LO (else None)
    fc1_output,  # tensor descriptor: (M, I) fp32, BLOCK_M x BLOCK_N blocks
    gelu_output,  # tensor descriptor: (M, I) fp32, BLOCK_M x BLOCK_N blocks, if ROUND_GELU (else None)
    grad_fc1_output,  # out (M, I) fp16
    gelu_output_f16,  # out (M, I) fp16, if ROUND_GELU (else None)
    bias_partials,  # out (cdiv(M, BLOCK_M), I) fp32
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    FC2_WEIGHT_LO: tl.constexpr,
    ROUND_GELU: tl.constexpr,  # also round gelu_output's tile to fp16 (configs.LaunchPlan.round_gelu_in_stage2_from)
):
    """gelu_backward_tile's arithmetic, persistent and fed by TMA: each program loops over the tiles
    pid, pid + programs, ..., so that the loads of its next tile overlap the epilogue of this one (the
    K loop is only H / BLOCK_K steps long). Rows past M load as zeros: they add nothing to the bias
    sums and are not stored. gelu_output has the shape of grad_fc1_output, so with ROUND_GELU each
    tile also rounds the same tile of it for stage 4 (stage 1 then leaves it out)."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    for tile in tl.range(tl.program_id(0), tiles_m * (I // BLOCK_N), tl.num_programs(0)):
        tile_m, tile_n = grouped_tile(tile, tiles_m, I // BLOCK_N, GROUP_M)
        row, col = tile_m * BLOCK_M, tile_n * BLOCK_N
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k in range(0, H, BLOCK_K):
            a = grad_residual.load([row, k])
            acc = tl.dot(a, fc2_weight.load([k, col]), acc)
            if FC2_WEIGHT_LO:
                acc = tl.dot(a, fc2_weight_lo.load([k, col]), acc)
        d = acc * gelu_tanh_grad(fc1_output.load([row, col]))
        store_tile(grad_fc1_output, d.to(tl.float16), row, col, M, I, BLOCK_M, BLOCK_N)
        tl.store(bias_partials + tile_m * I + col + tl.arange(0, BLOCK_N), tl.sum(d, axis=0))
        if ROUND_GELU:
            store_tile(gelu_output_f16, gelu_output.load([row, col]).to(tl.float16), row, col, M, I, BLOCK_M, BLOCK_N)
