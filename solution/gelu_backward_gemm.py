"""Stage 2: back through FC2 and the GELU, with the FC1 bias partial sums in the epilogue.

    grad_gelu       = grad_residual @ fc2_weight              (M x H) @ (H x I), K = H = 512
    grad_fc1_output = grad_gelu * gelu'(fc1_output)           elementwise, fp32
    grad_fc1_bias   = sum_m grad_fc1_output                    (partial sums per row-block)

GEMM operands are fp16 (rounded by stage 1, or by this kernel where WEIGHT_FP32) with fp32
accumulation (docs/precision.md: fp16 operands pass 042's tolerance, bf16 and Triton's default TF32
truncation do not). `grad_fc1_output` is stored in fp16 because its only later uses are as a GEMM
operand; the bias sums use the fp32 values.

One kernel in three forms (the choice by token count: configs.py):
  - WEIGHT_FP32 = True (fewest tokens): a program per output tile; before it waits for stage 1 it
    loads its whole strip of the caller's fp32 fc2_weight (H x BLOCK_N, rounded to fp16 in
    registers) and its fc1_output tile, which depend on no earlier launch; launched as a
    programmatic dependent of stage 1 (GDC), it does so while stage 1 runs. After the wait
    (griddepcontrol.wait: stage 1 done, its stores visible) it lets stage 3 start and runs one
    K = H contraction; once its tile is stored it counts it in on the counter of its row block and
    stage-3 K slice, which stage 3's programs wait on (COUNT_SLICES; input_grad_gemm.py);
  - PERSISTENT = False: a program per output tile, operands by pointer loads, fc1_output's tile
    loaded before the K loop so that its traffic overlaps the MMAs (few tokens);
  - PERSISTENT = True: programs loop over the tiles pid, pid + programs, ..., operands by TMA
    descriptors, so that the loads of the next tile overlap this tile's epilogue (the K loop is
    only H / BLOCK_K steps long).
On Hopper from 2049 tokens the warp-specialized form runs instead (gelu_backward_ws.py).
"""

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from .gelu import gelu_tanh_grad
from .tiling import grouped_tile, store_tile


@triton.jit
def gelu_backward_tile(
    tile,  # the output tile's index, in tiling.grouped_tile's order
    grad_residual,  # (M, H) fp16: a pointer, or a tensor descriptor of BLOCK_M x BLOCK_K blocks (PERSISTENT)
    fc2_weight,  # (H, I) fp16: a pointer, or a tensor descriptor of BLOCK_K x BLOCK_N blocks (PERSISTENT)
    fc1_output,  # (M, I) fp32: a pointer, or a tensor descriptor of BLOCK_M x BLOCK_N blocks (PERSISTENT)
    grad_fc1_output,  # out (M, I) fp16
    bias_partials,  # out (cdiv(M, BLOCK_M), I) fp32: row tile_m gets this tile's column sums
    slice_counts,  # (cdiv(M, BLOCK_M), COUNT_SLICES) int32, zero at the start (stage 1 zeroes it), if COUNT_SLICES
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    PERSISTENT: tl.constexpr,  # operands by TMA descriptors (else by pointers)
    WEIGHT_FP32: tl.constexpr,  # fc2_weight is the caller's fp32 weight, the strip loaded before the wait
    GDC: tl.constexpr,  # launched as a programmatic dependent (griddepcontrol, GPU only)
    COUNT_SLICES: tl.constexpr,  # count each stored tile in on its row block's and stage-3 K slice's counter (0: none)
):
    """grad_fc1_output = (grad_residual @ fc2_weight) * gelu'(fc1_output) for one tile, stored in
    fp16, and its fp32 column sums. Rows past M load as zeros, so they add nothing to the sums."""
    tile_m, tile_n = grouped_tile(tile, tl.cdiv(M, BLOCK_M), I // BLOCK_N, GROUP_M)
    row, col = tile_m * BLOCK_M, tile_n * BLOCK_N
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    if PERSISTENT:
        for k in range(0, H, BLOCK_K):
            acc = tl.dot(grad_residual.load([row, k]), fc2_weight.load([k, col]), acc)
        x = fc1_output.load([row, col])
    elif WEIGHT_FP32:
        rows = row + tl.arange(0, BLOCK_M).to(tl.int64)
        cols = col + tl.arange(0, BLOCK_N)
        ks = tl.arange(0, H)
        row_ok = rows < M
        # what needs no earlier launch, while stage 1 runs
        b = tl.load(fc2_weight + ks[:, None] * I + cols[None, :]).to(tl.float16)
        x = tl.load(fc1_output + rows[:, None] * I + cols[None, :], mask=row_ok[:, None], other=0.0)
        if GDC:
            gdc_wait()
            # stage 3 may start now, not earlier: its weight strips then stream in after stage 1's rows,
            # not beside them, and it reads the slice counters only once stage 1 has zeroed them
            gdc_launch_dependents()
        a = tl.load(grad_residual + rows[:, None] * H + ks[None, :], mask=row_ok[:, None], other=0.0)
        acc = tl.dot(a, b, acc)
    else:
        rows = row + tl.arange(0, BLOCK_M).to(tl.int64)
        cols = col + tl.arange(0, BLOCK_N)
        row_ok = rows < M
        x = tl.load(fc1_output + rows[:, None] * I + cols[None, :], mask=row_ok[:, None], other=0.0)
        for k in range(0, H, BLOCK_K):
            ks = k + tl.arange(0, BLOCK_K)
            a = tl.load(grad_residual + rows[:, None] * H + ks[None, :], mask=row_ok[:, None], other=0.0)
            acc = tl.dot(a, tl.load(fc2_weight + ks[:, None] * I + cols[None, :]), acc)
    d = acc * gelu_tanh_grad(x)
    store_tile(grad_fc1_output, d.to(tl.float16), row, col, M, I, BLOCK_M, BLOCK_N)
    tl.store(bias_partials + tile_m * I + col + tl.arange(0, BLOCK_N), tl.sum(d, axis=0))
    if COUNT_SLICES > 0:
        # every thread's stores before the count (CTA barrier), the count a release at GPU scope: a
        # stage-3 program that sees its slice's count complete (acquire) sees these stores
        tl.debug_barrier()
        tl.atomic_add(slice_counts + tile_m * COUNT_SLICES + col // (I // COUNT_SLICES), 1, sem="release")


@triton.jit
def gelu_backward_gemm_kernel(
    grad_residual, fc2_weight, fc1_output,  # see gelu_backward_tile
    grad_fc1_output,  # out (M, I) fp16
    bias_partials,  # out (cdiv(M, BLOCK_M), I) fp32
    slice_counts,  # see gelu_backward_tile (None where COUNT_SLICES = 0)
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    PERSISTENT: tl.constexpr,  # loop over the tiles, operands by TMA (else one tile a program, pointer loads)
    WEIGHT_FP32: tl.constexpr,  # one tile a program, fc2_weight the caller's fp32 (gelu_backward_tile)
    GDC: tl.constexpr,  # launched as a programmatic dependent of stage 1; the next launch may start after the wait
    COUNT_SLICES: tl.constexpr,  # stage 3's K slices, whose readiness the tiles count (0: none)
):
    tl.static_assert(not GDC or WEIGHT_FP32, "only the fp32-weight form waits for stage 1")
    tl.static_assert(COUNT_SLICES == 0 or not PERSISTENT, "only the one-tile-a-program forms count their tiles")
    if PERSISTENT:
        for tile in tl.range(tl.program_id(0), tl.cdiv(M, BLOCK_M) * (I // BLOCK_N), tl.num_programs(0)):
            gelu_backward_tile(tile, grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, None, M,
                               H, I, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, PERSISTENT, False, GDC, 0)
    else:
        gelu_backward_tile(tl.program_id(0), grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials,
                           slice_counts, M, H, I, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, PERSISTENT, WEIGHT_FP32, GDC,
                           COUNT_SLICES)
