"""Where stage 2's time goes: variants of its kernel that drop one part, and persistent variants.

Stage 2 (gelu_backward_gemm.py) is a GEMM with K = 512 whose epilogue loads fc1_output (fp32) and
applies the GELU derivative. `parts` times copies of its tile that each leave out one part (the
MMAs, the fc1_output load, the GELU math, the bias sums) or use the MUFU tanh.approx; `persistent`
times one program per tile against persistent grids (1 or 2 programs per SM), with the tile loop
flattened into the K loop or not, and fc1_output loaded before or after the K loop; `tma` times the
one-tile-per-program kernel against the same tile with every operand moved by TMA (host-side tensor
descriptors: grad_residual, fc2_weight and fc1_output loaded, grad_fc1_output stored); `ws` times
persistent TMA-fed programs, warp-specialized or not (tl.range's warp_specialize). All use fp16
operands without fc2_weight's remainder, at M = 131072 (or --tokens), timed with triton.testing.do_bench (CUDA
events, L2 flushed, median). These are experiments beside the solution, not its code.

    python bench/stage2_anatomy.py parts --out out/stage2_parts.json
    python bench/stage2_anatomy.py persistent --out out/stage2_persistent.json
    python bench/stage2_anatomy.py tma --out out/stage2_tma.json
    python bench/stage2_anatomy.py ws --out out/stage2_ws.json
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from evaluation.provenance import provenance
from solution.gelu import GELU_COEFF, SQRT_2_OVER_PI, gelu_tanh_grad
from solution.tiling import grouped_tile

H, I = 512, 2048
FULL, NO_GELU_MATH, NO_X_LOAD, NO_MMA, NO_BIAS_SUM = (tl.constexpr(mode) for mode in range(5))
PARTS = {"full": (FULL, False), "no gelu math": (NO_GELU_MATH, False), "no x load": (NO_X_LOAD, False),
         "no MMA": (NO_MMA, False), "no bias sum": (NO_BIAS_SUM, False), "fast tanh": (FULL, True)}


@triton.jit
def _tanh_approx(u):
    return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [u], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def parts_kernel(a_ptr, w_ptr, x_ptr, out_ptr, bias_ptr, M, H: tl.constexpr, I: tl.constexpr, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, MODE: tl.constexpr,
                 FAST_TANH: tl.constexpr):
    tile_m, tile_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), I // BLOCK_N, GROUP_M)
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    offsets = rows[:, None] * I + cols[None, :]
    if MODE != NO_X_LOAD:
        x = tl.load(x_ptr + offsets, mask=row_ok[:, None], other=0.0)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    if MODE != NO_MMA:
        for k in range(0, H, BLOCK_K):
            ks = k + tl.arange(0, BLOCK_K)
            a = tl.load(a_ptr + rows[:, None] * H + ks[None, :], mask=row_ok[:, None], other=0.0)
            acc = tl.dot(a, tl.load(w_ptr + ks[:, None] * I + cols[None, :]), acc)
    if MODE == NO_X_LOAD:
        x = acc
    if MODE == NO_GELU_MATH:
        d = acc * x
    elif MODE == NO_MMA:
        d = x * gelu_tanh_grad(x)
    elif FAST_TANH:
        x2 = x * x
        t = _tanh_approx(SQRT_2_OVER_PI * (x + GELU_COEFF * x2 * x))
        d = acc * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * (SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_COEFF * x2)))
    else:
        d = acc * gelu_tanh_grad(x)
    tl.store(out_ptr + offsets, d.to(tl.float16), mask=row_ok[:, None])
    if MODE != NO_BIAS_SUM:
        tl.store(bias_ptr + tile_m * I + cols, tl.sum(d, axis=0))


@triton.jit
def persistent_kernel(a_ptr, w_ptr, x_ptr, out_ptr, bias_ptr, M, H: tl.constexpr, I: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                      FLATTEN: tl.constexpr, PREFETCH: tl.constexpr):
    tiles = tl.cdiv(M, BLOCK_M) * (I // BLOCK_N)
    for tile in tl.range(tl.program_id(0), tiles, tl.num_programs(0), flatten=FLATTEN):
        tile_m, tile_n = grouped_tile(tile, tl.cdiv(M, BLOCK_M), I // BLOCK_N, GROUP_M)
        rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
        cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < M
        offsets = rows[:, None] * I + cols[None, :]
        if PREFETCH:
            x = tl.load(x_ptr + offsets, mask=row_ok[:, None], other=0.0)
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k in range(0, H, BLOCK_K):
            ks = k + tl.arange(0, BLOCK_K)
            a = tl.load(a_ptr + rows[:, None] * H + ks[None, :], mask=row_ok[:, None], other=0.0)
            acc = tl.dot(a, tl.load(w_ptr + ks[:, None] * I + cols[None, :]), acc)
        if not PREFETCH:
            x = tl.load(x_ptr + offsets, mask=row_ok[:, None], other=0.0)
        d = acc * gelu_tanh_grad(x)
        tl.store(out_ptr + offsets, d.to(tl.float16), mask=row_ok[:, None])
        tl.store(bias_ptr + tile_m * I + cols, tl.sum(d, axis=0))


@triton.jit
def tma_kernel(a_desc, w_desc, x_desc, out_desc, bias_ptr, M, H: tl.constexpr, I: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """parts_kernel's full tile, its operands moved by TMA (rows past M read as zeros, are not stored)."""
    tile_m, tile_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), I // BLOCK_N, GROUP_M)
    row, col = tile_m * BLOCK_M, tile_n * BLOCK_N
    x = x_desc.load([row, col])
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, H, BLOCK_K):
        acc = tl.dot(a_desc.load([row, k]), w_desc.load([k, col]), acc)
    d = acc * gelu_tanh_grad(x)
    out_desc.store([row, col], d.to(tl.float16))
    tl.store(bias_ptr + tile_m * I + col + tl.arange(0, BLOCK_N), tl.sum(d, axis=0))


@triton.jit
def persistent_tma_kernel(a_desc, w_desc, x_desc, out_ptr, bias_ptr, M, H: tl.constexpr, I: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                          FLATTEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    """tma_kernel's tile in a persistent loop over tiles (a program per SM or two), optionally warp-
    specialized (a producer warp issuing the TMA loads ahead, across tiles, while the others compute)."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    for tile in tl.range(tl.program_id(0), tiles_m * (I // BLOCK_N), tl.num_programs(0), flatten=FLATTEN,
                         warp_specialize=WARP_SPECIALIZE):
        tile_m, tile_n = grouped_tile(tile, tiles_m, I // BLOCK_N, GROUP_M)
        row, col = tile_m * BLOCK_M, tile_n * BLOCK_N
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k in range(0, H, BLOCK_K):
            acc = tl.dot(a_desc.load([row, k]), w_desc.load([k, col]), acc)
        d = acc * gelu_tanh_grad(x_desc.load([row, col]))
        rows = row + tl.arange(0, BLOCK_M).to(tl.int64)
        cols = col + tl.arange(0, BLOCK_N)
        tl.store(out_ptr + rows[:, None] * I + cols[None, :], d.to(tl.float16), mask=(rows < M)[:, None])
        tl.store(bias_ptr + tile_m * I + cols, tl.sum(d, axis=0))


def _time(call) -> float:
    try:
        call()
        torch.cuda.synchronize()
        return triton.testing.do_bench(call, warmup=10, rep=100, return_mode="median") * 1000
    except Exception as e:  # an over-sized variant fails to compile: record it and go on
        print(repr(e)[:300], file=sys.stderr)
        return float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", choices=("parts", "persistent", "tma", "ws"))
    parser.add_argument("--tokens", type=int, default=131072)
    parser.add_argument("--out", default="out/stage2_anatomy.json")
    args = parser.parse_args(argv)
    M = args.tokens
    dev = torch.device("cuda")
    torch.manual_seed(0)
    a = (torch.randn(M, H, device=dev) * 0.1).half()
    w = (torch.randn(H, I, device=dev) * 0.03).half()
    x = torch.randn(M, I, device=dev)
    out = torch.empty(M, I, device=dev, dtype=torch.float16)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    rows = []
    configs = ((128, 64, 4, 3), (128, 128, 8, 3), (128, 64, 4, 4))
    if args.experiment == "parts":
        configs += ((64, 128, 4, 3),)
    if args.experiment == "tma":
        configs = ((64, 128, 4, 4), (128, 64, 4, 3), (128, 128, 8, 3), (128, 256, 8, 3), (64, 256, 8, 3))
    if args.experiment == "ws":
        configs = ((64, 128, 4, 4), (128, 128, 8, 3), (128, 128, 4, 3), (128, 256, 8, 3))
    for bm, bn, warps, stages in configs:
        bias = torch.empty(triton.cdiv(M, bm), I, device=dev)
        tiles = triton.cdiv(M, bm) * (I // bn)
        opts = dict(num_warps=warps, num_stages=stages)
        if args.experiment == "parts":
            variants = {name: (lambda m=m, f=f: parts_kernel[(tiles,)](a, w, x, out, bias, M, H, I, bm, bn, 64, 8, m, f, **opts))
                        for name, (m, f) in PARTS.items()}
        elif args.experiment == "tma":
            descs = [TensorDescriptor.from_tensor(t, block) for t, block in
                     ((a, [bm, 64]), (w, [64, bn]), (x, [bm, bn]), (out, [bm, bn]))]
            variants = {
                "pointers": lambda: parts_kernel[(tiles,)](a, w, x, out, bias, M, H, I, bm, bn, 64, 8, FULL, False, **opts),
                "tma": lambda: tma_kernel[(tiles,)](*descs, bias, M, H, I, bm, bn, 64, 8, **opts),
            }
        elif args.experiment == "ws":
            descs = [TensorDescriptor.from_tensor(t, block) for t, block in ((a, [bm, 64]), (w, [64, bn]), (x, [bm, bn]))]
            variants = {"pointers": lambda: parts_kernel[(tiles,)](a, w, x, out, bias, M, H, I, bm, bn, 64, 8, FULL, False, **opts)}
            for per_sm in (1, 2):
                for flatten, ws in ((False, False), (False, True), (True, True)):
                    variants[f"persistent x{per_sm} flatten={flatten} warp_specialize={ws}"] = (
                        lambda g=per_sm * sms, f=flatten, s=ws:
                        persistent_tma_kernel[(g,)](*descs, out, bias, M, H, I, bm, bn, 64, 8, f, s, **opts))
        else:
            variants = {"one tile/program": lambda: parts_kernel[(tiles,)](a, w, x, out, bias, M, H, I, bm, bn, 64, 8,
                                                                           FULL, False, **opts)}
            for per_sm in (1, 2):
                for flatten in (True, False):
                    for prefetch in (True, False):
                        variants[f"persistent x{per_sm} flatten={flatten} prefetch={prefetch}"] = (
                            lambda g=per_sm * sms, f=flatten, p=prefetch:
                            persistent_kernel[(g,)](a, w, x, out, bias, M, H, I, bm, bn, 64, 8, f, p, **opts))
        reference_out = None
        for name, call in variants.items():
            rows.append({"block": f"{bm}x{bn}w{warps}s{stages}", "variant": name, "us": _time(call)})
            if name == "pointers":
                reference_out = out.clone()
            elif args.experiment in ("tma", "ws"):  # the TMA tile must write what the pointer tile wrote
                rows[-1]["out_equal"] = bool(torch.equal(out, reference_out))
            print(rows[-1], flush=True)
    with open(args.out, "w") as f:
        json.dump({"provenance": provenance(f"do_bench median (CUDA events, L2 flushed), M={M}, fp16 operands "
                                            f"(fc2_weight hi only), experiment {args.experiment}"),
                   "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
