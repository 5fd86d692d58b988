"""Stage 3: back through FC1 to the input, plus the residual branch.

    grad_hidden_states = grad_fc1_output @ fc1_weight + grad_residual     (M x I) @ (I x H), K = I

With few tokens there are fewer output tiles than programs, and each tile's K = 2048 loop is the
longest chain of the one-launch path's last phase. There the K range is split: `input_grad_split`
work items each write a partial product, and the program that finishes a tile's last split (a
per-tile arrival counter) adds the partials in split order plus the residual: deterministic, and no
extra grid barrier.
"""

import triton
import triton.language as tl

from .tiling import grouped_tile


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
    acc = _partial_product(rows, cols, 0, I, grad_fc1_output, fc1_weight, M, H, I, BLOCK_M, BLOCK_N, BLOCK_K)
    offsets = rows[:, None] * H + cols[None, :]
    acc += tl.load(grad_residual + offsets, mask=row_ok[:, None], other=0.0)
    tl.store(grad_hidden_states + offsets, acc, mask=row_ok[:, None])


@triton.jit
def _partial_product(rows, cols, k_begin, k_end, grad_fc1_output, fc1_weight, M, H: tl.constexpr, I: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """grad_fc1_output[rows, k_begin:k_end] @ fc1_weight[k_begin:k_end, cols], fp32 accumulation."""
    row_ok = rows < M
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(k_begin, k_end, BLOCK_K):
        ks = k + tl.arange(0, BLOCK_K)
        a = tl.load(grad_fc1_output + rows[:, None] * I + ks[None, :], mask=row_ok[:, None], other=0.0)
        b = tl.load(fc1_weight + ks[:, None] * H + cols[None, :])
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def input_grad_split(
    item,  # in [0, tiles * splits): tile item // splits, K split item % splits
    splits,  # divides I // BLOCK_K; 1 = no split
    grad_fc1_output,  # (M, I) fp16
    fc1_weight,  # (I, H) fp16
    grad_residual,  # (M, H) fp32
    grad_hidden_states,  # out (M, H) fp32
    partials,  # (splits, M, H) fp32 workspace (unused when splits == 1)
    arrivals,  # (tiles,) int32, zero on entry and left zero: per-tile arrival counters
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    tiles_n: tl.constexpr = H // BLOCK_N
    tile = item // splits
    split = item % splits
    rows = (tile // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
    cols = (tile % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    offsets = rows[:, None] * H + cols[None, :]
    k_len = I // splits
    acc = _partial_product(rows, cols, split * k_len, (split + 1) * k_len, grad_fc1_output, fc1_weight,
                           M, H, I, BLOCK_M, BLOCK_N, BLOCK_K)
    if splits == 1:
        acc += tl.load(grad_residual + offsets, mask=row_ok[:, None], other=0.0)
        tl.store(grad_hidden_states + offsets, acc, mask=row_ok[:, None])
    else:
        tl.store(partials + split * M * H + offsets, acc, mask=row_ok[:, None])
        tl.debug_barrier()  # all threads' partial stores before the release below
        if tl.atomic_add(arrivals + tile, 1, sem="acq_rel", scope="gpu") == splits - 1:
            # the last split of this tile: every other split's partial is visible (acquire)
            tl.atomic_xchg(arrivals + tile, 0, sem="relaxed", scope="gpu")  # ready for the next call
            tl.debug_barrier()
            total = tl.load(grad_residual + offsets, mask=row_ok[:, None], other=0.0)
            for s in range(splits):  # fixed order: deterministic
                total += tl.load(partials + s * M * H + offsets, mask=row_ok[:, None], other=0.0,
                                 cache_modifier=".cg")  # from L2, where the other programs wrote
            tl.store(grad_hidden_states + offsets, total, mask=row_ok[:, None])


@triton.jit
def input_grad_gemm_kernel(
    grad_fc1_output, fc1_weight, grad_residual, grad_hidden_states,
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    tile_m, tile_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), H // BLOCK_N, GROUP_M)
    input_grad_tile(tile_m, tile_n, grad_fc1_output, fc1_weight, grad_residual, grad_hidden_states,
                    M, H, I, BLOCK_M, BLOCK_N, BLOCK_K)
