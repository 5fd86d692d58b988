"""Can stage 4 read gelu_output in fp32, so that stage 1 no longer writes its fp16 copy?

Stage 1 spends half its bytes on that copy (1 GB read, 0.5 GB written at M = 131072). Here stage 4's
two GEMMs (the 2 x 64 output tiles of weight_grad_kernel, without the column sums) run with
gelu_output as stored now (fp16, `fp16 copy`) against two ways of rounding the fp32 input in
registers between its TMA load and the MMA: as the B operand (`fp32 as B`: the tile goes back to
shared memory for the MMA), or as the A operand of the transposed product (`fp32 as A`:
grad_fc2_weight^T = gelu_output^T @ grad_residual, A taken from registers). Timed with
triton.testing.do_bench (CUDA events, L2 flushed, median); every variant's grad_fc2_weight is
compared with the fp16-copy one. An experiment beside the solution, not its code.

    python bench/stage4_anatomy.py --tokens 131072 7184 --out out/stage4_anatomy.json
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

H, I = 512, 2048
FP16_COPY, FP32_AS_B, FP32_AS_A = (tl.constexpr(mode) for mode in range(3))
MODES = {"fp16 copy": FP16_COPY, "fp32 as B": FP32_AS_B, "fp32 as A": FP32_AS_A}


@triton.jit
def weight_grads_kernel(grad_residual, gelu, grad_fc1_output, hidden_states, grad_fc2_weight, grad_fc1_weight, M,
                        H: tl.constexpr, I: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_Q: tl.constexpr,
                        BLOCK_K: tl.constexpr, MODE: tl.constexpr):
    pid = tl.program_id(0)
    tiles: tl.constexpr = (H // BLOCK_P) * (I // BLOCK_Q)
    acc = tl.zeros([BLOCK_P, BLOCK_Q], dtype=tl.float32)
    if pid < tiles:  # grad_fc2_weight = grad_residual^T @ gelu_output, (H, I)
        p0, q0 = (pid // (I // BLOCK_Q)) * BLOCK_P, (pid % (I // BLOCK_Q)) * BLOCK_Q
        ps = p0 + tl.arange(0, BLOCK_P)
        qs = q0 + tl.arange(0, BLOCK_Q)
        if MODE == FP32_AS_A:
            acc_t = tl.zeros([BLOCK_Q, BLOCK_P], dtype=tl.float32)
            for k in range(0, M, BLOCK_K):
                acc_t = tl.dot(tl.trans(gelu.load([k, q0]).to(tl.float16)), grad_residual.load([k, p0]), acc_t)
            tl.store(grad_fc2_weight + ps[None, :] * I + qs[:, None], acc_t)
        else:
            for k in range(0, M, BLOCK_K):
                acc = tl.dot(tl.trans(grad_residual.load([k, p0])), gelu.load([k, q0]).to(tl.float16), acc)
            tl.store(grad_fc2_weight + ps[:, None] * I + qs[None, :], acc)
    else:  # grad_fc1_weight = grad_fc1_output^T @ hidden_states, (I, H)
        tile = pid - tiles
        p0, q0 = (tile // (H // BLOCK_Q)) * BLOCK_P, (tile % (H // BLOCK_Q)) * BLOCK_Q
        for k in range(0, M, BLOCK_K):
            acc = tl.dot(tl.trans(grad_fc1_output.load([k, p0])), hidden_states.load([k, q0]), acc)
        ps = p0 + tl.arange(0, BLOCK_P)
        qs = q0 + tl.arange(0, BLOCK_Q)
        tl.store(grad_fc1_weight + ps[:, None] * H + qs[None, :], acc)


def _time(call) -> float:
    try:
        call()
        torch.cuda.synchronize()
        return triton.testing.do_bench(call, warmup=10, rep=100, return_mode="median") * 1000
    except Exception as e:  # a variant that fails to compile (shared memory): record it and go on
        print(repr(e)[:300], file=sys.stderr)
        return float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[131072, 7184])
    parser.add_argument("--out", default="out/stage4_anatomy.json")
    args = parser.parse_args(argv)
    dev = torch.device("cuda")
    rows = []
    for M in args.tokens:
        torch.manual_seed(0)
        grad_residual = (torch.randn(M, H, device=dev) * 0.1).half()
        gelu32 = torch.randn(M, I, device=dev)
        gelu16 = gelu32.half()
        grad_fc1_output = (torch.randn(M, I, device=dev) * 0.1).half()
        hidden_states = torch.randn(M, H, device=dev).half()
        w2 = torch.empty(H, I, device=dev)
        w1 = torch.empty(I, H, device=dev)
        expected = None
        for bk, warps, stages in ((64, 4, 4), (64, 4, 3), (32, 4, 4), (64, 8, 3)):
            for name, mode in MODES.items():
                g = gelu16 if mode == FP16_COPY else gelu32
                descs = [TensorDescriptor.from_tensor(t, [bk, 128]) for t in (grad_residual, g, grad_fc1_output, hidden_states)]
                call = lambda: weight_grads_kernel[(2 * (H // 128) * (I // 128),)](  # noqa: E731
                    *descs, w2, w1, M, H, I, 128, 128, bk, mode, num_warps=warps, num_stages=stages)
                us = _time(call)
                if expected is None:
                    expected = w2.clone()
                row = {"tokens": M, "block_k": bk, "warps": warps, "stages": stages, "variant": name, "us": us,
                       "max_abs_diff_vs_fp16_copy": float((w2 - expected).abs().max())}
                rows.append(row)
                print(row, flush=True)
    with open(args.out, "w") as f:
        json.dump({"provenance": provenance("do_bench median (CUDA events, L2 flushed); stage 4's GEMM tiles "
                                            "with gelu_output fp16 or fp32 (rounded in registers)"),
                   "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
