"""Stage 3: back through FC1 to the input, plus the residual branch.

    grad_hidden_states = grad_fc1_output @ fc1_weight + grad_residual     (M x I) @ (I x H), K = I

The operands are loaded by TMA from stage 1's and stage 2's fp16 workspaces (faster than pointer
loads: configs.py), the residual `grad_residual` from its fp16 copy (stage 2's operand), added in fp32.

A launch covers the rows [row0, row0 + rows) of the output (all M rows, unless the plan gives the
rows past the main tiles' last whole wave a launch of their own in smaller tiles: configs.py,
InputGemmConfig.tail).

At few tokens there are few output tiles (16 at 128 tokens in 64x64 tiles, on 132 SMs), each a
long K loop (I = 2048), so the loop is split over SPLITS programs a tile (InputGemmConfig.splits): the
program of split s contracts K in [s, s + 1) * I / SPLITS,

    grad_hidden_states = (P_0 + P_1 + ... + P_{SPLITS-1}) + grad_residual,
    P_s = grad_fc1_output[:, K_s] @ fc1_weight[K_s, :],

and stores its fp32 partial P_s in a workspace, then counts itself in on the tile's arrival
counter. The program that arrives last adds the SPLITS partials, read back from the workspace in
split order 0, 1, ..., whoever arrived when (the same sum, bit for bit, every call), and stores the
tile. Nothing waits on another program, so the SPLITS programs may run in any order or wave. The
counters start each call at zero: stage 1 zeroes them (layernorm_backward.py), before stage 2 and
so before stage 3 in the call's order of launches.

At the fewest tokens (WEIGHT_FP32) the program reads the caller's fp32 fc1_weight: before it waits
for stage 2 it loads its whole K slice x BLOCK_N strip and rounds it to fp16 in registers; launched
as a programmatic dependent of stage 2 (GDC), it does so while stage 2 runs. Stage 2 lets it start
once its own wait for stage 1 has returned, so that fc1_weight's strips do not share DRAM with
stage 1's rows. Split (SLICE_TILES), it then waits not for all of stage 2 but for the stage-2 tiles
of its own row block and K slice: each stage-2 tile, once stored, counts itself in on that slice's
counter (a release), and the program spins on the counter (an acquire) until all SLICE_TILES have,
so its block of grad_fc1_output is visible. The slice counters come first in the arrivals
workspace, zeroed by stage 1 like the rest. Stage 3 starts only once every stage-2 program has
passed its own wait for stage 1, which makes both safe: the counters read zero or more (stage 1,
which zeroes them, is done), and no wait can deadlock (every stage-2 program is on an SM and
finishes whatever stage 3 does).
Otherwise it waits for stage 2 (griddepcontrol.wait: stage 2 done, so stage 1 too, their stores
visible). Then one contraction over the slice, its grad_fc1_output block by pointer loads.
"""

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from .arguments import INTERPRETED as _INTERPRETED
from .tiling import grouped_tile, store_tile

INTERPRETED = tl.constexpr(_INTERPRETED)


@triton.jit
def input_grad_gemm_kernel(
    grad_fc1_output,  # tensor descriptor: (M, I) fp16, BLOCK_M x BLOCK_K blocks (WEIGHT_FP32: a pointer)
    fc1_weight,  # tensor descriptor: (I, H) fp16, BLOCK_K x BLOCK_N blocks (WEIGHT_FP32: the caller's fp32, a pointer)
    grad_residual,  # tensor descriptor: (M, H) fp16, BLOCK_M x BLOCK_N blocks
    grad_hidden_states,  # out (M, H) fp32 (the caller's tensor: plain stores, no alignment asked)
    partials,  # (tiles, SPLITS, BLOCK_M, BLOCK_N) fp32 workspace, if SPLITS > 1 (else None)
    arrivals,  # (tiles,) int32 workspace, zero at the start (stage 1 zeroes it), if SPLITS > 1 (else None)
    M,
    row0,  # the launch's first row
    rows,  # and its row count: its tiles are those of rows [row0, row0 + rows)
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SPLITS: tl.constexpr,  # programs a tile, each a slice of K (1: a program contracts all of K)
    WEIGHT_FP32: tl.constexpr,  # the caller's fp32 fc1_weight, the program's strip loaded before the wait
    GDC: tl.constexpr,  # launched as a programmatic dependent of stage 2 (griddepcontrol, GPU only)
    SLICE_TILES: tl.constexpr,  # wait for this many stage-2 tiles of the slice on its counter, not for stage 2 (0: no)
):
    """A tile of grad_hidden_states a program (SPLITS = 1), or a K slice of one (TMA: rows past M
    load as zeros)."""
    tl.static_assert(not GDC or WEIGHT_FP32, "only the fp32-weight form waits for stage 2")
    tl.static_assert(SLICE_TILES == 0 or (WEIGHT_FP32 and SPLITS > 1), "only the split fp32-weight form counts")
    if SPLITS == 1:
        acc, row, col = k_slice_of_tile(grad_fc1_output, fc1_weight, None, M, row0, rows, tl.program_id(0), 0, I, H,
                                        I, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, WEIGHT_FP32, GDC, 0)
        store_tile(grad_hidden_states, acc + grad_residual.load([row, col]).to(tl.float32), row, col, M, H, BLOCK_M,
                   BLOCK_N)
    else:
        input_grad_split_k(grad_fc1_output, fc1_weight, grad_residual, grad_hidden_states, partials, arrivals, M,
                           row0, rows, H, I, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, SPLITS, WEIGHT_FP32, GDC, SLICE_TILES)


@triton.jit
def k_slice_of_tile(
    grad_fc1_output, fc1_weight,
    slice_counts,  # (cdiv(M, BLOCK_M), I // K_SPLIT) int32: stage 2's tiles stored per row block and slice, if SLICE_TILES
    M, row0, rows, tile, split,
    K_SPLIT: tl.constexpr,  # the slice's length: K = [split, split + 1) * K_SPLIT
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    WEIGHT_FP32: tl.constexpr,
    GDC: tl.constexpr,
    SLICE_TILES: tl.constexpr,  # wait for this many stage-2 tiles on the slice's counter (0: for stage 2, if GDC)
):
    """grad_fc1_output[rows, K] @ fc1_weight[K, cols] for output tile `tile` of the launch's rows (in
    the grouped order) and K slice `split`: (the fp32 tile, its first row, its first column)."""
    tile_m, tile_n = grouped_tile(tile, tl.cdiv(rows, BLOCK_M), H // BLOCK_N, GROUP_M)
    row, col = row0 + tile_m * BLOCK_M, tile_n * BLOCK_N
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    if WEIGHT_FP32:
        ks = split * K_SPLIT + tl.arange(0, K_SPLIT)
        b = tl.load(fc1_weight + ks[:, None] * H + (col + tl.arange(0, BLOCK_N))[None, :]).to(tl.float16)
        tile_rows = row + tl.arange(0, BLOCK_M).to(tl.int64)
        a_pointers = grad_fc1_output + tile_rows[:, None] * I + ks[None, :]
        if SLICE_TILES > 0:
            # until stage 2 has stored the slice's tiles of these rows (acquire: their stores visible),
            # then every thread's loads, from L2 (.cg: no L1 line from before the acquire)
            counter = slice_counts + (row // BLOCK_M) * (I // K_SPLIT) + split
            while load_acquire(counter) < SLICE_TILES:
                pass
            tl.debug_barrier()
            a = tl.load(a_pointers, mask=(tile_rows < M)[:, None], other=0.0, cache_modifier=".cg")
        else:
            if GDC:
                gdc_wait()
            a = tl.load(a_pointers, mask=(tile_rows < M)[:, None], other=0.0)
        acc = tl.dot(a, b, acc)
    else:
        for k in range(split * K_SPLIT, (split + 1) * K_SPLIT, BLOCK_K):
            acc = tl.dot(grad_fc1_output.load([row, k]), fc1_weight.load([k, col]), acc)
    return acc, row, col


@triton.jit
def load_acquire(counter):
    """*counter (int32), a load with acquire semantics at GPU scope; the interpreter, which runs no
    inline assembly, reads it by an atomic add of 0. (Triton 3.6 compiles a spin loop on
    tl.atomic_add(counter, 0) to no load at all: the loop is gone from the PTX.)"""
    if INTERPRETED:
        return tl.atomic_add(counter, 0, sem="acquire")
    else:
        return tl.inline_asm_elementwise("ld.acquire.gpu.global.b32 $0, [$1];", "=r,l", [counter], dtype=tl.int32,
                                         is_pure=False, pack=1)


@triton.jit
def input_grad_split_k(
    grad_fc1_output, fc1_weight, grad_residual, grad_hidden_states, partials, arrivals, M, row0, rows,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SPLITS: tl.constexpr,
    WEIGHT_FP32: tl.constexpr,
    GDC: tl.constexpr,
    SLICE_TILES: tl.constexpr,
):
    """Program pid takes split pid // tiles of tile pid % tiles (each split walks the tiles in the
    grouped order of the unsplit kernel); the last of a tile's programs to arrive finishes it. The
    counters: where SLICE_TILES, first stage 2's tiles stored per row block and slice
    (arrivals[row block * SPLITS + split], the launch's rows being all M rows), then each tile's
    arrivals."""
    tl.static_assert(I % (SPLITS * BLOCK_K) == 0, "each split must be a whole number of BLOCK_K steps")
    K_SPLIT: tl.constexpr = I // SPLITS
    TILE: tl.constexpr = BLOCK_M * BLOCK_N
    tiles = tl.cdiv(rows, BLOCK_M) * (H // BLOCK_N)
    tile, split = tl.program_id(0) % tiles, tl.program_id(0) // tiles
    acc, row, col = k_slice_of_tile(grad_fc1_output, fc1_weight, arrivals, M, row0, rows, tile, split, K_SPLIT, H, I,
                                    BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, WEIGHT_FP32, GDC, SLICE_TILES)
    tile_arrivals = arrivals + tl.cdiv(M, BLOCK_M) * SPLITS if SLICE_TILES > 0 else arrivals  # past the slice counters

    in_tile = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tile_partials = partials + tile * (SPLITS * TILE)  # this tile's SPLITS partials, split-major
    tl.store(tile_partials + split * TILE + in_tile, acc)
    # Every thread's stores before the count (CTA barrier), and the count a release at GPU scope:
    # the program that sees SPLITS - 1 earlier arrivals (acquire) sees their partials too.
    tl.debug_barrier()
    earlier = tl.atomic_add(tile_arrivals + tile, 1, sem="acq_rel")
    if earlier == SPLITS - 1:
        tl.debug_barrier()  # the acquire (one thread's) before every thread's loads
        # in split order, from L2 (.cg: no L1 line from before the acquire)
        total = tl.load(tile_partials + in_tile, cache_modifier=".cg")
        for s in tl.static_range(1, SPLITS):
            total += tl.load(tile_partials + s * TILE + in_tile, cache_modifier=".cg")
        store_tile(grad_hidden_states, total + grad_residual.load([row, col]).to(tl.float32), row, col, M, H, BLOCK_M,
                   BLOCK_N)
