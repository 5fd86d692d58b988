"""Tile scheduling and tile stores shared by the GEMM kernels."""

import triton
import triton.language as tl


@triton.jit
def grouped_tile(tile_id, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    """Map a linear tile id to (tile_m, tile_n), walking GROUP_M row-tiles per column sweep.

    Consecutive programs then share the same few A row-blocks and sweep the B columns, so both
    operands are reused from L2 (the ordering of Triton's matmul tutorial).
    """
    tiles_per_group = GROUP_M * tiles_n
    group = tile_id // tiles_per_group
    first_m = group * GROUP_M
    group_size = tl.minimum(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (tile_id % tiles_per_group) % group_size
    tile_n = (tile_id % tiles_per_group) // group_size
    return tile_m, tile_n


@triton.jit
def store_tile(dst, value, row, col, M, N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Store the BLOCK_M x BLOCK_N `value` at (row, col) of the row-major (M, N) `dst`, rows past M
    left out (64-bit row offsets)."""
    rows = row + tl.arange(0, BLOCK_M).to(tl.int64)
    cols = col + tl.arange(0, BLOCK_N)
    tl.store(dst + rows[:, None] * N + cols[None, :], value, mask=(rows < M)[:, None])
