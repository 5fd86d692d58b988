"""Issue 16: stage 2 (grad_fc1_output = (grad_residual @ fc2_weight) * gelu'(fc1_output), K = 512)
in isolation: where its time goes and which prototype of it moves fewer bytes per MMA.

Stage 2 took 941 us at 131072 tokens in v24 (results/eval_ef24336.json's run), where cuBLAS does the
GEMM alone in ~430 us and the epilogue's own traffic (fc1_output read in fp32, grad_fc1_output
written in fp16: 1.6 GB) takes ~400 us at 4 TB/s. Traffic model of a BLOCK_M x BLOCK_N tile (K = H =
512 whole): it reads BLOCK_M x 512 + 512 x BLOCK_N fp16 operands from L2 for 2 x BLOCK_M x BLOCK_N x
512 FLOPs, so per token L2 -> SM bytes = I x (1024 / BLOCK_N + 1024 / BLOCK_M + 6): 61 KB in 64x128
tiles (8.0 GB at 131072 tokens), 45 KB in 128x128 (5.9 GB). At the ~8.4 TB/s that 8.0 GB in 941 us
implies, the 64x128 tiles would be bound by L2 -> SM bandwidth, not by the tensor cores.

Variants (each run on the same inputs, outputs compared with the shipped kernel's; official-style
timer: cold L2, shifting addresses, median of 50, CUPTI kernel time):
  shipped       solution's persistent kernel, 64x128, 4 warps, 3 stages, 3 programs an SM (and at 2
                stages, the control for tma-store)
  prefetch      fc1_output's tile loaded by pointers before the K loop, so that its HBM traffic
                overlaps the MMAs (the one-tile kernel's order); 255 registers in 64x128 tiles
  flattened     the tile loop flattened into the K loop (tl.range flatten): the pipeliner then also
                prefetches fc1_output by TMA (+32 KiB of shared memory: 2 programs an SM, not 3)
  v24-gelu      the shipped kernel with v24's gelu', 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx (20 fp32
                instructions an element; solution/gelu.py's sigmoid form since v25, b9e8d12, has 14).
                The sigmoid_795d795 results ran this script from 795d795's tree, where "shipped" was
                v24's form and "sigmoid-form" the one shipped since
  tma-store     grad_fc1_output stored by TMA instead of by pointers after a layout conversion
  subtiled      the epilogue in 2 or 4 column slices, each loading its own fc1_output slice by TMA:
                128 registers instead of 167, so four 64x128 programs an SM or two 128x128 ones
  l2-prefetch   fc1_output's tile (-next: the program's next tile) asked of L2 before the K loop, one
                prefetch.global.L2 a 128-byte line, so that the epilogue's TMA load finds it there
  warp-specialized  stage2_warp_specialized.py's Gluon kernel (Hopper): a loader warp and 2 or 3
                consumer warpgroups taking tiles in turn; grad_fc1_output stored by pointers or by TMA
  warp-specialized resident-b  stage2_ws_resident.py: the warp-specialized kernel with each program's
                128 fc2_weight columns resident in shared memory (half the L2 bytes a tile)
  warp-specialized copy  stage2_ws_copy.py: the warp-specialized kernel with gelu_output's fp16 copy
                as a fourth partition (copy warps w, copy stages s); stage 2's outputs are checked
                here, the copy by stage2_ws_copy.check_copy
  ablated       diagnostic: the shipped kernel without one part of its epilogue (fc1_output's load,
                gelu', the grad_fc1_output store, the bias sums); also the warp-specialized kernel
                without fc1_output's load, gelu' or the store, and with none of them (sums-only:
                left out too, the bias sums fail Triton 3.6's lowering of the Gluon kernel, an
                assertion in ConvertTritonGPUToLLVM)
  gemm-only     diagnostic: the persistent K loop with no epilogue but an fp16 store of the product
  epilogue-only diagnostic: fc1_output read, gelu' applied, grad_fc1_output and the bias partial sums
                written; no MMA
  cublas        diagnostic: torch.mm on the fp16 operands into an fp16 output

Found (H200; results/stage2_prototypes_3545ae9.json, results/stage2_prototypes_sigmoid_795d795*.json):
at 131072 tokens the shipped kernel took 913-939 us, the GEMM alone 576 (474 in 128x256 tiles; cuBLAS
405), the epilogue alone 555: stage 2 is the two nearly in series, not bound by L2 -> SM bytes (the
GEMM alone moved 7.1 GB in 576 us). Every prefetching or flattened form lost (999-1354 us: fewer
programs an SM); the sigmoid form won 4-5% at every size (896 vs 931-939 us, 56.1 vs 59.1 at 7184).
Session 17 (results/stage2_prototypes_subtiled_b6372e8.json, _l2prefetch_acc0c01*.json,
_flat32_ef60723.json, _ablation_cee093a.json): every subtiled form lost (927-1760 vs 878 us at 131072
tokens: each slice waits for its own load), the L2 prefetch lost (913-950 vs 889), the flattened loop
in 32-deep steps with three programs an SM lost (957 vs 894). Left out one at a time, the epilogue's
parts cost 144 (fc1_output's load), 99 (gelu'), 105 (the store) and 77 us (the bias sums) of 900 at
131072 tokens, 6.2 / 2.6 / 1.8 / 1.5 of 26.7 at 2984: no single part holds it. The warp-specialized
kernel with a TMA store won (769.7 vs 901.1 us at 131072 tokens, 48.4 vs 55.7 at 7184,
results/stage2_prototypes_ws_98c5cb0.json): stage2_warp_specialized.py.

    PYTHONPATH=. python bench/experiments/stage2_prototypes.py 7184,131072 [--out FILE]   # GPU machine
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from functools import partial

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from bench.experiments import stage2_warp_specialized as warp_specialized
from bench.experiments import stage2_ws_copy as ws_copy
from bench.experiments import stage2_ws_resident as ws_resident
from solution.gelu import gelu_tanh_grad
from solution.gelu_backward_gemm import gelu_backward_epilogue, gelu_backward_persistent_kernel
from solution.tiling import grouped_tile, store_tile

H, I = 512, 2048


@triton.jit
def tile_origin(tile, tiles_m, I: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(row tile, first row, first column) of a persistent program's `tile`, in the shipped order."""
    tile_m, tile_n = grouped_tile(tile, tiles_m, I // BLOCK_N, GROUP_M)
    return tile_m, tile_m * BLOCK_M, tile_n * BLOCK_N


@triton.jit
def tile_product(grad_residual, fc2_weight, row, col, H: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr):
    """The (BLOCK_M, BLOCK_N) tile of grad_residual @ fc2_weight at (row, col), both operands by TMA
    (the shipped persistent kernel's K loop)."""
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, H, BLOCK_K):
        acc = tl.dot(grad_residual.load([row, k]), fc2_weight.load([k, col]), acc)
    return acc


@triton.jit
def fp32_tile_by_pointers(src, row, col, M, I: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The BLOCK_M x BLOCK_N tile of the row-major (M, I) `src` at (row, col), rows past M as zeros."""
    rows = row + tl.arange(0, BLOCK_M).to(tl.int64)
    cols = col + tl.arange(0, BLOCK_N)
    return tl.load(src + rows[:, None] * I + cols[None, :], mask=(rows < M)[:, None], other=0.0)


@triton.jit
def prefetch_persistent_kernel(grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, M,
                               H: tl.constexpr, I: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """The shipped persistent kernel, but fc1_output (a pointer) is loaded before the K loop."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    for tile in tl.range(tl.program_id(0), tiles_m * (I // BLOCK_N), tl.num_programs(0)):
        tile_m, row, col = tile_origin(tile, tiles_m, I, BLOCK_M, BLOCK_N, GROUP_M)
        x = fp32_tile_by_pointers(fc1_output, row, col, M, I, BLOCK_M, BLOCK_N)
        acc = tile_product(grad_residual, fc2_weight, row, col, H, BLOCK_M, BLOCK_N, BLOCK_K)
        gelu_backward_epilogue(acc, x, tile_m, row, col, grad_fc1_output, bias_partials, M, I, BLOCK_M, BLOCK_N)


@triton.jit
def flattened_persistent_kernel(grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, M,
                                H: tl.constexpr, I: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """The shipped persistent kernel with its tile loop flattened into the K loop (tl.range's
    flatten), so that the pipeline carries on into the next tile's loads during an epilogue."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    for tile in tl.range(tl.program_id(0), tiles_m * (I // BLOCK_N), tl.num_programs(0), flatten=True):
        tile_m, row, col = tile_origin(tile, tiles_m, I, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tile_product(grad_residual, fc2_weight, row, col, H, BLOCK_M, BLOCK_N, BLOCK_K)
        gelu_backward_epilogue(acc, fc1_output.load([row, col]), tile_m, row, col, grad_fc1_output, bias_partials,
                               M, I, BLOCK_M, BLOCK_N)


@triton.jit
def gelu_grad_v24_form(x):
    """gelu'(x) as v24 wrote it: 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx, t = tanh(u) = 2 sigmoid(2u) - 1
    (20 fp32 instructions an element; solution/gelu.py has the sigmoid form since v25)."""
    x2 = x * x
    u = 0.7978845608028654 * (x + 0.044715 * x2 * x)
    t = 2.0 * tl.sigmoid(2.0 * u) - 1.0
    du_dx = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x2)
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du_dx


@triton.jit
def v24_gelu_persistent_kernel(grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, M,
                               H: tl.constexpr, I: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """The shipped persistent kernel with v24's gelu' (the baseline of v25's change)."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    for tile in tl.range(tl.program_id(0), tiles_m * (I // BLOCK_N), tl.num_programs(0)):
        tile_m, row, col = tile_origin(tile, tiles_m, I, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tile_product(grad_residual, fc2_weight, row, col, H, BLOCK_M, BLOCK_N, BLOCK_K)
        d = acc * gelu_grad_v24_form(fc1_output.load([row, col]))
        store_tile(grad_fc1_output, d.to(tl.float16), row, col, M, I, BLOCK_M, BLOCK_N)
        tl.store(bias_partials + tile_m * I + col + tl.arange(0, BLOCK_N), tl.sum(d, axis=0))


@triton.jit
def tma_store_kernel(grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, M,
                     H: tl.constexpr, I: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """The shipped persistent kernel storing grad_fc1_output by TMA (a descriptor; rows past M are
    clipped by the copy engine) instead of by pointers after a layout conversion."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    for tile in tl.range(tl.program_id(0), tiles_m * (I // BLOCK_N), tl.num_programs(0)):
        tile_m, row, col = tile_origin(tile, tiles_m, I, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tile_product(grad_residual, fc2_weight, row, col, H, BLOCK_M, BLOCK_N, BLOCK_K)
        d = acc * gelu_tanh_grad(fc1_output.load([row, col]))
        grad_fc1_output.store([row, col], d.to(tl.float16))
        tl.store(bias_partials + tile_m * I + col + tl.arange(0, BLOCK_N), tl.sum(d, axis=0))


@triton.jit
def halves(x, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The (BLOCK_M, BLOCK_N) `x` as its left and right (BLOCK_M, BLOCK_N // 2) column halves (a
    split along register dimensions of the MMA layout: no data moves between threads)."""
    return tl.split(tl.permute(tl.reshape(x, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))


@triton.jit
def subtile_epilogue(acc, fc1_output, tile_m, row, col, grad_fc1_output, bias_partials, M, I: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The shipped epilogue on a (BLOCK_M, BLOCK_N) column slice of a tile, its fc1_output slice
    loaded by TMA (the descriptor's block is the slice)."""
    gelu_backward_epilogue(acc, fc1_output.load([row, col]), tile_m, row, col, grad_fc1_output, bias_partials,
                           M, I, BLOCK_M, BLOCK_N)


@triton.jit
def subtiled_kernel(grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, M,
                    H: tl.constexpr, I: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, SPLITS: tl.constexpr):
    """The shipped persistent kernel with its epilogue in SPLITS (2 or 4) column slices, one after the
    other, each loading its own fc1_output slice: a quarter or half of the tile's fp32 operand live
    at a time instead of all of it (64 registers a thread in 64x128 tiles on 4 warps), so that more
    programs fit an SM or larger tiles fit two."""
    tl.static_assert(SPLITS == 2 or SPLITS == 4, "2 or 4 column slices")
    tiles_m = tl.cdiv(M, BLOCK_M)
    for tile in tl.range(tl.program_id(0), tiles_m * (I // BLOCK_N), tl.num_programs(0)):
        tile_m, row, col = tile_origin(tile, tiles_m, I, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tile_product(grad_residual, fc2_weight, row, col, H, BLOCK_M, BLOCK_N, BLOCK_K)
        left, right = halves(acc, BLOCK_M, BLOCK_N)
        HALF: tl.constexpr = BLOCK_N // 2
        if SPLITS == 2:
            subtile_epilogue(left, fc1_output, tile_m, row, col, grad_fc1_output, bias_partials, M, I, BLOCK_M, HALF)
            subtile_epilogue(right, fc1_output, tile_m, row, col + HALF, grad_fc1_output, bias_partials, M, I,
                             BLOCK_M, HALF)
        else:
            QUARTER: tl.constexpr = BLOCK_N // 4
            q0, q1 = halves(left, BLOCK_M, HALF)
            q2, q3 = halves(right, BLOCK_M, HALF)
            subtile_epilogue(q0, fc1_output, tile_m, row, col, grad_fc1_output, bias_partials, M, I, BLOCK_M,
                             QUARTER)
            subtile_epilogue(q1, fc1_output, tile_m, row, col + QUARTER, grad_fc1_output, bias_partials, M, I,
                             BLOCK_M, QUARTER)
            subtile_epilogue(q2, fc1_output, tile_m, row, col + 2 * QUARTER, grad_fc1_output, bias_partials, M,
                             I, BLOCK_M, QUARTER)
            subtile_epilogue(q3, fc1_output, tile_m, row, col + 3 * QUARTER, grad_fc1_output, bias_partials, M,
                             I, BLOCK_M, QUARTER)


@triton.jit
def prefetch_tile_to_l2(src, row, col, M, I: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Ask L2 for the BLOCK_M x BLOCK_N fp32 tile of the row-major (M, I) `src` at (row, col): one
    `prefetch.global.L2` a 128-byte line (32 fp32), no register receives data and nothing waits.
    Rows past M are clamped to row M - 1 (a valid address)."""
    rows = tl.minimum(row + tl.arange(0, BLOCK_M), M - 1).to(tl.int64)
    lines = col + 32 * tl.arange(0, BLOCK_N // 32)
    tl.inline_asm_elementwise("{ prefetch.global.L2 [$1]; mov.u32 $0, 0; }", "=r,l",
                              [src + rows[:, None] * I + lines[None, :]], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def l2_prefetch_kernel(grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, M,
                       H: tl.constexpr, I: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, fc1_lines=None, AHEAD: tl.constexpr = 0):
    """The shipped persistent kernel, with fc1_output's tile (AHEAD = 0), or the program's next tile
    (AHEAD = 1), prefetched into L2 before the K loop (`fc1_lines`: fc1_output as a pointer), so that
    its HBM traffic overlaps the MMAs and the epilogue's TMA load finds it in L2."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles = tiles_m * (I // BLOCK_N)
    if AHEAD:
        _, row, col = tile_origin(tl.program_id(0), tiles_m, I, BLOCK_M, BLOCK_N, GROUP_M)
        prefetch_tile_to_l2(fc1_lines, row, col, M, I, BLOCK_M, BLOCK_N)
    for tile in tl.range(tl.program_id(0), tiles, tl.num_programs(0)):
        tile_m, row, col = tile_origin(tile, tiles_m, I, BLOCK_M, BLOCK_N, GROUP_M)
        if AHEAD:
            ahead = tile + tl.num_programs(0)
            if ahead < tiles:
                _, ahead_row, ahead_col = tile_origin(ahead, tiles_m, I, BLOCK_M, BLOCK_N, GROUP_M)
                prefetch_tile_to_l2(fc1_lines, ahead_row, ahead_col, M, I, BLOCK_M, BLOCK_N)
        else:
            prefetch_tile_to_l2(fc1_lines, row, col, M, I, BLOCK_M, BLOCK_N)
        acc = tile_product(grad_residual, fc2_weight, row, col, H, BLOCK_M, BLOCK_N, BLOCK_K)
        gelu_backward_epilogue(acc, fc1_output.load([row, col]), tile_m, row, col, grad_fc1_output, bias_partials,
                               M, I, BLOCK_M, BLOCK_N)


@triton.jit
def ablated_kernel(grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, M,
                   H: tl.constexpr, I: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, FC1: tl.constexpr = True, GELU: tl.constexpr = True,
                   STORE: tl.constexpr = True, SUMS: tl.constexpr = True):
    """Diagnostic: the shipped persistent kernel with one part of its epilogue left out, to see what
    each costs inside the whole kernel: FC1 False takes gelu' of the product instead of loading
    fc1_output, GELU False multiplies by fc1_output itself, STORE False stores no grad_fc1_output,
    SUMS False writes no bias partial sums."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    for tile in tl.range(tl.program_id(0), tiles_m * (I // BLOCK_N), tl.num_programs(0)):
        tile_m, row, col = tile_origin(tile, tiles_m, I, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tile_product(grad_residual, fc2_weight, row, col, H, BLOCK_M, BLOCK_N, BLOCK_K)
        x = fc1_output.load([row, col]) if FC1 else acc
        d = acc * (gelu_tanh_grad(x) if GELU else x)
        if STORE:
            store_tile(grad_fc1_output, d.to(tl.float16), row, col, M, I, BLOCK_M, BLOCK_N)
        if SUMS:
            tl.store(bias_partials + tile_m * I + col + tl.arange(0, BLOCK_N), tl.sum(d, axis=0))


@triton.jit
def gemm_only_kernel(grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, M,
                     H: tl.constexpr, I: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """Diagnostic: the persistent K loop, the product stored in fp16 (no fc1_output, no bias sums)."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    for tile in tl.range(tl.program_id(0), tiles_m * (I // BLOCK_N), tl.num_programs(0)):
        tile_m, row, col = tile_origin(tile, tiles_m, I, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tile_product(grad_residual, fc2_weight, row, col, H, BLOCK_M, BLOCK_N, BLOCK_K)
        store_tile(grad_fc1_output, acc.to(tl.float16), row, col, M, I, BLOCK_M, BLOCK_N)


@triton.jit
def epilogue_only_kernel(grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, M,
                         H: tl.constexpr, I: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """Diagnostic: the epilogue's memory traffic and math with no MMA (the product taken as 1)."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    for tile in tl.range(tl.program_id(0), tiles_m * (I // BLOCK_N), tl.num_programs(0)):
        tile_m, row, col = tile_origin(tile, tiles_m, I, BLOCK_M, BLOCK_N, GROUP_M)
        x = fp32_tile_by_pointers(fc1_output, row, col, M, I, BLOCK_M, BLOCK_N)
        rows = row + tl.arange(0, BLOCK_M)
        ones = tl.where((rows < M)[:, None], 1.0, 0.0) + tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        gelu_backward_epilogue(ones, x, tile_m, row, col, grad_fc1_output, bias_partials, M, I, BLOCK_M, BLOCK_N)


@dataclass(frozen=True)
class Variant:
    kernel: object
    block_m: int
    block_n: int
    warps: int
    stages: int
    programs_per_sm: int
    fc1_by_tma: bool  # fc1_output as a TMA descriptor (the shipped kernel) or a pointer
    out_by_tma: bool = False  # grad_fc1_output as a TMA descriptor (stored by the copy engine) or a pointer
    max_registers: int | None = None  # ptxas's cap a thread (Triton's maxnreg), so that programs_per_sm fit
    checked: bool = True  # outputs compared with the shipped kernel's (not the diagnostics)
    block_k: int = 64
    epilogue_splits: int = 0  # subtiled_kernel's SPLITS (fc1_output's descriptor block: a 1/SPLITS column slice)
    prefetch_ahead: int | None = None  # l2_prefetch_kernel's AHEAD (it also gets fc1_output as a pointer)
    ablation: tuple = ()  # ablated_kernel's constexprs set to False
    # a launcher of its own, fn(a, b, x, out, partials, M, sms) (the Gluon prototype), or None
    launch: object = None
    copies_gelu: bool = False  # also writes gelu_output's fp16 copy (_gelu_buffers), checked too


_GELU = {}  # tokens -> (gelu_output, its fp16 copy): the copy variants' extra operands, made once


def _gelu_buffers(M: int) -> tuple[torch.Tensor, torch.Tensor]:
    if M not in _GELU:
        _GELU[M] = (torch.randn(M, I, device="cuda"), torch.empty(M, I, device="cuda", dtype=torch.float16))
    return _GELU[M]


def _with_gelu_copy(a, b, x, out, partials, M: int, sms: int, **options) -> None:
    """stage2_ws_copy.py's kernel: stage 2 warp-specialized with gelu_output's fp16 copy beside it."""
    ws_copy.launch(a, b, x, out, partials, *_gelu_buffers(M), M, sms, **options)


VARIANTS = {
    "shipped 64x128 w4 s3 x3": Variant(gelu_backward_persistent_kernel, 64, 128, 4, 3, 3, True),
    "v24-gelu 64x128 w4 s3 x3": Variant(v24_gelu_persistent_kernel, 64, 128, 4, 3, 3, True),
    "shipped 64x128 w4 s2 x3": Variant(gelu_backward_persistent_kernel, 64, 128, 4, 2, 3, True),
    "tma-store 64x128 w4 s2 x3": Variant(tma_store_kernel, 64, 128, 4, 2, 3, True, out_by_tma=True),
    "tma-store 64x128x32 w4 s4 x3": Variant(tma_store_kernel, 64, 128, 4, 4, 3, True, out_by_tma=True, block_k=32),
    "tma-store 64x128x32 w4 s3 x4": Variant(tma_store_kernel, 64, 128, 4, 3, 4, True, out_by_tma=True, block_k=32),
    "tma-store 128x128 w8 s2 x2": Variant(tma_store_kernel, 128, 128, 8, 2, 2, True, out_by_tma=True, max_registers=128),
    "tma-store 128x128 w8 s3 x1": Variant(tma_store_kernel, 128, 128, 8, 3, 1, True, out_by_tma=True),
    "tma-store 64x256 w8 s2 x2": Variant(tma_store_kernel, 64, 256, 8, 2, 2, True, out_by_tma=True, max_registers=128),
    "tma-store 128x128x32 w8 s4 x2": Variant(tma_store_kernel, 128, 128, 8, 4, 2, True, out_by_tma=True, block_k=32, max_registers=128),
    "subtiled/2 64x128 w4 s3 x3": Variant(subtiled_kernel, 64, 128, 4, 3, 3, True, epilogue_splits=2),
    "subtiled/4 64x128 w4 s3 x3": Variant(subtiled_kernel, 64, 128, 4, 3, 3, True, epilogue_splits=4),
    "subtiled/2 64x128 w4 s2 x4": Variant(subtiled_kernel, 64, 128, 4, 2, 4, True, epilogue_splits=2),
    "subtiled/2 64x128x32 w4 s4 x4": Variant(subtiled_kernel, 64, 128, 4, 4, 4, True, epilogue_splits=2,
                                             max_registers=128, block_k=32),
    "subtiled/4 64x128 w4 s2 x4": Variant(subtiled_kernel, 64, 128, 4, 2, 4, True, epilogue_splits=4,
                                          max_registers=128),
    "subtiled/4 128x128 w8 s3 x2": Variant(subtiled_kernel, 128, 128, 8, 3, 2, True, epilogue_splits=4,
                                           max_registers=128),
    "subtiled/4 128x128x32 w8 s4 x2": Variant(subtiled_kernel, 128, 128, 8, 4, 2, True, epilogue_splits=4,
                                              max_registers=128, block_k=32),
    "subtiled/4 64x256 w8 s3 x2": Variant(subtiled_kernel, 64, 256, 8, 3, 2, True, epilogue_splits=4,
                                          max_registers=128),
    "l2-prefetch 64x128 w4 s3 x3": Variant(l2_prefetch_kernel, 64, 128, 4, 3, 3, True, prefetch_ahead=0),
    "l2-prefetch-next 64x128 w4 s3 x3": Variant(l2_prefetch_kernel, 64, 128, 4, 3, 3, True, prefetch_ahead=1),
    "shipped 64x128x32 w4 s4 x3": Variant(gelu_backward_persistent_kernel, 64, 128, 4, 4, 3, True, block_k=32),
    "prefetch 64x128 w4 s3 x2": Variant(prefetch_persistent_kernel, 64, 128, 4, 3, 2, False),
    "prefetch 64x64 w4 s3 x4": Variant(prefetch_persistent_kernel, 64, 64, 4, 3, 4, False),
    "prefetch 128x128 w8 s3 x1": Variant(prefetch_persistent_kernel, 128, 128, 8, 3, 1, False),
    "flattened 64x128 w4 s3 x2": Variant(flattened_persistent_kernel, 64, 128, 4, 3, 2, True),
    "flattened 64x128x32 w4 s3 x3": Variant(flattened_persistent_kernel, 64, 128, 4, 3, 3, True, block_k=32,
                                            max_registers=168),
    "flattened 64x128x32 w4 s2 x3": Variant(flattened_persistent_kernel, 64, 128, 4, 2, 3, True, block_k=32),
    "flattened 64x64 w4 s3 x3": Variant(flattened_persistent_kernel, 64, 64, 4, 3, 3, True),
    "flattened 128x128 w8 s3 x1": Variant(flattened_persistent_kernel, 128, 128, 8, 3, 1, True),
    "ablated no-fc1 64x128 w4 s3 x3": Variant(ablated_kernel, 64, 128, 4, 3, 3, True, checked=False,
                                              ablation=("FC1",)),
    "ablated no-gelu 64x128 w4 s3 x3": Variant(ablated_kernel, 64, 128, 4, 3, 3, True, checked=False,
                                               ablation=("GELU",)),
    "ablated no-store 64x128 w4 s3 x3": Variant(ablated_kernel, 64, 128, 4, 3, 3, True, checked=False,
                                                ablation=("STORE",)),
    "ablated no-sums 64x128 w4 s3 x3": Variant(ablated_kernel, 64, 128, 4, 3, 3, True, checked=False,
                                               ablation=("SUMS",)),
    "warp-specialized 64x128 s4": Variant(None, 64, 128, 4, 4, 1, True, launch=partial(warp_specialized.launch, stages=4)),
    "warp-specialized 64x128 s6": Variant(None, 64, 128, 4, 6, 1, True, launch=partial(warp_specialized.launch, stages=6)),
    "warp-specialized x3 64x128 s4": Variant(None, 64, 128, 4, 4, 1, True,
                                             launch=partial(warp_specialized.launch, stages=4, consumers=3)),
    "warp-specialized x3 64x128 s3": Variant(None, 64, 128, 4, 3, 1, True,
                                             launch=partial(warp_specialized.launch, stages=3, consumers=3)),
    "warp-specialized tma-store 64x128 s4": Variant(None, 64, 128, 4, 4, 1, True,
                                                    launch=partial(warp_specialized.launch, stages=4, tma_store=True)),
    "warp-specialized x3 tma-store 64x128 s3": Variant(None, 64, 128, 4, 3, 1, True, launch=partial(
        warp_specialized.launch, stages=3, consumers=3, tma_store=True)),
    **{f"warp-specialized tma-store ablated {name} 64x128 s4": Variant(
        None, 64, 128, 4, 4, 1, True, checked=False,
        launch=partial(warp_specialized.launch, stages=4, tma_store=True, ablation=parts))
       for name, parts in (("no-fc1", ("FC1",)), ("no-gelu", ("GELU",)), ("no-store", ("STORE",)),
                           ("sums-only", ("FC1", "GELU", "STORE")))},
    **{f"warp-specialized copy w{w} s{s} 64x128 s4": Variant(None, 64, 128, 4, 4, 1, True,
                                                           launch=partial(_with_gelu_copy, copy_warps=w, copy_stages=s),
                                                           copies_gelu=True)
       for w, s in ((2, 3), (2, 2), (4, 3))},
    **{f"warp-specialized resident-b 64x128 s{s}": Variant(None, 64, 128, 4, s, 1, True,
                                                         launch=partial(ws_resident.launch, stages=s))
       for s in (3, 2)},
    "gemm-only 64x128 w4 s3 x3": Variant(gemm_only_kernel, 64, 128, 4, 3, 3, False, checked=False),
    "gemm-only 128x128 w8 s3 x1": Variant(gemm_only_kernel, 128, 128, 8, 3, 1, False, checked=False),
    "gemm-only 128x256 w8 s3 x1": Variant(gemm_only_kernel, 128, 256, 8, 3, 1, False, checked=False),
    "epilogue-only 64x128 w4 x3": Variant(epilogue_only_kernel, 64, 128, 4, 1, 3, False, checked=False),
}


def _register_cap(v: Variant) -> dict:
    return {"maxnreg": v.max_registers} if v.max_registers else {}


def launcher(v: Variant, M: int, sms: int):
    """fn(grad_residual_f16, fc2_weight_f16, fc1_output, grad_fc1_output, bias_partials) launching v."""
    if v.launch is not None:
        return lambda a, b, x, out, partials: v.launch(a, b, x, out, partials, M, sms)
    tiles = triton.cdiv(M, v.block_m) * (I // v.block_n)
    grid = (max(1, min(tiles, v.programs_per_sm * sms)),)
    fc1_block = [v.block_m, v.block_n // max(1, v.epilogue_splits)]
    splits = {"SPLITS": v.epilogue_splits} if v.epilogue_splits else {}
    if v.prefetch_ahead is not None:
        splits["AHEAD"] = v.prefetch_ahead
    splits.update({name: False for name in v.ablation})

    def run(a, b, x, out, partials):
        args = (TensorDescriptor.from_tensor(a, [v.block_m, v.block_k]),
                TensorDescriptor.from_tensor(b, [v.block_k, v.block_n]),
                TensorDescriptor.from_tensor(x, fc1_block) if v.fc1_by_tma else x,
                TensorDescriptor.from_tensor(out, [v.block_m, v.block_n]) if v.out_by_tma else out,
                partials[:triton.cdiv(M, v.block_m)], M)
        extra = {"fc1_lines": x} if v.prefetch_ahead is not None else {}
        v.kernel[grid](*args, **extra, H=H, I=I, BLOCK_M=v.block_m, BLOCK_N=v.block_n, BLOCK_K=v.block_k, GROUP_M=8,
                       num_warps=v.warps, num_stages=v.stages, **splits, **_register_cap(v))
    return run


def stage2_inputs(tokens: int, device) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Inputs of stage 2 at `tokens` tokens (values drawn as the workloads' scales: unit normal
    grad_residual, weights ~ 1/sqrt(fan-in), fc1_output unit normal) and its output templates."""
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(tokens, H, device=device, generator=g).to(torch.float16)
    b = (torch.randn(H, I, device=device, generator=g) / H ** 0.5).to(torch.float16)
    x = torch.randn(tokens, I, device=device, generator=g)
    return [a, b, x], [torch.empty(tokens, I, device=device, dtype=torch.float16),
                       torch.empty(triton.cdiv(tokens, 64), I, device=device)]


def measure(tokens: int, names: list[str], sms: int) -> dict:
    from evaluation.timer import time_call

    inputs, outputs = stage2_inputs(tokens, torch.device("cuda"))
    row = {"tokens": tokens, "correct": {}, "max_abs_diff": {}, "us": {}, "kernels_us": {}}
    shipped = VARIANTS["shipped 64x128 w4 s3 x3"]
    expected = [torch.full_like(o, float("nan")) for o in outputs]
    launcher(shipped, tokens, sms)(*inputs, *expected)
    expected_bias = expected[1][:triton.cdiv(tokens, shipped.block_m)].sum(0)
    for name in names:
        v = VARIANTS[name]
        fn = launcher(v, tokens, sms)
        if v.checked:
            got = [torch.full_like(o, float("nan")) for o in outputs]
            if v.copies_gelu:
                _gelu_buffers(tokens)[1].fill_(float("nan"))
            fn(*inputs, *got)
            torch.cuda.synchronize()
            diff = (got[0].float() - expected[0].float()).abs().max().item()
            bias = got[1][:triton.cdiv(tokens, v.block_m)].sum(0)
            bias_diff = (bias - expected_bias).abs().max().item()
            row["max_abs_diff"][name] = [diff, bias_diff]
            row["correct"][name] = diff <= 1e-2 and bias_diff <= 1e-2 * max(1.0, expected_bias.abs().max().item())
            if v.copies_gelu:  # the copy exact (NaN where an element was not written)
                gelu, gelu_f16 = _gelu_buffers(tokens)
                copy_diff = (gelu_f16.float() - gelu.half().float()).abs().max().item()
                row["max_abs_diff"][name].append(copy_diff)
                row["correct"][name] = row["correct"][name] and copy_diff == 0.0
        try:
            r = time_call(fn, inputs, outputs, warmup=10, rep=50)
            row["us"][name] = round(r.median_ms * 1e3, 1)
            row["kernels_us"][name] = {k: round(t * 1e3, 1) for k, t in r.activity_ms.items()}
        except Exception as e:  # a variant that fails to compile or run is a result, not the end of the run
            row["us"][name] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        print(tokens, name, row["us"][name], row["correct"].get(name, ""), flush=True)
    a, b = inputs[0], inputs[1]
    c = torch.empty(tokens, I, device="cuda", dtype=torch.float16)
    r = time_call(lambda a, b, c: torch.mm(a, b, out=c), [a, b], [c], warmup=10, rep=50)
    row["us"]["cublas mm fp16"] = round(r.median_ms * 1e3, 1)
    print(tokens, "cublas mm fp16", row["us"]["cublas mm fp16"], flush=True)
    return row


def main(argv: list[str]) -> int:
    from bench.experiments.workload_case import description, measure_each, token_counts

    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("tokens", type=token_counts, help="comma-separated token counts >= 1 (any, not only workloads')")
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS), metavar="VARIANT",
                        help="a key of VARIANTS, repeatable (default: all)")
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "stage2_prototypes.json"))
    args = parser.parse_args(argv)
    tokens = args.tokens
    from bench.gpu import make_folders, require_gpu, writable
    from evaluation.provenance import provenance

    writable(parser, out=args.out)
    device = require_gpu("stage2_prototypes")
    make_folders(args.out)
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    header = {"provenance": provenance("issue 16: stage 2 alone, prototypes and diagnostics, official-style timer "
                                       "(cold L2, shifting addresses, median of 50, CUPTI kernel time)")}
    measure_each(tokens, lambda t: measure(t, args.variant or list(VARIANTS), sms), args.out, header)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
